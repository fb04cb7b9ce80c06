"""Launch one multi-host pack as a TrainJob (or a JobSet), follow it to its end, clean up.

The light task ``train_multihost_pack`` runs this in the cluster with its service
account (manifests/base/trainjob-rbac.yaml grants exactly what it uses):

1. **Which API**: Kubeflow Trainer's ``trainer.kubeflow.org/v1alpha1`` where the cluster
   serves it (API discovery), else JobSet's ``jobset.x-k8s.io/v1alpha2``, else one line
   saying neither is installed.
2. **Create or re-attach**: the job's name is the study's and pack's
   (``trainjob_manifest.job_name``). A job of that name that is still running for the same
   spec is re-attached to (a retried task, a resubmitted study), never started twice; one
   that finished, failed or was made for another spec is deleted first (its pods get
   SIGTERM and checkpoint) and created anew, so the store, not an old job's status, says
   which trials are done.
3. **Follow**: the job's state every ``poll`` seconds, and process 0's pod log streamed
   into the task's log line by line (a new pod of process 0, after a restart, is followed
   too).
4. **End**: success returns one line; a failed job raises ``CommandFailed`` with its
   reason (the task fails, and KFP's retry, if any, starts the pack again from its
   checkpoints). Whatever ends the task before the job succeeds (SIGTERM from a cancelled
   run, a failure, an error here) deletes the job with foreground propagation, so its pods
   get their SIGTERM, checkpoint their trials and go; a SIGTERM then exits 143. A job that
   succeeded is deleted too: nothing of the pack is left in the cluster.

The client's configuration is the pod's own (in-cluster), else the kubeconfig
(``KUBECONFIG``), which is how the tests point it at a stand-in API server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from batchscale.core.errors import CommandFailed
from batchscale.kube import trainjob_manifest as tm
from batchscale.kube.process_log import ProcessZeroLog

NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
POLL_SECONDS = 10.0  # how often the task reads the job's state (POLL_ENV overrides it)
POLL_ENV = "BATCHSCALE_TRAINJOB_POLL_SECONDS"
READ_TRIES = 6  # failed reads in a row before the task gives the job up
GONE_SECONDS = 600.0  # how long a replaced job may take to go (its pods checkpoint first)
STOPPED = 143  # the exit status of a task stopped by SIGTERM (128 + 15)


class Stopped(Exception):
    """SIGTERM reached the task (a cancelled run, a node drained)."""


@dataclass
class Cluster:
    """A client of the cluster's API and the namespace the task runs in."""

    api: object  # kubernetes.client.ApiClient
    namespace: str


def connect() -> Cluster:
    """The pod's in-cluster configuration, else the kubeconfig's current context."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
        namespace = NAMESPACE_FILE.read_text().strip()
    except config.ConfigException:
        # The client reads KUBECONFIG once, at its import: pass today's value.
        path = os.environ.get("KUBECONFIG") or None
        try:
            config.load_kube_config(config_file=path)
            _, active = config.list_kube_config_contexts(config_file=path)
        except (config.ConfigException, OSError) as e:
            raise CommandFailed(f"no Kubernetes API to launch the multi-host pack on: not in a "
                                f"cluster and no usable kubeconfig ({e})") from None
        namespace = active.get("context", {}).get("namespace") or "default"
    return Cluster(client.ApiClient(), namespace)


def job_kind(cluster: Cluster) -> tuple[str, str, str, str]:
    """``trainjob_manifest.TRAINER`` where the cluster serves Trainer's API, else
    ``JOBSET``; refuses a cluster with neither."""
    from kubernetes import client

    served = {(g.name, v.version) for g in client.ApisApi(cluster.api).get_api_versions().groups
              for v in g.versions}
    for kind in (tm.TRAINER, tm.JOBSET):
        if kind[:2] in served:
            return kind
    raise CommandFailed("the cluster serves neither Kubeflow Trainer (trainer.kubeflow.org/v1alpha1) "
                        "nor JobSet (jobset.x-k8s.io/v1alpha2): install one to train multi-host "
                        "packs (docs/gke.md, 'Past one node')")


def _api_error(verb: str, what: str, e) -> CommandFailed:
    try:
        message = json.loads(e.body).get("message", "")
    except (TypeError, ValueError, AttributeError):
        message = ""
    hint = " (the run's service account lacks the grant: manifests/base/trainjob-rbac.yaml)" \
        if e.status == 403 else ""
    return CommandFailed(f"could not {verb} {what}: HTTP {e.status} {message or e.reason}{hint}")


class Jobs:
    """The custom-object calls on one kind of job in the task's namespace."""

    def __init__(self, cluster: Cluster, kind: tuple[str, str, str, str]):
        from kubernetes import client

        self.cluster, self.kind = cluster, kind
        self.api = client.CustomObjectsApi(cluster.api)
        self.where = (kind[0], kind[1], cluster.namespace, kind[2])

    def get(self, name: str) -> dict | None:
        from kubernetes.client.rest import ApiException

        try:
            return self.api.get_namespaced_custom_object(*self.where, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise _api_error("read", f"{self.kind[3]} {name}", e) from None

    def create(self, body: dict) -> dict | None:
        """The created job, or None when one of its name appeared meanwhile."""
        from kubernetes.client.rest import ApiException

        try:
            return self.api.create_namespaced_custom_object(*self.where, body)
        except ApiException as e:
            if e.status == 409:
                return None
            raise _api_error("create", f"{self.kind[3]} {body['metadata']['name']}", e) from None

    def delete(self, name: str) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        try:
            self.api.delete_namespaced_custom_object(
                *self.where, name, body=client.V1DeleteOptions(propagation_policy="Foreground"))
        except ApiException as e:
            if e.status != 404:
                raise _api_error("delete", f"{self.kind[3]} {name}", e) from None

    def wait_gone(self, name: str, poll: float, timeout: float = GONE_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while self.get(name) is not None:
            if time.monotonic() > deadline:
                raise CommandFailed(f"{self.kind[3]} {name} was deleted but is still there after "
                                    f"{timeout:.0f} s; delete it by hand and retry the task")
            time.sleep(poll)


def own_pod(cluster: Cluster) -> dict:
    """What the task's own pod lends the job: its owners (the run's Argo Workflow, so
    deleting the run deletes the job too) and its service account (Workload Identity's
    access to the store). Empty outside a cluster's pod."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    name = os.environ.get("HOSTNAME", "")
    if not name:
        return {}
    try:
        pod = client.CoreV1Api(cluster.api).read_namespaced_pod(name, cluster.namespace)
    except ApiException:
        return {}
    owners = [{"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid}
              for o in pod.metadata.owner_references or [] if o.kind == "Workflow"]
    return {"owners": owners, "service_account": pod.spec.service_account_name}


@contextlib.contextmanager
def _sigterm_raises():
    """Within: SIGTERM raises ``Stopped`` in the main thread (elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _attach_or_create(jobs: Jobs, body: dict, poll: float, log) -> None:
    name, kind = body["metadata"]["name"], jobs.kind[3]
    digest = body["metadata"]["annotations"][tm.SPEC_DIGEST]
    while True:
        found = jobs.get(name)
        if found is not None:
            state, _ = tm.outcome(found)
            meta = found.get("metadata", {})
            same = meta.get("annotations", {}).get(tm.SPEC_DIGEST) == digest
            if state in ("running", "suspended") and same and not meta.get("deletionTimestamp"):
                log(f"{kind} {name} is already running for this pack: following it")
                return
            if not meta.get("deletionTimestamp"):
                why = "was made for another spec" if not same else f"has {state}"
                log(f"{kind} {name} {why}: deleting it, then starting the pack anew")
                jobs.delete(name)
            jobs.wait_gone(name, poll)
        if jobs.create(body) is not None:
            log(f"created {kind} {name}: {body['metadata']['annotations'][tm.PREFIX + 'pack-id']}")
            return


def _read(jobs: Jobs, name: str, poll: float, log) -> dict | None:
    """The job, read again after a failed read (an API server restarting, a network blip)
    up to ``READ_TRIES`` times in a row: a days-long job is not lost to one bad answer."""
    from urllib3.exceptions import HTTPError

    for attempt in range(1, READ_TRIES + 1):
        try:
            return jobs.get(name)
        except (CommandFailed, HTTPError, OSError) as e:
            if attempt == READ_TRIES:
                raise CommandFailed(f"lost the Kubernetes API while following {jobs.kind[3]} {name}: "
                                    f"{e}") from None
            log(f"reading {jobs.kind[3]} {name} failed ({e}); trying again")
            time.sleep(poll)


def _follow(jobs: Jobs, name: str, poll: float, log) -> tuple[str, str]:
    logs, said = ProcessZeroLog(jobs.cluster, name, log), None
    while True:
        found = _read(jobs, name, poll, log)
        if found is None:
            raise CommandFailed(f"{jobs.kind[3]} {name} vanished while the task followed it "
                                "(deleted by hand?); retry the task to start it again")
        state, detail = tm.outcome(found)
        if state != said:
            log(f"{jobs.kind[3]} {name}: {state}" + (f" ({detail})" if detail else ""))
            said = state
        try:
            logs.poll()
        except Stopped:  # SIGTERM, raised wherever the task stood: never a log's failure
            raise
        except Exception as e:  # the log is not the job's outcome
            log(f"could not find process 0's pod of {name}: {e}")
        if state in ("succeeded", "failed"):
            logs.finish(timeout=max(poll, 5.0))
            return state, detail
        time.sleep(poll)


def run_multihost_pack(spec: dict, pack: dict, placement: dict, image: str, *, queue: str = "",
                       kfp_run: str = "", cluster: Cluster | None = None,
                       poll: float | None = None, log=print) -> str:
    """Train ``pack`` (a PackSpec dict) of the resolved study ``spec`` on every host of
    ``placement`` (``placement.multi_host_placement``) in ``image``; returns one line.
    Raises ``CommandFailed`` when the job fails; exits 143 on SIGTERM, having deleted it."""
    poll = float(os.environ.get(POLL_ENV, POLL_SECONDS)) if poll is None else poll
    cluster = cluster or connect()
    kind = job_kind(cluster)
    jobs, name = Jobs(cluster, kind), tm.job_name(spec, pack)
    me = own_pod(cluster)
    build = tm.trainjob if kind == tm.TRAINER else tm.jobset
    body = build(name, spec, pack, placement, image, queue=queue, kfp_run=kfp_run,
                 service_account=me.get("service_account"), owners=me.get("owners"))
    with _sigterm_raises():
        try:
            _attach_or_create(jobs, body, poll, log)
            state, detail = _follow(jobs, name, poll, log)
        except Stopped:
            log(f"task stopped (SIGTERM): deleting {kind[3]} {name}; its pods checkpoint their trials")
            _delete_quietly(jobs, name)
            raise SystemExit(STOPPED) from None
        except BaseException:
            _delete_quietly(jobs, name)
            raise
        _delete_quietly(jobs, name)  # finished either way: nothing of the pack stays behind
    if state == "failed":
        raise CommandFailed(f"{kind[3]} {name} failed: {detail}; the pack's finished trials and "
                            "checkpoints stay in the store, and a retry resumes them")
    return (f"{kind[3]} {name}: pack {pack['pack_id']} trained on {placement['hosts']} hosts "
            f"of {placement['preset']}")


def _delete_quietly(jobs: Jobs, name: str) -> None:
    with contextlib.suppress(CommandFailed):
        jobs.delete(name)


def run_multihost_lane(spec: dict, lane: dict, placement: dict, image: str, *, queue: str = "",
                       kfp_run: str = "", cluster: Cluster | None = None,
                       poll: float | None = None, log=print) -> str:
    """Train the packs of a multi-host ``lane`` (``{"lane": K, "kind": "multi_host",
    "packs": [PackSpec dicts]}``, ``batchscale.search.lanes``) one after another, one job
    each (``run_multihost_pack``). A pack whose trials are all finished in the store is
    re-used without a job (a retried or resubmitted lane). A failed pack does not stop the
    lane: the others train, then ``CommandFailed`` names every failed one. SIGTERM stops
    the lane at once."""
    from batchscale.rounds.stage_lanes import pack_is_finished
    from batchscale.store.layout import StudyStore
    from batchscale.validation import parse_spec

    study = parse_spec(spec)
    store = StudyStore(study.store)
    cluster = cluster or connect()
    lines, failed, errors = [], [], []
    packs = lane["packs"]
    for number, pack in enumerate(packs, start=1):
        if len(packs) > 1:
            log(f"lane {lane.get('lane', '?')}: pack {number}/{len(packs)} {pack['pack_id']}")
        if pack_is_finished(study, store, pack):
            log(f"pack {pack['pack_id']}: every trial finished, re-used (no job)")
            lines.append(f"{pack['pack_id']}: re-used")
            continue
        try:
            lines.append(run_multihost_pack(spec, pack, placement, image, queue=queue,
                                            kfp_run=kfp_run, cluster=cluster, poll=poll, log=log))
        except CommandFailed as error:
            log(str(error))
            failed.append(f"{pack['pack_id']} ({error})")
            errors.append(error)
    if len(packs) == 1 and errors:
        raise errors[0]
    if failed:
        raise CommandFailed(f"{len(failed)} of {len(packs)} multi-host packs failed: {'; '.join(failed)}")
    return lines[0] if len(lines) == 1 else f"{len(lines)} packs trained on {placement['hosts']} hosts " \
        f"of {placement['preset']} each"
