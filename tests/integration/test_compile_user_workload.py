"""A study of the user's own model (``workload.model: "module:function"``) compiled for a
cluster: every task that builds the model (the pack task, the plan's probe) runs in the
user image the build holds, the light steps in the light image; the run's spec carries
the model reference; the UI is told which model and data (the pipeline's description, and
prepare_data's Markdown card, run here through kfp.local); and what no pod could reach
(a model named by its file, local data, a build without the right user image) is refused
in one line, exit 2, before anything is written or sent.

Nothing here imports the user's model: compiling never does, and the card is written by
the light data step."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml
from kfp import local

from batchscale.cli.main import main
from batchscale.components.prepare_data import prepare_data
from batchscale.core.errors import SpecError
from batchscale.core.images import LIGHT, TRAINER_GPU, USER
from batchscale.core.spec import DataFiles
from batchscale.pipelines.compiled_yaml import load_documents
from batchscale.pipelines.study import compile_pipeline
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict

MODEL = "my_models.cnn:build"
REF = {name: f"us-docker.pkg.dev/p/batchscale/{name}:abc@sha256:{'1' * 64}"
       for name in (LIGHT, TRAINER_GPU, USER)}
LIGHT_TASKS = ("exec-prepare-data", "exec-plan-round", "exec-aggregate")


def _spec_file(tmp_path, model: str = MODEL) -> str:
    raw = tiny_spec_dict("gs://my-bucket/studies")
    raw["workload"] = {**raw["workload"], "model": model}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _images_file(tmp_path, *names: str) -> str:
    path = tmp_path / "images.json"
    path.write_text(json.dumps({"builds": [{"imageName": n, "tag": REF[n]} for n in names]}))
    return str(path)


def _executors(path) -> dict:
    doc = load_documents(open(path))[0]
    return doc, {name: e["container"] for name, e in doc["deploymentSpec"]["executors"].items()}


def test_the_model_building_tasks_run_in_the_user_image(tmp_path):
    out = tmp_path / "pipeline.yaml"
    assert main(["compile", _spec_file(tmp_path), "-o", str(out), "--preset", "nvidia-l4",
                 "--images", _images_file(tmp_path, LIGHT, TRAINER_GPU, USER)]) == 0
    doc, executors = _executors(out)
    assert executors["exec-train-pack"]["image"] == REF[USER]
    for name in LIGHT_TASKS:  # the light steps never build the model
        assert executors[name]["image"] == REF[LIGHT], name
    assert REF[TRAINER_GPU] not in out.read_text()  # the user image is trainer-gpu plus the code
    # the pod learns which function to import from the run's spec, a parameter
    default = doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"]
    assert default["workload"]["model"] == MODEL and parse_spec(default).workload.model == MODEL
    assert f"model {MODEL} on data digits" in doc["pipelineInfo"]["description"]
    card = doc["components"]["comp-prepare-data"]["outputDefinitions"]["artifacts"]["workload"]
    assert card["artifactType"]["schemaTitle"] == "system.Markdown"

    plan = tmp_path / "plan.yaml"
    assert main(["plan", _spec_file(tmp_path), "--compile", str(plan), "--preset", "nvidia-l4",
                 "--images", _images_file(tmp_path, LIGHT, TRAINER_GPU, USER)]) == 0
    _, executors = _executors(plan)
    assert executors["exec-plan-study"]["image"] == REF[USER]  # the plan's probes build it too
    assert executors["exec-prepare-data"]["image"] == REF[LIGHT]


def test_without_a_build_the_placeholder_is_the_user_images(tmp_path):
    out = tmp_path / "p.yaml"
    assert main(["compile", _spec_file(tmp_path), "-o", str(out)]) == 0
    _, executors = _executors(out)
    assert executors["exec-train-pack"]["image"] == f"{USER}:dev"
    assert executors["exec-prepare-data"]["image"] == f"{LIGHT}:dev"


def test_a_registry_model_keeps_the_presets_own_image(tmp_path):
    out = tmp_path / "p.yaml"
    assert main(["compile", _spec_file(tmp_path, "fc_32"), "-o", str(out), "--preset", "nvidia-l4",
                 "--images", _images_file(tmp_path, LIGHT, TRAINER_GPU, USER)]) == 0
    _, executors = _executors(out)
    assert executors["exec-train-pack"]["image"] == REF[TRAINER_GPU]


@pytest.mark.parametrize("case", ["file-model", "no-user-image", "user-image-on-light"])
def test_what_no_pod_could_use_is_refused_in_one_line(tmp_path, capsys, case):
    model, names, expected = {
        "file-model": ("models/cnn.py:build", (LIGHT, TRAINER_GPU, USER),
                       "workload.model: 'models/cnn.py:build' names a file on this machine"),
        "no-user-image": (MODEL, (LIGHT, TRAINER_GPU), "the build has no batchscale-user"),
        "user-image-on-light": (MODEL, (LIGHT, USER),  # built by -p user, compiled for a GPU
                                "batchscale-user was built on batchscale-light, but this preset "
                                "trains on batchscale-trainer-gpu"),
    }[case]
    out = tmp_path / "p.yaml"
    for command in (["compile", "-o", str(out)], ["plan", "--compile", str(out)]):
        assert main([*command, _spec_file(tmp_path, model), "--preset", "nvidia-l4",
                     "--images", _images_file(tmp_path, *names)]) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert expected in line, line
        assert ("'models.cnn:build'" in line) if case == "file-model" else ("-p user-gpu" in line)
        assert not out.exists()


def test_upload_refuses_before_connecting(tmp_path, capsys):
    """Nothing listens on port 9: a refusal that mentions no connection was made first."""
    assert main(["upload", _spec_file(tmp_path, "cnn.py:build"), "--preset", "cpu",
                 "--host", "http://127.0.0.1:9"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "workload.model: 'cnn.py:build' names a file" in line and "'cnn:build'" in line


def test_data_files_must_be_in_the_bucket(tmp_path):
    """The user's data (``workload.dataset: {path, format}``) on a cluster: a gs:// path
    compiles into the run's spec; a local path is refused."""
    spec = parse_spec(tiny_spec_dict("gs://my-bucket/studies"))

    def with_data(path: str):
        files = DataFiles(path, "npz", seed=spec.seed)
        workload = dataclasses.replace(spec.workload, model=MODEL, data=files, dataset=files.name,
                                       task="classification")
        return dataclasses.replace(spec, workload=workload)

    with pytest.raises(SpecError, match=r"^workload\.dataset\.path: 'data/train.npz' is on this "
                                        r"machine.*gcloud storage cp data/train.npz gs://BUCKET"):
        compile_pipeline(with_data("data/train.npz"), str(tmp_path / "local.yaml"))
    assert not (tmp_path / "local.yaml").exists()
    path = compile_pipeline(with_data("gs://my-bucket/data/train.npz"), str(tmp_path / "gs.yaml"))
    doc, executors = _executors(path)
    default = doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"]
    assert default["workload"]["dataset"]["path"] == "gs://my-bucket/data/train.npz"
    assert "on data gs://my-bucket/data/train.npz" in doc["pipelineInfo"]["description"]
    assert executors["exec-train-pack"]["image"] == f"{USER}:dev"


def test_prepare_data_shows_the_runs_model_and_data_in_the_ui(tmp_path):
    """kfp.local runs the data step as a real task: its ``workload`` Markdown artifact and
    metadata name the run's model and data, and where the splits went."""
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "kfp"))
    raw = tiny_spec_dict(str(tmp_path / "store"))
    raw["workload"] = {**raw["workload"], "model": MODEL}
    task = prepare_data(study_spec=raw, store_root="")
    assert task.outputs["Output"].endswith("datasets/digits")
    card = task.outputs["workload"]
    page = open(card.path).read()
    assert page.startswith("### Study tiny: workload")
    assert f"| model | `{MODEL}` (your function, from the trainer image) |" in page
    assert "| data | `digits` (batchscale's registry) |" in page
    assert "datasets/digits`" in page and "| examples | train " in page
    assert card.metadata["model"] == MODEL and card.metadata["dataset"] == "digits"
