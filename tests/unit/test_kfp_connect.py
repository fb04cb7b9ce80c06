"""Connection flags: one way to a host, tokens, IAP arguments, the port-forward command.

What needs no connection: the checks ``connect`` makes before its first request. Talking
to the KFP REST stand-in (tests/stand_ins/kfp_rest.py) and running a fake ``kubectl``
for --port-forward are in tests/integration/test_kfp_connect_stand_in.py.
"""

import argparse

import pytest

from batchscale.pipelines.kfp_connect import (
    IAP_SECRET_ENV,
    ConnectOptions,
    KfpConnectionError,
    add_connection_args,
    client_kwargs,
    connect,
    port_forward_command,
)
from tests.stand_ins.kfp_rest import isolate_kfp_client


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate_kfp_client(monkeypatch, tmp_path)


def test_exactly_one_way_to_a_host():
    for options in (ConnectOptions(), ConnectOptions(host="http://localhost:8080", port_forward=True)):
        with pytest.raises(KfpConnectionError, match="exactly one of --host URL or --port-forward"):
            with connect(options):
                pass


def test_flags_become_options():
    parser = argparse.ArgumentParser()
    add_connection_args(parser)
    args = parser.parse_args(["--port-forward", "--kfp-namespace", "kfp", "--token-file", "t.txt",
                              "--ui-host", "https://ui.example.com"])
    options = ConnectOptions.from_args(args)
    assert options.port_forward and options.kfp_namespace == "kfp" and options.token_file == "t.txt"
    assert options.ui_host == "https://ui.example.com" and options.host is None



def test_unreadable_token_file_and_two_tokens_are_refused(tmp_path):
    with pytest.raises(KfpConnectionError, match="--token-file: cannot read"):
        with connect(ConnectOptions(host="http://127.0.0.1:9", token_file=str(tmp_path / "none"))):
            pass
    with pytest.raises(KfpConnectionError, match="give one of them"):
        with connect(ConnectOptions(host="http://127.0.0.1:9", token="a", token_file="b")):
            pass


def test_iap_flags_become_kfp_client_arguments():
    options = ConnectOptions(host="https://kfp.example.com", iap_client_id="123.apps.googleusercontent.com",
                             iap_other_client_id="456.apps", iap_other_client_secret="shh",
                             ui_host="https://ui.example.com")
    assert client_kwargs(options, options.host) == {
        "host": "https://kfp.example.com", "ui_host": "https://ui.example.com",
        "client_id": "123.apps.googleusercontent.com", "other_client_id": "456.apps",
        "other_client_secret": "shh"}



def test_the_iap_client_secret_comes_from_a_file_or_the_environment(tmp_path, monkeypatch):
    """Never from a flag's value: ``ps`` shows a command line to every user."""
    parser = argparse.ArgumentParser()
    add_connection_args(parser)
    secret = tmp_path / "iap-secret"
    secret.write_text("from-the-file\n")
    monkeypatch.setenv(IAP_SECRET_ENV, "from-the-environment")
    flags = ["--host", "https://kfp.example.com", "--iap-client-id", "1", "--iap-other-client-id", "2"]
    options = ConnectOptions.from_args(parser.parse_args([*flags, "--iap-other-client-secret-file",
                                                          str(secret)]))
    assert client_kwargs(options, options.host)["other_client_secret"] == "from-the-file"
    options = ConnectOptions.from_args(parser.parse_args(flags))
    assert client_kwargs(options, options.host)["other_client_secret"] == "from-the-environment"
    with pytest.raises(KfpConnectionError) as refused:
        ConnectOptions.from_args(parser.parse_args([*flags, "--iap-other-client-secret", "shh"]))
    message = str(refused.value)
    assert message.startswith("--iap-other-client-secret: a secret on the command line is shown by `ps`")
    assert "--iap-other-client-secret-file FILE" in message and IAP_SECRET_ENV in message
    assert "shh" not in message and "\n" not in message
    assert "--iap-other-client-secret " not in parser.format_help()  # only the file flag is offered


def test_an_iap_client_without_its_secret_or_a_secret_without_its_client_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv(IAP_SECRET_ENV, raising=False)
    with pytest.raises(KfpConnectionError, match="--iap-other-client-id needs its client's secret: put it "
                                                 "in a file"):
        with connect(ConnectOptions(host="https://kfp.example.com", iap_client_id="1",
                                    iap_other_client_id="2")):
            pass
    with pytest.raises(KfpConnectionError, match="is the secret of --iap-other-client-id; give both"):
        with connect(ConnectOptions(host="https://kfp.example.com", iap_client_id="1",
                                    iap_other_client_secret_file=str(tmp_path / "s"))):
            pass
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(KfpConnectionError, match=f"--iap-other-client-secret-file: {empty} is empty"):
        with connect(ConnectOptions(host="https://kfp.example.com", iap_client_id="1",
                                    iap_other_client_id="2", iap_other_client_secret_file=str(empty))):
            pass



def test_port_forward_command():
    assert port_forward_command("kubeflow", 8080) == [
        "kubectl", "port-forward", "-n", "kubeflow", "svc/ml-pipeline-ui", "8080:80"]
    assert port_forward_command("kfp", 9000, "gke_p_z_c")[:3] == ["kubectl", "--context", "gke_p_z_c"]
