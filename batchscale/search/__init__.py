"""Quasi-random search: scrambled Halton points and the trial list of a study."""
