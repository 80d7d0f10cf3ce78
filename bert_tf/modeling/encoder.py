"""``BertEncoder``: embeddings, L transformer blocks and the pooler.

Source: google-research/bert ``modeling.BertModel``; paper section 3.
"""

import keras
import tensorflow as tf

from bert_tf.modeling import layers as bert_layers

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


class BertEncoder(keras.layers.Layer):
  """The BERT encoder as one Keras 3 layer.

  Args:
    config: a :class:`bert_tf.config.BertConfig`.

  Call args:
    inputs: dict with int32 (or int64) ``input_ids``, ``input_mask``,
      ``segment_ids``, each [B, S]; S <= ``max_position_embeddings``.
    training: enables dropout.
    output_positions: optional int [B, Q] whose first column is 0: the last
      block computes only these positions (see
      :class:`~bert_tf.modeling.layers.TransformerBlock`); for pretraining,
      where only [CLS] and the masked positions are read.

  Returns:
    dict with ``sequence_output`` float [B, S, H] (last layer; [B, Q, H] at
    ``output_positions`` when given), ``pooled_output`` float [B, H] (dense
    + tanh on position 0), ``encoder_outputs`` list of L float [B, S, H]
    (every block's output; the last one [B, Q, H] with ``output_positions``)
    and ``embedding_output`` float [B, S, H].
  """

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.embeddings = bert_layers.BertEmbeddings(config, name="embeddings")
    # One named attribute per block: Keras 3 keeps a list attribute out of
    # tf.train.Checkpoint's dependencies, which would silently skip the blocks.
    for i in range(config.num_hidden_layers):
      setattr(self, "layer_%d" % i,
              bert_layers.TransformerBlock(config, name="layer_%d" % i))
    self.pooler = keras.layers.Dense(
        config.hidden_size, activation="tanh",
        kernel_initializer=bert_layers.initializer(config), name="pooler")
    self.pooler.build((None, config.hidden_size))

  def call(self, inputs, training=False, output_positions=None):
    input_ids = tf.cast(inputs["input_ids"], tf.int32)
    segment_ids = tf.cast(inputs["segment_ids"], tf.int32)
    input_mask = inputs["input_mask"]
    x = self.embeddings(input_ids, segment_ids, training=training)
    embedding_output = x
    input_mask = tf.cast(input_mask, tf.int32)
    outputs = []
    blocks = self.blocks
    for i, block in enumerate(blocks):
      last = i == len(blocks) - 1
      x = block(x, input_mask, training=training,
                query_positions=output_positions if last else None)
      outputs.append(x)
    pooled = self.pooler(x[:, 0, :])
    return {"sequence_output": x, "pooled_output": pooled,
            "encoder_outputs": outputs, "embedding_output": embedding_output}

  @property
  def blocks(self):
    """The L :class:`TransformerBlock` layers, in order."""
    return [getattr(self, "layer_%d" % i)
            for i in range(self.config.num_hidden_layers)]

  @property
  def word_embeddings(self):
    """The word-embedding table [vocab_size, H] (tied to the masked-LM output)."""
    return self.embeddings.word_embeddings

  def dummy_inputs(self, batch=1, seq_len=8):
    """Zero inputs of the right dtypes, for building weights."""
    z = tf.zeros([batch, seq_len], tf.int32)
    return {"input_ids": z, "input_mask": tf.ones_like(z), "segment_ids": z}
