"""Aggregation: steps to result per batch size, plots and the study report."""
