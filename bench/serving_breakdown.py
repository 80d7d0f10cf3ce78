"""Where a served call's time goes: the classifier body, variant by variant.

Issue 24 item 2 asks for serving at or below ONNX Runtime and for each
step's gain. This script times the classifier *body* (token ids in, logits
out, all-MiniLM-L6-v2 with a seeded 2-label head) in one process, variants
interleaved call by call, on the shapes the serving benchmark uses:

* ``graph``: today's inference graph (``tf.function``, what the export runs);
* ``graph+qkv``: the same with the query/key/value kernels concatenated once
  ahead of time (``layers.FusedQKV``, what the exports trace with since
  2026-11-27; before, the graph concatenated the three [H, H] kernels into
  [H, 3H] on every call: ~1.8 MB copied per layer at H=384);
* ``graph+qkv+fbn``: and every LayerNorm as one ``FusedBatchNormV3`` over
  ``[1, rows, H, 1]`` (NCHW: a channel per row, statistics over H; the
  Keras 2 fused layer norm) + scale and shift, 3 ops instead of ~10;
* ``xla`` / ``xla+qkv``: the first two bodies compiled with
  ``jit_compile=True`` (one XLA cluster);
* ``graph+qkv+bf16`` / ``xla+qkv+bf16``: ``layers.FusedQKV(model,
  dtype="bfloat16")``, what ``export_saved_model --serving_dtype=bfloat16``
  traces: the blocks' weights stored in bfloat16, the body computed under
  ``mixed_bfloat16`` (pays where the CPU has ``avx512_bf16`` / AMX).

Each row: median and p90 ms over ``--calls`` calls per variant; the op count
of the traced function (nested functions included); max |logit diff| vs
``graph``. Shapes: batch 1 x 12 tokens (a short question), 1 x 128, 1 x 384,
32 x 24.

  .venv/bin/python bench/serving_breakdown.py [--calls=200] [--inter_op=1]

``--inter_op`` / ``--intra_op`` set TensorFlow's thread pools before any op
runs (TF Serving sets them from its own flags); run with
``TF_ENABLE_ONEDNN_OPTS=0`` in the environment to see the graph without
oneDNN. Needs idle cores: another process on them makes every figure noise.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _cpuinfo import cpu_line  # pylint: disable=wrong-import-position
from serving_graph_ops import fused_batch_norm_layer_norm, op_count  # pylint: disable=wrong-import-position

SHAPES = ((1, 12), (1, 128), (1, 384), (32, 24))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--calls", type=int, default=200)
  ap.add_argument("--inter_op", type=int, default=0)
  ap.add_argument("--intra_op", type=int, default=0)
  ap.add_argument("--shapes", default=",".join("%dx%d" % s for s in SHAPES))
  ap.add_argument("--variants", default="",
                  help="comma-separated subset of the variants (default: all)")
  args = ap.parse_args()

  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if args.inter_op:
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  if args.intra_op:
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import layers  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import classification  # pylint: disable=g-import-not-at-top
  from bert_tf.tools.minilm_dir import minilm_dir  # pylint: disable=g-import-not-at-top

  keras.utils.set_random_seed(0)
  mdir = minilm_dir()
  model = classification.build_classifier(checkpoints.read_hf_config(mdir), 2)
  checkpoints.load_encoder_weights(model.encoder, mdir)

  fused = layers.FusedQKV(model)  # what every export traces with
  fused_bf16 = layers.FusedQKV(model, dtype="bfloat16")  # --serving_dtype=bfloat16

  plain_ln = keras.layers.LayerNormalization.call
  fbn_ln = fused_batch_norm_layer_norm

  def body(use_qkv, use_fbn=False, bf16=False):
    def f(input_ids, input_mask, segment_ids):
      feats = {"input_ids": input_ids, "input_mask": input_mask,
               "segment_ids": segment_ids}
      keras.layers.LayerNormalization.call = fbn_ln if use_fbn else plain_ln
      try:
        if not use_qkv:
          return model(feats, training=False)
        with (fused_bf16 if bf16 else fused).active():
          return tf.cast(model(feats, training=False), tf.float32)
      finally:
        keras.layers.LayerNormalization.call = plain_ln
    return f

  variants = {}
  wanted = set(filter(None, args.variants.split(",")))
  for name, use_qkv, jit, fbn, bf16 in (
      ("graph", False, False, False, False), ("graph+qkv", True, False, False, False),
      ("graph+qkv+fbn", True, False, True, False),
      ("xla", False, True, False, False), ("xla+qkv", True, True, False, False),
      ("graph+qkv+bf16", True, False, False, True),
      ("xla+qkv+bf16", True, True, False, True)):
    if name == "graph" or not wanted or name in wanted:  # graph: the reference
      variants[name] = tf.function(body(use_qkv, fbn, bf16), jit_compile=jit,
                                   autograph=False)

  print(cpu_line())
  print("threads: inter_op %s, intra_op %s; TF_ENABLE_ONEDNN_OPTS=%s; load average %.1f"
        % (args.inter_op or "default", args.intra_op or "default",
           os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset"), os.getloadavg()[0]))
  print("| shape (batch x tokens) | variant | median ms | p90 ms | ops | max abs logit diff |")
  print("|---|---|---:|---:|---:|---:|")
  rng = np.random.default_rng(0)
  for shape in args.shapes.split(","):
    b, s = (int(v) for v in shape.split("x"))
    ids = rng.integers(1000, 30000, size=(b, s)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 101, 102
    feeds = (tf.constant(ids), tf.ones([b, s], tf.int32), tf.zeros([b, s], tf.int32))
    ref = variants["graph"](*feeds).numpy()
    ops, diffs, times = {}, {}, {n: [] for n in variants}
    for name, fn in variants.items():
      conc = fn.get_concrete_function(*feeds)
      ops[name] = op_count(conc)
      diffs[name] = float(np.abs(fn(*feeds).numpy() - ref).max())
      for _ in range(5):
        fn(*feeds).numpy()
    for _ in range(args.calls):
      for name, fn in variants.items():
        t0 = time.perf_counter()
        fn(*feeds).numpy()
        times[name].append(1000.0 * (time.perf_counter() - t0))
    for name in variants:
      t = sorted(times[name])
      print("| %dx%d | %s | %.2f | %.2f | %d | %.1e |" % (
          b, s, name, statistics.median(t), t[int(0.9 * (len(t) - 1))], ops[name],
          diffs[name]))


if __name__ == "__main__":
  main()
