"""The study spec: the default is valid, round-trips through KFP, and every bad spec
the issue lists is refused with one line naming the field and what is allowed."""

import copy

import pytest
import yaml

from batchscale.core.spec import SpecError
from batchscale.validation import (
    default_spec_dict,
    load_spec_dict,
    parse_spec,
    resolve_spec,
    with_batch_sizes,
)


def _floats(x):
    """What a protobuf Struct does to a dict: every int becomes a float."""
    if isinstance(x, dict):
        return {k: _floats(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_floats(v) for v in x]
    return float(x) if isinstance(x, int) and not isinstance(x, bool) else x


def test_default_spec_meets_the_quickstart_promise():
    spec = parse_spec(default_spec_dict())
    assert spec.workload.dataset == "mnist_5k"
    assert len(spec.batch_sizes) >= 6 and spec.batch_sizes[-1] / spec.batch_sizes[0] >= 2**6
    assert spec.batch_sizes[-1] == 4000  # the whole training set: full-batch training
    assert spec.trials_per_batch_size >= 6


def test_round_trip_and_protobuf_struct_floats():
    spec = parse_spec(default_spec_dict())
    assert parse_spec(spec.to_dict()) == spec
    again = parse_spec(_floats(spec.to_dict()))
    assert again == spec and isinstance(again.batch_sizes[0], int)


def test_resolve_spec_overrides_store_only_when_given():
    raw = default_spec_dict()
    assert resolve_spec(raw, "gs://bucket/prefix").store == "gs://bucket/prefix"
    assert resolve_spec(raw, "").store == raw["store"]


def test_fingerprint_ignores_growth_but_not_meaning():
    raw = default_spec_dict()
    base = parse_spec(raw).fingerprint()
    grown = {**raw, "trials_per_batch_size": 50, "batch_sizes": [8, 16], "max_steps": 100}
    assert parse_spec(grown).fingerprint() == base
    assert parse_spec({**raw, "seed": 1}).fingerprint() != base


def _with(path, value):
    raw = copy.deepcopy(default_spec_dict())
    target = raw
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return raw


BAD_SPECS = [
    (_with("workload.dataset", "imagenet9"), "workload.dataset", "allowed: c4, cifar_10, digits"),
    (_with("workload.model", "resnet_999"), "workload.model", "simple_cnn_base"),
    (_with("workload.optimizer", "adagrad"), "workload.optimizer", "nesterov_momentum"),
    (_with("batch_sizes", []), "batch_sizes", "must be a non-empty list"),
    (_with("batch_sizes", [8, 0, 16]), "batch_sizes", "positive"),
    (_with("batch_sizes", [8, -4]), "batch_sizes", "positive"),
    (_with("batch_sizes", [8, 4001]), "batch_sizes", "1..4000"),
    (_with("search_space.learning_rate", {"scale": "log", "min": 0.1, "max": 0.1}),
     "search_space.learning_rate", "min < max"),
    (_with("search_space.learning_rate", {"scale": "log", "min": 1.0, "max": 0.1}),
     "search_space.learning_rate", "empty or inverted"),
    (_with("search_space.momentum", {"scale": "discrete", "values": []}),
     "search_space.momentum.values", "non-empty"),
    (_with("search_space.momentum", {"scale": "reverse_log", "min": 0.5, "max": 1.0}),
     "search_space.momentum.max", "< 1"),
    (_with("search_space.learning_rate", {"scale": "cubic", "min": 0.1, "max": 1}),
     "search_space.learning_rate.scale", "linear, log, reverse_log, discrete"),
    (_with("goals", [{"metric": "average_precision", "value": 0.3}]), "goals[0]",
     "allowed: classification_error, cross_entropy_error"),
    (_with("goals", ["accuracy>0.9"]), "goals[0]", "metric 'accuracy' is not measured here"),
    (_with("goals", ["classification_error>0.1"]), "goals[0]", "write classification_error<VALUE"),
    (_with("goals", ["train/classification_error<0.1"]), "goals[0]", "judged on the validation split"),
    (_with("goals", [{"metric": "classification_error", "value": 0.1, "direction": "maximize"}]),
     "goals[0]", "improves by falling"),
    (_with("name", "../escape"), "name", "letters, digits"),
    (_with("name", "a/b"), "name", "letters, digits"),
    (_with("name", "datasets"), "name", "not datasets"),
    (_with("max_steps", 0), "max_steps", ">= 1"),
    (_with("trials_per_batch_size", 0), "trials_per_batch_size", ">= 1"),
    (_with("backend", "torch"), "backend", "jax, tensorflow"),
    (_with("store", "gs://"), "store", "gs://bucket"),
    (_with("schedule", "cosine_restarts"), "schedule", "constant, linear, cosine, exponential_polynomial"),
    ({**default_spec_dict(), "colour": "red"}, "colour", "unknown field"),
]


@pytest.mark.parametrize("raw,field,allowed", BAD_SPECS, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_SPECS)])
def test_bad_spec_is_refused_with_one_line_naming_the_field(raw, field, allowed):
    with pytest.raises(SpecError) as err:
        parse_spec(raw)
    message = str(err.value)
    assert message.startswith(f"{field}:"), message
    assert allowed in message
    assert "\n" not in message


def test_parameters_must_fit_the_optimizer_and_schedule():
    sgd = _with("workload.optimizer", "sgd")
    with pytest.raises(SpecError, match="^search_space.momentum: optimizer sgd has no momentum"):
        parse_spec(sgd)
    del sgd["search_space"]["momentum"]
    assert parse_spec(sgd).workload.optimizer == "sgd"
    with pytest.raises(SpecError, match="^search_space: decay_steps is needed by nesterov_momentum/linear"):
        parse_spec(_with("schedule", "linear"))


def test_max_steps_map_must_cover_every_batch_size():
    with pytest.raises(SpecError, match="no budget for batch size 512"):
        parse_spec(_with("max_steps", {8: 10, 16: 10, 32: 10, 64: 10, 128: 10, 256: 10}))


def test_spec_file_errors_are_one_line(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec_dict(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError) as err:
        load_spec_dict(str(bad))
    assert str(err.value) == (f"spec file: {bad} line 2, column 1: expected ',' or ']', but got "
                              "'<stream end>' (while parsing a flow sequence started on line 1, "
                              "column 7)")


@pytest.mark.parametrize("text, where, problem, hint", [
    # a tab in the indentation, alone or after spaces: the parser's words, then the plain hint
    ("name: a\nworkload:\n\tdataset: mnist_5k\n", "line 3, column 1 ('\\tdataset: mnist_5k')",
     "found character '\\t' that cannot start any token (while scanning for the next token)",
     "YAML indents with spaces, not tabs"),
    ("name: a\r\nworkload:\r\n  \tdataset: mnist_5k\r\n", "line 3, column 3",
     "found character '\\t' that cannot start any token", "YAML indents with spaces, not tabs"),
    # a key indented deeper than its sibling
    ("workload:\n  dataset: mnist_5k\n   model: fc_32\n", "line 3, column 9 ('   model: fc_32')",
     "mapping values are not allowed here", "a line indented deeper than the key above it"),
    # a key indented less than its sibling: the block it leaves is named with its line
    ("name: a\nworkload:\n  dataset: mnist_5k\n model: fc_32\n", "line 4, column 2 (' model: fc_32')",
     "expected <block end>, but found '<block mapping start>' (while parsing a block mapping "
     "started on line 1, column 1)", "a line indented less than the lines of its block"),
])
def test_a_yaml_error_keeps_the_parsers_line_column_and_problem(tmp_path, text, where, problem, hint):
    path = tmp_path / "spec.yaml"
    path.write_bytes(text.encode())
    with pytest.raises(SpecError) as err:
        load_spec_dict(str(path))
    message = str(err.value)
    assert message.startswith(f"spec file: {path} {where}")
    assert f": {problem}" in message and f"; {hint}" in message
    assert "\n" not in message


def _scheduled(schedule, **fixed):
    raw = _with("schedule", schedule)
    raw["fixed"].update(fixed)
    return raw


DECAY = {"end_learning_rate_factor": 0.01, "decay_steps": 400}
SCHEDULE_FIXED = {
    "constant": {},
    "linear": DECAY,
    "cosine": DECAY,
    "exponential_polynomial": {**DECAY, "power": 2.0},
    "inverse_exponential_polynomial": {**DECAY, "power": 0.5},
    "exponential": DECAY,
    "piecewise_linear": {**DECAY, "decay_events": 3},
}


@pytest.mark.parametrize("schedule", sorted(SCHEDULE_FIXED))
def test_every_schedule_takes_its_parameters_plus_warmup_and_l2(schedule):
    spec = parse_spec(_scheduled(schedule, **SCHEDULE_FIXED[schedule]))
    assert spec.schedule == schedule
    spec = parse_spec(_scheduled(schedule, **SCHEDULE_FIXED[schedule], warmup_steps=20,
                                          l2_penalty=5e-4))
    assert spec.fixed["warmup_steps"] == 20 and spec.fixed["l2_penalty"] == 5e-4
    assert parse_spec(_floats(spec.to_dict())) == spec


def test_decay_fraction_stands_in_for_decay_steps():
    raw = _scheduled("exponential", end_learning_rate_factor=0.1)
    raw["search_space"]["decay_fraction"] = {"scale": "linear", "min": 0.5, "max": 1.0}
    spec = parse_spec(raw)
    assert not {p.name: p for p in spec.search_space}["decay_fraction"].integer


def test_schedule_parameters_can_be_searched_as_integers():
    raw = _with("schedule", "piecewise_linear")
    raw["search_space"].update({
        "end_learning_rate_factor": {"scale": "log", "min": 0.001, "max": 0.1},
        "decay_steps": {"scale": "linear", "min": 100, "max": 1000},
        "decay_events": {"scale": "discrete", "values": [1, 3, 5]},
        "warmup_steps": {"scale": "linear", "min": 1, "max": 50},
        "l2_penalty": {"scale": "log", "min": 1e-5, "max": 1e-3},
    })
    spec = parse_spec(raw)
    params = {p.name: p for p in spec.search_space}
    assert params["decay_steps"].integer and params["warmup_steps"].integer
    assert not params["l2_penalty"].integer and not params["end_learning_rate_factor"].integer
    assert isinstance(params["warmup_steps"].from_unit(0.37), int)
    assert parse_spec(_floats(spec.to_dict())) == spec


PARAMETER_ERRORS = [
    (_scheduled("exponential_polynomial", **DECAY), "^search_space: power is needed by "
     "nesterov_momentum/exponential_polynomial; search it or set it under fixed$"),
    (_scheduled("piecewise_linear", **DECAY), "^search_space: decay_events is needed"),
    (_scheduled("cosine", end_learning_rate_factor=0.1), "^search_space: decay_steps is needed"),
    (_scheduled("linear", **DECAY, power=2.0), "^fixed.power: schedule linear does not use power "
     r"\(it takes end_learning_rate_factor, decay_steps, warmup_steps \(optional\)\); drop it or use "
     "schedule: exponential_polynomial or inverse_exponential_polynomial$"),
    (_scheduled("constant", decay_steps=100), "^fixed.decay_steps: schedule constant does not use"),
    (_scheduled("exponential", **DECAY, decay_events=3),
     "^fixed.decay_events: .*use schedule: piecewise_linear$"),
    (_with("search_space.decay_steps", {"scale": "linear", "min": 10, "max": 100}),
     "^search_space.decay_steps: schedule constant does not use decay_steps"),
    (_scheduled("linear", **DECAY, warmup_steps=400), "^fixed.warmup_steps: reaches 400 steps but must "
     r"stay < decay_steps \(as low as 400\)"),
    (_scheduled("linear", **{**DECAY, "decay_steps": 10.5}), "^fixed.decay_steps: 10.5 is out of range; "
     "decay_steps must be an integer >= 1$"),
    (_scheduled("linear", **{**DECAY, "decay_steps": 0}), "^fixed.decay_steps: 0 is out of range"),
    (_scheduled("piecewise_linear", **DECAY, decay_events=0), "^fixed.decay_events: 0 is out of range; "
     "decay_events must be an integer >= 1$"),
    (_scheduled("linear", **DECAY, warmup_steps=-1), "^fixed.warmup_steps: -1 is out of range; "
     "warmup_steps must be an integer >= 0$"),
    (_scheduled("linear", **DECAY, warmup_steps=2.5), "^fixed.warmup_steps: 2.5 is out of range"),
    (_scheduled("exponential_polynomial", **DECAY, power=0), "^fixed.power: 0 is out of range; "
     "power must be a number > 0$"),
    (_scheduled("linear", **{**DECAY, "end_learning_rate_factor": 1.5}),
     r"^fixed.end_learning_rate_factor: 1.5 is out of range; .* \(0, 1\]$"),
    (_scheduled("linear", **DECAY, decay_fraction=0.5), "^fixed.decay_fraction: give decay_steps or "
     "decay_fraction, not both$"),
    (_scheduled("constant", decay_fraction=0.5), "^fixed.decay_fraction: schedule constant does not use "
     "decay_fraction .*use schedule: linear or cosine"),
    (_scheduled("linear", end_learning_rate_factor=0.1, decay_fraction=0), "^fixed.decay_fraction: 0 is out "
     "of range; decay_fraction must be a number > 0$"),
    (_scheduled("constant", l2_penalty=-1e-4), "^fixed.l2_penalty: -0.0001 is out of range; "
     "l2_penalty must be a number >= 0$"),
    (_scheduled("constant", l2_penalty="big"), "^fixed.l2_penalty: 'big' is not a finite number$"),
]


@pytest.mark.parametrize("raw,match", PARAMETER_ERRORS, ids=[str(i) for i in range(len(PARAMETER_ERRORS))])
def test_schedule_parameter_errors_are_one_line(raw, match):
    with pytest.raises(SpecError, match=match) as err:
        parse_spec(raw)
    assert "\n" not in str(err.value)


def test_warmup_range_must_end_before_the_shortest_decay():
    raw = _with("schedule", "linear")
    raw["fixed"]["end_learning_rate_factor"] = 0.1
    raw["search_space"]["decay_steps"] = {"scale": "discrete", "values": [200, 400]}
    raw["search_space"]["warmup_steps"] = {"scale": "linear", "min": 0, "max": 199}
    assert parse_spec(raw).schedule == "linear"
    raw["search_space"]["warmup_steps"]["max"] = 200
    with pytest.raises(SpecError, match=r"^search_space.warmup_steps: reaches 200 steps .*as low as 200"):
        parse_spec(raw)
    raw["search_space"]["warmup_steps"]["max"] = 10.5
    with pytest.raises(SpecError, match=r"^search_space.warmup_steps: 10.5 is out of range"):
        parse_spec(raw)


def test_goals_in_the_one_goal_syntax_equal_their_mapping_form():
    as_text = parse_spec(_with("goals", ["val/classification_error<0.08", "cross_entropy_error<0.3"]))
    as_maps = parse_spec(_with("goals", [{"metric": "classification_error", "value": 0.08},
                                          {"metric": "cross_entropy_error", "value": 0.3}]))
    assert as_text == as_maps and as_text.fingerprint() == as_maps.fingerprint()


def test_duplicate_yaml_keys_are_refused_at_any_depth_but_merges_are_not(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("name: a\ngoals:\n  - {metric: classification_error, value: 0.1, value: 0.2}\n")
    with pytest.raises(SpecError, match=r"^spec file: .*spec.yaml line 3: key 'value' is given twice "
                                        r"\(first on line 3\); give each key once$"):
        load_spec_dict(str(path))
    path.write_text("base: &b {scale: log, min: 0.01, max: 1.0}\nlr:\n  <<: *b\n  max: 0.5\n")
    assert load_spec_dict(str(path))["lr"] == {"scale": "log", "min": 0.01, "max": 0.5}


def _flags(*argv):
    """The Namespace the CLI's spec flags give for ``argv`` (the real parser, no command)."""
    import argparse

    from batchscale.cli.options import add_spec_args

    parser = argparse.ArgumentParser()
    add_spec_args(parser)
    return parser.parse_args(list(argv))


def test_build_spec_maps_budgets_onto_new_batch_sizes_and_refuses_bad_keys(tmp_path):
    from batchscale.cli.options import build_spec

    spec = build_spec(_flags("--batch-sizes", "8,3000", "--seed", "7"))
    assert spec.max_steps == {8: 5000, 3000: 5000} and spec.seed == 7  # new size: the largest budget
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**default_spec_dict(), "max_steps": {"abc": 10, 8: 10}}))
    with pytest.raises(SpecError, match="^max_steps: key 'abc' is not a batch size"):
        build_spec(_flags(str(path), "--batch-sizes", "8,16"))
    with pytest.raises(SpecError, match=r"^--workload: cannot be combined with a SPEC \(quickstart\)"):
        build_spec(_flags("quickstart", "--workload", "cifar_10/resnet_8"))
    with pytest.raises(SpecError, match="^workload: must be a mapping"):
        path.write_text(yaml.safe_dump({**default_spec_dict(), "workload": "mnist_5k"}))
        build_spec(_flags(str(path), "--model", "fc_32"))


def test_new_batch_sizes_take_the_largest_budget_of_the_map():
    """The budget rule for --batch-sizes lives in validation: a batch size the max_steps
    map does not name gets its largest budget; the map keeps only the sizes studied; one
    integer for all stays; the raw spec itself is not changed."""
    raw = {**default_spec_dict(), "max_steps": {8: 900, "64": 300, 512: 100}}
    before = copy.deepcopy(raw)
    grown = with_batch_sizes(raw, [8, 16, 512, 2048])
    assert grown["batch_sizes"] == [8, 16, 512, 2048]
    assert grown["max_steps"] == {8: 900, 16: 900, 512: 100, 2048: 900}
    assert raw == before
    assert parse_spec(grown).max_steps == {8: 900, 16: 900, 512: 100, 2048: 900}
    assert with_batch_sizes({**raw, "max_steps": 250}, [32])["max_steps"] == 250
