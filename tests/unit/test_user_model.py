"""A user's model function: its reference in a spec, its own parameters, the defaults of
a user's workload, and the deep check (``training.workload_check``): each problem with the
user's code is one line ``workload.model: ...`` naming it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from batchscale.core.errors import SpecError
from batchscale.core.names import model_folder
from batchscale.training.workload_check import check_user_workload, parameter_points
from batchscale.validation import parse_spec
from batchscale.validation.workload_spec import absolute_paths
from batchscale.workloads.defaults import user_batch_sizes
from batchscale.workloads.models import build_model
from batchscale.workloads.models.user_model import model_parameters

GOOD = """
import keras


def build(params):
    return keras.Sequential([keras.Input(shape=params["input_shape"]), keras.layers.Flatten(),
                             keras.layers.Dense(int(params.get("units", 8))),
                             keras.layers.Dense(params["num_classes"])])
"""


def _raw(model: str, **changes) -> dict:
    raw = {"name": "own", "store": "/tmp/unused-store", "goals": ["classification_error<0.1"],
           "workload": {"dataset": "digits", "model": model}}
    raw.update(changes)
    return raw


def _file(tmp_path, text: str, name: str = "m.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---- the reference and the spec ----------------------------------------------------------
def test_a_relative_file_is_read_here_and_made_absolute_for_others(tmp_path, monkeypatch):
    _file(tmp_path, GOOD)
    monkeypatch.chdir(tmp_path)
    spec = parse_spec(_raw("m.py:build"))
    assert spec.workload.model == "m.py:build"  # as written (a cluster's refusal quotes it)
    check_user_workload(spec)  # read against the current directory
    moved = absolute_paths(spec.workload)  # what run --local hands its kfp.local tasks
    assert moved.model == f"{tmp_path}/m.py:build" and moved.path == spec.workload.path
    assert spec.workload.path == "digits/m.build/nesterov_momentum"  # the paper's optimizer
    np.savez(tmp_path / "d.npz", x_train=np.zeros((20, 3), np.float32), y_train=np.arange(20) % 2)
    data = parse_spec(_raw("m.py:build", workload={"dataset": {"path": "d.npz", "format": "npz"},
                                                   "model": "m.py:build"})).workload
    moved = absolute_paths(data)
    assert moved.data.path == f"{tmp_path}/d.npz" and moved.dataset == moved.data.name
    assert absolute_paths(moved) == moved and absolute_paths(parse_spec(_raw("pkg.nets:build"))
                                                             .workload).model == "pkg.nets:build"


def test_a_user_workloads_defaults_follow_the_data(tmp_path):
    spec = parse_spec(_raw(f"{_file(tmp_path, GOOD)}:build"))
    # digits: 1,297 training examples -> powers of two from 8 up to 1297 // 8 = 162
    assert spec.batch_sizes == (8, 16, 32, 64, 128) and spec.trials_per_batch_size == 6
    assert [p.name for p in spec.search_space] == ["learning_rate", "momentum"]
    assert spec.max_steps[8] == 3243 and spec.max_steps[128] == 203  # 20 epochs, >= 200
    assert parse_spec(_raw("pkg.nets:build")).workload.model == "pkg.nets:build"  # not imported


def test_user_batch_sizes_and_model_folders():
    assert user_batch_sizes(60_000) == tuple(2 ** k for k in range(3, 13))
    assert user_batch_sizes(100) == (8,) and user_batch_sizes(20) == (2,) and user_batch_sizes(3) == (1,)
    assert model_folder("fc_128") == "fc_128" and model_folder("pkg.nets:build") == "pkg.nets.build"
    assert model_folder("/a b/my model.py:build") == "my_model.build"


@pytest.mark.parametrize("raw,message", [
    (_raw("m.py:build", goals=None),
     "goals: is required for your own model or data (a goal's value cannot be guessed); e.g. "
     "classification_error<0.1 (task classification measures classification_error, "
     "cross_entropy_error)"),
    (_raw("m.py:"), "workload.model: 'm.py:' does not name a function; allowed: 'module:function' or "
                    "'path/to/file.py:function'"),
    (_raw("models/m:build"), "workload.model: 'models/m:build': 'models/m' is neither a module name "
                             "nor a .py file"),
    (_raw("m.py:build", fixed={"input_shape": 3, "momentum": 0.9}),
     "fixed.input_shape: 'input_shape' cannot name a model parameter; allowed: an identifier other "
     "than input_shape, num_classes (which the trainer passes)"),
    (_raw("m.py:build", fixed={"units": "wide", "momentum": 0.9}),
     "fixed.units: 'wide' is not a finite number"),
    ({**_raw("fc_32"), "fixed": {"units": 16, "momentum": 0.9}},
     "fixed.units: unknown parameter; allowed: learning_rate"),
])
def test_bad_references_and_parameters_get_one_line(raw, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if raw["goals"] is None:
        del raw["goals"]
    with pytest.raises(SpecError) as err:
        parse_spec(raw)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_model_parameters_reach_the_function_and_only_they(tmp_path):
    model = f"{_file(tmp_path, GOOD)}:build"
    spec = parse_spec(_raw(model, fixed={"momentum": 0.9, "units": 24},
                           search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1},
                                         "depth": {"scale": "linear", "min": 1, "max": 3,
                                                   "integer": True}}))
    assert spec.fixed == {"momentum": 0.9, "units": 24}
    assert model_parameters({"learning_rate": 0.1, "momentum": 0.9, "decay_steps": 9, "units": 24,
                             "depth": 2}) == {"depth": 2, "units": 24}
    # the middle of the search, and its two ends because the model's own depth is searched
    assert [p["depth"] for p in parameter_points(spec)] == [2, 1, 3]
    built = build_model(model, (8, 8, 1), 10, parameters={"units": 24, "learning_rate": 0.1})
    assert built.layers[-2].units == 24 and built.output_shape == (None, 10)


# ---- the deep check ------------------------------------------------------------------------
# (id, the problem (docs/bad-input.md), file text or None for a reference without a file,
#  function, message start)
BAD_MODELS = [
    ("module-missing", "a module that is not installed",
     None, "no_such_module_xyz:build",
     "module 'no_such_module_xyz' is not importable: no module named 'no_such_module_xyz'"),
    ("file-missing", "a .py file that does not exist",
     None, "{tmp}/absent.py:build", "{tmp}/absent.py: no such file"),
    ("syntax-error", "a file with a syntax error",
     "import keras\n\ndef build(params:\n    return 1\n", "build",
     "{file}, line 3: SyntaxError: "),
    ("import-fails", "a file whose import raises (a missing dependency)",
     "import no_such_dependency_xyz\n", "build",
     "importing {file} raised ModuleNotFoundError: No module named 'no_such_dependency_xyz'"),
    ("no-function", "a file without the named function",
     GOOD, "make", "{file} has no function 'make'"),
    ("not-callable", "a name that is no function",
     "build = 3\n", "build", "{file}:build is not callable (it is a int)"),
    ("raises", "a function that raises",
     "def build(params):\n    raise RuntimeError('no GPU here')\n", "build",
     "{file}:build raised RuntimeError: no GPU here"),
    ("not-a-model", "a function returning no keras.Model",
     "def build(params):\n    return {'layers': 2}\n", "build",
     "{file}:build returned dict, not a keras.Model"),
    ("wrong-shape", "classification logits of the wrong width",
     GOOD.replace('params["num_classes"]', "5"), "build",
     "the model's output has shape (2, 5) on a batch of shape (2, 8, 8, 1); task classification "
     "needs (2, 10)"),
    ("probabilities", "a final softmax (probabilities, not logits)",
     GOOD.replace('params["num_classes"])', 'params["num_classes"], activation="softmax")'),
     "build",
     "the model returns probabilities (each row sums to 1): return logits"),
    ("non-finite", "NaN outputs at initialisation",
     GOOD.replace("keras.layers.Flatten(),",
                  "keras.layers.Flatten(), keras.layers.Lambda(lambda x: x * float('nan')),"),
     "build", "the training loss at initialisation is nan on a batch of random inputs: its outputs "
              "hold NaN or inf"),
    ("raises-on-the-batch", "a model that cannot take the data's shape",
     GOOD.replace('shape=params["input_shape"]', "shape=(3,)"), "build",
     "the model raised ValueError: "),
]


@pytest.mark.parametrize("text,function,message", [c[2:] for c in BAD_MODELS],
                         ids=[c[0] for c in BAD_MODELS])
def test_the_deep_check_names_each_problem_in_one_line(text, function, message, tmp_path):
    path = str(tmp_path / f"model_{abs(hash(message)) % 10**8}.py")
    if text is not None:
        with open(path, "w") as fh:
            fh.write(text)
        reference = f"{path}:{function}"
    else:
        reference = function.format(tmp=tmp_path)
    spec = parse_spec(_raw(reference, fixed={"momentum": 0.9},
                           search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1}}))
    with pytest.raises(SpecError) as err:
        check_user_workload(spec)
    text_ = str(err.value)
    assert "\n" not in text_
    expected = f"workload.model: {message.format(tmp=tmp_path, file=path)}"
    assert text_.startswith(expected), text_


def test_a_sound_model_passes_and_a_registry_workload_is_not_checked(tmp_path):
    check_user_workload(parse_spec(_raw(f"{_file(tmp_path, GOOD)}:build")))
    registry = parse_spec({**_raw("fc_32"), "batch_sizes": [8], "max_steps": 10,
                           "search_space": {"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1}},
                           "fixed": {"momentum": 0.9}})
    check_user_workload(registry)  # returns at once: nothing to import
    assert os.path.exists(tmp_path / "m.py")


def test_regression_outputs_must_match_the_targets(tmp_path):
    """A user's .npz of two targets per example: a model ending in Dense(1) is refused
    (its (B, 1) output would broadcast against (B, 2) targets); Dense(num_classes) passes."""
    data = tmp_path / "reg.npz"
    np.savez(data, x_train=np.random.default_rng(0).random((40, 3), dtype=np.float32),
             y_train=np.zeros((40, 2), np.float32))

    def spec(text, name):
        raw = _raw(f"{_file(tmp_path, text, name)}:build", goals=["mean_squared_error<0.1"])
        raw["workload"] = {**raw["workload"], "dataset": {"path": str(data), "format": "npz"},
                           "task": "regression"}
        return parse_spec(raw)

    with pytest.raises(SpecError, match=r"^workload\.model: the model's output has shape \(2, 1\) on a "
                       r"batch of shape \(2, 3\); task regression needs \(2, 2\) \(batch, values per "
                       r"target: e\.g\. end with keras\.layers\.Dense\(num_classes\)\)$"):
        check_user_workload(spec(GOOD.replace('params["num_classes"]', "1"), "one_output.py"))
    good = spec(GOOD, "outputs.py")
    assert good.batch_sizes == (4,) and good.workload.task == "regression"  # 36 train // 8 = 4
    check_user_workload(good)


def test_integral_model_values_survive_a_protobuf_struct(tmp_path):
    """KFP hands a spec over as a protobuf Struct, where every number is a float: the
    spec parsed there is the same study (its fixed and discrete model values read as ints)."""
    model = f"{_file(tmp_path, GOOD)}:build"
    raw = _raw(model, fixed={"momentum": 0.9, "units": 128},
               search_space={"learning_rate": {"scale": "log", "min": 0.01, "max": 0.1},
                             "depth": {"scale": "discrete", "values": [1, 2]}})
    spec = parse_spec(raw)
    crossed = parse_spec({**raw, "fixed": {"momentum": 0.9, "units": 128.0},
                          "search_space": {**raw["search_space"],
                                           "depth": {"scale": "discrete", "values": [1.0, 2.0]}}})
    assert crossed.to_dict() == spec.to_dict() and crossed.fixed["units"] == 128
    assert isinstance(crossed.fixed["units"], int)


def test_docs_bad_input_lists_every_model_case():
    """docs/bad-input.md's "Your model function" table: one row per case above, the same
    problem and start of message (FILE and DIR for the paths of the test's files)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "bad-input.md").read_text()
    section = doc.split("## Your model function", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1], cells[2].strip("`"))
    expected = {case: (problem, "workload.model: " + message.replace("{tmp}", "DIR")
                       .replace("{file}", "FILE"))
                for case, problem, _, _, message in BAD_MODELS}
    assert rows == expected
    assert f"Cases tested: {len(BAD_MODELS)}," in section
