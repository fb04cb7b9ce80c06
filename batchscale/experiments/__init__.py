"""Experiment specs shipped with the package: the paper's findings (Figures 2, 3, 4, 6, 7), each at
local scale (this machine, minutes) and at paper scale (a cluster). ``batchscale run --local
figure4_local`` runs one; docs/experiments.md lists them."""
