"""Heads and task models: masked LM, next sentence, classification, SQuAD spans.

Source: google-research/bert ``run_pretraining.py`` (``get_masked_lm_output``,
``get_next_sentence_output``), ``run_classifier.py`` (``create_model``) and
``run_squad.py`` (``create_model``).
"""

from typing import Optional

import keras
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling import presets


def gather_indexes(sequence_tensor, positions):
  """Rows of ``sequence_tensor`` [B, S, H] at int ``positions`` [B, P] -> [B, P, H]."""
  return tf.gather(sequence_tensor, tf.cast(positions, tf.int32), batch_dims=1)


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
class BertPretrainer(keras.Model):
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

  Example:
    >>> model = BertPretrainer(config_lib.preset("tiny"))
    >>> inputs = dict(model.encoder.dummy_inputs(batch=2, seq_len=16),
    ...               masked_lm_positions=tf.constant([[1, 2], [3, 4]]))
    >>> model(inputs)["masked_lm_logits"].shape
    TensorShape([2, 2, 30522])
    >>> model.save("/tmp/pretrainer.keras")  # doctest: +SKIP
    >>> model = BertPretrainer.from_preset("uncased_L-12_H-768_A-12")  # doctest: +SKIP
  """

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

  def get_config(self) -> dict:
    """Keras config: ``name``, ``trainable``, ``dtype``, ``config``, ``nsp``."""
    return dict(_model_base_config(self), config=self.config.to_dict(), nsp=self.nsp)

  @classmethod
  def from_config(cls, config: dict) -> "BertPretrainer":
    """Inverse of :meth:`get_config`."""
    return cls(**config)

  @classmethod
  def from_preset(cls, preset: str, nsp: bool = True,
                  config: "config_lib.BertConfig | None" = None,
                  **kwargs) -> "BertPretrainer":
    """A pretrainer with pretrained weights (see :meth:`BertEncoder.from_preset`).

    The heads (``cls/predictions``, ``cls/seq_relationship``) are loaded
    from an original ``bert_model.ckpt``, a Hugging Face
    ``BertForPreTraining`` directory, our pretraining runs and ``.keras``
    pretrainers; from an encoder-only checkpoint (a Hugging Face
    ``BertModel``, a classifier) only the encoder is, the heads keep their
    initialization.

    Args:
      preset: a path, see :meth:`BertEncoder.from_preset`.
      nsp: build the next-sentence head.
      config: the BertConfig when no ``bert_config.json`` sits beside
        ``preset``.
      **kwargs: model keyword arguments (``name``, ``dtype``).

    Returns:
      a :class:`BertPretrainer`.

    Raises:
      CheckpointError, ConfigError: as :meth:`BertEncoder.from_preset`.
    """
    return presets.load(preset, "pretrainer",
                        lambda c: cls(c, nsp=nsp, **kwargs), config)

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
class BertClassifier(keras.Model):
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

  Call args:
    inputs: dict with ``input_ids``, ``input_mask``, ``segment_ids`` [B, S].
    training: enables dropout.
    skip_padding: optional bool overriding the constructor's for this call.

  Returns:
    float32 logits [B, num_labels].

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.

  Example:
    >>> model = BertClassifier.from_preset("all-MiniLM-L6-v2/", num_labels=2)  # doctest: +SKIP
    >>> model.compile(optimizer="adam", metrics=["accuracy"],  # doctest: +SKIP
    ...     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> model.fit(train_ds, validation_data=dev_ds, epochs=3)  # doctest: +SKIP
    >>> model = BertClassifier(config_lib.preset("tiny"), num_labels=3)
    >>> model(model.encoder.dummy_inputs(batch=2)).shape
    TensorShape([2, 3])
  """

  def __init__(self, config: "config_lib.BertConfig | dict", num_labels: int,
               skip_padding: bool = True, **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.num_labels = num_labels
    self.skip_padding = bool(skip_padding)
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.dropout = bert_layers.Dropout(config.hidden_dropout_prob, name="dropout")
    self.classifier = DenseHead(config, num_labels, name="classifier")
    self.built = True  # every weight exists: .keras loading needs no build

  def get_config(self) -> dict:
    """Keras config: ``name``, ``trainable``, ``dtype``, ``config``,
    ``num_labels``, ``skip_padding``."""
    return dict(_model_base_config(self), config=self.config.to_dict(),
                num_labels=self.num_labels, skip_padding=self.skip_padding)

  @classmethod
  def from_config(cls, config: dict) -> "BertClassifier":
    """Inverse of :meth:`get_config`."""
    return cls(**config)

  @classmethod
  def from_preset(cls, preset: str, num_labels: Optional[int] = None,
                  config: "config_lib.BertConfig | None" = None,
                  **kwargs) -> "BertClassifier":
    """A classifier with pretrained weights (see :meth:`BertEncoder.from_preset`).

    The head is loaded too when the preset is a classifier (a ``.keras``
    classifier, our ``run_classifier`` output directory, or an original
    fine-tuned ``model.ckpt-N`` with ``output_weights``) of ``num_labels``
    classes; otherwise only the encoder is, the head keeps its
    initialization (TruncatedNormal(0.02) weights, zero bias).

    Args:
      preset: a path, see :meth:`BertEncoder.from_preset`.
      num_labels: number of classes; None takes the preset's (a fine-tuned
        one's), else raises.
      config: the BertConfig when no ``bert_config.json`` sits beside
        ``preset``.
      **kwargs: model keyword arguments (``name``, ``dtype``).

    Returns:
      a :class:`BertClassifier`.

    Raises:
      ConfigError: ``num_labels`` None and the preset is not a classifier.
      CheckpointError: as :meth:`BertEncoder.from_preset`.
    """
    if num_labels is None:
      num_labels = presets.run_num_labels(preset)
      if num_labels is None:
        raise errors.ConfigError(
            "BertClassifier.from_preset(%r): pass num_labels (the preset is "
            "not a fine-tuned classifier)" % preset, argument="num_labels")
    return presets.load(preset, "classifier",
                        lambda c: cls(c, num_labels, **kwargs), config)

  def call(self, inputs, training=False, skip_padding=None):
    skip = self.skip_padding if skip_padding is None else skip_padding
    pooled = self.encoder(inputs, training=training,
                          skip_padding=skip)["pooled_output"]
    return self.classifier(self.dropout(pooled, training=training))


@bert_layers.serializable
class BertQuestionAnswerer(keras.Model):
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

  Call args:
    inputs: dict with int32 (or int64) ``input_ids``, ``input_mask``,
      ``segment_ids``, each [B, S].
    training: enables dropout.
    skip_padding: optional bool overriding the constructor's for this call.

  Returns:
    dict with ``start_logits`` and ``end_logits``, float32 [B, S] (float32
    under a mixed dtype policy too).

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.

  Example:
    >>> model = BertQuestionAnswerer(config_lib.preset("tiny"))
    >>> out = model(model.encoder.dummy_inputs(batch=2, seq_len=16))
    >>> out["start_logits"].shape, out["end_logits"].dtype
    (TensorShape([2, 16]), tf.float32)
    >>> model = BertQuestionAnswerer.from_preset("hf_squad_dir/")  # doctest: +SKIP
    >>> model.save("/tmp/squad.keras")  # doctest: +SKIP
  """

  def __init__(self, config: "config_lib.BertConfig | dict", **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.span_head = DenseHead(config, 2, name="squad")
    self.built = True  # every weight exists: .keras loading needs no build

  def get_config(self) -> dict:
    """Keras config: ``name``, ``trainable``, ``dtype``, ``config``."""
    return dict(_model_base_config(self), config=self.config.to_dict())

  @classmethod
  def from_config(cls, config: dict) -> "BertQuestionAnswerer":
    """Inverse of :meth:`get_config`."""
    return cls(**config)

  @classmethod
  def from_preset(cls, preset: str,
                  config: "config_lib.BertConfig | None" = None,
                  **kwargs) -> "BertQuestionAnswerer":
    """A question answerer with pretrained weights (see :meth:`BertEncoder.from_preset`).

    The span head is loaded too when the preset has one: a Hugging Face
    ``BertForQuestionAnswering`` directory (``qa_outputs.weight`` [2, H],
    ``qa_outputs.bias``; its missing pooler keeps its initialization, it is
    not used), an original fine-tuned ``run_squad.py`` checkpoint
    (``cls/squad/output_weights``, ``cls/squad/output_bias``), our
    ``run_squad`` runs and ``.keras`` question answerers. From any other
    checkpoint only the encoder is loaded and the head keeps its
    initialization.

    Args:
      preset: a path, see :meth:`BertEncoder.from_preset`.
      config: the BertConfig when no ``bert_config.json`` sits beside
        ``preset``.
      **kwargs: model keyword arguments (``name``, ``dtype``).

    Returns:
      a :class:`BertQuestionAnswerer`.

    Raises:
      CheckpointError: nothing loadable at ``preset``, weights that do not
        fit the config, or only one of the two head weights present.
      ConfigError: no config found, or an invalid one.
    """
    kind, path, _ = presets.resolve(preset)
    if kind == "hf":
      cfg = (config_lib.as_bert_config(config) if config is not None
             else checkpoints.read_hf_config(path))
      model = cls(cfg, **kwargs)
      checkpoints.load_question_answerer_weights(model, path)
      return model
    model = presets.load(preset, "question_answerer",
                         lambda c: cls(c, **kwargs), config)
    if kind == "ckpt" and checkpoints.is_tf1_checkpoint(path):
      checkpoints.load_tf1_squad_head(model, path)
    return model

  def call(self, inputs, training=False):
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


def _model_base_config(model):
  """The base keys of a subclassed model's config (``name``, ``trainable``,
  ``dtype``), without Keras' inferred constructor arguments."""
  return {"name": model.name, "trainable": model.trainable,
          "dtype": keras.saving.serialize_keras_object(model.dtype_policy)}


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


def build_classifier(config, num_labels: int, skip_padding: bool = True) -> "BertClassifier":
  """A :class:`BertClassifier` with its weights created (num_labels 1: regression).

  Args:
    config: :class:`bert_tf.config.BertConfig`.
    num_labels: number of classes (``output_weights`` [num_labels, H]).
    skip_padding: see :class:`BertClassifier`.

  Returns:
    the built model.
  """
  model = BertClassifier(config, num_labels, skip_padding=skip_padding)
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
