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


def report_experiment_folder(location: str, width: int | None = None, args=None) -> int:
    """``batchscale report <store>/<experiment>``: each study's report, then the comparison,
    rebuilt from the store (the experiment's record names what it is). ``args``: report's
    flags, refused where they would analyse one study differently."""
    if args is not None:
        refuse_study_flags(args)
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


# report's flags that analyse one study differently: an experiment's folder is reported as
# its experiment says (its goals, its robustness_k), so they are refused there, not ignored.
_STUDY_ONLY_FLAGS = {"goal": None, "trials": None, "statuses": "COMPLETE", "step_budget": None,
                     "example_budget": None, "resamples": 1000, "seed": 0, "price": None,
                     "robustness_k": 3, "out": None}


def refuse_study_flags(args) -> None:
    """One line naming the first study-only flag given with an experiment's folder."""
    given = [k for k, default in _STUDY_ONLY_FLAGS.items() if getattr(args, k, default) != default]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise SpecError(f"{flag}: {args.study} is an experiment's folder, reported as its experiment "
                        "says; allowed there: --wide; give one study's folder "
                        f"({args.study.rstrip('/')}/STUDY) to report it with {flag}")


def is_experiment_location(location: str) -> bool:
    """Whether ``report``'s location is an experiment's folder (``experiment.json``)."""
    from batchscale.store.experiment_record import is_experiment_folder

    try:
        return is_experiment_folder(location)
    except (OSError, ValueError):
        return False  # the study reader says what is wrong with the location
