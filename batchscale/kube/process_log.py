"""Process 0's log of a multi-host pack's job, streamed into the light task's log.

Process 0 writes the pack's trials (the other processes write nothing), so its log is the
pack's: each pod that is process 0 (``<job>-node-0-0``, found by its JobSet and completion
index labels; a new one after a restart) is followed from its start to its end, line by
line, each line prefixed with ``| ``, in a thread of its own so that the task keeps
reading the job's state meanwhile.
"""

from __future__ import annotations

import threading

from batchscale.kube import trainjob_manifest as tm


class ProcessZeroLog:
    """Streams the log of process 0's pod (each new one once) into the task's log."""

    def __init__(self, cluster, name: str, log):
        from kubernetes import client

        self.core, self.namespace = client.CoreV1Api(cluster.api), cluster.namespace
        self.name, self.log = name, log
        self.seen: set[str] = set()
        self.threads: list[threading.Thread] = []

    def poll(self) -> None:
        selector = f"{tm.JOBSET_NAME_LABEL}={self.name},{tm.INDEX_LABEL}=0"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        for pod in pods:
            if pod.metadata.uid in self.seen or pod.status.phase not in ("Running", "Succeeded", "Failed"):
                continue
            self.seen.add(pod.metadata.uid)
            thread = threading.Thread(target=self._stream, args=(pod.metadata.name,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _stream(self, pod: str) -> None:
        self.log(f"--- log of process 0 ({pod}) ---")
        try:
            response = self.core.read_namespaced_pod_log(pod, self.namespace, container=tm.NODE,
                                                         follow=True, _preload_content=False)
            rest = b""
            for chunk in response.stream(4096):
                rest += chunk
                *lines, rest = rest.split(b"\n")
                for line in lines:
                    self.log("| " + line.decode(errors="replace"))
            if rest:
                self.log("| " + rest.decode(errors="replace"))
        except Exception as e:  # a log that breaks off is not the job's outcome
            self.log(f"--- log of {pod} broke off: {e} ---")

    def finish(self, timeout: float) -> None:
        for thread in self.threads:
            thread.join(timeout)
