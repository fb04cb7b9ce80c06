"""batchscale: how far does data parallelism take your training?

Batch-size scaling studies (Shallue et al. 2019) as a Kubeflow pipeline. One import
namespace in layers, each importing only the layers below it (tests/unit/test_layers.py):

- ``core``: spec types, the names every layer shares, goals, errors (imports nothing of
  the project);
- ``store`` (local folder or gs:// storage, the study layout) and ``search`` (quasi-random
  trials);
- ``workloads``: data sets, models and their defaults (TensorFlow/Keras imported lazily);
- ``validation``: the one door from a raw spec to a ``StudySpec``;
- ``training`` (one trial) and ``analysis`` (the study reader, steps to result, regimes,
  report, the results API);
- ``components`` (the KFP components, from components/), ``pipelines`` (the pipeline, its
  placement and how it is run, from pipelines/) and ``cli``.
"""
