"""Every hostile user workload through the real command: each data-file case of
docs/bad-input.md ("Your data files") and each model-function case ("Your model
function"), given to ``batchscale run --local`` as a spec file, exits 2 with exactly one
line on stderr naming the field, writes nothing to stdout, starts nothing and leaves a
store that already holds a study and a prepared data set byte-identical.

The command runs in this process (``batchscale.cli.main.main``, the console script's own
entry), so the 52 cases share one Keras import; tests/integration/test_user_model_cli.py
runs two of them in a child process as well.
"""

from __future__ import annotations

import pytest
import yaml

from batchscale.cli.main import main
from batchscale.core.spec import DataFiles
from batchscale.store.layout import StudyStore
from batchscale.validation import default_spec_dict, parse_spec
from batchscale.workloads.data_files import describe
from batchscale.workloads.prepare import prepare_dataset
from tests.integration.test_cli_bad_input import _snapshot
from tests.unit.test_data_files_hostile import CASES as DATA_CASES
from tests.unit.test_user_model import BAD_MODELS, GOOD

GOALS = {"classification": "classification_error<0.1", "regression": "mean_squared_error<0.1",
         "multilabel": "average_precision>0.5", "language_model": "cross_entropy_error<3"}


@pytest.fixture
def store(tmp_path):
    """A store holding the quickstart study and a prepared user data set."""
    import numpy as np

    root = tmp_path / "store"
    StudyStore(str(root)).register_study(parse_spec({**default_spec_dict(), "store": str(root)}))
    good = tmp_path / "good.npz"
    np.savez(good, x_train=np.random.default_rng(0).random((60, 4)), y_train=np.arange(60) % 3)
    prepare_dataset(StudyStore(str(root)), describe(DataFiles(str(good), "npz"), "classification"),
                    log=lambda *_: None)
    return root


def _refused(tmp_path, store, capsys, workload: dict, task: str) -> str:
    """Run ``batchscale run --local`` on a spec of ``workload``; the one line it printed."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "own", "store": str(store), "workload": workload,
                                    "goals": [GOALS[task]]}))
    work = tmp_path / "work"
    before = _snapshot(store)
    code = main(["run", "--local", str(spec), "--work-dir", str(work)])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchscale: error: workload."), err
    assert out == "" and _snapshot(store) == before and not work.exists()
    return lines[0]


@pytest.mark.parametrize("case", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_hostile_data_files_exit_2_in_one_line(case, tmp_path, store, capsys):
    _, write, fmt, task, options, expected = case
    (tmp_path / "data").mkdir()
    model = tmp_path / "model.py"
    model.write_text(GOOD)
    workload = {"dataset": {"path": str(write(tmp_path / "data")), "format": fmt, **options},
                "task": task, "model": f"{model}:build"}
    line = _refused(tmp_path, store, capsys, workload, task)
    assert line.startswith("batchscale: error: workload.dataset: ") and expected in line, line


@pytest.mark.parametrize("case", BAD_MODELS, ids=[c[0] for c in BAD_MODELS])
def test_hostile_model_functions_exit_2_in_one_line(case, tmp_path, store, capsys):
    _, _, text, function, message = case
    path = tmp_path / "model_bad.py"
    if text is not None:
        path.write_text(text)
        reference = f"{path}:{function}"
    else:
        reference = function.format(tmp=tmp_path)
    workload = {"dataset": "digits", "model": reference}
    line = _refused(tmp_path, store, capsys, workload, "classification")
    expected = f"batchscale: error: workload.model: {message.format(tmp=tmp_path, file=path)}"
    assert line.startswith(expected), line


def test_a_data_file_changed_since_its_preparation_exits_2_before_anything_starts(
        tmp_path, store, capsys, monkeypatch):
    """A relative data path, as a user writes it: the store names the data set by the
    absolute path run --local hands on, and the CLI compares that copy's recorded sha256
    with the file before it starts a pipeline."""
    import numpy as np

    monkeypatch.chdir(tmp_path)
    x, y = np.random.default_rng(1).random((60, 4)), np.arange(60) % 3
    np.savez(tmp_path / "mine.npz", x_train=x, y_train=y)
    (tmp_path / "model.py").write_text(GOOD)
    workload = {"dataset": {"path": "mine.npz", "format": "npz"}, "model": "model.py:build"}
    spec = parse_spec({"name": "mine", "store": str(store), "workload": workload,
                       "goals": [GOALS["classification"]]})
    from batchscale.validation.workload_spec import absolute_paths

    prepare_dataset(StudyStore(str(store)), describe(absolute_paths(spec.workload).data,
                                                     "classification"), log=lambda *_: None)
    y[0] = 2 if y[0] != 2 else 1
    np.savez(tmp_path / "mine.npz", x_train=x, y_train=y)
    line = _refused(tmp_path, store, capsys, workload, "classification")
    assert line.startswith(f"batchscale: error: workload.dataset: {tmp_path}/mine.npz: changed since "
                           "it was prepared"), line
