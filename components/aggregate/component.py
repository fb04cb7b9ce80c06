"""KFP wrapper of build_report: the study's answer, in the store and in the Kubeflow UI."""

from kfp import dsl
from kfp.dsl import HTML, Markdown, Metrics, Output

from components.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def aggregate(study_spec: dict, store_root: str, goal_steps_location: str,
              report: Output[HTML], summary: Output[Markdown], metrics: Output[Metrics]) -> str:
    """Steps to result per batch size, figures and report; returns the report's location."""
    from components.aggregate.report import build_report, format_table
    from components.goal_detection.detect import read_goal_steps
    from components.spec import resolve_spec
    from components.store import StudyStore

    spec = resolve_spec(study_spec, store_root)
    store = StudyStore(spec.store)
    result = build_report(spec, store, read_goal_steps(spec, store))
    with open(report.path, "w") as fh:
        fh.write(result["html"])
    with open(summary.path, "w") as fh:
        fh.write(result["markdown"])
    for row in result["summary"].dropna(subset=["steps_to_result"]).itertuples():
        metrics.log_metric(f"steps_to_result/{row.goal}/b{row.batch_size}", float(row.steps_to_result))
    print(f"goal steps from {goal_steps_location}\n{format_table(result['summary'])}")
    return result["report_url"]
