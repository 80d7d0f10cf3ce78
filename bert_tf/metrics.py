"""GLUE metrics in numpy, as the GLUE benchmark reports them.

Definitions (the same as scikit-learn / scipy, which Hugging Face
``transformers``' former ``glue_compute_metrics`` called):

* accuracy: mean of ``pred == label``;
* F1 of the positive class (label id 1): ``2 TP / (2 TP + FP + FN)``, 0 when
  there are no positives at all (scikit-learn ``f1_score``,
  ``zero_division=0``);
* Matthews correlation (Gorodkin's multi-class form, = the binary
  ``(TP TN - FP FN) / sqrt(...)``), 0 when undefined (scikit-learn
  ``matthews_corrcoef``);
* Pearson r; Spearman rho = Pearson r of the ranks, ties get their average
  rank (scipy ``pearsonr`` / ``spearmanr``); NaN for a constant input.

Per task (``Task.metrics``): CoLA ``mcc``; MRPC and QQP ``acc``, ``f1``,
``acc_and_f1`` (their mean); STS-B ``pearson``, ``spearmanr``, ``corr``
(their mean); every other task ``acc``. :func:`main_metric` names the one
the best dev model is chosen by.
"""

import numpy as np


def accuracy(preds, labels):
  """Fraction of equal entries. preds, labels: int [N]. Returns float."""
  preds, labels = np.asarray(preds), np.asarray(labels)
  _check(preds, labels)
  return float((preds == labels).mean())


def f1(preds, labels, positive=1):
  """F1 score of the ``positive`` class. preds, labels: int [N]. Returns float."""
  preds, labels = np.asarray(preds), np.asarray(labels)
  _check(preds, labels)
  tp = float(np.sum((preds == positive) & (labels == positive)))
  fp = float(np.sum((preds == positive) & (labels != positive)))
  fn = float(np.sum((preds != positive) & (labels == positive)))
  denom = 2 * tp + fp + fn
  return 2 * tp / denom if denom else 0.0


def matthews_corrcoef(preds, labels):
  """Matthews correlation coefficient (multi-class R_K); 0.0 when undefined.

  preds, labels: int [N]. Returns float in [-1, 1].
  """
  preds, labels = np.asarray(preds), np.asarray(labels)
  _check(preds, labels)
  classes, inv = np.unique(np.concatenate([labels, preds]), return_inverse=True)
  k = len(classes)
  y, p = inv[:len(labels)], inv[len(labels):]
  c = np.zeros((k, k), np.float64)
  np.add.at(c, (y, p), 1)
  t_sum, p_sum = c.sum(1), c.sum(0)
  n = c.sum()
  correct = np.trace(c)
  cov_ytyp = correct * n - np.dot(t_sum, p_sum)
  cov_ypyp = n * n - np.dot(p_sum, p_sum)
  cov_ytyt = n * n - np.dot(t_sum, t_sum)
  if cov_ypyp * cov_ytyt == 0:
    return 0.0
  return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


def pearson(x, y):
  """Pearson correlation of two float [N] vectors; NaN if one is constant."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  _check(x, y)
  x, y = x - x.mean(), y - y.mean()
  denom = np.sqrt(np.dot(x, x) * np.dot(y, y))
  if denom == 0:
    return float("nan")
  return float(np.clip(np.dot(x, y) / denom, -1.0, 1.0))


def rankdata(x):
  """1-based ranks of float [N], ties get their average rank (scipy default)."""
  x = np.asarray(x, np.float64)
  order = np.argsort(x, kind="mergesort")
  xs = x[order]
  first = np.r_[True, xs[1:] != xs[:-1]]
  group = np.cumsum(first) - 1
  starts = np.flatnonzero(first)
  ends = np.r_[starts[1:], len(x)]
  avg = (starts + ends + 1) / 2.0  # mean of 1-based ranks start+1 .. end
  ranks = np.empty(len(x), np.float64)
  ranks[order] = avg[group]
  return ranks


def spearman(x, y):
  """Spearman rank correlation of two float [N] vectors (average-rank ties)."""
  return pearson(rankdata(x), rankdata(y))


def main_metric(kind):
  """The metric key that ranks dev models for a ``Task.metrics`` kind."""
  return {"mcc": "mcc", "acc_and_f1": "acc_and_f1",
          "pearson_and_spearman": "corr"}.get(kind, "accuracy")


def compute(kind, preds, labels):
  """The task's metrics, as GLUE reports them.

  Args:
    kind: ``Task.metrics`` (``accuracy``, ``mcc``, ``acc_and_f1``,
      ``pearson_and_spearman``).
    preds, labels: int class ids [N], or float scores [N] for
      ``pearson_and_spearman``.

  Returns:
    dict of floats: ``accuracy`` for classification (always), plus ``mcc``;
    or ``f1`` and ``acc_and_f1``; or ``pearson``, ``spearmanr``, ``corr``.

  Raises:
    ValueError: unknown kind, or shapes that differ.
  """
  if kind == "pearson_and_spearman":
    p, s = pearson(preds, labels), spearman(preds, labels)
    return {"pearson": p, "spearmanr": s, "corr": (p + s) / 2}
  out = {"accuracy": accuracy(preds, labels)}
  if kind == "mcc":
    out["mcc"] = matthews_corrcoef(preds, labels)
  elif kind == "acc_and_f1":
    out["f1"] = f1(preds, labels)
    out["acc_and_f1"] = (out["accuracy"] + out["f1"]) / 2
  elif kind != "accuracy":
    raise ValueError("unknown metric kind %r" % kind)
  return out


def _check(a, b):
  if a.shape != b.shape or a.ndim != 1:
    raise ValueError("predictions %s and labels %s must be [N] vectors of the "
                     "same length" % (a.shape, b.shape))
