"""Storage roots: ``open_root`` for a local folder or a ``gs://bucket/prefix``, and the
local-folder backend (atomic writes through temp files next to their target).

The rest of batchscale reads and writes relative ``"a/b/c.json"`` paths through a
:class:`Storage` and never cares which backend is underneath. Nothing here touches
the network, the environment or ``google.cloud.storage`` at import time; the GCS
client is imported and built only when a ``gs://`` root is opened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil

from batchscale.store.gcs_storage import GCSStorage
from batchscale.store.storage_api import (
    TMP_PREFIX,
    Storage,
    atomic_local_write,
    parse_gs_url,
    split_path,
    write_temp,
)

__all__ = ["GCSStorage", "LocalStorage", "Storage", "open_root"]

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


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
    bucket, prefix = parse_gs_url(root)
    return GCSStorage(bucket, prefix)


class LocalStorage(Storage):
    """Storage rooted at a local folder (created lazily on first write)."""

    def __init__(self, root: str) -> None:
        # Absolute so later chdir() calls cannot move the root.
        self.root = os.path.abspath(os.path.expanduser(root))

    def _path(self, path: str, *, allow_root: bool = False) -> str:
        return os.path.join(self.root, *split_path(path, allow_root=allow_root))

    def url(self, path: str) -> str:
        return self._path(path, allow_root=True)

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._path(path))

    def read_bytes(self, path: str) -> bytes:
        with open(self._path(path), "rb") as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        atomic_local_write(self._path(path), lambda f: f.write(data))

    def write_if_absent(self, path: str, data: bytes) -> bool:
        # Write a complete temp file, then hard-link it into place: link() fails if the
        # target exists, so exactly one concurrent writer wins and nobody ever sees a
        # partially written file.
        dest = self._path(path)
        tmp = write_temp(dest, lambda f: f.write(data))
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

    def delete(self, path: str) -> None:
        # Only a file: a folder at ``path`` is left alone, as on GCS (no object by that name).
        # Emptied parent folders stay (harmless; pruning them would race a concurrent write
        # into the same folder).
        target = self._path(path)
        if os.path.isfile(target):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)

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
                        e.name for e in it if e.is_file() and not e.name.startswith(TMP_PREFIX)
                    )
            except (FileNotFoundError, NotADirectoryError):
                return []
        out = []
        for dirpath, _dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, base)
            for name in filenames:
                if name.startswith(TMP_PREFIX):
                    continue
                rel = name if rel_dir == os.curdir else os.path.join(rel_dir, name)
                out.append(rel.replace(os.sep, "/"))
        return sorted(out)

    def download_to(self, path: str, local_file: str) -> None:
        with open(self._path(path), "rb") as src:
            atomic_local_write(os.path.abspath(local_file), lambda f: shutil.copyfileobj(src, f))

    def upload_from(self, local_file: str, path: str) -> None:
        with open(local_file, "rb") as src:
            atomic_local_write(self._path(path), lambda f: shutil.copyfileobj(src, f))
