"""What the fine-tuning tasks share (classification, SQuAD, SWAG, NER).

* Params: :class:`FineTuningParams`, the flags every fine-tuning tool has
  (the original ``run_classifier.py``'s names, defaults and help);
  :class:`RunFlagsParams` adds ``--distribution_strategy`` and
  ``--deterministic`` (SQuAD, SWAG, NER; the classifier declares
  ``--deterministic`` itself); :class:`SplitFilesParams` adds
  ``--do_train`` and ``--do_eval`` of a train and a dev file (SWAG, NER). A
  task's params class subclasses one and redeclares a field only where its
  default or help differs (a redeclared field keeps its place; the tools
  list their flags by name).
* Files: :func:`model_files` / :func:`resolve_config_and_vocab` (the
  model's config, vocab and casing from the ``--init_checkpoint``'s preset
  loader, the flags overriding, or the files of a finished run),
  :func:`existing` (a named file that must exist), :func:`data_path` (a file
  flag relative to ``--data_dir``), and :meth:`FineTuningTask.write_run_files`
  (``bert_config.json``, ``vocab.txt`` and the task's settings file beside
  the checkpoints, for re-export and prediction runs).
* :class:`FineTuningTask`: the :class:`bert_tf.tasks.base.Task` parts that
  are the same for every fine-tuning task: the optimizer schedule (linear
  warm-up over ``warmup_proportion`` of the steps, the original
  ``run_classifier.py`` step count), dev evaluation at every epoch's end,
  initialization from ``--init_checkpoint``, the per-example loss and its
  metrics.
* Prediction: :func:`predict_logits` (one traced step per model) and
  :func:`softmax`.

Example::

  @dataclasses.dataclass(kw_only=True)
  class MyParams(fine_tuning.FineTuningParams):
    output_dir: str = field(help="Where checkpoints go.")

  class MyTask(fine_tuning.FineTuningTask):
    kind = "my_kind"   # a bert_tf.task_kinds record: settings file, metrics
    def load_weights(self, model, path): ...
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import shutil
from typing import Optional, Tuple
import weakref

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import precision
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import optimization
from bert_tf import preprocessing
from bert_tf import run_dir
from bert_tf import task_kinds
from bert_tf import tokenization
from bert_tf.modeling import presets
from bert_tf.params import field
from bert_tf.tasks import base

OPTIMIZERS = ("adamw_original", "adamw", "lamb")
DTYPES = precision.DTYPES
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


@dataclasses.dataclass(kw_only=True)
class FineTuningParams:
  """The flags every fine-tuning tool has; the defaults and help of the
  original ``run_classifier.py`` (a task redeclares what differs)."""
  # The model, its vocab and tokenization.
  vocab_file: Optional[str] = field(None, "The vocabulary file of the pretrained model (default: vocab.txt of a Hugging Face --init_checkpoint).")
  bert_config_file: Optional[str] = field(None, "bert_config.json of the pretrained model (default: the config that came with --init_checkpoint: a Hugging Face directory's config.json, or bert_config.json beside the checkpoint, as in a pretraining run's directory).")
  do_lower_case: bool = field(True, "Whether to lower case the input text.")
  preserve_unused_tokens: bool = field(False, "Keep vocab entries [unusedN] that stand alone in the text as whole tokens (the original's --preserve_unused_tokens; the usual way to add domain words to a vocab).")
  # The training recipe.
  train_batch_size: int = field(32, "Total batch size for training.")
  learning_rate: float = field(5e-5, "Peak learning rate (Adam).")
  num_train_epochs: float = field(3.0, "Number of training epochs.")
  warmup_proportion: float = field(0.1, "Fraction of steps for linear warm-up.")
  seed: int = field(12345, "Shuffle, dropout and initialization seed.")
  optimizer: str = field("adamw_original", "Optimizer (default: the original AdamWeightDecay).", choices=OPTIMIZERS)
  dtype: str = field("float32", "Compute dtype policy; auto: mixed_bfloat16 where the CPU has bf16 units (avx512_bf16/amx_bf16) or on a TPU, else float32.", choices=DTYPES)
  # Outputs, checkpoints and progress lines.
  predict_batch_size: int = field(8, "Batch size for predict.")
  export_dir: Optional[str] = field(None, "Export a SavedModel to EXPORT_DIR/<version>/.")
  keep_best: bool = field(True, "With --do_train --do_eval: keep the best dev model in OUTPUT_DIR/best/ (by the task's dev metric; a tie keeps the later model); prediction and export use it.")
  save_checkpoints_steps: int = field(1000, "How often to save a checkpoint.")
  keep_checkpoint_max: int = field(2, "Checkpoints kept.")
  iterations_per_loop: int = field(50, "Steps per host loop (the most per tf.function call) and per progress line; a progress line also comes at least about every minute.")


DETERMINISTIC_HELP = ("Enable TensorFlow op determinism (bit-identical reruns and "
                      "resumes).")


@dataclasses.dataclass(kw_only=True)
class RunFlagsParams(FineTuningParams):
  """:class:`FineTuningParams` plus the strategy and determinism flags as
  params fields (``tools/run_classifier.py`` defines its strategy flag
  outside its params; :class:`bert_tf.tasks.classification.ClassifierParams`
  declares ``deterministic`` itself)."""
  distribution_strategy: str = field("one_device", "tf.distribute strategy.", choices=STRATEGIES)
  deterministic: bool = field(False, DETERMINISTIC_HELP)


@dataclasses.dataclass(kw_only=True)
class SplitFilesParams(RunFlagsParams):
  """:class:`RunFlagsParams` of a task that reads a train, a dev and a test
  file from ``data_dir`` (SWAG, NER; see :func:`data_path`), as
  ``do_train`` / ``do_eval`` / ``do_predict`` ask."""
  do_train: bool = field(False, "Whether to fine-tune on --train_file.")
  do_eval: bool = field(False, "Whether to score --dev_file (after every epoch when training).")


@dataclasses.dataclass(kw_only=True)
class SkipPaddingParams:
  """The flag of the tasks whose heads never read a padding position
  (classification, NER, SWAG; not SQuAD, whose span softmax runs over every
  position as the original's)."""
  skip_padding: bool = field(True, "Run the encoder's row-wise layers on the tokens only, not the padding: the same results up to float rounding, about the token share of the time on padded batches. false: every position, as the original.")


# --- files -----------------------------------------------------------------


def existing(path: str, argument: str, error=errors.InputError) -> str:
  """``path``, or ``error`` (InputError) naming the flag when it does not exist."""
  if not os.path.exists(path):
    raise error("%r does not exist" % path, argument=argument)
  return path


def check_init_checkpoint(init_checkpoint: Optional[str]) -> None:
  """CheckpointError naming ``--init_checkpoint`` when it is given and is
  neither a file, a directory nor a checkpoint prefix (``<path>.index``).

  Checked first, before the flags whose defaults come from the checkpoint
  (``--bert_config_file``, ``--vocab_file``): a mistyped path is the one
  problem to report, not the flags it would have supplied.
  """
  init_checkpoint = checkpoints.local_checkpoint(init_checkpoint)  # an uncached hf:// name: its line
  if init_checkpoint and not (tf.io.gfile.exists(init_checkpoint) or
                              tf.io.gfile.glob(init_checkpoint + ".index") or
                              tf.io.gfile.glob(init_checkpoint + "*.index")):
    raise errors.CheckpointError("%r does not exist" % init_checkpoint,
                                 argument="init_checkpoint")


def data_path(params, name: str) -> str:
  """The path of ``params.<name>`` (``train_file``, ...): as given when it
  exists or is absolute, else under ``data_dir``."""
  value = getattr(params, name)
  if params.data_dir and not os.path.isabs(value) and not os.path.exists(value):
    return os.path.join(params.data_dir, value)
  return value


@dataclasses.dataclass(frozen=True)
class ModelFiles:
  """What a run starts from (:func:`model_files`).

  Attributes:
    config: the model's :class:`bert_tf.config.BertConfig`.
    config_file: the file it came from.
    vocab_file: the WordPiece vocab, or None (none found).
    do_lower_case: the casing the starting point records for that vocab (a
      run's settings, a Hugging Face tokenizer, a ``.keras`` preprocessor);
      None when it records none or the vocab is ``--vocab_file``'s.
    loader: the ``--init_checkpoint``'s :class:`bert_tf.modeling.presets.PresetLoader`,
      or None without one.
  """
  config: config_lib.BertConfig
  config_file: Optional[str]
  vocab_file: Optional[str]
  do_lower_case: Optional[bool]
  loader: Optional[presets.PresetLoader]


def model_files(params) -> ModelFiles:
  """The one answer to "what does this run start from", for every tool
  (the fine-tuning tasks, ``run_pretraining.py``, ``extract_features.py``):
  the ``--init_checkpoint``'s preset loader
  (:func:`bert_tf.modeling.presets.get_preset_loader`, the one ``from_preset``
  uses: a Hugging Face directory or ``hf://`` name, an original release or
  checkpoint, one of our runs by the best-or-latest rule, a ``.keras`` file)
  gives the config, the vocab and its casing; the flags override.

  The config: ``--bert_config_file`` (refused when its architecture is not
  the starting point's: :func:`bert_tf.modeling.presets.check_config_matches`);
  else the starting point's; else ``bert_config.json`` of ``output_dir`` (a
  finished run predicting or exporting). The vocab: ``--vocab_file``; else
  the starting point's; else ``vocab.txt`` beside the config or in
  ``output_dir``.

  Args:
    params: with ``init_checkpoint``, ``bert_config_file`` and
      ``vocab_file`` (each may be None), optionally ``output_dir``.

  Returns:
    :class:`ModelFiles`.

  Raises:
    CheckpointError: ``--init_checkpoint`` does not exist (checked first)
      or holds no model; a ``--bert_config_file`` that does not fit it.
    ConfigError: no config anywhere (naming ``bert_config_file``), a
      ``--bert_config_file`` that does not exist or does not parse.
    InputError: a ``--vocab_file`` that does not exist.
  """
  ic = checkpoints.local_checkpoint(getattr(params, "init_checkpoint", None))  # hf:// too
  check_init_checkpoint(ic)
  loader = presets.get_preset_loader(ic, source="--init_checkpoint") if ic else None
  run = getattr(params, "output_dir", None)
  config_file, config = _model_config(params.bert_config_file, loader, run)
  vocab_file, casing = params.vocab_file, None
  if vocab_file:
    existing(vocab_file, "vocab_file")
  else:
    vocab_file, casing = _model_vocab(loader, config_file, run)
  return ModelFiles(config, config_file, vocab_file, casing, loader)


def _model_config(config_file: Optional[str], loader, run: Optional[str]):
  """``(path, BertConfig)``: the flag's, the starting point's, the run's."""
  if config_file:
    existing(config_file, "bert_config_file", errors.ConfigError)
    config = config_lib.BertConfig.from_json_file(config_file)
    if loader is not None:
      presets.check_config_matches(loader, config, config_file)
    return config_file, config
  if loader is not None and loader.config_file() is not None:
    return loader.config_file(), loader.config()
  path = os.path.join(run, run_dir.BERT_CONFIG) if run else ""
  if path and os.path.exists(path):
    return path, config_lib.BertConfig.from_json_file(path)
  raise errors.ConfigError("bert_config_file is required unless init_checkpoint "
                           "is a Hugging Face BERT directory or has a "
                           "bert_config.json beside it", argument="bert_config_file")


def _model_vocab(loader, config_file: str, run: Optional[str]):
  """``(vocab path or None, recorded casing or None)`` without the flag."""
  if loader is not None:
    vocab = loader.vocab_file()
    if vocab and os.path.exists(vocab):
      return vocab, loader.recorded_do_lower_case()
  for d in (os.path.dirname(os.path.abspath(config_file)), run):
    if d and os.path.exists(os.path.join(d, run_dir.VOCAB)):
      return os.path.join(d, run_dir.VOCAB), None
  return None, None


def resolve_config_and_vocab(params) -> Tuple[config_lib.BertConfig, str]:
  """``(BertConfig, vocab_file)`` of a fine-tuning task or
  ``extract_features.py`` (:func:`model_files`), a vocab required; the
  casing the starting point records becomes ``params.do_lower_case`` when
  the flag is left at its default (:func:`adopt_run_casing`).

  Args:
    params: as :func:`model_files`, with ``do_lower_case`` (set in place).

  Raises:
    as :func:`model_files`; VocabError: no vocab (naming ``vocab_file``);
    ParamsError: ``do_lower_case=False`` against a lower-cased start model.
  """
  files = model_files(params)
  if not files.vocab_file:
    raise errors.VocabError(
        "vocab_file is required unless init_checkpoint is a Hugging Face BERT "
        "directory, has a vocab.txt beside it, or is a run directory that carries "
        "its vocab.txt (run_pretraining.py copies the vocab it is given)",
        argument="vocab_file")
  if files.do_lower_case is not None:
    adopt_run_casing(params, files.do_lower_case, params.init_checkpoint,
                     files.loader.casing_record)
  return files.config, files.vocab_file


def adopt_run_casing(params, recorded: Optional[bool], init_checkpoint: str,
                     record: str = "run directory") -> None:
  """``params.do_lower_case`` from the start model that ``init_checkpoint`` is.

  The flag's default (True) takes the recorded casing (``record``: what
  records it, ``run directory``, ``tokenizer``); an explicit
  ``--do_lower_case=False`` against a model trained on lower-cased text is
  refused (the original refuses a casing flag that contradicts a released
  checkpoint's name, ``validate_case_matches_checkpoint``).

  Raises:
    errors.ParamsError: ``do_lower_case=False`` for a lower-cased run.
  """
  if recorded is None or not hasattr(params, "do_lower_case") or \
      params.do_lower_case == recorded:
    return
  if params.do_lower_case:  # the default: the casing the model was trained with
    logging.info("--do_lower_case=%s: the casing %s was trained with", recorded,
                 init_checkpoint)
    params.do_lower_case = recorded
    return
  raise errors.ParamsError(
      "do_lower_case=False, but %s was trained on lower-cased text (as its %s "
      "records): drop the flag" % (init_checkpoint, record), argument="do_lower_case")


def check_training_schedule(params) -> None:
  """ParamsError naming the flag of a schedule that cannot train: a
  learning rate or epoch count that is not positive (the original trains on
  them and exits 0), a warm-up proportion outside [0, 1] (a warm-up longer
  than training).

  Args:
    params: fine-tuning params with ``learning_rate``, ``num_train_epochs``
      and ``warmup_proportion`` (floats).

  Raises:
    ParamsError: the first bad field, ``argument`` set to its name.
  """
  base.check_positive(params, ("learning_rate", "num_train_epochs"))
  if not 0 <= params.warmup_proportion <= 1:
    raise errors.ParamsError(
        "warmup_proportion must be in [0, 1] (the share of the training steps "
        "that warm up), got %g" % params.warmup_proportion,
        argument="warmup_proportion")


def check_train_batch_size(batch_size: int, rows: int, rows_what: str,
                           argument: str = "train_batch_size",
                           name: str = "train_batch_size") -> None:
  """ParamsError naming ``argument`` when a training batch would be larger
  than the rows it is drawn from (the rule of ``tools/tune.py``'s search).

  The original's training input repeats the rows and batches with
  ``drop_remainder=True``, so such a batch holds every row several times
  (and takes memory for the flag: 100,000 rows of 100 were OOM-killed), and
  its step count ``int(rows / batch * epochs)`` is 0, which the
  ``TPUEstimator`` refuses with a traceback.

  Args:
    batch_size: the flag's value (examples, windows, questions' features).
    rows: the rows per epoch the batches are drawn from (0: not known yet,
      nothing checked).
    rows_what: what the rows are, for the message (``training examples of
      train.tsv``).
    argument: the flag the error names (``search_space`` for a search's
      grid of batch sizes).
    name: the setting, as the message says it.

  Raises:
    ParamsError: ``batch_size`` < 1 or above ``rows``.
  """
  base.require_positive(name, batch_size, argument)
  if rows and batch_size > rows:
    raise errors.ParamsError("%s %d is above the %d %s: a batch draws distinct rows, "
                             "use at most %d" % (name, batch_size, rows, rows_what, rows),
                             argument=argument)


def batch_note(argument: str, batch_size: int, rows: int, rows_what: str) -> Optional[str]:
  """The line a tool prints when an evaluation or prediction batch flag is
  above its split's rows: the split then goes in one batch of its rows (as
  the original's ``Estimator`` runs a smaller last batch; nothing is
  allocated for the flag). None when the flag fits."""
  if not rows or batch_size <= rows:
    return None
  return ("--%s=%d is above the %d %s: they go in one batch of %d"
          % (argument, batch_size, rows, rows_what, rows))


def check_max_seq_length(params, config: config_lib.BertConfig,
                         message: str = "--max_seq_length %d exceeds "
                         "max_position_embeddings %d") -> None:
  """ParamsError when ``max_seq_length`` is longer than the model's
  position table (``message`` % (max_seq_length, max_position_embeddings))."""
  if params.max_seq_length > config.max_position_embeddings:
    raise errors.ParamsError(
        message % (params.max_seq_length, config.max_position_embeddings),
        argument="max_seq_length")


def epoch_ends(num_examples: int, batch_size: int, epochs: float,
               total_steps: int) -> list:
  """Global steps at which each epoch ends (the last is ``total_steps``)."""
  per_epoch = num_examples / batch_size
  ends = sorted({min(total_steps, max(1, int(round(per_epoch * k))))
                 for k in range(1, int(math.ceil(epochs)) + 1)})
  return [e for e in ends if e < total_steps] + [total_steps]


# --- prediction ------------------------------------------------------------

_PREDICT_FNS = weakref.WeakKeyDictionary()


def predict_step(model):
  """The traced ``features -> float32 logits`` call of ``model`` (inference
  mode), cached per model (epochs' evaluations reuse it)."""
  step = _PREDICT_FNS.get(model)
  if step is None:
    step = tf.function(lambda f: tf.cast(model(f, training=False), tf.float32),
                       reduce_retracing=True, autograph=False)
    _PREDICT_FNS[model] = step
  return step


def predict_logits(model, dataset) -> np.ndarray:
  """Logits float32 [N, ...] over a features-only or (features, labels)
  dataset (an empty one: float32 [0, 0])."""
  step = predict_step(model)
  out = [step(batch[0] if isinstance(batch, tuple) else batch).numpy()
         for batch in dataset]
  return np.concatenate(out, 0) if out else np.zeros([0, 0], np.float32)


def softmax(logits: np.ndarray) -> np.ndarray:
  """Row-wise softmax of float [N, K] logits (numpy, float64-safe)."""
  z = logits - logits.max(-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(-1, keepdims=True)


def mean_cross_entropy(logits: np.ndarray, labels) -> float:
  """The mean softmax cross-entropy of float [N, K] logits and N int labels
  (computed in float64)."""
  y = np.asarray(labels, np.int64)
  probs = softmax(logits.astype(np.float64))
  return float(-np.log(probs[np.arange(len(y)), y] + 1e-12).mean())


# --- the task ----------------------------------------------------------------


class FineTuningTask(base.Task):
  """A :class:`bert_tf.tasks.base.Task` fine-tuning a pretrained encoder.

  A subclass names its task kind (:attr:`kind`, a :mod:`bert_tf.task_kinds`
  record: its settings file and default metrics), sets ``params`` (a
  :class:`FineTuningParams`), ``config``, ``vocab_file``
  (:meth:`_set_preprocessor` sets both), ``do_train`` and
  ``num_train_steps`` (:meth:`_plan_steps`: the original's count), writes
  its settings (:meth:`run_config`) and loads ``--init_checkpoint``
  (:meth:`load_weights`).

  Attributes:
    kind: the task kind's name (``"classifier"``, ``"squad"``, ``"ner"``,
      ``"swag"``).
    train_rows: training rows (examples, windows) per epoch, set by
      :meth:`_plan_steps`; 0: no dev evaluation at epoch ends.
  """

  autotune_input = False  # see base.Task: no idle minute at the end of a run

  kind: str = ""
  train_rows: int = 0

  @property
  def kind_record(self) -> task_kinds.TaskKind:
    """The :class:`bert_tf.task_kinds.TaskKind` of :attr:`kind`.

    Raises:
      ParamsError: :attr:`kind` is not a registered kind.
    """
    return task_kinds.get(self.kind)

  @property
  def run_config_file(self) -> str:
    """The task's settings file in the output directory
    (``squad_config.json``, ...: the kind record's ``settings_file``),
    written by :meth:`write_run_files`."""
    return self.kind_record.settings_file if self.kind else ""

  @property
  def run_files(self) -> tuple:
    return ("bert_config.json", "vocab.txt", self.run_config_file)

  # --- set-up ------------------------------------------------------------

  # Settings a training run records in run_config_file that a later run on
  # the same output_dir without training (predict, export) takes over where
  # its own flag is left at the default; of those, the ones that must equal
  # the training run's (the casing of the vocab the model learned).
  recorded_keys = ("do_lower_case", "preserve_unused_tokens", "max_seq_length")
  must_match_keys = ("do_lower_case", "preserve_unused_tokens")

  def _set_actions(self, do_train=None, do_eval=None, do_predict=None) -> None:
    """``do_train`` / ``do_eval`` / ``do_predict``: as given, else the
    params' flags; then, without training, :meth:`_adopt_recorded_settings`."""
    p = self.params
    self.do_train = p.do_train if do_train is None else do_train
    self.do_eval = p.do_eval if do_eval is None else do_eval
    self.do_predict = p.do_predict if do_predict is None else do_predict
    if not self.do_train:
      self._adopt_recorded_settings()

  def _adopt_recorded_settings(self) -> None:
    """A run without training on a finished run's ``output_dir`` tokenizes as
    that run trained: each of :attr:`recorded_keys` left at its default is
    set (in ``self.params``, in place) to the value recorded in
    :attr:`run_config_file`; an explicit other ``max_seq_length`` (or NER
    ``doc_stride``) is kept (the model takes any length up to
    ``max_position_embeddings``).

    Raises:
      errors.ParamsError: an explicit value of :attr:`must_match_keys` that
        differs from the recorded one (names the flag, both values, the file).
    """
    p = self.params
    path = os.path.join(p.output_dir, self.run_config_file) if self.run_config_file else ""
    if not path or not os.path.exists(path):
      return
    with open(path, encoding="utf-8") as f:
      recorded = json.load(f)
    defaults = {f.name: f.default for f in dataclasses.fields(p)}
    for key in self.recorded_keys:
      if key not in recorded or getattr(p, key) == recorded[key]:
        continue
      if getattr(p, key) == defaults.get(key):
        setattr(p, key, recorded[key])
      elif key in self.must_match_keys:
        raise errors.ParamsError(
            "%s=%s, but the model in %s was trained with %s=%s (%s): drop the flag"
            % (key, getattr(p, key), p.output_dir, key, recorded[key], path),
            argument=key)

  def _set_preprocessor(self, config: config_lib.BertConfig, vocab_file: str) -> None:
    """Checks ``max_seq_length`` against ``config``; sets ``config``,
    ``vocab_file`` and ``preprocessor`` (the in-graph
    :class:`bert_tf.preprocessing.BertPreprocessor`, its vocab checked
    against the model's ``vocab_size``)."""
    p = self.params
    check_max_seq_length(p, config)
    # --do_lower_case against the checkpoint's name (the original's check),
    # else against the vocab's content: a warning with the fix.
    if not tokenization.validate_case_matches_checkpoint(
        p.do_lower_case, getattr(p, "init_checkpoint", None)):
      tokenization.warn_if_case_mismatch(tokenization.load_vocab(vocab_file),
                                         p.do_lower_case, vocab_file)
    self.preprocessor = preprocessing.BertPreprocessor(
        vocab_file, p.do_lower_case, p.max_seq_length,
        preserve_unused_tokens=p.preserve_unused_tokens)
    config_lib.check_vocab_size(self.preprocessor.vocab_size, config, vocab_file)
    self.config = config
    self.vocab_file = vocab_file

  def _plan_steps(self, rows: int) -> None:
    """Sets ``train_rows`` (training rows per epoch), ``train_batch_size``
    and ``num_train_steps``: the original ``run_classifier.py`` count
    ``int(rows / train_batch_size * num_train_epochs)``, at least 1 (1
    without training)."""
    p = self.params
    self.train_rows = rows
    self.train_batch_size = p.train_batch_size
    self.num_train_steps = 1
    if self.do_train:
      check_training_schedule(p)
      base.check_positive(p, ("train_batch_size",))
      self.num_train_steps = max(1, int(rows / p.train_batch_size * p.num_train_epochs))

  # --- what --max_seq_length cuts, batches against the rows -------------

  def _init_length_reports(self) -> None:
    """The length reports' state, made once per task at construction and
    shared by its copies (``copy.copy``: :meth:`with_params`,
    :meth:`select_by`), so a search measures and tells them once, not once
    per trial."""
    self._lengths = {"reports": None, "told": False}

  def length_splits(self) -> list:
    """``[(split name, fn)]`` for every split read (train, dev, test), in
    order; ``fn()`` returns its :class:`bert_tf.preprocessing.LengthReport`
    (untruncated lengths with the task's tokenizer, and what the task's
    featurizing cuts). Default: none."""
    return []

  def length_reports(self) -> list:
    """:class:`bert_tf.preprocessing.LengthReport` per split read
    (:meth:`length_splits`): examples cut at ``--max_seq_length`` and the
    length percentiles, measured once per task (its copies share them)."""
    state = self.__dict__.setdefault("_lengths", {"reports": None, "told": False})
    if state["reports"] is None:
      state["reports"] = [fn() for _, fn in self.length_splits()]
    return state["reports"]

  def batch_rows(self) -> list:
    """``[(flag, batch size, rows, what the rows are)]`` for every batch
    flag against the rows of its split, as this run uses them (training:
    only when training). Default: none."""
    return []

  def check_inputs(self) -> None:
    """Refuses a ``--train_batch_size`` above the training rows
    (:func:`check_train_batch_size`) before any step or file."""
    for flag, batch, rows, what in self.batch_rows():
      if flag == "train_batch_size":
        check_train_batch_size(batch, rows, what)

  def untold_data_lines(self) -> list:
    """The lines a tool prints once before the run (whatever number of runs
    a search makes): an evaluation or prediction batch flag above its
    split's rows (:func:`batch_note`), then one :meth:`length_reports` line
    per split; [] the second time."""
    state = self.__dict__.setdefault("_lengths", {"reports": None, "told": False})
    if state["told"]:
      return []
    state["told"] = True
    notes = [batch_note(flag, batch, rows, what) for flag, batch, rows, what
             in self.batch_rows() if flag != "train_batch_size"]
    return [n for n in notes if n] + [r.line() for r in self.length_reports()]

  def lengths_setting(self) -> dict:
    """``{split: LengthReport.to_dict()}`` of :meth:`length_reports`: the
    ``lengths`` entry of :attr:`run_config_file`."""
    return {r.split: r.to_dict() for r in self.length_reports()}

  def with_params(self, params: FineTuningParams) -> "FineTuningTask":
    """A copy of this task that trains with ``params`` (another learning
    rate, batch size, epoch count, seed or ``output_dir``) on the data this
    task already read, tokenized and featurized (a hyperparameter search
    prepares its data once: :mod:`bert_tf.tuning`). The step count is
    planned anew (:meth:`_replan`); fields that change the data
    (``max_seq_length``, files) must not differ (not checked here)."""
    new = copy.copy(self)
    new.params = params
    new._replan()  # pylint: disable=protected-access
    return new

  # --- what a hyperparameter search asks of a task (bert_tf.tuning) -------

  # Whether :meth:`hold_out` can set a slice of train aside to select on.
  can_hold_out: bool = False
  # Whether the task's dev evaluation is a prediction of its predict file (a
  # run that evaluates needs ``do_predict``: SQuAD).
  evaluates_by_predicting: bool = False

  @classmethod
  def for_search(cls, params: FineTuningParams, do_predict: bool) -> "FineTuningTask":
    """The task a search's trials train: training and dev data read and
    featurized, test data too with ``do_predict``.

    Default: ``cls(params)``, the actions taken from ``params``' own
    ``do_train`` / ``do_eval`` / ``do_predict`` (the search sets them).

    Raises:
      bert_tf.errors.BertTfError subclasses naming the bad flag or file.
    """
    del do_predict  # in params
    return cls(params)

  @property
  def selection_metric(self) -> str:
    """The task's standard dev metric (paper / GLUE): what a search selects
    on unless told otherwise; one of :attr:`reported_metrics`. Default: the
    kind record's ``selection_metric``."""
    return self.kind_record.selection_metric

  @property
  def reported_metrics(self) -> list:
    """The dev metrics (``list`` of str) :meth:`evaluate` reports, the names
    a search may select on. Default: the kind record's ``reported_metrics``."""
    return list(self.kind_record.reported_metrics)

  def check_selectable(self) -> None:
    """Raises when the task has no dev data to select a model on.

    Default: the task's one ``--dev_file`` (NER, SWAG: ``self.dev``).

    Raises:
      errors.ParamsError: no dev examples (argument ``dev_file``).
    """
    if not getattr(self, "dev", None):
      raise errors.ParamsError("a search needs --dev_file (the dev set to select on)",
                               argument="dev_file")

  def select_by(self, metric: str, lowest: bool = False) -> "FineTuningTask":
    """A copy of this task whose run keeps ``best/`` by ``metric`` (lowest
    first with ``lowest``), so that the score of a search's trial, the model
    it reports and the one it exports are one checkpoint.

    Args:
      metric: one of :attr:`reported_metrics`.
      lowest: a lower value is better (a loss).

    Returns:
      the copy (this task unchanged).
    """
    new = copy.copy(self)
    new.best_metric = metric
    new.best_is_lowest = lowest
    return new

  def hold_out(self, fraction: float, seed: int) -> None:
    """Sets ``fraction`` of the training rows aside as the set to select on
    (in place); the dev set is kept for :meth:`dev_report_task`.

    Raises:
      NotImplementedError: the task cannot (:attr:`can_hold_out` False).
    """
    raise NotImplementedError("%s keeps no hold-out" % type(self).__name__)

  def dev_report_task(self) -> Optional["FineTuningTask"]:
    """After :meth:`hold_out`: a copy that evaluates on the untouched dev
    set (the search reports each kept model there); else None."""
    return None

  def _replan(self) -> None:
    """Plans the steps for the current ``params`` (:meth:`_plan_steps` of
    the same training rows)."""
    self._plan_steps(self.train_rows)

  def eval_at_steps(self) -> list:
    """The global steps at which each epoch ends (dev evaluation points;
    none without training or :attr:`train_rows`)."""
    if not self.do_train or not self.train_rows:
      return []
    return epoch_ends(self.train_rows, self.params.train_batch_size,
                      self.params.num_train_epochs, self.num_train_steps)

  def optimizer_spec(self) -> base.OptimizerSpec:
    p = self.params
    return base.OptimizerSpec(p.learning_rate, self.num_train_steps,
                              int(self.num_train_steps * p.warmup_proportion),
                              p.optimizer)

  def warmup_warning(self) -> Optional[str]:
    """The line printed before training with ``--optimizer=adamw_original``
    and a warm-up far below ~1/(1 - beta_2) = 1,000 steps (issue 42): the
    original's AdamWeightDecay has no bias correction, so its steps at the
    peak learning rate are several times Adam's, the cause of unstable and
    degenerate fine-tuning on small sets that Zhang et al. 2021 ("Revisiting
    Few-sample BERT Fine-tuning") and Mosbach et al. 2021 ("On the Stability
    of Fine-tuning BERT") report. It fires only below
    :data:`bert_tf.optimization.FINE_TUNING_RISK_WARMUP_STEPS` warm-up steps,
    the regime where our stability study measured that spread (with 33, 89
    and ~106 warm-up steps the original spread no more than ``adamw``).
    None otherwise."""
    spec = self.optimizer_spec()
    return optimization.short_warmup_warning(
        spec.name, spec.num_warmup_steps, "%d warm-up steps" % spec.num_warmup_steps,
        "which makes fine-tuning on small sets unstable (Zhang et al. 2021; "
        "Mosbach et al. 2021; here: the SQuAD slice's 12 warm-up steps spread "
        "its dev F1 over 13-31)", " for stable runs",
        at_risk_below=optimization.FINE_TUNING_RISK_WARMUP_STEPS)

  def load_weights(self, model, path: str) -> Optional[str]:
    """Loads ``--init_checkpoint`` ``path`` into ``model``; returns what was
    loaded (for the log)."""
    raise NotImplementedError

  def initialize(self, model):
    if self.params.init_checkpoint:
      return self.load_weights(model, self.params.init_checkpoint)
    if self.do_train:
      logging.warning("no --init_checkpoint: fine-tuning from random weights")
    return None

  def recorded_setting(self, key: str):
    """``key`` of the :attr:`run_config_file` that a finished run left in
    ``output_dir``, or None (no such file or key)."""
    path = os.path.join(self.params.output_dir, self.run_config_file)
    if not os.path.exists(path):
      return None
    with open(path, encoding="utf-8") as f:
      return json.load(f).get(key)

  def run_config(self) -> dict:
    """The settings written to :attr:`run_config_file` (what re-export and
    a prediction run need beside the checkpoint)."""
    raise NotImplementedError

  def tokenizer_settings(self) -> dict:
    """``do_lower_case``, ``preserve_unused_tokens``, ``max_seq_length``."""
    p = self.params
    return {"do_lower_case": p.do_lower_case,
            "preserve_unused_tokens": p.preserve_unused_tokens,
            "max_seq_length": p.max_seq_length}

  def write_run_files(self, output_dir: str) -> None:
    """``bert_config.json``, ``vocab.txt`` and :attr:`run_config_file`
    (:meth:`run_config` and ``lengths``: :meth:`lengths_setting`) beside
    the checkpoints, atomically."""
    self.config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    dst = os.path.join(output_dir, "vocab.txt")
    if os.path.abspath(self.vocab_file) != os.path.abspath(dst):
      with io_utils.atomic_output(dst) as tmp:
        shutil.copyfile(self.vocab_file, tmp)
    settings = dict(self.run_config(), lengths=self.lengths_setting())
    io_utils.atomic_write_text(os.path.join(output_dir, self.run_config_file),
                               json.dumps(settings, indent=2) + "\n")

  # --- training ----------------------------------------------------------

  def example_loss(self, loss, logits=None, labels=None):
    """``(loss, sums)`` of per-example losses float32 [B]: their sum divided
    by the global batch, and the counters ``loss_sum``, ``examples`` and,
    with ``logits`` [B, K] and int32 ``labels`` [B], ``correct`` (argmax ==
    label)."""
    sums = {"loss_sum": tf.reduce_sum(loss),
            "examples": tf.cast(tf.shape(loss)[0], tf.float32)}
    if logits is not None:
      sums["correct"] = tf.reduce_sum(tf.cast(
          tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32))
    return tf.reduce_sum(loss) / float(self.params.train_batch_size), sums

  def train_metrics(self, sums):
    """``loss`` (and ``accuracy`` with ``correct``) per example."""
    if not sums.get("examples"):
      return {}
    out = {"loss": sums["loss_sum"] / sums["examples"]}
    if "correct" in sums:
      out["accuracy"] = sums["correct"] / sums["examples"]
    return out
