"""The pages: the fourth room of ``batchscale.analysis``.

Everything a person or a machine reads: report sections defined once and rendered to
HTML, Markdown and the console (``sections``), report.html and summary.md, summary.json
and the Kubeflow metrics, the comparison's pages. Imports every room before it.
"""
