"""Train one pack of a study in this process: ``python -m tests.integration.pack_driver
SPEC_JSON BATCH_SIZE WIDTH``
(WIDTH: trials vmapped at once). The kill -9 and SIGTERM tests start it, kill it and start it again."""

from __future__ import annotations

import json
import sys

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec


def main(argv: list[str]) -> int:
    with open(argv[0]) as fh:
        spec = parse_spec(json.load(fh))
    trials = [t for t in make_trials(spec) if t.batch_size == int(argv[1])]
    run_pack(spec, trials, StudyStore(spec.store), log=lambda line: print(line, flush=True),
             width=int(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
