"""``batchscale plan --submit``: the plan measured here and written to the study's gs://
store (the GCS emulator), then the study submitted to Kubeflow Pipelines as ``submit``
does (tests/stand_ins/kfp_rest.py, a stand-in of KFP's REST API); and what it refuses
before any probe runs."""

from __future__ import annotations

import pytest
import yaml

from batchscale.cli.main import main
from batchscale.cli.options import CLUSTER_PARALLELISM
from batchscale.store.filesystem import open_root
from batchscale.store.profiles import read_plan
from batchscale.validation import parse_spec
from tests.conftest import tiny_spec_dict
from tests.stand_ins.kfp_rest import KfpStandIn, isolate_kfp_client


@pytest.mark.slow  # a real plan: probes, timing, a pack task's costs in a fresh process (12-26 s)
def test_plan_then_submit_the_study(gcs_root, tmp_path, capsys, monkeypatch):
    isolate_kfp_client(monkeypatch, tmp_path)
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(yaml.safe_dump(tiny_spec_dict(gcs_root, batch_sizes=[16], max_steps=100)))
    with KfpStandIn() as server:
        code = main(["plan", str(spec_file), "--probe-seconds", "60", "--branch-seconds", "60",
                     "--submit", "--host", server.url, "--run-name", "planned"])
        out, err = capsys.readouterr()
        assert code == 0, err
        plan = read_plan(open_root(gcs_root), "tiny")
        assert plan["noise_scale"]["b_small"] == 16 and "proposed batch sizes" in out
        [run] = server.runs.values()  # then the run, as `submit` starts it
    assert run["display_name"] == "planned" and run["service_account"] == "batchscale-runner"
    params = run["runtime_config"]["parameters"]  # the spec as submit sends it: a cluster's parallelism
    assert parse_spec(params["study_spec"]) == parse_spec(tiny_spec_dict(
        gcs_root, batch_sizes=[16], max_steps=100, parallelism=CLUSTER_PARALLELISM))
    assert params["store_root"] == gcs_root
    assert out.rstrip().splitlines()[-1] == f"run planned ({run['run_id']}): " \
                                            f"{server.url}/#/runs/details/{run['run_id']}"


def test_plan_submit_refuses_before_any_probe(tmp_path, capsys, monkeypatch):
    isolate_kfp_client(monkeypatch, tmp_path)
    store = tmp_path / "store"
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(yaml.safe_dump(tiny_spec_dict(str(store))))
    with KfpStandIn() as server:
        cases = {
            ("--submit", "--host", server.url): "store: a cluster run needs a gs://bucket/prefix store",
            ("--submit",): "give exactly one of --host URL or --port-forward",
            ("--submit", "--compile", str(tmp_path / "p.yaml"), "--host", server.url):
                "--compile and --submit: give one",
            ("--host", server.url): "--host/--port-forward: only with --submit",
            ("--iap-other-client-secret", "hunter2"): "--iap-other-client-secret: a secret on the "
                                                      "command line is shown by `ps`",
        }
        for flags, message in cases.items():
            assert main(["plan", str(spec_file), *flags]) == 2
            err = capsys.readouterr().err.strip()
            assert err.startswith(f"batchscale: error: {message}") and "\n" not in err, err
        assert server.requests == []
    assert not store.exists()  # no probe ran
