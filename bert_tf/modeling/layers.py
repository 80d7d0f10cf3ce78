"""Keras 3 layers of the BERT encoder.

Source: google-research/bert ``modeling.py`` and the paper (Devlin et al.,
2018, section 3): token + segment + position embeddings, LayerNorm (epsilon
1e-12) and dropout; post-LayerNorm transformer blocks (self-attention with an
additive ``(1 - mask) * -10000`` mask, GELU feed-forward); TruncatedNormal(0.02)
initialization. Every tensor is batch-major: ``B`` = batch, ``S`` = sequence
length (tokens), ``H`` = ``hidden_size``, ``A`` = ``num_attention_heads``.
"""

import contextlib
import math
from typing import Iterator, List, NamedTuple, Optional

import keras
import tensorflow as tf

from bert_tf import config as config_lib

serializable = keras.saving.register_keras_serializable(package="bert_tf")

LAYER_NORM_EPSILON = 1e-12


def get_activation(name):
  """The activation function for a ``hidden_act`` name.

  ``gelu`` is the original's tanh approximation; ``gelu_exact`` the erf form.

  Raises:
    ValueError: unknown name.
  """
  if name == "gelu":
    return lambda x: tf.nn.gelu(x, approximate=True)
  if name == "gelu_exact":
    return lambda x: tf.nn.gelu(x, approximate=False)
  if name == "relu":
    return tf.nn.relu
  if name == "tanh":
    return tf.tanh
  if name == "linear":
    return tf.identity
  raise ValueError("unsupported hidden_act %r" % name)


_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


@tf.function(jit_compile=True)
def _gelu_tanh_grad(x, dy):
  """``dy * d/dx gelu_tanh(x)``, one XLA-fused pass (computed in float32)."""
  xf = tf.cast(x, tf.float32)
  c3 = _GELU_C * xf * xf
  t = tf.tanh(_GELU_K * (xf + c3 * xf))
  d = 0.5 * (1.0 + t) + 0.5 * xf * (1.0 - t * t) * _GELU_K * (1.0 + 3.0 * c3)
  return tf.cast(tf.cast(dy, tf.float32) * d, dy.dtype)


@tf.custom_gradient
def gelu_tanh_fused_grad(x):
  """The original's tanh GELU, ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``,
  with a hand-written gradient.

  The forward pass is ``tf.nn.gelu(x, approximate=True)`` (the same values).
  The gradient ``0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)``,
  ``t = tanh(...)``, is one XLA-compiled element-wise kernel instead of the
  ~12 element-wise ops that autodiff makes of the forward formula, each a
  pass over the ``[B*S, intermediate_size]`` tensor (measured: one MiniLM
  feed-forward forward+backward 170 -> 137 ms on 2 CPU cores; gradients agree
  with autodiff to float32 rounding, tested). Training only: inference and
  export use the plain op.

  Args:
    x: float tensor (any shape; float32, bfloat16 or float16).

  Returns:
    tensor of ``x``'s shape and dtype.
  """
  return tf.nn.gelu(x, approximate=True), lambda dy: _gelu_tanh_grad(x, dy)


def dropout(x, rate, seed):
  """Inverted dropout with 16-bit random thresholds.

  Keeps each element with probability ``1 - rate`` and scales kept ones by
  ``1 / (1 - rate)``, as ``tf.nn.experimental.stateless_dropout``; the keep
  test is ``u16 >= round(rate * 65536)`` on 16-bit halves of stateless
  random uint32s, so one Philox output serves two elements (measured: the
  forward+backward of a MiniLM attention-probability dropout, [32, 12, 128,
  128], 40 -> 30 ms on 2 CPU cores). The effective rate is
  ``round(rate * 65536) / 65536`` (0.1 -> 0.100006).

  Args:
    x: float tensor; rate: Python float in ``[0, 1)``.
    seed: int32 [2], a stateless seed.

  Returns:
    tensor of ``x``'s shape and dtype.
  """
  n = tf.size(x)
  bits = tf.random.stateless_uniform([(n + 1) // 2], seed, minval=None, maxval=None,
                                     dtype=tf.uint32)
  bits = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:n]
  keep = tf.reshape(bits >= int(round(rate * 65536)), tf.shape(x))
  return tf.where(keep, x * tf.cast(1.0 / (1.0 - rate), x.dtype), tf.zeros([], x.dtype))


@serializable
class Dropout(keras.layers.Dropout):
  """``keras.layers.Dropout`` (same seed generator, same seed draws) whose
  mask comes from :func:`dropout`. Source: the original's ``dropout()`` in
  ``modeling.py`` (``tf.nn.dropout``): the same distribution, different
  random numbers. With a ``noise_shape`` it is Keras' layer unchanged.
  ``get_config`` is Keras' (``rate``, ``noise_shape``, ``seed``).

  Call args: ``inputs`` (float tensor, any shape), ``training`` (bool).
  Returns: a tensor of ``inputs``' shape and dtype.

  Example:
    >>> y = Dropout(0.1)(tf.ones([2, 4]), training=True)  # [2, 4] float32
  """

  def call(self, inputs, training=False):
    if not training or self.rate <= 0:
      return inputs
    if self.noise_shape is not None:  # broadcast masks: Keras' own path
      return super().call(inputs, training=training)
    if self.rate >= 1:
      return tf.zeros_like(inputs)
    seed = self.seed_generator.next()
    if seed.dtype != tf.int32:  # as Keras' TensorFlow backend casts it
      seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    return dropout(inputs, self.rate, seed)


def initializer(config):
  """``TruncatedNormal(stddev=initializer_range)``, as the original."""
  return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def layer_norm(name):
  """``LayerNormalization`` over the last axis with the original's epsilon."""
  return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=name)


@serializable
class BertEmbeddings(keras.layers.Layer):
  """Word + segment (token type) + position embeddings, LayerNorm, dropout.

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict (as
      ``get_config()`` stores it). All weights are created here.

  Weights (original names ``bert/embeddings/*``): ``word_embeddings``
  [vocab_size, H], ``token_type_embeddings`` [type_vocab_size, H],
  ``position_embeddings`` [max_position_embeddings, H], ``layer_norm``.

  Call args:
    input_ids: int32 [B, S].
    segment_ids: int32 [B, S].
    training: enables dropout.

  Returns:
    float [B, S, H] (compute dtype).

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.

  Example:
    >>> emb = BertEmbeddings(config_lib.preset("tiny"), name="embeddings")
    >>> x = emb(tf.zeros([2, 8], tf.int32), tf.zeros([2, 8], tf.int32))  # [2, 8, 128]
  """

  def __init__(self, config: "config_lib.BertConfig | dict", **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    init = initializer(config)
    h = config.hidden_size
    self.word_embeddings = self.add_weight(
        name="word_embeddings", shape=(config.vocab_size, h), initializer=init, autocast=False)
    self.token_type_embeddings = self.add_weight(
        name="token_type_embeddings", shape=(config.type_vocab_size, h),
        initializer=init, autocast=False)
    self.position_embeddings = self.add_weight(
        name="position_embeddings", shape=(config.max_position_embeddings, h),
        initializer=init, autocast=False)
    self.layer_norm = layer_norm("layer_norm")
    self.layer_norm.build((None, None, h))
    self.dropout = Dropout(config.hidden_dropout_prob)
    self.built = True  # every weight exists: .keras loading needs no build

  def get_config(self) -> dict:
    """Keras config: the base keys plus ``config`` (the BertConfig dict)."""
    return dict(super().get_config(), config=self.config.to_dict())

  def call(self, input_ids, segment_ids, training=False):
    seq_len = tf.shape(input_ids)[1]
    words = tf.gather(self.word_embeddings, input_ids)
    types = tf.gather(self.token_type_embeddings, segment_ids)
    positions = self.position_embeddings[:seq_len][tf.newaxis]
    x = words + types + positions
    x = self.layer_norm(x)
    x = tf.cast(x, self.compute_dtype)
    return self.dropout(x, training=training)


@serializable
class TransformerBlock(keras.layers.Layer):
  """One post-LayerNorm transformer block (original ``transformer_model`` body).

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict. All weights
      are created here.

  Sub-layers (original names ``layer_i/attention/self/{query,key,value}``,
  ``attention/output/dense``, ``attention/output/LayerNorm``,
  ``intermediate/dense``, ``output/dense``, ``output/LayerNorm``):
  ``query``, ``key``, ``value``, ``attention_output``,
  ``attention_layer_norm``, ``intermediate``, ``output_dense``,
  ``output_layer_norm``.

  Call args:
    x: float [B, S, H].
    input_mask: int [B, S], 1 for tokens, 0 for padding (the additive
      ``(1 - mask) * -10000`` bias is built from it in float32).
    training: enables dropout.
    query_positions: optional int [B, Q]: compute the output only at these
      positions (keys and values still come from all S positions). Every
      step after the key/value projections is row-wise, so these rows equal
      the same rows of the full output; pretraining uses it in the last
      block, where only the masked positions and [CLS] are read.

    token_rows: optional :class:`TokenRows` of ``input_mask``; then ``x``
      is float [N, H], the N tokens' rows only (no padding rows), and so is
      the output. Every step but attention is row-wise and runs on the N
      rows; query/key/value go to the [B, S] layout for attention (padding
      positions hold a copy of a token's, hidden by the mask bias) and the
      context comes back to the N rows. The rows equal the same rows of the
      padded computation (up to float summation order). Not with
      ``query_positions``.

  Returns:
    float [B, S, H], or [B, Q, H] with ``query_positions``, or [N, H] with
    ``token_rows``.

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.
    ValueError: both ``query_positions`` and ``token_rows``.

  Example:
    >>> block = TransformerBlock(config_lib.preset("tiny"), name="layer_0")
    >>> y = block(tf.zeros([2, 8, 128]), tf.ones([2, 8], tf.int32))  # [2, 8, 128]
  """

  def __init__(self, config: "config_lib.BertConfig | dict", **kwargs):
    super().__init__(**kwargs)
    config = config_lib.as_bert_config(config)
    self.config = config
    h = config.hidden_size
    self.num_heads = config.num_attention_heads
    self.head_size = config.size_per_head
    init = initializer(config)

    def dense(units, name, activation=None):
      layer = keras.layers.Dense(units, activation=activation,
                                 kernel_initializer=init, name=name)
      return layer

    self.query = dense(h, "query")
    self.key = dense(h, "key")
    self.value = dense(h, "value")
    self.attention_output = dense(h, "attention_output")
    self.attention_layer_norm = layer_norm("attention_layer_norm")
    self.intermediate = dense(config.intermediate_size, "intermediate",
                              get_activation(config.hidden_act))
    self.output_dense = dense(h, "output_dense")
    self.output_layer_norm = layer_norm("output_layer_norm")
    for layer in (self.query, self.key, self.value, self.attention_output,
                  self.intermediate):
      layer.build((None, None, h))
    self.output_dense.build((None, None, config.intermediate_size))
    self.attention_layer_norm.build((None, None, h))
    self.output_layer_norm.build((None, None, h))
    self.attention_dropout = Dropout(config.attention_probs_dropout_prob)
    self.hidden_dropout = Dropout(config.hidden_dropout_prob)
    self.built = True  # every weight exists: .keras loading needs no build

  def get_config(self) -> dict:
    """Keras config: the base keys plus ``config`` (the BertConfig dict)."""
    return dict(super().get_config(), config=self.config.to_dict())

  def call(self, x, input_mask, training=False, query_positions=None,
           token_rows=None):
    if query_positions is not None and token_rows is not None:
      raise ValueError("TransformerBlock: query_positions and token_rows "
                       "cannot be used together")
    # B and S from input_mask ([B, S], the same tensor in every block), not
    # from x: Grappler then merges every block's shape arithmetic (Shape,
    # StridedSlice, Pack for the reshapes) into one copy.
    mask_shape = tf.shape(input_mask)
    batch, seq_len = mask_shape[0], mask_shape[1]
    h = self.num_heads * self.head_size
    # Every projection runs on [B*S, H] rows: one 2-D MatMul + BiasAdd each.
    rows = tf.reshape(x, [-1, x.shape[-1] or h])
    if query_positions is None:
      # Query, key and value in ONE matmul: the three kernels (kept separate,
      # the checkpoint layout) are concatenated at call time, [H, 3H].
      fused = None if training else _SERVING_QKV.get(id(self))
      if fused is None:
        qkv = _dense(rows, [self.query, self.key, self.value])
      else:  # the same product, kernels concatenated once (FusedQKV)
        qkv = _affine(rows, *fused)
      if token_rows is not None:  # N token rows -> [B*S]
        qkv = token_rows.to_padded(qkv)
      qkv = tf.reshape(qkv, [batch, seq_len, 3, self.num_heads, self.head_size])
      # unstack, not qkv[i]: the gradient of three strided slices is three
      # zero-padded [3, B, A, S, D] tensors summed (measured: 20% of a MiniLM
      # backward pass); unstack's gradient is one stack.
      q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # 3 x [B, A, S, D]
      out_len = seq_len
    else:
      kv = tf.reshape(_dense(rows, [self.key, self.value]),
                      [batch, seq_len, 2, self.num_heads, self.head_size])
      k, v = tf.unstack(tf.transpose(kv, [2, 0, 3, 1, 4]))  # 2 x [B, A, S, D]
      out_len = tf.shape(query_positions)[1]
      rows = tf.reshape(tf.gather(x, tf.cast(query_positions, tf.int32), batch_dims=1),
                        [-1, x.shape[-1] or h])  # [B*Q, H]: residual and queries
      q = tf.transpose(tf.reshape(_dense(rows, [self.query]),
                                  [batch, out_len, self.num_heads, self.head_size]),
                       [0, 2, 1, 3])  # [B, A, Q, D]
    # Scaling q ([B, A, S, D]) costs less than scaling the scores ([B, A, S, S]).
    q = q * tf.cast(1.0 / math.sqrt(self.head_size), q.dtype)
    scores = tf.matmul(q, k, transpose_b=True)  # [B, A, S, S]
    # The mask adder and the softmax in float32 (a no-op cast in float32).
    scores = tf.cast(scores, tf.float32) + attention_bias_from_mask(input_mask)
    probs = tf.cast(tf.nn.softmax(scores, axis=-1), x.dtype)
    probs = self.attention_dropout(probs, training=training)
    context = tf.matmul(probs, v)  # [B, A, S, D]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, h])
    if token_rows is not None:
      context = token_rows.to_rows(context)  # [N, H]
    attn = self.hidden_dropout(_dense(context, [self.attention_output], training),
                               training=training)
    attn = tf.cast(self.attention_layer_norm(attn + rows), x.dtype)
    inner = _dense(attn, [self.intermediate], training)
    if training is True and self.config.hidden_act == "gelu":
      inner = gelu_tanh_fused_grad(inner)
    else:
      inner = self.intermediate.activation(inner)
    out = self.hidden_dropout(_dense(inner, [self.output_dense], training), training=training)
    out = tf.cast(self.output_layer_norm(out + attn), x.dtype)
    if token_rows is not None:
      return out
    return tf.reshape(out, [batch, out_len, h])


class TokenRows(NamedTuple):
  """Where the tokens (``input_mask`` 1) of a [B, S] batch sit among its rows.

  Moves per-row tensors between the padded layout ([B*S, C], row ``b * S +
  s``) and the tokens-only layout ([N, C], the N tokens in row-major order).
  Built by :meth:`from_mask`; used by ``BertEncoder(skip_padding=True)``.

  Attributes:
    token_index: int32 [N], the padded row of each token.
    padded_index: int32 [B*S], each padded row's token (padding -> token 0).
    row_index: int32 [B*S], each padded row's token (padding -> N).

  Example:
    >>> rows = TokenRows.from_mask(tf.constant([[1, 1, 0], [1, 0, 0]]))
    >>> rows.token_index.numpy()
    array([0, 1, 3], dtype=int32)
  """
  token_index: tf.Tensor
  padded_index: tf.Tensor
  row_index: tf.Tensor

  @classmethod
  def from_mask(cls, input_mask: tf.Tensor) -> "TokenRows":
    """From int ``input_mask`` [B, S] (nonzero = token; at least one token)."""
    is_token = tf.reshape(input_mask, [-1]) != 0
    token_index = tf.cast(tf.reshape(tf.where(is_token), [-1]), tf.int32)
    rank = tf.cumsum(tf.cast(is_token, tf.int32)) - 1
    n = tf.size(token_index)
    return cls(token_index, tf.where(is_token, rank, 0), tf.where(is_token, rank, n))

  def to_padded(self, rows: tf.Tensor) -> tf.Tensor:
    """float [N, C] -> [B*S, C]; padding rows copy token 0 (finite values
    that only masked-out attention reads). The gradient takes the token
    rows only: exact where padding rows reach the loss only through
    masked-out attention keys (probability exactly 0) or discarded queries."""
    return _moved(rows, lambda r: tf.gather(r, self.padded_index), self._token_rows)

  def to_rows(self, padded: tf.Tensor) -> tf.Tensor:
    """float [B*S, C] -> [N, C], the tokens' rows."""
    return _moved(padded, self._token_rows, self._zero_padded)

  def to_zero_padded(self, rows: tf.Tensor) -> tf.Tensor:
    """float [N, C] -> [B*S, C] with zeros at padding rows."""
    return _moved(rows, self._zero_padded, self._token_rows)

  def _token_rows(self, padded):
    return tf.gather(padded, self.token_index)

  def _zero_padded(self, rows):
    return tf.gather(tf.concat([rows, tf.zeros_like(rows[:1])], 0), self.row_index)


def _moved(x, forward, backward):
  """``forward(x)`` whose gradient is ``backward(dy)`` (a layout move)."""

  @tf.custom_gradient
  def move(x):
    return forward(x), backward
  return move(x)


def all_layers(layer: keras.layers.Layer) -> List[keras.layers.Layer]:
  """``layer`` and every layer inside it, each once, a parent before its own.

  Keras 3 lists a model's direct sub-layers (``keras.Model.layers``) but
  not a plain layer's, and its recursive walk (``Layer._flatten_layers``)
  is private. So the children of a layer are its ``layers`` when it is a
  ``keras.Model``, plus the layers its public attributes hold (directly, or
  in a list, tuple or dict): every layer of this package keeps its
  sub-layers so (``BertEncoder.layer_0``, ``TransformerBlock.query``, ...).
  A layer held only under a private attribute of a plain layer (Keras'
  ``MultiHeadAttention._query_dense``) is not found.

  Args:
    layer: a Keras layer or model.

  Returns:
    list of ``keras.layers.Layer``: ``layer`` first, then depth first in
    attribute order (an encoder's blocks in their order).

  Example:
    >>> [l.name for l in all_layers(encoder)][:3]
    ['bert_encoder', 'embeddings', 'layer_norm']
  """
  out, seen = [], set()

  def visit(current):
    if id(current) in seen:
      return
    seen.add(id(current))
    out.append(current)
    for child in _sublayers(current):
      visit(child)

  visit(layer)
  return out


def _sublayers(layer: keras.layers.Layer) -> List[keras.layers.Layer]:
  """A layer's direct sub-layers: a model's ``layers``, then the layers its
  public attributes hold (see :func:`all_layers`)."""
  found = list(layer.layers) if isinstance(layer, keras.Model) else []
  for name, value in vars(layer).items():
    if name.startswith("_"):
      continue
    if isinstance(value, dict):
      value = list(value.values())
    values = value if isinstance(value, (list, tuple)) else [value]
    found += [v for v in values if isinstance(v, keras.layers.Layer) and v is not layer]
  return found


# id(TransformerBlock) -> (kernel [H, 3H], bias [3H]) while a FusedQKV is
# active (FusedQKV.active(): tracing a serving function).
_SERVING_QKV = {}
# id(keras.layers.Dense) -> (kernel, bias) in the serving dtype, while a
# FusedQKV(dtype=...) is active: a block's other projections.
_SERVING_DENSE = {}


class FusedQKV:
  """The query/key/value weights of every block, concatenated once, for serving.

  Training (and any call outside :meth:`active`) multiplies by
  ``concat([query, key, value] kernels)`` built on every call: the three
  ``[H, H]`` kernels stay separate weights (the original checkpoint's
  layout). An inference graph traced inside :meth:`active` reads one
  ``[H, 3H]`` kernel and one ``[3H]`` bias per block instead, copies made
  here as ``tf.Variable``s, so the served graph copies no kernel per call
  (~1.8 MB per block at H=384, 7 MB at H=768). Same products, same values:
  bit-identical outputs (tested). The exports use it (``bert_tf.export``);
  the copies are a snapshot: export after training.

  With ``dtype`` (e.g. ``"bfloat16"``), the serving graph computes in that
  dtype: the copies (the fused query/key/value and every other projection of
  each block: attention output, intermediate, output) are stored in it, and
  inside :meth:`active` every layer of ``model`` runs under the
  ``mixed_<dtype>`` policy (the same numerics as ``--dtype=mixed_bfloat16``
  training: LayerNorm, softmax and the mask adder in float32), so no weight
  is cast per request. Not bit-identical: bfloat16 keeps 8 significant bits.

  Args:
    model: any built Keras layer or model holding :class:`TransformerBlock`
      layers (an encoder, a classifier, a SQuAD or NER model...).
    dtype: None (the variables' dtype, float32: the default), or a float
      dtype name (``"bfloat16"``, ``"float16"``) to serve in.

  Attributes:
    variables: list of ``tf.Variable``, kernel then bias per block
      (``<block name>/qkv_kernel`` float [H, 3H], ``<block name>/qkv_bias``
      [3H]), then with ``dtype`` each other projection's
      (``<block name>/<layer>_kernel``, ``..._bias``), in the serving dtype.
    replaced: the ``tf.Variable``s these stand in for in a serving graph
      (each block's query, key and value kernel and bias; with ``dtype``
      also the other projections').

  Raises:
    ValueError: ``model`` holds no TransformerBlock; ``dtype`` not a
      floating dtype.

  Example:
    >>> fused = FusedQKV(encoder)
    >>> with fused.active():
    ...   serve = tf.function(lambda x: encoder(x, training=False)).get_concrete_function(spec)
  """

  def __init__(self, model: keras.layers.Layer, dtype: Optional[str] = None):
    layers = all_layers(model)
    self.blocks = [l for l in layers if isinstance(l, TransformerBlock)]
    if not self.blocks:
      raise ValueError("FusedQKV: %s holds no TransformerBlock" % model.name)
    self.dtype = None if dtype is None else tf.as_dtype(dtype)
    if self.dtype is not None and not self.dtype.is_floating:
      raise ValueError("FusedQKV: dtype must be a float dtype, got %r" % (dtype,))
    self._policy_layers = list(layers) if self.dtype is not None else []
    cast = (lambda t: t) if self.dtype is None else (lambda t: tf.cast(t, self.dtype))
    self._weights = {}
    self._dense = {}
    self.variables: List[tf.Variable] = []
    self.replaced: List[tf.Variable] = []
    for block in self.blocks:
      parts = [block.query, block.key, block.value]
      kernel = tf.Variable(cast(tf.concat([l.kernel.value for l in parts], axis=1)),
                           trainable=False, name=block.name + "/qkv_kernel")
      bias = tf.Variable(cast(tf.concat([l.bias.value for l in parts], axis=0)),
                         trainable=False, name=block.name + "/qkv_bias")
      self._weights[id(block)] = (kernel, bias)
      self.variables += [kernel, bias]
      self.replaced += [w.value for l in parts for w in (l.kernel, l.bias)]
      if self.dtype is None:
        continue
      for layer in (block.attention_output, block.intermediate, block.output_dense):
        copies = tuple(tf.Variable(cast(w.value), trainable=False,
                                   name="%s/%s_%s" % (block.name, layer.name, part))
                       for w, part in ((layer.kernel, "kernel"), (layer.bias, "bias")))
        self._dense[id(layer)] = copies
        self.variables += list(copies)
        self.replaced += [layer.kernel.value, layer.bias.value]

  @contextlib.contextmanager
  def active(self) -> Iterator[None]:
    """Within: the blocks' inference calls (``training`` falsy) use the copies.

    Not re-entrant across two FusedQKV of the same blocks (the inner one wins
    and the outer one is cleared on exit).
    """
    _SERVING_QKV.update(self._weights)
    _SERVING_DENSE.update(self._dense)
    policies = [(l, l.dtype_policy) for l in self._policy_layers]
    try:
      for layer, _ in policies:
        layer.dtype_policy = "mixed_" + self.dtype.name
      yield
    finally:
      for layer, policy in policies:
        layer.dtype_policy = policy
      for key in self._weights:
        _SERVING_QKV.pop(key, None)
      for key in self._dense:
        _SERVING_DENSE.pop(key, None)


def _dense(rows, layers, training=False):
  """``rows @ concat(kernels) + concat(biases)`` of Keras ``Dense`` layers.

  Args:
    rows: float [N, in] (compute dtype).
    layers: built ``keras.layers.Dense`` with the same input width; their
      kernels are concatenated along the output axis (one matmul for many).
    training: Python bool/None; an inference call reads a
      ``FusedQKV(dtype=...)``'s serving copies of the layers while it is
      active.

  Returns:
    float [N, sum of units] in ``rows.dtype`` (activation not applied).
  """
  serving = None if training else [_SERVING_DENSE.get(id(l)) for l in layers]
  if serving and all(w is not None for w in serving):
    kernels = [tf.cast(k, rows.dtype) for k, _ in serving]
    biases = [tf.cast(b, rows.dtype) for _, b in serving]
  else:
    kernels = [tf.cast(l.kernel, rows.dtype) for l in layers]
    biases = [tf.cast(l.bias, rows.dtype) for l in layers]
  kernel = kernels[0] if len(layers) == 1 else tf.concat(kernels, axis=1)
  bias = biases[0] if len(layers) == 1 else tf.concat(biases, axis=0)
  return _affine(rows, kernel, bias)


def _affine(rows, kernel, bias):
  """``rows @ kernel + bias`` in ``rows.dtype`` (one MatMul + BiasAdd; the
  casts are no-ops when the dtypes already match)."""
  return tf.nn.bias_add(tf.matmul(rows, tf.cast(kernel, rows.dtype)),
                        tf.cast(bias, rows.dtype))


def attention_bias_from_mask(input_mask):
  """``(1 - mask) * -10000`` as float32 [B, 1, 1, S] (original's adder).

  Expanded with ``expand_dims``, not ``[:, newaxis, newaxis, :]``: with the
  batch and length both unknown the LiteRT converter keeps that slice as a
  ``StridedSlice`` custom op it has no kernel for."""
  mask = tf.cast(input_mask, tf.float32)
  return tf.expand_dims(tf.expand_dims((1.0 - mask) * -10000.0, 1), 1)
