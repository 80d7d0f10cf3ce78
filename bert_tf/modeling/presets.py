"""``from_preset``: a bert_tf model built and loaded from a directory or file.

keras-hub's shape (``keras_hub/src/utils/preset_utils.py``:
``get_preset_loader`` -> ``KerasPresetLoader`` / ``TransformersPresetLoader``;
``Task.from_preset`` calls it once): one :class:`PresetLoader` class per
source, over the formats that :mod:`bert_tf.checkpoints` reads, tried in the
order of :data:`LOADERS`:

* :class:`KerasFileLoader`: a ``.keras`` file written by ``model.save``;
* :class:`HuggingFaceLoader`: a Hugging Face BERT directory (``config.json``
  + ``model.safetensors``, sharded safetensors, ``pytorch_model.bin`` or
  ``tf_model.h5``), also named ``hf://ORG/NAME[@REVISION]`` (the local
  Hugging Face cache, :func:`bert_tf.huggingface.resolve`);
* :class:`Tf1Loader`: an original google-research/bert directory
  (``bert_config.json`` + ``bert_model.ckpt.*``) or TF1 checkpoint prefix
  (also a fine-tuned ``model.ckpt-N``: its ``output_weights``/``output_bias``
  head is loaded);
* :class:`RunDirLoader`: one of ours: a run directory (``bert_config.json``
  + object checkpoints; ``best/`` is preferred when it holds one,
  :func:`bert_tf.run_dir.model_checkpoint`) or a checkpoint prefix.

A model class's ``from_preset`` calls :func:`get_preset_loader` once and
asks the loader for the config, the preprocessor (vocab, case, length), the
number of labels and the weights; what differs between model classes (which
head, under which names in each source) is a :class:`Task` that the model
module declares. This module never imports the model modules (``encoder.py``
and ``models.py`` import it).

The same loaders answer every other "what is at this path": a training
tool's ``--init_checkpoint`` (:func:`load_weights`; the config, vocab and
casing through :func:`bert_tf.tasks.fine_tuning.model_files`, the flags
overriding), ``extract_features.py`` and the converter. One rule for a run
directory: its model is ``best/``'s checkpoint when the run kept one, else
its newest (:func:`bert_tf.run_dir.model_checkpoint`), for
``from_preset(RUN)`` and ``--init_checkpoint=RUN`` alike; an original
release directory's is its ``bert_model.ckpt``.

Adding a source (the Hugging Face cache, ``tf_model.h5``) is one
:class:`PresetLoader` subclass with ``can_load``, ``config`` and
``load_into``, and one line in :data:`LOADERS`.
"""

import dataclasses
import json
import logging
import os
import zipfile
from typing import Any, Callable, List, Optional, Tuple

import keras
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import huggingface
from bert_tf import io_utils
from bert_tf import preprocessing
from bert_tf import run_dir
from bert_tf import task_kinds
from bert_tf.modeling import long_document

# from_preset(..., preprocessor=True) without a recorded length: the
# original run_classifier's --max_seq_length default (capped at the model's
# max_position_embeddings).
DEFAULT_MAX_SEQ_LENGTH = 128
# The prefix google-research/bert's released directories hold.
ORIGINAL_CHECKPOINT = "bert_model.ckpt"
# Names of a TF1 checkpoint that a model may lack (the pretraining heads, a
# fine-tuned classifier's output layer) when reading only its encoder.
TF1_ALLOW_MISSING = ("cls/", "output_")
# A classifier's constructor arguments for its windows, as presets record them.
WINDOW_FIELDS = ("window_pooling", "pool_logits")


def recorded_long_document(values):
  """A preset's recorded long-document settings (their dict, or a
  ``LongDocument``: a saved classifier's layer) as a
  :class:`bert_tf.modeling.long_document.LongDocument`; None for none or
  ``head`` (the original's packing, what a model without settings does).

  Raises:
    ParamsError: an unknown key.
  """
  values = preprocessing.long_document_dict(values)
  if not values or values.get("method", "head") == "head":
    return None
  return long_document.LongDocument.from_dict(values)


def encoder_of(model):
  """The :class:`BertEncoder` of ``model`` (itself for an encoder)."""
  return model if hasattr(model, "blocks") else model.encoder


def _encoder_names(model) -> list:
  return checkpoints.encoder_variables(encoder_of(model))


@dataclasses.dataclass(frozen=True)
class Task:
  """What a model class adds to the encoder, as each source names it.

  Loaders read it; model modules declare one per class (``models.py``,
  ``tagging.py``, ``multiple_choice.py``), so that a loader never imports
  them and a model class never branches on the source.

  Attributes:
    name: ``"encoder"``, ``"pretrainer"``, ``"classifier"``, ... (an
      encoder restores only the encoder from our checkpoints; every other
      task tries the whole model first, then the encoder).
    kind: the task kind (:mod:`bert_tf.task_kinds`: ``"classifier"``,
      ``"ner"``, ...) whose record names the run-settings file that records
      the labels (:attr:`run_config`) and the transformers classes of this
      head (:attr:`hf_architectures`); None for none.
    tf1_variables: ``model -> [(TF1 name, variable)]`` read from an original
      checkpoint (default: the encoder's).
    tf1_num_labels: a TF1 variable [N, H] whose N is the number of labels
      (``"output_weights"``), or None.
    load_tf1_head: ``(model, prefix) -> names loaded`` (a list or bool) run
      after ``tf1_variables`` (the original ``run_squad.py`` head), or None.
    hf_optional: Hugging Face names the encoder may lack (``"bert/pooler/"``
      for heads that do not read it).
    load_hf_head: ``(model, tensors) -> names loaded`` (a list or bool)
      loading the Hugging Face head when the directory has it, or None
      (``tensors``: :class:`bert_tf.huggingface.Tensors`, read once).
    hf_num_labels: a Hugging Face tensor [L] whose L is the number of labels
      (``"classifier.bias"``), or None.
    hf_head: the Hugging Face tensors of the head (named in the warning
      when a directory lacks them), or ``model -> names``.
    load_object_heads: ``(model, checkpoint prefix, source) -> names
      loaded``: the heads of one of our checkpoints whose whole model is
      not this class's (the pretraining heads of a pretraining run without
      next-sentence head), or None (the encoder only).
    head_name: the head in load messages (``"the SQuAD head"``).
    describe: ``(what, heads loaded, model) -> str``, the line a load
      reports (default: ``what`` and ``(with <head_name>)`` when the head
      was loaded).
  """
  name: str
  kind: Optional[str] = None
  tf1_variables: Callable[[Any], list] = _encoder_names
  tf1_num_labels: Optional[str] = None
  load_tf1_head: Optional[Callable[[Any, str], Any]] = None
  hf_optional: Tuple[str, ...] = ()
  load_hf_head: Optional[Callable[[Any, Any], Any]] = None
  hf_num_labels: Optional[str] = None
  hf_head: Any = ()
  load_object_heads: Optional[Callable[[Any, str, str], list]] = None
  head_name: str = ""
  describe: Optional[Callable[[str, Tuple[str, ...], Any], str]] = None

  def _kind(self) -> Optional[task_kinds.TaskKind]:
    return task_kinds.KINDS.get(self.kind) if self.kind else None

  @property
  def run_config(self) -> Optional[str]:
    """The settings file of a fine-tuning run of :attr:`kind` whose
    ``labels`` (``is_regression``: 1) give the number of labels
    (``classifier_config.json``), or None."""
    kind = self._kind()
    return kind.settings_file if kind is not None and kind.fine_tuning else None

  @property
  def hf_architectures(self) -> Tuple[str, ...]:
    """The transformers classes whose head this is (the kind record's):
    a directory of one of them without the head is an error, one of
    another class with the same tensor names (``classifier.*``) is refused."""
    kind = self._kind()
    return kind.hf_architectures if kind is not None else ()

  def report(self, what: str, heads, model) -> str:
    """The line a load reports (:attr:`describe`)."""
    heads = tuple(heads or ())
    if self.describe is not None:
      return self.describe(what, heads, model)
    return what + (" (with %s)" % self.head_name if heads and self.head_name else "")


ENCODER = Task("encoder", kind="encoder")
# Loaded.heads of a load that restored the whole model (every head).
WHOLE = ("*",)


@dataclasses.dataclass(frozen=True)
class Loaded:
  """What :meth:`PresetLoader.load_into` put into a model (transformers'
  ``output_loading_info`` shape: the report is data, the line is made from
  it).

  Attributes:
    what: the weights read (``"Hugging Face weights DIR/model.safetensors"``,
      ``"original TF1 checkpoint PREFIX"``, ``"checkpoint RUN/best/ckpt-1"``,
      ``".keras file PATH"``).
    heads: the head weights loaded beside the encoder (their names; ``WHOLE``
      for the whole model; empty: the encoder only).
  """
  what: str
  heads: Tuple[str, ...] = ()


def _head_names(result) -> Tuple[str, ...]:
  """A head loader's result (names, or a bool) as :attr:`Loaded.heads`."""
  if isinstance(result, (list, tuple)):
    return tuple(result)
  return ("head",) if result else ()


def _is_prefix(path: str) -> bool:
  return bool(tf.io.gfile.glob(path + ".index"))


def _read_json(path: str) -> Optional[dict]:
  """A run directory's settings file (None when it is not there)."""
  return io_utils.read_json_object(
      path, lambda message: errors.ConfigError("from_preset: " + message, argument="preset"),
      missing_ok=True)


def load_keras_file(path: str) -> keras.Model:
  """``keras.models.load_model(path, compile=False)`` with bad files named.

  Args:
    path: a ``.keras`` file.

  Returns:
    the bert_tf model it holds (an encoder or a model with an ``encoder``).

  Raises:
    CheckpointError: ``path`` is not a readable ``.keras`` archive (corrupt,
      truncated, another format) or holds a model that is not bert_tf's;
      one line naming the file and what went wrong.
  """
  try:
    model = keras.models.load_model(path, compile=False)
  except (ValueError, TypeError, KeyError, OSError, zipfile.BadZipFile,
          json.JSONDecodeError) as e:
    raise errors.CheckpointError(
        "%s is not a loadable .keras model of bert_tf (%s: %s)"
        % (path, type(e).__name__, errors.first_line(e, "no detail")[:300]),
        argument="preset") from None
  if not (hasattr(model, "blocks") or hasattr(getattr(model, "encoder", None), "blocks")):
    raise errors.CheckpointError(
        "%s holds a %s, not a bert_tf model (BertEncoder, BertClassifier, ...)"
        % (path, type(model).__name__), argument="preset")
  return model


def _copy(pairs_to, pairs_from, source):
  """Assigns named variables ``pairs_from`` into ``pairs_to`` (same names)."""
  src = dict(pairs_from)
  for name, var in pairs_to:
    value = src.get(name)
    if value is None or tuple(value.shape) != tuple(var.shape):
      raise errors.CheckpointError(
          "from_preset: %s does not fit the model at variable %s" % (source, name),
          argument="preset")
  for name, var in pairs_to:
    var.assign(src[name])


class PresetLoader:
  """One preset source: what a preset records and how its weights load.

  Built by :func:`get_preset_loader` once per ``from_preset`` call; caches
  what it reads (a ``.keras`` file is loaded at most once). A subclass
  implements :meth:`can_load`, :meth:`config` and :meth:`load_into`; the
  rest have defaults (no vocab, lower-casing, 128 tokens, labels unknown).

  Args:
    preset: the path given to ``from_preset`` (str or PathLike).

  Attributes:
    source: how messages name the preset (``from_preset('PATH')``;
      ``--init_checkpoint=PATH`` for a training tool's starting point).
    argument: the argument errors name (``preset``; ``init_checkpoint``).
    foreign_heads: ``"refuse"`` (``from_preset``: a Hugging Face head of
      another task under this head's tensor names is an error) or
      ``"skip"`` (a starting point: its encoder, the head initialized).
  """

  # What records the casing of recorded_do_lower_case (in messages).
  casing_record = "files"

  def __init__(self, preset):
    self.preset = os.fspath(preset)
    self.source = "from_preset(%r)" % self.preset
    # How a message that quotes the checkpoint's own path names its origin
    # ("--init_checkpoint: checkpoint 'DIR/ckpt-3' ...", not the path twice).
    self.origin = self.source
    self.argument = "preset"
    self.foreign_heads = "refuse"

  @classmethod
  def can_load(cls, path: str) -> bool:
    """True when ``path`` is a preset of this source."""
    raise NotImplementedError

  def config(self) -> config_lib.BertConfig:
    """The preset's own :class:`BertConfig`.

    Raises:
      ConfigError, CheckpointError: none recorded, or unreadable.
    """
    raise NotImplementedError

  def config_file(self) -> Optional[str]:
    """The file :meth:`config` reads (named when a ``--bert_config_file``
    disagrees), or None when the preset has none (then :meth:`config`
    raises). Default: the preset itself."""
    return self.preset

  def recorded_do_lower_case(self) -> Optional[bool]:
    """The casing the preset's own files record (a run's settings, a
    tokenizer, a saved preprocessor), or None when they record none
    (:meth:`do_lower_case` then guesses)."""
    return None

  def model_config(self, config=None) -> config_lib.BertConfig:
    """``config`` (a BertConfig or dict) when given, else :meth:`config`."""
    return config_lib.as_bert_config(config) if config is not None else self.config()

  def load_into(self, model, task: Task = ENCODER) -> Optional[Loaded]:
    """Loads the preset's weights into ``model`` (built: all weights exist).

    Args:
      model: an encoder, or a task model with an ``encoder``.
      task: the model class's :class:`Task` (which head, its names).

    Returns:
      :class:`Loaded` (a loader may return None: :func:`load_weights` then
      names the preset).

    Raises:
      CheckpointError: weights that do not fit the model, half a head,
        an unreadable file.
    """
    raise NotImplementedError

  def vocab_file(self) -> Optional[str]:
    """Where the preset's ``vocab.txt`` is (it may not exist), or None."""
    return None

  def do_lower_case(self) -> bool:
    """Whether the preset's tokenizer lower-cases (default True)."""
    return True

  def max_seq_length(self) -> int:
    """The sequence length the preset recorded, else 128 capped at the
    config's ``max_position_embeddings``."""
    return min(DEFAULT_MAX_SEQ_LENGTH, self.config().max_position_embeddings)

  def preserve_unused_tokens(self) -> bool:
    """Whether ``[unusedN]`` tokens are kept whole (default False)."""
    return False

  def num_labels(self, task: Task) -> Optional[int]:
    """The number of labels the preset was fine-tuned for with ``task``'s
    head, or None when unknown (no such head)."""
    return None

  def labels(self, task: Task) -> Optional[List[str]]:
    """The label names the preset records for ``task``'s head, or None."""
    return None

  def missing_labels_reason(self, task: Task) -> str:  # pylint: disable=unused-argument
    """Why :meth:`num_labels` is None, for the error a model class raises."""
    return "unknown number of labels"

  def build(self, factory: Callable, task: Task = ENCODER, config=None):
    """``factory(config)`` loaded with the preset's weights.

    Args:
      factory: ``BertConfig -> model`` whose weights all exist.
      task: the model class's :class:`Task`.
      config: a :class:`BertConfig` (or dict) that overrides the preset's.

    Returns:
      the model, weights loaded (task heads too when the preset has them).

    Raises:
      CheckpointError, ConfigError: see :meth:`config`, :meth:`load_into`.
    """
    model = factory(self.model_config(config))
    self.load_into(model, task)
    return model

  def check_max_seq_length(self, max_seq_length: Optional[int], config=None) -> None:
    """Refuses a ``from_preset(..., max_seq_length=N)`` the model cannot take.

    Raises:
      errors.ParamsError: N < 3 or above the config's
        ``max_position_embeddings`` (one line naming both).
    """
    if max_seq_length is None:
      return
    limit = self.model_config(config).max_position_embeddings
    if not 3 <= int(max_seq_length) <= limit:
      raise errors.ParamsError(
          "from_preset(%r, max_seq_length=%d): the model takes 3 to %d tokens "
          "(max_position_embeddings %d)" % (self.preset, max_seq_length, limit, limit),
          argument="max_seq_length")

  def preprocessor(self, preprocessor, max_seq_length: Optional[int] = None):
    """The preprocessor a task model built by ``from_preset`` carries.

    Args:
      preprocessor: None or False (none: the model takes ids only); a
        :class:`bert_tf.preprocessing.BertPreprocessor` or
        ``PreprocessorLayer`` (returned as is); True: the preset's own:
        :meth:`vocab_file` with :meth:`do_lower_case`,
        :meth:`max_seq_length` and :meth:`preserve_unused_tokens` (a
        ``.keras`` model's own preprocessor).
      max_seq_length: with True, the preprocessor's length instead of
        :meth:`max_seq_length` (3 .. ``max_position_embeddings``).

    Returns:
      a ``BertPreprocessor`` (or the layer given), or None.

    Raises:
      errors.ConfigError: True and the preset has no vocab (naming where it
        looked) or is a ``.keras`` model without a preprocessor.
      errors.ParamsError: ``max_seq_length`` out of range, or given without
        ``preprocessor=True``.
    """
    if max_seq_length is not None and preprocessor is not True:
      raise errors.ParamsError(
          "from_preset(%r, max_seq_length=%d) sets the length of the preset's own "
          "preprocessor: pass preprocessor=True too" % (self.preset, max_seq_length),
          argument="max_seq_length")
    if preprocessor is None or preprocessor is False:
      return None
    if preprocessor is not True:
      return preprocessor
    self.check_max_seq_length(max_seq_length)
    vocab = self.vocab_file()
    if vocab is None or not os.path.exists(vocab):
      raise errors.ConfigError(
          "from_preset(%r, preprocessor=True): no vocab.txt at %s; pass "
          "preprocessor=BertPreprocessor(vocab_file, do_lower_case, max_seq_length)"
          % (self.preset, vocab or self.preset), argument="preprocessor")
    return preprocessing.BertPreprocessor(
        vocab, self.do_lower_case(), max_seq_length or self.max_seq_length(),
        preserve_unused_tokens=self.preserve_unused_tokens())

  def problem_type(self, task: Task) -> Optional[str]:  # pylint: disable=unused-argument
    """A classifier preset's ``problem_type`` (``single_label_classification``,
    ``multi_label_classification``, ``regression``), or None when not recorded."""
    return None

  def long_document(self, task: Task):  # pylint: disable=unused-argument
    """How the preset's classifier reads a text longer than one window: a
    :class:`bert_tf.modeling.long_document.LongDocument` (as recorded, not
    resolved), or None (none recorded, or ``head``: the original's)."""
    return None

  def window_settings(self, task: Task) -> dict:  # pylint: disable=unused-argument
    """The classifier's recorded :data:`WINDOW_FIELDS` (``window_pooling``
    str, ``pool_logits`` bool), those the preset records (default none)."""
    return {}


class KerasFileLoader(PresetLoader):
  """A ``.keras`` file of any bert_tf model (``model.save``).

  The whole model when the file holds the same class with the same weight
  shapes, else its encoder (by the original variable names). The config,
  number of labels and preprocessor are the saved model's.
  """

  casing_record = ".keras preprocessor"

  def __init__(self, preset):
    super().__init__(preset)
    self._model = None

  @classmethod
  def can_load(cls, path: str) -> bool:
    """A ``.keras`` file."""
    return path.endswith(".keras") and os.path.isfile(path)

  def keras_model(self) -> keras.Model:
    """The saved model, loaded once (:func:`load_keras_file`; its errors)."""
    if self._model is None:
      self._model = load_keras_file(self.preset)
    return self._model

  def config(self) -> config_lib.BertConfig:
    """The saved model's config."""
    return self.keras_model().config

  def _saved_preprocessor(self) -> Optional[preprocessing.BertPreprocessor]:
    layer = getattr(self.keras_model(), "preprocessor", None)
    return None if layer is None else layer.bert_preprocessor

  def vocab_file(self) -> Optional[str]:
    """The saved preprocessor's vocab file (None: none, or held inline)."""
    pre = self._saved_preprocessor()
    return None if pre is None else pre.vocab_file

  def do_lower_case(self) -> bool:
    """The saved preprocessor's (True without one)."""
    pre = self._saved_preprocessor()
    return True if pre is None else pre.do_lower_case

  def max_seq_length(self) -> int:
    """The saved preprocessor's, else the default."""
    pre = self._saved_preprocessor()
    return super().max_seq_length() if pre is None else pre.max_seq_length

  def preserve_unused_tokens(self) -> bool:
    """The saved preprocessor's (False without one)."""
    pre = self._saved_preprocessor()
    return False if pre is None else pre.preserve_unused_tokens

  def recorded_do_lower_case(self) -> Optional[bool]:
    """The saved preprocessor's casing (None without one)."""
    pre = self._saved_preprocessor()
    return None if pre is None else pre.do_lower_case

  def num_labels(self, task: Task) -> Optional[int]:
    """The saved model's ``num_labels`` (None for a model without one)."""
    return getattr(self.keras_model(), "num_labels", None)

  def preprocessor(self, preprocessor, max_seq_length: Optional[int] = None):
    """As :meth:`PresetLoader.preprocessor`; True: the saved model's own
    ``BertPreprocessor`` (the same object; with ``max_seq_length``, one of
    that length over the same vocabulary).

    Raises:
      errors.ConfigError: True and the saved model has no preprocessor.
      errors.ParamsError: ``max_seq_length`` out of range.
    """
    if preprocessor is not True:
      return super().preprocessor(preprocessor, max_seq_length)
    saved = self._saved_preprocessor()
    if saved is None:
      raise errors.ConfigError(
          "from_preset(%r, preprocessor=True): the .keras model has no "
          "preprocessor; pass preprocessor=BertPreprocessor(vocab_file, "
          "do_lower_case, max_seq_length)" % self.preset, argument="preprocessor")
    if max_seq_length is None or max_seq_length == saved.max_seq_length:
      return saved
    self.check_max_seq_length(max_seq_length)
    return preprocessing.BertPreprocessor(
        saved.vocab_lines(), saved.do_lower_case, max_seq_length,
        preserve_unused_tokens=saved.preserve_unused_tokens)

  def labels(self, task: Task) -> Optional[List[str]]:
    """The saved model's label names (``label_names``), or None."""
    return getattr(self.keras_model(), "label_names", None)

  def problem_type(self, task: Task) -> Optional[str]:
    """The saved classifier's ``problem_type``, or None."""
    return getattr(self.keras_model(), "problem_type", None)

  def long_document(self, task: Task):
    """The saved preprocessor's settings (its config's ``long_document``)."""
    layer = getattr(self.keras_model(), "preprocessor", None)
    return recorded_long_document(getattr(layer, "long_document", None))

  def window_settings(self, task: Task) -> dict:
    """The saved classifier's ``window_pooling`` and ``pool_logits``."""
    saved = self.keras_model()
    return {k: getattr(saved, k) for k in WINDOW_FIELDS if hasattr(saved, k)}

  def load_into(self, model, task: Task = ENCODER) -> Loaded:
    """Every weight when the saved model is of ``model``'s class and shapes,
    else the encoder's (a classifier file into an encoder or pretrainer)."""
    saved = self.keras_model()
    what = ".keras file %s" % self.preset
    same = type(saved) is type(model) and [w.shape for w in saved.weights] == [
        w.shape for w in model.weights]
    if same:
      for dst, src in zip(model.weights, saved.weights):
        dst.assign(src)
      return Loaded(what, WHOLE)
    _copy(checkpoints.encoder_variables(encoder_of(model)),
          checkpoints.encoder_variables(encoder_of(saved)), self.preset)
    return Loaded(what)


class HuggingFaceLoader(PresetLoader):
  """A Hugging Face BERT directory, or ``hf://ORG/NAME[@REVISION]`` in the
  local cache (what transformers 4.x / 5.x and sentence-transformers write:
  ``BertModel``, ``BertFor*``; weights as :func:`bert_tf.huggingface.read_tensors`
  reads them).

  The encoder, and the task's head when the directory has it
  (:attr:`Task.load_hf_head`); ``num_labels``, label names
  (``id2label``) and ``problem_type`` from ``config.json``; the tokenizer
  from ``vocab.txt`` or ``tokenizer.json`` (:func:`bert_tf.huggingface.read_tokenizer`).
  A head the directory lacks is never initialized silently: an error when
  ``config.json``'s ``architectures`` says the directory is that task's
  fine-tuned model; one warning line naming the missing tensors for another
  task's fine-tuned model (or a pretraining directory missing one of its two
  heads); one info line for a pretrained encoder (``BertModel``,
  ``BertForPreTraining``), where fine-tuning starts.
  """

  casing_record = "tokenizer"

  def __init__(self, preset):
    super().__init__(preset)
    self.name = self.preset
    self.preset = huggingface.resolve(self.preset)
    self._config = None
    self._hf_config = None
    self._tensors = None
    self._tokenizer = False

  @classmethod
  def can_load(cls, path: str) -> bool:
    """:func:`bert_tf.checkpoints.is_hf_dir` (``hf://`` names included)."""
    return checkpoints.is_hf_dir(path)

  def config(self) -> config_lib.BertConfig:
    """``config.json`` as a BertConfig (:func:`checkpoints.read_hf_config`)."""
    if self._config is None:
      self._config = checkpoints.read_hf_config(self.preset)
    return self._config

  def hf_config(self) -> dict:
    """``config.json`` as transformers wrote it."""
    if self._hf_config is None:
      self._hf_config = huggingface.read_config(self.preset)
    return self._hf_config

  def architecture(self) -> Optional[str]:
    """``config.json``'s first ``architectures`` entry, or None."""
    return huggingface.architecture(self.hf_config())

  def head_tensors(self) -> huggingface.Tensors:
    """The directory's tensors by transformers name: the weight file opened
    once per loader (:func:`bert_tf.huggingface.read_tensors`; a safetensors
    tensor is read when asked for), shared by the label count, the
    architecture check, the encoder and the head."""
    if self._tensors is None:
      self._tensors = checkpoints.read_hf_tensors(self.preset)[0]
    return self._tensors

  def tokenizer(self) -> Optional[huggingface.Tokenizer]:
    """:func:`bert_tf.huggingface.read_tokenizer` of the directory (once)."""
    if self._tokenizer is False:
      self._tokenizer = huggingface.read_tokenizer(self.preset)
    return self._tokenizer

  def vocab_file(self) -> str:
    """``DIR/vocab.txt``; without it ``tokenizer.json``'s vocab written out
    (:func:`bert_tf.huggingface.vocab_file`); ``DIR/vocab.txt`` (missing)
    when there is neither."""
    tok = self.tokenizer()
    if tok is None:
      return os.path.join(self.preset, run_dir.VOCAB)
    return huggingface.vocab_file(tok)

  def do_lower_case(self) -> bool:
    """The tokenizer's casing (``tokenizer.json``'s normalizer, else
    ``tokenizer_config.json``'s ``do_lower_case``; True without either)."""
    tok = self.tokenizer()
    return True if tok is None else tok.do_lower_case

  def recorded_do_lower_case(self) -> Optional[bool]:
    """The tokenizer's casing; None without a tokenizer."""
    tok = self.tokenizer()
    return None if tok is None else tok.do_lower_case

  def config_file(self) -> str:
    """``DIR/config.json``."""
    return os.path.join(self.preset, huggingface.CONFIG)

  def max_seq_length(self) -> int:
    """``config.json``'s ``bert_tf_max_seq_length`` (a classifier written
    with long-document settings resolved for it), else 128, capped at
    ``max_position_embeddings`` and ``model_max_length``."""
    recorded = self.hf_config().get(huggingface.MAX_SEQ_LENGTH_KEY)
    if isinstance(recorded, int) and not isinstance(recorded, bool):
      return recorded
    tok = self.tokenizer()
    n = super().max_seq_length()
    return min(n, tok.model_max_length) if tok and tok.model_max_length else n

  def _foreign_architecture(self, task: Task) -> Optional[task_kinds.TaskKind]:
    """The kind whose head the directory holds under ``task``'s head names
    when that is another task's (a ``BertForSequenceClassification``'s
    ``classifier.*`` for a token classifier), else None."""
    arch = self.architecture()
    kind = task_kinds.by_architecture(arch) if arch else None
    if not task.hf_architectures or kind is None:
      return None
    if arch in task.hf_architectures or kind.name == "encoder":
      return None
    if callable(task.hf_head) or not any(n in self.head_tensors() for n in task.hf_head):
      return None
    return kind

  def _check_architecture(self, task: Task) -> None:
    """Refuses a head of another task under the same tensor names (unless
    :attr:`foreign_heads` is ``"skip"``)."""
    kind = self._foreign_architecture(task)
    if kind is None or self.foreign_heads == "skip":
      return
    raise errors.CheckpointError(
        "%s: config.json says %s (a %s head); its %s is not this "
        "model's head: load it with %s.from_preset" % (
            self.source, self.architecture(), kind.name, ", ".join(task.hf_head),
            (kind.model_class or "").rsplit(":", 1)[-1]), argument=self.argument)

  def num_labels(self, task: Task) -> Optional[int]:
    """L of the head tensor :attr:`Task.hf_num_labels` [L], when present."""
    if task.hf_num_labels is None:
      return None
    self._check_architecture(task)
    bias = self.head_tensors().get(task.hf_num_labels)
    return None if bias is None else int(bias.shape[0])

  def labels(self, task: Task) -> Optional[List[str]]:
    """``config.json``'s ``id2label`` names in id order when the head exists
    and has as many (transformers writes ``LABEL_i`` defaults for every
    model: those are names too)."""
    n = self.num_labels(task)
    return None if n is None else huggingface.label_names(self.hf_config(), n)

  def problem_type(self, task: Task) -> Optional[str]:
    """``config.json``'s ``problem_type`` (transformers' default from the
    label count when unset), for a directory with the head."""
    n = self.num_labels(task)
    return None if n is None else huggingface.problem_type(self.hf_config(), n)

  def long_document(self, task: Task):
    """``config.json``'s ``bert_tf_long_document`` (what
    :func:`bert_tf.convert.to_transformers` writes), or None.

    Raises:
      CheckpointError: not an object; ParamsError: an unknown key.
    """
    return recorded_long_document(huggingface.long_document_settings(self.hf_config())[0])

  def window_settings(self, task: Task) -> dict:
    """``config.json``'s ``bert_tf_window_pooling`` / ``bert_tf_pool_logits``."""
    return huggingface.long_document_settings(self.hf_config())[1]

  def missing_labels_reason(self, task: Task) -> str:
    """The directory has no head tensor to count labels from."""
    return "no classifier head" if task.hf_num_labels else super().missing_labels_reason(task)

  def load_into(self, model, task: Task = ENCODER) -> Loaded:
    """The encoder (:attr:`Task.hf_optional` may be missing), then the head.

    Raises:
      CheckpointError: tensors that do not fit; a head of another task
        (:attr:`Task.hf_architectures`; with :attr:`foreign_heads` ``"skip"``
        the encoder alone is loaded and one line says so); ``config.json``'s
        architecture is this task's and the head is missing.
    """
    self._check_architecture(task)
    tensors = self.head_tensors()
    checkpoints.load_hf_weights(encoder_of(model), tensors, optional=task.hf_optional)
    what = "Hugging Face weights " + tensors.path
    foreign = self._foreign_architecture(task)
    if foreign is not None:
      logging.info("%s: config.json says %s (a %s head): this model's head starts "
                   "from a random init", self.source, self.architecture(), foreign.name)
      return Loaded(what)
    if task.load_hf_head is None:
      return Loaded(what)
    loaded = _head_names(task.load_hf_head(model, tensors))
    head = task.hf_head(model) if callable(task.hf_head) else task.hf_head
    missing = [n for n in head if n not in tensors]
    if missing:
      self._say_missing_head(task, missing, bool(loaded))
    return Loaded(what, loaded)

  def _say_missing_head(self, task: Task, missing: List[str], loaded: bool) -> None:
    """An error, a warning or an info line for head tensors the directory lacks.

    A pretrained encoder without the head is where fine-tuning starts (the
    line is informational, as transformers' "newly initialized" notice);
    another task's fine-tuned model without it is worth a warning.

    Raises:
      CheckpointError: ``config.json``'s architecture is this task's.
    """
    arch = self.architecture()
    path = self.head_tensors().path
    if arch in task.hf_architectures and not loaded:
      raise errors.CheckpointError(
          "%s: config.json says %s but %s has no %s" % (
              self.source, arch, path, ", ".join(missing)), argument=self.argument)
    kind = task_kinds.by_architecture(arch) if arch else None
    kind = kind.name if kind is not None else "encoder"
    log = logging.info if kind in ("encoder", "pretraining") and not loaded else logging.warning
    log("%s: %s has no %s (a %s): that head starts from a random init",
        self.source, path, ", ".join(missing), arch or "BertModel")


def _checkpoint_of(preset: str) -> Optional[Tuple[str, str]]:
  """``(checkpoint prefix, run directory)`` of a directory or prefix, or None.

  A directory: ``best/``'s checkpoint, else the original ``bert_model.ckpt``,
  else the newest; a prefix: itself, its run directory from
  :func:`bert_tf.run_dir.run_dir_of`.
  """
  if os.path.isdir(preset):
    original = os.path.join(preset, ORIGINAL_CHECKPOINT)
    if run_dir.best_checkpoint(preset) is None and _is_prefix(original):
      return original, preset
    prefix = run_dir.model_checkpoint(preset)
    return (prefix, preset) if prefix else None
  if _is_prefix(preset):
    return preset, run_dir.run_dir_of(preset)
  return None


class _CheckpointLoader(PresetLoader):
  """A checkpoint with ``bert_config.json``, ``vocab.txt`` and our run
  settings files looked for in its directory (both kinds of checkpoint)."""

  casing_record = "run directory"

  def __init__(self, preset):
    super().__init__(preset)
    self.checkpoint, self.run_dir = _checkpoint_of(self.preset)
    self._config = None
    self._settings = None

  def config_file(self) -> Optional[str]:
    """``RUN_DIR/bert_config.json``, or None when it is not there."""
    path = os.path.join(self.run_dir, run_dir.BERT_CONFIG)
    return path if os.path.exists(path) else None

  def config(self) -> config_lib.BertConfig:
    """``RUN_DIR/bert_config.json``.

    Raises:
      ConfigError: missing (pass ``config=``) or invalid.
    """
    if self._config is None:
      path = self.config_file()
      if path is None:
        raise errors.ConfigError(
            "from_preset: no bert_config.json beside %r; pass config=" % self.preset,
            argument="config")
      self._config = config_lib.BertConfig.from_json_file(path)
    return self._config

  def _recorded(self) -> dict:
    """The tokenizer settings the run's settings files record
    (:func:`bert_tf.run_dir.recorded_settings`; a pretraining run's too)."""
    if self._settings is None:
      self._settings = run_dir.recorded_settings(self.run_dir)
    return self._settings

  def vocab_file(self) -> str:
    """``RUN_DIR/vocab.txt``."""
    return os.path.join(self.run_dir, run_dir.VOCAB)

  def recorded_do_lower_case(self) -> Optional[bool]:
    """A run's recorded ``do_lower_case`` (None for an original release)."""
    return self._recorded().get("do_lower_case")

  def do_lower_case(self) -> bool:
    """A run's recorded ``do_lower_case``; else False for a directory named
    ``cased*`` / ``*_cased*`` / ``*-cased*`` (the released cased models)."""
    name = os.path.basename(os.path.normpath(self.run_dir))
    cased = name.startswith("cased") or "_cased" in name or "-cased" in name
    return self._recorded().get("do_lower_case", not cased)

  def max_seq_length(self) -> int:
    """A run's recorded ``max_seq_length``, else the default."""
    recorded = self._recorded().get("max_seq_length")
    return super().max_seq_length() if recorded is None else recorded

  def preserve_unused_tokens(self) -> bool:
    """A run's recorded ``preserve_unused_tokens`` (False)."""
    return self._recorded().get("preserve_unused_tokens", False)

  def _run_config(self, task: Task) -> Optional[dict]:
    if task.run_config is None:
      return None
    return _read_json(os.path.join(self.run_dir, task.run_config))

  def num_labels(self, task: Task) -> Optional[int]:
    """From the run's :attr:`Task.run_config` (``is_regression``: 1, else
    the number of ``labels``)."""
    recorded = self._run_config(task) or {}
    if recorded.get("is_regression"):
      return 1
    return len(recorded["labels"]) if recorded.get("labels") else None

  def labels(self, task: Task) -> Optional[List[str]]:
    """The run's :attr:`Task.run_config` ``labels``."""
    return (self._run_config(task) or {}).get("labels") or None

  def long_document(self, task: Task):
    """The run's :attr:`Task.run_config` ``long_document`` (``run_classifier
    --long_document``; ``classifier_config.json``)."""
    return recorded_long_document((self._run_config(task) or {}).get("long_document"))

  def window_settings(self, task: Task) -> dict:
    """The run's ``long_document``'s ``window_pooling`` (``--window_pooling``)."""
    recorded = (self._run_config(task) or {}).get("long_document") or {}
    return {"window_pooling": recorded["window_pooling"]} if "window_pooling" in recorded else {}


class Tf1Loader(_CheckpointLoader):
  """An original google-research/bert checkpoint, by variable name: a
  released directory (``bert_config.json`` + ``bert_model.ckpt``), a
  prefix, or an original fine-tuning run's ``model.ckpt-N`` (its
  ``output_weights``/``output_bias`` classifier head, its ``cls/squad``
  head)."""

  @classmethod
  def can_load(cls, path: str) -> bool:
    """A directory or prefix whose checkpoint holds ``bert/`` names."""
    found = _checkpoint_of(path)
    return found is not None and checkpoints.is_tf1_checkpoint(found[0])

  def num_labels(self, task: Task) -> Optional[int]:
    """As the run's settings, else N of :attr:`Task.tf1_num_labels` [N, H]."""
    n = super().num_labels(task)
    if n is None and task.tf1_num_labels:
      shape = checkpoints.tf1_variable_names(self.checkpoint).get(task.tf1_num_labels)
      n = int(shape[0]) if shape else None
    return n

  def load_into(self, model, task: Task = ENCODER) -> Loaded:
    """:attr:`Task.tf1_variables` (heads the checkpoint lacks keep their
    initialization), then :attr:`Task.load_tf1_head`."""
    named = task.tf1_variables(model)
    checkpoints.load_tf1_checkpoint(named, self.checkpoint, allow_missing=TF1_ALLOW_MISSING)
    present = checkpoints.tf1_variable_names(self.checkpoint)
    heads = [n for n, _ in named if not n.startswith("bert/") and n in present]
    if task.load_tf1_head is not None:
      heads += _head_names(task.load_tf1_head(model, self.checkpoint))
    return Loaded("original TF1 checkpoint " + self.checkpoint, tuple(heads))


class RunDirLoader(_CheckpointLoader):
  """One of our runs: a run directory (its model checkpoint by
  :func:`bert_tf.run_dir.model_checkpoint`: ``best/`` else the newest) or
  an object checkpoint prefix. The whole model when the checkpoint is this
  task's, else its encoder (a pretraining run or another task's)."""

  @classmethod
  def can_load(cls, path: str) -> bool:
    """A directory or prefix with a checkpoint that is not a TF1 one."""
    found = _checkpoint_of(path)
    return found is not None and not checkpoints.is_tf1_checkpoint(found[0])

  def load_into(self, model, task: Task = ENCODER) -> Loaded:
    """:func:`checkpoints.restore_object_checkpoint` of ``model=`` (strict:
    the whole model); else ``encoder=`` (a partial restore: the checkpoint
    is another model's) and the heads :attr:`Task.load_object_heads` finds."""
    if task.name != ENCODER.name:
      try:
        return Loaded("checkpoint " + checkpoints.restore_object_checkpoint(
            self.checkpoint, self.origin, model=model), WHOLE)
      except errors.CorruptCheckpointError:
        raise
      except errors.CheckpointError:
        pass  # e.g. a pretraining checkpoint for a classifier: encoder only
    what = "checkpoint " + checkpoints.restore_object_checkpoint(
        self.checkpoint, self.origin, encoder=encoder_of(model))
    heads = ()
    if task.load_object_heads is not None:
      heads = tuple(task.load_object_heads(model, self.checkpoint, self.source))
    return Loaded(what, heads)


# Tried in order; the first whose can_load(path) is true reads the preset.
# Tf1Loader precedes RunDirLoader: a directory with bert_model.ckpt is the
# original release even when other checkpoints sit beside it.
LOADERS: List[type] = [KerasFileLoader, HuggingFaceLoader, Tf1Loader, RunDirLoader]


def get_preset_loader(preset, source: str = "from_preset") -> PresetLoader:
  """The loader of ``preset``: the first class of :data:`LOADERS` that can
  load it, instantiated once (it caches what it reads). The one answer to
  "what is at this path" for ``from_preset``, every training tool's
  ``--init_checkpoint`` (:func:`load_weights`), ``extract_features.py`` and
  the converter.

  A run directory's model is its checkpoint by the one best-or-latest rule
  (:func:`bert_tf.run_dir.model_checkpoint`: ``best/`` when the run kept
  one, else the newest); an original release directory's is its
  ``bert_model.ckpt``.

  Args:
    preset: a path (str or PathLike; see the module docstring).
    source: how errors name it: ``"from_preset"`` (argument ``preset``) or
      a flag (``"--init_checkpoint"``: argument ``init_checkpoint``, and the
      loader's messages say ``--init_checkpoint=PATH``).

  Returns:
    a :class:`PresetLoader`.

  Raises:
    CheckpointError: nothing loadable at ``preset`` (a directory without a
      model; a path that does not exist).
  """
  preset = os.fspath(preset)
  argument = source[2:] if source.startswith("--") else "preset"
  if preset.startswith(huggingface.SCHEME):
    snapshot = huggingface.resolve(preset)  # an uncached repo: its one line
    if not HuggingFaceLoader.can_load(snapshot):
      raise errors.CheckpointError(
          "%s: %s: the cached snapshot %s holds no Hugging Face BERT model "
          "(config.json and one of %s)" % (source, preset, snapshot,
                                           ", ".join(huggingface.WEIGHT_FILES)),
          argument=argument)
  for loader_class in LOADERS:
    if loader_class.can_load(preset):
      loader = loader_class(preset)
      if source != "from_preset":
        loader.source, loader.argument = "%s=%s" % (source, preset), argument
        loader.origin = source
      return loader
  if os.path.isdir(preset):
    raise errors.CheckpointError(
        "%s: %r holds no model: expected a Hugging Face directory "
        "(config.json + model.safetensors), bert_config.json + "
        "bert_model.ckpt, or bert_config.json + our checkpoints" % (source, preset),
        argument=argument)
  raise errors.CheckpointError("%s: %r does not exist" % (source, preset),
                               argument=argument)


# The config fields that decide the weights' shapes.
ARCHITECTURE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                       "num_attention_heads", "intermediate_size",
                       "max_position_embeddings", "type_vocab_size")


def check_config_matches(loader: PresetLoader, config: config_lib.BertConfig,
                         config_file: Optional[str]) -> None:
  """Refuses a ``--bert_config_file`` whose architecture differs from the
  config that comes with the preset (:meth:`PresetLoader.config_file`: a
  Hugging Face directory's ``config.json``, the ``bert_config.json`` of a
  run or release directory); nothing to compare when it has none.

  Raises:
    CheckpointError: one line naming both files and each differing field
      (:data:`ARCHITECTURE_FIELDS`) with both values.
  """
  path = loader.config_file()
  if path is None or os.path.abspath(path) == os.path.abspath(config_file or ""):
    return
  a, b = loader.config().to_dict(), config.to_dict()
  diff = [k for k in ARCHITECTURE_FIELDS if a.get(k) != b.get(k)]
  if not diff:
    return
  raise errors.CheckpointError(
      "%s comes with %s (%s) but --bert_config_file %s has %s: drop "
      "--bert_config_file to use the checkpoint's, or start from a matching checkpoint"
      % (loader.source, path, ", ".join("%s=%s" % (k, a.get(k)) for k in diff),
         config_file, ", ".join("%s=%s" % (k, b.get(k)) for k in diff)),
      argument=loader.argument)


def load_weights(model, preset, task: Optional[Task] = None,
                 source: str = "--init_checkpoint") -> str:
  """Initializes a built model from any preset: the starting point of every
  training tool (``--init_checkpoint``) and of ``extract_features.py``.

  The same loader and rule as ``from_preset`` (:func:`get_preset_loader`:
  a run directory's ``best/`` when kept, else its newest checkpoint; a
  release directory's ``bert_model.ckpt``; a Hugging Face directory or
  ``hf://`` name; a ``.keras`` file). A starting point's head of another
  task is not loaded (the encoder is; :attr:`PresetLoader.foreign_heads`).

  Args:
    model: a built encoder or task model.
    preset: the path.
    task: the head spec to load (default: the model class's ``preset_task``,
      else the encoder only: :data:`ENCODER`).
    source: the flag, for messages and errors' ``argument``.

  Returns:
    one line: what was loaded (``"checkpoint RUN/best/ckpt-1 (with the
    SQuAD head)"``; the pretrainer names the heads that start random).

  Raises:
    CheckpointError, CorruptCheckpointError, ConfigError: nothing loadable,
      unreadable files, weights that do not fit the model.
  """
  task = task or getattr(model, "preset_task", None) or ENCODER
  loader = get_preset_loader(preset, source=source)
  loader.foreign_heads = "skip"
  loaded = loader.load_into(model, task) or Loaded("preset " + loader.preset)
  return task.report(loaded.what, loaded.heads, model)


def load_encoder_weights(encoder, init_checkpoint, source: str = "--init_checkpoint") -> str:
  """The encoder weights of any starting point (``bert_tf.load_encoder_weights``):
  :func:`load_weights` with :data:`ENCODER` (a task model's head, if
  ``encoder`` is one, keeps its initialization).

  Args:
    encoder: a built :class:`BertEncoder`, or a task model with one.
    init_checkpoint: a Hugging Face directory or ``hf://`` name, an original
      checkpoint or release directory, one of our runs or checkpoints, a
      ``.keras`` file.
    source: the flag, for messages.

  Returns:
    one line: what was loaded.

  Raises:
    CheckpointError, CorruptCheckpointError, ConfigError: see :func:`load_weights`.
  """
  return load_weights(encoder, init_checkpoint, ENCODER, source)
