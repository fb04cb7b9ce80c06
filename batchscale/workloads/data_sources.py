"""Where a user's data files are: a local path or a gs:// URL, opened through the store's
storage layer (``batchscale.store.filesystem.open_root``), so one code path reads both.

A file is read as ``Source(fs, name)``: ``fs`` rooted at the folder that holds it and
``name`` the file; an images folder is ``fs`` rooted at the folder itself (``name`` "").
A local path is resolved first (``~``, symbolic links), so a data file that is a link
into another disk is read where it points. Every refusal here is the one-line
``SpecError`` of ``data_checks.refuse``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from typing import NoReturn

from batchscale.core.errors import SpecError
from batchscale.store.filesystem import Storage, open_root
from batchscale.workloads.data_checks import refuse

CHUNK = 8 * 2**20  # bytes per read while hashing a source file


def unreadable_error(err: BaseException) -> bool:
    """Whether ``err`` says a file could not be read: an OSError or ValueError, or one of
    google-cloud-storage's errors (403 Forbidden, no credentials...), looked up only when
    the client has been imported (so no local read imports it)."""
    if isinstance(err, (OSError, ValueError)):
        return True
    kinds = [getattr(sys.modules.get(module), name, None) for module, name in (
        ("google.api_core.exceptions", "GoogleAPIError"), ("google.auth.exceptions", "GoogleAuthError"))]
    return any(kind is not None and isinstance(err, kind) for kind in kinds)


@dataclass(frozen=True)
class Source:
    fs: Storage
    name: str  # the file under ``fs``; "" for a folder (``fs`` is the folder)
    url: str  # what messages and info.json call it

    def open(self, path: str = ""):
        """A seekable binary reader of the file (or of ``path`` inside a folder)."""
        try:
            return self.fs.open_read(path or self.name)
        except Exception as err:
            if not unreadable_error(err):
                raise
            self.unreadable(path, err)

    def read(self, path: str = "") -> bytes:
        try:
            return self.fs.read_bytes(path or self.name)
        except Exception as err:
            if not unreadable_error(err):
                raise
            self.unreadable(path, err)

    def unreadable(self, path: str, err: BaseException) -> NoReturn:
        where = f"{self.url}: {path}" if path else self.url
        refuse(where, f"cannot be read ({_one_line(err)})", "a file this process may read")


def open_source(path: str, folder: bool = False) -> Source:
    """The file (or, with ``folder``, the folder) at ``path``; refused in one line when it
    does not exist or is the other kind."""
    kind = "folder" if folder else "file"
    try:
        if path.startswith("gs://"):
            return _gcs_source(path, folder)
        real = os.path.realpath(os.path.expanduser(path))
        if folder:
            if not os.path.isdir(real):
                refuse(path, f"no such folder{' (it is a file)' if os.path.isfile(real) else ''}",
                       "a folder with one subfolder per class")
            return Source(open_root(real), "", real)
        if not os.path.isfile(real):
            refuse(path, f"no such file{' (it is a folder)' if os.path.isdir(real) else ''}",
                   f"an existing {kind} (a local path or gs://bucket/...)")
        return Source(open_root(os.path.dirname(real)), os.path.basename(real), real)
    except SpecError:
        raise
    except Exception as err:
        if not unreadable_error(err):
            raise
        refuse(path, f"cannot be opened ({_one_line(err)})", f"a readable {kind}")


def _gcs_source(url: str, folder: bool) -> Source:
    base, _, leaf = url.rstrip("/").rpartition("/")
    if folder:
        fs = open_root(url)
        if not fs.list_dirs(""):
            refuse(url, "no such folder, or it holds no subfolders",
                   "a folder with one subfolder per class")
        return Source(fs, "", fs.root)
    if base in ("gs:/", "gs:") or not leaf:
        refuse(url, "names a bucket, not a file", "gs://bucket/path/to/file")
    fs = open_root(base)
    if not fs.exists(leaf):
        refuse(url, "no such file", "an existing file (a local path or gs://bucket/...)")
    return Source(fs, leaf, fs.url(leaf))


def sha256_file(source: Source, path: str = "") -> str:
    """The file's sha256, read in chunks (never whole in memory)."""
    digest = hashlib.sha256()
    with source.open(path) as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_digest(digests: dict[str, str]) -> str:
    """One sha256 for a folder of files: over each file's relative path and sha256, in
    sorted order (a renamed, added, removed or changed file changes it)."""
    lines = "".join(f"{path}\0{digests[path]}\n" for path in sorted(digests))
    return hashlib.sha256(lines.encode()).hexdigest()


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__
