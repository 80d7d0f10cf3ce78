"""``BertEncoder``: embeddings, L transformer blocks and the pooler.

Source: google-research/bert ``modeling.BertModel``; paper section 3.
"""

import keras
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling import presets

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


@bert_layers.serializable
class BertEncoder(keras.layers.Layer):
  """The BERT encoder as one Keras 3 layer.

  Sub-layers: ``embeddings`` (:class:`BertEmbeddings`), ``layer_0`` ..
  ``layer_{L-1}`` (:class:`TransformerBlock`) and ``pooler`` (Dense + tanh),
  all built in the constructor; ``get_config`` stores the BertConfig dict, so
  ``keras.models.load_model`` restores it from a ``.keras`` file.

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict.

  Call args:
    inputs: dict with int32 (or int64) ``input_ids``, ``input_mask``,
      ``segment_ids``, each [B, S]; S <= ``max_position_embeddings``.
    training: enables dropout.
    output_positions: optional int [B, Q] whose first column is 0: the last
      block computes only these positions (see
      :class:`~bert_tf.modeling.layers.TransformerBlock`); for pretraining,
      where only [CLS] and the masked positions are read.
    skip_padding: Python bool. True: every row-wise step (the projections,
      the feed-forward layers, LayerNorm, dropout) of every block runs on
      the tokens only (``input_mask`` 1), not on the padding; attention
      still sees the [B, S] layout. The token rows and ``pooled_output``
      equal the default's up to float summation order (tested); padding
      rows of ``sequence_output`` and ``encoder_outputs`` are zeros instead
      of the original's values, which no head of the original reads. On
      batches padded to their longest row the saving is the padding share
      (about half the rows of a NER or SWAG batch). At inference a batch
      without padding takes the default path. In training every batch
      takes the tokens-only path (~4% slower on a batch without padding;
      a batch without any token raises ``InvalidArgumentError``). Default
      False: the original's computation.

  Returns:
    dict with ``sequence_output`` float [B, S, H] (last layer; [B, Q, H] at
    ``output_positions`` when given), ``pooled_output`` float [B, H] (dense
    + tanh on position 0), ``encoder_outputs`` list of L float [B, S, H]
    (every block's output; the last one [B, Q, H] with ``output_positions``)
    and ``embedding_output`` float [B, S, H].

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.

  Example:
    >>> encoder = BertEncoder(config_lib.preset("tiny"), name="bert")
    >>> out = encoder(encoder.dummy_inputs(batch=2, seq_len=8))
    >>> out["pooled_output"].shape
    TensorShape([2, 128])
    >>> encoder = BertEncoder.from_preset("uncased_L-2_H-128_A-2")  # doctest: +SKIP
  """

  def __init__(self, config: "config_lib.BertConfig | dict", **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
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
    self.built = True  # every weight exists: .keras loading needs no build

  def get_config(self) -> dict:
    """Keras config: the base keys plus ``config`` (the BertConfig dict)."""
    return dict(super().get_config(), config=self.config.to_dict())

  @classmethod
  def from_preset(cls, preset: str, config: "config_lib.BertConfig | None" = None,
                  **kwargs) -> "BertEncoder":
    """An encoder with pretrained weights, from a directory or file.

    Args:
      preset: a Hugging Face BERT directory (``config.json`` +
        ``model.safetensors``); an original google-research/bert directory
        (``bert_config.json`` + ``bert_model.ckpt.*``) or checkpoint
        prefix; one of our run directories (``bert_config.json`` + our
        checkpoints; ``best/`` preferred when present) or checkpoint
        prefix; or a ``.keras`` file (of any bert_tf model: its encoder).
      config: the BertConfig when ``preset`` is a checkpoint prefix without
        a ``bert_config.json`` beside it.
      **kwargs: layer keyword arguments (``name``, ``dtype``).

    Returns:
      a :class:`BertEncoder` (float32 weights in the original layout).

    Raises:
      CheckpointError: nothing loadable at ``preset``, or weights that do
        not fit the config.
      ConfigError: no config found, or an invalid one.
    """
    kwargs.setdefault("name", "bert")
    return presets.get_preset_loader(preset).build(lambda c: cls(c, **kwargs),
                                                   presets.ENCODER, config)

  @property
  def layers(self) -> list:
    """Sub-layers in order: embeddings, layer_0 .. layer_{L-1}, pooler.

    (``model.summary(expand_nested=True)`` lists them.)
    """
    return [self.embeddings] + self.blocks + [self.pooler]

  def call(self, inputs, training=False, output_positions=None, skip_padding=False):
    input_ids = tf.cast(inputs["input_ids"], tf.int32)
    segment_ids = tf.cast(inputs["segment_ids"], tf.int32)
    input_mask = inputs["input_mask"]
    x = self.embeddings(input_ids, segment_ids, training=training)
    embedding_output = x
    input_mask = tf.cast(input_mask, tf.int32)
    blocks = self.blocks

    def every_row(x):
      outputs = []
      for i, block in enumerate(blocks):
        last = i == len(blocks) - 1
        x = block(x, input_mask, training=training,
                  query_positions=output_positions if last else None)
        outputs.append(x)
      return x, outputs

    if skip_padding and training is True:
      x, outputs = self._call_tokens_only(x, input_mask, training, output_positions)
    elif skip_padding:
      # At inference a batch without padding (every batch of one) takes the
      # plain path, where the gathers would only add copies; so does one
      # without tokens. (Not in training: TF cannot differentiate the custom
      # GELU gradient inside a cond.)
      tokens = tf.math.count_nonzero(input_mask, dtype=tf.int32)
      plain = tf.logical_or(tf.equal(tokens, tf.size(input_mask)), tf.equal(tokens, 0))
      x, outputs = tf.cond(
          plain, lambda: every_row(x),
          lambda: self._call_tokens_only(x, input_mask, training, output_positions))
    else:
      x, outputs = every_row(x)
    pooled = self.pooler(x[:, 0, :])
    return {"sequence_output": x, "pooled_output": pooled,
            "encoder_outputs": outputs, "embedding_output": embedding_output}

  def _call_tokens_only(self, x, input_mask, training, output_positions):
    """The blocks on the token rows only (``skip_padding``): [B, S, H] in,
    (last output, every block's output) out, padding rows zeros."""
    token_rows = bert_layers.TokenRows.from_mask(input_mask)
    shape = tf.shape(x)
    rows = token_rows.to_rows(tf.reshape(x, [-1, shape[2]]))  # [N, H]

    def padded(r):
      return tf.reshape(token_rows.to_zero_padded(r), shape)

    blocks = self.blocks
    if output_positions is not None:  # the last block needs the [B, S] layout
      blocks = blocks[:-1]
    outputs = []
    for block in blocks:
      rows = block(rows, input_mask, training=training, token_rows=token_rows)
      outputs.append(padded(rows))
    if output_positions is not None:
      outputs.append(self.blocks[-1](outputs[-1] if outputs else x, input_mask,
                                     training=training,
                                     query_positions=output_positions))
    return outputs[-1], outputs

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
