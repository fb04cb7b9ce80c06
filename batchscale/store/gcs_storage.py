"""Storage on Google Cloud Storage: ``gs://bucket/prefix`` through google-cloud-storage.

The client is imported and built only when a gs:// root is opened (local-only users never
pay for it); ``STORAGE_EMULATOR_HOST`` points it at an emulator (the tests use
gcp-storage-emulator). Retries are the client's own (``DEFAULT_RETRY``: exponential
backoff on connection errors, 429 and 5xx), bounded by ``retry_seconds`` per call: a store
that is unreachable for less than that (``RETRY_SECONDS``, or the environment's
``BATCHSCALE_STORE_RETRY_SECONDS`` read when a root is opened) costs a run nothing; a
longer outage fails the call, and with it the task, leaving a resumable store.
"""

from __future__ import annotations

import contextlib
import copy
import os

from batchscale.store.storage_api import Storage, atomic_local_write, not_found, split_path

RETRY_SECONDS = 300.0
RETRY_ENV = "BATCHSCALE_STORE_RETRY_SECONDS"


def retry_seconds_setting() -> float:
    """How long a store call retries when a root is opened now: ``RETRY_ENV`` or the default."""
    return float(os.environ.get(RETRY_ENV, RETRY_SECONDS))


class GCSStorage(Storage):
    """Storage rooted at ``gs://bucket/prefix``; objects are named ``prefix/path``.

    GCS object writes are already atomic, so no temp objects are needed.
    """

    def __init__(self, bucket: str, prefix: str = "", retry_seconds: float | None = None) -> None:
        # Imported here so local-only users never need (or pay for) the GCS client.
        from google.cloud import storage
        from google.cloud.storage.retry import DEFAULT_RETRY

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            # The emulator accepts anything; anonymous creds avoid an ADC lookup.
            from google.auth.credentials import AnonymousCredentials

            client = storage.Client(project="test", credentials=AnonymousCredentials())
        else:
            client = storage.Client()
        self._client = client
        self._bucket = client.bucket(bucket)
        self.bucket_name = bucket
        self.prefix = "/".join(split_path(prefix, allow_root=True))  # validated, no slashes
        self.root = f"gs://{bucket}/{self.prefix}" if self.prefix else f"gs://{bucket}"
        if retry_seconds is None:
            retry_seconds = retry_seconds_setting()
        self.retry_seconds = retry_seconds
        self._retry = DEFAULT_RETRY.with_timeout(retry_seconds)

    def retrying(self, seconds: float) -> GCSStorage:
        """The same root with calls that give up after ``seconds`` (a progress line that
        must say within seconds that the store is unreachable)."""
        from google.cloud.storage.retry import DEFAULT_RETRY

        other = copy.copy(self)
        other.retry_seconds, other._retry = seconds, DEFAULT_RETRY.with_timeout(seconds)
        return other

    def _key(self, path: str, *, allow_root: bool = False) -> str:
        return "/".join(
            [*([self.prefix] if self.prefix else []), *split_path(path, allow_root=allow_root)]
        )

    def _dir_prefix(self, path: str) -> str:
        """Object-name prefix for listing a directory: '' for the bucket root, else 'k/'."""
        key = self._key(path, allow_root=True)
        return f"{key}/" if key else ""

    def url(self, path: str) -> str:
        key = self._key(path, allow_root=True)
        return f"gs://{self.bucket_name}/{key}" if key else f"gs://{self.bucket_name}"

    def exists(self, path: str) -> bool:
        return self._bucket.blob(self._key(path)).exists(retry=self._retry)

    def read_bytes(self, path: str) -> bytes:
        from google.api_core.exceptions import NotFound

        try:
            return self._bucket.blob(self._key(path)).download_as_bytes(retry=self._retry)
        except NotFound:
            raise not_found(self.url(path)) from None

    def open_read(self, path: str):
        """Ranged reads of one version of the object (the client's ``BlobReader``): a small
        read fetches 256 KiB, a large one exactly what it asks for."""
        from google.api_core.exceptions import NotFound

        blob = self._bucket.blob(self._key(path))
        try:
            blob.reload(retry=self._retry)  # its generation: a replaced object fails the read
        except NotFound:
            raise not_found(self.url(path)) from None
        return blob.open("rb", chunk_size=256 * 1024, retry=self._retry,
                         if_generation_match=blob.generation)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._bucket.blob(self._key(path)).upload_from_string(data, retry=self._retry)

    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Create-only write via the ``ifGenerationMatch=0`` precondition.

        Caveat (real GCS): the client retries a conditional upload on transient
        errors, so if a first attempt succeeded but its response was lost, the retry
        sees 412 and this returns False even though our data was written.
        """
        from google.api_core.exceptions import PreconditionFailed

        try:
            self._bucket.blob(self._key(path)).upload_from_string(
                data, if_generation_match=0, retry=self._retry)
        except PreconditionFailed:
            return False
        return True

    def delete(self, path: str) -> None:
        from google.api_core.exceptions import NotFound

        with contextlib.suppress(NotFound):
            self._bucket.blob(self._key(path)).delete(retry=self._retry)

    def list_dirs(self, path: str) -> list[str]:
        prefix = self._dir_prefix(path)
        it = self._client.list_blobs(self._bucket, prefix=prefix, delimiter="/", retry=self._retry)
        for _ in it:  # .prefixes is only filled in as pages are consumed
            pass
        names = (p[len(prefix) :].rstrip("/") for p in it.prefixes)
        return sorted(n for n in names if n)

    def list_files(self, path: str, recursive: bool = False) -> list[str]:
        prefix = self._dir_prefix(path)
        it = self._client.list_blobs(
            self._bucket, prefix=prefix, delimiter=None if recursive else "/", retry=self._retry
        )
        # Names ending in "/" are console-made "folder" placeholders, not files.
        return sorted(b.name[len(prefix) :] for b in it if not b.name.endswith("/"))

    def download_to(self, path: str, local_file: str) -> None:
        from google.api_core.exceptions import NotFound

        blob = self._bucket.blob(self._key(path))
        try:
            atomic_local_write(os.path.abspath(local_file),
                               lambda fh: blob.download_to_file(fh, retry=self._retry))
        except NotFound:
            raise not_found(self.url(path)) from None

    def upload_from(self, local_file: str, path: str) -> None:
        self._bucket.blob(self._key(path)).upload_from_filename(local_file, retry=self._retry)
