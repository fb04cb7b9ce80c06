"""Data preparation: the paper's splits, written once into the store's dataset cache."""
