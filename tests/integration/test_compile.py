"""The compiled pipeline YAML: the DAG (search rounds in sequence, each a ParallelFor over
packs with its parallelism limit), resource requests of the trainer, retries, timeout and
a fan-in that runs after failed packs, UI-ready parameter defaults, and no TensorFlow at
compile time."""

import json
import os
import subprocess
import sys

import pytest

from batchscale.cli.main import main
from batchscale.pipelines.compiled_yaml import load_documents
from batchscale.pipelines.placement import PRESETS, pack_size_for
from batchscale.pipelines.study import PACK_RETRIES
from batchscale.search.packs import make_packs
from batchscale.validation import default_spec_dict, parse_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compile(tmp_path, *flags):
    out = tmp_path / "pipeline.yaml"
    assert main(["compile", "--output", str(out), *flags]) == 0
    return load_documents(out.read_text())[0]  # then the kubernetes platform spec


def _executor(doc, component_prefix):
    """The component's executor (round 1's, where each round has its own copy)."""
    return doc["deploymentSpec"]["executors"][f"exec-{component_prefix}"]["container"]


def _study_tasks(doc):
    """The root's tasks (the exit handler and aggregate) and the handler's (the study)."""
    root_tasks = doc["root"]["dag"]["tasks"]
    [handler] = [n for n in root_tasks if n.startswith("exit-handler")]
    return root_tasks, handler, doc["components"][f"comp-{handler}"]["dag"]["tasks"]


def _round(doc, tasks, stage):
    """Round ``stage``'s nested pipeline: its task in the study and its DAG's tasks."""
    [name] = [n for n, t in tasks.items() if t["taskInfo"]["name"] == f"round-{stage}"]
    return tasks[name], doc["components"][tasks[name]["componentRef"]["name"]]["dag"]["tasks"]


def test_dag_rounds_parallel_for_and_trainer_resources(tmp_path):
    doc = _compile(tmp_path, "--parallelism", "5", "--pipeline-store", "gs://my-bucket/studies",
                   "--max-rounds", "4")
    root_tasks, handler, tasks = _study_tasks(doc)
    # goal detection is folded into aggregate, after all the others
    assert set(root_tasks) == {handler, "aggregate"}
    assert len(tasks) == 5 and "prepare-data" in tasks
    previous = None
    for stage in range(1, 5):  # rounds one after another, each plan-round then its loop
        task, inner = _round(doc, tasks, stage)
        after = set(task.get("dependentTasks", []))
        assert after == ({"prepare-data"} | ({previous} if previous else set()))
        previous = next(n for n, t in tasks.items() if t is task)
        [plan] = [n for n in inner if n.startswith("plan-round")]
        assert task["inputs"]["parameters"]["stage"]["runtimeValue"]["constant"] == stage
        assert inner[plan]["inputs"]["parameters"]["stage"]["componentInputParameter"] == "stage"
        [loop_name] = [n for n in inner if n.startswith("for-loop")]
        loop = inner[loop_name]
        assert loop["iteratorPolicy"]["parallelismLimit"] == 5
        assert loop["parameterIterator"]["items"]["inputParameter"].endswith("plan-round-Output")
    assert root_tasks["aggregate"]["dependentTasks"] == [handler]
    # aggregate reads the store, not the loop's outputs: it can run after failed packs
    assert set(root_tasks["aggregate"]["inputs"]["parameters"]) == {"study_spec", "store_root"}
    trainer = _executor(doc, "train-pack")
    assert trainer["resources"]["resourceCpuRequest"] == "2"
    assert trainer["resources"]["resourceMemoryRequest"] == "4G"
    assert trainer["resources"]["resourceMemoryLimit"] == "8G"
    assert trainer["image"] == "batchscale-light:dev"  # the cpu preset trains on the light image
    assert _executor(doc, "aggregate")["resources"]["resourceCpuRequest"] == "500m"
    assert "--install" not in json.dumps(trainer)  # install_kfp_package=False: nothing pip-installed
    params = doc["root"]["inputDefinitions"]["parameters"]
    assert params["store_root"]["defaultValue"] == "gs://my-bucket/studies"
    default = params["study_spec"]["defaultValue"]
    assert parse_spec(default) == parse_spec({**default_spec_dict(), "parallelism": 5, "max_rounds": 4})


@pytest.mark.parametrize("preset", ["cpu", "nvidia-l4"])
def test_paper_scale_study_compiles_to_few_small_packs_with_faults_handled(tmp_path, preset):
    """cifar_10/resnet_8 with its defaults (14 batch sizes x 100 trials, 1,400 trials): at
    most ~200 loop iterations and loop items under 16 KB; the pack task inside the loop
    carries a retry policy (one level down, in a nested pipeline) and a pod timeout; the
    fan-in runs once every other step is over, whatever its outcome; no task is cached."""
    out = tmp_path / "paper.yaml"
    assert main(["compile", "--workload", "cifar_10/resnet_8", "--preset", preset,
                 "--output", str(out)]) == 0
    doc, platform = load_documents(out.read_text())
    spec = parse_spec(doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"])
    assert len(spec.batch_sizes) * spec.trials_per_batch_size == 1400
    size = pack_size_for(spec, preset)
    root_tasks, handler, tasks = _study_tasks(doc)
    round_task, inner = _round(doc, tasks, 1)
    assert inner["plan-round"]["inputs"]["parameters"]["pack_size"]["runtimeValue"][
        "constant"] == size
    items = [p.to_dict() for p in make_packs(spec, size)]  # what round 1's plan-round returns
    assert len(items) <= 200
    assert len(json.dumps(items).encode()) < 16 * 1024
    assert sorted((p["batch_size"], t) for p in items for t in p["trial_ids"]) == sorted(
        (b, t) for b in spec.batch_sizes for t in range(1, 101))

    [loop_name] = [n for n in inner if n.startswith("for-loop")]
    [body] = doc["components"][inner[loop_name]["componentRef"]["name"]]["dag"]["tasks"].values()
    nested = doc["components"][body["componentRef"]["name"]]["dag"]["tasks"]
    assert list(nested) == ["train-pack"]
    assert nested["train-pack"]["retryPolicy"]["maxRetryCount"] == PACK_RETRIES >= 1
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert int(k8s["exec-train-pack"]["activeDeadlineSeconds"]) == PRESETS[preset].pack_timeout_seconds
    # the trainer records its preset in every trial's metadata: the price of its device-hours
    assert {"name": "BATCHSCALE_PRESET", "value": preset} in _executor(doc, "train-pack")["env"]
    # the fan-in: dsl.ExitHandler's exit task, after the sub-DAG holding every other step
    aggregate = root_tasks["aggregate"]
    assert aggregate["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert aggregate["dependentTasks"] == [handler]
    for task in [*root_tasks.values(), *tasks.values(), *inner.values(), body, *nested.values()]:
        if "cachingOptions" in task:
            assert not task["cachingOptions"].get("enableCache"), task["taskInfo"]


def test_kfp_artifacts_for_the_ui(tmp_path):
    doc = _compile(tmp_path)
    outputs = doc["components"]["comp-aggregate"]["outputDefinitions"]["artifacts"]
    assert outputs["report"]["artifactType"]["schemaTitle"] == "system.HTML"
    assert outputs["summary"]["artifactType"]["schemaTitle"] == "system.Markdown"
    assert outputs["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"


def test_each_pack_task_shows_its_trials_in_the_ui(tmp_path):
    """KFP names every loop iteration alike (no runtime display names, kubeflow/pipelines
    #14008): a pack task is told apart by its own Metrics and Markdown outputs."""
    doc = _compile(tmp_path)
    outputs = doc["components"]["comp-train-pack"]["outputDefinitions"]
    assert outputs["artifacts"]["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"
    assert outputs["artifacts"]["summary"]["artifactType"]["schemaTitle"] == "system.Markdown"
    assert outputs["parameters"]["Output"]["parameterType"] == "STRING"


def test_compile_does_not_import_tensorflow_keras_or_jax(tmp_path):
    code = ("import sys; from batchscale.cli.main import main; "
            f"main(['compile', '-o', {str(tmp_path / 'p.yaml')!r}]); "
            "print(sorted(m for m in ('tensorflow', 'keras', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_compile_refuses_a_local_pipeline_store(tmp_path, capsys):
    assert main(["compile", "-o", str(tmp_path / "p.yaml"), "--pipeline-store", "/tmp/x"]) == 2
    assert "gs://" in capsys.readouterr().err


def test_the_plan_pipeline_runs_the_probe_on_the_trainer_preset(tmp_path):
    """``batchscale plan --compile``: prepare_data on the light pool, then plan_study on the
    preset's accelerator node (its step times must be the trainers'), which records the
    preset's name for pricing; the plan's Markdown and Metrics reach the UI."""
    from batchscale.core.prices import PRESET_ENV
    from batchscale.pipelines.plan import PLAN_TIMEOUT_SECONDS, plan_pipeline_name

    out = tmp_path / "plan.yaml"
    assert main(["plan", "--workload", "cifar_10/resnet_8", "--compile", str(out),
                 "--preset", "nvidia-l4", "--pipeline-store", "gs://b/studies"]) == 0
    doc, platform = load_documents(out.read_text())
    assert doc["pipelineInfo"]["name"] == plan_pipeline_name("nvidia-l4")
    tasks = doc["root"]["dag"]["tasks"]
    assert set(tasks) == {"prepare-data", "plan-study"}
    assert tasks["plan-study"]["dependentTasks"] == ["prepare-data"]
    assert doc["root"]["inputDefinitions"]["parameters"]["store_root"]["defaultValue"] == "gs://b/studies"
    plan = _executor(doc, "plan-study")
    assert plan["resources"]["accelerator"]["resourceType"] == "nvidia.com/gpu"
    assert {"name": PRESET_ENV, "value": "nvidia-l4"} in plan["env"]
    assert "accelerator" not in _executor(doc, "prepare-data").get("resources", {})
    outputs = doc["components"]["comp-plan-study"]["outputDefinitions"]["artifacts"]
    assert {outputs[k]["artifactType"]["schemaTitle"] for k in outputs} == {
        "system.Markdown", "system.Metrics"}
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert int(k8s["exec-plan-study"]["activeDeadlineSeconds"]) == PLAN_TIMEOUT_SECONDS
    assert k8s["exec-plan-study"]["nodeSelector"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"


def test_integers_stay_integers_in_the_compiled_default_spec(tmp_path):
    """KFP turns a dict default's numbers into floats (protobuf Struct); the compiled YAML
    the Kubeflow UI shows for editing keeps the spec's integers, in the study and the plan
    pipeline alike, and still parses to the same spec."""
    for command in (["compile", "--output"], ["plan", "--compile"]):
        out = tmp_path / f"{command[0]}.yaml"
        assert main([*command, str(out), "--workload", "cifar_10/resnet_8"]) == 0
        text = out.read_text()
        doc = load_documents(text)[0]
        default = doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"]
        ints = [*default["batch_sizes"], default["trials_per_batch_size"], default["seed"],
                default["parallelism"], default["max_rounds"], *default["max_steps"].values(),
                default["evaluation"]["train_examples"]]
        assert all(type(v) is int for v in ints), ints
        assert isinstance(default["evaluation"]["resolution"], float)
        assert parse_spec(default).to_dict() == default
        header = [line for line in text.splitlines() if line.startswith("#    study_spec:")]
        assert header and "'batch_sizes': [2, 4, 8" in header[0] and ".0," not in header[0].split(
            "'batch_sizes'")[1].split("]")[0]


def test_a_pipeline_compiled_with_protocol_plugins_hands_them_to_every_task(tmp_path, protocol_plugin):
    """A spec may name a plugin's protocol only where the plugin is loaded, and on a cluster
    every task parses the spec: each task's pod gets BATCHSCALE_PLUGINS as compiled."""
    doc = _compile(tmp_path, "--protocol", "goal_alone", "--pipeline-store", "gs://b/s")
    assert doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"]["protocol"] \
        == "goal_alone"
    executors = doc["deploymentSpec"]["executors"]
    assert {"exec-prepare-data", "exec-plan-round", "exec-train-pack", "exec-aggregate"} <= set(executors)
    for name, executor in executors.items():
        env = {e["name"]: e["value"] for e in executor["container"].get("env", [])}
        assert env.get("BATCHSCALE_PLUGINS") == protocol_plugin, name


def test_a_pipeline_compiled_without_plugins_names_none(tmp_path, monkeypatch):
    monkeypatch.delenv("BATCHSCALE_PLUGINS", raising=False)
    doc = _compile(tmp_path, "--pipeline-store", "gs://b/s")
    for executor in doc["deploymentSpec"]["executors"].values():
        assert "BATCHSCALE_PLUGINS" not in {e["name"] for e in executor["container"].get("env", [])}


PAPER_BATCH_SIZES = ",".join(str(2**k) for k in range(1, 15))  # 14 batch sizes


@pytest.mark.parametrize("preset", ["cpu", "tpu-v5e-2x2"])
def test_a_paper_size_study_stays_small_on_a_cluster(tmp_path, preset, capsys):
    """14 batch sizes x 100 trials, 3 rounds: one pack per loop iteration made 98 (cpu) and
    140 (tpu-v5e-2x2) iterations in round 1 alone; lanes bound every round at the
    cluster's default parallelism, whatever the study's size (``pipelines.pipeline_size``)."""
    from batchscale.cli.options import CLUSTER_PARALLELISM
    from batchscale.pipelines.pipeline_size import size

    out = tmp_path / "paper.yaml"
    assert main(["compile", "--workload", "mnist/simple_cnn_base", "--batch-sizes", PAPER_BATCH_SIZES,
                 "--trials", "100", "--pipeline-store", "gs://b/s", "--preset", preset,
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = load_documents(out.read_text())[0]
    loops = [t for c in doc["components"].values() for t in c.get("dag", {}).get("tasks", {}).values()
             if "parameterIterator" in t]
    assert [t["iteratorPolicy"]["parallelismLimit"] for t in loops] == [CLUSTER_PARALLELISM] * 3
    counted = size(str(out), CLUSTER_PARALLELISM)
    assert counted.iterations <= 64 and counted.pods <= 256, counted
    assert counted.line() in printed and f"{CLUSTER_PARALLELISM} pack tasks at once" in printed
    assert f"at most {CLUSTER_PARALLELISM} pack tasks at once" in doc["pipelineInfo"]["description"]
    # the spec's parallelism still wins where it says so: --parallelism, or a value set
    assert main(["compile", "--workload", "mnist/simple_cnn_base", "--parallelism", "3",
                 "--output", str(out)]) == 0
    assert "3 pack tasks at once" in capsys.readouterr().out
