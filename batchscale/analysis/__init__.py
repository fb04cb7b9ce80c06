"""Analysis of a study, in rooms that follow its flow; a room imports only rooms before it
(tests/unit/test_layers.py keeps it so):

- ``reading``: the one study reader, its files, completeness, what early stopping left unknown;
- ``statistics``: steps to result, regimes, metaparameters, time and cost, the answer;
- ``figures``: the SVG figures;
- ``pages``: the report's sections and pages, summary.json, the comparison's pages;
- the public API at the top: ``report`` (analyse and write a study's report), ``compare``
  (several studies) and ``results`` (the results API of docs/results-api.md).
"""
