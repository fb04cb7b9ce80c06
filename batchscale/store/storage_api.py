"""The storage interface: relative ``"a/b/c.json"`` paths under a root, and the path rules
every backend enforces (no absolute paths, no ``..``, nothing escapes the root).

Backends: ``batchscale.store.filesystem.LocalStorage`` (a local folder, atomic writes
through temp files) and ``batchscale.store.gcs_storage.GCSStorage`` (gs://bucket/prefix);
``batchscale.store.filesystem.open_root`` picks one for a root.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import os
import re
import uuid
from collections.abc import Callable
from typing import IO

from batchscale.core.errors import InputError

# Prefix of in-flight temp files next to their target; hidden from listings.
TMP_PREFIX = ".batchscale-tmp-"
# Loose GCS bucket-name check: lowercase letters, digits, '-', '_', '.'.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
# Something that reads as a URL ("s3://", "file:///", "gs:/x"): never a local folder.
_URL_LIKE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/|^gs:", re.IGNORECASE)
ROOTS_ALLOWED = "a local folder or gs://bucket[/prefix]"


def check_root(root) -> str:
    """``"gs"`` or ``"local"``: which backend serves ``root``, or a one-line ValueError
    (without a field name; callers add theirs) saying why it is no store root.

    The one rule for store roots: ``gs://bucket[/prefix]`` or a local path. Any other
    URL (``s3://b``, ``GS://b``, the typo ``gs:/b``) is refused, not taken as a local
    folder named ``s3:`` that would silently fill the working directory."""
    if not isinstance(root, str):
        raise InputError(f"{root!r} is not a string ({type(root).__name__}); allowed: {ROOTS_ALLOWED}")
    if not root.strip():
        raise InputError(f"{root!r} is empty; allowed: {ROOTS_ALLOWED}")
    if "\x00" in root or "\n" in root:
        raise InputError(f"{root!r} holds a NUL or newline character; allowed: {ROOTS_ALLOWED}")
    if root.startswith("gs://"):
        parse_gs_url(root)
        return "gs"
    if _URL_LIKE.match(root):
        raise InputError(f"{root!r} is a URL batchscale cannot store to; allowed: {ROOTS_ALLOWED}")
    return "local"


def parse_gs_url(url: str) -> tuple[str, str]:
    """Split ``gs://bucket/prefix`` into (bucket, prefix) or raise a one-line ValueError."""
    rest = url[len("gs://") :].rstrip("/")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InputError(f"malformed GCS root {url!r}: no bucket; allowed: gs://bucket[/prefix]")
    if not _BUCKET_RE.match(bucket):
        raise InputError(f"malformed GCS root {url!r}: invalid bucket name {bucket!r}; allowed: "
                         "3-222 of a-z, 0-9, '.', '_', '-', starting and ending with a letter or digit")
    try:
        parts = split_path(prefix, allow_root=True)
    except ValueError as e:
        raise InputError(f"malformed GCS root {url!r}: bad prefix ({e})") from None
    return bucket, "/".join(parts)


def split_path(path: str, *, allow_root: bool = False) -> list[str]:
    """Validate a relative storage path and return its segments.

    Defence in depth: a study name must never escape the root, so absolute paths,
    ``..``/``.``/empty segments, backslashes and NUL are rejected outright rather
    than normalised. With ``allow_root`` (directory arguments) ``""``, ``"."`` and a
    trailing ``/`` are accepted and ``""``/``"."`` mean the root itself.
    """
    if not isinstance(path, str):
        raise TypeError(f"storage path must be str, got {type(path).__name__}")
    if "\\" in path or "\x00" in path:
        raise ValueError(f"invalid storage path {path!r}: backslash or NUL not allowed")
    if path.startswith("/") or os.path.isabs(path):
        raise ValueError(f"storage path must be relative, got {path!r}")
    if allow_root:
        if path in ("", "."):
            return []
        path = path.rstrip("/")
    elif not path:
        raise ValueError("storage path must not be empty")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError(
                f"invalid storage path {path!r}: empty, '.' or '..' segments not allowed"
            )
    return parts


def not_found(location: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), location)


class Storage(abc.ABC):
    """Backend-neutral file store; every path is relative to ``root`` with ``/`` separators."""

    root: str

    @abc.abstractmethod
    def url(self, path: str) -> str:
        """Human-readable location of ``path`` (for logs and error messages)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """True if a file (not a directory) exists at ``path``."""

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """Return the file's content; FileNotFoundError if it is missing."""

    def open_read(self, path: str) -> IO[bytes]:
        """A seekable binary file object reading ``path`` (a context manager): readers that
        need only part of a large file (an archive's index, a Parquet footer, an image's
        header) read just that part. This default reads the whole file into memory;
        backends override it with a real file or ranged reads."""
        import io

        return io.BytesIO(self.read_bytes(path))

    def read_text(self, path: str) -> str:
        """Return the file's content decoded as UTF-8."""
        return self.read_bytes(path).decode("utf-8")

    @abc.abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace the file; readers never see a partial write."""

    def write_text(self, path: str, text: str) -> None:
        """Create or replace the file with ``text`` encoded as UTF-8."""
        self.write_bytes(path, text.encode("utf-8"))

    def write_grown(self, path: str, data: bytes, stored: int) -> None:
        """Store ``data`` at ``path``, a file that only ever grows, of which an earlier call
        stored the first ``stored`` bytes (0: a new file). A reader following it (TensorBoard
        on an event file) must see it grow, not be replaced: a local folder appends the new
        bytes in place; an object store has no append, so this default rewrites the whole
        object, which readers of an object store re-read by byte range anyway."""
        self.write_bytes(path, data)

    @abc.abstractmethod
    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Atomically create the file only if missing; True if this call created it."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove the file at ``path``; a missing file is not an error (deleting is idempotent,
        so a retried clean-up or two tasks cleaning the same file both succeed)."""

    @abc.abstractmethod
    def list_dirs(self, path: str) -> list[str]:
        """Sorted names of the immediate sub-directories of ``path``; [] if none."""

    @abc.abstractmethod
    def list_files(self, path: str, recursive: bool = False) -> list[str]:
        """Sorted file paths under ``path``, relative to it; [] if none."""

    @abc.abstractmethod
    def download_to(self, path: str, local_file: str) -> None:
        """Copy the file at ``path`` to ``local_file`` (parent dirs created)."""

    @abc.abstractmethod
    def upload_from(self, local_file: str, path: str) -> None:
        """Copy ``local_file`` into the store at ``path``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"


def write_temp(dest: str, fill: Callable[[IO[bytes]], None]) -> str:
    """Write a fsynced temp file next to ``dest`` and return its path.

    Same directory so that os.replace/os.link onto ``dest`` is atomic; created with
    mode 0o666 (minus umask) so the final file gets normal permissions.
    """
    parent, name = os.path.split(dest)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name[:64]}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def atomic_local_write(dest: str, fill: Callable[[IO[bytes]], None]) -> None:
    """Write ``dest`` via temp file + os.replace so it is never seen half-written."""
    tmp = write_temp(dest, fill)
    try:
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
