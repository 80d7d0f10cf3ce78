"""``BertMultipleChoice``: one score per choice, softmax over the choices
(paper section 4.4, SWAG).

Source: the paper, section 4.4 ("we construct four input sequences, each
containing the concatenation of the given sentence (sentence A) and a
possible continuation (sentence B). The only task-specific parameters
introduced is a vector whose dot product with the [CLS] token
representation C denotes a score for each choice which is normalized with a
softmax layer"); the layout of Hugging Face ``BertForMultipleChoice``
(``classifier.weight`` [1, H], ``classifier.bias`` [1], dropout on the
pooled output, which the original code, having no SWAG script, lacks).
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import huggingface
from bert_tf import preprocessing
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling import models
from bert_tf.modeling import presets
from bert_tf.modeling import task_model

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
# Hugging Face BertForMultipleChoice head -> our head variables (no transpose:
# classifier.weight is [1, H], our output_weights too).
HF_HEAD = checkpoints.HF_CLASSIFIER_HEAD


def load_hf_multiple_choice_head(model: "BertMultipleChoice",
                                 model_dir: "str | huggingface.Tensors") -> bool:
  """Loads a Hugging Face ``BertForMultipleChoice`` head (``classifier``).

  Returns:
    True when the directory had the head, False when it has none (e.g. a
    plain ``BertModel``).

  Raises:
    CheckpointError: unreadable file, half a head (``classifier.weight``
      without ``classifier.bias`` or the reverse), or a shape mismatch.
  """
  return checkpoints.load_hf_dense_head(
      model.classifier, model_dir, "multiple-choice head",
      "a BertForMultipleChoice head is [1, hidden] and [1]")


# What from_preset and --init_checkpoint read beyond the encoder (see
# presets.Task): the head of a Hugging Face BertForMultipleChoice; the score
# reads the pooler.
MULTIPLE_CHOICE_TASK = presets.Task(
    "multiple_choice", head_name="the multiple-choice head",
    load_hf_head=load_hf_multiple_choice_head,
    hf_head=tuple(HF_HEAD.values()), kind="swag")


@bert_layers.serializable
class BertMultipleChoice(models.TextInputsMixin, task_model.TaskModel):
  """Encoder over every choice + dropout + a one-output dense head.

  ``inputs`` [B, N, S] are flattened to [B*N, S], the encoder's
  ``pooled_output`` [B*N, H] goes through dropout (``hidden_dropout_prob``)
  and :class:`~bert_tf.modeling.models.DenseHead` with one output
  (``output_weights`` [1, H], TruncatedNormal(initializer_range); 
  ``output_bias`` [1], zeros), and the scores are reshaped to logits
  [B, N]. N is taken from the inputs: the same weights score any number of
  choices (as Hugging Face ``BertForMultipleChoice``). Sub-layers ``bert``
  (:class:`BertEncoder`), ``dropout``, ``classifier``. Saves to ``.keras``.

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict.
    skip_padding: True (default): the encoder's row-wise steps skip the
      padding positions (``BertEncoder(..., skip_padding=True)``); the
      logits equal the padded computation's up to float summation order,
      and a batch padded to its longest row takes about the token share of
      the time. False: the original's computation on every position.
    preprocessor: optional :class:`bert_tf.preprocessing.BertPreprocessor`:
      the model then also takes raw text (``fit``/``evaluate``/``predict``,
      see :class:`bert_tf.modeling.models.TextInputsMixin`); part of the
      config, its vocab a ``.keras`` asset.

  Call args:
    inputs: dict with int32 (or int64) ``input_ids``, ``input_mask``,
      ``segment_ids``, each [B, N, S]; or, with a preprocessor, text:
      ``(context, endings)`` or ``{"context": ..., "endings": ...}`` with
      ``context`` string [B] and ``endings`` string [B, N], packed
      ``[CLS] context [SEP] ending [SEP]`` per choice by
      :func:`choice_features` (the multiple-choice SavedModel's
      preprocessing).
    training: enables dropout.
    skip_padding: optional bool overriding the constructor's for this call.

  Returns:
    float32 logits [B, N] (float32 under a mixed dtype policy too); the
    choice probabilities are their softmax over N.

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.

  ``from_preset`` (:meth:`bert_tf.modeling.task_model.TaskModel.from_preset`)
  loads the head too when the preset has one: a Hugging Face
  ``BertForMultipleChoice`` directory (``classifier.weight`` [1, H],
  ``classifier.bias`` [1]), our ``run_swag`` runs and ``.keras``
  multiple-choice models; from any other preset (a Hugging Face
  ``BertModel``, an original ``bert_model.ckpt``, a pretraining run) only
  the encoder (pooler included), the head keeping its initialization.

  Example:
    >>> model = BertMultipleChoice(config_lib.preset("tiny"))
    >>> x = {k: tf.zeros([2, 4, 16], tf.int32) for k in FEATURE_NAMES}
    >>> model(x).shape
    TensorShape([2, 4])
    >>> model = BertMultipleChoice.from_preset("hf_swag_dir/")  # doctest: +SKIP
  """

  # What a truncation warning counts: each choice is packed on its own.
  cut_unit = "choice sequences"
  preset_task = MULTIPLE_CHOICE_TASK
  config_fields = ("skip_padding",)

  def __init__(self, config: "config_lib.BertConfig | dict",
               skip_padding: bool = True, preprocessor=None, **kwargs):
    super().__init__(**kwargs)
    self.skip_padding = bool(skip_padding)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.dropout = bert_layers.Dropout(config.hidden_dropout_prob, name="dropout")
    self.classifier = models.DenseHead(config, 1, name="classifier")
    self.preprocessor = models.as_preprocessor_layer(preprocessor, config)
    self.built = True  # every weight exists: .keras loading needs no build

  def text_features(self, x) -> dict:
    """``(context [B], endings [B, N])`` -> ids [B, N, S] (:func:`choice_features`)."""
    context, endings = (x["context"], x["endings"]) if isinstance(x, dict) else x
    return choice_features(self._require_preprocessor(), context, endings)

  def call(self, inputs, training=False, skip_padding=None):
    inputs = self._model_inputs(inputs)
    ids = inputs["input_ids"]
    shape = tf.shape(ids)
    batch, choices, length = shape[0], shape[1], shape[2]
    flat = {k: tf.reshape(inputs[k], [batch * choices, length]) for k in FEATURE_NAMES}
    skip = self.skip_padding if skip_padding is None else skip_padding
    pooled = self.encoder(flat, training=training,
                          skip_padding=skip)["pooled_output"]  # [B*N, H]
    scores = self.classifier(self.dropout(pooled, training=training))  # [B*N, 1]
    return tf.reshape(scores, [batch, choices])


def choice_features(preprocessor: preprocessing.BertPreprocessor, context,
                    endings) -> dict:
  """Every choice packed ``[CLS] context [SEP] ending [SEP]`` (paper section
  4.4): the preprocessing of the multiple-choice model's text input, the
  SWAG task and the SavedModel (:mod:`bert_tf.export.multiple_choice`).

  Args:
    preprocessor: the :class:`BertPreprocessor` (pairs truncated as the
      original's ``_truncate_seq_pair``).
    context: string [B] (one context for all N choices), or [B, N] (a
      context per choice, as :func:`bert_tf.data.swag.choice_arrays` gives).
    endings: string [B, N].

  Returns:
    dict of int32 [B, N, S'] (``input_ids``, ``input_mask``,
    ``segment_ids``), S' = the longest packed choice of the batch
    (:func:`bert_tf.preprocessing.trim_to_longest`).
  """
  context = tf.convert_to_tensor(context)
  endings = tf.convert_to_tensor(endings)
  batch, n = tf.shape(endings)[0], tf.shape(endings)[1]
  if context.shape.rank == 2:  # a context per choice
    contexts = tf.reshape(context, [-1])
  else:
    contexts = tf.reshape(tf.repeat(tf.reshape(context, [-1]), n), [-1])  # [B*N], row-major
  features = preprocessing.trim_to_longest(
      preprocessor(contexts, tf.reshape(endings, [-1])))
  seq = tf.shape(features["input_ids"])[1]
  return {k: tf.reshape(v, [batch, n, seq]) for k, v in features.items()}


def choice_loss(logits, labels):
  """Per-example softmax cross-entropy over the choices (paper section 4.4).

  Args:
    logits: float [B, N]; labels: int [B] (or [B, 1]) in 0..N-1.

  Returns:
    float32 [B].
  """
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.reshape(tf.cast(labels, tf.int32), [-1]),
      logits=tf.cast(logits, tf.float32))


def build_multiple_choice(config, skip_padding: bool = True) -> BertMultipleChoice:
  """A :class:`BertMultipleChoice` with its weights created.

  Args:
    config: :class:`bert_tf.config.BertConfig`.
    skip_padding: see :class:`BertMultipleChoice`.

  Returns:
    the model (head ``output_weights`` [1, H], ``output_bias`` [1]).
  """
  return BertMultipleChoice(config, skip_padding=skip_padding)
