"""The numbers of a study: the second room of ``batchscale.analysis``.

From a read study (``reading``): steps to result and the goal table, the scaling curve and
its regimes with their intervals, metaparameters, search rounds, step times, time and cost
to result, what the protocol trained, and the answer the report opens with; plus the
typed record of all of it that the figures and pages read (``study_analysis.Analysis``).
Imports only ``reading``; renders nothing.
"""
