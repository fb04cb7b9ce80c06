"""KFP wrapper of report_experiment, the experiment's fan-in: each study's own report,
then the comparison and its findings, in the store and in the Kubeflow UI."""

from kfp import dsl
from kfp.dsl import HTML, Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def compare_experiment(experiment_spec: dict, store_root: str, report: Output[HTML],
                       summary: Output[Markdown], metrics: Output[Metrics]) -> str:
    """Read from the store, the source of truth, once every pack is over (whatever its
    outcome, like a study's ``aggregate``): settle each study's budgets and write its
    report, then the comparison. Returns the comparison page's location."""
    from batchscale.analysis.experiment import report_experiment
    from batchscale.analysis.report import report_study
    from batchscale.rounds.planner import planned_trials
    from batchscale.store.layout import StudyStore
    from batchscale.validation.experiment_spec import parse_experiment

    experiment = parse_experiment(experiment_spec, store_root)
    for spec in experiment.specs:
        StudyStore(spec.store).settle_budgets(spec, planned_trials(spec, StudyStore(spec.store)))
        report_study(f"{spec.store.rstrip('/')}/{spec.name}", robustness_k=experiment.robustness_k)
    comparison, written = report_experiment(experiment)
    with open(report.path, "w") as fh:
        fh.write(written["pages"]["html"])
    with open(summary.path, "w") as fh:
        fh.write(written["pages"]["markdown"])
    for name, value in written["metrics"].items():
        metrics.log_metric(name, value)
    return written["html"]
