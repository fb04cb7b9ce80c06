"""What an experiment prints: the comparison (findings, each study's fit), each study's
report and the comparison page, after ``run --local`` (``cli.experiment``) or for
``batchscale report`` of an experiment's folder (``cli.analysis``), rebuilt from the store.
"""

from __future__ import annotations

from batchscale.core.experiment import ExperimentSpec
from batchscale.core.spec import SpecError


def print_experiment(experiment: ExperimentSpec, elapsed: float | None = None,
                     width: int | None = None) -> int:
    """The comparison the pipeline's last step wrote (rebuilt from the store: the same
    numbers), each study's report, the wall time."""
    from batchscale.analysis.experiment import format_experiment, report_experiment

    comparison, written = report_experiment(experiment)
    print(format_experiment(comparison, width))
    for location in experiment.locations():
        print(f"study report: {location}/report/report.html")
    if elapsed is not None:
        print(f"wall time {elapsed:.0f}s")
    print(f"comparison: {written['html']}")
    return 0


def report_experiment_folder(location: str, width: int | None = None) -> int:
    """``batchscale report <store>/<experiment>``: each study's report, then the comparison,
    rebuilt from the store (the experiment's record names what it is)."""
    from batchscale.analysis.report import report_study
    from batchscale.store.experiment_record import read_experiment_record
    from batchscale.validation.experiment_spec import parse_experiment

    raw, why = read_experiment_record(location)
    if raw is None:
        raise SpecError(f"report: {location}/experiment.json {why}")
    root, _, name = location.rstrip("/").rpartition("/")
    experiment = parse_experiment({**raw, "experiment": name}, root or ".")  # a moved folder too
    for spec in experiment.specs:
        report_study(f"{spec.store.rstrip('/')}/{spec.name}", robustness_k=experiment.robustness_k)
    return print_experiment(experiment, None, width)
