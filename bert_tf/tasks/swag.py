"""The multiple-choice task: SWAG-style fine-tuning (paper section 4.4).

:class:`MultipleChoiceTask` supplies the model, inputs, loss, evaluation
and predictions to :class:`bert_tf.runner.Runner`;
:func:`bert_tf.jobs.run_swag` composes the two.

Data: :mod:`bert_tf.data.swag` reads the SWAG CSV layout (TF-free); every
example becomes N ``[CLS] sent1 [SEP] sent2 + " " + ending<i> [SEP]``
sequences (see that module for why this split). Tokenization and packing
are the in-graph :class:`bert_tf.preprocessing.BertPreprocessor` with text
pairs, the same object that :func:`bert_tf.export.export_multiple_choice`
bakes into the SavedModel (one implementation: no training/serving skew).
Model: :class:`bert_tf.modeling.multiple_choice.BertMultipleChoice` (one
score per choice from the pooled output, softmax over the choices). Loss:
the softmax cross-entropy over the choices, divided by the global batch.
Optimizer: the original AdamWeightDecay, linear warm-up over
``warmup_proportion`` of ``int(E / train_batch_size * num_train_epochs)``
steps (the original ``run_classifier.py`` count), linear decay to 0.
With ``do_eval`` the dev file is scored after every epoch (``eval_accuracy``,
``eval_loss``) and the best model is kept in ``<output_dir>/best/``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import shutil
from typing import Callable, Optional
import weakref

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import preprocessing
from bert_tf.data import swag as swag_data
from bert_tf.modeling import multiple_choice
from bert_tf.params import field
from bert_tf.tasks import base

RUN_CONFIG = "swag_config.json"
PREDICTIONS_FILE = "predictions.csv"


@dataclasses.dataclass
class SwagParams:
  """Flags of ``tools/run_swag.py``, named as the original
  ``run_classifier.py``'s. Defaults: the project's CPU recipe (max_seq_length 128,
  batch 16, learning rate 5e-5, 3 epochs, warm-up 0.1); the paper (section
  4.4) fine-tuned SWAG for 3 epochs at batch 16 with learning rate 2e-5.

  Example::

    params = SwagParams(data_dir="data/mc_wikihow", output_dir="/tmp/swag",
                        init_checkpoint=HF_DIR, do_train=True, do_eval=True)
  """
  output_dir: str = field(help="Where checkpoints, eval_results.txt and predictions.csv go.")
  data_dir: Optional[str] = field(None, "Directory of the SWAG-layout CSV files (--train_file, --dev_file and --test_file are relative to it).")
  train_file: str = field("train.csv", "Training CSV (SWAG layout: ...,sent1,sent2,...,ending0..ending<N-1>,label).")
  dev_file: str = field("dev.csv", "Dev CSV with labels (--do_eval).")
  test_file: str = field("test.csv", "CSV to predict (--do_predict; labels optional).")
  vocab_file: Optional[str] = field(None, "The vocabulary file of the pretrained model (default: vocab.txt of a Hugging Face --init_checkpoint).")
  bert_config_file: Optional[str] = field(None, "bert_config.json of the pretrained model (default: a Hugging Face --init_checkpoint's config.json).")
  init_checkpoint: Optional[str] = field(None, "Initial weights: ours, an original TF1 checkpoint, or a Hugging Face BERT / BertForMultipleChoice directory.")
  do_lower_case: bool = field(True, "Whether to lower case the input text.")
  preserve_unused_tokens: bool = field(False, "Keep vocab entries [unusedN] that stand alone in the text as whole tokens (the original's --preserve_unused_tokens; the usual way to add domain words to a vocab).")
  max_seq_length: int = field(128, "Maximum length of each [CLS] context [SEP] ending [SEP] sequence in WordPiece tokens.")
  do_train: bool = field(False, "Whether to fine-tune on --train_file.")
  do_eval: bool = field(False, "Whether to score --dev_file (after every epoch when training).")
  do_predict: bool = field(False, "Whether to write predictions.csv for --test_file.")
  train_batch_size: int = field(16, "Total batch size for training (examples, each of N sequences).")
  eval_batch_size: int = field(8, "Batch size for eval.")
  predict_batch_size: int = field(8, "Batch size for predict.")
  learning_rate: float = field(5e-5, "Peak learning rate (Adam).")
  num_train_epochs: float = field(3.0, "Number of training epochs.")
  warmup_proportion: float = field(0.1, "Fraction of steps for linear warm-up.")
  save_checkpoints_steps: int = field(1000, "How often to save a checkpoint.")
  keep_checkpoint_max: int = field(2, "Checkpoints kept.")
  iterations_per_loop: int = field(50, "Steps per loop (and per progress line).")
  optimizer: str = field("adamw_original", "Optimizer (default: the original AdamWeightDecay).", choices=("adamw_original", "adamw", "lamb"))
  seed: int = field(12345, "Shuffle, dropout and initialization seed.")
  export_dir: Optional[str] = field(None, "Export a SavedModel (context + endings strings in, probabilities out) to EXPORT_DIR/<version>/.")
  distribution_strategy: str = field("one_device", "tf.distribute strategy.", choices=("one_device", "mirrored", "multi_worker_mirrored", "tpu"))
  dtype: str = field("float32", "Compute dtype policy.", choices=("float32", "mixed_bfloat16", "mixed_float16"))
  deterministic: bool = field(False, "Enable TensorFlow op determinism (bit-identical reruns and resumes).")
  keep_best: bool = field(True, "With --do_train --do_eval: keep the best dev model in OUTPUT_DIR/best/.")
  max_examples: Optional[int] = field(None, "Read at most this many examples of each file (quick runs).")


def resolve_config_and_vocab(params: SwagParams):
  """``(BertConfig, vocab_file)`` from the flags, a Hugging Face directory,
  or ``bert_config.json`` / ``vocab.txt`` in ``output_dir`` (a finished run).

  Raises:
    ConfigError / VocabError: naming the flag that is missing;
    InputError: a ``--vocab_file`` that does not exist.
  """
  ic = params.init_checkpoint
  hf = ic if (ic and checkpoints.is_hf_dir(ic)) else None
  if params.bert_config_file:
    config_file = params.bert_config_file
    if not os.path.exists(config_file):
      raise errors.ConfigError("%r does not exist" % config_file,
                               argument="bert_config_file")
    config = config_lib.BertConfig.from_json_file(config_file)
  elif hf:
    config_file, config = os.path.join(hf, "config.json"), checkpoints.read_hf_config(hf)
  elif os.path.exists(os.path.join(params.output_dir, "bert_config.json")):
    config_file = os.path.join(params.output_dir, "bert_config.json")
    config = config_lib.BertConfig.from_json_file(config_file)
  else:
    raise errors.ConfigError("bert_config_file is required unless init_checkpoint "
                             "is a Hugging Face BERT directory",
                             argument="bert_config_file")
  vocab_file = params.vocab_file
  if vocab_file and not os.path.exists(vocab_file):
    raise errors.InputError("%r does not exist" % vocab_file, argument="vocab_file")
  if not vocab_file:
    d = hf or os.path.dirname(os.path.abspath(config_file))
    if os.path.exists(os.path.join(d, "vocab.txt")):
      vocab_file = os.path.join(d, "vocab.txt")
  if not vocab_file:
    raise errors.VocabError("vocab_file is required unless init_checkpoint is a "
                            "Hugging Face BERT directory", argument="vocab_file")
  return config, vocab_file


def data_path(params: SwagParams, name: str) -> str:
  """The path of ``params.<name>`` (``train_file``, ...): as given when it
  exists or is absolute, else under ``data_dir``."""
  value = getattr(params, name)
  if params.data_dir and not os.path.isabs(value) and not os.path.exists(value):
    return os.path.join(params.data_dir, value)
  return value


def choices_dataset(preprocessor: preprocessing.BertPreprocessor, contexts, endings,
                    labels, batch_size: int, shuffle: bool = False, seed: int = 0,
                    drop_remainder: bool = False, repeat: bool = False) -> tf.data.Dataset:
  """Batches of packed choices from raw strings.

  Args:
    preprocessor: the :class:`BertPreprocessor` (text pairs).
    contexts, endings: E lists of N strings (segment A and B of every
      choice, :func:`bert_tf.data.swag.choice_arrays`).
    labels: E ints in 0..N-1, or None (features only).
    batch_size: examples per batch.
    shuffle / seed: shuffle the examples (every epoch anew).
    drop_remainder / repeat: as ``tf.data``.

  Returns:
    a dataset of ``features`` (or ``(features, labels)``): int32
    ``input_ids``, ``input_mask``, ``segment_ids`` [B, N, max_seq_length]
    and int32 labels [B].
  """
  n = len(contexts[0]) if len(contexts) else 1
  def strings(rows):
    if not len(rows):
      return tf.reshape(tf.constant([], tf.string), [0, n])
    return tf.constant([list(r) for r in rows], tf.string)  # UTF-8
  a, b = strings(contexts), strings(endings)
  tensors = (a, b) if labels is None else (a, b, tf.constant(np.asarray(labels, np.int32)))
  ds = tf.data.Dataset.from_tensor_slices(tensors)
  if shuffle:
    ds = ds.shuffle(max(1, len(contexts)), seed=seed, reshuffle_each_iteration=True)
  if repeat:
    ds = ds.repeat()
  seq = preprocessor.max_seq_length

  def encode(a, b, y=None):
    rows = tf.shape(a)[0]
    flat = preprocessor(tf.reshape(a, [-1]), tf.reshape(b, [-1]))
    features = {k: tf.reshape(v, [rows, n, seq]) for k, v in flat.items()}
    return features if y is None else (features, y)
  return (ds.batch(batch_size, drop_remainder=drop_remainder)
          .map(encode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2))


_PREDICT_FNS = weakref.WeakKeyDictionary()


def predict_logits(model, dataset) -> np.ndarray:
  """Logits float32 [E, N] over a features-only or (features, labels) dataset
  (the traced step is cached per model)."""
  step = _PREDICT_FNS.get(model)
  if step is None:
    step = tf.function(lambda f: tf.cast(model(f, training=False), tf.float32),
                       reduce_retracing=True)
    _PREDICT_FNS[model] = step
  out = [step(batch[0] if isinstance(batch, tuple) else batch).numpy()
         for batch in dataset]
  return np.concatenate(out, 0) if out else np.zeros([0, 0], np.float32)


def softmax(logits: np.ndarray) -> np.ndarray:
  """Row-wise softmax of float [E, N] logits (numpy)."""
  z = logits - logits.max(-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(-1, keepdims=True)


def accuracy_and_loss(logits: np.ndarray, labels) -> dict:
  """``{"accuracy", "loss"}``: the fraction of argmax == label and the mean
  softmax cross-entropy over the choices (paper section 4.4)."""
  y = np.asarray(labels, np.int64)
  probs = softmax(logits.astype(np.float64))
  return {"accuracy": float((logits.argmax(-1) == y).mean()),
          "loss": float(-np.log(probs[np.arange(len(y)), y] + 1e-12).mean())}


def write_predictions(path: str, examples, logits: np.ndarray) -> str:
  """Writes ``predictions.csv`` atomically; returns its path.

  Columns: ``id`` (the example's ``video-id-fold-ind``, else its row
  number), ``prediction`` (the argmax choice), ``probability_0`` ..
  ``probability_{N-1}`` (softmax over the choices, float32 printed with
  ``repr``), ``label`` (the file's label, empty when it has none).
  """
  probs = softmax(logits.astype(np.float64)).astype(np.float32)
  n = probs.shape[1] if probs.ndim == 2 else 0
  buf = io.StringIO()
  w = csv.writer(buf, lineterminator="\n")
  w.writerow(["id", "prediction"] + ["probability_%d" % i for i in range(n)] + ["label"])
  for ex, row in zip(examples, probs):
    w.writerow([ex.example_id, int(row.argmax())] + [repr(float(p)) for p in row] +
               ["" if ex.label is None else ex.label])
  io_utils.atomic_write_text(path, buf.getvalue())
  return path


def epoch_ends(num_examples: int, batch_size: int, epochs: float,
               total_steps: int) -> list:
  """Global steps at which each epoch ends (the last is ``total_steps``)."""
  per_epoch = num_examples / batch_size
  ends = sorted({min(total_steps, max(1, int(round(per_epoch * k))))
                 for k in range(1, int(math.ceil(epochs)) + 1)})
  return [e for e in ends if e < total_steps] + [total_steps]


class MultipleChoiceTask(base.Task):
  """SWAG-style multiple choice as a :class:`bert_tf.tasks.base.Task`.

  Reads the CSV files on construction, so bad flags and files are reported
  (file and line) before any model is built or any file written.

  Args:
    params: :class:`SwagParams`.
    do_train / do_eval / do_predict: which files to read (default: the
      params' flags).

  Raises:
    bert_tf.errors.InputError / ConfigError / VocabError / ParamsError:
    naming the bad flag (``argument``), file and line.

  Example::

    task = MultipleChoiceTask(SwagParams(data_dir="data/mc_wikihow",
        output_dir="/tmp/swag", init_checkpoint=HF_DIR, do_train=True, do_eval=True))
    Runner(RunnerParams.from_params(task.params)).run(
        task, strategy, do_eval=True, eval_at_steps=task.eval_at_steps())
  """

  name = "swag"
  best_metric = "eval_accuracy"
  example_unit = "examples"
  run_files = ("bert_config.json", "vocab.txt", RUN_CONFIG)

  def __init__(self, params: SwagParams, do_train: Optional[bool] = None,
               do_eval: Optional[bool] = None, do_predict: Optional[bool] = None):
    self.params = p = params
    self.do_train = p.do_train if do_train is None else do_train
    self.do_eval = p.do_eval if do_eval is None else do_eval
    self.do_predict = p.do_predict if do_predict is None else do_predict
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
      if getattr(p, name) <= 0:
        raise errors.ParamsError("%s must be positive, got %d" % (name, getattr(p, name)),
                                 argument=name)
    if p.max_examples is not None and p.max_examples <= 0:
      raise errors.ParamsError("max_examples must be positive, got %d" % p.max_examples,
                               argument="max_examples")
    config, vocab_file = resolve_config_and_vocab(p)
    if p.max_seq_length > config.max_position_embeddings:
      raise errors.ParamsError(
          "--max_seq_length %d exceeds max_position_embeddings %d" %
          (p.max_seq_length, config.max_position_embeddings), argument="max_seq_length")
    self.preprocessor = preprocessing.BertPreprocessor(
        vocab_file, p.do_lower_case, p.max_seq_length,
        preserve_unused_tokens=p.preserve_unused_tokens)
    config_lib.check_vocab_size(self.preprocessor.vocab_size, config, vocab_file)
    self.config = config
    self.vocab_file = vocab_file
    self.num_choices = self._run_num_choices()
    self.train = self._read("train_file", True) if self.do_train else []
    self.dev = self._read("dev_file", True) if self.do_eval else []
    self.test = self._read("test_file", False) if self.do_predict else []
    if self.do_train and not self.train:
      raise errors.InputError("%s has no example" % data_path(p, "train_file"),
                              argument="train_file")
    self.dev_dataset = None
    if self.dev:
      a, b, y = swag_data.choice_arrays(self.dev)
      self.dev_dataset = choices_dataset(self.preprocessor, a, b, y, p.eval_batch_size)
    self.train_batch_size = p.train_batch_size
    self.num_train_steps = 1
    if self.do_train:
      self.num_train_steps = max(1, int(len(self.train) / p.train_batch_size *
                                        p.num_train_epochs))

  def _run_num_choices(self):
    path = os.path.join(self.params.output_dir, RUN_CONFIG)
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        return json.load(f).get("num_choices")
    return None

  def _read(self, name, with_labels):
    path = data_path(self.params, name)
    examples = swag_data.read_swag_examples(
        path, with_labels=with_labels, num_choices=self.num_choices, argument=name,
        limit=self.params.max_examples)
    if examples and self.num_choices is None:
      self.num_choices = len(examples[0].endings)
    return examples

  def eval_at_steps(self) -> list:
    """The global steps at which each epoch ends (dev evaluation points)."""
    if not self.do_train:
      return []
    return epoch_ends(len(self.train), self.params.train_batch_size,
                      self.params.num_train_epochs, self.num_train_steps)

  def optimizer_spec(self) -> base.OptimizerSpec:
    p = self.params
    return base.OptimizerSpec(p.learning_rate, self.num_train_steps,
                              int(self.num_train_steps * p.warmup_proportion),
                              p.optimizer)

  def build_model(self):
    return multiple_choice.build_multiple_choice(self.config)

  def initialize(self, model):
    if self.params.init_checkpoint:
      return multiple_choice.load_multiple_choice_weights(model,
                                                          self.params.init_checkpoint)
    if self.do_train:
      logging.warning("no --init_checkpoint: fine-tuning from random weights")
    return None

  def serving_info(self) -> dict:
    """What an export needs beside the model: the ``preprocessor`` and
    ``num_choices``."""
    return {"preprocessor": self.preprocessor, "num_choices": self.num_choices or 4}

  def write_run_files(self, output_dir: str) -> None:
    """``bert_config.json``, ``vocab.txt`` and ``swag_config.json``
    (``num_choices``, ``do_lower_case``, ``max_seq_length``) beside the
    checkpoints."""
    self.config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    dst = os.path.join(output_dir, "vocab.txt")
    if os.path.abspath(self.vocab_file) != os.path.abspath(dst):
      with io_utils.atomic_output(dst) as tmp:
        shutil.copyfile(self.vocab_file, tmp)
    io_utils.atomic_write_text(
        os.path.join(output_dir, RUN_CONFIG),
        json.dumps({"task": "swag", "num_choices": self.num_choices,
                    "do_lower_case": self.params.do_lower_case,
                    "preserve_unused_tokens": self.params.preserve_unused_tokens,
                    "max_seq_length": self.params.max_seq_length}, indent=2) + "\n")

  # --- training ----------------------------------------------------------

  def train_dataset(self, batch_size, input_context):
    """Repeated, shuffled ``(features [B, N, S], labels [B])`` batches."""
    del input_context  # one worker reads all the examples
    a, b, y = swag_data.choice_arrays(self.train)
    return choices_dataset(self.preprocessor, a, b, y, batch_size, shuffle=True,
                           seed=self.params.seed, drop_remainder=True, repeat=True)

  def compute_loss(self, model, features, totals=None):
    del totals
    x, y = features
    logits = tf.cast(model(x, training=True), tf.float32)
    loss = multiple_choice.choice_loss(logits, y)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y),
                      tf.float32)
    sums = {"loss_sum": tf.reduce_sum(loss), "correct": tf.reduce_sum(correct),
            "examples": tf.cast(tf.shape(y)[0], tf.float32)}
    return tf.reduce_sum(loss) / float(self.params.train_batch_size), sums

  def train_metrics(self, sums):
    if not sums.get("examples"):
      return {}
    return {"loss": sums["loss_sum"] / sums["examples"],
            "accuracy": sums["correct"] / sums["examples"]}

  # --- evaluation, prediction --------------------------------------------

  def evaluate(self, model, print_fn):
    """``{"eval_accuracy", "eval_loss"}`` on the dev file."""
    if not self.dev:
      return {}
    logits = predict_logits(model, self.dev_dataset)
    res = accuracy_and_loss(logits, [ex.label for ex in self.dev])
    print_fn("%s (%d examples, %d choices): accuracy=%.4f  loss=%.4f" % (
        os.path.basename(data_path(self.params, "dev_file")), len(self.dev),
        logits.shape[1], res["accuracy"], res["loss"]))
    return {"eval_accuracy": res["accuracy"], "eval_loss": res["loss"]}

  def predict(self, model, output_dir, print_fn):
    """Writes ``predictions.csv`` for the test file (see
    :func:`write_predictions`)."""
    del print_fn  # the runner reports the files
    if not self.test:
      return []
    a, b, _ = swag_data.choice_arrays(self.test)
    ds = choices_dataset(self.preprocessor, a, b, None, self.params.predict_batch_size)
    path = write_predictions(os.path.join(output_dir, PREDICTIONS_FILE), self.test,
                             predict_logits(model, ds))
    return [path]
