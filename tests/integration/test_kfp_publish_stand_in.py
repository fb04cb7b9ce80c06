"""`batchscale upload` / `submit` with the real kfp.Client against the KFP stand-in.

The server is tests/stand_ins/kfp_rest.py, a stand-in for a live Kubeflow Pipelines
cluster (none runs here): these tests check the requests kfp.Client sends and our
idempotency logic, not what a real cluster then does with them. What is refused before
any connection is in tests/unit/test_kfp_publish.py.
"""

import hashlib

import pytest
import yaml

from batchscale.cli.main import main as cli
from batchscale.core.spec import StudySpec
from batchscale.pipelines.compiled_yaml import load_documents
from batchscale.pipelines.kfp_connect import ConnectOptions, connect, free_port
from batchscale.pipelines.kfp_publish import submit, upload
from batchscale.pipelines.study import compile_pipeline
from batchscale.validation import default_spec_dict, parse_spec
from tests.stand_ins.kfp_rest import API, KfpStandIn, isolate_kfp_client

STORE = "gs://batchscale-test/studies"
PRESET = "nvidia-l4"
UPLOAD, UPLOAD_VERSION, RUNS = f"{API}/pipelines/upload", f"{API}/pipelines/upload_version", f"{API}/runs"


def _spec(**changes) -> StudySpec:
    return parse_spec({**default_spec_dict(), "store": STORE, **changes})


def _compiled(tmp_path, spec, store_root="", images=None) -> str:
    path = tmp_path / "expected.yaml"
    compile_pipeline(spec, str(path), store_root=store_root, preset=PRESET, images=images)
    return path.read_text()


def _uploads(server) -> list:
    return server.calls("POST", UPLOAD) + server.calls("POST", UPLOAD_VERSION)


@pytest.fixture
def server(monkeypatch, tmp_path):
    isolate_kfp_client(monkeypatch, tmp_path)
    with KfpStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def client(server):
    with connect(ConnectOptions(host=server.url)) as (kfp_client, _ui):
        yield kfp_client


# ---- upload -------------------------------------------------------------------------
def test_upload_creates_the_preset_pipeline_from_the_compiled_yaml(server, client, tmp_path):
    spec = _spec()
    out = upload(client, spec, PRESET)
    assert out["pipeline_name"] == "batchscale-study-nvidia-l4"
    assert out["created"] and out["pipeline_created"]
    [request] = _uploads(server)
    assert request["path"] == UPLOAD and request["query"]["name"] == "batchscale-study-nvidia-l4"
    content = request["body"]["uploadfile"]["content"]
    assert content == _compiled(tmp_path, spec)
    pipeline_doc, platform_doc = load_documents(content)
    default = pipeline_doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"]
    assert parse_spec(default) == spec
    assert "nvidia-l4" in yaml.safe_dump(platform_doc)  # the preset's node selector
    # KFP's own first version (named after the pipeline) is the one we use.
    [version] = server.versions[out["pipeline_id"]]
    assert out["version_id"] == version["pipeline_version_id"]
    assert out["version_name"] == "batchscale-study-nvidia-l4"


def test_second_identical_upload_creates_nothing(server, client):
    first = upload(client, _spec(), PRESET)
    count = len(_uploads(server))
    second = upload(client, _spec(), PRESET)
    assert (second["pipeline_id"], second["version_id"]) == (first["pipeline_id"], first["version_id"])
    assert not second["created"]
    assert len(_uploads(server)) == count == 1
    assert len(server.versions[first["pipeline_id"]]) == 1


def test_changed_spec_adds_a_version_named_by_its_hash(server, client, tmp_path):
    first = upload(client, _spec(), PRESET)
    changed = _spec(trials_per_batch_size=3)
    out = upload(client, changed, PRESET)
    assert out["pipeline_id"] == first["pipeline_id"]
    assert out["created"] and not out["pipeline_created"]
    [request] = server.calls("POST", UPLOAD_VERSION)
    content = request["body"]["uploadfile"]["content"]
    assert content == _compiled(tmp_path, changed)
    name = f"quickstart-{hashlib.sha256(content.encode()).hexdigest()[:12]}"
    assert out["version_name"] == name and request["query"]["name"] == name
    assert request["query"]["pipelineid"] == first["pipeline_id"]
    # Both variants are now there: uploading either again sends nothing.
    count = len(_uploads(server))
    assert upload(client, changed, PRESET)["version_id"] == out["version_id"]
    assert upload(client, _spec(), PRESET)["version_id"] == first["version_id"]
    assert len(_uploads(server)) == count
    assert len(server.versions[first["pipeline_id"]]) == 2


def test_upload_names_the_built_images(server, client, tmp_path):
    images = {"batchscale-light": "europe-docker.pkg.dev/p/r/batchscale-light@sha256:" + "1" * 64,
              "batchscale-trainer-gpu": "europe-docker.pkg.dev/p/r/batchscale-trainer-gpu@sha256:" + "2" * 64}
    upload(client, _spec(), PRESET, images=images, store_root=STORE)
    content = server.calls("POST", UPLOAD)[0]["body"]["uploadfile"]["content"]
    assert content == _compiled(tmp_path, _spec(), store_root=STORE, images=images)
    assert images["batchscale-trainer-gpu"] in content and ":dev" not in content


# ---- submit -------------------------------------------------------------------------
def test_submit_sends_the_run_in_the_study_experiment(server, client):
    spec = _spec()
    out = submit(client, spec, PRESET, ui_base=server.url)
    [request] = server.calls("POST", RUNS)
    body = request["body"]
    assert body["runtime_config"]["pipeline_root"] == f"{STORE}/pipeline-root"
    params = body["runtime_config"]["parameters"]
    assert parse_spec(params["study_spec"]) == spec
    assert params["store_root"] == STORE
    # What the server keeps went through a protobuf Struct (ints become floats): still the spec.
    kept = server.runs[out["run_id"]]["runtime_config"]["parameters"]["study_spec"]
    assert isinstance(kept["seed"], float) and parse_spec(kept) == spec
    [experiment] = server.experiments.values()
    assert experiment["display_name"] == "quickstart" and body["experiment_id"] == experiment["experiment_id"]
    assert body["pipeline_version_reference"] == {"pipeline_id": out["pipeline_id"],
                                                  "pipeline_version_id": out["version_id"]}
    assert body["service_account"] == "batchscale-runner"
    assert body["display_name"].startswith("quickstart-")
    assert out["url"] == f"{server.url}/#/runs/details/{out['run_id']}"

    again = submit(client, spec, PRESET, run_name="again", ui_base=server.url)
    assert again["experiment_id"] == out["experiment_id"] and not again["experiment_created"]
    assert len(server.calls("POST", f"{API}/experiments")) == 1
    assert len(_uploads(server)) == 1 and len(server.runs) == 2


def test_cli_submit_prints_the_run_url(server, capsys):
    code = cli(["submit", "--store", STORE, "--preset", PRESET, "--host", server.url, "--token", "t0ken",
                "--experiment", "scaling", "--pipeline-root", "gs://batchscale-test/root",
                "--service-account", "runner", "--run-name", "first"])
    out = capsys.readouterr().out
    assert code == 0, out
    [run] = server.runs.values()
    assert f"{server.url}/#/runs/details/{run['run_id']}" in out
    assert run["display_name"] == "first" and run["service_account"] == "runner"
    assert run["runtime_config"]["pipeline_root"] == "gs://batchscale-test/root"
    assert [e["display_name"] for e in server.experiments.values()] == ["scaling"]
    assert {r["headers"].get("authorization") for r in server.requests} == {"Bearer t0ken"}


def test_cli_upload_says_whether_anything_was_created(server, capsys):
    argv = ["upload", "--store", STORE, "--preset", PRESET, "--host", server.url]
    assert cli(argv) == 0
    assert "created pipeline and version" in capsys.readouterr().out
    assert cli(argv) == 0
    assert "nothing created" in capsys.readouterr().out
    assert len(_uploads(server)) == 1


def test_submit_refuses_a_local_store_before_any_request(server, capsys, tmp_path):
    code = cli(["submit", "--store", str(tmp_path / "store"), "--host", server.url])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("batchscale: error: store: a cluster run needs a gs://bucket/prefix store")
    assert server.requests == []


def test_unreachable_host_is_one_line(capsys, monkeypatch, tmp_path):
    isolate_kfp_client(monkeypatch, tmp_path)
    host = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code = cli(["upload", "--store", STORE, "--host", host])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith(f"batchscale: error: cannot reach Kubeflow Pipelines at {host}")
    assert "--port-forward" in err


def test_cli_submit_of_an_experiment_is_one_run_of_its_own_pipeline(server, capsys):
    """An experiment is one Kubeflow run: pipeline batchscale-experiment-<preset>, its
    parameter the experiment spec (every study re-derived from it), in its experiment."""
    from batchscale.validation.experiment_spec import parse_experiment
    from batchscale.validation.spec_files import load_spec_dict

    code = cli(["submit", "figure4_paper", "--store", STORE, "--preset", PRESET, "--host", server.url])
    out = capsys.readouterr().out
    assert code == 0, out
    [run] = server.runs.values()
    assert "pipeline batchscale-experiment-nvidia-l4" in out
    sent = run["runtime_config"]["parameters"]
    expected = parse_experiment(load_spec_dict("figure4_paper"), STORE)
    assert parse_experiment(sent["experiment_spec"]).specs == expected.specs
    assert sent["store_root"] == STORE
    assert [e["display_name"] for e in server.experiments.values()] == ["figure4_paper"]
