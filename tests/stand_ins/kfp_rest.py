"""A STAND-IN for a live Kubeflow Pipelines cluster: no cluster runs here.

A local HTTP server (127.0.0.1, a free port) that answers the parts of the Kubeflow
Pipelines v2beta1 REST API that ``kfp.Client`` (kfp 2.17, kfp-server-api 2.17.3) calls
for ``batchscale upload`` and ``batchscale submit``, so the real client and its real
HTTP requests are exercised end to end:

  GET  /apis/v2beta1/healthz                                  multi_user: false
  GET  /apis/v2beta1/pipelines[?filter=]                      EQUALS on display_name / name
  GET  /apis/v2beta1/pipelines/{id}
  POST /apis/v2beta1/pipelines/upload?name=&display_name=     multipart ``uploadfile``; like
       the real server it also creates the first version, named after the pipeline
  POST /apis/v2beta1/pipelines/upload_version?pipelineid=&name=&display_name=
  GET  /apis/v2beta1/pipelines/{id}/versions[?page_size=&page_token=]
  GET  /apis/v2beta1/pipelines/{id}/versions/{version_id}
  GET  /apis/v2beta1/experiments[?filter=] and POST /apis/v2beta1/experiments
  POST /apis/v2beta1/runs and GET /apis/v2beta1/runs/{id}

State lives in memory (pipelines, versions with their pipeline_spec as the real server
returns it: one YAML document as is, or ``{pipeline_spec, platform_spec}`` when a
Kubernetes platform document follows; numbers turned into floats as a protobuf Struct
does), and every request is recorded (method, path, query, headers, parsed body) in
``requests`` for assertions. Duplicate names answer 409 as the real server does.

What it does NOT check: authentication and authorization (the Authorization header is
only recorded), namespaces and multi-user mode, that the pipeline spec would compile or
validate in the backend, filters beyond EQUALS on a name, sorting, and anything about
running: runs stay PENDING, nothing is scheduled on Kubernetes, nothing reaches
Argo, a bucket or an image registry.

Run alone (the fake ``kubectl`` in the port-forward test does): ``python -m
tests.stand_ins.kfp_rest PORT`` serves on 127.0.0.1:PORT until terminated.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import uuid
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import yaml

API = "/apis/v2beta1"
CREATED_AT = "2025-01-01T00:00:00Z"


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def as_struct(value):
    """What a protobuf Struct makes of JSON: every number becomes a float."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {k: as_struct(v) for k, v in value.items()}
    return [as_struct(v) for v in value]


def spec_struct(text: str):
    """The pipeline_spec field the real server returns for an uploaded YAML file."""
    pipeline, platform = None, None
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and "kubernetes" in (doc.get("platforms") or {}):
            platform = doc
        elif doc is not None:
            pipeline = doc
    if platform is None:
        return as_struct(pipeline)
    return as_struct({"pipeline_spec": pipeline, "platform_spec": platform})


def matches(item: dict, filter_text: str | None) -> bool:
    """kfp.Client's name filters: JSON predicates, EQUALS (1) on display_name or name."""
    if not filter_text:
        return True
    for pred in json.loads(filter_text).get("predicates", []):
        if pred.get("operation") not in (1, "EQUALS") or pred.get("key") not in ("display_name", "name"):
            raise ApiError(400, f"stand-in does not implement filter predicate {pred}")
        want = pred.get("stringValue", pred.get("string_value"))
        if item.get(pred["key"]) != want:
            return False
    return True


def page(items: list, query: dict, field: str) -> dict:
    """One page of ``items``; the page token is the offset of the next page."""
    size = int(query.get("page_size") or 0) or len(items) or 1
    start = int(query.get("page_token") or 0)
    out = {field: items[start:start + size], "total_size": len(items)}
    if start + size < len(items):
        out["next_page_token"] = str(start + size)
    return out


class KfpStandIn:
    """The in-memory API state and the server around it; a context manager."""

    def __init__(self, port: int = 0):
        self.pipelines: dict[str, dict] = {}
        self.versions: dict[str, list[dict]] = {}  # pipeline id -> versions, oldest first
        self.experiments: dict[str, dict] = {}
        self.runs: dict[str, dict] = {}
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def __enter__(self) -> KfpStandIn:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def calls(self, method: str | None = None, path: str | None = None) -> list[dict]:
        """Recorded requests, optionally only those with this method and/or path."""
        return [r for r in self.requests
                if (method is None or r["method"] == method) and (path is None or r["path"] == path)]

    # ---- the API ---------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict, body) -> dict:
        with self._lock:
            route = f"{method} {path[len(API):]}" if path.startswith(API) else f"{method} {path}"
            if route == "GET /healthz":
                return {"multi_user": False, "pipeline_store": "stand-in (memory)"}
            if route == "GET /pipelines":
                found = [p for p in self.pipelines.values() if matches(p, query.get("filter"))]
                return page(found, query, "pipelines")
            if route == "POST /pipelines/upload":
                return self._upload(query, body)
            if route == "POST /pipelines/upload_version":
                return self._upload_version(query, body)
            if route == "GET /experiments":
                found = [e for e in self.experiments.values() if matches(e, query.get("filter"))]
                return page(found, query, "experiments")
            if route == "POST /experiments":
                return self._create_experiment(body)
            if route == "POST /runs":
                return self._create_run(body)
            if m := re.fullmatch(r"GET /runs/([^/]+)", route):
                return self._get(self.runs, m.group(1), "run")
            if m := re.fullmatch(r"GET /pipelines/([^/]+)", route):
                return self._get(self.pipelines, m.group(1), "pipeline")
            if m := re.fullmatch(r"GET /pipelines/([^/]+)/versions", route):
                self._get(self.pipelines, m.group(1), "pipeline")
                return page(self.versions[m.group(1)], query, "pipeline_versions")
            if m := re.fullmatch(r"GET /pipelines/([^/]+)/versions/([^/]+)", route):
                return self._version(m.group(1), m.group(2))
            raise ApiError(404, f"stand-in does not implement {method} {path}")

    def _get(self, table: dict, key: str, what: str) -> dict:
        if key not in table:
            raise ApiError(404, f"{what} {key} not found")
        return table[key]

    def _version(self, pipeline_id: str, version_id: str) -> dict:
        for version in self.versions.get(pipeline_id, []):
            if version["pipeline_version_id"] == version_id:
                return version
        raise ApiError(404, f"pipeline version {version_id} of pipeline {pipeline_id} not found")

    def _add_version(self, pipeline_id: str, name: str, display_name: str, description: str,
                     text: str) -> dict:
        if any(v["name"] == name for v in self.versions[pipeline_id]):
            raise ApiError(409, f"a version named {name!r} already exists in pipeline {pipeline_id}")
        version = {"pipeline_id": pipeline_id, "pipeline_version_id": str(uuid.uuid4()),
                   "name": name, "display_name": display_name, "description": description,
                   "created_at": CREATED_AT, "pipeline_spec": spec_struct(text)}
        self.versions[pipeline_id].append(version)
        return version

    def _upload(self, query: dict, body: dict) -> dict:
        text = _uploaded_text(body)
        name = query.get("name") or query.get("display_name") or body["uploadfile"]["filename"]
        display = query.get("display_name") or name
        if any(p["name"] == name for p in self.pipelines.values()):
            raise ApiError(409, "Failed to create a pipeline and a pipeline version")
        pipeline = {"pipeline_id": str(uuid.uuid4()), "name": name, "display_name": display,
                    "description": query.get("description", ""), "created_at": CREATED_AT}
        self.pipelines[pipeline["pipeline_id"]] = pipeline
        self.versions[pipeline["pipeline_id"]] = []
        # The real server's first version takes the pipeline's name, display name and description.
        self._add_version(pipeline["pipeline_id"], name, display, pipeline["description"], text)
        return pipeline

    def _upload_version(self, query: dict, body: dict) -> dict:
        text = _uploaded_text(body)
        pipeline_id = query.get("pipelineid") or ""
        self._get(self.pipelines, pipeline_id, "pipeline")
        name = query.get("name") or query.get("display_name") or body["uploadfile"]["filename"]
        return self._add_version(pipeline_id, name, query.get("display_name") or name,
                                 query.get("description", ""), text)

    def _create_experiment(self, body: dict) -> dict:
        name = body.get("display_name") or ""
        if not name or any(e["display_name"] == name for e in self.experiments.values()):
            raise ApiError(409 if name else 400, f"experiment name {name!r} is empty or taken")
        experiment = {"experiment_id": str(uuid.uuid4()), "display_name": name,
                      "description": body.get("description") or "", "created_at": CREATED_AT,
                      "storage_state": "AVAILABLE"}
        self.experiments[experiment["experiment_id"]] = experiment
        return experiment

    def _create_run(self, body: dict) -> dict:
        self._get(self.experiments, body.get("experiment_id") or "", "experiment")
        ref = body.get("pipeline_version_reference") or {}
        if ref:
            self._version(ref.get("pipeline_id", ""), ref.get("pipeline_version_id", ""))
        elif not body.get("pipeline_spec"):
            raise ApiError(400, "a run needs a pipeline_version_reference or a pipeline_spec")
        config = body.get("runtime_config") or {}
        run = {**body, "run_id": str(uuid.uuid4()), "state": "PENDING", "created_at": CREATED_AT,
               "runtime_config": {**config, "parameters": as_struct(config.get("parameters") or {})}}
        self.runs[run["run_id"]] = run
        return run


def _uploaded_text(body) -> str:
    if not isinstance(body, dict) or "uploadfile" not in body:
        raise ApiError(400, "Failed to read pipeline from file (no multipart 'uploadfile')")
    return body["uploadfile"]["content"]


def parse_body(content_type: str, raw: bytes):
    """JSON, or multipart form data as {field: {filename, content}}; None when empty."""
    if not raw:
        return None
    if content_type.startswith("multipart/form-data"):
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        return {part.get_param("name", header="content-disposition"):
                {"filename": part.get_filename(), "content": part.get_payload(decode=True).decode()}
                for part in message.iter_parts()}
    return json.loads(raw)


def _handler(stand_in: KfpStandIn):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = parse_body(self.headers.get("Content-Type", ""), raw)
            stand_in.requests.append({"method": method, "path": url.path, "query": query,
                                      "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": body})
            try:
                status, answer = 200, stand_in.handle(method, url.path, query, body)
            except ApiError as err:
                status, answer = err.status, {"code": err.status, "message": str(err)}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's naming)
            self._serve("GET")

        def do_POST(self):  # noqa: N802
            self._serve("POST")

        def log_message(self, *args):  # keep test output quiet
            pass

    return Handler


def isolate_kfp_client(monkeypatch, tmp_path) -> None:
    """Keep kfp.Client off this machine's settings: it reads ~/.config/kfp/context.json (a
    path fixed when kfp is imported) and KF_PIPELINES_* variables at construction."""
    from kfp.client import Client

    monkeypatch.setattr(Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp" / "context.json"))
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in [k for k in os.environ if k.startswith("KF_PIPELINES_")]:
        monkeypatch.delenv(name)


if __name__ == "__main__":
    server = KfpStandIn(int(sys.argv[1]))
    server._server.serve_forever()
