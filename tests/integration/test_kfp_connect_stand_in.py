"""Connection flags against a server: tokens sent, HTTP errors, and --port-forward.

The KFP server is tests/stand_ins/kfp_rest.py and ``kubectl`` is a fake script put
first on PATH: both are stand-ins (no cluster runs here). The fake records its
arguments and serves the KFP stand-in on the local port it was asked to forward.
The checks made before any connection are in tests/unit/test_kfp_connect.py.
"""

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from batchscale.pipelines.kfp_connect import ConnectOptions, KfpConnectionError, connect
from tests.stand_ins.kfp_rest import KfpStandIn, isolate_kfp_client
from tests.system_tools import stand_in_program

REPO = Path(__file__).resolve().parents[2]
FAKE_KUBECTL = f'''#!{sys.executable}
"""A STAND-IN for kubectl (no cluster here): records its arguments, then serves the KFP
stand-in on the forwarded local port (mode serve), fails as kubectl does (mode fail), or
never opens the port (mode hang)."""
import json, os, sys, time
sys.path.insert(0, {str(REPO)!r})
args = sys.argv[1:]
with open(os.environ["FAKE_KUBECTL_LOG"], "w") as fh:
    json.dump({{"args": args, "pid": os.getpid()}}, fh)
mode = os.environ.get("FAKE_KUBECTL_MODE", "serve")
if mode == "fail":
    print('error: services "ml-pipeline-ui" not found', file=sys.stderr)
    sys.exit(1)
if mode == "hang":
    time.sleep(60)
    sys.exit(0)
from tests.stand_ins.kfp_rest import KfpStandIn
KfpStandIn(int(args[-1].split(":")[0]))._server.serve_forever()
'''


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate_kfp_client(monkeypatch, tmp_path)


@pytest.fixture
def server():
    with KfpStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def fake_kubectl(tmp_path, monkeypatch):
    """Put the fake kubectl first on PATH; returns a reader of what it recorded."""
    return stand_in_program(tmp_path, monkeypatch, "kubectl", FAKE_KUBECTL, "FAKE_KUBECTL_LOG")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False



def test_token_file_is_sent_as_a_bearer_token(server, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    with connect(ConnectOptions(host=server.url, token_file=str(token))) as (client, ui):
        client.list_pipelines()
    assert ui == server.url
    assert server.requests and {r["headers"]["authorization"] for r in server.requests} == {
        "Bearer s3cret-token"}



def test_a_host_that_wants_credentials_says_so():
    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    host = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with pytest.raises(KfpConnectionError) as err:
            with connect(ConnectOptions(host=host)):
                pass
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert str(err.value) == (f"Kubeflow Pipelines at {host} answered HTTP 401 on /apis/v2beta1/healthz; "
                              "pass --token/--token-file or --iap-client-id")



def test_port_forward_runs_kubectl_and_stops_it(fake_kubectl):
    options = ConnectOptions(port_forward=True, kfp_namespace="kfp-test", port_forward_timeout=20)
    with connect(options) as (client, ui):
        assert not client.list_pipelines().pipelines  # the stand-in behind the forwarded port
        port = int(ui.rsplit(":", 1)[1])
        recorded = fake_kubectl()
        assert not _gone(recorded["pid"])
    assert ui == f"http://127.0.0.1:{port}"
    assert recorded["args"] == ["port-forward", "-n", "kfp-test", "svc/ml-pipeline-ui", f"{port}:80"]
    assert _gone(recorded["pid"])


def test_port_forward_reports_kubectl_failing(fake_kubectl, monkeypatch):
    monkeypatch.setenv("FAKE_KUBECTL_MODE", "fail")
    with pytest.raises(KfpConnectionError) as err:
        with connect(ConnectOptions(port_forward=True, port_forward_timeout=20)):
            pass
    assert str(err.value) == ('kubectl port-forward exited with status 1: '
                              'error: services "ml-pipeline-ui" not found')


def test_port_forward_times_out_and_stops_kubectl(fake_kubectl, monkeypatch):
    monkeypatch.setenv("FAKE_KUBECTL_MODE", "hang")
    with pytest.raises(KfpConnectionError, match=r"did not open port \d+ within 0.5s"):
        with connect(ConnectOptions(port_forward=True, port_forward_timeout=0.5)):
            pass
    assert _gone(fake_kubectl()["pid"])


def test_api_errors_inside_the_block_become_one_line(server):
    with pytest.raises(KfpConnectionError) as err:
        with connect(ConnectOptions(host=server.url)) as (client, _ui):
            client.get_run("no-such-run")
    assert str(err.value) == (f"Kubeflow Pipelines at {server.url} refused the request: HTTP 404: "
                              "run no-such-run not found")


def test_cli_refuses_an_iap_secret_on_the_command_line_before_any_request(server, capsys, tmp_path):
    """``upload``/``submit`` with ``--iap-other-client-secret VALUE``: one line saying how to
    pass it (a file or the environment), before the spec is read, and nothing sent."""
    from batchscale.cli.main import main

    for command in ("upload", "submit"):
        code = main([command, "--store", "gs://my-bucket/s", "--host", server.url, "--iap-client-id", "1",
                     "--iap-other-client-id", "2", "--iap-other-client-secret", "hunter2"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err, err
        assert err.startswith("batchscale: error: --iap-other-client-secret: a secret on the command "
                              "line is shown by `ps`")
        assert "--iap-other-client-secret-file FILE" in err and "hunter2" not in err
    assert server.requests == []
