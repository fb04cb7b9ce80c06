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
import shutil
import stat
import tempfile

from batchscale.core.errors import InputError, fail_field
from batchscale.store.gcs_storage import GCSStorage
from batchscale.store.storage_api import (
    ROOTS_ALLOWED,
    TMP_PREFIX,
    Storage,
    atomic_local_write,
    check_root,
    parse_gs_url,
    split_path,
    write_temp,
)

__all__ = ["GCSStorage", "LocalStorage", "Storage", "check_store_writable", "open_root"]


def open_root(root: str) -> Storage:
    """Return the backend for ``root``: GCS for ``gs://bucket[/prefix]``, else a local folder.

    Raises a one-line ValueError for a root ``check_root`` refuses: empty, a malformed
    ``gs://`` url, or another URL (``s3://...`` would otherwise silently become a local
    folder named ``s3:``).
    """
    try:
        kind = check_root(root)
    except ValueError as err:
        raise InputError(f"storage root: {err}") from None
    if kind == "local":
        return LocalStorage(root)
    bucket, prefix = parse_gs_url(root)
    return GCSStorage(bucket, prefix)


def check_store_writable(root: str) -> None:
    """Refuse, with a one-line SpecError on ``store``, a local store root that a run could
    not write: an existing file, a folder it may not write, or a missing folder whose
    nearest existing ancestor is a file or not writable. A preflight, so that a run fails
    before it starts anything rather than in its first task.

    Leaves the disk as it found it: the folder (the root, or the nearest existing ancestor
    of a missing root, which is not created) is probed with a hidden temp file that is
    removed at once. A probe, not ``os.access``: access() says yes to root on any folder,
    and to anyone on /proc or /sys. gs:// roots pass (the first write checks access)."""
    try:
        kind = check_root(root)
    except ValueError as err:
        fail_field("store", str(err))
    if kind == "gs":
        return
    path = os.path.abspath(os.path.expanduser(root))
    if os.path.lexists(path) and not os.path.isdir(path):
        fail_field("store", f"{root} exists and is not a folder; allowed: {ROOTS_ALLOWED}")
    folder = path
    while not os.path.lexists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        fail_field("store", f"{root} cannot be created: {folder} is a file, not a folder; "
                   f"allowed: {ROOTS_ALLOWED}")
    _check_name_lengths(root, path, folder)
    try:
        fd, probe = tempfile.mkstemp(prefix=TMP_PREFIX + "probe-", dir=folder)
    except OSError as err:
        problem = "is not writable" if folder == path else f"cannot be created in {folder}"
        fail_field("store", f"{root} {problem} ({err.strerror}); allowed: a folder you may write, "
                   "or gs://bucket[/prefix]")
    os.close(fd)
    os.unlink(probe)


def _check_name_lengths(root: str, path: str, folder: str) -> None:
    """Refuse a root with a folder name longer than the file system under ``folder`` (its
    nearest existing folder) allows: every write below it would fail (ENAMETOOLONG)."""
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return
    for name in path.split(os.sep):
        size = len(os.fsencode(name))
        if size > name_max:
            fail_field("store", f"{root}: a folder name of {size} bytes is longer than the file "
                       f"system allows ({name_max}); allowed: a path whose names are shorter")


def check_no_escaping_links(root: str, folders: tuple[str, ...]) -> None:
    """Refuse, with a one-line SpecError on ``store``, a symbolic link under these folders
    of a local store root that leads out of the root: ``LocalStorage`` would refuse every
    path through it once the run had started, so the preflight refuses it before."""
    if check_root(root) == "gs":
        return
    base = os.path.realpath(os.path.abspath(os.path.expanduser(root)))
    for folder in folders:
        top = os.path.join(base, folder)
        for current, dirs, files in os.walk(top) if os.path.isdir(top) else ():
            for name in dirs + files:
                path = os.path.join(current, name)
                target = os.path.realpath(path)
                if os.path.islink(path) and os.path.commonpath([base, target]) != base:
                    fail_field("store", f"{path} is a symbolic link leading out of the store "
                               f"(to {target}); allowed: files and folders inside {base}")


class LocalStorage(Storage):
    """Storage rooted at a local folder (created lazily on first write)."""

    def __init__(self, root: str) -> None:
        # Absolute so later chdir() calls cannot move the root; its real path (symlinks
        # resolved, once) is the boundary no stored path may leave.
        self.root = os.path.abspath(os.path.expanduser(root))
        self._real_root = os.path.realpath(self.root)
        self._inside = self._real_root.rstrip(os.sep) + os.sep  # what every path below starts with

    def _path(self, path: str, *, allow_root: bool = False) -> str:
        parts = split_path(path, allow_root=allow_root)
        self._check_inside(path, parts)
        return os.path.join(self.root, *parts)

    def _check_inside(self, path: str, parts: list[str]) -> None:
        """Refuse ``path`` when a symlink on its way leads outside the root: a link in a
        store (a shared or unpacked folder) must not let a read or write reach other files.

        Cheap on the hot path: one lstat per component below the root, stopping at the
        first that does not exist; only a symlink is resolved (realpath)."""
        current = self._real_root
        for part in parts:
            candidate = os.path.join(current, part)
            try:
                mode = os.lstat(candidate).st_mode
            except OSError:
                return  # nothing below exists (a write creates plain folders) or can be reached
            if not stat.S_ISLNK(mode):
                current = candidate
                continue
            current = os.path.realpath(candidate)
            if current != self._real_root and not current.startswith(self._inside):
                raise InputError(f"storage path {path!r} leaves the store root {self.root} "
                                 f"through the symlink {candidate} -> {current}; "
                                 "allowed: files inside the store root")

    def url(self, path: str) -> str:
        return os.path.join(self.root, *split_path(path, allow_root=True))

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._path(path))

    def read_bytes(self, path: str) -> bytes:
        with open(self._path(path), "rb") as f:
            return f.read()

    def open_read(self, path: str):
        return open(self._path(path), "rb")

    def write_bytes(self, path: str, data: bytes) -> None:
        atomic_local_write(self._path(path), lambda f: f.write(data))

    def write_grown(self, path: str, data: bytes, stored: int) -> None:
        """Append ``data[stored:]`` in place (no temp file and rename: a reader holding the
        file open, as TensorBoard's reader does, would never see a replaced file grow).
        A file shorter than ``stored`` (removed, or cut by a crash) is written whole."""
        dest = self._path(path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        try:
            size = os.path.getsize(dest)
        except OSError:
            size = -1
        with open(dest, "r+b" if 0 < stored <= size else "wb") as f:
            if 0 < stored <= size:
                f.truncate(stored)  # drop a partial write of a call that failed half-way
                f.seek(stored)
                f.write(data[stored:])
            else:
                f.write(data)

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
