"""``python -m batchscale.cli``: the same as the ``batchscale`` console script."""

import sys

from batchscale.cli.main import main

sys.exit(main())
