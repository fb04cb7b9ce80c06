"""The batchscale command line (see batchscale.cli.main)."""
from batchscale.cli.main import main

__all__ = ["main"]
