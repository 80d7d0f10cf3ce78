"""Masked-LM + next-sentence pretraining (original ``run_pretraining.py``).

Loss, as the original: masked-LM ``sum(w * CE) / (sum(w) + 1e-5)`` plus
next-sentence mean cross-entropy, over the GLOBAL batch: the denominators
(the masked-LM weight sum and the example count) are summed over all
replicas and accumulation micro-batches before the forward pass (see
:class:`bert_tf.training.Trainer`), so one step is the same whether the
batch runs on one device, on N replicas or in k micro-batches. (On one
device this is exactly the original; the original on a TPU pod averaged the
per-core losses, each with its own denominator.)

Metrics as the original's ``eval_results.txt``: ``masked_lm_accuracy``,
``masked_lm_loss``, ``next_sentence_accuracy``, ``next_sentence_loss``,
``global_step``.

Exact resume: the checkpoint holds the model, the optimizer (with its step),
the dropout seed-generator states and the ``tf.data`` iterator (shuffle
buffers and position), so with ``deterministic=True`` (op determinism) a
run killed at any point and restarted ends with bit-identical weights.
"""

import dataclasses
import os
import shutil
import tempfile

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from bert_tf import checkpoints
from bert_tf import io_utils
from bert_tf import optimization
from bert_tf import tokenization
from bert_tf import training
from bert_tf.data import pretraining_data
from bert_tf.data import pretraining_input
from bert_tf.modeling import models

DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass
class PretrainingParams:
  """Flags of the original ``run_pretraining.py`` (same names and defaults),
  plus the added ones (``tools/run_pretraining.py`` documents each)."""
  input_file: str
  output_dir: str
  init_checkpoint: str = None
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  train_batch_size: int = 32
  eval_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_steps: int = 100000
  num_warmup_steps: int = 10000
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 100
  max_eval_steps: int = 100
  optimizer: str = "adamw_original"
  nsp: bool = True
  seed: int = 12345
  stop_at_step: int = None  # end this run early (checkpointed); resume later
  vocab_file: str = None
  num_accumulation_steps: int = 1
  dtype: str = "float32"
  jit_compile: bool = False
  deterministic: bool = False
  dynamic: bool = False
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  do_whole_word_mask: bool = False
  keep_checkpoint_max: int = 3


build_pretrainer = models.build_pretrainer  # moved to bert_tf.modeling.models


def loss_normalizers(features):
  """Counters the loss is divided by: float32 ``mlm_weight`` (sum of
  ``masked_lm_weights``) and ``examples`` (batch size), from the inputs."""
  return {"mlm_weight": tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                              tf.float32)),
          "examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}


def pretraining_metrics(outputs, features, nsp=True, totals=None):
  """Loss (original definition) and metric counters.

  Args:
    outputs: :class:`BertPretrainer` outputs (logits of any float dtype;
      the loss is computed in float32).
    features: the batch (see :func:`pretraining_input.pretraining_dataset`).
    totals: optional global ``{"mlm_weight", "examples"}`` (see
      :func:`loss_normalizers`): the loss is then this batch's share of the
      global loss ``sum(w*CE)/(W + 1e-5) + sum(nsp CE)/N``; else the loss of
      this batch alone.

  Returns:
    ``(loss, sums)``: ``loss`` float32 scalar; ``sums`` dict of float32
    counters: ``mlm_loss_sum``, ``mlm_weight``, ``mlm_correct``,
    ``nsp_loss_sum``, ``nsp_correct``, ``examples``.
  """
  logits = tf.cast(outputs["masked_lm_logits"], tf.float32)
  num, den = models.masked_lm_loss(logits, features["masked_lm_ids"],
                                   features["masked_lm_weights"])
  w = tf.cast(features["masked_lm_weights"], tf.float32)
  pred = tf.argmax(logits, -1, output_type=tf.int32)
  correct = tf.cast(tf.equal(pred, features["masked_lm_ids"]), tf.float32)
  batch = tf.cast(tf.shape(logits)[0], tf.float32)
  mlm_den = den if totals is None else totals["mlm_weight"]
  examples = batch if totals is None else totals["examples"]
  loss = num / (mlm_den + 1e-5)
  sums = {"mlm_loss_sum": num, "mlm_weight": den,
          "mlm_correct": tf.reduce_sum(correct * w), "examples": batch}
  if nsp:
    nsp_logits = tf.cast(outputs["next_sentence_logits"], tf.float32)
    labels = tf.reshape(features["next_sentence_labels"], [-1])
    nsp_sum = models.next_sentence_loss(nsp_logits, labels)
    loss += nsp_sum / examples
    sums["nsp_loss_sum"] = nsp_sum
    sums["nsp_correct"] = tf.reduce_sum(tf.cast(tf.equal(
        tf.argmax(nsp_logits, -1, output_type=tf.int32), labels), tf.float32))
  return loss, sums


def summarize(sums):
  """Metric counters -> the original's named metrics (floats)."""
  out = {}
  if sums.get("mlm_weight"):
    out["masked_lm_loss"] = sums["mlm_loss_sum"] / sums["mlm_weight"]
    out["masked_lm_accuracy"] = sums["mlm_correct"] / sums["mlm_weight"]
  if "nsp_loss_sum" in sums and sums.get("examples"):
    out["next_sentence_loss"] = sums["nsp_loss_sum"] / sums["examples"]
    out["next_sentence_accuracy"] = sums["nsp_correct"] / sums["examples"]
  return out


def write_scalars(writer, step, scalars):
  """TensorBoard scalars (``tf.summary.write`` with the ``scalars`` plugin's
  metadata: what ``tf.summary.scalar`` writes, without needing the
  ``tensorboard`` package at training time)."""
  meta = summary_pb2.SummaryMetadata(
      plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
  with writer.as_default(step=step):
    for k, v in scalars.items():
      tf.summary.write(k, tf.constant(float(v), tf.float32), metadata=meta)
  writer.flush()


def format_metrics(metrics):
  return " ".join("%s=%.4f" % (k, v) for k, v in sorted(metrics.items()))


def set_dtype_policy(dtype):
  """Sets the Keras dtype policy named by ``--dtype``.

  Raises:
    ValueError: naming ``--dtype`` for an unknown value.
  """
  if dtype not in DTYPES:
    raise ValueError("--dtype: unknown %r (%s)" % (dtype, ", ".join(DTYPES)))
  keras.config.set_dtype_policy(dtype)


def vocab_size_of(vocab_file):
  """Number of tokens in a vocab file (one per line, as the original)."""
  return len(tokenization.load_vocab(vocab_file))


def check_inputs(config, params, batch_records=None):
  """Everything that can be checked before any step runs.

  Checks ``--max_seq_length`` against ``max_position_embeddings``, the vocab
  file's size against ``vocab_size``, that ``--input_file`` matches files,
  and (static pipeline) the first records of every shard: their widths
  against ``--max_seq_length`` / ``--max_predictions_per_seq`` and their
  token ids (the first batch of the first file) against ``vocab_size``.

  Returns:
    the list of input files.

  Raises:
    ValueError / ``pretraining_data.InputError`` /
    ``pretraining_input.RecordError``, naming the flag or file.
  """
  if params.max_seq_length > config.max_position_embeddings:
    raise ValueError("--max_seq_length %d exceeds max_position_embeddings %d of "
                     "the BERT config" % (params.max_seq_length,
                                          config.max_position_embeddings))
  if params.vocab_file:
    n = vocab_size_of(params.vocab_file)
    if n > config.vocab_size:
      raise ValueError(
          "vocab file %r has %d tokens but the BERT config's vocab_size is %d: "
          "ids >= %d would index past the embedding table (the original "
          "silently trains on NaNs); fix vocab_size in the config"
          % (params.vocab_file, n, config.vocab_size, config.vocab_size))
  if params.num_accumulation_steps < 1:
    raise ValueError("--num_accumulation_steps must be >= 1, got %d"
                     % params.num_accumulation_steps)
  files = pretraining_data.expand_input_files(params.input_file)
  if not params.dynamic:
    pretraining_input.inspect_records(
        files[:1], params.max_seq_length, params.max_predictions_per_seq,
        vocab_size=config.vocab_size,
        num_records=max(1, batch_records or params.train_batch_size))
    if len(files) > 1:
      pretraining_input.inspect_records(
          files[1:], params.max_seq_length, params.max_predictions_per_seq,
          vocab_size=config.vocab_size, num_records=1)
  return files


def _worker_info(strategy):
  """``(num_workers, worker_index, is_chief)`` of this process."""
  resolver = getattr(strategy, "cluster_resolver", None)
  local = training.local_replica_count(strategy)
  num_workers = max(1, strategy.num_replicas_in_sync // max(1, local))
  if resolver is None or num_workers == 1 or isinstance(strategy, tf.distribute.TPUStrategy):
    return 1, 0, True
  task_type, task_id = resolver.task_type, resolver.task_id or 0
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  index = 0 if task_type == "chief" else task_id + (1 if has_chief else 0)
  return num_workers, index, strategy.extended.should_checkpoint


def _dataset(params, batch_size, is_training, input_context):
  if params.dynamic:
    from bert_tf.data.dynamic_masking import dynamic_pretraining_dataset  # pylint: disable=g-import-not-at-top
    if not params.vocab_file:
      raise ValueError("--dynamic needs --vocab_file")
    return dynamic_pretraining_dataset(
        params.input_file, params.vocab_file, batch_size, params.max_seq_length,
        params.max_predictions_per_seq, masked_lm_prob=params.masked_lm_prob,
        short_seq_prob=params.short_seq_prob,
        do_whole_word_mask=params.do_whole_word_mask, nsp=params.nsp,
        seed=params.seed, is_training=is_training, input_context=input_context)
  return pretraining_input.pretraining_dataset(
      params.input_file, batch_size, params.max_seq_length,
      params.max_predictions_per_seq, is_training=is_training, seed=params.seed,
      input_context=input_context)


def _name_bad_record(params, files, error):
  """Re-raises a tf.data parse error naming the file and record (scans the
  shards one by one); re-raises ``error`` itself when no record is bad."""
  if params.dynamic:
    raise error
  where = pretraining_input.find_bad_record(files, params.max_seq_length,
                                            params.max_predictions_per_seq)
  if where is None:
    raise error
  raise pretraining_input.RecordError("--input_file: " + where) from None


def run_pretraining(config, params, strategy, do_train=True, do_eval=False,
                    print_fn=print, on_finish=None):
  """Trains (resuming from ``output_dir``) and/or evaluates.

  Files in ``output_dir``: ``bert_config.json``, checkpoints ``ckpt-N``
  (chief only; other workers of a multi-worker job write to a temporary
  directory that is removed), ``eval_results.txt``, TensorBoard event files
  in ``train/`` and ``eval/`` (losses, accuracies, learning rate,
  sequences/s).

  Args:
    config: :class:`BertConfig`.
    params: :class:`PretrainingParams`.
    strategy: a ``tf.distribute.Strategy``.
    print_fn: progress lines go here (one per ``iterations_per_loop``).
    on_finish: optional ``on_finish(model, optimizer)`` called at the end
      (tests read the final weights of every worker with it).

  Returns:
    dict of final metrics (training and, with ``do_eval``, evaluation).

  Raises:
    ValueError subclasses with clear messages for inconsistent flags and bad
    records, raised before any step runs where they can be detected from the
    flags and the first records.
  """
  files = check_inputs(config, params)
  if params.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(params.seed)
  set_dtype_policy(params.dtype)
  num_workers, worker_index, is_chief = _worker_info(strategy)
  if params.train_batch_size % (strategy.num_replicas_in_sync *
                                params.num_accumulation_steps):
    raise ValueError("--train_batch_size %d is not divisible by the %d replicas "
                     "x %d accumulation steps" % (
                         params.train_batch_size, strategy.num_replicas_in_sync,
                         params.num_accumulation_steps))
  os.makedirs(params.output_dir, exist_ok=True)
  ckpt_dir = params.output_dir
  if is_chief:
    config.to_json_file(os.path.join(params.output_dir, "bert_config.json"))
  else:
    ckpt_dir = tempfile.mkdtemp(prefix=".worker%d." % worker_index,
                                dir=params.output_dir)
  try:
    with strategy.scope():
      model = build_pretrainer(config, nsp=params.nsp)
      optimizer = optimization.create_optimizer(
          params.learning_rate, params.num_train_steps, params.num_warmup_steps,
          params.optimizer)
      if params.dtype == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
      optimizer.build(model.trainable_variables)
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    iterator = None
    if do_train:
      worker_batch = params.train_batch_size // num_workers
      if tpu:
        dataset = strategy.distribute_datasets_from_function(
            lambda ctx: _dataset(params, ctx.get_per_replica_batch_size(
                params.train_batch_size), True, ctx))
      else:
        ctx = tf.distribute.InputContext(num_workers, worker_index,
                                         strategy.num_replicas_in_sync)
        dataset = _dataset(params, worker_batch, True, ctx)
      iterator = iter(dataset)
    objects = dict(model=model, encoder=model.encoder, optimizer=optimizer,
                   rng=training.seed_generator_states(model))
    if iterator is not None and not tpu:
      # The data position and shuffle buffers (exact resume). Only this
      # worker's iterator can be saved: a multi-worker job resumes the
      # chief's data position on every worker (documented).
      if num_workers == 1:
        objects["iterator"] = iterator
    ckpt = tf.train.Checkpoint(**objects)
    manager = tf.train.CheckpointManager(
        ckpt, ckpt_dir, max_to_keep=params.keep_checkpoint_max,
        step_counter=optimizer.iterations,
        checkpoint_interval=params.save_checkpoints_steps)
    results = {}
    latest = training.restore_latest(
        tf.train.CheckpointManager(ckpt, params.output_dir, max_to_keep=None)
        if not is_chief else manager)
    if latest:
      print_fn("resumed from %s at step %d" % (latest,
                                                int(optimizer.iterations.numpy())))
    elif params.init_checkpoint:
      what = checkpoints.load_encoder_weights(model.encoder, params.init_checkpoint)
      print_fn("initialized the encoder from " + what)

    def compute(features, totals):
      outputs = model(features, training=True)
      return pretraining_metrics(outputs, features, params.nsp, totals)

    if do_train:
      trainer = training.Trainer(
          strategy, model, optimizer, compute,
          num_accumulation_steps=params.num_accumulation_steps,
          normalizer_fn=loss_normalizers, jit_compile=params.jit_compile)
      writer = (tf.summary.create_file_writer(os.path.join(params.output_dir, "train"))
                if is_chief else tf.summary.create_noop_writer())

      def log(step, sums, seconds):
        m = summarize(sums)
        lr = float(optimizer.learning_rate)
        seq_s = sums.get("examples_per_second", 0.0)
        print_fn("step %d/%d %s lr=%.3g %.1f seq/s (%.1fs)" % (
            step, params.num_train_steps, format_metrics(m), lr, seq_s, seconds))
        write_scalars(writer, step, dict(m, learning_rate=lr,
                                         sequences_per_second=seq_s))

      end = min(params.num_train_steps, params.stop_at_step or params.num_train_steps)
      try:
        last = trainer.train(iterator, end, manager,
                             steps_per_loop=params.iterations_per_loop, log_fn=log,
                             examples_per_step=params.train_batch_size)
      except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        _name_bad_record(params, files, e)
      results.update({"train_" + k: v for k, v in summarize(last).items()})
    if do_eval:
      try:
        eval_metrics = evaluate(model, params, nsp=params.nsp)
      except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        _name_bad_record(params, files, e)
      print_fn("eval: " + format_metrics(eval_metrics))
      eval_metrics["global_step"] = int(optimizer.iterations.numpy())
      if is_chief:
        write_eval_results(os.path.join(params.output_dir, "eval_results.txt"),
                           eval_metrics)
        write_scalars(
            tf.summary.create_file_writer(os.path.join(params.output_dir, "eval")),
            eval_metrics["global_step"],
            {k: v for k, v in eval_metrics.items() if k != "global_step"})
      results.update(eval_metrics)
    results["global_step"] = int(optimizer.iterations.numpy())
    if on_finish is not None:
      on_finish(model, optimizer)
    return results
  finally:
    if not is_chief:
      shutil.rmtree(ckpt_dir, ignore_errors=True)


def evaluate(model, params, nsp=True):
  """One ordered pass (at most ``max_eval_steps`` batches) over ``input_file``.

  Static pipeline: the records in file order, not shuffled, the last partial
  batch kept (the original's ``is_training=False`` input_fn).
  """
  ds = _dataset(params, params.eval_batch_size, False, None)

  @tf.function(reduce_retracing=True)
  def step(features):
    return pretraining_metrics(model(features, training=False), features, nsp)[1]

  totals = {}
  for i, features in enumerate(ds):
    if i >= params.max_eval_steps:
      break
    for k, v in step(features).items():
      totals[k] = totals.get(k, 0.0) + float(v)
  return summarize(totals)


def write_eval_results(path, metrics):
  """``key = value`` lines, sorted, as the original's ``eval_results.txt``."""
  io_utils.atomic_write_text(
      path, "".join("%s = %s\n" % (k, metrics[k]) for k in sorted(metrics)))
