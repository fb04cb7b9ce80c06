"""Hardened pods: every task of every compiled pipeline (a study, an experiment, the plan)
asks for a non-root container in its Kubernetes platform spec, which KFP 2.17's driver puts
on the pod; the rest of a hardened pod (seccomp RuntimeDefault, no privilege escalation,
capabilities dropped) is KFP 2.17's compiler's, not the pipeline's (docs/gke.md,
"Hardened pods"). Compiled with the real KFP compiler; no cluster here."""


from batchscale.cli.main import main
from batchscale.pipelines.compiled_yaml import load_documents


def _documents(path):
    pipeline, platform = load_documents(path.read_text())
    return pipeline, platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def _assert_every_task_hardened(path):
    pipeline, k8s = _documents(path)
    executors = set(pipeline["deploymentSpec"]["executors"])
    assert executors and executors == set(k8s), "every executor has a Kubernetes config"
    unhardened = {name: config.get("securityContext") for name, config in k8s.items()
                  if config.get("securityContext") != {"runAsNonRoot": True}}
    assert not unhardened, f"tasks without runAsNonRoot: {unhardened}"


def test_every_task_of_a_study_an_experiment_and_the_plan_runs_as_non_root(tmp_path):
    study, experiment, plan = tmp_path / "study.yaml", tmp_path / "experiment.yaml", tmp_path / "plan.yaml"
    assert main(["compile", "--output", str(study), "--preset", "nvidia-l4",
                 "--pipeline-store", "gs://b/s"]) == 0
    assert main(["compile", "figure4_paper", "--output", str(experiment), "--preset", "tpu-v5e-2x2",
                 "--pipeline-store", "gs://b/s"]) == 0
    assert main(["plan", "--compile", str(plan), "--preset", "cpu", "--pipeline-store", "gs://b/s"]) == 0
    for path in (study, experiment, plan):
        _assert_every_task_hardened(path)
    # the trainer keeps its placement beside it (set_security_context merges, replaces nothing)
    _, k8s = _documents(study)
    assert k8s["exec-train-pack"]["nodeSelector"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"
    assert k8s["exec-train-pack"]["tolerations"]
