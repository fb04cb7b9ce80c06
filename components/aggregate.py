"""KFP wrapper of report_study: the study's answer, in the store and in the Kubeflow UI."""

from kfp import dsl
from kfp.dsl import HTML, Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def aggregate(study_spec: dict, store_root: str, goal_steps_location: str,
              report: Output[HTML], summary: Output[Markdown], metrics: Output[Metrics]) -> str:
    """Steps to result, regimes, figures and report; returns the report's location."""
    from batchscale.analysis.report import kfp_metrics, report_study
    from batchscale.analysis.report_pages import format_table
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    result, written = report_study(f"{spec.store.rstrip('/')}/{spec.name}")
    with open(report.path, "w") as fh:
        fh.write(written["pages"]["html"])
    with open(summary.path, "w") as fh:
        fh.write(written["pages"]["markdown"])
    for name, value in kfp_metrics(result).items():
        metrics.log_metric(name, value)
    print(f"goals detected in {goal_steps_location}\n{format_table(result['steps'])}")
    return written["html"]
