"""The result files of a hyperparameter search: table, Markdown, figure.

``search_results.csv`` and ``search_results.md`` (one row per trial),
``search_results.png`` (the metric over learning rate x batch size, one
panel per epoch count, restarts as spread). Imports neither Optuna nor
TensorFlow (matplotlib only when plotting).

Example::

  from bert_tf.tuning import results
  results.write_results(rows, "/tmp/tune", "eval_accuracy")
  results.best_trial(rows, "eval_accuracy")["trial"]
"""

from __future__ import annotations

import csv
import io
import os
from typing import Optional, Sequence

from bert_tf import io_utils
from bert_tf.tuning import space as space_lib

RESULTS_CSV = "search_results.csv"
RESULTS_MD = "search_results.md"
RESULTS_PNG = "search_results.png"
BEST_FILE = "best_trial.json"


def format_hparams(hp: dict) -> str:
  """``name=value`` pairs (floats as ``%g``), in ``hp``'s order."""
  return " ".join("%s=%s" % (k, ("%g" % v) if isinstance(v, float) else v)
                  for k, v in hp.items())


def best_trial(rows: Sequence[dict], metric: str) -> Optional[dict]:
  """The completed row with the best metric (lowest for a loss; ties: the
  first trial), or None when none completed."""
  done = [r for r in rows if r["status"] == "COMPLETE" and r["metric"] is not None]
  if not done:
    return None
  sign = -1.0 if space_lib.direction(metric) == "minimize" else 1.0
  return max(done, key=lambda r: (sign * r["metric"], -r["trial"]))


def _columns(rows) -> list:
  first = rows[0] if rows else {}
  return [k for k in first if k not in ("run_dir",)]


def write_results(rows: Sequence[dict], output_dir: str, metric: str,
                  plot: bool = True) -> None:
  """Writes ``search_results.csv`` and ``search_results.md`` (one row per
  trial; columns: ``trial``, the flags, ``seed``, ``metric``, ``steps``,
  ``wall_seconds``, ``status``, (``dev_metric``), ``error``) and, with
  ``plot``, ``search_results.png`` (:func:`plot_results`), atomically."""
  cols = _columns(rows)
  buf = io.StringIO()
  w = csv.writer(buf, lineterminator="\n")
  w.writerow(cols)
  for r in rows:
    w.writerow(["" if r[c] is None else r[c] for c in cols])
  io_utils.atomic_write_text(os.path.join(output_dir, RESULTS_CSV), buf.getvalue())
  best = best_trial(rows, metric)

  def cell(c, v):
    if v is None:
      return ""
    if c in ("metric", "dev_metric"):
      return "%.4f" % v
    return ("%g" % v) if isinstance(v, float) else str(v).replace("|", "/")

  lines = ["# Hyperparameter search (metric: %s)" % metric, ""]
  if best is not None:
    lines += ["Best: trial %d, %s = %.4f (`%s`)." % (best["trial"], metric,
                                                     best["metric"], best["run_dir"]), ""]
  lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
  lines += ["| " + " | ".join(cell(c, r[c]) for c in cols) + " |" for r in rows]
  io_utils.atomic_write_text(os.path.join(output_dir, RESULTS_MD), "\n".join(lines) + "\n")
  if plot:
    plot_results(rows, os.path.join(output_dir, RESULTS_PNG), metric)


def plot_results(rows: Sequence[dict], path: str, metric: str) -> Optional[str]:
  """The metric over learning rate (log x axis), one line per batch size,
  one panel per epoch count; restarts as spread (mean with a min-max bar).

  Returns:
    ``path``, or None when no trial completed or the rows have no
    ``learning_rate``.
  """
  done = [r for r in rows if r["status"] == "COMPLETE" and r.get("learning_rate")]
  if not done:
    return None
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  epochs = sorted({r.get("num_train_epochs") for r in done}, key=lambda x: (x is None, x))
  fig, axes = plt.subplots(1, len(epochs), figsize=(4.5 * len(epochs), 3.6),
                           squeeze=False, sharey=True)
  for ax, ep in zip(axes[0], epochs):
    sel = [r for r in done if r.get("num_train_epochs") == ep]
    for bs in sorted({r.get("train_batch_size") for r in sel}, key=lambda x: (x is None, x)):
      pts = {}
      for r in sel:
        if r.get("train_batch_size") == bs:
          pts.setdefault(r["learning_rate"], []).append(r["metric"])
      xs = sorted(pts)
      mean = [sum(pts[x]) / len(pts[x]) for x in xs]
      lo = [m - min(pts[x]) for m, x in zip(mean, xs)]
      hi = [max(pts[x]) - m for m, x in zip(mean, xs)]
      ax.errorbar(xs, mean, yerr=[lo, hi], marker="o", capsize=3,
                  label="batch %s" % bs if bs is not None else "default batch")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_title("%s epochs" % ep if ep is not None else "default epochs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  axes[0][0].set_ylabel(metric)
  fig.tight_layout()
  with io_utils.atomic_output(path) as tmp:
    fig.savefig(tmp, format="png", dpi=100)
  plt.close(fig)
  return path
