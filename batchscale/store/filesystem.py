"""Tiny filesystem abstraction over a local folder or a ``gs://bucket/prefix`` root.

The rest of batchscale reads and writes relative ``"a/b/c.json"`` paths through a
:class:`Storage` and never cares which backend is underneath. Nothing here touches
the network, the environment or ``google.cloud.storage`` at import time; the GCS
client is imported and built only when a ``gs://`` root is opened.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import os
import re
import shutil
import uuid
from collections.abc import Callable
from typing import IO

# Prefix of in-flight temp files next to their target; hidden from listings.
_TMP_PREFIX = ".batchscale-tmp-"
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Loose GCS bucket-name check: lowercase letters, digits, '-', '_', '.'.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


def open_root(root: str) -> Storage:
    """Return the backend for ``root``: GCS for ``gs://bucket[/prefix]``, else a local folder.

    Raises ValueError for an empty root, a malformed ``gs://`` url, or another URL
    scheme (``s3://...`` would otherwise silently become a local folder named ``s3:``).
    """
    if not isinstance(root, str) or not root.strip():
        raise ValueError(f"storage root must be a non-empty string, got {root!r}")
    m = _SCHEME_RE.match(root)
    if m is None:
        return LocalStorage(root)
    if m.group(1).lower() != "gs":
        raise ValueError(
            f"unsupported storage root {root!r}: use gs://BUCKET[/PREFIX] or a local path"
        )
    bucket, prefix = _parse_gs_url(root)
    return GCSStorage(bucket, prefix)


def _parse_gs_url(url: str) -> tuple[str, str]:
    """Split ``gs://bucket/prefix`` into (bucket, prefix) or raise a one-line ValueError."""
    rest = url[len("gs://") :].rstrip("/")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"malformed GCS root {url!r}: expected gs://BUCKET[/PREFIX]")
    if not _BUCKET_RE.match(bucket):
        raise ValueError(f"malformed GCS root {url!r}: invalid bucket name {bucket!r}")
    try:
        parts = _split(prefix, allow_root=True)
    except ValueError as e:
        raise ValueError(f"malformed GCS root {url!r}: bad prefix ({e})") from None
    return bucket, "/".join(parts)


def _split(path: str, *, allow_root: bool = False) -> list[str]:
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


def _not_found(location: str) -> FileNotFoundError:
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

    def read_text(self, path: str) -> str:
        """Return the file's content decoded as UTF-8."""
        return self.read_bytes(path).decode("utf-8")

    @abc.abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace the file; readers never see a partial write."""

    def write_text(self, path: str, text: str) -> None:
        """Create or replace the file with ``text`` encoded as UTF-8."""
        self.write_bytes(path, text.encode("utf-8"))

    @abc.abstractmethod
    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Atomically create the file only if missing; True if this call created it."""

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


def _write_temp(dest: str, fill: Callable[[IO[bytes]], None]) -> str:
    """Write a fsynced temp file next to ``dest`` and return its path.

    Same directory so that os.replace/os.link onto ``dest`` is atomic; created with
    mode 0o666 (minus umask) so the final file gets normal permissions.
    """
    parent, name = os.path.split(dest)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f"{_TMP_PREFIX}{uuid.uuid4().hex}-{name[:64]}")
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


def _atomic_local_write(dest: str, fill: Callable[[IO[bytes]], None]) -> None:
    """Write ``dest`` via temp file + os.replace so it is never seen half-written."""
    tmp = _write_temp(dest, fill)
    try:
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class LocalStorage(Storage):
    """Storage rooted at a local folder (created lazily on first write)."""

    def __init__(self, root: str) -> None:
        # Absolute so later chdir() calls cannot move the root.
        self.root = os.path.abspath(os.path.expanduser(root))

    def _path(self, path: str, *, allow_root: bool = False) -> str:
        return os.path.join(self.root, *_split(path, allow_root=allow_root))

    def url(self, path: str) -> str:
        return self._path(path, allow_root=True)

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._path(path))

    def read_bytes(self, path: str) -> bytes:
        with open(self._path(path), "rb") as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        _atomic_local_write(self._path(path), lambda f: f.write(data))

    def write_if_absent(self, path: str, data: bytes) -> bool:
        # Write a complete temp file, then hard-link it into place: link() fails if the
        # target exists, so exactly one concurrent writer wins and nobody ever sees a
        # partially written file.
        dest = self._path(path)
        tmp = _write_temp(dest, lambda f: f.write(data))
        try:
            os.link(tmp, dest)
            return True
        except FileExistsError:
            return False
        except OSError as e:
            # Filesystems without hard links: fall back to O_EXCL create.
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            return self._create_excl(dest, data)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    @staticmethod
    def _create_excl(dest: str, data: bytes) -> bool:
        try:
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True

    def list_dirs(self, path: str) -> list[str]:
        try:
            with os.scandir(self._path(path, allow_root=True)) as it:
                return sorted(e.name for e in it if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_files(self, path: str, recursive: bool = False) -> list[str]:
        base = self._path(path, allow_root=True)
        if not recursive:
            try:
                with os.scandir(base) as it:
                    return sorted(
                        e.name for e in it if e.is_file() and not e.name.startswith(_TMP_PREFIX)
                    )
            except (FileNotFoundError, NotADirectoryError):
                return []
        out = []
        for dirpath, _dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, base)
            for name in filenames:
                if name.startswith(_TMP_PREFIX):
                    continue
                rel = name if rel_dir == os.curdir else os.path.join(rel_dir, name)
                out.append(rel.replace(os.sep, "/"))
        return sorted(out)

    def download_to(self, path: str, local_file: str) -> None:
        with open(self._path(path), "rb") as src:
            _atomic_local_write(os.path.abspath(local_file), lambda f: shutil.copyfileobj(src, f))

    def upload_from(self, local_file: str, path: str) -> None:
        with open(local_file, "rb") as src:
            _atomic_local_write(self._path(path), lambda f: shutil.copyfileobj(src, f))


class GCSStorage(Storage):
    """Storage rooted at ``gs://bucket/prefix``; objects are named ``prefix/path``.

    GCS object writes are already atomic, so no temp objects are needed.
    """

    def __init__(self, bucket: str, prefix: str = "") -> None:
        # Imported here so local-only users never need (or pay for) the GCS client.
        from google.cloud import storage

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            # The emulator accepts anything; anonymous creds avoid an ADC lookup.
            from google.auth.credentials import AnonymousCredentials

            client = storage.Client(project="test", credentials=AnonymousCredentials())
        else:
            client = storage.Client()
        self._client = client
        self._bucket = client.bucket(bucket)
        self.bucket_name = bucket
        self.prefix = "/".join(_split(prefix, allow_root=True))  # validated, no slashes
        self.root = f"gs://{bucket}/{self.prefix}" if self.prefix else f"gs://{bucket}"

    def _key(self, path: str, *, allow_root: bool = False) -> str:
        return "/".join(
            [*([self.prefix] if self.prefix else []), *_split(path, allow_root=allow_root)]
        )

    def _dir_prefix(self, path: str) -> str:
        """Object-name prefix for listing a directory: '' for the bucket root, else 'k/'."""
        key = self._key(path, allow_root=True)
        return f"{key}/" if key else ""

    def url(self, path: str) -> str:
        key = self._key(path, allow_root=True)
        return f"gs://{self.bucket_name}/{key}" if key else f"gs://{self.bucket_name}"

    def exists(self, path: str) -> bool:
        return self._bucket.blob(self._key(path)).exists()

    def read_bytes(self, path: str) -> bytes:
        from google.api_core.exceptions import NotFound

        try:
            return self._bucket.blob(self._key(path)).download_as_bytes()
        except NotFound:
            raise _not_found(self.url(path)) from None

    def write_bytes(self, path: str, data: bytes) -> None:
        self._bucket.blob(self._key(path)).upload_from_string(data)

    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Create-only write via the ``ifGenerationMatch=0`` precondition.

        Caveat (real GCS): the client retries a conditional upload on transient
        errors, so if a first attempt succeeded but its response was lost, the retry
        sees 412 and this returns False even though our data was written.
        """
        from google.api_core.exceptions import PreconditionFailed

        try:
            self._bucket.blob(self._key(path)).upload_from_string(data, if_generation_match=0)
        except PreconditionFailed:
            return False
        return True

    def list_dirs(self, path: str) -> list[str]:
        prefix = self._dir_prefix(path)
        it = self._client.list_blobs(self._bucket, prefix=prefix, delimiter="/")
        for _ in it:  # .prefixes is only filled in as pages are consumed
            pass
        names = (p[len(prefix) :].rstrip("/") for p in it.prefixes)
        return sorted(n for n in names if n)

    def list_files(self, path: str, recursive: bool = False) -> list[str]:
        prefix = self._dir_prefix(path)
        it = self._client.list_blobs(
            self._bucket, prefix=prefix, delimiter=None if recursive else "/"
        )
        # Names ending in "/" are console-made "folder" placeholders, not files.
        return sorted(b.name[len(prefix) :] for b in it if not b.name.endswith("/"))

    def download_to(self, path: str, local_file: str) -> None:
        from google.api_core.exceptions import NotFound

        blob = self._bucket.blob(self._key(path))
        try:
            _atomic_local_write(os.path.abspath(local_file), blob.download_to_file)
        except NotFound:
            raise _not_found(self.url(path)) from None

    def upload_from(self, local_file: str, path: str) -> None:
        self._bucket.blob(self._key(path)).upload_from_filename(local_file)
