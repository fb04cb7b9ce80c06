"""The paper's metrics (Appendix A.2): hand-computed values and streaming == one shot.

Average precision against TensorFlow's own tf.metrics.auc (run in a subprocess) is in
tests/integration/test_metrics_tensorflow.py.
"""

import math

import numpy as np
import pytest

from batchscale.core.names import TASK_METRICS
from batchscale.training import metrics
from batchscale.training.metrics import (
    MetricAccumulator,
    average_precision,
    classification_metrics,
    language_model_metrics,
    multilabel_metrics,
    sigmoid,
)


def _logit(p):
    return math.log(p / (1 - p))


# ---- classification -----------------------------------------------------------------
def test_classification_by_hand_streamed_and_weighted():
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [5.0, 1.0, 9.0]])
    labels = np.array([0, 2, 2])
    # CE: -log(e^2 / (e^2 + 2)), -log(1 / (e + 2)), -log(e^9 / (e^5 + e + e^9)); errors: row 1.
    ce = [math.log((math.e**2 + 2) / math.e**2), math.log(math.e + 2),
          math.log((math.e**5 + math.e + math.e**9) / math.e**9)]
    m = classification_metrics(logits[:2], labels[:2])
    assert m["cross_entropy_error"] == pytest.approx((ce[0] + ce[1]) / 2)
    assert m["classification_error"] == 0.5
    acc = MetricAccumulator("classification")
    acc.update(logits[:1], labels[:1])
    acc.update(logits[1:], labels[1:])
    assert acc.result() == pytest.approx({"classification_error": 1 / 3, "cross_entropy_error": sum(ce) / 3})
    padded = MetricAccumulator("classification")  # a padded batch: the third row does not count
    padded.update(logits, labels, weights=np.array([1.0, 1.0, 0.0]))
    assert padded.result() == pytest.approx(m)
    assert list(acc.result()) == list(TASK_METRICS["classification"])


@pytest.mark.parametrize("task", sorted(TASK_METRICS))
def test_non_finite_logits_make_every_metric_nan(task):
    shapes = {"classification": ((2, 3), np.array([0, 1])), "multilabel": ((2, 3), np.eye(2, 3)),
              "language_model": ((2, 2, 3), np.zeros((2, 2), int)),
              "regression": ((2, 3), np.zeros((2, 3)))}
    shape, targets = shapes[task]
    acc = MetricAccumulator(task)
    acc.update(np.zeros(shape), targets)
    bad = np.zeros(shape)
    bad.flat[1] = np.inf
    acc.update(bad, targets)
    acc.update(np.zeros(shape), targets)
    result = acc.result()
    assert set(result) == set(TASK_METRICS[task]) and all(math.isnan(v) for v in result.values())
    assert all(math.isnan(v) for v in MetricAccumulator(task).result().values())  # nothing counted


def test_bad_task_and_shapes_are_refused():
    with pytest.raises(ValueError, match="classification, multilabel, regression, language_model"):
        MetricAccumulator("ranking")
    with pytest.raises(ValueError, match="multi-hot"):
        MetricAccumulator("multilabel").update(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        MetricAccumulator("language_model").update(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match=r"labels \(B,\)"):
        MetricAccumulator("classification").update(np.zeros((2, 3)), np.zeros((2, 3)))


# ---- multilabel -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("probabilities", "targets", "expected"),
    [
        # Thresholds i/199: 0.75 is above t_0..t_149, 0.25 above t_0..t_49.
        # Positive ranked first: precision 1 at every recall.
        ([0.75, 0.25], [1, 0], 1.0),
        # Negative first. Between t_49 (TP=1, P=2) and t_50 (TP=0, P=1): slope dTP/dP = 1,
        # intercept TP_B - slope P_B = -1, area = 1 * (1 + (-1) log(2 / 1)) / 1.
        ([0.25, 0.75], [1, 0], 1 - math.log(2)),
        # pos 0.9, neg 0.6, pos 0.3 (2 positives): t_59 -> t_60: TP 2 -> 1, P 3 -> 2, intercept -1,
        # (1 - log 1.5) / 2; t_119 -> t_120: dTP = 0; t_179 -> t_180: TP 1 -> 0, P 1 -> 0, 1 / 2.
        # (Eq. 7's uninterpolated sum would be (1 + 2/3) / 2.)
        ([0.9, 0.6, 0.3], [1, 0, 1], 1 - math.log(1.5) / 2),
        ([0.9, 0.6, 0.3], [0, 0, 0], 0.0),  # no positives: tf.metrics.auc gives 0
    ],
)
def test_average_precision_by_hand(probabilities, targets, expected):
    assert average_precision(np.array(probabilities), np.array(targets)) == pytest.approx(expected, abs=1e-12)
    logits = np.array([[_logit(p) for p in probabilities]])
    acc = MetricAccumulator("multilabel")
    acc.update(logits, np.array([targets]))
    assert acc.result()["average_precision"] == pytest.approx(expected, abs=1e-12)


def test_multilabel_cross_entropy_by_hand():
    # Pairs: (z=0, y=1): log 2; (z=log 3, y=0): -log(1 - 3/4) = log 4;
    # (z=-log 3, y=1): -log(1/4) = log 4; (z=0, y=0): log 2. Mean = 1.5 log 2.
    logits = np.array([[0.0, math.log(3)], [-math.log(3), 0.0]])
    targets = np.array([[1, 0], [1, 0]])
    m = multilabel_metrics(logits, targets)
    assert m["cross_entropy_error"] == pytest.approx(1.5 * math.log(2))
    assert list(m) == ["average_precision", "cross_entropy_error"]
    # Per-image weights mask a padded image: only row 0 counts.
    masked = multilabel_metrics(logits, targets, weights=np.array([1.0, 0.0]))
    assert masked["cross_entropy_error"] == pytest.approx(1.5 * math.log(2))
    assert masked["average_precision"] == pytest.approx(1 - math.log(2))  # p: 0.5 (pos), 0.75 (neg)


def test_multilabel_streaming_equals_one_shot():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, (50, 17))
    targets = (rng.random((50, 17)) < 0.2).astype(int)
    acc = MetricAccumulator("multilabel")
    for start in range(0, 50, 16):
        acc.update(logits[start:start + 16], targets[start:start + 16])
    assert acc.result() == pytest.approx(multilabel_metrics(logits, targets), rel=1e-12)
    assert acc.result()["average_precision"] == pytest.approx(average_precision(sigmoid(logits), targets))



# ---- language model ---------------------------------------------------------------------
def _lm_example():
    """2 sentences, 2 positions, vocabulary 3; the last position of sentence 2 is padding."""
    logits = np.array([
        [[0.0, math.log(2), 0.0], [0.0, 0.0, 0.0]],  # p = (1/4, 1/2, 1/4); (1/3, 1/3, 1/3)
        [[math.log(3), 0.0, 0.0], [100.0, -50.0, 7.0]],  # p = (3/5, 1/5, 1/5); padding
    ])
    targets = np.array([[1, 2], [0, -1]])  # the padding's target is not even a token
    weights = np.array([[1, 1], [1, 0]])
    return logits, targets, weights


def test_language_model_cross_entropy_by_hand():
    logits, targets, weights = _lm_example()
    # -(log 1/2 + log 1/3 + log 3/5) / 3 real tokens = log(2 * 3 * 5/3) / 3 = log(10) / 3.
    expected = math.log(10) / 3
    got = language_model_metrics(logits, targets, weights)
    assert got == {"cross_entropy_error": pytest.approx(expected)}
    acc = MetricAccumulator("language_model")  # streamed one sentence at a time
    acc.update(logits[:1], targets[:1], weights[:1])
    acc.update(logits[1:], targets[1:], weights[1:])
    assert acc.result()["cross_entropy_error"] == pytest.approx(expected)
    # Without weights every token counts (here: padding target 0 under the padding logits).
    unmasked = language_model_metrics(logits, np.array([[1, 2], [0, 0]]))
    assert unmasked["cross_entropy_error"] == pytest.approx(
        (math.log(10) + 100 - math.log(math.exp(100) + math.exp(-50) + math.exp(7))) / 4)


def test_language_model_chunks_agree(monkeypatch):
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 3, (4, 9, 11)).astype(np.float32)
    targets = rng.integers(0, 11, (4, 9))
    weights = (rng.random((4, 9)) < 0.8).astype(float)
    whole = language_model_metrics(logits, targets, weights)["cross_entropy_error"]
    log_probs = metrics.log_softmax(logits.astype(np.float64))
    nll = -np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    assert whole == pytest.approx(float((nll * weights).sum() / weights.sum()), rel=1e-12)
    monkeypatch.setattr(metrics, "_CHUNK", 25)  # 2 tokens per chunk
    assert language_model_metrics(logits, targets, weights)["cross_entropy_error"] == pytest.approx(whole)


# ---- regression -----------------------------------------------------------------------
def test_regression_by_hand_streamed_and_weighted():
    """Each example's mean over its values, averaged over examples (Keras' MeanSquaredError
    and MeanAbsoluteError); streamed batches and flat (B,) targets give the same."""
    predictions = np.array([[1.0, 2.0], [0.0, 0.0], [3.0, -1.0]])
    targets = np.array([[0.0, 2.0], [1.0, -1.0], [3.0, 1.0]])
    # squared errors per example: (1 + 0)/2, (1 + 1)/2, (0 + 4)/2; absolute: 1/2, 1, 1
    acc = MetricAccumulator("regression")
    acc.update(predictions[:1], targets[:1])
    acc.update(predictions[1:], targets[1:])
    assert acc.result() == pytest.approx({"mean_squared_error": (0.5 + 1 + 2) / 3,
                                          "mean_absolute_error": (0.5 + 1 + 1) / 3})
    assert list(acc.result()) == list(TASK_METRICS["regression"])
    padded = MetricAccumulator("regression")  # a padded batch: the last row does not count
    padded.update(predictions, targets, weights=np.array([1.0, 1.0, 0.0]))
    assert padded.result() == pytest.approx({"mean_squared_error": 0.75, "mean_absolute_error": 0.75})
    flat = MetricAccumulator("regression")  # one value per example: targets (B,) or (B, 1)
    flat.update(np.array([[1.0], [4.0]]), np.array([2.0, 2.0]))
    assert flat.result() == pytest.approx({"mean_squared_error": 2.5, "mean_absolute_error": 1.5})


def test_regression_shapes_never_broadcast():
    """(B,) targets against (B, 2) predictions, or (B, 1) against (B,) ones, are refused:
    numpy would broadcast them into a (B, B) error matrix and a wrong number."""
    with pytest.raises(ValueError, match=r"regression needs predictions \(B, k\)"):
        MetricAccumulator("regression").update(np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(ValueError, match=r"regression needs predictions \(B, k\)"):
        MetricAccumulator("regression").update(np.zeros(3), np.zeros((3, 1)))
