"""Reach a Kubeflow Pipelines API: the connection flags of ``batchscale upload/submit``.

Two ways to a host, exactly one per command: ``--host URL`` (an ingress or IAP address,
or http://localhost:8080 from a port-forward you started) or ``--port-forward``, which
runs ``kubectl port-forward -n NAMESPACE svc/ml-pipeline-ui PORT:80`` for the duration of
the command (the UI service proxies the API). Credentials: ``--token``/``--token-file``
(a bearer token, e.g. ``gcloud auth print-access-token``), or ``--iap-client-id`` for a
cluster behind Identity-Aware Proxy (kfp fetches the ID token). Signing in as a user
through IAP also takes a desktop OAuth client (``--iap-other-client-id``) and its secret,
which is read from ``--iap-other-client-secret-file FILE`` or the environment variable
``BATCHSCALE_IAP_CLIENT_SECRET``, never from the command line, where ``ps`` shows it to
every user of the machine: ``--iap-other-client-secret VALUE`` is refused in one line
saying so. Every failure to connect ends as one line naming the host and what to try.
Nothing reads the environment at import time (the secret's variable is read when a
command connects), and kfp is imported only when a command connects.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass

from batchscale.core.errors import InputError

HEALTHZ = "/apis/v2beta1/healthz"
PROBE_SECONDS = 5.0
IAP_SECRET_ENV = "BATCHSCALE_IAP_CLIENT_SECRET"  # the desktop OAuth client's secret
IAP_SECRET_FILE_FLAG = "--iap-other-client-secret-file"
SECRET_ON_COMMAND_LINE = "iap_secret_on_command_line"  # the refused flag's dest
IAP_SECRET_HOW = (f"put it in a file readable only by you and pass {IAP_SECRET_FILE_FLAG} FILE, "
                  f"or set {IAP_SECRET_ENV}")


class KfpConnectionError(InputError):
    """Kubeflow Pipelines could not be reached or refused us; the message is one line."""


@dataclass(frozen=True)
class ConnectOptions:
    host: str | None = None
    port_forward: bool = False
    kfp_namespace: str = "kubeflow"
    kube_context: str | None = None
    port_forward_timeout: float = 30.0
    iap_client_id: str | None = None
    iap_other_client_id: str | None = None
    iap_other_client_secret: str | None = None  # from Python only; the CLI reads a file or env
    iap_other_client_secret_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    ui_host: str | None = None
    user_namespace: str | None = None

    @classmethod
    def from_args(cls, args) -> ConnectOptions:
        """The options from parsed flags (any object with these attributes). A secret
        given as a flag's value (``--iap-other-client-secret``) is refused: ``ps`` shows it."""
        if getattr(args, SECRET_ON_COMMAND_LINE, None) is not None:
            raise KfpConnectionError("--iap-other-client-secret: a secret on the command line is "
                                     "shown by `ps` to every user of this machine; "
                                     f"{IAP_SECRET_HOW}")
        return cls(**{name: getattr(args, name) for name in cls.__dataclass_fields__
                      if name != "iap_other_client_secret" and getattr(args, name, None) is not None})



def add_connection_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Kubeflow Pipelines connection (one of --host, --port-forward)")
    group.add_argument("--host", help="KFP API/UI address, e.g. https://kfp.example.com or "
                                      "http://localhost:8080")
    group.add_argument("--port-forward", action="store_true",
                       help="run `kubectl port-forward svc/ml-pipeline-ui` while the command runs")
    group.add_argument("--kfp-namespace", default="kubeflow",
                       help="namespace of the KFP services, for --port-forward (default: kubeflow)")
    group.add_argument("--kube-context", help="kubectl context for --port-forward")
    group.add_argument("--port-forward-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="how long to wait for the forwarded port (default: 30)")
    group.add_argument("--iap-client-id", metavar="ID", help="OAuth client id of the IAP in front of KFP")
    group.add_argument("--iap-other-client-id", metavar="ID",
                       help="desktop OAuth client id, to sign in as a user through IAP")
    group.add_argument(IAP_SECRET_FILE_FLAG, metavar="FILE",
                       help="file holding the secret of --iap-other-client-id (or set "
                            f"{IAP_SECRET_ENV}; never the secret itself on the command line)")
    group.add_argument("--iap-other-client-secret", dest=SECRET_ON_COMMAND_LINE,
                       help=argparse.SUPPRESS)  # refused by from_args, with how to pass it
    group.add_argument("--token", help="bearer token sent to KFP (prefer --token-file)")
    group.add_argument("--token-file", metavar="FILE", help="file holding the bearer token")
    group.add_argument("--ui-host", metavar="URL", help="base URL of the KFP UI for printed links "
                                                        "(default: the host)")
    group.add_argument("--user-namespace", metavar="NS",
                       help="your profile namespace on a multi-user Kubeflow")


def read_token(options: ConnectOptions) -> str | None:
    """The bearer token from --token or --token-file (stripped), or None."""
    if options.token and options.token_file:
        raise KfpConnectionError("--token and --token-file: give one of them")
    if options.token_file:
        return _read_secret_file("--token-file", options.token_file)
    return options.token or None


def _read_secret_file(flag: str, path: str) -> str:
    """A file's text, stripped; one line naming the flag when it cannot be read or is empty."""
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError as err:
        raise KfpConnectionError(f"{flag}: cannot read {path} ({err.strerror})") from None
    if not text:
        raise KfpConnectionError(f"{flag}: {path} is empty")
    return text


def read_iap_secret(options: ConnectOptions, environ=None) -> str | None:
    """The desktop OAuth client's secret, for ``--iap-other-client-id`` only: from
    ``--iap-other-client-secret-file``, else the value a Python caller put in the options,
    else ``$BATCHSCALE_IAP_CLIENT_SECRET``; None without ``--iap-other-client-id``."""
    if not options.iap_other_client_id:
        return None
    if options.iap_other_client_secret_file:
        return _read_secret_file(IAP_SECRET_FILE_FLAG, options.iap_other_client_secret_file)
    if options.iap_other_client_secret:
        return options.iap_other_client_secret
    return (os.environ if environ is None else environ).get(IAP_SECRET_ENV, "").strip() or None


def check_options(options: ConnectOptions) -> None:
    """Exactly one way to a host, and one way to authenticate."""
    if bool(options.host) == bool(options.port_forward):
        raise KfpConnectionError("give exactly one of --host URL or --port-forward to reach "
                                 "Kubeflow Pipelines")
    if (options.token or options.token_file) and options.iap_client_id:
        raise KfpConnectionError("--token/--token-file and --iap-client-id: give one way to authenticate")
    if options.iap_other_client_secret_file and not options.iap_other_client_id:
        raise KfpConnectionError(f"{IAP_SECRET_FILE_FLAG} is the secret of --iap-other-client-id; "
                                 "give both")
    if options.iap_other_client_id and not read_iap_secret(options):
        raise KfpConnectionError(f"--iap-other-client-id needs its client's secret: {IAP_SECRET_HOW}")
    if options.iap_other_client_id and not options.iap_client_id:
        raise KfpConnectionError("--iap-other-client-id needs --iap-client-id")


def client_kwargs(options: ConnectOptions, host: str) -> dict:
    """The keyword arguments of kfp.Client for these options."""
    kwargs = {"host": host, "ui_host": options.ui_host or host}
    token = read_token(options)
    if token:
        kwargs["existing_token"] = token
    if options.iap_client_id:
        kwargs["client_id"] = options.iap_client_id
    if options.iap_other_client_id:
        kwargs["other_client_id"] = options.iap_other_client_id
        kwargs["other_client_secret"] = read_iap_secret(options)
    if options.user_namespace:
        kwargs["namespace"] = options.user_namespace
    return kwargs


# ---- port-forward -------------------------------------------------------------------
def port_forward_command(namespace: str, local_port: int, kube_context: str | None = None) -> list[str]:
    context = ["--context", kube_context] if kube_context else []
    return ["kubectl", *context, "port-forward", "-n", namespace, "svc/ml-pipeline-ui", f"{local_port}:80"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float, stderr_path: str) -> None:
    """Return once 127.0.0.1:port accepts connections; raise if the process ends or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise KfpConnectionError(f"kubectl port-forward exited with status {process.returncode}: "
                                     f"{_last_line(stderr_path) or 'no message'}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        if time.monotonic() > deadline:
            said = _last_line(stderr_path)
            raise KfpConnectionError(f"kubectl port-forward did not open port {port} within {timeout:g}s"
                                     + (f": {said}" if said else "; check the namespace and kube context"))
        time.sleep(0.1)


def _last_line(path: str) -> str:
    with open(path, errors="replace") as fh:
        lines = [line.strip() for line in fh if line.strip()]
    return lines[-1] if lines else ""


@contextlib.contextmanager
def port_forward(namespace: str, kube_context: str | None = None, timeout: float = 30.0):
    """Run kubectl port-forward to the KFP UI service; yields the local URL, then stops it."""
    port = free_port()
    command = port_forward_command(namespace, port, kube_context)
    with tempfile.NamedTemporaryFile("w+", suffix=".kubectl.log") as stderr:
        try:
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr,
                                       stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise KfpConnectionError("--port-forward needs kubectl on PATH; or pass --host") from None
        try:
            wait_for_port(port, process, timeout, stderr.name)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# ---- checks and errors ----------------------------------------------------------------
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect (e.g. to a sign-in page) is reported, not followed


def probe(host: str, token: str | None, iap: bool, timeout: float = PROBE_SECONDS) -> None:
    """One quick GET of the health endpoint, so a wrong host or missing credentials fail in
    seconds with one line (kfp.Client itself retries its health check for ~25 s)."""
    request = urllib.request.Request(host.rstrip("/") + HEALTHZ)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=timeout) as answer:
            json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as err:
        if iap and err.code in (302, 401, 403):
            return  # kfp fetches the IAP token itself; the API calls will tell
        hint = ("pass --token/--token-file or --iap-client-id" if err.code in (301, 302, 303, 307, 401, 403)
                else "is this the Kubeflow Pipelines address?")
        raise KfpConnectionError(f"Kubeflow Pipelines at {host} answered HTTP {err.code} on {HEALTHZ}; "
                                 f"{hint}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise KfpConnectionError(f"cannot reach Kubeflow Pipelines at {host} ({reason}); check --host, "
                                 "or use --port-forward (kubectl port-forward -n kubeflow "
                                 "svc/ml-pipeline-ui 8080:80)") from None
    except ValueError:
        raise KfpConnectionError(f"{host} did not answer {HEALTHZ} as Kubeflow Pipelines does; "
                                 "is this the Kubeflow Pipelines address?") from None


def describe_api_error(err: Exception, host: str) -> str:
    """One line for an error kfp-server-api raised while talking to ``host``."""
    status = getattr(err, "status", None)
    if status is None:
        return f"lost the connection to Kubeflow Pipelines at {host} ({type(err).__name__}: {err})"
    message = getattr(err, "reason", "") or ""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        body = json.loads(err.body)
        message = body.get("message") or body.get("error_message") or message
    line = " ".join(str(message).split())[:300]
    hint = "; pass --token/--token-file or --iap-client-id" if status in (401, 403) else ""
    return f"Kubeflow Pipelines at {host} refused the request: HTTP {status}: {line}{hint}"


@contextlib.contextmanager
def _api_errors(host: str):
    import kfp_server_api
    import urllib3

    try:
        yield
    except kfp_server_api.ApiException as err:
        raise KfpConnectionError(describe_api_error(err, host)) from None
    except urllib3.exceptions.HTTPError as err:
        raise KfpConnectionError(describe_api_error(err, host)) from None


@contextlib.contextmanager
def connect(options):
    """Yield ``(kfp.Client, ui_base_url)``; API errors inside become one-line errors.

    ``options``: a ConnectOptions or parsed flags. A port-forward runs until the block ends.
    """
    if not isinstance(options, ConnectOptions):
        options = ConnectOptions.from_args(options)
    check_options(options)
    token = read_token(options)
    with contextlib.ExitStack() as stack:
        if options.port_forward:
            host = stack.enter_context(port_forward(options.kfp_namespace, options.kube_context,
                                                    options.port_forward_timeout))
        else:
            host = options.host.rstrip("/")
        probe(host, token, iap=bool(options.iap_client_id))
        kwargs = client_kwargs(options, host)
        with _api_errors(host):
            import kfp

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # "only works with KFP v2.0.0-beta.2+"
                try:
                    client = kfp.Client(**kwargs)
                except TimeoutError:
                    raise KfpConnectionError(f"Kubeflow Pipelines at {host} did not answer its health "
                                             "check; check the host and credentials") from None
            yield client, (options.ui_host or host).rstrip("/")

