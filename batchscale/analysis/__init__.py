"""Analysis of a study: the one study reader, steps to result, regimes, metaparameters,
figures, the report, comparisons and the results API."""
