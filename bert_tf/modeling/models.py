"""Heads and task models: masked LM, next sentence, classification.

Source: google-research/bert ``run_pretraining.py`` (``get_masked_lm_output``,
``get_next_sentence_output``) and ``run_classifier.py`` (``create_model``).
"""

import keras
import tensorflow as tf

from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import layers as bert_layers


def gather_indexes(sequence_tensor, positions):
  """Rows of ``sequence_tensor`` [B, S, H] at int ``positions`` [B, P] -> [B, P, H]."""
  return tf.gather(sequence_tensor, tf.cast(positions, tf.int32), batch_dims=1)


class MaskedLMHead(keras.layers.Layer):
  """Masked-LM head tied to the word embeddings (original ``cls/predictions``).

  dense(H, hidden_act) -> LayerNorm -> matmul with the word-embedding table
  transposed -> + ``output_bias`` [vocab_size].

  Call args:
    sequence_output: float [B, S, H].
    masked_lm_positions: int [B, P], or None when ``sequence_output`` is
      already the [B, P, H] rows at the masked positions.

  Returns:
    float32 logits [B, P, vocab_size].
  """

  def __init__(self, config, embeddings, **kwargs):
    super().__init__(**kwargs)
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


class DenseHead(keras.layers.Layer):
  """``logits = x @ output_weights^T + output_bias`` (original layout [N, H]).

  Used for next-sentence (``cls/seq_relationship``, N=2) and classification
  (``output_weights`` [num_labels, H]).

  Call args:
    x: float [B, H].

  Returns:
    float32 logits [B, N].
  """

  def __init__(self, config, num_outputs, **kwargs):
    super().__init__(**kwargs)
    self.num_outputs = num_outputs
    self.output_weights = self.add_weight(
        name="output_weights", shape=(num_outputs, config.hidden_size),
        initializer=bert_layers.initializer(config), autocast=False)
    self.output_bias = self.add_weight(name="output_bias", shape=(num_outputs,),
                                       initializer="zeros", autocast=False)

  def call(self, x):
    logits = tf.matmul(x, tf.cast(self.output_weights, x.dtype), transpose_b=True)
    return tf.cast(logits, tf.float32) + self.output_bias


class BertPretrainer(keras.Model):
  """Encoder + masked-LM head (+ next-sentence head unless ``nsp=False``).

  Call args:
    inputs: dict with ``input_ids``, ``input_mask``, ``segment_ids`` [B, S]
      and ``masked_lm_positions`` [B, P] (int).

  Returns:
    dict with ``masked_lm_logits`` float32 [B, P, vocab_size] and
    ``next_sentence_logits`` float32 [B, 2] (absent when ``nsp=False``).
  """

  def __init__(self, config, nsp=True, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.nsp = nsp
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.masked_lm = MaskedLMHead(config, self.encoder.embeddings,
                                  name="predictions")
    self.next_sentence = (DenseHead(config, 2, name="seq_relationship")
                          if nsp else None)

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


class BertClassifier(keras.Model):
  """Encoder + dropout on ``pooled_output`` + a dense head (original run_classifier).

  ``num_labels == 1`` makes a regression model (STS-B).

  Call args:
    inputs: dict with ``input_ids``, ``input_mask``, ``segment_ids`` [B, S].

  Returns:
    float32 logits [B, num_labels].
  """

  def __init__(self, config, num_labels, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.num_labels = num_labels
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.dropout = bert_layers.Dropout(config.hidden_dropout_prob)
    self.classifier = DenseHead(config, num_labels, name="classifier")

  def call(self, inputs, training=False):
    pooled = self.encoder(inputs, training=training)["pooled_output"]
    return self.classifier(self.dropout(pooled, training=training))


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


def build_classifier(config, num_labels: int) -> "BertClassifier":
  """A :class:`BertClassifier` with its weights created (num_labels 1: regression).

  Args:
    config: :class:`bert_tf.config.BertConfig`.
    num_labels: number of classes (``output_weights`` [num_labels, H]).

  Returns:
    the built model.
  """
  model = BertClassifier(config, num_labels)
  model(model.encoder.dummy_inputs())
  return model
