"""Bad input through the real ``batchscale`` command, a child process: exit 2, exactly one
line on stderr naming the field, and the disk untouched: a store that already holds a
study is byte-identical afterwards, and ``run --local`` starts nothing (no work folder, no
local folder named after a URL). docs/bad-input.md lists these cases among the rest.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from batchscale.store.layout import StudyStore
from batchscale.validation import default_spec_dict, parse_spec

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "batchscale" / "studies" / "quickstart.yaml").read_text()


@pytest.fixture
def disk(tmp_path):
    """An empty working folder and a store already holding study 'quickstart'."""
    store = tmp_path / "store"
    spec = parse_spec({**default_spec_dict(), "store": str(store)})
    StudyStore(str(store)).register_study(spec)
    (store / "quickstart" / "notes.txt").write_text("a finished trial would be here\n")
    (tmp_path / "outside").mkdir()  # study 'linked' reaches out of the store through a link
    (store / "linked").mkdir()
    os.symlink(tmp_path / "outside", store / "linked" / "mnist_5k")
    work = tmp_path / "work"
    work.mkdir()
    return work, store


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file's hash and every folder under ``folder``, by relative path."""
    out = {}
    for current, dirs, files in os.walk(folder):
        for name in dirs:
            out[os.path.relpath(os.path.join(current, name), folder)] = "folder"
        for name in files:
            path = os.path.join(current, name)
            out[os.path.relpath(path, folder)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def _spec_file(work: Path, store: Path, old: str, new: str) -> str:
    """The quickstart's YAML, pointed at ``store``, with one piece of text replaced."""
    assert old in QUICKSTART
    text = QUICKSTART.replace("store: ./batchscale-store", f"store: {store}").replace(old, new, 1)
    path = work.parent / "spec.yaml"
    path.write_text(text)
    return str(path)


CASES = [  # (id, argv after `batchscale` given the store and a spec-file maker, field)
    ("validate-store-s3", lambda store, spec: ["validate", "--store", "s3://bkt/x"], "store"),
    ("validate-duplicate-key", lambda store, spec: ["validate", spec("name: quickstart\n",
                                                                     "name: quickstart\nname: other\n")],
     "spec file"),
    ("validate-batch-sizes-scalar", lambda store, spec: [
        "validate", spec("batch_sizes: [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4000]", "batch_sizes: 16")],
     "batch_sizes"),
    ("run-goal-out-of-range", lambda store, spec: [
        "run", "--local", "--store", str(store), "--goal", "classification_error<1.5"], "goals[0]"),
    ("run-workload-with-spec", lambda store, spec: [
        "run", "--local", spec("seed: 0", "seed: 0"), "--workload", "cifar_10/resnet_8"], "--workload"),
    ("run-seed-negative", lambda store, spec: ["run", "--local", "--store", str(store), "--seed", "-1"],
     "seed"),
    ("run-store-s3", lambda store, spec: ["run", "--local", "--store", "s3://bkt/x"], "store"),
    ("run-store-is-a-file", lambda store, spec: [
        "run", "--local", "--store", str(store / "quickstart" / "notes.txt")], "store"),
    ("run-symlink-out-of-the-store", lambda store, spec: [
        "run", "--local", "--store", str(store), "--name", "linked"], "store"),
]


@pytest.mark.parametrize("argv,field", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line_and_the_disk_untouched(argv, field, disk):
    work, store = disk
    args = argv(store, lambda old, new: _spec_file(work, store, old, new))
    before = _snapshot(store)
    result = subprocess.run([sys.executable, "-m", "batchscale.cli", *args], cwd=work,
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"batchscale: error: {field}: "), result.stderr
    assert result.stdout == ""
    assert _snapshot(store) == before
    assert list(work.iterdir()) == []  # no .batchscale work folder, no folder named s3:
    assert list((store.parent / "outside").iterdir()) == []  # nothing through the link
