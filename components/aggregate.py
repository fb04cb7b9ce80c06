"""KFP wrapper of report_study, the fan-in: the study's answer, in the store and in the
Kubeflow UI (goal detection is folded in: the report writes report/goal_steps.csv)."""

from kfp import dsl
from kfp.dsl import HTML, Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def aggregate(study_spec: dict, store_root: str,
              report: Output[HTML], summary: Output[Markdown], metrics: Output[Metrics]) -> str:
    """Per-trial goal steps, steps to result, regimes, figures and report, read from the
    store, the source of truth. It takes no output of the pack tasks, so it can run after
    some of them failed (the pipeline runs it once the loop is over, whatever its
    outcome); the report then names the trials still missing. Returns the report's location."""
    from batchscale.analysis.pages.report_pages import format_table
    from batchscale.analysis.report import kfp_metrics, report_study
    from batchscale.rounds.planner import planned_trials
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    store = StudyStore(spec.store)
    store.settle_budgets(spec, planned_trials(spec, store))  # budgets now run in full
    analysis, written = report_study(f"{spec.store.rstrip('/')}/{spec.name}")
    with open(report.path, "w") as fh:
        fh.write(written["pages"]["html"])
    with open(summary.path, "w") as fh:
        fh.write(written["pages"]["markdown"])
    for name, value in kfp_metrics(analysis).items():
        metrics.log_metric(name, value)
    print(f"goal steps per trial in {written['goal_steps']}")
    print(format_table(analysis.steps))
    return written["html"]
