"""Pretraining step speed: bert_tf vs keras-hub, side by side in one run.

Measures sequences/s of one full pretraining step (forward, masked-LM +
next-sentence losses, backward, optimizer update) at a given shape, in
``float32`` and ``mixed_bfloat16``, on one synthetic batch (full-length
rows, ``--max_predictions`` masked positions, dropout 0.1), for:

* ``bert_tf``: ``BertPretrainer`` trained by ``training.Trainer`` (the step
  ``tools/run_pretraining.py`` runs: global-norm clipping, the original
  ``AdamWeightDecay``), with and without ``jit_compile`` (XLA);
* ``keras_hub``: ``BertBackbone`` + ``MaskedLMHead`` (tied embedding, as
  ``BertMaskedLM``) + a ``Dense(2)`` next-sentence head on the pooled output,
  ``keras.optimizers.AdamW`` (clipping 1.0) in a ``tf.function`` step (what
  ``fit`` runs on CPU, where Keras 3 turns ``jit_compile="auto"`` off).

Every runner (and the matmul peak) is timed in turn, ``--repeats`` rounds of
``--steps`` steps, the MEDIAN reported (a neighbour's load hits all alike).
FLOPs per step are counted analytically (multiply-add = 2; step = 3 x
forward), T = B*S tokens, P = masked positions per row::

  forward = 2*T*L*(4*H^2 + 2*H*I)          # Q, K, V, attention-output, FFN
          + 2*2*L*B*S^2*H                  # Q.K^T and probs.V
          + 2*B*P*(H^2 + H*V)              # masked-LM transform + tied output
          + 2*B*(H^2 + 2*H)                # pooler + next-sentence

Each runner's GFLOP/s is given as a fraction of the peak of a [4096, 1024] x
[1024, 4096] ``tf.matmul`` in float32 and in bfloat16 (oneDNN, no XLA).
Input pipelines, against the fastest runner's sequences/s: ``--records``
(original-format TFRecords at the same shape): examples/s of
``pretraining_dataset``; ``--documents`` (``create_pretraining_documents.py``
output): the dynamic masking pipeline, with and without whole-word masking
(``--shapes=`` times the pipelines alone).

Run by hand (needs ``bench/requirements.txt``, installed with ``--no-deps``)::

  .venv/bin/python bench/bench_pretraining_step.py                # MiniLM + BASE
  .venv/bin/python bench/bench_pretraining_step.py --shapes=minilm --steps=5 \\
      --repeats=5 --records='/tmp/austen_records/*.tfrecord'
  .venv/bin/python bench/bench_pretraining_step.py --shapes= --documents=/tmp/docs.tfrecord
"""

import argparse
import gc
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bert_tf  # noqa: E402,F401  (sets KERAS_BACKEND=tensorflow)
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import config as config_lib  # noqa: E402
from bert_tf import optimization  # noqa: E402
from bert_tf.tasks import pretraining  # noqa: E402
from bert_tf import training  # noqa: E402
from _cpuinfo import record  # noqa: E402

SHAPES = {
    # name: (layers, hidden, heads, intermediate)
    "minilm": (6, 384, 12, 1536),
    "base": (12, 768, 12, 3072),
    "tiny": (2, 128, 2, 512),
}


def step_flops(layers, hidden, intermediate, vocab, batch, seq, preds):
  """FLOPs of one training step (formula in the module docstring)."""
  t = batch * seq
  fwd = (2 * t * layers * (4 * hidden ** 2 + 2 * hidden * intermediate)
         + 2 * 2 * layers * batch * seq ** 2 * hidden
         + 2 * batch * preds * (hidden ** 2 + hidden * vocab)
         + 2 * batch * (hidden ** 2 + 2 * hidden))
  return 3 * fwd


def synthetic_batch(batch, seq, preds, vocab, seed=0):
  """A fixed pretraining batch: full-length rows (as packed pretraining
  records are), two segments, ``preds`` sorted distinct masked positions."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(1000, vocab, size=(batch, seq)).astype(np.int32)
  seg = np.zeros((batch, seq), np.int32)
  seg[:, seq // 2:] = 1
  pos = np.stack([np.sort(rng.choice(np.arange(1, seq), preds, replace=False))
                  for _ in range(batch)]).astype(np.int32)
  return {
      "input_ids": ids, "input_mask": np.ones((batch, seq), np.int32),
      "segment_ids": seg, "masked_lm_positions": pos,
      "masked_lm_ids": rng.randint(1000, vocab, size=(batch, preds)).astype(np.int32),
      "masked_lm_weights": np.ones((batch, preds), np.float32),
      "next_sentence_labels": rng.randint(0, 2, size=(batch, 1)).astype(np.int32),
  }


class OursRunner:
  """bert_tf BertPretrainer + AdamWeightDecay, stepped by training.Trainer."""

  def __init__(self, config, batch, dtype, jit_compile):
    self.name = "bert_tf" + (" +jit" if jit_compile else "")
    self.dtype = dtype
    keras.config.set_dtype_policy(dtype)
    try:
      strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
      with strategy.scope():
        self.model = pretraining.build_pretrainer(config)
        self.optimizer = optimization.create_optimizer(1e-4, 100000, 1000)
        self.optimizer.build(self.model.trainable_variables)
    finally:
      keras.config.set_dtype_policy("float32")
    model = self.model

    def compute(features, totals):
      outputs = model(features, training=True)
      return pretraining.pretraining_metrics(outputs, features, True, totals)

    self.trainer = training.Trainer(
        strategy, model, self.optimizer, compute,
        normalizer_fn=pretraining.loss_normalizers, jit_compile=jit_compile)
    self.iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())

  def run(self, steps):
    done = int(self.optimizer.iterations.numpy())
    self.trainer.train(self.iterator, done + steps, steps_per_loop=steps)


class KerasHubRunner:
  """keras-hub BertBackbone + MaskedLMHead + Dense(2) NSP, Keras AdamW."""

  def __init__(self, config, batch, dtype):
    import keras_hub  # pylint: disable=g-import-not-at-top
    self.name = "keras_hub"
    self.dtype = dtype
    keras.config.set_dtype_policy(dtype)
    try:
      backbone = keras_hub.models.BertBackbone(
          vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
          num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
          intermediate_dim=config.intermediate_size, dropout=0.1,
          max_sequence_length=config.max_position_embeddings)
      mlm_head = keras_hub.layers.MaskedLMHead(
          vocabulary_size=config.vocab_size,
          token_embedding=backbone.token_embedding,
          intermediate_activation="gelu",
          kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
          name="mlm_head")
      nsp_head = keras.layers.Dense(
          2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
          name="nsp_head")
      inputs = dict(backbone.input)
      inputs["mask_positions"] = keras.Input(shape=(None,), dtype="int32",
                                             name="mask_positions")
      out = backbone(backbone.input)
      model = keras.Model(inputs, {
          "mlm": mlm_head(out["sequence_output"], inputs["mask_positions"]),
          "nsp": nsp_head(out["pooled_output"])})
      optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6,
                                         global_clipnorm=1.0)
      optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
      optimizer.build(model.trainable_variables)
    finally:
      keras.config.set_dtype_policy("float32")
    self.model, self.optimizer = model, optimizer
    features = {"token_ids": batch["input_ids"], "segment_ids": batch["segment_ids"],
                "padding_mask": batch["input_mask"],
                "mask_positions": batch["masked_lm_positions"]}
    labels = (batch["masked_lm_ids"], batch["masked_lm_weights"],
              batch["next_sentence_labels"][:, 0])
    self.iterator = iter(tf.data.Dataset.from_tensors((features, labels)).repeat())

    def one_step(iterator):
      x, (ids, weights, nsp_labels) = next(iterator)
      with tf.GradientTape() as tape:
        out = model(x, training=True)
        ce = keras.losses.sparse_categorical_crossentropy(
            ids, tf.cast(out["mlm"], tf.float32), from_logits=True)
        loss = tf.reduce_sum(ce * weights) / (tf.reduce_sum(weights) + 1e-5)
        loss += tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
            nsp_labels, tf.cast(out["nsp"], tf.float32), from_logits=True))
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss

    @tf.function(reduce_retracing=True)
    def steps_fn(iterator, n):
      loss = one_step(iterator)
      for _ in tf.range(n - 1):
        loss = one_step(iterator)
      return loss

    self._steps = steps_fn

  def run(self, steps):
    self._steps(self.iterator, tf.constant(steps)).numpy()


class PeakRunner:
  """A [4096, 1024] x [1024, 4096] matmul in ``dtype`` (oneDNN, no XLA)."""

  def __init__(self, dtype, m=4096, k=1024, n=4096):
    self.name, self.dtype = "matmul peak", tf.as_dtype(dtype).name
    self.flops = 2 * m * k * n
    self.a = tf.cast(tf.random.normal([m, k]), dtype)
    self.b = tf.cast(tf.random.normal([k, n]), dtype)
    self._fn = tf.function(
        lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b)[:1, :1], tf.float32)))

  def run(self, steps):
    for _ in range(steps):
      self._fn(self.a, self.b).numpy()


def time_rotation(runners, steps, repeats, peak_steps, log):
  """Median seconds per step of each runner over ``repeats`` interleaved rounds."""
  times = {id(r): [] for r in runners}
  for rnd in range(repeats):
    for r in runners:
      n = peak_steps if isinstance(r, PeakRunner) else steps
      start = time.perf_counter()
      r.run(n)
      sec = (time.perf_counter() - start) / n
      times[id(r)].append(sec)
      log("  round %d %-14s %-15s %.3f s/step" % (rnd + 1, r.name, r.dtype, sec))
  return {k: statistics.median(v) for k, v in times.items()}


def pipelines(args):
  """``[(name, dataset)]``: the input pipelines ``--records`` and
  ``--documents`` ask for, at the benchmark's batch shape."""
  from bert_tf.data.pretraining import dynamic  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pretraining import input as pretraining_input  # pylint: disable=g-import-not-at-top
  shape = (args.batch_size, args.seq_length, args.max_predictions)
  out = []
  if args.records:
    out.append(("pretraining_dataset(%s)" % args.records, pretraining_input.pretraining_dataset(
        args.records, *shape, is_training=True, seed=1)))
  vocab = os.path.join(ROOT, "data", "vocab", "uncased_vocab.txt")
  for wwm in (False, True) if args.documents else ():
    out.append(("dynamic_pretraining_dataset(%s, whole_word_mask=%s)" % (args.documents, wwm),
                dynamic.dynamic_pretraining_dataset(args.documents, vocab, *shape, seed=1,
                                                    do_whole_word_mask=wwm)))
  return out


def pipeline_rate(ds, batch, num_batches):
  """Examples/s of ``ds`` over ``num_batches`` batches, after 5."""
  it = iter(ds)
  for _ in range(5):
    next(it)
  start = time.perf_counter()
  for _ in range(num_batches):
    next(it)
  return num_batches * batch / (time.perf_counter() - start)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--shapes", default="minilm,base",
                 help="comma-separated: minilm (L6 H384 A12 I1536), base "
                      "(L12 H768 A12 I3072), tiny, or L:H:A:I")
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--seq_length", type=int, default=128)
  p.add_argument("--max_predictions", type=int, default=20)
  p.add_argument("--vocab_size", type=int, default=30522)
  p.add_argument("--steps", type=int, default=0,
                 help="steps per timed round (0: 4 for small shapes, 2 for base)")
  p.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
  p.add_argument("--dtypes", default="float32,mixed_bfloat16")
  p.add_argument("--impls", default="ours,ours_jit,keras_hub",
                 help="comma-separated: ours, ours_jit, keras_hub")
  p.add_argument("--records", default=None,
                 help="TFRecord glob for the input-pipeline row")
  p.add_argument("--documents", default=None,
                 help="document records (tools/create_pretraining_documents.py) for "
                      "the dynamic masking pipeline's rows")
  p.add_argument("--pipeline_batches", type=int, default=200)
  args = p.parse_args(argv)
  log = lambda s: print(s, flush=True)  # noqa: E731

  record()
  log("tf %s, keras %s, TF_ENABLE_ONEDNN_OPTS=%s, XLA_FLAGS=%r, %d CPU threads"
      % (tf.__version__, keras.__version__, os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(default)"),
         os.environ.get("XLA_FLAGS", ""), os.cpu_count()))
  dtypes = args.dtypes.split(",")
  impls = args.impls.split(",")
  rows = []
  best_rate = 0.0
  for shape in [s for s in args.shapes.split(",") if s]:
    if shape in SHAPES:
      layers, hidden, heads, inter = SHAPES[shape]
    else:
      layers, hidden, heads, inter = (int(x) for x in shape.split(":"))
    config = config_lib.BertConfig(
        vocab_size=args.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=inter, type_vocab_size=2)
    steps = args.steps or (2 if hidden >= 768 else 4)
    batch = synthetic_batch(args.batch_size, args.seq_length, args.max_predictions,
                            args.vocab_size)
    flops = step_flops(layers, hidden, inter, args.vocab_size, args.batch_size,
                       args.seq_length, args.max_predictions)
    log("== %s: L=%d H=%d A=%d I=%d V=%d, batch %d x seq %d, %d masked; "
        "%.1f GFLOP/step" % (shape, layers, hidden, heads, inter, args.vocab_size,
                             args.batch_size, args.seq_length, args.max_predictions,
                             flops / 1e9))
    runners = [PeakRunner(tf.float32), PeakRunner(tf.bfloat16)]
    for dtype in dtypes:
      for impl in impls:
        if impl == "keras_hub":
          runners.append(KerasHubRunner(config, batch, dtype))
        else:
          runners.append(OursRunner(config, batch, dtype, impl == "ours_jit"))
    for r in runners:  # trace/compile and one warm-up step each
      start = time.perf_counter()
      r.run(1 if not isinstance(r, PeakRunner) else 3)
      log("  warm-up %-14s %-15s %.1f s" % (r.name, r.dtype, time.perf_counter() - start))
    med = time_rotation(runners, steps, args.repeats, 3 * steps, log)
    peak = {r.dtype: r.flops / med[id(r)] for r in runners if isinstance(r, PeakRunner)}
    ref = [r for r in runners if r.name == "keras_hub" and r.dtype == "float32"]
    ref_rate = args.batch_size / med[id(ref[0])] if ref else None
    for r in runners:
      if isinstance(r, PeakRunner):
        continue
      rate = args.batch_size / med[id(r)]
      best_rate = max(best_rate, rate)
      gflops = flops / med[id(r)] / 1e9
      rows.append((shape, r.name, r.dtype, rate,
                   rate / ref_rate if ref_rate else float("nan"), gflops,
                   gflops * 1e9 / peak["float32"], gflops * 1e9 / peak["bfloat16"]))
    rows.append((shape, "matmul peak", "float32", float("nan"), float("nan"),
                 peak["float32"] / 1e9, 1.0, peak["float32"] / peak["bfloat16"]))
    rows.append((shape, "matmul peak", "bfloat16", float("nan"), float("nan"),
                 peak["bfloat16"] / 1e9, peak["bfloat16"] / peak["float32"], 1.0))
    del runners
    keras.backend.clear_session()
    gc.collect()

  log("")
  log("| shape | implementation | dtype | seq/s | vs keras_hub fp32 | GFLOP/s "
      "| of fp32 peak | of bf16 peak |")
  log("|---|---|---|---|---|---|---|---|")
  for shape, name, dtype, rate, ratio, gflops, f32, bf16 in rows:
    log("| %s | %s | %s | %s | %s | %.1f | %.2f | %.2f |" % (
        shape, name, dtype, "-" if rate != rate else "%.2f" % rate,
        "-" if ratio != ratio else "%.2fx" % ratio, gflops, f32, bf16))
  for name, ds in pipelines(args):
    rate = pipeline_rate(ds, args.batch_size, args.pipeline_batches)
    log("| input pipeline | %s | - | %.0f examples/s | %s | | | |" % (
        name, rate, "%.0fx the fastest step above (%.2f seq/s)" % (rate / best_rate, best_rate)
        if best_rate else "-"))


if __name__ == "__main__":
  main()
