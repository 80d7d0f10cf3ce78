"""Fine-tuning a sentence(-pair) classifier (original ``run_classifier.py``).

Tokenization and packing are the in-graph :class:`BertPreprocessor`, the
same object that :mod:`export.saved_model` bakes into the SavedModel.
The optimizer is the original AdamWeightDecay with linear warm-up over
``warmup_proportion`` of the steps and linear decay to 0.
"""

import dataclasses
import json
import os
import shutil

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import io_utils
from bert_tf import optimization
from bert_tf import preprocessing
from bert_tf import training
from bert_tf.data import classifier_data
from bert_tf.modeling import models

RUN_CONFIG = "classifier_config.json"
# Token-length bucket edges for --bucket_by_length training batches.
BUCKETS = (16, 24, 32, 48, 64, 96)


@dataclasses.dataclass
class ClassifierParams:
  """Flags of the original ``run_classifier.py`` (same names and defaults)."""
  task_name: str
  data_dir: str
  output_dir: str
  vocab_file: str = None
  bert_config_file: str = None
  init_checkpoint: str = None
  do_lower_case: bool = True
  max_seq_length: int = 128
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 50
  optimizer: str = "adamw_original"
  seed: int = 12345
  export_dir: str = None
  bucket_by_length: bool = True
  dtype: str = "float32"


def resolve_config_and_vocab(params):
  """``(BertConfig, vocab_file)`` from the flags or a Hugging Face directory.

  Raises:
    config_lib.ConfigError / ValueError: naming the flag that is missing.
  """
  hf = params.init_checkpoint if (params.init_checkpoint and
                                  checkpoints.is_hf_dir(params.init_checkpoint)) else None
  if params.bert_config_file:
    config = config_lib.BertConfig.from_json_file(params.bert_config_file)
  elif hf:
    config = checkpoints.read_hf_config(hf)
  else:
    raise ValueError("--bert_config_file is required unless --init_checkpoint "
                     "is a Hugging Face BERT directory")
  vocab_file = params.vocab_file or (os.path.join(hf, "vocab.txt") if hf else None)
  if not vocab_file:
    raise ValueError("--vocab_file is required unless --init_checkpoint is a "
                     "Hugging Face BERT directory")
  return config, vocab_file


def set_dtype_policy(dtype):
  """Sets the Keras dtype policy (``float32``, ``mixed_bfloat16``, ``mixed_float16``).

  Raises:
    ValueError: naming ``--dtype`` for an unknown value.
  """
  import keras  # pylint: disable=g-import-not-at-top
  if dtype not in ("float32", "mixed_bfloat16", "mixed_float16"):
    raise ValueError("--dtype: unknown %r (float32, mixed_bfloat16, "
                     "mixed_float16)" % dtype)
  keras.config.set_dtype_policy(dtype)


def build_classifier(config, num_labels):
  """A :class:`BertClassifier` with its weights created."""
  model = models.BertClassifier(config, num_labels)
  model(model.encoder.dummy_inputs())
  return model


def predict_logits(model, dataset):
  """Logits float32 [N, num_labels] over a features-only or (features, y) dataset."""

  @tf.function(reduce_retracing=True)
  def step(features):
    return model(features, training=False)

  out = []
  for batch in dataset:
    features = batch[0] if isinstance(batch, tuple) else batch
    out.append(step(features).numpy())
  return np.concatenate(out, 0)


def softmax(logits):
  z = logits - logits.max(-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(-1, keepdims=True)


def run_classifier(params, strategy, do_train=True, do_eval=True, do_predict=False,
                   print_fn=print):
  """Fine-tunes, evaluates, predicts and exports, as the flags ask.

  Files in ``output_dir``: checkpoints (``ckpt-N``), ``bert_config.json``,
  ``vocab.txt``, ``classifier_config.json``, ``eval_results.txt``,
  ``test_results.tsv``; with ``export_dir``: a SavedModel version there.

  Returns:
    dict: ``eval_accuracy``, ``eval_loss``, ``global_step`` (when evaluated)
    and ``export_path`` (when exported).

  Raises:
    ValueError subclasses naming the bad flag or file.
  """
  task = classifier_data.get_task(params.task_name)
  config, vocab_file = resolve_config_and_vocab(params)
  if params.max_seq_length > config.max_position_embeddings:
    raise ValueError("--max_seq_length %d exceeds max_position_embeddings %d" %
                     (params.max_seq_length, config.max_position_embeddings))
  preprocessor = preprocessing.BertPreprocessor(vocab_file, params.do_lower_case,
                                                params.max_seq_length)
  if preprocessor.vocab_size > config.vocab_size:
    raise ValueError("vocab %r has %d tokens but the BERT config's vocab_size is "
                     "%d" % (vocab_file, preprocessor.vocab_size, config.vocab_size))
  splits = {}
  if do_train:
    splits["train"] = classifier_data.read_examples(
        task, os.path.join(params.data_dir, "train.tsv"))
  if do_eval:
    splits["dev"] = classifier_data.read_examples(
        task, os.path.join(params.data_dir, "dev.tsv"))
  if do_predict:
    splits["test"] = classifier_data.read_examples(
        task, os.path.join(params.data_dir, "test.tsv"), with_labels=False)

  os.makedirs(params.output_dir, exist_ok=True)
  set_dtype_policy(params.dtype)
  with strategy.scope():
    model = build_classifier(config, len(task.labels))
  num_train_steps = 1
  if do_train:
    num_train_steps = max(1, int(len(splits["train"][0]) / params.train_batch_size
                                 * params.num_train_epochs))
  with strategy.scope():
    optimizer = optimization.create_optimizer(
        params.learning_rate, num_train_steps,
        int(num_train_steps * params.warmup_proportion), params.optimizer)
    optimizer.build(model.trainable_variables)
  ckpt = tf.train.Checkpoint(model=model, encoder=model.encoder,
                             optimizer=optimizer)
  manager = tf.train.CheckpointManager(
      ckpt, params.output_dir, max_to_keep=2, step_counter=optimizer.iterations,
      checkpoint_interval=params.save_checkpoints_steps)
  latest = training.restore_latest(manager)
  if latest:
    print_fn("resumed from %s (step %d)" % (latest, int(optimizer.iterations.numpy())))
  elif params.init_checkpoint:
    print_fn("initialized the encoder from " +
             checkpoints.load_encoder_weights(model.encoder, params.init_checkpoint))
  elif do_train:
    logging.warning("no --init_checkpoint: fine-tuning from random weights")

  _write_run_files(params, task, config, vocab_file)
  results = {}
  if do_train and int(optimizer.iterations.numpy()) < num_train_steps:
    texts_a, texts_b, labels = splits["train"]
    ds = classifier_data.examples_dataset(
        preprocessor, texts_a, texts_b, labels, params.train_batch_size,
        shuffle=True, seed=params.seed, drop_remainder=True,
        bucket_boundaries=BUCKETS if params.bucket_by_length else None)
    dist = strategy.experimental_distribute_dataset(ds)
    global_batch = float(params.train_batch_size)

    def compute(batch):
      features, y = batch
      logits = model(features, training=True)
      ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
      correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y),
                        tf.float32)
      return tf.reduce_sum(ce) / global_batch, {
          "loss_sum": tf.reduce_sum(ce), "correct": tf.reduce_sum(correct),
          "examples": tf.cast(tf.shape(y)[0], tf.float32)}

    def log(step, sums, seconds):
      del seconds
      line = "step %d/%d loss=%.4f accuracy=%.4f lr=%.3g %.1f examples/s" % (
          step, num_train_steps, sums["loss_sum"] / sums["examples"],
          sums["correct"] / sums["examples"], float(optimizer.learning_rate),
          sums["examples_per_second"])
      print_fn(line)

    print_fn("fine-tuning %s: %d examples, %d steps (batch %d, %.3g epochs)" % (
        task.name, len(texts_a), num_train_steps, params.train_batch_size,
        params.num_train_epochs))
    training.Trainer(strategy, model, optimizer, compute).train(
        iter(dist), num_train_steps, manager,
        steps_per_loop=params.iterations_per_loop, log_fn=log,
        examples_per_step=params.train_batch_size)

  if do_eval:
    texts_a, texts_b, labels = splits["dev"]
    ds = classifier_data.examples_dataset(preprocessor, texts_a, texts_b, labels,
                                          params.eval_batch_size)
    logits = predict_logits(model, ds)
    y = np.asarray(labels)
    probs = softmax(logits)
    results["eval_accuracy"] = float((logits.argmax(-1) == y).mean())
    results["eval_loss"] = float(-np.log(probs[np.arange(len(y)), y] + 1e-12).mean())
    results["global_step"] = int(optimizer.iterations.numpy())
    io_utils.atomic_write_text(
        os.path.join(params.output_dir, "eval_results.txt"),
        "".join("%s = %s\n" % (k, results[k]) for k in sorted(results)))
    print_fn("dev: accuracy=%.4f loss=%.4f (%d examples)" % (
        results["eval_accuracy"], results["eval_loss"], len(y)))

  if do_predict:
    texts_a, texts_b, _ = splits["test"]
    ds = classifier_data.examples_dataset(preprocessor, texts_a, texts_b, None,
                                          params.predict_batch_size)
    probs = softmax(predict_logits(model, ds))
    io_utils.atomic_write_text(
        os.path.join(params.output_dir, "test_results.tsv"),
        "".join("\t".join(str(p) for p in row) + "\n" for row in probs))

  if params.export_dir:
    from export import saved_model  # pylint: disable=g-import-not-at-top
    path = saved_model.export_classifier(model, preprocessor, task.labels,
                                         params.export_dir, task.name, task.is_pair)
    results["export_path"] = path
    print_fn("exported SavedModel to %s" % path)
  return results


def _write_run_files(params, task, config, vocab_file):
  """Config, vocab and run settings beside the checkpoints (for re-export)."""
  config.to_json_file(os.path.join(params.output_dir, "bert_config.json"))
  dst = os.path.join(params.output_dir, "vocab.txt")
  if os.path.abspath(vocab_file) != os.path.abspath(dst):
    with io_utils.atomic_output(dst) as tmp:
      shutil.copyfile(vocab_file, tmp)
  io_utils.atomic_write_text(
      os.path.join(params.output_dir, RUN_CONFIG),
      json.dumps({"task_name": task.name, "labels": list(task.labels),
                  "do_lower_case": params.do_lower_case,
                  "max_seq_length": params.max_seq_length}, indent=2) + "\n")
