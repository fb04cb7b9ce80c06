"""The compiled pipeline YAML: the DAG, ParallelFor with its parallelism limit, resource
requests of the trainer, UI-ready parameter defaults, and no TensorFlow at compile time."""

import json
import os
import subprocess
import sys

import yaml

from batchscale.cli.main import main
from batchscale.validation import default_spec_dict, parse_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compile(tmp_path, *flags):
    out = tmp_path / "pipeline.yaml"
    assert main(["compile", "--output", str(out), *flags]) == 0
    return yaml.safe_load(out.read_text())


def _executor(doc, component_prefix):
    executors = doc["deploymentSpec"]["executors"]
    [name] = [n for n in executors if n.startswith(f"exec-{component_prefix}")]
    return executors[name]["container"]


def test_dag_parallel_for_and_trainer_resources(tmp_path):
    doc = _compile(tmp_path, "--parallelism", "5", "--pipeline-store", "gs://my-bucket/studies")
    root_tasks = doc["root"]["dag"]["tasks"]
    [loop_name] = [n for n in root_tasks if n.startswith("for-loop")]
    # goal detection is folded into aggregate: four steps, aggregate after the whole loop
    assert set(root_tasks) == {"prepare-data", "make-trials", loop_name, "aggregate"}
    loop = root_tasks[loop_name]
    assert loop["iteratorPolicy"]["parallelismLimit"] == 5
    assert loop["parameterIterator"]["items"]["inputParameter"].endswith("make-trials-Output")
    assert root_tasks["aggregate"]["dependentTasks"] == [loop_name]
    statuses = root_tasks["aggregate"]["inputs"]["parameters"]["statuses"]["taskOutputParameter"]
    assert statuses["producerTask"] == loop_name  # dsl.Collected of every trial's status
    trainer = _executor(doc, "train-trial")
    assert trainer["resources"]["resourceCpuRequest"] == "2"
    assert trainer["resources"]["resourceMemoryRequest"] == "4G"
    assert trainer["resources"]["resourceMemoryLimit"] == "8G"
    assert trainer["image"] == "batchscale-light:dev"  # the cpu preset trains on the light image
    assert _executor(doc, "aggregate")["resources"]["resourceCpuRequest"] == "500m"
    assert "--install" not in json.dumps(trainer)  # install_kfp_package=False: nothing pip-installed
    params = doc["root"]["inputDefinitions"]["parameters"]
    assert params["store_root"]["defaultValue"] == "gs://my-bucket/studies"
    default = params["study_spec"]["defaultValue"]
    assert parse_spec(default) == parse_spec({**default_spec_dict(), "parallelism": 5})


def test_kfp_artifacts_for_the_ui(tmp_path):
    doc = _compile(tmp_path)
    outputs = doc["components"]["comp-aggregate"]["outputDefinitions"]["artifacts"]
    assert outputs["report"]["artifactType"]["schemaTitle"] == "system.HTML"
    assert outputs["summary"]["artifactType"]["schemaTitle"] == "system.Markdown"
    assert outputs["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"


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
