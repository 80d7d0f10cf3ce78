"""``TaskModel``: the base of the encoder-headed Keras models.

keras-hub's shape (``keras_hub/src/models/task.py``: one ``from_preset`` on
the ``Task`` base; the subclass's backbone and preprocessor classes decide
what differs): :meth:`TaskModel.from_preset`, :meth:`TaskModel.get_config`
and :meth:`TaskModel.from_run_settings` are written once here, and a
subclass (``BertPretrainer``, ``BertClassifier``, ``BertQuestionAnswerer``
in :mod:`bert_tf.modeling.models`; ``BertTokenClassifier``;
``BertMultipleChoice``) declares what differs:

* :attr:`TaskModel.preset_task`: its head spec
  (:class:`bert_tf.modeling.presets.Task`: the head's names in each preset
  source and its task kind, :mod:`bert_tf.task_kinds`);
* :attr:`TaskModel.config_fields`: the constructor arguments ``get_config``
  writes beside ``config`` (``id2label`` and ``preprocessor`` are written
  when the model has them);
* :attr:`TaskModel.label_fields`: the label arguments a fine-tuned preset
  supplies (``num_labels``, ``id2label``, ``problem_type``), empty for a
  model without labels;
* :attr:`TaskModel.takes_preprocessor`: whether it takes text through a
  :class:`bert_tf.preprocessing.PreprocessorLayer`;
* :meth:`TaskModel.preset_reading`: how it reads a text longer than one
  window, from ``from_preset``'s ``long_document`` and the preset's record
  (only :class:`~bert_tf.modeling.models.BertClassifier` reads long
  documents; the others refuse the argument);
* :meth:`TaskModel.run_settings_kwargs`: its constructor arguments from a
  run's settings file.

Every refusal raises one :mod:`bert_tf.errors` class (each a ``ValueError``)
naming the argument.
"""

import os
from typing import Optional, Tuple

import keras

from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf.modeling import presets


# Why a model class other than BertClassifier takes no long_document.
NOT_LONG_DOCUMENTS = (
    "long_document is BertClassifier's: question answering, token classification "
    "(NER) and multiple choice pick which window already, their own way (SQuAD's "
    "doc_stride windows, one window a choice)")


def base_config(model: keras.Model) -> dict:
  """The base keys of a subclassed model's Keras config (``name``,
  ``trainable``, ``dtype``), without Keras' inferred constructor arguments."""
  return {"name": model.name, "trainable": model.trainable,
          "dtype": keras.saving.serialize_keras_object(model.dtype_policy)}


def check_num_labels(num_labels) -> int:
  """``num_labels`` as an int, at least 1.

  Raises:
    ParamsError: fewer than one label (argument ``num_labels``).
  """
  if num_labels is None or int(num_labels) < 1:
    raise errors.ParamsError("num_labels must be at least 1, got %r" % (num_labels,),
                             argument="num_labels")
  return int(num_labels)


class TaskModel(keras.Model):
  """An encoder (``self.encoder``, a :class:`BertEncoder` built from
  ``self.config``) and a head, saved to ``.keras``, built by ``from_preset``.

  Subclasses set ``self.config`` (a :class:`bert_tf.config.BertConfig`)
  and build every weight in their constructor, and declare the class
  attributes below (see the module docstring).

  Attributes:
    preset_task: the head spec :meth:`from_preset` and
      :func:`bert_tf.modeling.presets.load_weights` load (default: the
      encoder only).
    config_fields: constructor arguments :meth:`get_config` writes.
    label_fields: label arguments a fine-tuned preset supplies
      (``("num_labels", "id2label")``); empty: the model has no labels.
    takes_preprocessor: the constructor takes ``preprocessor=``.
    reads_long_documents: the model reads a text longer than one window by
      a ``long_document`` method (:meth:`preset_reading`); the others refuse
      ``from_preset(..., long_document=)``.

  Example::

    class MyTagger(TaskModel):
      preset_task = tagging.TAGGING_TASK
      config_fields = ("num_labels",)
      label_fields = ("num_labels", "id2label")

    model = MyTagger.from_preset("runs/ner", preprocessor=True)
  """

  preset_task: presets.Task = presets.ENCODER
  config_fields: Tuple[str, ...] = ()
  label_fields: Tuple[str, ...] = ()
  takes_preprocessor: bool = True
  reads_long_documents: bool = False

  def get_config(self) -> dict:
    """Keras config: ``name``, ``trainable``, ``dtype``, ``config`` (the
    BertConfig dict), each of :attr:`config_fields`, ``id2label``
    (``{"0": name, ...}``) when named and ``preprocessor`` when the model
    has one (:meth:`extra_config`)."""
    return dict(base_config(self), config=self.config.to_dict(), **self.extra_config())

  def extra_config(self) -> dict:
    """The config beside the base keys and ``config`` (see :meth:`get_config`)."""
    out = {name: getattr(self, name) for name in self.config_fields}
    id2label = getattr(self, "id2label", None)
    if id2label is not None:
      out["id2label"] = {str(i): n for i, n in sorted(id2label.items())}
    if getattr(self, "preprocessor", None) is not None:
      out["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
    return out

  @classmethod
  def from_config(cls, config: dict) -> "TaskModel":
    """Inverse of :meth:`get_config` (``.keras`` files of every version)."""
    return cls(**config)

  @classmethod
  def from_preset(cls, preset, config: "config_lib.BertConfig | dict | None" = None,
                  preprocessor=None, max_seq_length: Optional[int] = None,
                  long_document=None, **kwargs) -> "TaskModel":
    """The model with a preset's weights: the encoder, and the head where the
    preset has this class's (:attr:`preset_task`).

    A preset is a Hugging Face directory (``config.json`` + weights) or
    ``hf://ORG/NAME[@REVISION]``; an original google-research/bert release
    directory (``bert_config.json`` + ``bert_model.ckpt``) or checkpoint
    prefix (a fine-tuned ``model.ckpt-N`` with its head); one of our run
    directories (its model is ``best/`` when the run kept one, else its
    newest checkpoint: :func:`bert_tf.run_dir.model_checkpoint`) or
    checkpoint prefixes; a ``.keras`` file of any bert_tf model
    (:func:`bert_tf.modeling.presets.get_preset_loader`, read once). A
    preset without this class's head gives the encoder; the head keeps its
    initialization (one line says so for a Hugging Face directory).

    Args:
      preset: the path (str or PathLike).
      config: a BertConfig (or dict) when the preset has none beside it.
      preprocessor: True: the preset's own (its vocab, casing and recorded
        length: :meth:`bert_tf.modeling.presets.PresetLoader.preprocessor`);
        a ``BertPreprocessor`` / ``PreprocessorLayer``; None: ids only.
      max_seq_length: with ``preprocessor=True``, its length (3 ..
        ``max_position_embeddings``; keras-hub's ``sequence_length``).
      long_document: how a text longer than one window is read
        (:class:`~bert_tf.modeling.models.BertClassifier` only: a
        :class:`~bert_tf.modeling.long_document.LongDocument`, its dict or a
        method name; :meth:`preset_reading`). None: the preset's own
        settings with ``preprocessor=True`` (a ``.keras`` file's, a run's
        ``classifier_config.json``, ``config.json``'s
        ``bert_tf_long_document``), else the original's first tokens.
      **kwargs: constructor arguments (``name``, ``dtype``, ``num_labels``,
        ``id2label``, ``problem_type``, ``nsp``, ...). A model with labels
        takes ``num_labels`` from a fine-tuned preset when not given, and
        then its label names and ``problem_type``.

    Returns:
      an instance of the class, weights loaded.

    Raises:
      CheckpointError: nothing loadable, weights that do not fit the
        config, half a head, another task's head under this head's names,
        a ``num_labels`` that disagrees with the preset's head.
      ConfigError: no config found or an invalid one; ``num_labels`` not
        given and the preset records none (argument ``num_labels``);
        ``preprocessor=True`` and the preset has no vocab.
      ParamsError: ``max_seq_length`` out of range or without
        ``preprocessor=True``; a preprocessor for a model that takes none;
        a ``long_document`` for a class that reads none, without a
        preprocessor, or that does not fit its length.
    """
    if long_document is not None and not cls.reads_long_documents:
      # Before the preset is read: one line, no work.
      raise errors.ParamsError("%s.from_preset(%r, long_document=%r): %s" % (
          cls.__name__, os.fspath(preset), long_document, NOT_LONG_DOCUMENTS),
          argument="long_document")
    if long_document is not None and not preprocessor:
      raise errors.ParamsError("%s.from_preset(%r, long_document=%r) reads text: pass "
                               "preprocessor=True too" % (
                                   cls.__name__, os.fspath(preset), long_document),
                               argument="long_document")
    loader = presets.get_preset_loader(preset)
    if cls.label_fields:
      cls._preset_labels(loader, preset, kwargs)
    if cls.takes_preprocessor:
      kwargs["preprocessor"] = loader.preprocessor(preprocessor, max_seq_length)
    elif preprocessor is not None or max_seq_length is not None:
      raise errors.ParamsError("%s takes token ids, not text: from_preset(%r) takes no "
                               "preprocessor or max_seq_length" % (cls.__name__, preset),
                               argument="preprocessor")
    if cls.reads_long_documents:
      cls.preset_reading(loader, kwargs, long_document, own_preprocessor=preprocessor is True)
    return loader.build(lambda c: cls(c, **kwargs), cls.preset_task, config)

  @classmethod
  def preset_reading(cls, loader: presets.PresetLoader, kwargs: dict, given,
                     own_preprocessor: bool) -> None:
    """Sets ``kwargs``' long-document arguments for :meth:`from_preset`
    (a class with :attr:`reads_long_documents` defines it).

    Args:
      loader: the preset's loader (:meth:`PresetLoader.long_document`,
        :meth:`PresetLoader.window_settings`).
      kwargs: the constructor arguments so far (``preprocessor`` set).
      given: ``from_preset``'s ``long_document`` (None: the preset's).
      own_preprocessor: ``preprocessor=True`` (the preset's own).
    """
    raise NotImplementedError

  @classmethod
  def _preset_labels(cls, loader: presets.PresetLoader, preset, kwargs: dict) -> None:
    """Sets ``kwargs``' ``num_labels`` (given, else the preset's) and, for a
    preset whose head has that many, its ``id2label`` and ``problem_type``
    (those of :attr:`label_fields` not given).

    Raises:
      ConfigError: no ``num_labels`` given or recorded.
    """
    task = cls.preset_task
    recorded = loader.num_labels(task)
    if kwargs.get("num_labels") is None:
      if recorded is None:
        raise errors.ConfigError("%s.from_preset(%r): %s; pass num_labels" % (
            cls.__name__, preset, loader.missing_labels_reason(task)), argument="num_labels")
      kwargs["num_labels"] = recorded
    if recorded != kwargs["num_labels"]:
      return
    readers = {"id2label": loader.labels, "problem_type": loader.problem_type}
    for name in cls.label_fields:
      if name in readers and kwargs.get(name) is None:
        kwargs[name] = readers[name](task)

  @classmethod
  def run_settings_kwargs(cls, settings: dict) -> dict:
    """The constructor arguments a run's settings file gives (default: none).

    Args:
      settings: the run's settings (``classifier_config.json``, ...).

    Raises:
      ConfigError: settings without what the class needs (argument
        ``labels``).
    """
    del settings
    return {}

  @classmethod
  def from_run_settings(cls, config: "config_lib.BertConfig | dict",
                        settings: dict) -> "TaskModel":
    """The model a run of this class trains, with fresh weights (every
    weight made: restore a checkpoint into it).

    Code that rebuilds a run's model needs no per-kind branch:
    ``task_kinds.get(kind).attribute("model_class").from_run_settings(config,
    run_config)``.

    Args:
      config: the run's ``bert_config.json`` (a BertConfig or dict).
      settings: the run's settings file as a dict (``classifier_config.json``:
        ``labels``, ``is_regression``, ``multi_label``; ``ner_config.json``:
        ``labels``; SQuAD and SWAG: nothing is read).

    Returns:
      an instance of the class (default constructor arguments otherwise).

    Raises:
      ConfigError: a settings file without the labels the head needs.
    """
    return cls(config_lib.as_bert_config(config), **cls.run_settings_kwargs(settings))


def run_labels(settings: dict, cls_name: str) -> list:
  """The ``labels`` list of a run's settings (label names in id order).

  Raises:
    ConfigError: none recorded (argument ``labels``).
  """
  labels = settings.get("labels")
  if not labels:
    raise errors.ConfigError("%s.from_run_settings: the run's settings record no labels"
                             % cls_name, argument="labels")
  return [str(l) for l in labels]
