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
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf import task_kinds
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import preprocessing
from bert_tf.data import classifier_data
from bert_tf.data import swag as swag_data
from bert_tf.modeling import multiple_choice
from bert_tf.modeling import presets
from bert_tf.params import field
from bert_tf.tasks import base
from bert_tf.tasks import fine_tuning

RUN_CONFIG = task_kinds.get("swag").settings_file
PREDICTIONS_FILE = "predictions.csv"


@dataclasses.dataclass(kw_only=True)
class SwagParams(fine_tuning.SplitFilesParams, fine_tuning.SkipPaddingParams):
  """Flags of ``tools/run_swag.py``, named as the original
  ``run_classifier.py``'s. Defaults: the project's CPU recipe (max_seq_length 128,
  batch 16, learning rate 5e-5, 3 epochs, warm-up 0.1); the paper (section
  4.4) fine-tuned SWAG for 3 epochs at batch 16 with learning rate 2e-5.
  The other fields: :class:`bert_tf.tasks.fine_tuning.SplitFilesParams`.

  Example::

    params = SwagParams(data_dir="data/mc_wikihow", output_dir="/tmp/swag",
                        init_checkpoint=HF_DIR, do_train=True, do_eval=True)
  """
  data_dir: Optional[str] = field(None, "Directory of the SWAG-layout CSV files (--train_file, --dev_file and --test_file are relative to it).")
  train_file: str = field("train.csv", "Training CSV (SWAG layout: ...,sent1,sent2,...,ending0..ending<N-1>,label).")
  dev_file: str = field("dev.csv", "Dev CSV with labels (--do_eval).")
  test_file: str = field("test.csv", "CSV to predict (--do_predict; labels optional).")
  output_dir: str = field(help="Where checkpoints, eval_results.txt and predictions.csv go.")
  init_checkpoint: Optional[str] = field(None, "Initial weights: ours, an original TF1 checkpoint, or a Hugging Face BERT / BertForMultipleChoice directory.")
  max_seq_length: int = field(128, "Maximum length of each [CLS] context [SEP] ending [SEP] sequence in WordPiece tokens.")
  do_predict: bool = field(False, "Whether to write predictions.csv for --test_file.")
  train_batch_size: int = field(16, "Total batch size for training (examples, each of N sequences).")
  eval_batch_size: int = field(8, "Batch size for eval.")
  export_dir: Optional[str] = field(None, "Export a SavedModel (context + endings strings in, probabilities out) to EXPORT_DIR/<version>/.")
  max_examples: Optional[int] = field(None, "Read at most this many examples of each file (quick runs).")


data_path = fine_tuning.data_path
epoch_ends = fine_tuning.epoch_ends
predict_logits = fine_tuning.predict_logits
softmax = fine_tuning.softmax


def choices_dataset(preprocessor: preprocessing.BertPreprocessor, contexts, endings,
                    labels, batch_size: int, shuffle: bool = False, seed: Optional[int] = None,
                    drop_remainder: bool = False) -> tf.data.Dataset:
  """Batches of packed choices from raw strings.

  Batches of example indices
  (:func:`bert_tf.data.classifier_data.index_batches`) gather the strings,
  then :func:`bert_tf.modeling.multiple_choice.choice_features` tokenizes and
  packs them in the pipeline; a shuffled dataset's iterator is
  checkpointable (one int64 per example: exact resume).

  Args:
    preprocessor: the :class:`BertPreprocessor` (text pairs).
    contexts, endings: E lists of N strings (segment A and B of every
      choice, :func:`bert_tf.data.swag.choice_arrays`).
    labels: E ints in 0..N-1, or None (features only).
    batch_size: examples per batch.
    shuffle / seed: a new permutation of the examples every epoch (seeded),
      repeated forever; False: one ordered pass.
    drop_remainder: only full batches.

  Returns:
    a dataset of ``features`` (or ``(features, labels)``): int32
    ``input_ids``, ``input_mask``, ``segment_ids`` [B, N, S'] and int32
    labels [B]; S' is the batch's longest choice (<= ``max_seq_length``:
    the padding columns beyond it are cut, exact as padding is masked out;
    :func:`bert_tf.preprocessing.trim_to_longest`).

  Raises:
    ValueError: ``shuffle`` with no examples.
  """
  n = len(contexts[0]) if len(contexts) else 1
  def strings(rows):
    if not len(rows):
      return tf.reshape(tf.constant([], tf.string), [0, n])
    return tf.constant([list(r) for r in rows], tf.string)  # UTF-8
  a, b = strings(contexts), strings(endings)
  y = None if labels is None else tf.constant(np.asarray(labels, np.int32))

  def encode(idx):
    features = multiple_choice.choice_features(preprocessor, tf.gather(a, idx),
                                                tf.gather(b, idx))
    return features if y is None else (features, tf.gather(y, idx))
  return (classifier_data.index_batches(len(contexts), batch_size, shuffle=shuffle,
                                        seed=seed, drop_remainder=drop_remainder)
          .map(tf.autograph.experimental.do_not_convert(encode),
               num_parallel_calls=tf.data.AUTOTUNE).prefetch(2))


def accuracy_and_loss(logits: np.ndarray, labels) -> dict:
  """``{"accuracy", "loss"}``: the fraction of argmax == label and the mean
  softmax cross-entropy over the choices (paper section 4.4)."""
  y = np.asarray(labels, np.int64)
  return {"accuracy": float((logits.argmax(-1) == y).mean()),
          "loss": fine_tuning.mean_cross_entropy(logits, y)}


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


class MultipleChoiceTask(fine_tuning.FineTuningTask):
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
  resumable_input = True  # example-index permutations (choices_dataset)
  kind = "swag"

  def __init__(self, params: SwagParams, do_train: Optional[bool] = None,
               do_eval: Optional[bool] = None, do_predict: Optional[bool] = None):
    self.params = p = params
    self._set_actions(do_train, do_eval, do_predict)
    base.check_positive(p, ("train_batch_size", "eval_batch_size",
                             "predict_batch_size", "max_examples"))
    self._set_preprocessor(*fine_tuning.resolve_config_and_vocab(p))
    self.num_choices = self.recorded_setting("num_choices")
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
    self._plan_steps(len(self.train))
    self._init_length_reports()

  def _splits_read(self) -> list:
    """``[(name, examples, flag of its batch size, file flag)]`` of the files read."""
    return [(name, ex, flag, file_flag) for name, ex, flag, file_flag in (
        ("train", self.train, "train_batch_size", "train_file"),
        ("dev", self.dev, "eval_batch_size", "dev_file"),
        ("test", self.test, "predict_batch_size", "test_file")) if ex]

  def length_report(self, split: str, examples) -> preprocessing.LengthReport:
    """The :class:`bert_tf.preprocessing.LengthReport` of one file: each
    example's longest ``[CLS] context [SEP] ending [SEP]`` choice,
    untruncated (:func:`bert_tf.preprocessing.token_lengths`), cut when one
    of its choices is longer than ``--max_seq_length``."""
    a, b, _ = swag_data.choice_arrays(examples)
    n = len(a[0]) if a else 0
    lengths = preprocessing.token_lengths(
        self.preprocessor, [t for row in a for t in row], [t for row in b for t in row])
    longest = lengths.reshape(-1, n).max(1) if n else lengths
    return preprocessing.LengthReport.from_lengths(
        split, longest, self.params.max_seq_length,
        rule="had a choice ([CLS] context [SEP] ending [SEP], %d per example) longer "
        "than --max_seq_length=%d tokens, cut" % (n, self.params.max_seq_length))

  def length_splits(self) -> list:
    """Per file read: :meth:`length_report`."""
    return [(name, lambda name=name, ex=ex: self.length_report(name, ex))
            for name, ex, _, _ in self._splits_read()]

  def batch_rows(self) -> list:
    """Each batch flag against the examples of its file."""
    p = self.params
    return [(flag, getattr(p, flag), len(ex), "examples of %s" % data_path(p, file_flag))
            for _, ex, flag, file_flag in self._splits_read()]

  def _read(self, name, with_labels):
    path = data_path(self.params, name)
    examples = swag_data.read_swag_examples(
        path, with_labels=with_labels, num_choices=self.num_choices, argument=name,
        limit=self.params.max_examples)
    if examples and self.num_choices is None:
      self.num_choices = len(examples[0].endings)
    return examples

  def build_model(self):
    return multiple_choice.build_multiple_choice(
        self.config, skip_padding=self.params.skip_padding)

  def load_weights(self, model, path):
    """``--init_checkpoint``: the encoder, and the multiple-choice head where
    the start model has one (:func:`bert_tf.modeling.presets.load_weights`)."""
    return presets.load_weights(model, path, multiple_choice.MULTIPLE_CHOICE_TASK)

  def serving_info(self) -> dict:
    """What an export needs beside the model: the ``preprocessor`` and
    ``num_choices``."""
    return {"preprocessor": self.preprocessor, "num_choices": self.num_choices or 4}

  def run_config(self) -> dict:
    """``swag_config.json``: ``num_choices``, ``do_lower_case``,
    ``preserve_unused_tokens``, ``max_seq_length``."""
    return dict(task="swag", num_choices=self.num_choices, **self.tokenizer_settings())

  # --- training ----------------------------------------------------------

  def train_dataset(self, batch_size, input_context):
    """Repeated ``(features, labels)`` batches: int32 [B, N, S'] features,
    int32 [B] labels, shuffled every epoch (:func:`choices_dataset`); the
    iterator is checkpointed with the run (exact resume)."""
    del input_context  # one worker reads all the examples
    a, b, y = swag_data.choice_arrays(self.train)
    return choices_dataset(self.preprocessor, a, b, y, batch_size, shuffle=True,
                           seed=self.params.seed, drop_remainder=True)

  def compute_loss(self, model, features, totals=None):
    del totals
    x, y = features
    logits = tf.cast(model(x, training=True), tf.float32)
    return self.example_loss(multiple_choice.choice_loss(logits, y), logits, y)

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
