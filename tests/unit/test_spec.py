"""The study spec: the default is valid, round-trips through KFP, and every bad spec
the issue lists is refused with one line naming the field and what is allowed."""

import copy

import pytest

from components.spec import SpecError, StudySpec, default_spec_dict, load_spec_dict, resolve_spec


def _floats(x):
    """What a protobuf Struct does to a dict: every int becomes a float."""
    if isinstance(x, dict):
        return {k: _floats(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_floats(v) for v in x]
    return float(x) if isinstance(x, int) and not isinstance(x, bool) else x


def test_default_spec_meets_the_quickstart_promise():
    spec = StudySpec.from_dict(default_spec_dict())
    assert spec.workload.dataset == "mnist_5k"
    assert len(spec.batch_sizes) >= 6 and spec.batch_sizes[-1] / spec.batch_sizes[0] >= 2**6
    assert spec.trials_per_batch_size >= 6


def test_round_trip_and_protobuf_struct_floats():
    spec = StudySpec.from_dict(default_spec_dict())
    assert StudySpec.from_dict(spec.to_dict()) == spec
    again = StudySpec.from_dict(_floats(spec.to_dict()))
    assert again == spec and isinstance(again.batch_sizes[0], int)


def test_resolve_spec_overrides_store_only_when_given():
    raw = default_spec_dict()
    assert resolve_spec(raw, "gs://bucket/prefix").store == "gs://bucket/prefix"
    assert resolve_spec(raw, "").store == raw["store"]


def test_fingerprint_ignores_growth_but_not_meaning():
    raw = default_spec_dict()
    base = StudySpec.from_dict(raw).fingerprint()
    grown = {**raw, "trials_per_batch_size": 50, "batch_sizes": [8, 16], "max_steps": 100}
    assert StudySpec.from_dict(grown).fingerprint() == base
    assert StudySpec.from_dict({**raw, "seed": 1}).fingerprint() != base


def _with(path, value):
    raw = copy.deepcopy(default_spec_dict())
    target = raw
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return raw


BAD_SPECS = [
    (_with("workload.dataset", "imagenet9"), "workload.dataset", "allowed: digits"),
    (_with("workload.model", "resnet_999"), "workload.model", "simple_cnn_base"),
    (_with("workload.optimizer", "adam"), "workload.optimizer", "nesterov_momentum"),
    (_with("batch_sizes", []), "batch_sizes", "required"),
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
    (_with("goals", [{"metric": "average_precision", "value": 0.3}]), "goals[0].metric",
     "allowed: classification_error, cross_entropy_error"),
    (_with("name", "../escape"), "name", "letters, digits"),
    (_with("name", "a/b"), "name", "letters, digits"),
    (_with("name", "datasets"), "name", "not datasets"),
    (_with("max_steps", 0), "max_steps", ">= 1"),
    (_with("trials_per_batch_size", 0), "trials_per_batch_size", ">= 1"),
    (_with("backend", "torch"), "backend", "jax, tensorflow"),
    (_with("store", "gs://"), "store", "gs://bucket"),
    (_with("schedule", "cosine"), "schedule", "constant, linear"),
    ({**default_spec_dict(), "colour": "red"}, "colour", "unknown field"),
]


@pytest.mark.parametrize("raw,field,allowed", BAD_SPECS, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_SPECS)])
def test_bad_spec_is_refused_with_one_line_naming_the_field(raw, field, allowed):
    with pytest.raises(SpecError) as err:
        StudySpec.from_dict(raw)
    message = str(err.value)
    assert message.startswith(f"{field}:"), message
    assert allowed in message
    assert "\n" not in message


def test_parameters_must_fit_the_optimizer_and_schedule():
    sgd = _with("workload.optimizer", "sgd")
    with pytest.raises(SpecError, match="^search_space.momentum: optimizer sgd has no momentum"):
        StudySpec.from_dict(sgd)
    del sgd["search_space"]["momentum"]
    assert StudySpec.from_dict(sgd).workload.optimizer == "sgd"
    with pytest.raises(SpecError, match="^search_space: decay_steps is needed by nesterov_momentum/linear"):
        StudySpec.from_dict(_with("schedule", "linear"))


def test_max_steps_map_must_cover_every_batch_size():
    with pytest.raises(SpecError, match="no budget for batch size 512"):
        StudySpec.from_dict(_with("max_steps", {8: 10, 16: 10, 32: 10, 64: 10, 128: 10, 256: 10}))


def test_spec_file_errors_are_one_line(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec_dict(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML") as err:
        load_spec_dict(str(bad))
    assert "\n" not in str(err.value)
