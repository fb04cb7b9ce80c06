"""The CLI refuses every bad spec with exit 2 and one line, leaving the store as it was."""

import json
import os

import pytest
import yaml

from batchscale.cli.main import main
from batchscale.store.layout import StudyStore
from batchscale.validation import default_spec_dict, parse_spec


@pytest.fixture
def store_with_study(tmp_path):
    """A store already holding study 'quickstart' (registered, one finished trial)."""
    root = str(tmp_path / "store")
    spec = parse_spec({**default_spec_dict(), "store": root})
    store = StudyStore(root)
    store.register_study(spec)
    store.fs.write_text("quickstart/mnist_5k/fc_128_128/nesterov_momentum/8/1/metadata.json",
                        '{"status": "COMPLETE", "trial_id": 1}')
    return root


def _tree(root):
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            out[path] = open(path, "rb").read()
    return out


def _spec_file(tmp_path, root, **changes):
    raw = {**default_spec_dict(), "store": root, **changes}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


BAD = [
    (["--dataset", "cifar_100"], "workload.dataset"),
    (["--model", "resnet_1001"], "workload.model"),
    (["--optimizer", "adagrad"], "workload.optimizer"),
    (["--batch-sizes", ","], "batch_sizes"),
    (["--batch-sizes", "8,-16"], "batch_sizes"),
    (["--batch-sizes", "8,100000"], "batch_sizes"),
    (["--goal", "average_precision>0.3"], "goals[0]: metric 'average_precision' is not measured"),
    (["--goal", "classification_error=0.05"], "goals[0]: 'classification_error=0.05' must look like"),
    (["--name", "../../etc"], "name"),
    (["--seed", "99"], "seed: differs from study 'quickstart' in "),  # same name, other spec
]


@pytest.mark.parametrize("flags,field", BAD, ids=[b[1] for b in BAD])
def test_bad_flags_exit_2_with_one_line_and_store_unchanged(flags, field, store_with_study, capsys, tmp_path):
    before = _tree(store_with_study)
    code = main(["run", "--local", "--store", store_with_study, "--work-dir", str(tmp_path / "w"), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith(f"batchscale: error: {field}") and "\n" not in err, err
    assert _tree(store_with_study) == before


@pytest.mark.parametrize("change,field", [
    ({"search_space": {"learning_rate": {"scale": "log", "min": 1.0, "max": 0.01},
                       "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.97}}},
     "search_space.learning_rate"),
    ({"search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 0.01},
                       "momentum": {"scale": "reverse_log", "min": 0.8, "max": 0.97}}},
     "search_space.learning_rate"),
    ({"name": "/abs/path"}, "name"),
])
def test_bad_spec_files_exit_2(change, field, store_with_study, capsys, tmp_path):
    before = _tree(store_with_study)
    code = main(["run", "--local", _spec_file(tmp_path, store_with_study, **change)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"batchscale: error: {field}") and "\n" not in err, err
    assert _tree(store_with_study) == before


def test_validate_prints_the_resolved_spec(capsys):
    assert main(["validate", "--batch-sizes", "16,64", "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert '"batch_sizes": [\n    16,\n    64\n  ]' in out and '"trials_per_batch_size": 2' in out


def test_report_of_a_missing_folder_is_one_line(capsys, tmp_path):
    assert main(["report", str(tmp_path / "justaname")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "justaname is empty or does not exist; give STORE/STUDY" in err


def test_failure_reason_names_the_task_error_not_kfps_summary():
    from batchscale.cli.local_pipeline import failure_reason

    log = ("10:57:03 - INFO - Executing task 'prepare-data'\n    Traceback (most recent call last):\n"
           "    DatasetNotFoundError: Dataset mnist not found: no internet\n"
           "RuntimeError: Pipeline 'batchscale-study' finished with status FAILURE.\n")
    assert failure_reason(log) == "DatasetNotFoundError: Dataset mnist not found: no internet"
    assert failure_reason("nothing useful") == "see the log"


def test_workloads_lists_every_workload_with_its_defaults(capsys):
    import json

    from batchscale.workloads.defaults import WORKLOADS

    assert main(["workloads"]) == 0
    table = capsys.readouterr().out
    for w in WORKLOADS:
        line = next(line for line in table.splitlines() if line.startswith(w.key + " "))
        assert w.optimizer in line and w.schedule in line and f"{w.goal['value']:g}" in line
    assert "val/average_precision > 0.31" in table  # open_images maximises AP
    assert main(["workloads", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["workload"] for r in rows] == [w.key for w in WORKLOADS]
    assert rows[0]["max_steps"] == "5000..800"  # quickstart: budget shrinks with the batch size


def test_workload_flag_starts_from_its_defaults(capsys):
    import json

    assert main(["validate", "--workload", "cifar_10/resnet_8", "--batch-sizes", "64,128"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["name"] == "cifar_10-resnet_8" and spec["schedule"] == "linear"
    assert spec["goals"][0]["value"] == 0.3 and set(spec["max_steps"]) == {"64", "128"}
    assert main(["validate", "toy_resnet8"]) == 0  # a shipped study by name
    assert json.loads(capsys.readouterr().out)["workload"]["model"] == "resnet_8"


def test_gke_settings_writes_the_file_kustomize_reads(tmp_path, capsys):
    from batchscale.pipelines.gke_settings import parse_settings

    out = tmp_path / "settings.env"
    assert main(["gke-settings", "--project", "example-ml-123", "--project-number", "314159",
                 "--location", "europe-west4", "--cluster", "c1", "--bucket", "acme-studies",
                 "--namespace", "team-a", "-o", str(out)]) == 0
    settings = parse_settings(out.read_text())
    assert settings["gsa_email"] == "batchscale@example-ml-123.iam.gserviceaccount.com"
    assert settings["workload_identity_member"] == (
        "serviceAccount:example-ml-123.svc.id.goog[team-a/batchscale-runner]")
    assert settings["pipeline_root"] == "gs://acme-studies/pipeline-root"
    assert settings["kfp_ui_member"] == (  # the UI stays in kubeflow when runs go to team-a
        "principal://iam.googleapis.com/projects/314159/locations/global/workloadIdentityPools/"
        "example-ml-123.svc.id.goog/subject/ns/kubeflow/sa/ml-pipeline-ui")
    capsys.readouterr()
    assert main(["gke-settings", "--project", "Acme", "--project-number", "1", "--location", "x",
                 "--cluster", "c", "--bucket", "b1b", "-o", str(tmp_path / "bad.env")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "project_id" in err[0]
    assert not (tmp_path / "bad.env").exists()
    assert main(["gke-settings", "--project", "acme-ml", "--project-number", "acme-ml", "--location",
                 "us-central1", "--cluster", "c", "--bucket", "b1b", "-o", str(tmp_path / "bad.env")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "project_number: 'acme-ml' is not a GCP project number" in err[0]
    assert not (tmp_path / "bad.env").exists()


def test_run_parses_the_spec_once_in_its_process(monkeypatch, tmp_path):
    """run --local validates the spec once in the CLI's process (flags, then an absolute
    store path without a second parse); the pipeline's processes parse their own copy."""
    import batchscale.cli.study as study_cli
    import batchscale.validation.study_spec as study_spec

    parses, started = [], []
    real = study_spec.parse_workload
    monkeypatch.setattr(study_spec, "parse_workload", lambda *a, **k: parses.append(1) or real(*a, **k))
    monkeypatch.setattr(study_cli, "run_pipeline", lambda spec, *rest: started.append(spec) or 0)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--local", "--store", "rel-store", "--batch-sizes", "16,64",
                 "--work-dir", str(tmp_path / "work")]) == 0
    assert len(parses) == 1
    assert started[0].store == str(tmp_path / "rel-store") and started[0].batch_sizes == (16, 64)


def test_a_sigterm_whose_exception_is_swallowed_still_stops_the_run(monkeypatch):
    """A signal's exception is raised wherever the main thread is, and some library code
    swallows every exception (Cython's memoryview set-up under a bare ``except:``, run by
    numpy.random's first import during a progress poll: a CI run's ``run --local`` then
    ignored SIGTERM for good). The handler also records the signal, and the progress loop
    raises it after its poll."""
    import signal
    import time

    import batchscale.cli.local_pipeline as study_cli

    monkeypatch.setattr(study_cli, "_requested", [])
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGTERM, study_cli._raise_terminated)
    try:
        study_cli.raise_if_terminated()  # nothing asked for yet: no stop
        try:  # what the library does
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs here, at once
        except:  # noqa: E722
            pass
        with pytest.raises(study_cli.Terminated) as stopped:
            study_cli.raise_if_terminated()
        assert stopped.value.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # a second one waits
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_max_steps_replaces_the_spec_files_budgets_before_batch_sizes_use_them(tmp_path, capsys):
    """--max-steps replaces the spec's max_steps map, so a map the flags replace is not
    checked (as before the budget rule moved into validation), and --batch-sizes then
    gives every batch size that one budget."""
    bad = _spec_file(tmp_path, str(tmp_path / "store"), max_steps={8: 0, 16: 100})
    assert main(["validate", bad, "--batch-sizes", "8,32", "--max-steps", "120"]) == 0
    spec = json.loads(capsys.readouterr().out.split("\n\n")[0])
    assert spec["max_steps"] == {"8": 120, "32": 120}
    assert main(["validate", bad, "--batch-sizes", "8,32"]) == 2  # the map is used: refused
    assert "max_steps.8" in capsys.readouterr().err
