"""KFP wrapper of plan_study: ``batchscale plan`` as one pipeline task on the trainer's
preset, before any sweep (the plan pipeline, ``batchscale.pipelines.plan``)."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def plan_study(study_spec: dict, store_root: str, summary: Output[Markdown],
               metrics: Output[Metrics]) -> str:
    """Probe the gradient noise scale, the branched critical batch size and the step
    times, propose batch sizes and estimate the study; writes <study>/plan/plan.json and
    shows the plan in the Kubeflow UI. Returns the proposed batch sizes, comma-separated."""
    from batchscale.planning.plan import plan_study as make_plan
    from batchscale.store.layout import StudyStore
    from batchscale.validation import resolve_spec

    spec = resolve_spec(study_spec, store_root)
    plan = make_plan(spec, StudyStore(spec.store))
    with open(summary.path, "w") as fh:
        fh.write("\n".join(["```", *plan.lines(), "```", ""]))
    for name, value in plan.metrics().items():
        metrics.log_metric(name, value)
    return ",".join(map(str, plan.grid))
