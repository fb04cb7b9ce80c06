"""Quasi-random metaparameter search (make_trials step)."""
