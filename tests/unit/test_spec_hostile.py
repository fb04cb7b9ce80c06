"""Hostile input: every way a bad study spec arrives (a field in a dict, a YAML file, a CLI
flag) is refused before anything runs, with exit 2 and one line naming the field, the
problem and what is allowed; never a traceback or a message that names no field.

docs/bad-input.md lists every case here in one table (case, exit code, the start of the
message); ``test_the_doc_lists_every_case`` keeps the table and these lists in step.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from batchscale.cli.main import main
from batchscale.core.spec import SpecError
from batchscale.validation import default_spec_dict, parse_spec, resolve_spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"
ERROR = "batchscale: error: "
LR = "search_space.learning_rate"


def _quickstart(changes: dict) -> dict:
    """The quickstart spec with fields changed, by dotted path (``"workload.optimizer"``)."""
    raw = copy.deepcopy(default_spec_dict())
    for path, value in changes.items():
        target, keys = raw, path.split(".") if isinstance(path, str) else [path]
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return raw


# (case, the quickstart's fields changed, start of the message). Reached by parse_spec
# directly: the one door every YAML file, flag and KFP parameter goes through.
SPEC_CASES = [
    ("store-s3-url", {"store": "s3://bkt/x"}, "store: 's3://bkt/x' is a URL batchscale cannot store to"),
    ("store-gs-typo", {"store": "gs:/bkt/x"}, "store: 'gs:/bkt/x' is a URL batchscale cannot store to"),
    ("store-gs-uppercase", {"store": "GS://bkt/x"}, "store: 'GS://bkt/x' is a URL"),
    ("store-gs-bad-bucket", {"store": "gs://A_B/x"},
     "store: malformed GCS root 'gs://A_B/x': invalid bucket name 'A_B'"),
    ("store-list", {"store": ["a", "b"]}, "store: ['a', 'b'] is not a string (list)"),
    ("store-blank", {"store": "  "}, "store: '  ' is empty"),
    ("name-list", {"name": ["a"]}, "name: ['a'] is not a string (list)"),
    ("name-number", {"name": 12}, "name: 12 is not a string (int); quote it in YAML"),
    ("name-trailing-newline", {"name": "abc\n"}, "name: 'abc\\n' is not allowed"),
    ("unknown-non-string-key", {1: 2, "colour": 3}, "1: unknown field"),
    ("goal-above-range", {"goals": ["classification_error<1.5"]},
     "goals[0]: classification_error<1.5 is out of range for classification_error, which lies in [0, 1]"),
    ("goal-at-reached-end", {"goals": ["classification_error<1"]},
     "goals[0]: classification_error<1 is out of range"),
    ("goal-negative-loss", {"goals": [{"metric": "cross_entropy_error", "value": -1}]},
     "goals[0]: cross_entropy_error<-1 is out of range"),
    ("goal-repeated",
     {"goals": ["classification_error<0.1", {"metric": "classification_error", "value": 0.1}]},
     "goals[1]: classification_error<0.1 repeats goals[0]"),
    ("goal-value-bool", {"goals": [{"metric": "classification_error", "value": True}]},
     "goals[0].value: True is not a finite number"),
    ("goals-null", {"goals": None}, "goals: is null"),
    ("goals-empty", {"goals": []}, "goals: must be a non-empty list, got []"),
    ("batch-sizes-scalar", {"batch_sizes": 16}, "batch_sizes: must be a non-empty list of positive "
     "integers, got 16; write [16]"),
    ("batch-sizes-bool", {"batch_sizes": [True]}, "batch_sizes: True is not an integer"),
    ("batch-sizes-null", {"batch_sizes": None}, "batch_sizes: is null"),
    ("seed-negative", {"seed": -1},
     "seed: -1 is out of range; allowed: an integer >= 0 and <= 4,294,967,295"),
    ("seed-too-large", {"seed": 2**32}, "seed: 4294967296 is out of range"),
    ("seed-bool", {"seed": True}, "seed: True is not an integer"),
    ("trials-huge", {"trials_per_batch_size": 10**9},
     "trials_per_batch_size: 1000000000 is out of range; allowed: an integer >= 1 and <= 10,000"),
    ("parallelism-huge", {"parallelism": 10**6}, "parallelism: 1000000 is out of range"),
    ("pack-size-huge", {"pack_size": 10**6}, "pack_size: 1000000 is out of range"),
    ("max-steps-huge", {"max_steps": 10**12}, "max_steps: 1000000000000 is out of range"),
    ("max-steps-bad-key", {"max_steps": {"abc": 100}},
     "max_steps: key 'abc' is not a batch size; keys are batch sizes"),
    ("max-steps-list", {"max_steps": [100]}, "max_steps: [100] is neither an integer nor a map"),
    ("max-steps-null-budget", {"max_steps": dict.fromkeys(default_spec_dict()["batch_sizes"])},
     "max_steps.8: None is not an integer"),
    ("workload-string", {"workload": "mnist_5k"},
     "workload: must be a mapping {dataset, model, optimizer} (optionally task, precision, "
     "options), got str"),
    ("workload-unknown-key", {"workload.colour": 1}, "workload.colour: unknown key"),
    ("workload-no-model", {"workload": {"dataset": "mnist_5k"}}, "workload.model: is required"),
    ("workload-optimizer-empty", {"workload.optimizer": ""}, "workload.optimizer: unknown optimizer ''"),
    ("workload-options-list", {"workload.options": []},
     "workload.options: must map option names to integers"),
    ("fixed-list", {"fixed": []}, "fixed: must map parameter names to values, got []"),
    ("fixed-null", {"fixed": None}, "fixed: is null"),
    ("fixed-nan", {"fixed.label_smoothing": float("nan")},
     "fixed.label_smoothing: nan is not a finite number"),
    ("evaluation-list", {"evaluation": []}, "evaluation: must be a mapping, got []"),
    ("evaluation-unknown-key", {"evaluation.every": 5}, "evaluation.every: unknown key"),
    ("evaluation-resolution-inf", {"evaluation.resolution": float("inf")},
     "evaluation.resolution: inf is not a finite number"),
    ("search-space-integer-not-bool", {f"{LR}.integer": "yes"}, f"{LR}.integer: 'yes' is not a boolean"),
    ("search-space-integer-rounds-to-zero", {f"{LR}.integer": True},
     f"{LR}.integer: 0 is out of range; learning_rate must be a number > 0"),
    ("search-space-discrete-extra-key",
     {"search_space.learning_rate": {"scale": "discrete", "values": [0.1], "min": 0}},
     f"{LR}.min: unknown key for scale discrete"),
    ("decay-steps-huge",
     {"schedule": "linear", "fixed.end_learning_rate_factor": 0.1, "fixed.decay_steps": 10**12},
     "fixed.decay_steps: 1e+12 is too large; decay_steps must be at most 1,000,000,000"),
    ("checkpoint-seconds-text", {"checkpoint_seconds": "10"},
     "checkpoint_seconds: '10' is not a finite number"),
    ("protocol-unknown", {"protocol": "fast"}, "protocol: unknown protocol 'fast'; allowed: full"),
    ("max-rounds-zero", {"max_rounds": 0},
     "max_rounds: 0 is out of range; allowed: an integer >= 1 and <= 20"),
    ("trial-cap-below-trials", {"max_trials_per_batch_size": 5},
     "max_trials_per_batch_size: 5 is below trials_per_batch_size (10)"),
    ("price-negative", {"price_per_device_hour": -2.5},
     "price_per_device_hour: -2.5 is not allowed; allowed: 0 (the price table's list price"),
    ("price-text", {"price_per_device_hour": "$3"}, "price_per_device_hour: '$3' is not a finite number"),
    ("new-batch-sizes-search-unknown", {"new_batch_sizes": {"search": "laws"}},
     "new_batch_sizes.search: unknown value 'laws'; allowed: search_space, fitted_box"),
    ("new-batch-sizes-trials-above", {"new_batch_sizes": {"search": "fitted_box", "trials": 11}},
     "new_batch_sizes.trials: 11 is out of range; allowed: an integer >= 0 and <= 10"),
    ("new-batch-sizes-not-mapping", {"new_batch_sizes": "fitted_box"},
     "new_batch_sizes: must be a mapping, got 'fitted_box'; allowed keys: search, trials"),
]

# (case, argv after ``validate``, start of the message): the flags through the real CLI
# root, in this process (its one way out: one line on stderr, exit 2).
FLAG_CASES = [
    ("flag-store-s3", ["--store", "s3://bkt/x"], "store: 's3://bkt/x' is a URL"),
    ("flag-goal-out-of-range", ["--goal", "classification_error<1.5"],
     "goals[0]: classification_error<1.5 is out of range"),
    ("flag-goal-no-comparison", ["--goal", "classification_error"],
     "--goal: 'classification_error' has no comparison; the shell may have taken '<VALUE' or "
     "'>VALUE' as a redirection: quote the goal, --goal 'classification_error<VALUE'"),
    ("flag-workload-with-spec", ["quickstart", "--workload", "cifar_10/resnet_8"],
     "--workload: cannot be combined with a SPEC (quickstart); use --dataset and --model"),
    ("flag-workload-malformed", ["--workload", "cifar_10"], "--workload: 'cifar_10' must be DATASET/MODEL"),
    ("flag-trials-not-a-number", ["--trials", "abc"], "trials_per_batch_size: 'abc' is not an integer"),
    ("flag-seed-negative", ["--seed", "-1"], "seed: -1 is out of range"),
    ("flag-price-huge", ["--price", "1e9"], "price_per_device_hour: 1000000000.0 is not allowed"),
    ("flag-parallelism-zero", ["--parallelism", "0"], "parallelism: 0 is out of range"),
    ("flag-max-steps-fraction", ["--max-steps", "2.5"], "max_steps: 2.5 is not an integer"),
]

ROOT = Path(__file__).resolve().parents[2]
_QUICKSTART_TEXT = (ROOT / "batchscale" / "studies" / "quickstart.yaml").read_text()


def _yaml(old: str, new: str) -> bytes:
    """The quickstart's YAML with one piece of text replaced."""
    assert old in _QUICKSTART_TEXT
    return _QUICKSTART_TEXT.replace(old, new, 1).encode()


# (case, the file's bytes, extra flags, start of the message; SPEC stands for the path).
FILE_CASES = [
    ("file-duplicate-key", _QUICKSTART_TEXT.encode() + b"name: other\n", [],
     "spec file: SPEC line 32: key 'name' is given twice (first on line 6)"),
    ("file-duplicate-nested-key", _yaml("  model: fc_128_128\n", "  model: fc_128_128\n  model: fc_32\n"), [],
     "spec file: SPEC line 11: key 'model' is given twice (first on line 10)"),
    ("file-workload-string", _yaml("workload:\n  dataset: mnist_5k\n  model: fc_128_128\n  optimizer: "
                                   "nesterov_momentum\n", "workload: mnist_5k\n"), [],
     "workload: must be a mapping {dataset, model, optimizer}"),
    ("file-goals-null", _yaml("  - {metric: classification_error, value: 0.08}\n", ""), [], "goals: is null"),
    ("file-batch-sizes-scalar", _yaml("batch_sizes: [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4000]",
                                      "batch_sizes: 16"), [], "batch_sizes: must be a non-empty list"),
    ("file-max-steps-key-with-batch-sizes-flag",
     _yaml("max_steps: {8: 5000,", "max_steps: {abc: 1, 8: 5000,"),
     ["--batch-sizes", "8,16"], "max_steps: key 'abc' is not a batch size"),
    ("file-tab-indent", _yaml("  model: fc_128_128\n", "\tmodel: fc_128_128\n"), [],
     "spec file: SPEC line 10, column 1 ('\\tmodel: fc_128_128'): found character '\\t' that cannot "
     "start any token (while scanning for the next token); YAML indents with spaces, not tabs"),
    ("file-indent-deeper", _yaml("  optimizer:", "   optimizer:"), [],
     "spec file: SPEC line 11, column 13 ('   optimizer: nesterov_momentum'): mapping values are "
     "not allowed here; a line indented deeper than the key above it"),
    ("file-indent-shallower", _yaml("  model: fc_128_128\n", " model: fc_128_128\n"), [],
     "spec file: SPEC line 10, column 2 (' model: fc_128_128'): expected <block end>, but found "
     "'<block mapping start>' (while parsing a block mapping started on line 6, column 1); a line "
     "indented less than the lines of its block"),
    ("file-not-utf8", b"name: \xff\xfe\n", [], "spec file: SPEC is not UTF-8 text"),
    ("file-is-a-folder", None, [], "spec file: SPEC cannot be read (Is a directory)"),
]


def _one_error_line(capsys) -> str:
    """The one line the CLI wrote on stderr, without the ``batchscale: error: `` prefix."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(ERROR), err
    return err[len(ERROR):].rstrip("\n")


@pytest.mark.parametrize("changes,start", [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_bad_spec_field_is_one_line_naming_it(changes, start):
    with pytest.raises(SpecError) as err:
        parse_spec(_quickstart(changes))
    message = str(err.value)
    assert message.startswith(start), message
    assert "\n" not in message


@pytest.mark.parametrize("argv,start", [c[1:] for c in FLAG_CASES], ids=[c[0] for c in FLAG_CASES])
def test_bad_flag_exits_2_with_one_line(argv, start, capsys):
    assert main(["validate", *argv]) == 2
    message = _one_error_line(capsys)
    assert message.startswith(start), message


@pytest.mark.parametrize("content,flags,start", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_bad_spec_file_exits_2_with_one_line(content, flags, start, tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    assert main(["validate", str(path), *flags]) == 2
    message = _one_error_line(capsys)
    assert message.startswith(start.replace("SPEC", str(path))), message


def test_the_kfp_parameter_goes_through_the_same_door():
    raw = default_spec_dict()
    with pytest.raises(SpecError, match=r"^store: 's3://bkt/x' is a URL"):
        resolve_spec(raw, "s3://bkt/x")
    with pytest.raises(SpecError, match=r"^seed: -1 is out of range"):
        resolve_spec({**raw, "seed": -1}, "gs://bucket/prefix")


def test_the_edges_of_each_range_are_accepted():
    """The caps are refusals of nonsense, not of big studies: each limit itself passes."""
    spec = parse_spec(_quickstart({"seed": 2**32 - 1, "trials_per_batch_size": 10_000, "parallelism": 1_000,
                                   "pack_size": 10_000, "max_steps": 10**9}))
    assert (spec.seed, spec.trials_per_batch_size, spec.parallelism) == (2**32 - 1, 10_000, 1_000)
    assert spec.max_steps[8] == 10**9 and spec.pack_size == 10_000
    assert parse_spec(_quickstart({"goals": ["classification_error<0"]})).goals[0].value == 0.0  # to budget
    assert parse_spec(_quickstart({"goals": ["cross_entropy_error<25"]})).goals[0].value == 25.0
    assert parse_spec(_quickstart({"name": "12"})).name == "12"
    as_json_keys = {"max_steps": {str(b): 10 for b in spec.batch_sizes}}  # as JSON and KFP write them
    assert parse_spec(_quickstart(as_json_keys)).max_steps[8] == 10
    assert parse_spec(_quickstart({"workload.optimizer": None})).workload.optimizer == "nesterov_momentum"


def test_the_doc_lists_every_case():
    """docs/bad-input.md has one row per case above, with the same start of message."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`[a-z0-9-]+`", cells[0]):
            assert cells[2] == "2", line
            rows[cells[0].strip("`")] = cells[3].strip("`").replace("\\|", "|")
    expected = {case: start for case, *_, start in [*SPEC_CASES, *FLAG_CASES, *FILE_CASES]}
    assert sorted(rows) == sorted(expected)
    counts = (len(expected), len(SPEC_CASES), len(FLAG_CASES), len(FILE_CASES))
    assert "Cases tested: {} ({} spec fields, {} flags, {} spec files)".format(*counts) in DOC.read_text()
    for case, start in expected.items():
        assert rows[case] == start, case
