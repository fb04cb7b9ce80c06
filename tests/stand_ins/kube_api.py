"""A STAND-IN for a Kubernetes API server: no cluster, no controller, no pod runs here.

A local HTTP server (127.0.0.1, a free port) that answers the few calls the official
``kubernetes`` client (30.1) makes for a multi-host pack (``batchscale.kube.trainjob_launch``),
so the real client and its real HTTP requests are exercised:

  GET    /apis/                                                 API discovery: the groups
         this stand-in is told to serve (Trainer, JobSet, both or neither)
  POST   /apis/{group}/{version}/namespaces/{ns}/{plural}       create (409 when it exists)
  GET    /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}
  DELETE /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}
  GET    /api/v1/namespaces/{ns}/pods?labelSelector=k=v,...      equality selectors only
  GET    /api/v1/namespaces/{ns}/pods/{name}
  GET    /api/v1/namespaces/{ns}/pods/{name}/log                 the whole log, then EOF

Objects live in memory, every request is recorded in ``requests`` (method, path, query,
parsed body), and the test plays the controllers: ``set_state(name, "running" |
"succeeded" | "failed" | "suspended")`` writes the status condition Trainer or JobSet would
write and, for a running job, makes its pods (``<name>-node-0-<i>``, labelled as JobSet
labels them) with the log lines it is given. A delete removes the object at once (no
foreground deletion, no garbage collector). ``add_pod`` puts the task's own pod there.

What it does NOT do: authentication or RBAC (the token is only recorded), validation of
any object against its CRD or admission webhooks, scheduling, watches, field selectors,
resource versions, and anything Trainer's or JobSet's controllers would reconcile.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
CONDITIONS = {  # state -> condition type, per kind
    "TrainJob": {"succeeded": "Complete", "failed": "Failed", "suspended": "Suspended"},
    "JobSet": {"succeeded": "Completed", "failed": "Failed", "suspended": "Suspended"},
}
CUSTOM = re.compile(r"^/apis/([^/]+)/([^/]+)/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?$")
PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(/log)?$")


REASONS = {404: "NotFound", 409: "AlreadyExists", 500: "InternalError"}


def _status(code: int, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": REASONS.get(code, "BadRequest"), "code": code}


class KubeApiStandIn:
    """Start with ``with KubeApiStandIn(groups=(TRAINER, JOBSET)) as api:``; ``api.url``."""

    def __init__(self, groups=(TRAINER, JOBSET)):
        self.groups = tuple(groups)
        self.objects: dict[str, dict] = {}  # name -> object (any kind)
        self.pods: dict[str, dict] = {}
        self.logs: dict[str, str] = {}
        self.requests: list[dict] = []
        self.failing_reads = 0  # this many reads of a job answer 500 (``fail_reads``)
        self.pod_list_seconds = 0.0  # how long a list of pods takes to answer (a slow server)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    # ---- what the test does in place of the controllers --------------------------
    def fail_reads(self, count: int):
        """The next ``count`` reads of any job answer 500, as an API server restarting."""
        self.failing_reads = count

    def created(self, method: str = "POST") -> list[dict]:
        return [r for r in self.requests if r["method"] == method]

    def add_pod(self, name: str, namespace: str, labels=None, owners=(), service_account=None,
                phase="Running", log=""):
        with self.lock:
            self.pods[name] = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                             "labels": dict(labels or {}), "ownerReferences": list(owners)},
                "spec": {"serviceAccountName": service_account,
                         "containers": [{"name": "node", "image": "x"}]},
                "status": {"phase": phase}}
            self.logs[name] = log

    def set_state(self, name: str, state: str, log: str = "", message: str = ""):
        with self.lock:
            obj = self.objects[name]
            kind = obj["kind"]
            conditions = [{"type": t, "status": "True" if s == state else "False",
                           "reason": "Test", "message": message if s == state else ""}
                          for s, t in CONDITIONS[kind].items()]
            obj["status"] = {"conditions": conditions}
            namespace = obj["metadata"]["namespace"]
        if state in ("running", "succeeded", "failed"):
            phase = {"running": "Running", "succeeded": "Succeeded", "failed": "Failed"}[state]
            for i in range(_hosts(obj)):
                self.add_pod(f"{name}-node-0-{i}", namespace, phase=phase, log=log if i == 0 else "",
                             labels={"jobset.sigs.k8s.io/jobset-name": name,
                                     "batch.kubernetes.io/job-completion-index": str(i)})

    # ---- the HTTP side -------------------------------------------------------------
    def _handler(self):
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body, content_type="application/json"):
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on the answer (a task stopped mid-call)

            def _serve(self, method: str):
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                stand_in.requests.append({"method": method, "path": url.path,
                                          "query": parse_qs(url.query), "body": body})
                code, answer = stand_in.answer(method, url.path, parse_qs(url.query), body)
                if isinstance(answer, str):
                    self._send(code, answer, "text/plain")
                else:
                    self._send(code, answer)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_DELETE(self):
                self._serve("DELETE")

        return Handler

    def answer(self, method: str, path: str, query: dict, body):
        if path.rstrip("/") == "/apis" and method == "GET":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                 "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}}
                for g, v in self.groups]}
        if m := CUSTOM.match(path):
            group, version, namespace, _plural, name = m.groups()
            if (group, version) not in self.groups:
                return 404, _status(404, f"the server could not find the requested resource ({path})")
            return self._custom(method, namespace, name, body)
        if m := PODS.match(path):
            namespace, name, log = m.groups()
            if name is None:
                time.sleep(self.pod_list_seconds)
            with self.lock:
                if name is None:
                    selector = query.get("labelSelector", [""])[0]
                    wanted = dict(kv.split("=", 1) for kv in selector.split(",") if kv)
                    items = [p for p in self.pods.values() if p["metadata"]["namespace"] == namespace
                             and all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())]
                    return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
                if name not in self.pods:
                    return 404, _status(404, f'pods "{name}" not found')
                return 200, (self.logs[name] if log else self.pods[name])
        return 404, _status(404, f"no route {method} {path}")

    def _custom(self, method: str, namespace: str, name: str | None, body):
        with self.lock:
            if method == "POST":
                name = body["metadata"]["name"]
                if name in self.objects:
                    return 409, _status(409, f'"{name}" already exists')
                obj = json.loads(json.dumps(body))
                obj["metadata"].update(namespace=namespace, uid=f"uid-{name}")
                self.objects[name] = obj
                return 201, obj
            if name not in self.objects:
                return 404, _status(404, f'"{name}" not found')
            if method == "GET":
                if self.failing_reads:
                    self.failing_reads -= 1
                    return 500, _status(500, "etcdserver: leader changed")
                return 200, self.objects[name]
            if method == "DELETE":
                obj = self.objects.pop(name)
                for pod in [p for p in self.pods if p.startswith(f"{name}-node-")]:
                    del self.pods[pod]
                return 200, obj
        return 405, _status(405, method)


def _hosts(obj: dict) -> int:
    spec = obj["spec"]
    if obj["kind"] == "TrainJob":
        return int(spec["trainer"]["numNodes"])
    return int(spec["replicatedJobs"][0]["template"]["spec"]["parallelism"])


def kubeconfig(url: str, namespace: str) -> str:
    """A kubeconfig whose current context is the stand-in, in ``namespace``."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "stand-in",
        "clusters": [{"name": "stand-in", "cluster": {"server": url}}],
        "users": [{"name": "task", "user": {"token": "stand-in-token"}}],
        "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "task",
                                                       "namespace": namespace}}]})
