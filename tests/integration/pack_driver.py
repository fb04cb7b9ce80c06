"""Train one pack of a study in this process: ``python -m tests.integration.pack_driver
SPEC_JSON BATCH_SIZE WIDTH [SLOW_MARKER]``
(WIDTH: trials vmapped at once). The kill -9 and SIGTERM tests start it, kill it and start it again.

SLOW_MARKER (a path): once that file exists, the next evaluation prints ``evaluating
slowly at step S`` and takes 60 s, as an evaluation of a large validation set or one long
compiled step may: longer than a preemption notice, and not interruptible.
"""

from __future__ import annotations

import json
import os
import sys
import time

from batchscale.search.trials import make_trials
from batchscale.store.layout import StudyStore
from batchscale.training.packs import run_pack
from batchscale.validation import parse_spec


def _slow_evaluations(marker: str) -> None:
    from batchscale.training import pack_loop

    evaluate = pack_loop._Loop._evaluate

    def slow(self, step: int) -> None:
        if os.path.exists(marker):
            os.remove(marker)
            print(f"evaluating slowly at step {step}", flush=True)
            time.sleep(60)
        evaluate(self, step)

    pack_loop._Loop._evaluate = slow


def main(argv: list[str]) -> int:
    with open(argv[0]) as fh:
        spec = parse_spec(json.load(fh))
    if len(argv) > 3:
        _slow_evaluations(argv[3])
    trials = [t for t in make_trials(spec) if t.batch_size == int(argv[1])]
    run_pack(spec, trials, StudyStore(spec.store), log=lambda line: print(line, flush=True),
             width=int(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
