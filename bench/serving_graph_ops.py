r"""Which ops a served call runs once Grappler is done (issue 24 item 2).

``bench/serving_breakdown.py`` counts the ops of the *traced* classifier body
(~800); TensorFlow runs what Grappler makes of it: functions inlined,
constants folded, common subexpressions merged, and oneDNN's remapper fusing
MatMul + BiasAdd (+ GELU) into ``_MklNativeFusedMatMul`` and, where its
patterns match, a layer norm into ``_MklLayerNorm``. This script shows that
graph: the classifier body every export traces (all-MiniLM-L6-v2, a seeded
2-label head, ``layers.FusedQKV`` active, token ids in, logits out), its
variables frozen to constants, run once in a ``tf.compat.v1.Session`` with
``output_partition_graphs``, and prints the op types of the partition graph
it executed, most frequent first.

  .venv/bin/python bench/serving_graph_ops.py [--layer_norm=keras|centered|batch_normalization|fused_batch_norm]
      [--static_shape]
  .venv/bin/python bench/serving_graph_ops.py --epsilon_probe

``--layer_norm`` swaps the body's ``LayerNormalization.call`` for a
formulation (same weights, the same outputs within 1e-6 unless Grappler
fuses it, below): ``keras`` (Keras 3's, as trained and exported),
``centered`` (``x - mean``, mean of its square, ``* (rsqrt(var + eps) *
gamma) + beta``: the remapper's second layer-norm pattern),
``batch_normalization`` (``tf.nn.moments`` + ``tf.nn.batch_normalization``:
its third), ``fused_batch_norm`` (Keras 2's ``FusedBatchNormV3`` over
``[1, rows, H, 1]``: its first). ``--static_shape``
traces for the one input shape (batch 1 x 12 tokens) instead of
``[None, None]`` as served, which shows what the shape arithmetic costs.
Counts only: one call, no timing, so it can run beside other work.

Measured 2026-11-27 on TF 2.21 (oneDNN on), batch 1 x 12, served shapes:
398 nodes, 101 of them ``Const``: the 13 layer norms (embeddings + 2 per
block) run 8 ops each (2 ``Mean``, ``SquaredDifference``, ``Rsqrt``, ``Neg``,
``Mul`` x2-3, ``AddV2``), ~104 of the ~300 kernels that do work; the
reshapes' shape arithmetic ~66 (``StridedSlice``, ``Pack``, ``Shape``,
``Unpack``: 16 with a static shape; 11 since the blocks take B and S from
``input_mask``, which every block shares, so Grappler merges the copies:
363 nodes); the attention-mask adder runs once
(``Cast``, ``Sub``, ``ExpandDims``, not per block); GELU is fused into its
matmul. ``centered`` and ``fused_batch_norm`` are not fused into
``_MklLayerNorm``. ``batch_normalization`` is, with gamma and beta constant
(here: frozen) and the axis given as a positive index (the remapper checks
``rank - 1``; ``-1`` does not match): 219 nodes, 13 ``_MklLayerNorm``, and a
``_MklFusedBatchMatMulV2`` per block. But the fused kernel then runs with
epsilon 0.001 whatever the graph's epsilon (the attribute reads ``f:
0.001``; ``--epsilon_probe``: one such layer norm over inputs of std 0.05,
gamma and beta constant, is off by 0.5 from numpy with BERT's 1e-12 and
within 1e-6 with 1e-3), so the logits move by ~1e-3: a TensorFlow 2.21 trap,
not a speed-up we can ship (a SavedModel's weights are variables anyway,
which that pattern does not match).
"""

import argparse
import collections
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _cpuinfo import cpu_line  # pylint: disable=wrong-import-position


def op_count(concrete):
  """Ops of a concrete function's graph plus those of the functions it calls
  (the traced count; also serving_breakdown.py's ``ops`` column)."""
  graph = concrete.graph
  return len(graph.get_operations()) + sum(
      len(f.node_def) for f in graph.as_graph_def().library.function)


def centered_layer_norm(self, x):
  """``LayerNormalization.call`` as ``c = x - mean``, ``var = mean(c^2)``,
  ``c * (rsqrt(var + eps) * gamma) + beta`` (the remapper's second pattern)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  mean = tf.reduce_mean(x, axis=-1, keepdims=True)
  c = x - mean
  var = tf.reduce_mean(tf.square(c), axis=-1, keepdims=True)
  return c * (tf.math.rsqrt(var + self.epsilon) * self.gamma) + self.beta


def batch_normalization_layer_norm(self, x):
  """``LayerNormalization.call`` as ``tf.nn.moments`` + ``tf.nn.batch_normalization``
  over the last axis named by its positive index (Keras 2's unfused layer
  norm): the remapper's third pattern, which needs gamma and beta constant."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  axis = len(x.shape) - 1
  mean, var = tf.nn.moments(x, [axis], keepdims=True)
  return tf.nn.batch_normalization(x, mean, var, self.beta, self.gamma, self.epsilon)


def fused_batch_norm_layer_norm(self, x):
  """``LayerNormalization.call`` as one FusedBatchNormV3 over [1, rows, H, 1]
  (NCHW: one channel per row, statistics over H; Keras 2's fused layer norm)
  + scale and shift: 3 ops, not ~10. Also used by serving_breakdown.py."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rows = tf.reshape(x, [1, -1, x.shape[-1], 1])
  n = tf.shape(rows)[1]
  y = tf.raw_ops.FusedBatchNormV3(
      x=rows, scale=tf.ones([n]), offset=tf.zeros([n]), mean=tf.zeros([0]),
      variance=tf.zeros([0]), epsilon=self.epsilon, data_format="NCHW",
      is_training=True)[0]
  return tf.reshape(y, tf.shape(x)) * self.gamma + self.beta


def epsilon_probe():
  """One ``batch_normalization`` layer norm ([1, 12, 384], std 0.05, gamma and
  beta constant) per epsilon, run by a v1 Session: fused or not, the fused
  kernel's epsilon attribute, and the max |difference| from numpy."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  xv = rng.normal(size=(1, 12, 384)).astype(np.float32) * 0.05
  gv, bv = rng.random(384).astype(np.float32), rng.random(384).astype(np.float32)
  print("| epsilon in the graph | _MklLayerNorm | its epsilon | max abs diff from numpy |")
  print("|---|---|---|---:|")
  for eps in (1e-12, 1e-5, 1e-3):
    graph = tf.Graph()
    with graph.as_default():
      x = tf.compat.v1.placeholder(tf.float32, [None, None, 384])
      mean, var = tf.nn.moments(x, [2], keepdims=True)
      y = tf.identity(tf.nn.batch_normalization(
          x, mean, var, tf.constant(bv), tf.constant(gv), eps))
      meta = tf.compat.v1.RunMetadata()
      with tf.compat.v1.Session(graph=graph) as sess:
        out = sess.run(y, {x: xv}, run_metadata=meta,
                       options=tf.compat.v1.RunOptions(output_partition_graphs=True))
    fused = [n for g in meta.partition_graphs for n in g.node if n.op == "_MklLayerNorm"]
    mu = xv.mean(-1, keepdims=True)
    ref = (xv - mu) / np.sqrt(((xv - mu) ** 2).mean(-1, keepdims=True) + eps) * gv + bv
    print("| %g | %s | %s | %.1e |" % (eps, "yes" if fused else "no",
                                      fused[0].attr["epsilon"].f if fused else "-",
                                      np.abs(out - ref).max()))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  ap.add_argument("--layer_norm", default="keras",
                  choices=("keras", "centered", "batch_normalization", "fused_batch_norm"))
  ap.add_argument("--static_shape", action="store_true")
  ap.add_argument("--epsilon_probe", action="store_true",
                  help="only the one-layer-norm epsilon check")
  args = ap.parse_args()
  if args.epsilon_probe:
    print(cpu_line())
    epsilon_probe()
    return

  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-import-not-at-top
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import layers  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import classification  # pylint: disable=g-import-not-at-top
  from bert_tf.tools.minilm_dir import minilm_dir  # pylint: disable=g-import-not-at-top

  if args.layer_norm != "keras":
    keras.layers.LayerNormalization.call = {
        "centered": centered_layer_norm,
        "batch_normalization": batch_normalization_layer_norm,
        "fused_batch_norm": fused_batch_norm_layer_norm}[args.layer_norm]
  keras.utils.set_random_seed(0)
  mdir = minilm_dir()
  model = classification.build_classifier(checkpoints.read_hf_config(mdir), 2)
  checkpoints.load_encoder_weights(model.encoder, mdir)
  fused = layers.FusedQKV(model)

  def body(input_ids, input_mask, segment_ids):
    with fused.active():
      return model({"input_ids": input_ids, "input_mask": input_mask,
                    "segment_ids": segment_ids}, training=False)

  b, s = 1, 12
  shape = [b, s] if args.static_shape else [None, None]
  conc = tf.function(body, autograph=False).get_concrete_function(
      *[tf.TensorSpec(shape, tf.int32)] * 3)
  traced = op_count(conc)
  frozen = convert_to_constants.convert_variables_to_constants_v2(conc)
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.import_graph_def(frozen.graph.as_graph_def(), name="")
    ins = [graph.get_tensor_by_name(t.name) for t in frozen.inputs]
    outs = [graph.get_tensor_by_name(t.name) for t in frozen.outputs]
  ids = np.random.default_rng(0).integers(1000, 30000, size=(b, s)).astype(np.int32)
  ids[:, 0], ids[:, -1] = 101, 102
  feeds = dict(zip(ins, (ids, np.ones((b, s), np.int32), np.zeros((b, s), np.int32))))
  meta = tf.compat.v1.RunMetadata()
  with tf.compat.v1.Session(graph=graph) as sess:
    logits = sess.run(outs, feeds, run_metadata=meta,
                      options=tf.compat.v1.RunOptions(output_partition_graphs=True))[0]
  ops = collections.Counter(n.op for g in meta.partition_graphs for n in g.node)
  print(cpu_line())
  print("TF %s, TF_ENABLE_ONEDNN_OPTS=%s; layer norm: %s; input %dx%d, traced for %s"
        % (tf.__version__, os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset"),
           args.layer_norm, b, s, "that shape" if args.static_shape else "[None, None]"))
  print("traced ops (functions included): %d; executed graph: %d nodes, %d of them Const; "
        "logits %s" % (traced, sum(ops.values()), ops["Const"], np.round(logits, 6).tolist()))
  print("| op | count |")
  print("|---|---:|")
  for op, n in ops.most_common():
    print("| %s | %d |" % (op, n))


if __name__ == "__main__":
  main()
