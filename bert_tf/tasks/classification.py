"""The classification task: fine-tuning a sentence(-pair) classifier or regressor
(original ``run_classifier.py``).

:class:`ClassificationTask` supplies the model, inputs, loss, metrics and
predictions to :class:`bert_tf.runner.Runner`;
:func:`bert_tf.jobs.run_classifier` composes the two.

Tokenization and packing are the in-graph :class:`BertPreprocessor`, the
same object that :mod:`bert_tf.export.saved_model` bakes into the SavedModel.
The optimizer is the original AdamWeightDecay with linear warm-up over
``warmup_proportion`` of the steps and linear decay to 0. Classification
uses softmax cross-entropy; STS-B (regression) one output and the mean
squared error (as Hugging Face ``BertForSequenceClassification``; the
original has no regression task). With ``do_eval`` the dev set is scored
after every epoch and the best model by the task's GLUE metric
(:func:`bert_tf.metrics.main_metric`) is kept in ``<output_dir>/best/``.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import random
from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf import run_dir
from bert_tf import task_kinds
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import metrics as metrics_lib
from bert_tf import preprocessing
from bert_tf.data import classifier_data
from bert_tf.modeling import long_document
from bert_tf.modeling import models
from bert_tf.modeling import presets
from bert_tf.params import field
from bert_tf.tasks import fine_tuning

RUN_CONFIG = task_kinds.get("classifier").settings_file
BEST_DIR = run_dir.BEST_DIR  # the runner keeps the best dev model there
# The field long_document shadows the module in ClassifierParams' body.
LONG_DOCUMENT_METHODS = long_document.METHODS
WINDOW_POOLINGS = long_document.POOLINGS
# Token-length bucket edges for --bucket_by_length training batches.
BUCKETS = (16, 24, 32, 48, 64, 96)


@dataclasses.dataclass(kw_only=True)
class ClassifierParams(fine_tuning.FineTuningParams, fine_tuning.SkipPaddingParams):
  """Flags of the original ``run_classifier.py`` (same names and defaults),
  plus the added ones; ``tools/run_classifier.py`` defines its flags from
  these fields (the shared ones:
  :class:`bert_tf.tasks.fine_tuning.FineTuningParams`)."""
  task_name: str = field(help="Task (case-insensitive): %s. Default with --tfds_name: its GLUE task." % ", ".join(classifier_data.task_names()))
  data_dir: Optional[str] = field(help="Directory with the task's files: %s." % classifier_data.data_files_help())
  output_dir: str = field(help="Where checkpoints and results go.")
  vocab_file: Optional[str] = field(None, "The vocabulary file of the pretrained model.")
  bert_config_file: Optional[str] = field(None, "bert_config.json of the pretrained model.")
  init_checkpoint: Optional[str] = field(None, "Initial weights: ours, original TF1, or a Hugging Face directory.")
  max_seq_length: int = field(128, "Maximum total input length in WordPiece tokens.")
  eval_batch_size: int = field(8, "Batch size for eval.")
  bucket_by_length: bool = field(True, "Batch training examples of similar length (faster).")
  # Added task options (see bert_tf.data.classifier_data.get_task).
  xnli_language: str = field("en", "XNLI: language of multinli.train.<lang>.tsv and of the dev/test rows.")
  text_a_column: Optional[str] = field(None, "tsv/csv tasks: header name of the first text column.")
  text_b_column: Optional[str] = field(None, "tsv/csv tasks: header name of the second text column (pair tasks).")
  label_column: Optional[str] = field(None, "tsv/csv tasks: header name of the label column.")
  labels: Optional[tuple] = field(None, "Label names in id order (tsv/csv tasks; default: the sorted train labels), or VALUE:NAME pairs that name the values the data holds (--labels=0:ham,1:spam; any task): the names go into the run's labels, the model's id2label and every export.")
  tfds_name: Optional[str] = field(None, "Read a prepared tensorflow-datasets GLUE set instead of --data_dir, e.g. glue/sst2.")
  tfds_data_dir: Optional[str] = field(None, "tensorflow-datasets data_dir holding --tfds_name (never downloaded).")
  strict_utf8: bool = field(False, "Refuse a data file with bytes that are not UTF-8 (naming the file and line). Default: such bytes become U+FFFD, as the original reads them, with one warning naming the file, the first such line and their count.")
  deterministic: bool = field(False, fine_tuning.DETERMINISTIC_HELP)
  # Texts longer than one window (bert_tf.modeling.long_document).
  long_document: str = field("head", choices=LONG_DOCUMENT_METHODS, help="How a text longer than --max_seq_length is read: head (the original: its first tokens), tail (its last), head_tail (--head_tokens from the start, the rest from the end; Sun et al. 2019), windows (max_seq_length windows --doc_stride apart as run_squad.py cuts contexts, each encoded, pooled by --window_pooling into one prediction). In a pair the shorter text is kept in every window.")
  head_tokens: Optional[int] = field(None, "--long_document=head_tail: tokens kept from the start (default: a quarter of max_seq_length - 2).")
  doc_stride: Optional[int] = field(None, "--long_document=windows: tokens between window starts, below max_seq_length - 2 (default: half of it).")
  max_windows: int = field(4, "--long_document=windows: windows of a document trained on per step (all when it has no more, else that many spread evenly from its first to its last): bounds memory and time per document.")
  max_eval_windows: int = field(64, "--long_document=windows: windows of a document read in evaluation, prediction and the export (the same spread beyond it; the export says truncated).")
  window_pooling: str = field("mean", choices=WINDOW_POOLINGS, help="--long_document=windows: mean or max over a document's windows (of their pooled outputs).")

  pool_logits: bool = field(False, "--long_document=windows: pool the windows' logits instead of their pooled outputs (bench/bench_long_document.py measures both).")

  # A search may vary these per trial: the task packs its data per batch
  # (bert_tf.tuning.space), so no featurized data depends on them.
  featurized_per_trial = frozenset({"doc_stride"})


build_classifier = models.build_classifier
predict_logits = fine_tuning.predict_logits
softmax = fine_tuning.softmax


def settings_from_params(params) -> long_document.LongDocument:
  """The :class:`~bert_tf.modeling.long_document.LongDocument` the flags ask
  for (checked against ``--max_seq_length`` by the task)."""
  return long_document.LongDocument(
      params.long_document, head_tokens=params.head_tokens, doc_stride=params.doc_stride,
      max_windows=params.max_windows, max_eval_windows=params.max_eval_windows,
      window_pooling=params.window_pooling, pool_logits=params.pool_logits)


def task_from_params(params):
  """The :class:`classifier_data.Task` the params ask for.

  Raises:
    classifier_data.TaskError: unknown task or missing generic-task flags.
  """
  labels, aliases = classifier_data.parse_labels(params.labels)
  return classifier_data.get_task(
      params.task_name, xnli_language=params.xnli_language,
      text_a_column=params.text_a_column, text_b_column=params.text_b_column,
      label_column=params.label_column, labels=labels, label_aliases=aliases)


def load_split(task, params, split):
  """:class:`classifier_data.Examples` of one split, from files or tfds.

  Raises:
    classifier_data.TaskError: naming the file and line, or the tfds dir.
  """
  if params.tfds_name:
    return classifier_data.read_tfds_split(task, params.tfds_name,
                                           params.tfds_data_dir, split)
  if not params.data_dir:
    raise errors.TaskError("data_dir (or tfds_name) is required", argument="data_dir")
  return classifier_data.read_split(
      task, classifier_data.split_path(task, params.data_dir, split), split,
      strict_utf8=params.strict_utf8)


def eval_dataset(preprocessor, task, examples, batch_size):
  """The batched (features, labels) dataset of a labeled split (re-iterable)."""
  return classifier_data.examples_dataset(
      preprocessor, examples.texts_a, examples.texts_b, examples.labels,
      batch_size, label_dtype=tf.float32 if task.is_regression else tf.int32)


def evaluate(model, preprocessor, task, examples, batch_size, dataset=None):
  """Scores ``examples`` (a labeled split).

  ``dataset`` is its :func:`eval_dataset` when already built (saves
  re-tracing the preprocessing on every epoch's evaluation).

  Returns:
    ``(results, outputs)``: results maps ``loss`` (mean cross-entropy, or
    mean squared error for regression) and the task's GLUE metrics
    (:func:`bert_tf.metrics.compute`) to floats; outputs are the logits
    float [N, K] (the predictions [N, 1] for regression).
  """
  if dataset is None:
    dataset = eval_dataset(preprocessor, task, examples, batch_size)
  logits = predict_logits(model, dataset)
  return score(task, logits, examples.labels), logits


def score(task, outputs, labels) -> dict:
  """``loss`` (mean cross-entropy, or mean squared error for regression) and
  the task's GLUE metrics (:func:`bert_tf.metrics.compute`) of the model
  outputs float [N, K] (regression [N, 1]) against N labels (int ids or
  float scores)."""
  if task.is_regression:
    y = np.asarray(labels, np.float64)
    preds = outputs[:, 0].astype(np.float64)
    results = {"loss": float(np.mean((preds - y) ** 2))}
    results.update(metrics_lib.compute(task.metrics, preds, y))
  else:
    y = np.asarray(labels)
    results = {"loss": fine_tuning.mean_cross_entropy(outputs, y)}
    results.update(metrics_lib.compute(task.metrics, outputs.argmax(-1), y))
  return results


def _eval_prefix(split):
  """``eval_`` for the main dev split, ``eval_mismatched_`` for MNLI's other."""
  return "eval_" if split.name == "dev" else "eval_%s_" % split.name[len("dev_"):]


def prediction_paths(output_dir, task, split, labelled=False) -> list:
  """The files :func:`write_predictions` writes for ``split``:
  ``test_results.tsv``, ``predictions.tsv``, the submission file and, for a
  labelled test file, ``test_results.txt`` (MNLI's mismatched set:
  ``_mismatched`` names)."""
  suffix = "" if split.name == "test" else "_" + split.name[len("test_"):]
  paths = [os.path.join(output_dir, "test_results%s.tsv" % suffix),
           os.path.join(output_dir, "predictions%s.tsv" % suffix),
           os.path.join(output_dir, "%s.tsv" % (split.submission or task.name))]
  if labelled:
    paths.append(os.path.join(output_dir, "test_results%s.txt" % suffix))
  return paths


def write_predictions(output_dir, task, split, examples, outputs, results=None):
  """Writes a test split's predictions, atomically.

  * ``test_results.tsv`` (``test_results_mismatched.tsv`` for MNLI's
    mismatched set): one line per example, tab-separated class
    probabilities, no header (the original ``run_classifier.py``); for
    regression the predicted score.
  * ``predictions.tsv`` (``predictions_mismatched.tsv``): a header ``id<TAB>
    prediction<TAB>probability_<label>...`` (one column per label, in id
    order), then per example its row id, the predicted label name and the
    class probabilities (regression: ``id<TAB>prediction``, the score).
  * ``<submission>.tsv`` (``CoLA.tsv``, ``MNLI-m.tsv``, ...): the GLUE
    submission file, header ``index<TAB>prediction``, then the row id and the
    label name (regression: the score, 3 decimals).
  * with ``results`` (a labelled test file, :func:`score`):
    ``test_results.txt``, ``test_<metric> = value`` lines as
    ``eval_results.txt``.

  Returns:
    the paths written (:func:`prediction_paths`).
  """
  paths = prediction_paths(output_dir, task, split, results is not None)
  results_path, table_path, sub_path = paths[:3]
  if task.is_regression:
    preds = outputs[:, 0]
    io_utils.atomic_write_text(results_path, "".join("%s\n" % p for p in preds))
    answers = ["%.3f" % p for p in preds]
    table = "id\tprediction\n" + "".join(
        "%s\t%s\n" % (i, p) for i, p in zip(examples.ids, preds))
  else:
    probs = softmax(outputs.astype(np.float64)).astype(np.float32)
    rows = ["\t".join(str(p) for p in row) for row in probs]
    io_utils.atomic_write_text(results_path, "".join(r + "\n" for r in rows))
    answers = [task.labels[i] for i in probs.argmax(-1)]
    table = "\t".join(["id", "prediction"] + ["probability_%s" % l for l in task.labels]) + \
        "\n" + "".join("%s\t%s\t%s\n" % (i, a, r)
                       for i, a, r in zip(examples.ids, answers, rows))
  io_utils.atomic_write_text(table_path, table)
  io_utils.atomic_write_text(
      sub_path, "index\tprediction\n" + "".join(
          "%s\t%s\n" % (i, a) for i, a in zip(examples.ids, answers)))
  if results is not None:
    io_utils.atomic_write_text(paths[3], io_utils.format_results(results))
  return paths


def load_test_split(task, params, index, split):
  """``(examples, labelled)`` of test split ``split`` (the ``index``-th).

  A test file that has labels (one in the layout of the matching dev file:
  GLUE ``dev.tsv`` columns, or a tsv/csv test file with the
  ``--label_column``) is read with them, so its metrics can be reported;
  else it is read in the task's test layout (the original's: no labels).
  """
  if (task.labels is not None and not params.tfds_name and index < len(task.dev)
      and _same_header(task, params, task.dev[index], split)):
    dev = task.dev[index]
    labelled = dataclasses.replace(split, columns=dev.columns, header=dev.header)
    try:
      return load_split(task, params, labelled), True
    except errors.TaskError:
      pass  # not in the labelled layout: the test layout
  return load_split(task, params, split), False


def _same_header(task, params, dev, test) -> bool:
  """False when the dev file's columns are numbered, it has a header and
  the test file's first line is another (a GLUE test file in its own
  layout); True otherwise (named columns are found by name)."""
  cols = [c for c in dataclasses.astuple(dev.columns) if c is not None]
  if not dev.header or not all(isinstance(c, int) for c in cols):
    return True
  lines = []
  for s in (dev, test):
    try:
      with open(classifier_data.split_path(task, params.data_dir, s), "rb") as f:
        lines.append(f.readline().rstrip(b"\r\n"))
    except OSError:
      return False
  return lines[0] == lines[1]


class ClassificationTask(fine_tuning.FineTuningTask):
  """Sentence(-pair) classification or regression as a
  :class:`bert_tf.tasks.base.Task`.

  Reads the task's splits (GLUE/XNLI layouts, TSV/CSV, tensorflow-datasets)
  on construction, so bad files are reported before any model is built.
  Inputs: the raw strings through :class:`bert_tf.preprocessing.BertPreprocessor`
  (the preprocessing every export contains), shuffled, optionally bucketed by
  length. Loss: softmax cross-entropy (regression: squared error) divided by
  the global batch. Evaluation: every dev split (MNLI: matched and
  mismatched), the task's GLUE metrics with prefix ``eval_``
  (``eval_mismatched_``); the best model is picked by the main metric
  (:func:`bert_tf.metrics.main_metric`). Prediction: ``test_results.tsv`` and
  the GLUE submission files (:func:`write_predictions`).

  Args:
    params: :class:`ClassifierParams`.
    do_train / do_eval / do_predict: which splits to read.

  Raises:
    bert_tf.errors.TaskError / ConfigError / VocabError / ParamsError: naming
    the bad flag, file and line.

  Example::

    task = ClassificationTask(ClassifierParams(
        task_name="sst-2", data_dir="data/movie_review_sentences",
        output_dir="/tmp/sst2", init_checkpoint=HF_DIR), do_eval=True)
    Runner(RunnerParams.from_params(task.params)).run(
        task, strategy, do_eval=True, eval_at_steps=task.eval_at_steps())
  """

  example_unit = "examples"
  kind = "classifier"
  resumable_input = True  # index permutations: see classifier_data.index_batches

  def __init__(self, params: ClassifierParams, do_train: bool = True,
               do_eval: bool = True, do_predict: bool = False):
    self.params = params
    self._set_actions(do_train, do_eval, do_predict)
    data_task = task_from_params(params)
    # Bad long-document flags: one line before any file is read.
    settings_from_params(params).resolved(params.max_seq_length)
    self._set_preprocessor(*fine_tuning.resolve_config_and_vocab(params))
    self.long_document = settings_from_params(params).resolved(
        self.preprocessor.max_seq_length)
    self.train = None
    if data_task.labels is None and not do_train:
      labels = self.recorded_setting("labels")
      data_task = dataclasses.replace(data_task, labels=tuple(labels)) if labels else data_task
    if do_train or data_task.labels is None:
      self.train = load_split(data_task, params, data_task.train)
      data_task, self.train = classifier_data.resolve_labels(data_task, self.train)
    self.devs = ([(s, load_split(data_task, params, s)) for s in data_task.dev]
                 if do_eval else [])
    self.dev_datasets = [eval_dataset(self.featurizer(), data_task, ex,
                                      params.eval_batch_size)
                         for _, ex in self.devs]
    self.tests = ([(s,) + load_test_split(data_task, params, i, s)
                   for i, s in enumerate(data_task.test)] if do_predict else [])
    self.data_task = data_task
    self.name = data_task.name
    self.best_metric = "eval_" + metrics_lib.main_metric(data_task.metrics)
    self._plan_steps(len(self.train) if do_train else 0)
    self._init_length_reports()

  def _splits_read(self) -> list:
    """``[(name, Examples)]``: train (when read for training), each dev
    split, each test split."""
    return (([("train", self.train)] if self.do_train and self.train is not None else [])
            + [(s.name, ex) for s, ex in self.devs]
            + [(s.name, ex) for s, ex, _ in self.tests])

  def length_splits(self) -> list:
    """Per split read (:meth:`_splits_read`): examples longer than
    ``--max_seq_length`` (``[CLS] a [SEP] (b [SEP])`` untruncated, the
    in-graph tokenizer's pieces; pairs are cut longest first)."""
    return [(name, lambda name=name, ex=ex: long_document.length_report(
        self.preprocessor, self.long_document, ex.texts_a, ex.texts_b, name))
            for name, ex in self._splits_read()]

  def batch_rows(self) -> list:
    """``train_batch_size`` against the training examples (when training),
    ``eval_batch_size`` against each dev split, ``predict_batch_size``
    against each test split."""
    p = self.params
    out = []
    if self.do_train and self.train is not None:
      out.append(("train_batch_size", p.train_batch_size, len(self.train),
                  "training examples of %s" % self.train.path))
    out += [("eval_batch_size", p.eval_batch_size, len(ex), "examples of %s" % ex.path)
            for _, ex in self.devs]
    out += [("predict_batch_size", p.predict_batch_size, len(ex), "examples of %s" % ex.path)
            for _, ex, _ in self.tests]
    return out

  # --- what a hyperparameter search asks (bert_tf.tuning) -----------------

  can_hold_out = True

  @classmethod
  def for_search(cls, params: ClassifierParams, do_predict: bool) -> "ClassificationTask":
    return cls(params, do_train=True, do_eval=True, do_predict=do_predict)

  @property
  def selection_metric(self) -> str:
    """The kind record's (``eval_accuracy``), or ``eval_mcc`` (CoLA),
    ``eval_f1`` (MRPC, QQP), ``eval_spearmanr`` (STS-B) where GLUE reports
    those."""
    glue = {"mcc": "eval_mcc", "acc_and_f1": "eval_f1",
            "pearson_and_spearman": "eval_spearmanr"}
    return glue.get(self.data_task.metrics, super().selection_metric)

  @property
  def reported_metrics(self) -> list:
    """The kind record's (``eval_accuracy``, not for regression;
    ``eval_loss``) and the GLUE metrics of the task (``eval_mcc``;
    ``eval_f1``, ``eval_acc_and_f1``; ``eval_pearson``, ``eval_spearmanr``,
    ``eval_corr``)."""
    extra = {"mcc": ["mcc"], "acc_and_f1": ["f1", "acc_and_f1"],
             "pearson_and_spearman": ["pearson", "spearmanr", "corr"]}.get(
                 self.data_task.metrics, [])
    return [m for m in super().reported_metrics + ["eval_" + m for m in extra]
            if not (self.data_task.is_regression and m == "eval_accuracy")]

  def check_selectable(self) -> None:
    """Raises errors.ParamsError (argument ``data_dir``) without a dev split."""
    if not self.devs:
      raise errors.ParamsError("the task has no dev set to select on: use "
                               "--holdout_fraction", argument="data_dir")

  def hold_out(self, fraction: float, seed: int) -> None:
    """Sets ``round(fraction * rows)`` training examples (a seeded shuffle)
    aside as the dev set to select on, in place, and plans the steps for the
    rows left; the dev splits are kept for :meth:`dev_report_task`.

    Args:
      fraction: in (0, 1).
      seed: the shuffle's seed.

    Raises:
      errors.ParamsError: the fraction holds out no row or every row
        (argument ``holdout_fraction``).
    """
    train = self.train
    n = len(train)
    k = int(round(n * fraction))
    if k < 1 or k >= n:
      raise errors.ParamsError("holdout_fraction %g of %d training examples leaves "
                               "%d held out" % (fraction, n, k),
                               argument="holdout_fraction")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    held, kept = sorted(order[:k]), sorted(order[k:])

    def subset(idx, path):
      pick = lambda xs: None if xs is None else [xs[i] for i in idx]  # pylint: disable=unnecessary-lambda-assignment
      return dataclasses.replace(train, texts_a=pick(train.texts_a),
                                 texts_b=pick(train.texts_b), labels=pick(train.labels),
                                 ids=pick(train.ids), path=path)

    self._report_devs = (self.devs, self.dev_datasets)
    held_out = subset(held, train.path + " (held out %d)" % k)
    self.train = subset(kept, train.path)
    split = self.devs[0][0] if self.devs else self.data_task.dev[0]
    self.devs = [(split, held_out)]
    self.dev_datasets = [eval_dataset(self.featurizer(), self.data_task, held_out,
                                      self.params.eval_batch_size)]
    self._plan_steps(len(self.train))

  def dev_report_task(self) -> Optional["ClassificationTask"]:
    reported = getattr(self, "_report_devs", None)
    if reported is None:
      return None
    new = copy.copy(self)
    new.devs, new.dev_datasets = reported
    new._report_devs = None  # pylint: disable=protected-access
    return new

  def with_params(self, params: ClassifierParams) -> "ClassificationTask":
    """:meth:`FineTuningTask.with_params`, and a trial's own long-document
    settings (a search may vary ``--long_document`` and its options: the
    dev sets are packed anew by the trial's method)."""
    new = super().with_params(params)
    settings = settings_from_params(params).resolved(self.preprocessor.max_seq_length)
    if settings == self.long_document:
      return new
    new.long_document = settings
    make = lambda splits: [eval_dataset(new.featurizer(), new.data_task, ex,  # pylint: disable=unnecessary-lambda-assignment
                                        params.eval_batch_size) for _, ex in splits]
    new.dev_datasets = make(new.devs)
    reported = getattr(self, "_report_devs", None)
    if reported is not None:
      new._report_devs = (reported[0], make(reported[0]))  # pylint: disable=protected-access
    return new

  def build_model(self):
    return models.build_classifier(self.config, self.data_task.num_outputs,
                                   skip_padding=self.params.skip_padding,
                                   window_pooling=self.long_document.window_pooling,
                                   pool_logits=self.long_document.pool_logits)

  def featurizer(self, training: bool = False):
    """What turns a batch of raw strings into the model's features: the
    preprocessor itself for ``--long_document=head`` (the original's
    packing), else :class:`bert_tf.modeling.long_document.DocumentPacker`'s
    features (``training``: ``--max_windows`` windows a document)."""
    if self.long_document.method == "head":
      return self.preprocessor
    packer = long_document.DocumentPacker(self.preprocessor, self.long_document, training)
    return lambda a, b=None: {k: v for k, v in packer(a, b).items()
                              if k in long_document.FEATURES}

  def load_weights(self, model, path):
    """The encoder of ``--init_checkpoint`` (:func:`bert_tf.modeling.presets.load_weights`);
    the head starts from its initialization, as the labels may differ."""
    return presets.load_weights(model, path, presets.ENCODER)

  def run_config(self) -> dict:
    """``classifier_config.json``: ``task_name``, ``labels``, the tokenizer
    settings, ``is_regression``, ``is_pair``, ``warmup_examples``
    (:meth:`warmup_examples`; the file also gets ``lengths``:
    :meth:`~bert_tf.tasks.fine_tuning.FineTuningTask.write_run_files`)."""
    t = self.data_task
    return dict(task_name=t.name, labels=list(t.labels), **self.tokenizer_settings(),
                is_regression=t.is_regression, is_pair=t.is_pair,
                long_document=self.long_document.to_dict(),
                warmup_examples=self.warmup_examples())

  def warmup_examples(self, n: int = 3, max_chars: int = 1000) -> list:
    """The first ``n`` examples of the first split read (dev, else train,
    else test) as ``[text_a]`` or ``[text_a, text_b]`` lists, each text cut
    at ``max_chars``: the export's TF Serving warm-up requests come from
    the run's own data (``classifier_config.json``'s ``warmup_examples``)."""
    splits = [ex for _, ex in self.devs] + ([self.train] if self.train is not None else [])
    splits += [ex for _, ex, _ in self.tests]
    if not splits:
      return []
    ex = splits[0]
    rows = [[ex.texts_a[i]] + ([ex.texts_b[i]] if ex.texts_b is not None else [])
            for i in range(min(n, len(ex.texts_a)))]
    return [[t[:max_chars] for t in row] for row in rows]

  def train_dataset(self, batch_size, input_context):
    """Repeated ``(features, labels)`` batches of the training examples,
    shuffled every epoch (seeded; with ``bucket_by_length`` grouped by token
    length): int32 [B, S'] features (S' the batch's longest example) and
    int32 (regression: float32) [B] labels
    (:func:`bert_tf.data.classifier_data.examples_dataset`). Its iterator is
    checkpointed with the run (exact resume)."""
    del input_context  # one worker reads all the examples
    p, t = self.params, self.data_task
    head = self.long_document.method == "head"
    return classifier_data.examples_dataset(
        self.featurizer(training=True), self.train.texts_a, self.train.texts_b,
        self.train.labels, batch_size, shuffle=True, seed=p.seed,
        drop_remainder=True,
        # Length buckets measure the preprocessor's packing (head only).
        bucket_boundaries=BUCKETS if p.bucket_by_length and head else None,
        label_dtype=tf.float32 if t.is_regression else tf.int32)

  def compute_loss(self, model, features, totals=None):
    del totals
    features, y = features
    logits = tf.cast(model(features, training=True), tf.float32)
    if self.data_task.is_regression:
      return self.example_loss(tf.square(logits[:, 0] - y))
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    return self.example_loss(loss, logits, y)

  def evaluate(self, model, print_fn):
    out = {}
    for (split, examples), ds in zip(self.devs, self.dev_datasets):
      res, _ = evaluate(model, self.featurizer(), self.data_task, examples,
                        self.params.eval_batch_size, dataset=ds)
      out.update({_eval_prefix(split) + k: v for k, v in res.items()})
      print_fn("%s (%d examples): %s" % (split.name, len(examples), "  ".join(
          "%s=%.4f" % (k, v) for k, v in sorted(res.items()))))
    return out

  def predict(self, model, output_dir, print_fn):
    """Writes each test split's predictions (:func:`write_predictions`);
    a labelled test file also gets its metrics (``test_results.txt``,
    printed). A file that exists is never overwritten: it is kept as
    ``<name>.<N><ext>`` (:func:`bert_tf.io_utils.keep_previous`), and a line
    says so."""
    files = []
    for split, examples, labelled in self.tests:
      ds = classifier_data.examples_dataset(
          self.featurizer(), examples.texts_a, examples.texts_b, None,
          self.params.predict_batch_size)
      outputs = predict_logits(model, ds)
      results = None
      if labelled:
        res = score(self.data_task, outputs, examples.labels)
        print_fn("%s (%d labelled examples): %s" % (split.name, len(examples), "  ".join(
            "%s=%.4f" % (k, v) for k, v in sorted(res.items()))))
        results = {"test_" + k: v for k, v in res.items()}
      for path in prediction_paths(output_dir, self.data_task, split, labelled):
        kept = io_utils.keep_previous(path)
        if kept:
          print_fn("kept the previous %s as %s" % (os.path.basename(path),
                                                   os.path.basename(kept)))
      files.extend(write_predictions(output_dir, self.data_task, split, examples,
                                     outputs, results))
    return files
