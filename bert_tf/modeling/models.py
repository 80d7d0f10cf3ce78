"""Heads and task models: masked LM, next sentence, classification, SQuAD spans.

Source: google-research/bert ``run_pretraining.py`` (``get_masked_lm_output``,
``get_next_sentence_output``), ``run_classifier.py`` (``create_model``) and
``run_squad.py`` (``create_model``).
"""

import dataclasses
import functools
from typing import Optional

import keras
import tensorflow as tf

import numpy as np

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import huggingface
from bert_tf import preprocessing
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling import long_document
from bert_tf.modeling import presets
from bert_tf.modeling import task_model


def _classifier_tf1_variables(model) -> list:
  """The encoder's and the original ``run_classifier.py`` head's TF1 names."""
  return checkpoints.encoder_variables(model.encoder) + [
      ("output_weights", model.classifier.output_weights),
      ("output_bias", model.classifier.output_bias)]


def _load_hf_pretraining_heads(model, model_dir: "str | huggingface.Tensors") -> list:
  return checkpoints.load_hf_pretraining_heads(_pretrainer_heads(model), model_dir)


def _hf_pretraining_head(model) -> list:
  """transformers' names of the heads ``model`` has (``cls.seq_relationship``
  only with the next-sentence head)."""
  return [checkpoints.HF_HEAD_NAMES[n][0] for n, _ in checkpoints.pretrainer_variables(model)
          if n in checkpoints.HF_HEAD_NAMES]


def load_hf_classifier_head(model, model_dir: "str | huggingface.Tensors") -> bool:
  """Loads a Hugging Face ``BertForSequenceClassification`` head
  (``classifier.weight`` [L, H], ``classifier.bias`` [L]: our
  ``output_weights`` / ``output_bias`` layout).

  Returns:
    True when the directory had the head, False when it has none.

  Raises:
    CheckpointError: half a head, or another label count than the model's.
  """
  return checkpoints.load_hf_dense_head(model.classifier, model_dir, "classification head",
                                        "%d labels" % model.num_labels)


def _pretrainer_heads(model) -> list:
  """``[(TF1 name, variable)]`` of the pretrainer's ``cls/`` heads."""
  return [(n, v) for n, v in checkpoints.pretrainer_variables(model) if n.startswith("cls/")]


def _load_tf1_pretraining_heads(model, ckpt_path: str) -> list:
  return checkpoints.load_tf1_pretraining_heads(_pretrainer_heads(model), ckpt_path)


def describe_pretrainer_load(what: str, heads: tuple, model) -> str:
  """The line a pretrainer's load reports: which of its heads came with the
  weights and which start from a random init.

  The original ``run_pretraining.py`` initialized every variable its
  checkpoint held, ``cls/predictions`` and ``cls/seq_relationship``
  included; a start model without them (a sentence encoder such as
  all-MiniLM-L6-v2, a fine-tuned classifier) gets randomly initialized
  heads, and the line says so.

  Args:
    what: the weights read (:attr:`bert_tf.modeling.presets.Loaded.what`).
    heads: the head weights' TF1 names loaded (``presets.WHOLE``: all).
    model: the :class:`BertPretrainer`.

  Returns:
    ``"<what> (with its cls/predictions and cls/seq_relationship heads)"``,
    or ``"<what>; it has no masked-LM head: cls/predictions starts from a
    random init"`` and the like.
  """
  names = [n for n, _ in _pretrainer_heads(model)]
  groups = [g for g in checkpoints.HF_HEAD_GROUPS if any(n.startswith(g + "/") for n in names)]
  whole = tuple(heads) == presets.WHOLE
  random = [g for g in groups if not whole and not any(n.startswith(g + "/") for n in heads)]
  if not random:
    return "%s (with its %s heads)" % (what, " and ".join(groups))
  kept = [g for g in groups if g not in random]
  return "%s%s; it has no %s head: %s start%s from a random init" % (
      what, " (with its %s head)" % " and ".join(kept) if kept else "",
      " or ".join({"cls/predictions": "masked-LM",
                   "cls/seq_relationship": "next-sentence"}[g] for g in random),
      " and ".join(random), "" if len(random) > 1 else "s")


# What each model class's from_preset and --init_checkpoint read beyond the
# encoder, per source (see presets.Task): the original names of the heads,
# their Hugging Face loaders, the task kind whose record names the settings
# file of the labels and the transformers classes.
PRETRAINER_TASK = presets.Task(
    "pretrainer", kind="pretraining", load_tf1_head=_load_tf1_pretraining_heads,
    load_hf_head=_load_hf_pretraining_heads, hf_head=_hf_pretraining_head,
    load_object_heads=checkpoints.restore_pretraining_heads,
    describe=describe_pretrainer_load,
    # BertForMaskedLM has no pooler (only the next-sentence head reads it).
    hf_optional=("bert/pooler/",))
CLASSIFIER_TASK = presets.Task(
    "classifier", kind="classifier", head_name="the classification head",
    tf1_variables=_classifier_tf1_variables, tf1_num_labels="output_weights",
    load_hf_head=load_hf_classifier_head,
    hf_num_labels=checkpoints.HF_CLASSIFIER_HEAD["output_bias"],
    hf_head=tuple(checkpoints.HF_CLASSIFIER_HEAD.values()))
QUESTION_ANSWERER_TASK = presets.Task(
    "question_answerer", kind="squad", head_name="the SQuAD head",
    load_tf1_head=checkpoints.load_tf1_squad_head,
    hf_optional=("bert/pooler/",), load_hf_head=checkpoints.load_hf_squad_head,
    hf_head=tuple(checkpoints.HF_SQUAD_HEAD_NAMES.values()))


def gather_indexes(sequence_tensor, positions):
  """Rows of ``sequence_tensor`` [B, S, H] at int ``positions`` [B, P] -> [B, P, H]."""
  return tf.gather(sequence_tensor, tf.cast(positions, tf.int32), batch_dims=1)


FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


def normalize_id2label(id2label, num_labels: int) -> "Optional[dict]":
  """``id2label`` as ``{int id: str name}`` for ids ``0 .. num_labels - 1``.

  Args:
    id2label: None, a dict (int or str keys, transformers' / JSON's) or a
      list of names in id order.
    num_labels: how many names there must be.

  Returns:
    the dict, or None.

  Raises:
    ParamsError: another number of names, or ids that are not 0..N-1.
  """
  if id2label is None:
    return None
  if isinstance(id2label, (list, tuple)):
    id2label = dict(enumerate(id2label))
  try:
    named = {int(k): str(v) for k, v in dict(id2label).items()}
  except (TypeError, ValueError):
    named = None
  if named is None or sorted(named) != list(range(num_labels)):
    raise errors.ParamsError("id2label must name ids 0..%d (num_labels %d), got %r"
                             % (num_labels - 1, num_labels, id2label), argument="id2label")
  return named
DEFAULT_TEXT_BATCH_SIZE = 32  # Keras' default batch_size of fit/evaluate/predict


def resolved_long_document(layer: "preprocessing.PreprocessorLayer"
                           ) -> "Optional[long_document.LongDocument]":
  """A layer's ``long_document`` settings resolved for its ``max_seq_length``
  (:meth:`~bert_tf.modeling.long_document.LongDocument.resolved`), or None.

  Raises:
    ParamsError: an unknown method, key or pooling, a ``head_tokens`` above
      ``max_seq_length - 2``, a ``doc_stride`` not below it, a window cap
      below 1: one line naming the argument and the length.
  """
  settings = layer.long_document
  if settings is None:
    return None
  seq = layer.max_seq_length
  try:
    if not isinstance(settings, long_document.LongDocument):
      settings = long_document.LongDocument.from_dict(settings)
    return settings.resolved(seq)
  except errors.ParamsError as e:
    # resolved() words the tools' flags (--doc_stride=...); here they are
    # the LongDocument's arguments.
    raise errors.ParamsError("long_document for max_seq_length=%d: %s" % (
        seq, str(e).replace("--", "")), argument=e.argument) from None


def as_preprocessor_layer(preprocessor, config=None, long_documents: bool = False
                          ) -> "Optional[preprocessing.PreprocessorLayer]":
  """A task model's ``preprocessor`` argument as a Keras layer.

  Args:
    preprocessor: None, a :class:`bert_tf.preprocessing.BertPreprocessor`
      (wrapped, used as is), a :class:`~bert_tf.preprocessing.PreprocessorLayer`,
      or its Keras config dict (``from_config``).
    config: the model's :class:`BertConfig`: the preprocessor's
      ``max_seq_length`` must not exceed its ``max_position_embeddings``.
    long_documents: the model reads a layer's ``long_document`` settings
      (:class:`BertClassifier`: they are checked against the length and
      recorded resolved); otherwise a layer with them is refused.

  Returns:
    a :class:`~bert_tf.preprocessing.PreprocessorLayer` named
    ``preprocessor``, or None.

  Raises:
    TypeError: anything else (``True`` is for ``from_preset`` only).
    ParamsError: a preprocessor longer than the model's positions (one line
      naming both; else the model fails only at the first long input); a
      layer with ``long_document`` for a model that reads none
      (:data:`bert_tf.modeling.task_model.NOT_LONG_DOCUMENTS`); settings
      that do not fit the length (:func:`resolved_long_document`).
  """
  if preprocessor is None:
    return None
  if isinstance(preprocessor, dict):
    preprocessor = keras.saving.deserialize_keras_object(preprocessor)
  if isinstance(preprocessor, preprocessing.BertPreprocessor):
    preprocessor = preprocessing.PreprocessorLayer(preprocessor)
  if not isinstance(preprocessor, preprocessing.PreprocessorLayer):
    raise TypeError("preprocessor must be a BertPreprocessor or PreprocessorLayer "
                    "(preprocessor=True is from_preset's), got %r" % (preprocessor,))
  if config is not None and preprocessor.max_seq_length > config.max_position_embeddings:
    raise errors.ParamsError(
        "preprocessor max_seq_length %d is above the model's max_position_embeddings "
        "%d: build the preprocessor with max_seq_length <= %d" % (
            preprocessor.max_seq_length, config.max_position_embeddings,
            config.max_position_embeddings), argument="max_seq_length")
  if preprocessor.long_document is not None and not long_documents:
    raise errors.ParamsError(task_model.NOT_LONG_DOCUMENTS + ": build the preprocessor without it",
                             argument="long_document")
  settings = resolved_long_document(preprocessor)
  if settings is not None and settings != preprocessor.long_document:
    preprocessor = preprocessor.with_long_document(settings)  # resolved: defaults filled
  return preprocessor


def _is_text_leaf(v) -> bool:
  if isinstance(v, (str, bytes)):
    return True
  if isinstance(v, np.ndarray):
    return v.dtype.kind in "USO"
  if isinstance(v, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
    return v.dtype == tf.string
  return False


def holds_text(x) -> bool:
  """True when ``x`` (a tensor, array, list or nest of them; or a
  ``tf.data.Dataset``'s element spec) holds strings."""
  if isinstance(x, tf.data.Dataset):
    return any(getattr(s, "dtype", None) == tf.string
               for s in tf.nest.flatten(x.element_spec))
  return any(_is_text_leaf(v) for v in tf.nest.flatten(x))


def _unpack(data):
  """``(x, y, sample_weight)`` of a batch as Keras reads it (a 1-, 2- or
  3-tuple, or ``x`` alone)."""
  if isinstance(data, tuple) and 1 <= len(data) <= 3:
    return tuple(data) + (None,) * (3 - len(data))
  return data, None, None


def _to_tensors(x):
  """Python lists / numpy arrays of strings (or numbers) -> tensors, keeping
  tuples and dicts as structure (a list of str is one string tensor)."""
  if isinstance(x, dict):
    return {k: _to_tensors(v) for k, v in x.items()}
  if isinstance(x, tuple):
    return tuple(_to_tensors(v) for v in x)
  if x is None or isinstance(x, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
    return x
  if isinstance(x, np.ndarray) and x.dtype.kind == "O":
    x = x.astype(bytes)
  if isinstance(x, list) and x and isinstance(x[0], (list, tuple)):
    try:
      return tf.constant(x)
    except (ValueError, TypeError):
      return tf.ragged.constant(x)
  return tf.convert_to_tensor(x)


class TextInputsMixin:
  """Raw-string inputs for a task model built with a preprocessor
  (keras-hub's habit: ``classifier.predict(["What an amazing movie!"])``).

  A model class mixing this in defines :meth:`text_features` (its raw-text
  inputs -> the id dict of :data:`FEATURE_NAMES`, through the model's
  :class:`~bert_tf.preprocessing.PreprocessorLayer`) and may define
  :meth:`text_labels` (labels of text inputs -> labels of the features).

  * ``call``: a dict with ``input_ids`` is used as is (unchanged id path);
    anything else is text, turned into ids in the graph first.
  * ``fit``/``evaluate``/``predict``: text ``x`` (lists, numpy arrays,
    string tensors, tuples or dicts of them, or a ``tf.data.Dataset`` whose
    elements hold strings) becomes a ``tf.data`` pipeline that runs the
    preprocessor on every batch (``batch_size`` rows, default 32; ``fit``
    shuffles arrays each epoch unless ``shuffle=False``), so training runs
    on ids. A ``tf.data.Dataset`` is never passed on with ``shuffle=True``
    (Keras ignores it and warns; a dataset shuffles itself).
  * ``fit`` trains on :meth:`train_text_features` of its ``x`` (a windowed
    classifier: ``max_windows`` windows a document); its
    ``validation_data``, ``evaluate``, ``predict`` and ``call`` read
    :meth:`text_features` (``max_eval_windows``).
  * A ``fit`` / ``evaluate`` / ``predict`` call whose text the preprocessor
    cut at its ``max_seq_length`` logs one warning at its end naming the
    share cut, the length and the remedy (:meth:`cut_rule`; as Hugging
    Face's tokenizer warns); nothing when no text was cut
    (:class:`~bert_tf.preprocessing.CutTally`: a comparison and a variable
    add per batch). A class's ``cut_unit`` names what is counted (``texts``;
    ``choice sequences``).

  Raises:
    ParamsError: text given to a model built without a preprocessor.

  Example::

    pre = BertPreprocessor("vocab.txt", do_lower_case=True, max_seq_length=128)
    model = BertClassifier(config, num_labels=2, preprocessor=pre)
    model.fit(["a fine film", "dull"], [1, 0], epochs=2)
    model.predict(["What an amazing movie!"])     # float32 logits [1, 2]
  """

  preprocessor = None

  def text_features(self, x) -> dict:
    """Raw text -> int32 ``input_ids``, ``input_mask``, ``segment_ids``."""
    raise NotImplementedError

  def train_text_features(self, x) -> dict:
    """Raw text -> features for ``fit``'s training batches (default:
    :meth:`text_features`; a windowed classifier reads fewer windows)."""
    return self.text_features(x)

  def text_labels(self, x, y):  # pylint: disable=unused-argument
    """Labels of a text batch -> labels of its features (default: as given)."""
    return y

  def cut_rule(self) -> Optional[str]:
    """What the cut-warning line says happened to the rows it counts and
    the remedy (:meth:`bert_tf.preprocessing.CutTally.line`'s ``rule``);
    None: the default (a larger ``max_seq_length``)."""
    return None

  def _require_preprocessor(self):
    if self.preprocessor is None:
      raise errors.ParamsError(
          "%s %r got text but was built without a preprocessor: build it with "
          "preprocessor=BertPreprocessor(vocab_file, do_lower_case, max_seq_length) "
          "or from_preset(..., preprocessor=True), or pass a dict of int "
          "input_ids, input_mask, segment_ids" % (type(self).__name__, self.name),
          argument="preprocessor")
    return self.preprocessor.bert_preprocessor

  def __call__(self, inputs, *args, **kwargs):
    # Keras takes only tensors positionally: Python lists / numpy arrays of
    # strings become string tensors first (``model(["raw string"])``).
    if not (isinstance(inputs, dict) and "input_ids" in inputs) and holds_text(inputs):
      inputs = _to_tensors(inputs)
    return super().__call__(inputs, *args, **kwargs)  # pylint: disable=no-member

  def _model_inputs(self, inputs) -> dict:
    if isinstance(inputs, dict) and "input_ids" in inputs:
      return inputs
    self._require_preprocessor()
    return self.text_features(_to_tensors(inputs))

  def _text_batch(self, *data, training: bool = False):
    x, y, sample_weight = _unpack(data)  # tf.data passes a tuple element's parts
    out = [self.train_text_features(x) if training else self.text_features(x)]
    if y is not None or sample_weight is not None:
      out.append(None if y is None else self.text_labels(x, y))
    if sample_weight is not None:
      out.append(sample_weight)
    return tuple(out)

  def _text_dataset(self, x, y, sample_weight, batch_size, shuffle, tally=None,
                    training: bool = False):
    """``x`` as a preprocessed dataset, or None when it holds no text; the
    rows its preprocessor cuts are counted in ``tally`` (a
    :class:`~bert_tf.preprocessing.CutTally`, or None); ``training``: the
    batches ``fit`` trains on (:meth:`train_text_features`)."""
    if self.preprocessor is None or not holds_text(x):
      return None
    if isinstance(x, tf.data.Dataset):
      if y is not None or sample_weight is not None:
        raise errors.ParamsError("%s: pass labels inside the tf.data.Dataset, not as y="
                                 % type(self).__name__, argument="y")
      ds = x
    else:
      parts = [_to_tensors(x)]
      if y is not None or sample_weight is not None:
        parts.append(_to_tensors(y))
      if sample_weight is not None:
        parts.append(_to_tensors(sample_weight))
      ds = tf.data.Dataset.from_tensor_slices(tuple(parts))
      if shuffle:
        ds = ds.shuffle(ds.cardinality(), reshuffle_each_iteration=True)
      ds = ds.batch(batch_size or DEFAULT_TEXT_BATCH_SIZE)
    with self._require_preprocessor().counting_cuts(tally):
      fn = functools.partial(self._text_batch, training=training)
      return ds.map(tf.autograph.experimental.do_not_convert(fn),
                    num_parallel_calls=tf.data.AUTOTUNE).prefetch(
          tf.data.AUTOTUNE)

  def _warn_cuts(self, tally, call: str) -> None:
    """One warning line when the call's text was cut at the preprocessor's
    ``max_seq_length`` (none when nothing was), naming :meth:`cut_rule`."""
    if self.preprocessor is not None:
      tally.warn("%s.%s" % (type(self).__name__, call),
                 self.preprocessor.bert_preprocessor.max_seq_length,
                 getattr(self, "cut_unit", "texts"), self.cut_rule())

  def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto",
          callbacks=None, validation_split=0.0, validation_data=None, shuffle=True,
          class_weight=None, sample_weight=None, initial_epoch=0,
          steps_per_epoch=None, validation_steps=None, validation_batch_size=None,
          validation_freq=1):
    """Keras ``fit``; ``x`` may be raw text (see the class docstring).

    ``validation_data``: ``(x, y)`` (or a dataset) of text or ids.

    Raises:
      ParamsError: text ``x`` without a preprocessor, or with
        ``validation_split`` (pass ``validation_data``).
    """
    tally = preprocessing.CutTally()
    ds = self._text_dataset(x, y, sample_weight, batch_size, shuffle, tally, training=True)
    if ds is not None:
      if validation_split:
        raise errors.ParamsError("%s.fit on text: validation_split is not supported, "
                                 "pass validation_data" % type(self).__name__,
                                 argument="validation_split")
      x, y, sample_weight, batch_size = ds, None, None, None
    if validation_data is not None and not isinstance(validation_data, tf.data.Dataset):
      vx, vy, vw = _unpack(tuple(validation_data))
      vds = self._text_dataset(vx, vy, vw, validation_batch_size or batch_size, False,
                               tally)
      if vds is not None:
        validation_data, validation_batch_size = vds, None
    if isinstance(validation_data, tf.data.Dataset):
      validation_data = (self._text_dataset(validation_data, None, None, None, False,
                                            tally) or validation_data)
    if isinstance(x, tf.data.Dataset):
      shuffle = False  # Keras warns that a Dataset ignores it
    history = super().fit(  # pylint: disable=no-member
        x=x, y=y, batch_size=batch_size, epochs=epochs, verbose=verbose,
        callbacks=callbacks, validation_split=validation_split,
        validation_data=validation_data, shuffle=shuffle, class_weight=class_weight,
        sample_weight=sample_weight, initial_epoch=initial_epoch,
        steps_per_epoch=steps_per_epoch, validation_steps=validation_steps,
        validation_batch_size=validation_batch_size, validation_freq=validation_freq)
    self._warn_cuts(tally, "fit")
    return history

  def make_train_function(self, force=False):
    """Keras' train function, with the optimizer's slots made before it is
    traced. Without a distribution strategy Keras builds the optimizer
    inside the first traced step; its slot variables are then made under
    ``tf.function``'s variable lifting, so the step is traced twice (~1 s
    of a tiny model's 4.7 s first ``fit``, Zen 5, 2026-11-29). Built here
    once the model's layers are built (otherwise Keras does it, as before).
    """
    opt = getattr(self, "optimizer", None)
    if (opt is not None and not opt.built
        and all(layer.built for layer in bert_layers.all_layers(self))):
      opt.build(self.trainable_variables)  # pylint: disable=no-member
    return super().make_train_function(force)  # pylint: disable=no-member

  def evaluate(self, x=None, y=None, batch_size=None, verbose="auto",
               sample_weight=None, steps=None, callbacks=None, return_dict=False,
               **kwargs):
    """Keras ``evaluate``; ``x`` may be raw text (see the class docstring)."""
    tally = preprocessing.CutTally()
    ds = self._text_dataset(x, y, sample_weight, batch_size, False, tally)
    if ds is not None:
      x, y, sample_weight, batch_size = ds, None, None, None
    out = super().evaluate(  # pylint: disable=no-member
        x=x, y=y, batch_size=batch_size, verbose=verbose, sample_weight=sample_weight,
        steps=steps, callbacks=callbacks, return_dict=return_dict, **kwargs)
    self._warn_cuts(tally, "evaluate")
    return out

  def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
    """Keras ``predict``; ``x`` may be raw text (see the class docstring)."""
    tally = preprocessing.CutTally()
    ds = self._text_dataset(x, None, None, batch_size, False, tally)
    if ds is not None:
      x, batch_size = ds, None
    out = super().predict(  # pylint: disable=no-member
        x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)
    self._warn_cuts(tally, "predict")
    return out

  def save(self, filepath, overwrite: bool = True, include_optimizer: bool = True,
           **kwargs) -> None:
    """Keras ``model.save``; ``include_optimizer=False`` (Keras 2's argument,
    which Keras 3 dropped) writes the model without its optimizer, slots and
    compile settings: for serving or sharing, a third of the size after
    ``fit`` with Adam (all-MiniLM-L6-v2's classifier: 273 MB -> 91 MB). The
    file loads uncompiled; ``compile`` it again to train.

    Args:
      filepath: a ``.keras`` path.
      overwrite, **kwargs: as Keras' ``save``.
      include_optimizer: False leaves the optimizer out.
    """
    if include_optimizer or not getattr(self, "compiled", False):
      return super().save(filepath, overwrite=overwrite, **kwargs)  # pylint: disable=no-member
    optimizer, self.optimizer = self.optimizer, None
    self.compiled = False
    try:
      return super().save(filepath, overwrite=overwrite, **kwargs)  # pylint: disable=no-member
    finally:
      self.optimizer, self.compiled = optimizer, True



def text_pair(x, names=("text_a", "text_b")):
  """``(a, b)`` string [B] tensors of a text input.

  Args:
    x: a string tensor / list / array (``b`` None), a tuple ``(a,)`` or
      ``(a, b)``, or a dict with ``names`` (the second optional). Each part
      is flattened to [B] (another rank in row-major order, as the exports'
      ``as_batch``).

  Returns:
    ``(a, b)``; ``b`` None for single texts.
  """
  if isinstance(x, dict):
    a, b = x[names[0]], x.get(names[1])
  elif isinstance(x, tuple):
    a, b = x[0], (x[1] if len(x) > 1 else None)
  else:
    a, b = x, None
  flat = lambda t: None if t is None else tf.reshape(_to_tensors(t), [-1])  # pylint: disable=unnecessary-lambda-assignment
  return flat(a), flat(b)


@bert_layers.serializable
class MaskedLMHead(keras.layers.Layer):
  """Masked-LM head tied to the word embeddings (original ``cls/predictions``).

  dense(H, hidden_act) -> LayerNorm -> matmul with the word-embedding table
  transposed -> + ``output_bias`` [vocab_size].

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict.
    embeddings: the :class:`BertEmbeddings` whose ``word_embeddings`` table
      is tied to the output (a model's encoder's); ``get_config`` stores it
      serialized, so a head saved alone comes back with its own copy.

  Call args:
    sequence_output: float [B, S, H].
    masked_lm_positions: int [B, P], or None when ``sequence_output`` is
      already the [B, P, H] rows at the masked positions.

  Returns:
    float32 logits [B, P, vocab_size].

  Example:
    >>> config = config_lib.preset("tiny")
    >>> emb = bert_layers.BertEmbeddings(config, name="embeddings")
    >>> head = MaskedLMHead(config, emb, name="predictions")
    >>> logits = head(tf.zeros([2, 5, 128]), None)  # [2, 5, 30522] float32
  """

  def __init__(self, config: "config_lib.BertConfig | dict",
               embeddings: "bert_layers.BertEmbeddings", **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.embeddings = embeddings  # BertEmbeddings, owner of the tied table.
    self.transform = keras.layers.Dense(
        config.hidden_size, activation=bert_layers.get_activation(config.hidden_act),
        kernel_initializer=bert_layers.initializer(config), name="transform")
    self.transform.build((None, config.hidden_size))
    self.layer_norm = bert_layers.layer_norm("layer_norm")
    self.layer_norm.build((None, config.hidden_size))
    self.output_bias = self.add_weight(name="output_bias",
                                       shape=(config.vocab_size,),
                                       initializer="zeros", autocast=False)
    self.built = True  # every weight exists: .keras loading needs no build

  def get_config(self) -> dict:
    """Keras config: base keys, ``config`` dict and the serialized ``embeddings``."""
    return dict(super().get_config(), config=self.config.to_dict(),
                embeddings=keras.saving.serialize_keras_object(self.embeddings))

  @classmethod
  def from_config(cls, config: dict) -> "MaskedLMHead":
    """Inverse of :meth:`get_config` (the embeddings are rebuilt, untied)."""
    config = dict(config)
    config["embeddings"] = keras.saving.deserialize_keras_object(config["embeddings"])
    return cls(**config)

  def call(self, sequence_output, masked_lm_positions):
    x = (sequence_output if masked_lm_positions is None else
         gather_indexes(sequence_output, masked_lm_positions))  # [B, P, H]
    batch, preds = tf.shape(x)[0], tf.shape(x)[1]
    # [B*P, H] rows: 2-D matmuls. (A [B, P, H] x [V, H]^T matmul is a
    # broadcast batched matmul whose table gradient goes through a
    # [B, V, H] tensor summed over B: forward+backward of the output layer
    # at the MiniLM shape measured 1.33 s vs 1.07 s here, 2 busy cores.)
    x = tf.reshape(x, [-1, self.config.hidden_size])
    x = tf.cast(self.layer_norm(self.transform(x)), x.dtype)
    table = tf.cast(self.embeddings.word_embeddings, x.dtype)
    logits = tf.matmul(x, table, transpose_b=True)  # [B*P, V]
    logits = tf.nn.bias_add(tf.cast(logits, tf.float32), self.output_bias)
    return tf.reshape(logits, [batch, preds, self.config.vocab_size])


@bert_layers.serializable
class DenseHead(keras.layers.Layer):
  """``logits = x @ output_weights^T + output_bias`` (original layout [N, H]).

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict (``hidden_size``,
      ``initializer_range``).
    num_outputs: N.

  Used for next-sentence (``cls/seq_relationship``, N=2) and classification
  (``output_weights`` [num_labels, H]).

  Call args:
    x: float [B, H].

  Returns:
    float32 logits [B, N].

  Example:
    >>> head = DenseHead(config_lib.preset("tiny"), 2, name="seq_relationship")
    >>> logits = head(tf.zeros([4, 128]))  # [4, 2] float32
  """

  def __init__(self, config: "config_lib.BertConfig | dict", num_outputs: int,
               **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.num_outputs = num_outputs
    self.output_weights = self.add_weight(
        name="output_weights", shape=(num_outputs, config.hidden_size),
        initializer=bert_layers.initializer(config), autocast=False)
    self.output_bias = self.add_weight(name="output_bias", shape=(num_outputs,),
                                       initializer="zeros", autocast=False)
    self.built = True  # every weight exists: .keras loading needs no build

  def get_config(self) -> dict:
    """Keras config: base keys, ``config`` dict and ``num_outputs``."""
    return dict(super().get_config(), config=self.config.to_dict(),
                num_outputs=self.num_outputs)

  def call(self, x):
    logits = tf.matmul(x, tf.cast(self.output_weights, x.dtype), transpose_b=True)
    return tf.cast(logits, tf.float32) + self.output_bias


@bert_layers.serializable
class BertPretrainer(task_model.TaskModel):
  """Encoder + masked-LM head (+ next-sentence head unless ``nsp=False``).

  Sub-layers: ``bert`` (:class:`BertEncoder`), ``predictions``
  (:class:`MaskedLMHead`, tied to ``bert``'s word embeddings) and
  ``seq_relationship`` (:class:`DenseHead`, N=2). Saves to ``.keras``.

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict.
    nsp: build the next-sentence head.

  Call args:
    inputs: dict with ``input_ids``, ``input_mask``, ``segment_ids`` [B, S]
      and ``masked_lm_positions`` [B, P] (int).

  Returns:
    dict with ``masked_lm_logits`` float32 [B, P, vocab_size] and
    ``next_sentence_logits`` float32 [B, 2] (absent when ``nsp=False``).

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.

  ``from_preset`` (:meth:`bert_tf.modeling.task_model.TaskModel.from_preset`)
  loads the heads (``cls/predictions``, ``cls/seq_relationship``) from an
  original ``bert_model.ckpt``, a Hugging Face ``BertForPreTraining``
  directory, our pretraining runs and ``.keras`` pretrainers; from an
  encoder-only checkpoint (a Hugging Face ``BertModel``, a classifier) only
  the encoder, the heads keeping their initialization. It takes ``nsp=``.

  Example:
    >>> model = BertPretrainer(config_lib.preset("tiny"))
    >>> inputs = dict(model.encoder.dummy_inputs(batch=2, seq_len=16),
    ...               masked_lm_positions=tf.constant([[1, 2], [3, 4]]))
    >>> model(inputs)["masked_lm_logits"].shape
    TensorShape([2, 2, 30522])
    >>> model.save("/tmp/pretrainer.keras")  # doctest: +SKIP
    >>> model = BertPretrainer.from_preset("uncased_L-12_H-768_A-12")  # doctest: +SKIP
  """

  preset_task = PRETRAINER_TASK
  config_fields = ("nsp",)
  takes_preprocessor = False

  def __init__(self, config: "config_lib.BertConfig | dict", nsp: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.nsp = nsp
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.masked_lm = MaskedLMHead(config, self.encoder.embeddings,
                                  name="predictions")
    self.next_sentence = (DenseHead(config, 2, name="seq_relationship")
                          if nsp else None)
    self.built = True  # every weight exists: .keras loading needs no build

  def call(self, inputs, training=False):
    # Only [CLS] (the pooler) and the masked positions of the last layer are
    # read, so the last block computes just those rows (same values; at the
    # MiniLM shape with 20 predictions it skips ~70% of the last block).
    positions = tf.cast(inputs["masked_lm_positions"], tf.int32)
    cls = tf.zeros_like(positions[:, :1])
    enc = self.encoder(inputs, training=training,
                       output_positions=tf.concat([cls, positions], axis=1))
    out = {"masked_lm_logits": self.masked_lm(enc["sequence_output"][:, 1:], None)}
    if self.next_sentence is not None:
      out["next_sentence_logits"] = self.next_sentence(enc["pooled_output"])
    return out


@bert_layers.serializable
class BertClassifier(TextInputsMixin, task_model.TaskModel):
  """Encoder + dropout on ``pooled_output`` + a dense head (original run_classifier).

  ``num_labels == 1`` makes a regression model (STS-B). Sub-layers ``bert``
  (:class:`BertEncoder`), ``dropout`` and ``classifier`` (:class:`DenseHead`,
  original names ``output_weights`` [num_labels, H], ``output_bias``). It
  trains with plain ``compile`` + ``fit`` on ``(features, label_ids)``
  batches (see :func:`bert_tf.data.classifier_data.examples_dataset`) and
  saves to ``.keras``.

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict.
    num_labels: number of classes (1: regression).
    skip_padding: True (default): the encoder's row-wise steps skip the
      padding positions (``BertEncoder(..., skip_padding=True)``); the
      logits equal the padded computation's up to float summation order,
      and a batch padded to its longest row takes about the token share of
      the time. False: the original's computation on every position.
    preprocessor: optional :class:`bert_tf.preprocessing.BertPreprocessor`
      (or :class:`~bert_tf.preprocessing.PreprocessorLayer`): the model then
      also takes raw text (see :class:`TextInputsMixin`); it is part of the
      model's config, its vocab a ``.keras`` asset. A layer's
      ``long_document`` settings say how a text longer than one window is
      read (``PreprocessorLayer(vocab, True, 128, long_document="windows")``;
      ``from_preset(..., long_document=)``): ``fit`` packs ``max_windows``
      windows a document, ``evaluate`` / ``predict`` / ``call``
      ``max_eval_windows``, as ``run_classifier --long_document`` does.
    id2label: the label names, ``{id: name}`` (transformers' ``id2label``;
      JSON's string keys too) or a list in id order; part of the config
      (``.keras``), returned by :attr:`label_names` and
      :meth:`predict_labels`. None: unnamed.
    problem_type: transformers' ``problem_type``:
      ``single_label_classification`` (softmax), ``multi_label_classification``
      (a sigmoid per label), ``regression``; None: regression for one label,
      else single-label.
    window_pooling: how a document's windows make one prediction, when the
      inputs are windows [B, K, S] (:mod:`bert_tf.modeling.long_document`):
      ``mean`` or ``max`` over the windows. None: the preprocessor's
      ``long_document`` settings' (else ``mean``); given, the layer's
      settings record it too.
    pool_logits: pool the windows' logits instead of their pooled outputs
      (the head then reads each window; measured against pooling the pooled
      outputs in ``bench/bench_long_document.py``).

  Call args:
    inputs: dict with ``input_ids``, ``input_mask``, ``segment_ids`` [B, S],
      or [B, K, S]: K windows of each document (a document's missing
      windows all zero), pooled into one prediction per document;
      or, with a preprocessor, text: string [B] (single sentences), a pair
      ``(text_a, text_b)`` or ``{"text_a": ..., "text_b": ...}`` of string
      [B]. Text is packed ``[CLS] a [SEP] (b [SEP])`` by the preprocessor
      (truncated to its ``max_seq_length`` as the original's
      ``_truncate_seq_pair``) and trimmed to the batch's longest row: the
      computation of the classifier SavedModel export
      (``bert_tf.export.export_classifier``) and of ``run_classifier``.
    training: enables dropout.
    skip_padding: optional bool overriding the constructor's for this call.

  Returns:
    float32 logits [B, num_labels].

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.
    ParamsError: ``num_labels`` below 1, ``id2label`` without ``num_labels``
      names, an unknown ``problem_type`` or ``window_pooling``, a
      preprocessor longer than ``max_position_embeddings``; text input to a
      model without a preprocessor.

  ``from_preset`` (:meth:`bert_tf.modeling.task_model.TaskModel.from_preset`)
  loads the head too when the preset is a classifier (a ``.keras``
  classifier, our ``run_classifier`` output directory, an original
  fine-tuned ``model.ckpt-N`` with ``output_weights``, a Hugging Face
  ``BertForSequenceClassification``: ``classifier.weight`` [L, H],
  ``classifier.bias``) of ``num_labels`` classes (default: the preset's),
  with its label names (``id2label``, a run's ``labels``) and
  ``problem_type``; otherwise only the encoder is loaded and the head keeps
  its initialization (TruncatedNormal(0.02) weights, zero bias). Its
  ``long_document`` argument (a ``LongDocument``, its dict or a method
  name, with ``preprocessor=``) sets how long texts are read; without it,
  ``preprocessor=True`` takes the preset's recorded settings (a ``.keras``
  file's preprocessor, a run's ``classifier_config.json``, ``config.json``'s
  ``bert_tf_long_document``), and the preset's ``window_pooling`` /
  ``pool_logits`` apply unless given (:meth:`preset_reading`).
  ``from_run_settings`` takes ``labels``, ``is_regression`` (one output)
  and ``multi_label`` of a ``classifier_config.json``.

  Example:
    >>> model = BertClassifier.from_preset("all-MiniLM-L6-v2/", num_labels=2,  # doctest: +SKIP
    ...                                    preprocessor=True)
    >>> model.compile(optimizer="adam", metrics=["accuracy"],  # doctest: +SKIP
    ...     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> model.fit(["a fine film", "dull"], [1, 0], epochs=3)  # doctest: +SKIP
    >>> model.predict(["What an amazing movie!"])  # doctest: +SKIP
    >>> news = BertClassifier.from_preset("all-MiniLM-L6-v2/", num_labels=20,  # doctest: +SKIP
    ...     preprocessor=True, long_document="windows", window_pooling="max")
    >>> model = BertClassifier(config_lib.preset("tiny"), num_labels=3)
    >>> model(model.encoder.dummy_inputs(batch=2)).shape
    TensorShape([2, 3])
  """

  preset_task = CLASSIFIER_TASK
  config_fields = ("num_labels", "skip_padding", "problem_type", "window_pooling",
                   "pool_logits")
  label_fields = ("num_labels", "id2label", "problem_type")
  reads_long_documents = True

  def __init__(self, config: "config_lib.BertConfig | dict", num_labels: int,
               skip_padding: bool = True, preprocessor=None, id2label=None,
               problem_type: Optional[str] = None, window_pooling: Optional[str] = None,
               pool_logits: bool = False, **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    preprocessor = as_preprocessor_layer(preprocessor, config, long_documents=True)
    settings = None if preprocessor is None else resolved_long_document(preprocessor)
    if window_pooling is None:
      window_pooling = "mean" if settings is None else settings.window_pooling
    self.num_labels = num_labels = task_model.check_num_labels(num_labels)
    self.skip_padding = bool(skip_padding)
    self.id2label = normalize_id2label(id2label, num_labels)
    if problem_type is None:
      problem_type = "regression" if num_labels == 1 else "single_label_classification"
    if problem_type not in huggingface.PROBLEM_TYPES:
      raise errors.ParamsError("problem_type %r: one of %s" % (
          problem_type, ", ".join(huggingface.PROBLEM_TYPES)), argument="problem_type")
    self.problem_type = problem_type
    if window_pooling not in long_document.POOLINGS:
      raise errors.ParamsError("window_pooling %r: one of %s" % (
          window_pooling, ", ".join(long_document.POOLINGS)), argument="window_pooling")
    self.window_pooling = window_pooling
    self.pool_logits = bool(pool_logits)
    if settings is not None and settings.window_pooling != window_pooling:
      # The model's pooling is the one applied: the layer's record follows
      # it (a new layer: the one given may be shared).
      settings = dataclasses.replace(settings, window_pooling=window_pooling)
      preprocessor = preprocessor.with_long_document(settings)
    self._long_document = settings
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.dropout = bert_layers.Dropout(config.hidden_dropout_prob, name="dropout")
    self.classifier = DenseHead(config, num_labels, name="classifier")
    self.preprocessor = preprocessor
    self.built = True  # every weight exists: .keras loading needs no build

  @property
  def label_names(self) -> Optional[list]:
    """The label names in id order (list of str), or None when unnamed."""
    if self.id2label is None:
      return None
    return [self.id2label[i] for i in range(self.num_labels)]

  def predict_labels(self, x, threshold: float = 0.5, **kwargs) -> list:
    """The predicted label names of ``x`` (ids or text, as :meth:`predict`).

    Single-label: the argmax's name per example; multi-label: the list of
    names whose sigmoid is at least ``threshold``. Names are
    :attr:`label_names`, else ``"0"``, ``"1"``, ...

    Returns:
      list (one entry per example) of str, or of lists of str.

    Raises:
      ParamsError: a regression model (it has no labels).
    """
    if self.problem_type == "regression":
      raise errors.ParamsError("%s is a regression model: use predict() for its scores"
                               % self.name, argument="problem_type")
    logits = np.asarray(self.predict(x, **kwargs))
    names = self.label_names or [str(i) for i in range(self.num_labels)]
    if self.problem_type == "multi_label_classification":
      probs = 1.0 / (1.0 + np.exp(-logits))
      return [[names[j] for j in np.flatnonzero(row >= threshold)] for row in probs]
    return [names[int(i)] for i in np.argmax(logits, axis=-1)]

  @classmethod
  def run_settings_kwargs(cls, settings: dict) -> dict:
    """``classifier_config.json`` -> ``num_labels`` (1 with ``is_regression``,
    else the number of ``labels``), ``id2label`` (the labels),
    ``problem_type`` (``regression``; ``multi_label_classification`` with
    ``multi_label``; else single-label), and the windows' ``window_pooling``
    and ``pool_logits`` its ``long_document`` records.

    Raises:
      ConfigError: no ``labels`` for a classification run.
    """
    recorded = settings.get("long_document") or {}
    pooling = {"window_pooling": recorded.get("window_pooling", "mean"),
               "pool_logits": bool(recorded.get("pool_logits", False))}
    if settings.get("is_regression"):
      return dict(pooling, num_labels=1, problem_type="regression")
    labels = task_model.run_labels(settings, cls.__name__)
    return dict(pooling, num_labels=len(labels), id2label=labels,
                problem_type="multi_label_classification" if settings.get("multi_label")
                else "single_label_classification")

  @property
  def long_document(self) -> "Optional[long_document.LongDocument]":
    """The preprocessor's :class:`~bert_tf.modeling.long_document.LongDocument`
    settings (resolved), or None (no preprocessor, or the original's first
    tokens)."""
    return self._long_document

  def text_features(self, x) -> dict:
    """Text -> ids as :class:`BertClassifier`'s call args say (export's
    ``ClassifierServingModule.predict`` preprocessing; ``windows``:
    [B, K, S], ``max_eval_windows`` a document)."""
    return self._packed_text(x, training=False)

  def train_text_features(self, x) -> dict:
    """Text -> ids of ``fit``'s training batches (``windows``: at most
    ``max_windows`` a document)."""
    return self._packed_text(x, training=True)

  def _packed_text(self, x, training: bool) -> dict:
    """The preprocessor's packing, or its settings' (a
    :class:`~bert_tf.modeling.long_document.DocumentPacker`, as the task's
    pipeline and the exports pack); the rows a method leaves tokens of
    unread go to the call's cut tally, except training windows beyond
    ``max_windows`` (read spread by design)."""
    pre = self._require_preprocessor()
    settings = self.long_document
    if settings is None:
      features = pre(*text_pair(x))
    else:
      features = long_document.DocumentPacker(pre, settings, training)(*text_pair(x))
      # head packs through BertPreprocessor.pack, which counts its own cuts.
      if settings.method != "head" and not (training and settings.windowed):
        pre.record_cuts(features["truncated"])
    return preprocessing.trim_to_longest({n: features[n] for n in FEATURE_NAMES})

  def cut_rule(self) -> str:
    """The cut warning's rule for the preprocessor's method: what was cut
    and the remedy (``long_document='windows'`` reads a text whole)."""
    seq = self.preprocessor.max_seq_length
    settings = self.long_document
    method = "head" if settings is None else settings.method
    if method == "windows":
      return ("took more than max_eval_windows=%d windows of %d tokens (doc_stride=%d) "
              "and were read in %d spread over them (a larger max_eval_windows= reads "
              "more)" % (settings.max_eval_windows, seq, settings.doc_stride,
                         settings.max_eval_windows))
    kept = {"head": "their first tokens", "tail": "their last tokens"}.get(
        method, "their first %d tokens and their last" % getattr(settings, "head_tokens", 0))
    return ("were longer than max_seq_length=%d tokens and were cut to %s "
            "(--long_document=windows / long_document='windows' reads them whole: "
            "BertClassifier.from_preset(..., preprocessor=True, long_document='windows'); "
            "or a larger max_seq_length=, up to the model's max_position_embeddings)"
            % (seq, kept))

  @classmethod
  def preset_reading(cls, loader: presets.PresetLoader, kwargs: dict, given,
                     own_preprocessor: bool) -> None:
    """``from_preset``'s long-document arguments: its ``long_document``
    (``given``; :meth:`~bert_tf.modeling.task_model.TaskModel.from_preset`
    has checked that a preprocessor is) replaces the preset's settings, its
    ``window_pooling`` the model's unless ``window_pooling=`` is given; else,
    with ``preprocessor=True``, the preset's recorded settings. The
    preset's recorded ``window_pooling`` / ``pool_logits`` apply unless
    given (:meth:`bert_tf.modeling.presets.PresetLoader.window_settings`).

    Raises:
      ParamsError: settings that do not fit the preprocessor's length (one
        line naming the argument).
    """
    task = cls.preset_task
    recorded = loader.window_settings(task)
    pre = kwargs.get("preprocessor")
    if given is not None:
      recorded.pop("window_pooling", None)
      settings = given
    else:
      settings = loader.long_document(task) if own_preprocessor else None
    for name, value in recorded.items():
      if kwargs.get(name) is None:
        kwargs[name] = value
    if settings is not None and pre is not None:
      layer = as_preprocessor_layer(pre, long_documents=True)
      kwargs["preprocessor"] = layer.with_long_document(settings)

  def call(self, inputs, training=False, skip_padding=None):
    inputs = self._model_inputs(inputs)
    skip = self.skip_padding if skip_padding is None else skip_padding
    if inputs["input_ids"].shape.rank == 3:
      return self._call_windows(inputs, training, skip)
    pooled = self.encoder(inputs, training=training,
                          skip_padding=skip)["pooled_output"]
    return self.classifier(self.dropout(pooled, training=training))

  def _call_windows(self, inputs, training, skip):
    """Logits [B, L] of documents given as windows [B, K, S]: the valid
    windows (any position unmasked) encoded together, their pooled outputs
    (or logits, ``pool_logits``) pooled per document."""
    mask = inputs["input_mask"]
    batch, k = tf.shape(mask)[0], tf.shape(mask)[1]
    valid = tf.reduce_any(mask > 0, axis=-1)                               # [B, K]
    rows = tf.cast(tf.where(tf.reshape(valid, [-1])), tf.int32)            # [W, 1]
    # A gather on axis 0 keeps the rank known (the LiteRT converter needs it).
    flat = {n: tf.gather(tf.reshape(inputs[n], [batch * k, tf.shape(mask)[2]]),
                         tf.reshape(rows, [-1])) for n in long_document.FEATURES}
    pooled = self.encoder(flat, training=training, skip_padding=skip)["pooled_output"]
    per_window = (self.classifier(self.dropout(pooled, training=training))
                  if self.pool_logits else pooled)
    width = tf.shape(per_window)[-1]
    dense = tf.scatter_nd(rows, per_window, tf.stack([batch * k, width]))
    pooled_docs = long_document.pool_windows(
        tf.reshape(dense, tf.stack([batch, k, width])), valid, self.window_pooling)
    if self.pool_logits:
      return pooled_docs
    return self.classifier(self.dropout(pooled_docs, training=training))


@bert_layers.serializable
class BertQuestionAnswerer(TextInputsMixin, task_model.TaskModel):
  """Encoder + the original SQuAD span head (paper section 4.2, ``run_squad.create_model``).

  ``logits = sequence_output @ output_weights^T + output_bias`` at every
  position, split into a start and an end score. Sub-layers ``bert``
  (:class:`BertEncoder`) and ``squad`` (:class:`DenseHead`, N=2: original
  names ``cls/squad/output_weights`` [2, H], TruncatedNormal(initializer_range)
  initialized, and ``cls/squad/output_bias`` [2], zeros; row 0 scores
  starts, row 1 ends). No dropout beyond the encoder's, as the original.
  Saves to ``.keras``; loads the original's fine-tuned SQuAD checkpoints and
  Hugging Face ``BertForQuestionAnswering`` directories with
  :meth:`from_preset`.

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict.
    preprocessor: optional :class:`bert_tf.preprocessing.BertPreprocessor`:
      the model then also takes (question, context) strings
      (``fit``/``evaluate``/``predict``, see :class:`TextInputsMixin`);
      part of the config, its vocab a ``.keras`` asset.
    max_query_length: word pieces of the question kept in the text input
      (the original's ``--max_query_length``).

  Call args:
    inputs: dict with int32 (or int64) ``input_ids``, ``input_mask``,
      ``segment_ids``, each [B, S]; or, with a preprocessor, text:
      ``(question, context)`` or ``{"question": ..., "context": ...}``,
      string [B] each, packed as ONE window ``[CLS] question [SEP] context
      [SEP]`` of the preprocessor's ``max_seq_length`` S: the question's
      first ``max_query_length`` pieces, the context's first ``S - 3 -
      len(question)`` (the first of the original ``run_squad.py``'s
      doc-stride windows, as the SQuAD SavedModel builds it; the span
      choice over several windows stays in
      :mod:`bert_tf.export.squad`). Logits are over the packed positions;
      labels for ``fit`` on text are start/end positions in that packing
      (0, ``[CLS]``, when the answer is not in the window).
    training: enables dropout.
    skip_padding: optional bool overriding the constructor's for this call.

  Returns:
    dict with ``start_logits`` and ``end_logits``, float32 [B, S] (float32
    under a mixed dtype policy too).

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.
    ParamsError: ``max_query_length`` leaves no room for the context.

  ``from_preset`` (:meth:`bert_tf.modeling.task_model.TaskModel.from_preset`)
  loads the span head too when the preset has one: a Hugging Face
  ``BertForQuestionAnswering`` directory (``qa_outputs.weight`` [2, H],
  ``qa_outputs.bias``; its missing pooler keeps its initialization, it is
  not used), an original fine-tuned ``run_squad.py`` checkpoint
  (``cls/squad/output_weights``, ``cls/squad/output_bias``), our
  ``run_squad`` runs and ``.keras`` question answerers; from any other
  preset only the encoder, the head keeping its initialization.

  Example:
    >>> model = BertQuestionAnswerer(config_lib.preset("tiny"))
    >>> out = model(model.encoder.dummy_inputs(batch=2, seq_len=16))
    >>> out["start_logits"].shape, out["end_logits"].dtype
    (TensorShape([2, 16]), tf.float32)
    >>> model = BertQuestionAnswerer.from_preset("hf_squad_dir/")  # doctest: +SKIP
    >>> model.save("/tmp/squad.keras")  # doctest: +SKIP
  """

  preset_task = QUESTION_ANSWERER_TASK

  def __init__(self, config: "config_lib.BertConfig | dict", preprocessor=None,
               max_query_length: int = 64, **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.span_head = DenseHead(config, 2, name="squad")
    self.preprocessor = as_preprocessor_layer(preprocessor, config)
    self.max_query_length = int(max_query_length)
    if self.preprocessor is not None and (
        self.preprocessor.max_seq_length - self.max_query_length - 3 < 1):
      raise errors.ParamsError(
          "max_seq_length %d leaves no room for the context after a query of "
          "max_query_length %d (needs max_seq_length >= max_query_length + 4)"
          % (self.preprocessor.max_seq_length, self.max_query_length),
          argument="max_query_length")
    self.built = True  # every weight exists: .keras loading needs no build

  def extra_config(self) -> dict:
    """``preprocessor`` and ``max_query_length`` when the model has a
    preprocessor (:meth:`bert_tf.modeling.task_model.TaskModel.get_config`)."""
    out = super().extra_config()
    if "preprocessor" in out:
      out["max_query_length"] = self.max_query_length
    return out

  def text_features(self, x) -> dict:
    """``(question, context)`` -> the one window's ids [B, S] (see the call args)."""
    pre = self._require_preprocessor()
    question, context = text_pair(x, names=("question", "context"))
    if context is None:
      raise errors.ParamsError("BertQuestionAnswerer takes (question, context) text pairs",
                               argument="x")
    query_ids = pre.tokenize(question)[:, :self.max_query_length]
    return pre.pack([query_ids, pre.tokenize(context)], truncation="waterfall")

  def call(self, inputs, training=False):
    inputs = self._model_inputs(inputs)
    seq = self.encoder(inputs, training=training)["sequence_output"]  # [B, S, H]
    batch, length = tf.shape(seq)[0], tf.shape(seq)[1]
    logits = self.span_head(tf.reshape(seq, [-1, self.config.hidden_size]))
    logits = tf.reshape(logits, [batch, length, 2])  # float32
    return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}


def span_loss(start_logits, end_logits, start_positions, end_positions):
  """Per-example SQuAD loss of the original ``run_squad.model_fn``.

  ``(CE(start) + CE(end)) / 2`` where CE is the softmax cross-entropy over
  the sequence positions (the original's one-hot ``log_softmax`` sum, here
  the fused sparse kernel: same value). Its mean over the batch is the
  original's ``total_loss``.

  Args:
    start_logits, end_logits: float32 [B, S].
    start_positions, end_positions: int [B] (or [B, 1]) token positions in
      [0, S); 0 ([CLS]) for an unanswerable question or a span without the
      answer.

  Returns:
    float32 [B].
  """
  def ce(logits, positions):
    labels = tf.reshape(tf.cast(positions, tf.int32), [-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32))
  return (ce(start_logits, start_positions) + ce(end_logits, end_positions)) / 2.0


def masked_lm_loss(logits, masked_lm_ids, masked_lm_weights):
  """Original masked-LM loss: ``sum(w * CE) / (sum(w) + 1e-5)``.

  Args:
    logits: float32 [B, P, V].
    masked_lm_ids: int [B, P].
    masked_lm_weights: float [B, P] (1 real, 0 padding).

  Returns:
    ``(numerator, denominator)`` float32 scalars, so that callers can sum
    them across replicas before dividing.
  """
  # The fused softmax cross-entropy kernel: one pass over the [B, P, V]
  # logits forward and one backward (log_softmax + gather took ~5 passes).
  nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(masked_lm_ids, tf.int32), logits=logits)
  w = tf.cast(masked_lm_weights, tf.float32)
  return tf.reduce_sum(nll * w), tf.reduce_sum(w)


def next_sentence_loss(logits, next_sentence_labels):
  """Sum (not mean) of the next-sentence cross-entropy over the batch.

  Args:
    logits: float32 [B, 2]; next_sentence_labels: int [B] or [B, 1].

  Returns:
    float32 scalar; divide by the global batch size for the original's mean.
  """
  labels = tf.reshape(tf.cast(next_sentence_labels, tf.int32), [-1])
  return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits))


def build_pretrainer(config, nsp: bool = True) -> "BertPretrainer":
  """A :class:`BertPretrainer` with its weights created (one dummy call).

  Args:
    config: :class:`bert_tf.config.BertConfig`.
    nsp: build the next-sentence head too.

  Returns:
    the built model (float32 variables in the original layout).
  """
  model = BertPretrainer(config, nsp=nsp)
  dummy = model.encoder.dummy_inputs()
  dummy["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
  model(dummy)
  return model


def build_classifier(config, num_labels: int, skip_padding: bool = True,
                     **kwargs) -> "BertClassifier":
  """A :class:`BertClassifier` with its weights created (num_labels 1: regression).

  Args:
    config: :class:`bert_tf.config.BertConfig`.
    num_labels: number of classes (``output_weights`` [num_labels, H]).
    skip_padding: see :class:`BertClassifier`.
    **kwargs: the other :class:`BertClassifier` arguments (``window_pooling``,
      ``pool_logits``, ``problem_type``, ``id2label``).

  Returns:
    the built model.
  """
  model = BertClassifier(config, num_labels, skip_padding=skip_padding, **kwargs)
  model(model.encoder.dummy_inputs())
  return model


def build_question_answerer(config) -> "BertQuestionAnswerer":
  """A :class:`BertQuestionAnswerer` with its weights created (one dummy call).

  Args:
    config: :class:`bert_tf.config.BertConfig`.

  Returns:
    the built model (``cls/squad`` head: [2, H] weights, [2] bias).
  """
  model = BertQuestionAnswerer(config)
  model(model.encoder.dummy_inputs())
  return model
