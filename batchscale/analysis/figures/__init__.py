"""The figures: the third room of ``batchscale.analysis``.

SVG figures drawn from the statistics (the paper's Figures 1-22 and the time and cost
figures), on one plotting base (``plot_base``). Imports ``reading`` and ``statistics``.
"""
