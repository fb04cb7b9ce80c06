"""The compiled experiment pipeline: one run for every study (prepare once, each round one
ParallelFor over every study's packs, the comparison as the exit task), its parameter a
plain experiment spec with integers intact, and fewer tasks than the studies compiled
one by one."""

import yaml

from batchscale.cli.main import main
from batchscale.pipelines.compiled_yaml import load_documents
from batchscale.validation.experiment_spec import parse_experiment
from batchscale.validation.spec_files import load_spec_dict


def _tasks(doc):
    root = doc["root"]["dag"]["tasks"]
    [handler] = [n for n in root if n.startswith("exit-handler")]
    return root, doc["components"][f"comp-{handler}"]["dag"]["tasks"]


def test_figure4_paper_compiles_to_one_pipeline_with_one_pool_per_round(tmp_path):
    out = tmp_path / "experiment.yaml"
    assert main(["compile", "figure4_paper", "--output", str(out), "--preset", "nvidia-l4",
                 "--pipeline-store", "gs://my-bucket/x"]) == 0
    doc = load_documents(out.read_text())[0]
    root, inner = _tasks(doc)
    assert "compare-experiment" in root  # the fan-in outside the handler: runs after failures
    assert root["compare-experiment"]["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    experiment = parse_experiment(load_spec_dict("figure4_paper"))
    rounds = [t for t in inner.values() if t["taskInfo"]["name"].startswith("round-")]
    assert len(rounds) == experiment.max_rounds == 3
    assert sum(t["taskInfo"]["name"] == "prepare-data" for t in inner.values()) == 1
    # each round: plan-experiment-round, then one loop over every study's packs
    body = doc["components"][rounds[0]["componentRef"]["name"]]["dag"]["tasks"]
    [loop] = [t for n, t in body.items() if n.startswith("for-loop")]
    assert loop["iteratorPolicy"]["parallelismLimit"] == experiment.parallelism == 16
    plan = next(t for n, t in body.items() if n.startswith("plan-experiment-round"))
    sizes = plan["inputs"]["parameters"]["pack_sizes"]["runtimeValue"]["constant"]
    assert set(sizes) == {"sgd", "momentum", "nesterov_momentum"}
    default = doc["root"]["inputDefinitions"]["parameters"]["experiment_spec"]["defaultValue"]
    assert default == experiment.to_dict()  # integers intact, the spec as written
    assert parse_experiment(default).specs == experiment.specs
    text = out.read_text()
    assert "gs://my-bucket/x" in text and "batchscale-experiment-nvidia-l4" in text


def test_a_study_may_not_take_an_experiments_folder(tmp_path, capsys):
    folder = tmp_path / "store" / "fig"
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text("{}")
    code = main(["run", "--local", "--name", "fig", "--store", str(tmp_path / "store"),
                 "--trials", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "is an experiment's folder (it holds experiment.json)" in err
    assert not (folder / "study_spec.json").exists()


def test_a_bad_or_changed_experiment_is_refused_before_anything_is_written(tmp_path, capsys):
    """run --local of an experiment: a bad one, and one whose study in the store was run
    with another spec, exit 2 with one line; the store stays byte for byte as it was."""
    import json

    from tests.integration.test_cli_bad_input import _snapshot

    store = tmp_path / "store"
    folder = store / "fig" / "sgd"
    folder.mkdir(parents=True)
    stored = parse_experiment({"experiment": "fig", "store": str(store), "base": "quickstart",
                               "axis": {"optimizer": ["sgd", "momentum"]}}).study("sgd").to_dict()
    stored["seed"] = 7  # the study in the store was run with another seed
    (folder / "study_spec.json").write_text(json.dumps(stored))
    before = _snapshot(store)
    for axis, message in (({"optimizer": ["sgd", "adagrad"]}, "axis: optimizer 'adagrad'"),
                          ({"optimizer": ["sgd", "momentum"]}, "seed")):
        spec = tmp_path / "exp.yaml"
        spec.write_text(yaml.safe_dump({"experiment": "fig", "store": str(store), "base": "quickstart",
                                        "axis": axis}))
        assert main(["run", "--local", str(spec), "--work-dir", str(tmp_path / "work")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
        assert _snapshot(store) == before


def test_report_of_an_experiment_folder_refuses_a_study_only_flag(tmp_path, capsys):
    folder = tmp_path / "store" / "fig"
    folder.mkdir(parents=True)
    (folder / "experiment.json").write_text("{}")
    assert main(["report", str(folder), "--robustness-k", "5"]) == 2
    err = capsys.readouterr().err
    assert "--robustness-k: " in err and "is an experiment's folder" in err
    assert sorted(p.name for p in folder.iterdir()) == ["experiment.json"]


def test_an_experiment_on_a_multi_host_preset_is_refused_in_one_line(tmp_path, capsys):
    """Its pipeline has one pool of one-pod lanes: a multi-host preset (or a Kueue queue,
    which only multi-host TrainJobs name) is refused, and no file is written."""
    out = tmp_path / "experiment.yaml"
    assert main(["compile", "figure4_local", "--preset", "tpu-v5e-4x4", "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "an experiment runs on one-host presets" in err[0], err
    assert not out.exists()
