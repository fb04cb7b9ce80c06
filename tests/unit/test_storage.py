"""Behaviour of batchscale.store.filesystem on a local folder.

Every test that takes the ``store`` fixture runs again, unchanged, on GCS in
tests/integration/test_storage_gcs.py (the real google-cloud-storage client against the
in-process gcp-storage-emulator; nothing is mocked), so both backends behave alike.
"""

from __future__ import annotations

import os

import pytest

from batchscale.store.filesystem import LocalStorage, Storage, open_root

# One small tree used by the listing tests. "ab/" is a sibling whose name shares a
# prefix with "a/", which a naive GCS prefix listing would wrongly include.
TREE = {
    "top.json": b"0",
    "a/x.json": b"1",
    "a/b/y.json": b"2",
    "a/c/d/z.json": b"3",
    "ab/w.json": b"4",
}

BAD_FILE_PATHS = [
    "",
    "/etc/passwd",
    "..",
    "../x.json",
    "a/../../x.json",
    "a/..",
    "a/./b.json",
    "a//b.json",
    "a/",
    "a\\..\\b.json",
]
BAD_DIR_PATHS = ["/", "/etc", "..", "../x", "a/../..", "a/../b", "a//b"]


@pytest.fixture
def store(tmp_path) -> Storage:
    """An empty local store (tests/integration/test_storage_gcs.py: one on GCS)."""
    return open_root(str(tmp_path / "root"))


def _populate(store: Storage) -> None:
    for path, data in TREE.items():
        store.write_bytes(path, data)


def test_round_trip_bytes(store):
    data = bytes(range(256)) * 3
    store.write_bytes("studies/s1/blob.bin", data)
    assert store.read_bytes("studies/s1/blob.bin") == data


def test_round_trip_text(store):
    text = '{"name": "héllo wörld ✓"}\nsecond line\n'
    store.write_text("s/config.json", text)
    assert store.read_text("s/config.json") == text
    assert store.read_bytes("s/config.json") == text.encode("utf-8")


def test_empty_file_round_trip(store):
    store.write_bytes("empty", b"")
    assert store.exists("empty")
    assert store.read_bytes("empty") == b""


def test_exists(store):
    assert not store.exists("a/x.json")
    store.write_bytes("a/x.json", b"1")
    assert store.exists("a/x.json")
    assert not store.exists("a")  # a directory is not a file
    assert not store.exists("a/other.json")


def test_missing_file_raises_file_not_found(store, tmp_path):
    with pytest.raises(FileNotFoundError):
        store.read_bytes("nope/missing.json")
    with pytest.raises(FileNotFoundError):
        store.read_text("missing.txt")
    dest = tmp_path / "dl" / "missing.json"
    with pytest.raises(FileNotFoundError):
        store.download_to("missing.json", str(dest))
    assert not dest.exists()
    assert not (tmp_path / "dl").exists() or not any((tmp_path / "dl").iterdir())


def test_write_bytes_overwrites(store):
    store.write_bytes("f.json", b"old content that is longer")
    store.write_bytes("f.json", b"new")
    assert store.read_bytes("f.json") == b"new"
    store.write_text("f.json", "text")
    assert store.read_text("f.json") == "text"


def test_write_if_absent_does_not_overwrite(store):
    assert store.write_if_absent("claims/job-1", b"first") is True
    assert store.write_if_absent("claims/job-1", b"second") is False
    assert store.read_bytes("claims/job-1") == b"first"
    # An unrelated path is still writable, and plain writes still overwrite.
    assert store.write_if_absent("claims/job-2", b"x") is True
    store.write_bytes("claims/job-1", b"forced")
    assert store.read_bytes("claims/job-1") == b"forced"


def test_write_if_absent_after_write_bytes(store):
    store.write_bytes("done.json", b"{}")
    assert store.write_if_absent("done.json", b"other") is False
    assert store.read_bytes("done.json") == b"{}"


def test_list_dirs(store):
    _populate(store)
    assert store.list_dirs("") == ["a", "ab"]
    assert store.list_dirs(".") == ["a", "ab"]
    assert store.list_dirs("a") == ["b", "c"]
    assert store.list_dirs("a/") == ["b", "c"]
    assert store.list_dirs("a/c") == ["d"]
    assert store.list_dirs("a/b") == []
    assert store.list_dirs("missing") == []
    assert store.list_dirs("top.json") == []


def test_list_files_non_recursive(store):
    _populate(store)
    assert store.list_files("") == ["top.json"]
    assert store.list_files("a") == ["x.json"]
    assert store.list_files("a/c") == []
    assert store.list_files("missing") == []


def test_list_files_recursive(store):
    _populate(store)
    assert store.list_files("", recursive=True) == sorted(TREE)
    assert store.list_files("a", recursive=True) == ["b/y.json", "c/d/z.json", "x.json"]
    assert store.list_files("a/c/", recursive=True) == ["d/z.json"]
    assert store.list_files("missing", recursive=True) == []


def test_upload_from_and_download_to(store, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload\x00\xff")
    store.upload_from(str(src), "up/loaded.bin")
    assert store.read_bytes("up/loaded.bin") == b"payload\x00\xff"

    dest = tmp_path / "new" / "dir" / "out.bin"  # parents do not exist yet
    store.download_to("up/loaded.bin", str(dest))
    assert dest.read_bytes() == b"payload\x00\xff"
    # Downloading over an existing local file replaces it.
    store.write_bytes("up/loaded.bin", b"v2")
    store.download_to("up/loaded.bin", str(dest))
    assert dest.read_bytes() == b"v2"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["out.bin"]  # no temp left


def test_upload_from_missing_local_file(store, tmp_path):
    with pytest.raises(FileNotFoundError):
        store.upload_from(str(tmp_path / "absent"), "x.bin")
    assert not store.exists("x.bin")


@pytest.mark.parametrize("bad", BAD_FILE_PATHS)
def test_file_path_escape_rejected(store, tmp_path, bad):
    local = tmp_path / "local.bin"
    local.write_bytes(b"x")
    calls = [
        lambda: store.exists(bad),
        lambda: store.read_bytes(bad),
        lambda: store.read_text(bad),
        lambda: store.write_bytes(bad, b"x"),
        lambda: store.write_text(bad, "x"),
        lambda: store.write_if_absent(bad, b"x"),
        lambda: store.download_to(bad, str(tmp_path / "out")),
        lambda: store.upload_from(str(local), bad),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("bad", BAD_DIR_PATHS)
def test_dir_path_escape_rejected(store, bad):
    for call in (
        lambda: store.list_dirs(bad),
        lambda: store.list_files(bad),
        lambda: store.list_files(bad, recursive=True),
        lambda: store.url(bad),
    ):
        with pytest.raises(ValueError):
            call()


def test_url(store):
    if isinstance(store, LocalStorage):
        assert os.path.isabs(store.root)
        assert store.url("a/b.json") == os.path.join(store.root, "a", "b.json")
    else:
        assert store.root.startswith("gs://batchscale-test/")
        assert store.url("a/b.json") == f"{store.root}/a/b.json"
    assert store.url("") == store.root


def test_local_write_leaves_no_temp_files(tmp_path):
    store = open_root(str(tmp_path))
    store.write_bytes("d/f.json", b"1")
    store.write_bytes("d/f.json", b"2")
    assert store.write_if_absent("d/g.json", b"3") is True
    assert store.write_if_absent("d/g.json", b"4") is False
    assert sorted(os.listdir(tmp_path / "d")) == ["f.json", "g.json"]


def test_local_written_file_has_normal_permissions(tmp_path):
    store = open_root(str(tmp_path))
    store.write_bytes("f", b"1")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o666 & ~umask


def test_open_root_local(tmp_path, monkeypatch):
    s = open_root(str(tmp_path) + "/sub/")
    assert isinstance(s, LocalStorage)
    assert s.root == str(tmp_path / "sub")

    monkeypatch.setenv("HOME", str(tmp_path))
    home = open_root("~/studies")
    assert isinstance(home, LocalStorage)
    assert home.root == str(tmp_path / "studies")

    monkeypatch.chdir(tmp_path)
    rel = open_root("rel")
    assert rel.root == str(tmp_path / "rel")  # made absolute, immune to later chdir


@pytest.mark.parametrize(
    "bad",
    [
        "gs://",
        "gs:///prefix",
        "gs://Bad_Bucket!/x",
        "gs://b/x",  # bucket name too short
        "gs://bucket//x",
        "gs://bucket/../x",
        "gs://bucket/a/./b",
        "s3://bucket/x",
        "",
        "   ",
    ],
)
def test_open_root_malformed(bad):
    with pytest.raises(ValueError) as exc_info:
        open_root(bad)
    message = str(exc_info.value)
    assert message and "\n" not in message


def test_delete_removes_a_file_and_a_missing_one_is_no_error(store):
    _populate(store)
    store.delete("a/x.json")
    assert not store.exists("a/x.json")
    assert store.list_files("a") == []
    assert store.exists("a/b/y.json") and store.exists("top.json")  # nothing else goes
    store.delete("a/x.json")  # again: already gone
    store.delete("never/was.json")
    store.delete("a/c")  # a folder is not a file: left alone
    assert store.read_bytes("a/c/d/z.json") == TREE["a/c/d/z.json"]
    with pytest.raises(ValueError):
        store.delete("../outside.json")


def _files(folder) -> dict:
    """Every file, folder and symlink under ``folder`` (hidden ones included): its bytes,
    "folder", or where the link points."""
    out = {}
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(current, name)
            out[path] = (f"-> {os.readlink(path)}" if os.path.islink(path) else "folder"
                         if os.path.isdir(path) else open(path, "rb").read())
    return out


@pytest.fixture
def linked_out(tmp_path):
    """A local store whose 'datasets' is a symlink to a folder outside it, 'secret.json' a
    symlink to a file outside it and 'gone' a dangling symlink to an outside path."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.json").write_bytes(b"outside")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "datasets")
    os.symlink(outside / "x.json", root / "secret.json")
    os.symlink(tmp_path / "nowhere", root / "gone")
    return open_root(str(root)), outside


SYMLINK_OPERATIONS = {
    "read_bytes": lambda s, p: s.read_bytes(p),
    "exists": lambda s, p: s.exists(p),
    "write_bytes": lambda s, p: s.write_bytes(p, b"1"),
    "write_if_absent": lambda s, p: s.write_if_absent(p, b"1"),
    "delete": lambda s, p: s.delete(p),
    "list_files": lambda s, p: s.list_files(p.rpartition("/")[0] or p, recursive=True),
    "upload_from": lambda s, p: s.upload_from(__file__, p),
}


@pytest.mark.parametrize("operation", sorted(SYMLINK_OPERATIONS))
@pytest.mark.parametrize("path", ["datasets/x.json", "secret.json", "gone/new.json"])
def test_a_symlink_leading_out_of_the_root_is_refused(operation, path, linked_out, tmp_path):
    store, outside = linked_out
    before = _files(tmp_path)
    with pytest.raises(ValueError, match=r"^storage path '[^']+' leaves the store root .* through "
                                         r"the symlink .*; allowed: files inside the store root$") as err:
        SYMLINK_OPERATIONS[operation](store, path)
    assert "\n" not in str(err.value)
    assert _files(tmp_path) == before and not (tmp_path / "nowhere").exists()


def test_a_symlink_within_the_root_is_followed(tmp_path):
    store = open_root(str(tmp_path / "root"))
    store.write_bytes("study/a.json", b"1")
    os.symlink(tmp_path / "root" / "study", tmp_path / "root" / "alias")
    assert store.read_bytes("alias/a.json") == b"1"
    store.write_bytes("alias/b.json", b"2")
    assert store.read_bytes("study/b.json") == b"2"


def test_a_store_root_that_is_itself_a_symlink_is_its_target(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "root")
    store = open_root(str(tmp_path / "root"))
    store.write_bytes("a/b.json", b"1")
    assert (tmp_path / "real" / "a" / "b.json").read_bytes() == b"1"


def test_check_store_writable_passes_and_leaves_no_trace(tmp_path):
    from batchscale.store.filesystem import check_store_writable

    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "a.json").write_bytes(b"1")
    before = _files(tmp_path)
    check_store_writable(str(tmp_path / "store"))  # an existing folder: probed
    check_store_writable(str(tmp_path / "new" / "deeper"))  # missing: its ancestor is probed
    check_store_writable("gs://bucket/prefix")  # not checked here
    assert _files(tmp_path) == before  # the probe is gone and the missing root was not created


@pytest.mark.parametrize("root,message", [
    ("{tmp}/file", "store: {tmp}/file exists and is not a folder; allowed: a local folder or gs://"),
    ("{tmp}/file/sub/store", "store: {tmp}/file/sub/store cannot be created: {tmp}/file is a file"),
    ("s3://bucket/x", "store: 's3://bucket/x' is a URL batchscale cannot store to"),
    ("/proc", "store: /proc is not writable ("),  # not even root may create files there
    ("/proc/batchscale/store", "store: /proc/batchscale/store cannot be created in /proc ("),
])
def test_check_store_writable_refuses_with_one_line(root, message, tmp_path):
    from batchscale.core.errors import SpecError
    from batchscale.store.filesystem import check_store_writable

    if root.startswith("/proc") and not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux /proc")
    (tmp_path / "file").write_bytes(b"1")
    before = _files(tmp_path)
    with pytest.raises(SpecError) as err:
        check_store_writable(root.format(tmp=tmp_path))
    assert str(err.value).startswith(message.format(tmp=tmp_path)), err.value
    assert "\n" not in str(err.value) and _files(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only folder")
def test_check_store_writable_refuses_a_read_only_folder(tmp_path):
    from batchscale.core.errors import SpecError
    from batchscale.store.filesystem import check_store_writable

    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    try:
        with pytest.raises(SpecError, match="is not writable"):
            check_store_writable(str(tmp_path / "ro"))
        with pytest.raises(SpecError, match="cannot be created in"):
            check_store_writable(str(tmp_path / "ro" / "store"))
        assert os.listdir(tmp_path / "ro") == []
    finally:
        os.chmod(tmp_path / "ro", 0o755)
