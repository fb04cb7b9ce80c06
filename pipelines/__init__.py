"""The batch-size scaling study as a Kubeflow pipeline, and how it is run."""
