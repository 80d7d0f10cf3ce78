"""Where a pretraining step's time goes, per TensorFlow op type, fp32 vs bf16.

Issue 24 item 3 asks for ``--dtype=mixed_bfloat16`` pretraining at >= 3x our
float32 where the CPU has AMX (bf16 matmul there runs ~4.4x the float32
rate). This script profiles the step ``bench_pretraining_step.py`` times
(``OursRunner``: :class:`bert_tf.training.Trainer` over
``BertPretrainer`` + the original ``AdamWeightDecay``, the same synthetic
batch) with the TensorFlow profiler, in each dtype, and prints a table of
self time per op type (ms per step and share of the step), so the parts that
do not speed up with bf16 (element-wise, LayerNorm, softmax, casts, the
optimizer update) can be seen beside the matmuls that do.

The op-type breakdown is TensorFlow's own ``framework_op_stats`` (the
TensorBoard profile plugin's "TF op stats" view), read from the trace with
``tensorflow.python.profiler.internal._pywrap_profiler_plugin`` (shipped in
the TensorFlow wheel); no TensorBoard needed. Profiled steps run slower
than timed ones (tracing overhead): read the shares, and take step speeds
from ``bench_pretraining_step.py``.

Run by hand on idle cores, e.g.::

  .venv/bin/python bench/profile_train_step.py --shape=minilm --steps=4
"""

import argparse
import csv
import glob
import io
import json
import os
import tempfile
import time

import bench_pretraining_step as bps  # noqa: E402  (this folder: sets up bert_tf, TF, keras)

tf = bps.tf


def op_type_table(logdir):
  """Per-op-type rows from the trace in ``logdir``.

  Returns:
    list of dicts with ``type``, ``host_self_us`` (total self time of that op
    type on the host, microseconds) and ``count`` (occurrences), largest
    first.

  Raises:
    RuntimeError: no trace file, or the profiler plugin could not read it.
  """
  from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin  # pylint: disable=g-import-not-at-top
  paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
  if not paths:
    raise RuntimeError("no .xplane.pb under %s" % logdir)
  data, ok = plugin.xspace_to_tools_data(paths, "framework_op_stats", {})
  if not ok:
    raise RuntimeError("framework_op_stats: the profiler plugin could not read %s" % paths)
  if isinstance(data, bytes):
    data = data.decode()
  return _rows(data)


def _rows(data):
  """Op-type totals from the ``framework_op_stats`` payload (a Google
  DataTable JSON, or CSV in some builds)."""
  totals = {}
  text = data.strip()
  if text.startswith("[") or text.startswith("{"):
    tables = json.loads(text)
    table = tables[0] if isinstance(tables, list) else tables
    cols = [c["id"] for c in table["cols"]]
    records = [[cell.get("v") if isinstance(cell, dict) else cell for cell in row["c"]]
               for row in table["rows"]]
  else:
    reader = csv.reader(io.StringIO(text))
    cols = next(reader)
    records = list(reader)
  index = {c: i for i, c in enumerate(cols)}
  type_col = index.get("type", index.get("Type"))
  self_col = index.get("total_self_time", index.get("Total self-time (us)"))
  host_col = index.get("host_or_device", index.get("Host/device"))
  count_col = index.get("occurrences", index.get("#Occurrences"))
  if type_col is None or self_col is None:
    raise RuntimeError("framework_op_stats: unexpected columns %s" % cols)
  for rec in records:
    if host_col is not None and str(rec[host_col]).lower() not in ("host", ""):
      continue
    key = str(rec[type_col])
    t = totals.setdefault(key, {"type": key, "host_self_us": 0.0, "count": 0})
    t["host_self_us"] += float(rec[self_col] or 0)
    if count_col is not None:
      t["count"] += int(float(rec[count_col] or 0))
  # IDLE is the profiler's name for time no op ran on a thread: not an op.
  totals.pop("IDLE", None)
  return sorted(totals.values(), key=lambda r: -r["host_self_us"])


def profile(dtype, config, batch, steps, warmup):
  """Profiles ``steps`` steps of our pretraining step in ``dtype``.

  Returns:
    (rows, wall seconds per profiled step).
  """
  runner = bps.OursRunner(config, batch, dtype, jit_compile=False)
  runner.run(warmup)
  logdir = tempfile.mkdtemp(prefix="bert_tf_profile_")
  tf.profiler.experimental.start(logdir)
  start = time.perf_counter()
  runner.run(steps)
  wall = (time.perf_counter() - start) / steps
  tf.profiler.experimental.stop()
  return op_type_table(logdir), wall


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--shape", default="minilm", choices=sorted(bps.SHAPES))
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--seq_length", type=int, default=128)
  p.add_argument("--max_predictions", type=int, default=20)
  p.add_argument("--steps", type=int, default=4, help="profiled steps per dtype")
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--dtypes", default="float32,mixed_bfloat16")
  p.add_argument("--top", type=int, default=25, help="op types shown")
  args = p.parse_args(argv)

  layers, hidden, heads, inter = bps.SHAPES[args.shape]
  config = bps.config_lib.BertConfig(
      vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=heads, intermediate_size=inter,
      max_position_embeddings=max(512, args.seq_length))
  batch = bps.synthetic_batch(args.batch_size, args.seq_length, args.max_predictions, 30522)
  print(bps.cpu_line())
  print("tf %s, keras %s; shape %s (L=%d H=%d A=%d I=%d), batch %d x %d, %d masked; "
        "%d profiled steps per dtype after %d warm-up"
        % (tf.__version__, bps.keras.__version__, args.shape, layers, hidden, heads, inter,
           args.batch_size, args.seq_length, args.max_predictions, args.steps, args.warmup))
  results = {}
  for dtype in args.dtypes.split(","):
    rows, wall = profile(dtype, config, batch, args.steps, args.warmup)
    results[dtype] = (rows, wall)
    total = sum(r["host_self_us"] for r in rows) / args.steps / 1e3
    print("%s: %.0f ms per profiled step wall, %.0f ms op self time per step "
          "(summed over threads; idle time left out)" % (dtype, wall * 1e3, total))
  names = list(results)
  types = []
  for dtype in names:
    for r in results[dtype][0]:
      if r["type"] not in types:
        types.append(r["type"])
  by = {d: {r["type"]: r for r in results[d][0]} for d in names}
  totals = {d: sum(r["host_self_us"] for r in results[d][0]) for d in names}
  types.sort(key=lambda t: -max(by[d].get(t, {"host_self_us": 0})["host_self_us"] for d in names))
  head = "%-28s" % "op type" + "".join("%16s %6s %7s" % (d[:16], "share", "calls") for d in names)
  print(head)
  print("-" * len(head))
  for t in types[:args.top]:
    line = "%-28s" % t[:28]
    for d in names:
      r = by[d].get(t, {"host_self_us": 0.0, "count": 0})
      line += "%13.1f ms %5.1f%% %7d" % (r["host_self_us"] / args.steps / 1e3,
                                          100.0 * r["host_self_us"] / max(totals[d], 1.0),
                                          r["count"] // args.steps)
    print(line)
  rest = types[args.top:]
  if rest:
    line = "%-28s" % ("(%d other types)" % len(rest))
    for d in names:
      us = sum(by[d].get(t, {"host_self_us": 0.0})["host_self_us"] for t in rest)
      line += "%13.1f ms %5.1f%% %7s" % (us / args.steps / 1e3, 100.0 * us / max(totals[d], 1.0), "")
    print(line)


if __name__ == "__main__":
  main()
