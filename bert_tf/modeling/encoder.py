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
    return presets.load(preset, "encoder", lambda c: cls(c, **kwargs), config)

  @property
  def layers(self) -> list:
    """Sub-layers in order: embeddings, layer_0 .. layer_{L-1}, pooler.

    (``model.summary(expand_nested=True)`` lists them.)
    """
    return [self.embeddings] + self.blocks + [self.pooler]

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
