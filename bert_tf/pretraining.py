"""Masked-LM + next-sentence pretraining (original ``run_pretraining.py``).

Loss per replica, as the original: masked-LM ``sum(w * CE) / (sum(w) + 1e-5)``
plus next-sentence mean cross-entropy. Metrics as the original's
``eval_results.txt``: ``masked_lm_accuracy``, ``masked_lm_loss``,
``next_sentence_accuracy``, ``next_sentence_loss``, ``global_step``.
"""

import dataclasses
import os

import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import io_utils
from bert_tf import optimization
from bert_tf import training
from bert_tf.data import pretraining_input
from bert_tf.modeling import models


@dataclasses.dataclass
class PretrainingParams:
  """Flags of the original ``run_pretraining.py`` (same names and defaults)."""
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


def build_pretrainer(config, nsp=True):
  """A :class:`BertPretrainer` with its weights created."""
  model = models.BertPretrainer(config, nsp=nsp)
  dummy = model.encoder.dummy_inputs()
  dummy["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
  model(dummy)
  return model


def pretraining_metrics(outputs, features, nsp=True):
  """Loss (per replica, original definition) and metric counters.

  Returns:
    ``(loss, sums)``: ``loss`` float32 scalar; ``sums`` dict of float32
    counters: ``mlm_loss_sum``, ``mlm_weight``, ``mlm_correct``,
    ``nsp_loss_sum``, ``nsp_correct``, ``examples``.
  """
  logits = outputs["masked_lm_logits"]
  num, den = models.masked_lm_loss(logits, features["masked_lm_ids"],
                                   features["masked_lm_weights"])
  loss = num / (den + 1e-5)
  w = tf.cast(features["masked_lm_weights"], tf.float32)
  pred = tf.argmax(logits, -1, output_type=tf.int32)
  correct = tf.cast(tf.equal(pred, features["masked_lm_ids"]), tf.float32)
  batch = tf.cast(tf.shape(logits)[0], tf.float32)
  sums = {"mlm_loss_sum": num, "mlm_weight": den,
          "mlm_correct": tf.reduce_sum(correct * w), "examples": batch}
  if nsp:
    nsp_logits = outputs["next_sentence_logits"]
    labels = tf.reshape(features["next_sentence_labels"], [-1])
    nsp_sum = models.next_sentence_loss(nsp_logits, labels)
    loss += nsp_sum / batch
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


def format_metrics(metrics):
  return " ".join("%s=%.4f" % (k, v) for k, v in sorted(metrics.items()))


def run_pretraining(config, params, strategy, do_train=True, do_eval=False,
                    print_fn=print):
  """Trains (resuming from ``output_dir``) and/or evaluates.

  Args:
    config: :class:`BertConfig`.
    params: :class:`PretrainingParams`.
    strategy: a ``tf.distribute.Strategy``.
    print_fn: progress lines go here.

  Returns:
    dict of final metrics (training and, with ``do_eval``, evaluation).

  Raises:
    ValueError subclasses with clear messages for inconsistent flags.
  """
  if params.max_seq_length > config.max_position_embeddings:
    raise ValueError("--max_seq_length %d exceeds max_position_embeddings %d of "
                     "the BERT config" % (params.max_seq_length,
                                          config.max_position_embeddings))
  os.makedirs(params.output_dir, exist_ok=True)
  config.to_json_file(os.path.join(params.output_dir, "bert_config.json"))
  with strategy.scope():
    model = build_pretrainer(config, nsp=params.nsp)
    optimizer = optimization.create_optimizer(
        params.learning_rate, params.num_train_steps, params.num_warmup_steps,
        params.optimizer)
    optimizer.build(model.trainable_variables)
  ckpt = tf.train.Checkpoint(model=model, encoder=model.encoder,
                             optimizer=optimizer)
  manager = tf.train.CheckpointManager(
      ckpt, params.output_dir, max_to_keep=3,
      step_counter=optimizer.iterations,
      checkpoint_interval=params.save_checkpoints_steps)
  results = {}
  latest = training.restore_latest(manager)
  if latest:
    print_fn("resumed from %s at step %d" % (latest, int(optimizer.iterations.numpy())))
  elif params.init_checkpoint:
    what = checkpoints.load_encoder_weights(model.encoder, params.init_checkpoint)
    print_fn("initialized the encoder from " + what)

  def compute(features):
    outputs = model(features, training=True)
    loss, sums = pretraining_metrics(outputs, features, params.nsp)
    return loss / strategy.num_replicas_in_sync, sums

  if do_train:
    per_replica_batch = params.train_batch_size // strategy.num_replicas_in_sync
    if per_replica_batch * strategy.num_replicas_in_sync != params.train_batch_size:
      raise ValueError("--train_batch_size %d is not divisible by the %d replicas"
                       % (params.train_batch_size, strategy.num_replicas_in_sync))
    dataset = strategy.distribute_datasets_from_function(
        lambda ctx: pretraining_input.pretraining_dataset(
            params.input_file, ctx.get_per_replica_batch_size(params.train_batch_size),
            params.max_seq_length, params.max_predictions_per_seq,
            is_training=True, seed=params.seed, input_context=ctx))
    trainer = training.Trainer(strategy, model, optimizer, compute)

    def log(step, sums, seconds):
      m = summarize(sums)
      line = "step %d/%d %s lr=%.3g %.1f seq/s" % (
          step, params.num_train_steps, format_metrics(m),
          float(optimizer.learning_rate), sums.get("examples_per_second", 0.0))
      del seconds
      print_fn(line)

    end = min(params.num_train_steps, params.stop_at_step or params.num_train_steps)
    last = trainer.train(iter(dataset), end, manager,
                         steps_per_loop=params.iterations_per_loop, log_fn=log,
                         examples_per_step=params.train_batch_size)
    results.update({"train_" + k: v for k, v in summarize(last).items()})
  if do_eval:
    eval_metrics = evaluate(model, params, nsp=params.nsp)
    print_fn("eval: " + format_metrics(eval_metrics))
    eval_metrics["global_step"] = int(optimizer.iterations.numpy())
    write_eval_results(os.path.join(params.output_dir, "eval_results.txt"),
                       eval_metrics)
    results.update(eval_metrics)
  results["global_step"] = int(optimizer.iterations.numpy())
  return results


def evaluate(model, params, nsp=True):
  """One ordered pass (at most ``max_eval_steps`` batches) over ``input_file``."""
  ds = pretraining_input.pretraining_dataset(
      params.input_file, params.eval_batch_size, params.max_seq_length,
      params.max_predictions_per_seq, is_training=False)

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
