"""The paper's evaluation metrics (Shallue et al. 2019, Appendix A.2), streamed over batches.

NumPy only (no TensorFlow or Keras import). Evaluating a large split never holds all its
logits: ``MetricAccumulator(task)`` folds each batch into a few sums and counts, and
``result()`` turns them into the metrics, named as in measurements.csv after the split
prefix (``val/average_precision``):

- classification (mutually exclusive classes; int labels (B,)): ``cross_entropy_error``,
  the mean softmax cross entropy (no label smoothing), and ``classification_error``, the
  fraction of examples whose highest-probability class is not the label.
- multilabel (multi-hot targets (B, C) of 0/1; sigmoid outputs): ``average_precision``, the
  class-agnostic AP over all image-class pairs exactly as the paper computes it,
  ``tf.metrics.auc(curve="PR", num_thresholds=200, summation_method="careful_interpolation")``
  on the sigmoid probabilities: per-threshold counts of true/false positives/negatives,
  accumulated over batches, then TensorFlow's careful-interpolation formula (Davis and
  Goadrich 2006). ``cross_entropy_error``: the mean sigmoid binary cross entropy per
  image-class pair, -[y log s(z) + (1 - y) log(1 - s(z))] averaged over all B x C pairs
  (what ``tf.nn.sigmoid_cross_entropy_with_logits`` averaged over every element gives; the
  paper reports no cross entropy for Open Images, so this is our definition).
- language_model (logits (B, T, V), int targets (B, T), weights (B, T) of 0/1):
  ``cross_entropy_error``, the average per-token cross entropy of the paper's formula,
  sum of -log p(token) over real tokens / number of real tokens; the weights mark the real
  tokens (padding has weight 0), so which tokens count (e.g. end of sentence) is the data
  pipeline's choice.
- regression (predictions (B, k), float targets (B, k), or (B,) when k = 1):
  ``mean_squared_error`` and ``mean_absolute_error``, each example's mean over its k values,
  averaged over the examples (Keras' ``MeanSquaredError`` and ``MeanAbsoluteError``).

Optional ``weights`` in ``update`` also let a padded final batch be masked: (B,) per
example, or (B, C) per pair for multilabel. Non-finite logits in any batch make every
metric NaN (a diverged model).
"""

from __future__ import annotations

import math

import numpy as np

from batchscale.core.names import TASK_METRICS  # noqa: E402

NUM_THRESHOLDS = 200  # the paper's tf.metrics.auc num_thresholds
_CHUNK = 1 << 20  # logits per chunk of the language-model cross entropy (bounds temporaries)


# ---- elementwise pieces -------------------------------------------------------------
def log_softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = logits - logits.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """Sigmoid probabilities as float32 (what a float32 model's sigmoid output layer gives to
    tf.metrics.auc); computed stably in float64 first."""
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(np.float32)


def sigmoid_cross_entropy(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Elementwise -[y log s(z) + (1 - y) log(1 - s(z))] = max(z, 0) - z y + log(1 + e^-|z|)."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(targets, dtype=np.float64)
    return np.maximum(z, 0.0) - z * y + np.log1p(np.exp(-np.abs(z)))


def classification_metrics(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Mean cross entropy (no label smoothing) and classification error of ``logits``."""
    acc = MetricAccumulator("classification")
    acc.update(logits, labels)
    return acc.result()


# ---- average precision (tf.metrics.auc, PR, careful interpolation) -----------------
def pr_thresholds(num_thresholds: int = NUM_THRESHOLDS) -> np.ndarray:
    """tf.metrics.auc's thresholds, as the float32 constants it compares against:
    -1e-7, 1/(n-1), ..., (n-2)/(n-1), 1 + 1e-7."""
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return np.array([0.0 - 1e-7, *inner, 1.0 + 1e-7], dtype=np.float32)


def _threshold_histogram(probabilities, weights, thresholds) -> np.ndarray:
    """Weight of the predictions by how many thresholds lie strictly below each: a prediction
    counts as positive at threshold i (p > t_i) exactly when i < that number."""
    above = np.searchsorted(thresholds, np.asarray(probabilities, dtype=np.float32), side="left")
    return np.bincount(above, weights=weights, minlength=len(thresholds) + 1)


def _div_no_nan(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y == 0, 0.0, x / np.where(y == 0, 1.0, y))


def careful_interpolation_pr_auc(tp, fp, fn) -> float:
    """TensorFlow's ``interpolate_pr_auc`` (tf.metrics.auc, curve="PR",
    summation_method="careful_interpolation") on per-threshold counts, thresholds ascending.

    Within each interval between successive thresholds TP and P = TP + FP vary linearly, and
    the area is slope * (dTP + intercept * log(P_A / P_B)) / (TP + FN), slope = dTP / dP.
    """
    tp, fp, fn = (np.asarray(a, dtype=np.float64) for a in (tp, fp, fn))
    dtp = tp[:-1] - tp[1:]
    p = tp + fp
    prec_slope = _div_no_nan(dtp, np.maximum(p[:-1] - p[1:], 0.0))
    intercept = tp[1:] - prec_slope * p[1:]
    safe_p_ratio = np.where((p[:-1] > 0) & (p[1:] > 0), _div_no_nan(p[:-1], np.maximum(p[1:], 0.0)), 1.0)
    increments = _div_no_nan(prec_slope * (dtp + intercept * np.log(safe_p_ratio)),
                             np.maximum(tp[1:] + fn[1:], 0.0))
    return float(np.sum(increments))


def average_precision(probabilities, targets, weights=None, num_thresholds: int = NUM_THRESHOLDS) -> float:
    """Class-agnostic AP of all (image, class) pairs, as tf.metrics.auc(curve="PR",
    num_thresholds=200, summation_method="careful_interpolation") computes it."""
    probabilities = np.asarray(probabilities).ravel()
    positive = np.asarray(targets).ravel() > 0
    w = None if weights is None else np.broadcast_to(weights, np.shape(targets)).ravel().astype(np.float64)
    thresholds = pr_thresholds(num_thresholds)
    pos = _threshold_histogram(probabilities[positive], None if w is None else w[positive], thresholds)
    neg = _threshold_histogram(probabilities[~positive], None if w is None else w[~positive], thresholds)
    return _pr_auc_from_histograms(pos, neg)


def _pr_auc_from_histograms(pos: np.ndarray, neg: np.ndarray) -> float:
    """Counts at each threshold i: predictions with more than i thresholds below them."""
    tp = pos.sum() - np.cumsum(pos)[:-1]
    fp = neg.sum() - np.cumsum(neg)[:-1]
    fn = pos.sum() - tp
    return careful_interpolation_pr_auc(tp, fp, fn)


# ---- streaming ----------------------------------------------------------------------
class MetricAccumulator:
    """The task's metrics over many batches: ``update(logits, targets, weights=None)`` per
    batch, then ``result()`` -> ``{metric: value}`` (names as in ``TASK_METRICS``).

    Shapes: classification logits (B, C), int targets (B,); multilabel logits (B, C), 0/1
    targets (B, C); language_model logits (B, T, V), int targets (B, T); regression
    predictions (B, k), targets (B, k) or (B,) for k = 1. ``weights``: 0/1 (or
    any non-negative) per example (B,), per pair (B, C) for multilabel, per token (B, T)
    for language models; None means all 1.
    """

    def __init__(self, task: str, num_thresholds: int = NUM_THRESHOLDS):
        if task not in TASK_METRICS:
            raise ValueError(f"task must be one of {', '.join(TASK_METRICS)}; got {task!r}")
        self.task = task
        self.finite = True
        self.weight = 0.0  # examples, pairs or tokens counted
        self.cross_entropy = 0.0  # their summed cross entropy
        self.errors = 0.0  # classification only
        self.squared = self.absolute = 0.0  # regression only: summed per-example means
        if task == "multilabel":
            self.thresholds = pr_thresholds(num_thresholds)
            self.positives = np.zeros(num_thresholds + 1)
            self.negatives = np.zeros(num_thresholds + 1)

    def update(self, logits, targets, weights=None) -> None:
        logits = np.asarray(logits)
        if not self.finite or not np.all(np.isfinite(logits)):
            self.finite = False
            return
        getattr(self, f"_update_{self.task}")(logits, np.asarray(targets), weights)

    def _update_classification(self, logits, labels, weights):
        if logits.ndim != 2 or labels.shape != logits.shape[:1]:
            raise ValueError(f"classification needs logits (B, C) and labels (B,); got "
                             f"{logits.shape} and {labels.shape}")
        w = np.ones(len(labels)) if weights is None else np.asarray(weights, dtype=np.float64)
        log_probs = log_softmax(logits.astype(np.float64))
        labels = labels.astype(np.int64)
        self.cross_entropy += float(np.sum(w * -log_probs[np.arange(len(labels)), labels]))
        self.errors += float(np.sum(w * (logits.argmax(axis=1) != labels)))
        self.weight += float(np.sum(w))

    def _update_multilabel(self, logits, targets, weights):
        if logits.ndim != 2 or targets.shape != logits.shape:
            raise ValueError(f"multilabel needs logits and multi-hot targets of one shape (B, C); "
                             f"got {logits.shape} and {targets.shape}")
        if weights is None:
            w = np.ones(logits.shape)
        else:
            w = np.asarray(weights, dtype=np.float64)
            w = np.broadcast_to(w[:, None] if w.ndim == 1 else w, logits.shape)
        positive = targets > 0
        self.cross_entropy += float(np.sum(w * sigmoid_cross_entropy(logits, positive)))
        self.weight += float(np.sum(w))
        probabilities = sigmoid(logits)
        self.positives += _threshold_histogram(probabilities[positive], w[positive], self.thresholds)
        self.negatives += _threshold_histogram(probabilities[~positive], w[~positive], self.thresholds)

    def _update_language_model(self, logits, targets, weights):
        if logits.ndim != 3 or targets.shape != logits.shape[:2]:
            raise ValueError(f"language_model needs logits (B, T, V) and targets (B, T); got "
                             f"{logits.shape} and {targets.shape}")
        w = np.ones(targets.shape) if weights is None else np.asarray(weights, dtype=np.float64)
        w = np.broadcast_to(w, targets.shape).ravel()
        real = w != 0  # only real tokens' logits are ever touched
        flat = logits.reshape(-1, logits.shape[-1])[real]
        tokens = targets.ravel()[real].astype(np.int64)
        w = w[real]
        rows = max(1, _CHUNK // max(1, logits.shape[-1]))
        for start in range(0, len(tokens), rows):
            z = flat[start:start + rows].astype(np.float64)
            top = z.max(axis=1)
            log_norm = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
            nll = log_norm - z[np.arange(len(z)), tokens[start:start + rows]]
            self.cross_entropy += float(np.sum(w[start:start + rows] * nll))
        self.weight += float(np.sum(w))

    def _update_regression(self, predictions, targets, weights):
        flat = targets.ndim == 1 and predictions.ndim == 2 and predictions.shape == (len(targets), 1)
        if predictions.ndim != 2 or not (flat or targets.shape == predictions.shape):
            raise ValueError(f"regression needs predictions (B, k) and targets (B, k) or (B,); "
                             f"got {predictions.shape} and {targets.shape}")
        w = np.ones(len(targets)) if weights is None else np.asarray(weights, dtype=np.float64)
        error = predictions.astype(np.float64) - targets.astype(np.float64).reshape(predictions.shape)
        self.squared += float(np.sum(w * np.mean(np.square(error), axis=1)))
        self.absolute += float(np.sum(w * np.mean(np.abs(error), axis=1)))
        self.weight += float(np.sum(w))

    def result(self) -> dict[str, float]:
        names = TASK_METRICS[self.task]
        if not self.finite or self.weight == 0:
            return dict.fromkeys(names, math.nan)
        out = {"cross_entropy_error": self.cross_entropy / self.weight,
               "mean_squared_error": self.squared / self.weight,
               "mean_absolute_error": self.absolute / self.weight}
        if self.task == "classification":
            out["classification_error"] = self.errors / self.weight
        if self.task == "multilabel":
            out["average_precision"] = _pr_auc_from_histograms(self.positives, self.negatives)
        return {name: float(out[name]) for name in names}


def update_pack(accumulators: list[MetricAccumulator], logits: np.ndarray, targets: list,
                weights: list | None = None) -> None:
    """Fold one evaluation batch of a pack into each trial's accumulator: ``logits`` stacked
    on a leading trial axis, ``targets`` (and ``weights``) one per trial. Every sum is what
    ``accumulators[i].update(logits[i], targets[i], weights[i])`` adds, bit for bit: for
    classification without weights the float64 softmax runs over the whole pack at once
    (elementwise, so each value is the one a trial alone gets) and each trial's cross
    entropy is summed over the same array as alone. Other tasks fold trial by trial."""
    weights = weights or [None] * len(accumulators)
    logits = np.asarray(logits)
    if accumulators[0].task != "classification" or any(w is not None for w in weights) \
            or logits.ndim != 3:
        for accumulator, one, target, weight in zip(accumulators, logits, targets, weights):
            accumulator.update(one, target, weight)
        return
    finite = np.isfinite(logits).reshape(len(logits), -1).all(axis=1)
    live = []
    for i, accumulator in enumerate(accumulators):
        accumulator.finite = accumulator.finite and bool(finite[i])
        if accumulator.finite:
            live.append(i)
    if not live:
        return
    z = logits if len(live) == len(logits) else logits[live]
    log_probs = log_softmax(z.astype(np.float64))
    rows = np.arange(z.shape[1])
    for j, i in enumerate(live):
        labels = np.asarray(targets[i])
        if labels.shape != z.shape[1:2]:
            raise ValueError(f"classification needs logits (B, C) and labels (B,); got "
                             f"{z.shape[1:]} and {labels.shape}")
        labels = labels.astype(np.int64)
        accumulator, w = accumulators[i], np.ones(len(labels))
        accumulator.cross_entropy += float(np.sum(w * -log_probs[j, rows, labels]))
        accumulator.errors += float(np.sum(w * (z[j].argmax(axis=1) != labels)))
        accumulator.weight += float(np.sum(w))


def multilabel_metrics(logits, targets, weights=None) -> dict[str, float]:
    """average_precision and cross_entropy_error of one array of logits (see the module doc)."""
    acc = MetricAccumulator("multilabel")
    acc.update(logits, targets, weights)
    return acc.result()


def language_model_metrics(logits, targets, weights=None) -> dict[str, float]:
    """Per-token cross_entropy_error of one array of logits (see the module doc)."""
    acc = MetricAccumulator("language_model")
    acc.update(logits, targets, weights)
    return acc.result()
