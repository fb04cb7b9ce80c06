"""Run the study pipeline with kfp.local's SubprocessRunner (the embedded default).

Invoked by ``batchscale run --local`` as a child process, so that kfp's per-task logs
go to a file while the parent shows concise progress:
``python -m batchscale.pipelines.local_run SPEC_JSON PIPELINE_ROOT``.
"""

from __future__ import annotations

import json
import sys

from batchscale.core.spec import StudySpec
from batchscale.validation import parse_spec


def run_local(spec: StudySpec, pipeline_root: str) -> None:
    """Execute every task of the pipeline on this machine, synchronously."""
    from kfp import local

    from batchscale.pipelines.study import build_pipeline

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=pipeline_root)
    pipeline = build_pipeline(spec, store_root=spec.store)
    pipeline(study_spec=spec.to_dict(), store_root=spec.store)


def main(argv: list[str] | None = None) -> int:
    spec_file, pipeline_root = (argv if argv is not None else sys.argv[1:])[:2]
    with open(spec_file) as fh:
        spec = parse_spec(json.load(fh))
    run_local(spec, pipeline_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
