"""The question-answering task: SQuAD v1.1 / v2.0 span prediction
(paper section 4.2-4.3, original ``run_squad.py``).

:class:`QuestionAnsweringTask` supplies the model, inputs, loss, evaluation
and predictions to :class:`bert_tf.runner.Runner`;
:func:`bert_tf.jobs.run_squad` composes the two.

Data is the original's, in Python (:mod:`bert_tf.data.squad`, TF-free):
``read_squad_examples`` -> ``convert_examples_to_features`` (doc-stride
windows of ``max_seq_length`` tokens) -> here a ``tf.data`` pipeline over the
feature arrays. Training examples are shuffled first with
``random.Random(seed)`` (the original's ``random.Random(12345)`` at the
default seed) and the step count is by default the original's
``int(len(examples) / train_batch_size * num_train_epochs)``: epochs over
questions, so one "epoch" trains on fewer windows than there are (a long
context has several); ``epochs_over="features"`` counts them over the windows
as Hugging Face's ``Trainer`` does (:func:`num_train_steps`). The task logs
``N steps = M of K windows per epoch``. The loss is the original's mean of
the start and end cross-entropies (:func:`bert_tf.modeling.models.span_loss`).
Prediction runs the model over the predict features in fixed-shape batches
of ``predict_batch_size`` (the last one padded), then the original's
``write_predictions`` writes ``predictions.json``, ``nbest_predictions.json``
and, for SQuAD 2.0, ``null_odds.json`` into ``output_dir``. When the predict
file has gold answers, the official metrics are computed
(:func:`bert_tf.squad_metrics.evaluate_file`: ``exact_match``/``f1`` for
v1.1; ``exact``, ``f1``, ``HasAns_*``, ``NoAns_*``, ``best_f1``, ... for
v2.0) and become the run's evaluation results (``eval_results.txt``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
from typing import Callable, Optional
import weakref

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import task_kinds
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import preprocessing
from bert_tf import squad_metrics
from bert_tf import tokenization
from bert_tf.data import squad as squad_data
from bert_tf.modeling import models
from bert_tf.modeling import presets
from bert_tf.params import field
from bert_tf.tasks import base
from bert_tf.tasks import fine_tuning

RUN_CONFIG = task_kinds.get("squad").settings_file
PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
EPOCHS_OVER = ("examples", "features")


@dataclasses.dataclass(kw_only=True)
class SquadParams(fine_tuning.RunFlagsParams):
  """Flags of the original ``run_squad.py`` (same names and defaults), plus
  the added ones; ``tools/run_squad.py`` defines its flags from these fields
  (the added ones shared with the other tasks:
  :class:`bert_tf.tasks.fine_tuning.RunFlagsParams`).

  Example::

    params = SquadParams(output_dir="/tmp/squad", train_file="train.json",
                         predict_file="dev.json", init_checkpoint=HF_DIR,
                         do_train=True, do_predict=True)
  """
  output_dir: str = field(help="The output directory where the model checkpoints and predictions will be written.")
  train_file: Optional[str] = field(None, "SQuAD json for training. E.g., train-v1.1.json")
  predict_file: Optional[str] = field(None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json (with answers: the official metrics are computed too).")
  vocab_file: Optional[str] = field(None, "The vocabulary file that the BERT model was trained on (default: vocab.txt of a Hugging Face --init_checkpoint, or beside --bert_config_file).")
  bert_config_file: Optional[str] = field(None, "bert_config.json of the pre-trained BERT model (default: a Hugging Face --init_checkpoint's config.json).")
  init_checkpoint: Optional[str] = field(None, "Initial weights: ours, an original TF1 checkpoint (bert_model.ckpt, or a fine-tuned run_squad model.ckpt-N with its cls/squad head), or a Hugging Face BERT / BertForQuestionAnswering directory.")
  do_train: bool = field(False, "Whether to run training.")
  do_predict: bool = field(False, "Whether to run prediction on --predict_file (and its official metrics when it has answers).")
  do_lower_case: bool = field(True, "Whether to lower case the input text. Should be True for uncased models and False for cased models.")
  max_seq_length: int = field(384, "The maximum total input sequence length after WordPiece tokenization.")
  doc_stride: int = field(128, "When splitting up a long document into chunks, how much stride to take between chunks.")
  max_query_length: int = field(64, "The maximum number of tokens for the question; longer questions are truncated.")
  predict_batch_size: int = field(8, "Total batch size for predictions.")
  n_best_size: int = field(20, "The total number of n-best predictions to generate in the nbest_predictions.json output file.")
  max_answer_length: int = field(30, "The maximum length of an answer that can be generated.")
  verbose_logging: bool = field(False, "If true, all of the warnings related to data processing will be printed.")
  version_2_with_negative: bool = field(False, "If true, the SQuAD examples contain some that do not have an answer.")
  null_score_diff_threshold: float = field(0.0, "If null_score - best_non_null is greater than the threshold predict null.")
  learning_rate: float = field(5e-5, "The initial learning rate for Adam.")
  num_train_epochs: float = field(3.0, "Total number of training epochs to perform.")
  epochs_over: str = field("examples", "What --num_train_epochs counts: 'examples' (the original: int(questions / train_batch_size * epochs) steps, so an epoch trains on fewer windows than a long context makes) or 'features' (Hugging Face's Trainer: ceil(epochs * ceil(windows / train_batch_size)) steps, every window once per epoch).", choices=EPOCHS_OVER)
  warmup_proportion: float = field(0.1, "Proportion of training to perform linear learning rate warmup for.")
  save_checkpoints_steps: int = field(1000, "How often to save the model checkpoint.")
  iterations_per_loop: int = field(1000, "Steps per host loop (the most per tf.function call) and per progress line; a progress line also comes at least about every minute.")
  # Added.
  seed: int = field(12345, "Example shuffle, dropout and initialization seed (12345: the original's example order).")
  keep_best: bool = field(False, "Keep the model of the best evaluation in OUTPUT_DIR/best/ (evaluation runs once, after training).")


def num_train_steps(num_examples: int, num_features: int, batch_size: int,
                    num_epochs: float, epochs_over: str = "examples") -> int:
  """Training steps for ``num_epochs`` epochs of SQuAD.

  Args:
    num_examples: training questions (``SquadExample``s).
    num_features: their doc-stride windows (``InputFeatures``), >= examples.
    batch_size: the global training batch.
    num_epochs: ``--num_train_epochs`` (may be fractional).
    epochs_over: ``"examples"``: the original ``run_squad.py``,
      ``int(num_examples / batch_size * num_epochs)``; ``"features"``:
      Hugging Face ``Trainer`` (``run_qa.py`` trains on the windows):
      ``len(train_dataloader) = ceil(num_features / batch_size)`` batches per
      epoch (``drop_last=False``), ``max_steps = ceil(num_epochs *
      len(train_dataloader))``.

  Returns:
    the step count, at least 1 (int).

  Raises:
    errors.ParamsError: ``epochs_over`` is neither.
  """
  if epochs_over == "examples":
    return max(1, int(num_examples / batch_size * num_epochs))
  if epochs_over == "features":
    per_epoch = max(1, math.ceil(num_features / batch_size))
    return max(1, math.ceil(num_epochs * per_epoch))
  raise errors.ParamsError("epochs_over must be one of %s, got %r"
                           % (", ".join(EPOCHS_OVER), epochs_over), argument="epochs_over")


def steps_summary(num_steps: int, num_examples: int, num_features: int,
                  batch_size: int, num_epochs: float, epochs_over: str) -> str:
  """The log line ``"N steps = M of K windows per epoch (...)"``.

  ``M = min(K, round(N * batch_size / num_epochs))``: the windows that one
  epoch's share of the steps trains on (the input is one reshuffled stream
  of the K windows).
  """
  seen = num_steps * batch_size / num_epochs if num_epochs > 0 else num_steps * batch_size
  per_epoch = min(num_features, int(round(seen)))
  if epochs_over == "features":
    rule = "ceil(%g * ceil(%d windows / %d))" % (num_epochs, num_features, batch_size)
  else:
    rule = "int(%d questions / %d * %g)" % (num_examples, batch_size, num_epochs)
  return ("SQuAD training: %d steps = %d of %d windows per epoch (--epochs_over=%s: "
          "%s; %d questions)" % (num_steps, per_epoch, num_features, epochs_over, rule,
                                 num_examples))


def has_gold_answers(predict_file: str) -> bool:
  """True when a SQuAD file can be scored: some question has an answer or
  an ``is_impossible`` mark (a v1.1/v2.0 dev file, not a test file).

  Source: the official ``evaluate-v1.1.py`` / ``evaluate-v2.0.py`` score
  the ``answers`` (and ``is_impossible``) of the dataset file; the original
  ``run_squad.py`` never scores.

  Raises:
    InputError: unreadable / not JSON (argument ``predict_file``).
  """
  try:
    data = squad_data.load_squad_json(predict_file)
  except errors.InputError as e:
    e.argument = "predict_file"
    raise
  articles = data.get("data") if isinstance(data, dict) else None
  for article in articles or []:
    for para in (article.get("paragraphs") or []) if isinstance(article, dict) else []:
      for qa in (para.get("qas") or []) if isinstance(para, dict) else []:
        if isinstance(qa, dict) and (qa.get("answers") or qa.get("is_impossible")):
          return True
  return False


def features_to_arrays(features: "list[squad_data.InputFeatures]",
                       with_positions: bool) -> dict:
  """Feature lists -> numpy int32 arrays.

  Source: what the original's ``FeatureWriter`` writes per feature and its
  ``input_fn_builder`` reads back (``input_ids``, ``input_mask``,
  ``segment_ids``, ``start_positions``, ``end_positions``; int64 there,
  cast to int32 as the original's ``_decode_record`` does).

  Args:
    features: :class:`bert_tf.data.squad.InputFeatures` list.
    with_positions: add ``start_positions`` / ``end_positions`` [N].

  Returns:
    ``input_ids``, ``input_mask``, ``segment_ids`` int32 [N, S] (and the
    positions int32 [N]).
  """
  out = {k: np.asarray([getattr(f, k) for f in features], np.int32)
         for k in FEATURE_NAMES}
  if with_positions:
    out["start_positions"] = np.asarray([f.start_position for f in features], np.int32)
    out["end_positions"] = np.asarray([f.end_position for f in features], np.int32)
  return out


_PREDICT_FNS = weakref.WeakKeyDictionary()


def predict_logits(model, arrays: dict, batch_size: int,
                   print_fn: Optional[Callable[[str], None]] = None
                   ) -> "tuple[np.ndarray, np.ndarray]":
  """Start and end logits of every feature, in fixed-shape batches.

  Every model call gets ``batch_size`` rows (the last batch is padded with
  zero rows, whose outputs are dropped), so one traced function serves the
  whole set (cached per model). Source: the prediction loop of
  ``run_squad.main`` (``estimator.predict`` with ``predict_batch_size``; a
  TPU needs the fixed shapes too).

  Args:
    model: a :class:`bert_tf.modeling.BertQuestionAnswerer`.
    arrays: int32 [N, S] ``input_ids``, ``input_mask``, ``segment_ids``.
    batch_size: rows per call (``predict_batch_size``).
    print_fn: optional progress lines (every 1000 batches).

  Returns:
    ``(start_logits, end_logits)``, float32 numpy [N, S].
  """
  n, seq = arrays["input_ids"].shape
  key = (batch_size, seq)
  fns = _PREDICT_FNS.setdefault(model, {})
  step = fns.get(key)
  if step is None:
    spec = {k: tf.TensorSpec([batch_size, seq], tf.int32) for k in FEATURE_NAMES}

    @tf.function(input_signature=[spec], autograph=False)
    def step(features):
      out = model(features, training=False)
      return out["start_logits"], out["end_logits"]
    fns[key] = step
  starts, ends = [], []
  for b, i in enumerate(range(0, n, batch_size)):
    batch = {k: arrays[k][i:i + batch_size] for k in FEATURE_NAMES}
    rows = batch["input_ids"].shape[0]
    if rows < batch_size:
      batch = {k: np.concatenate([v, np.zeros((batch_size - rows, seq), np.int32)])
               for k, v in batch.items()}
    s, e = step(batch)
    starts.append(s.numpy()[:rows])
    ends.append(e.numpy()[:rows])
    if print_fn and b and b % 1000 == 0:
      print_fn("predicted %d of %d features" % (i, n))
  if not starts:
    return np.zeros((0, seq), np.float32), np.zeros((0, seq), np.float32)
  return np.concatenate(starts), np.concatenate(ends)


class QuestionAnsweringTask(fine_tuning.FineTuningTask):
  """SQuAD span prediction as a :class:`bert_tf.tasks.base.Task`
  (original ``run_squad.py``: ``model_fn_builder``, ``input_fn_builder``,
  ``main``).

  Reads and windows the files on construction, so bad flags and files are
  reported before any model is built or any file written. Inputs: the
  original's features as int32 arrays; training batches are drawn from a
  seeded shuffle of feature indices (the input position is checkpointed:
  exact resume). Loss: the original's ``(CE(start) + CE(end)) / 2``, divided
  by the global batch. Evaluation (``predict_file`` with answers) writes the
  prediction files and returns the official metrics (``best_metric``
  ``f1``); :meth:`predict` writes the files only.

  Args:
    params: :class:`SquadParams`.
    do_train: read ``train_file``.
    do_predict: read ``predict_file``.

  Raises:
    bert_tf.errors.InputError / ConfigError / VocabError / ParamsError:
    naming the bad flag (``argument``), file and JSON path.

  Example::

    task = QuestionAnsweringTask(SquadParams(
        output_dir="/tmp/squad", train_file="train.json",
        predict_file="dev.json", init_checkpoint=HF_DIR), do_predict=True)
    Runner(RunnerParams.from_params(task.params)).run(
        task, strategy, do_train=True, do_eval=task.has_answers)
  """

  name = "squad"
  best_metric = "f1"
  example_unit = "features"
  resumable_input = True
  kind = "squad"

  # --- what a hyperparameter search asks (bert_tf.tuning) -----------------

  evaluates_by_predicting = True

  @classmethod
  def for_search(cls, params: SquadParams, do_predict: bool) -> "QuestionAnsweringTask":
    del do_predict  # the dev evaluation is a prediction of predict_file
    return cls(params, do_train=True, do_predict=True)

  @property
  def selection_metric(self) -> str:
    """The kind record's (``f1``, v1.1); ``best_f1`` for v2.0 (F1 at the
    best no-answer threshold)."""
    return "best_f1" if self.params.version_2_with_negative else super().selection_metric

  @property
  def reported_metrics(self) -> list:
    """The official evaluation's figures: the kind record's (v1.1), or
    v2.0's."""
    if self.params.version_2_with_negative:
      return ["exact", "f1", "best_exact", "best_f1", "HasAns_exact", "HasAns_f1",
              "NoAns_exact", "NoAns_f1"]
    return super().reported_metrics

  def check_selectable(self) -> None:
    """Raises errors.ParamsError (argument ``predict_file``) when the
    predict file has no answers."""
    if not self.has_answers:
      raise errors.ParamsError("%s has no answers to select on: a search needs "
                               "a dev file with answers" % self.params.predict_file,
                               argument="predict_file")

  def __init__(self, params: SquadParams, do_train: bool = True,
               do_predict: bool = True):
    self.params = p = params
    self.do_train = do_train
    self.do_predict = do_predict
    if do_train and not p.train_file:
      raise errors.ParamsError("train_file is required with --do_train",
                               argument="train_file")
    if do_predict and not p.predict_file:
      raise errors.ParamsError("predict_file is required with --do_predict",
                               argument="predict_file")
    if p.epochs_over not in EPOCHS_OVER:
      raise errors.ParamsError("epochs_over must be one of %s, got %r"
                               % (", ".join(EPOCHS_OVER), p.epochs_over),
                               argument="epochs_over")
    base.check_positive(p, ("train_batch_size", "predict_batch_size",
                             "n_best_size", "max_answer_length"))
    config, vocab_file = fine_tuning.resolve_config_and_vocab(p)
    fine_tuning.check_max_seq_length(
        p, config, "Cannot use sequence length %d because the BERT model was only "
        "trained up to sequence length %d (max_position_embeddings)")
    self.tokenizer = tokenization.FullTokenizer(
        vocab_file, p.do_lower_case, preserve_unused_tokens=p.preserve_unused_tokens)
    config_lib.check_vocab_size(len(self.tokenizer.vocab), config, vocab_file)
    self.config = config
    self.vocab_file = vocab_file
    self.train_batch_size = p.train_batch_size
    self.num_train_steps = 1
    self.train_examples = []
    self.train_arrays = None
    self.train_lengths, self.predict_lengths = [], []
    if do_train:
      examples = self._read(p.train_file, "train_file", is_training=True)
      if not examples:
        raise errors.InputError("%s has no usable training question" % p.train_file,
                                argument="train_file")
      # The original pre-shuffles the examples with random.Random(12345).
      random.Random(p.seed).shuffle(examples)
      features = self._features(examples, is_training=True, lengths=self.train_lengths)
      self.train_examples = examples
      self.num_train_features = len(features)
      self.train_arrays = features_to_arrays(features, with_positions=True)
      self._replan()
      logging.info("%s", self.steps_summary)
    self.predict_examples, self.predict_features = [], []
    self.predict_arrays = None
    self.has_answers = False
    if do_predict:
      fine_tuning.existing(p.predict_file, "predict_file")
      self.has_answers = has_gold_answers(p.predict_file)
      self.predict_examples = self._read(p.predict_file, "predict_file",
                                         is_training=False)
      self.predict_features = self._features(self.predict_examples,
                                             is_training=False,
                                             lengths=self.predict_lengths)
      self.predict_arrays = features_to_arrays(self.predict_features,
                                               with_positions=False)
    self._init_length_reports()

  def _replan(self) -> None:
    """``train_batch_size``, ``num_train_steps``, ``train_rows`` and
    ``steps_summary`` of the training features for the current ``params``
    (:meth:`FineTuningTask.with_params`)."""
    p = self.params
    fine_tuning.check_training_schedule(p)
    n, k = len(self.train_examples), self.num_train_features
    self.train_batch_size = p.train_batch_size
    self.train_rows = k
    self.num_train_steps = num_train_steps(n, k, p.train_batch_size,
                                           p.num_train_epochs, p.epochs_over)
    self.steps_summary = steps_summary(self.num_train_steps, n, k, p.train_batch_size,
                                       p.num_train_epochs, p.epochs_over)

  def _read(self, path, argument, is_training):
    fine_tuning.existing(path, argument)
    try:
      return squad_data.read_squad_examples(
          path, is_training=is_training,
          version_2_with_negative=self.params.version_2_with_negative)
    except errors.InputError as e:
      if e.argument in (None, "input_file"):
        e.argument = argument
      raise

  def _features(self, examples, is_training, lengths=None):
    p = self.params
    return squad_data.convert_examples_to_features(
        examples, self.tokenizer, p.max_seq_length, p.doc_stride,
        p.max_query_length, is_training, lengths=lengths)

  def length_report(self, split: str, lengths) -> "preprocessing.LengthReport":
    """The :class:`bert_tf.preprocessing.LengthReport` of one file's
    questions from their :class:`bert_tf.data.squad.ExampleLengths`: the
    untruncated ``[CLS] question [SEP] context [SEP]`` length (the
    original's WordPieces), and as cut the questions whose context took more
    than one window (``--doc_stride``) or whose question was cut at
    ``--max_query_length`` (no context is lost to windows, but the model
    sees each window without the rest)."""
    p = self.params
    lengths = np.asarray(lengths, np.int64).reshape(-1, 3)
    return preprocessing.LengthReport.from_lengths(
        split, lengths[:, 0] + lengths[:, 1] + 3, p.max_seq_length,
        cut=(lengths[:, 2] > 1) | (lengths[:, 0] > p.max_query_length),
        unit="questions",
        rule="were cut at --max_seq_length=%d: the context took more than one "
        "window (--doc_stride=%d) or the question more than --max_query_length=%d "
        "tokens" % (p.max_seq_length, p.doc_stride, p.max_query_length))

  def length_splits(self) -> list:
    """``train`` (``--train_file``) and ``predict`` (``--predict_file``), as
    read (:meth:`length_report`)."""
    out = []
    if self.do_train:
      out.append(("train", lambda: self.length_report("train", self.train_lengths)))
    if self.do_predict:
      out.append(("predict", lambda: self.length_report("predict", self.predict_lengths)))
    return out

  def batch_rows(self) -> list:
    """``train_batch_size`` against the training windows (features),
    ``predict_batch_size`` against the predict file's."""
    p = self.params
    out = []
    if self.do_train:
      out.append(("train_batch_size", p.train_batch_size, self.num_train_features,
                  "training windows (features) of %s" % p.train_file))
    if self.do_predict:
      out.append(("predict_batch_size", p.predict_batch_size, len(self.predict_features),
                  "windows (features) of %s" % p.predict_file))
    return out

  # --- set-up ------------------------------------------------------------

  def build_model(self):
    return models.build_question_answerer(self.config)

  def load_weights(self, model, path):
    """``--init_checkpoint``: the encoder, and the SQuAD head where the start
    model has one (:func:`bert_tf.modeling.presets.load_weights`)."""
    return presets.load_weights(model, path, models.QUESTION_ANSWERER_TASK)

  def serving_info(self) -> dict:
    """What a SQuAD export needs beside the model: ``vocab_file`` and the
    windowing / answer settings (the values of ``squad_config.json``)."""
    p = self.params
    return {"vocab_file": self.vocab_file, "do_lower_case": p.do_lower_case,
            "preserve_unused_tokens": p.preserve_unused_tokens,
            "max_seq_length": p.max_seq_length, "doc_stride": p.doc_stride,
            "max_query_length": p.max_query_length, "n_best_size": p.n_best_size,
            "max_answer_length": p.max_answer_length,
            "version_2_with_negative": p.version_2_with_negative,
            "null_score_diff_threshold": p.null_score_diff_threshold}

  def run_config(self) -> dict:
    """``squad_config.json``: the windowing and answer settings."""
    info = dict(self.serving_info())
    del info["vocab_file"]
    return dict(task="squad", **info)

  # --- training ----------------------------------------------------------

  def train_dataset(self, batch_size, input_context):
    """Repeated ``(features, positions)`` batches of ``batch_size`` rows:
    int32 [B, S] ``input_ids``/``input_mask``/``segment_ids`` and int32 [B]
    ``start_positions``/``end_positions``.

    The feature indices are shuffled (seeded, every epoch anew) and gathered
    per batch, so the checkpointed input position is a small index buffer.
    On a multi-worker job every worker shuffles alike and takes its own
    share of the indices (``input_context``): no feature twice in a step.
    """
    arrays = {k: tf.constant(v) for k, v in self.train_arrays.items()}
    n = len(self.train_arrays["input_ids"])

    def gather(idx):
      x = {k: tf.gather(arrays[k], idx) for k in FEATURE_NAMES}
      y = {k: tf.gather(arrays[k], idx) for k in ("start_positions", "end_positions")}
      return x, y
    ds = (tf.data.Dataset.range(n)
          .shuffle(n, seed=self.params.seed, reshuffle_each_iteration=True)
          .repeat())
    if input_context is not None and input_context.num_input_pipelines > 1:
      ds = ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id)
    return ds.batch(batch_size, drop_remainder=True).map(gather).prefetch(2)

  def compute_loss(self, model, features, totals=None):
    del totals
    x, y = features
    out = model(x, training=True)
    loss = models.span_loss(out["start_logits"], out["end_logits"],
                            y["start_positions"], y["end_positions"])
    return self.example_loss(loss)

  # --- evaluation, prediction --------------------------------------------

  def write_predictions(self, model, output_dir: str,
                        print_fn: Callable[[str], None] = print) -> list:
    """Predicts every predict feature and writes the original's files.

    Returns:
      the paths written: ``predictions.json``, ``nbest_predictions.json``
      and, with ``version_2_with_negative``, ``null_odds.json``.
    """
    p = self.params
    # No batch larger than the features: its padding rows would be computed.
    batch = max(1, min(p.predict_batch_size, len(self.predict_features)))
    starts, ends = predict_logits(model, self.predict_arrays, batch, print_fn)
    results = [squad_data.RawResult(unique_id=int(f.unique_id),
                                    start_logits=[float(v) for v in s],
                                    end_logits=[float(v) for v in e])
               for f, s, e in zip(self.predict_features, starts, ends)]
    os.makedirs(output_dir, exist_ok=True)
    paths = [os.path.join(output_dir, PREDICTIONS_FILE),
             os.path.join(output_dir, NBEST_FILE),
             os.path.join(output_dir, NULL_ODDS_FILE)]
    squad_data.write_predictions(
        self.predict_examples, self.predict_features, results, p.n_best_size,
        p.max_answer_length, p.do_lower_case, paths[0], paths[1], paths[2],
        version_2_with_negative=p.version_2_with_negative,
        null_score_diff_threshold=p.null_score_diff_threshold,
        verbose_logging=p.verbose_logging)
    return paths if p.version_2_with_negative else paths[:2]

  def evaluate(self, model, print_fn):
    """Writes the prediction files into ``output_dir`` and returns the
    official metrics of ``predict_file`` (numbers only; {} without answers)."""
    p = self.params
    files = self.write_predictions(model, p.output_dir, print_fn)
    if not self.has_answers:
      return {}
    results = squad_metrics.evaluate_file(
        p.predict_file, files[0],
        null_odds_file=files[2] if p.version_2_with_negative else None,
        version_2_with_negative=p.version_2_with_negative)
    out = {k: float(v) for k, v in results.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    print_fn("%s (%d questions, %d features): %s" % (
        os.path.basename(p.predict_file), len(self.predict_examples),
        len(self.predict_features),
        "  ".join("%s=%.4f" % (k, v) for k, v in sorted(out.items()))))
    print_fn(json.dumps(out, sort_keys=True))  # the official scripts' output line
    return out

  def predict(self, model, output_dir, print_fn):
    return self.write_predictions(model, output_dir, print_fn)
