"""The batchscale command line: the root (main.py) registers one module per command group.

  main.py      the top parser, and the one error/Ctrl-C/closed-pipe handling of every command
  options.py   what several commands share: SPEC + override flags -> StudySpec, --preset,
               --images, --pipeline-store
  study.py     run, validate, compile
  cluster.py   upload, submit
  analysis.py  report, compare
  catalog.py   workloads, presets
  settings.py  gke-settings

Command modules import options.py and lower layers, never main.py (as in kfp's own CLI).
The console script is ``batchscale = "batchscale.cli:main"``.
"""
from batchscale.cli.main import main

__all__ = ["main"]
