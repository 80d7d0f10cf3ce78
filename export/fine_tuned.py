"""Rebuilds the model of a run directory from its own files, for export.

Every training job writes, beside its checkpoints (``ckpt-N``, a
``tf.train.Checkpoint(model=..., encoder=..., optimizer=...)``),
``bert_config.json`` and a file that says what the run is:

* ``run_classifier.py``: ``classifier_config.json`` (``task_name``,
  ``labels``, ``is_pair``, ``is_regression``; older runs lack the last two,
  then the task table decides) -> ``BertClassifier``;
* ``run_squad.py``: ``squad_config.json`` (windows, answer settings,
  ``version_2_with_negative``) -> ``BertQuestionAnswerer``;
* ``run_ner.py``: ``ner_config.json`` (``labels``, ``doc_stride``) ->
  ``BertTokenClassifier``;
* ``run_swag.py``: ``swag_config.json`` (``num_choices``) ->
  ``BertMultipleChoice``;
* ``run_pretraining.py``: no run config (``bert_config.json`` alone) ->
  the ``BertPretrainer``'s ``encoder``.

The fine-tuned runs also keep ``vocab.txt`` and the run config's
``do_lower_case``, ``max_seq_length`` (and ``preserve_unused_tokens``), and
the best dev model in ``best/`` when they evaluated. :func:`load_run` reads
a run back (the best model when kept, else the latest checkpoint) and
:func:`export_run` writes the export that fits it:

* ``classifier`` / ``squad`` / ``ner`` / ``swag``: the run's own model with
  its preprocessing (:func:`bert_tf.export.saved_model.export_classifier`,
  :func:`bert_tf.export.squad.export_squad`,
  :func:`bert_tf.export.tagging.export_tagger`,
  :func:`bert_tf.export.multiple_choice.export_multiple_choice`);
* ``preprocessor``, ``encoder`` (token ids in, TF Hub's split) and
  ``features`` (raw strings in, every layer out,
  :func:`bert_tf.export.features.export_encoder_all_layers`) from any run;
  a pretraining run has no vocab, so ``preprocessor`` and ``features`` need
  ``vocab_file``.

The same per-kind exporter serves every caller: :func:`export_model`
(``exporter(model, output_dir, export_dir) -> path``, the hook that
``bert_tf.jobs`` calls with the in-memory model of a live run or a search's
best trial: the run's files via :func:`read_run`, the model as given) and
:func:`export_run` (a re-export of :func:`load_run`'s rebuilt model). A run
carries the :class:`bert_tf.export.spec.ServingSpec` of its own kind, read
once from its settings file; the kinds, their settings files, model classes
and exports are :mod:`bert_tf.task_kinds`' records, and the format is one of
:data:`bert_tf.export.formats.FORMATS`.

:func:`load_fine_tuned` is the classifier-only reader kept for its callers.
``tools/export_saved_model.py`` is the command line.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Optional

import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import preprocessing
from bert_tf import run_dir
from bert_tf import task_kinds
from bert_tf.export import formats
from bert_tf.export import spec as spec_lib

RUN_CONFIG = run_dir.CLASSIFIER_CONFIG
BEST_DIR = run_dir.BEST_DIR

FineTunedDirError = errors.FineTunedDirError  # re-exported; defined in bert_tf.errors

PRETRAINING = run_dir.PRETRAINING
DEFAULT_PRETRAINING_SEQ = 128


def exports(kind: str) -> tuple:
  """What a run (or preset) of ``kind`` exports, its default first (the
  kind's record)."""
  return task_kinds.get(kind).exports


def whats() -> List[str]:
  """Every ``--what``: the kinds with a serving module."""
  return task_kinds.names(lambda k: bool(k.serving))


# Kept for callers that read the tables (each a view of the records).
EXPORTS = {k: exports(k) for k in task_kinds.names(lambda k: bool(k.exports))}
WHATS = tuple(whats())


@dataclasses.dataclass
class FineTuned:
  """A restored fine-tuned classifier run (:func:`load_fine_tuned`).

  Attributes:
    model: :class:`bert_tf.modeling.BertClassifier` with the checkpoint's weights.
    preprocessor: :class:`bert_tf.preprocessing.BertPreprocessor` (the run's
      vocab, casing and ``max_seq_length`` unless overridden).
    labels: label names (None for regression).
    task_name, is_pair, is_regression, checkpoint: as recorded / restored.
  """
  model: object
  preprocessor: object
  labels: list
  task_name: str
  is_pair: bool
  is_regression: bool
  checkpoint: str


@dataclasses.dataclass
class RunDir:
  """A restored run directory (or preset) of any kind (:func:`load_run`,
  :func:`bert_tf.export.from_preset.load_preset`).

  Attributes:
    output_dir: the run directory (or the preset).
    kind: a task kind name: ``classifier``, ``squad``, ``ner``, ``swag`` or
      ``pretraining``.
    config: the run's :class:`bert_tf.config.BertConfig`.
    run_config: the settings file's dict (empty for pretraining).
    model: the run's fine-tuned Keras model with the checkpoint's weights
      (None for pretraining).
    encoder: its :class:`bert_tf.modeling.BertEncoder` (for pretraining the
      checkpoint's ``encoder``).
    vocab_file: the run's ``vocab.txt`` (pretraining: the ``vocab_file``
      argument, may be None).
    do_lower_case, preserve_unused_tokens: the tokenizer's settings.
    max_seq_length: tokens per input (the run's, unless overridden).
    checkpoint: the checkpoint prefix read.
    spec: the :class:`ServingSpec` of the run's own export (None for a
      pretraining run, which has no head).
  """
  output_dir: str
  kind: str
  config: config_lib.BertConfig
  run_config: dict
  model: Optional[object]
  encoder: object
  vocab_file: Optional[str]
  do_lower_case: bool
  preserve_unused_tokens: bool
  max_seq_length: int
  checkpoint: Optional[str]
  spec: Optional[spec_lib.ServingSpec] = None

  @property
  def task_name(self) -> str:
    """The classifier's ``task_name``, else the run kind."""
    return self.run_config.get("task_name") or self.kind

  @property
  def tool(self) -> str:
    """The tool that writes runs of this kind (for messages)."""
    return task_kinds.get(self.kind).tool or "run_pretraining.py"

  def export_spec(self, what: str) -> spec_lib.ServingSpec:
    """The :class:`ServingSpec` of export ``what`` of this run: the run's
    own (its settings), or an encoder-level one (``preprocessor``,
    ``encoder``, ``features``) with the run's tokenizer and length."""
    if what == self.kind and self.spec is not None:
      return self.spec
    return spec_lib.ServingSpec.create(
        what, self.max_seq_length, do_lower_case=self.do_lower_case,
        preserve_unused_tokens=self.preserve_unused_tokens)

def run_kind(output_dir: str) -> str:
  """What kind of run ``output_dir`` holds, from its own files.

  Returns:
    ``classifier``, ``squad``, ``ner`` or ``swag`` (by the run config file
    beside ``bert_config.json``), else ``pretraining``.

  Raises:
    FineTunedDirError: no ``bert_config.json`` (or no such directory), or
      more than one run config.
  """
  if not os.path.exists(os.path.join(output_dir, "bert_config.json")):
    raise FineTunedDirError(
        "%s: missing bert_config.json (not the --output_dir of run_classifier.py, "
        "run_squad.py, run_ner.py, run_swag.py or run_pretraining.py?)" % output_dir,
        argument="output_dir")
  kinds = run_dir.run_kinds(output_dir)
  if len(kinds) > 1:
    raise FineTunedDirError("%s holds the run configs of several runs (%s): use one "
                            "--output_dir per run" % (output_dir, ", ".join(
                                task_kinds.get(k).settings_file for k in kinds)),
                            argument="output_dir")
  return kinds[0] if kinds else PRETRAINING


def _read_json(path: str) -> dict:
  return io_utils.read_json_object(path, FineTunedDirError)


def _checkpoint(output_dir: str, checkpoint: Optional[str]) -> str:
  """The checkpoint to read: ``checkpoint``, else ``best/``'s, else the latest."""
  ckpt = checkpoint or run_dir.model_checkpoint(output_dir)
  if not ckpt:
    raise FineTunedDirError("%s: no checkpoint (ckpt-N.index) found" % output_dir)
  if not tf.io.gfile.exists(ckpt + ".index"):
    raise FineTunedDirError("--checkpoint %s: no such checkpoint (%s.index)" %
                            (ckpt, ckpt), argument="checkpoint")
  return ckpt


def _restore(ckpt: str, what: str, **objects) -> None:
  """Reads ``objects`` from ``ckpt``; every variable must be found
  (:func:`bert_tf.checkpoints.restore_object_checkpoint`: a cut file is
  told from a checkpoint that does not fit)."""
  try:
    checkpoints.restore_object_checkpoint(ckpt, what, **objects)
  except errors.CorruptCheckpointError:
    raise
  except errors.CheckpointError as e:
    cause = e.__cause__ or e.__context__ or e
    raise FineTunedDirError("checkpoint %s does not fit %s: %s" % (
        ckpt, what, errors.first_line(cause)[:300])) from None


def _task_shape(run, path):
  """``(is_pair, is_regression)`` from the run config, else from the task table."""
  is_pair, is_regression = run.get("is_pair"), run.get("is_regression")
  if is_pair is None or is_regression is None:
    from bert_tf.data import classifier_data  # pylint: disable=g-import-not-at-top
    try:
      task = classifier_data.get_task(run["task_name"])
    except (classifier_data.TaskError, KeyError) as e:
      raise FineTunedDirError(
          "%s: cannot tell whether task %r takes pairs (%s); add \"is_pair\" "
          "and \"is_regression\" to it" % (path, run.get("task_name"), e)) from e
    if is_pair is None:
      is_pair = task.is_pair
    if is_regression is None:
      is_regression = bool(getattr(task, "is_regression", False))
  return bool(is_pair), bool(is_regression)


def _labels(run_config: dict, path: str) -> List[str]:
  labels = run_config.get("labels")
  if not isinstance(labels, list) or not labels:
    raise FineTunedDirError("%s: no \"labels\" list" % path)
  return [str(l) for l in labels]


def _sequence_length(value: Optional[int], config: config_lib.BertConfig) -> int:
  seq = int(value)
  if not 3 <= seq <= config.max_position_embeddings:
    raise FineTunedDirError("--max_seq_length %d: must be in [3, %d]" %
                            (seq, config.max_position_embeddings),
                            argument="max_seq_length")
  return seq


def read_run(output_dir: str, max_seq_length: Optional[int] = None,
             vocab_file: Optional[str] = None,
             do_lower_case: Optional[bool] = None) -> RunDir:
  """A run directory's files without its weights: what an export of the
  run's model needs beside the model (kind, configs, tokenizer, length).

  Args:
    output_dir, max_seq_length, vocab_file, do_lower_case: as :func:`load_run`.

  Returns:
    :class:`RunDir` with ``model``, ``encoder`` and ``checkpoint`` None.

  Raises:
    FineTunedDirError, ConfigError: as :func:`load_run`, except the
      checkpoint checks.
  """
  kind = run_kind(output_dir)
  config = config_lib.BertConfig.from_json_file(
      os.path.join(output_dir, run_dir.BERT_CONFIG))
  if kind == PRETRAINING:
    if vocab_file is not None and not os.path.exists(vocab_file):
      raise FineTunedDirError("--vocab_file %s: no such file" % vocab_file,
                              argument="vocab_file")
    seq = _sequence_length(max_seq_length or min(DEFAULT_PRETRAINING_SEQ,
                                                 config.max_position_embeddings),
                           config)
    return RunDir(output_dir, kind, config, {}, None, None, vocab_file,
                  True if do_lower_case is None else bool(do_lower_case), False,
                  seq, None)
  name, tool = task_kinds.get(kind).settings_file, task_kinds.get(kind).tool
  path = os.path.join(output_dir, name)
  run_config = _read_json(path)
  own_vocab = os.path.join(output_dir, run_dir.VOCAB)
  if not os.path.exists(own_vocab):
    raise FineTunedDirError("%s: missing vocab.txt (not a %s --output_dir?)" % (
        output_dir, tool))
  for flag, value in (("vocab_file", vocab_file), ("do_lower_case", do_lower_case)):
    if value is not None:
      raise FineTunedDirError(
          "--%s is for run_pretraining.py runs; %s is a %s run and uses its own "
          "vocab.txt and %s" % (flag, output_dir, tool, name), argument=flag)
  seq = _sequence_length(max_seq_length or run_config.get("max_seq_length", 128), config)
  if kind == "classifier":
    is_pair, is_regression = _task_shape(run_config, path)
    run_config = dict(run_config, is_pair=is_pair, is_regression=is_regression)
  if kind in ("classifier", "ner") and not run_config.get("is_regression"):
    _labels(run_config, path)
  lower = bool(run_config.get("do_lower_case", True))
  unused = bool(run_config.get("preserve_unused_tokens", False))
  try:
    spec = spec_lib.ServingSpec.from_run_config(kind, run_config, seq, lower, unused)
  except spec_lib.SpecError as e:
    raise FineTunedDirError("%s: %s" % (path, e)) from None
  return RunDir(output_dir, kind, config, run_config, None, None, own_vocab, lower,
                unused, seq, None, spec)


def load_run(output_dir: str, checkpoint: Optional[str] = None,
             max_seq_length: Optional[int] = None, vocab_file: Optional[str] = None,
             do_lower_case: Optional[bool] = None) -> RunDir:
  """Restores the model of any run directory (see the module doc).

  Args:
    output_dir: the run's ``--output_dir``.
    checkpoint: a checkpoint prefix (``.../ckpt-N``); default the best dev
      model (``output_dir/best/``) when there is one, else the latest
      checkpoint in ``output_dir`` (:func:`bert_tf.run_dir.model_checkpoint`).
    max_seq_length: overrides the run's ``max_seq_length`` (3 ..
      ``max_position_embeddings``; a pretraining run records none: default
      128, capped at ``max_position_embeddings``).
    vocab_file, do_lower_case: the tokenizer of a pretraining run (it keeps
      no ``vocab.txt``); a fine-tuned run uses its own, and these must be
      None.

  Returns:
    :class:`RunDir`.

  Raises:
    FineTunedDirError: a missing or unreadable file, no checkpoint, a
      checkpoint that does not fit the run's model, a bad
      ``max_seq_length``, or ``vocab_file`` / ``do_lower_case`` for a run
      that records its own (the message names the file or flag).
    ConfigError: a bad ``bert_config.json``.
  """
  run_kind(output_dir)
  config_lib.BertConfig.from_json_file(os.path.join(output_dir, run_dir.BERT_CONFIG))
  ckpt = _checkpoint(output_dir, checkpoint)  # no checkpoint: said before the rest
  run = read_run(output_dir, max_seq_length, vocab_file, do_lower_case)
  if run.kind == PRETRAINING:
    encoder = task_kinds.get("encoder").attribute("model_class")(run.config, name="bert")
    _restore(ckpt, "the encoder of %s (bert_config.json)" % output_dir, encoder=encoder)
    return dataclasses.replace(run, encoder=encoder, checkpoint=ckpt)
  model = _build_model(run)
  _restore(ckpt, "the %s model of %s (bert_config.json, %s)" % (
      run.kind, output_dir, task_kinds.get(run.kind).settings_file), model=model)
  return dataclasses.replace(run, model=model, encoder=model.encoder, checkpoint=ckpt)


def _build_model(run: RunDir):
  """The fine-tuned Keras model a run of ``run.kind`` trains (fresh weights):
  the kind's model class built from the run's settings
  (:meth:`bert_tf.modeling.task_model.TaskModel.from_run_settings`)."""
  cls = task_kinds.get(run.kind).attribute("model_class")
  return cls.from_run_settings(run.config, run.run_config)


def with_model(run: RunDir, model) -> RunDir:
  """``run`` holding ``model`` (an in-memory model of the run's kind; for a
  pretraining run a ``BertPretrainer`` or its ``BertEncoder``)."""
  if run.kind == PRETRAINING:
    return dataclasses.replace(run, encoder=getattr(model, "encoder", model))
  return dataclasses.replace(run, model=model, encoder=model.encoder)


def run_preprocessor(run: RunDir) -> preprocessing.BertPreprocessor:
  """The run's :class:`BertPreprocessor` (vocab, casing, ``max_seq_length``).

  Raises:
    FineTunedDirError: a pretraining run without ``vocab_file``.
  """
  if not run.vocab_file:
    raise FineTunedDirError(
        "--vocab_file is required: %s is a run_pretraining.py run and keeps no "
        "vocab.txt" % run.output_dir, argument="vocab_file")
  kwargs = {}
  if run.preserve_unused_tokens:
    kwargs["preserve_unused_tokens"] = True
  return preprocessing.BertPreprocessor(run.vocab_file, run.do_lower_case,
                                        run.max_seq_length, **kwargs)


def export_run(run: RunDir, what: Optional[str], export_dir: str,
               version: Optional[int] = None, xla: bool = False,
               dtype: str = "float32", *, format: str = "saved_model",  # pylint: disable=redefined-builtin
               quantize: str = "none", **options) -> str:
  """Writes ``export_dir/<version>/`` for ``run``; returns its path.

  Args:
    run: :func:`load_run`'s result (or :func:`with_model`'s, or a preset's).
    what: a kind the run exports (:func:`exports`), or None for the run's
      own model (a pretraining run: ``encoder``).
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    version: integer version; default the next free one.
    xla: a classifier SavedModel whose model body is XLA-compiled on
      bucketed shapes (:class:`bert_tf.export.serving.GraphOps`).
    dtype: a classifier SavedModel's compute dtype, ``float32`` (default)
      or ``bfloat16``.
    format: one of :data:`bert_tf.export.formats.FORMATS` (``saved_model``;
      ``litert``: ``model.tflite`` with the tokenizer inside,
      :mod:`bert_tf.export.litert`).
    quantize: the ``litert`` and ``mediapipe`` formats' weights: ``none``,
      ``dynamic_int8``, ``float16``.
    **options: the format's other options (:func:`bert_tf.export.formats.check`;
      ``mediapipe``: ``embedding``, ``dynamic_length``).

  Returns:
    the path of the version directory (written under a temporary name and
    renamed when whole).

  Raises:
    FineTunedDirError: ``what`` does not fit the run, a pretraining run's
      ``preprocessor`` / ``features`` without a vocab; FormatError (a
      FineTunedDirError): an option the format or the kind does not take
      (before any work). FileExistsError: that version already exists.
    ValueError / bert_tf.errors.BertTfError: the exporter's checks (lengths).
  """
  formats.get(format)
  allowed = exports(run.kind)
  what = what or allowed[0]
  if what not in allowed:
    raise FineTunedDirError(
        "--what=%s: %s is a %s run; it exports as %s" % (
            what, run.output_dir, run.tool, ", ".join(allowed)), argument="what")
  formats.check(format, what, xla=xla, dtype=dtype, quantize=quantize, **options)
  serves = task_kinds.get(what).serves
  pre = None if what == "encoder" else run_preprocessor(run)
  model = {"model": run.model, "encoder": run.encoder, "text": None}[serves]
  return formats.write(format, run.export_spec(what), model, pre, export_dir, version,
                       xla=xla, dtype=dtype, quantize=quantize, **options)


def export_model(model, output_dir: str, export_dir: str, *,
                 format: str = "saved_model") -> str:  # pylint: disable=redefined-builtin
  """The export hook of every task and caller (a live run, a search's best
  trial): ``model``'s default export for the run in ``output_dir``.

  Builds what the export needs beside the model from the files the task
  wrote into ``output_dir`` before training (``<kind>_config.json``,
  ``bert_config.json``, ``vocab.txt``) and writes it as :func:`export_run`
  does for a re-export, so a live export and a re-export of the same
  weights are the same export.

  Args:
    model: the in-memory Keras model of the run's kind (the best one when
      the run kept one): ``BertClassifier``, ``BertQuestionAnswerer``,
      ``BertTokenClassifier``, ``BertMultipleChoice``; for a pretraining run
      a ``BertPretrainer`` or ``BertEncoder`` (exported as the encoder).
    output_dir: the run directory (its kind from
      :func:`bert_tf.run_dir.run_kinds`, else :data:`PRETRAINING`).
    export_dir: the export base directory; writes ``export_dir/<next version>/``.
    format: one of :data:`bert_tf.export.formats.FORMATS`.

  Returns:
    the written version path.

  Raises:
    FineTunedDirError: a missing or unreadable run file, an unknown ``format``.
    ValueError / bert_tf.errors.BertTfError: the exporter's checks.
  """
  return export_run(with_model(read_run(output_dir), model), None, export_dir,
                    format=format)


def load_fine_tuned(output_dir: str, checkpoint: Optional[str] = None,
                    max_seq_length: Optional[int] = None) -> FineTuned:
  """Restores the classifier of a ``run_classifier.py --output_dir``.

  Args:
    output_dir: the run's output directory.
    checkpoint: a checkpoint prefix (``.../ckpt-N``); default the best dev
      model (``output_dir/best/``, kept by ``run_classifier``) when there is
      one, else the latest checkpoint in ``output_dir``.
    max_seq_length: overrides the run's ``max_seq_length`` (int, 3 ..
      ``max_position_embeddings``).

  Returns:
    :class:`FineTuned`.

  Raises:
    FineTunedDirError: a file or checkpoint is missing (message names it),
      or ``max_seq_length`` is out of range.
  """
  for name in ("bert_config.json", "vocab.txt", RUN_CONFIG):
    if not os.path.exists(os.path.join(output_dir, name)):
      raise FineTunedDirError("%s: missing %s (not a run_classifier.py "
                              "--output_dir?)" % (output_dir, name))
  run = load_run(output_dir, checkpoint, max_seq_length)
  cfg = run.run_config
  labels = None if cfg["is_regression"] else _labels(cfg, output_dir)
  return FineTuned(run.model, run_preprocessor(run), labels, cfg.get("task_name", ""),
                   cfg["is_pair"], cfg["is_regression"], run.checkpoint)
