"""One serving module per task kind, consumed by every export format.

A serving module (:class:`ServingModule`) is a ``tf.Module`` holding a
task's model, its preprocessor and its :class:`bert_tf.export.spec.ServingSpec`,
and defining the task's serving computation once: its signatures, its
outputs from the model's, its metadata and warm-up requests. What differs
between formats is not the task but the ops a format can run, so the module
takes an *ops* object (:class:`GraphOps` for the SavedModel; the LiteRT
format's :class:`bert_tf.export.litert_ops.LiteOps`) that tokenizes, packs
and calls the model in the format's ops. A format's writer takes the module
(:func:`bert_tf.export.formats.write`). The module class of each kind is
its :class:`bert_tf.task_kinds.TaskKind` ``serving`` (:func:`build`).

Model Garden's shape: ``official/core/export_base.py``'s ``ExportModule``
(one per task; ``serve()`` and ``get_inference_signatures()``).

Example::

  from bert_tf.export import serving, spec as spec_lib
  spec = spec_lib.ServingSpec.create("classifier", 128, labels=("neg", "pos"))
  module = serving.build(spec, model, preprocessor)           # SavedModel ops
  out = module.serve(tf.constant(["a gorgeous, witty movie"]))
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import tensorflow as tf

from bert_tf import preprocessing
from bert_tf import task_kinds
from bert_tf.export import base
from bert_tf.export import spec as spec_lib
from bert_tf.modeling import long_document
from bert_tf.modeling import multiple_choice

SAVED_MODEL = task_kinds.SAVED_MODEL

# Warm-up texts of every text export that has no dev data of its own
# (movie reviews, a dialog reply, an empty string, a long text).
WARMUP_SENTENCES = ("A gorgeous, witty, seductive movie.", "",
                    "The plot is a mess and the acting is even worse. " * 30)
WARMUP_REPLIES = ("yeah.", "let me see what i can do.", "")


# An ``xla=True`` classifier export runs the model body XLA-compiled where
# that is faster: small requests, whose time goes to per-op dispatch
# (measured on 2 cores, all-MiniLM-L6-v2: 1 x 12 tokens 11.3 -> 7.7 ms; 1 x
# 128 on par; 32 x 24 and 1 x 384 6-12% slower than oneDNN's graph). The
# request is padded to a power-of-two batch and a multiple of XLA_LENGTH_STEP
# tokens; when that holds at most XLA_MAX_TOKENS tokens it runs compiled,
# otherwise (unpadded) as the plain graph. So at most 23 compiled shapes at
# 128 tokens (xla_shapes), whatever the requests.
XLA_LENGTH_STEP = 16
XLA_MAX_TOKENS = 256
# The compute dtypes a classifier export can serve in (float32: the default).
SERVING_DTYPES = ("float32", "bfloat16")


def xla_shapes(max_seq_length: int) -> list:
  """Every ``(batch, length)`` an ``xla=True`` export compiles for (bounded).

  Args:
    max_seq_length: the export's preprocessor length (tokens).

  Returns:
    list of ``(batch, length)`` int pairs: batch a power of two, length a
    multiple of :data:`XLA_LENGTH_STEP` or ``max_seq_length`` itself, and
    ``batch * length <= XLA_MAX_TOKENS``.
  """
  lengths = sorted({min(l, max_seq_length) for l in range(
      XLA_LENGTH_STEP, max_seq_length + XLA_LENGTH_STEP, XLA_LENGTH_STEP)})
  batches = [1 << i for i in range(XLA_MAX_TOKENS.bit_length())]
  return [(b, l) for b in batches for l in lengths if b * l <= XLA_MAX_TOKENS]


class TextOps:
  """What every format's ops share: string signatures (subclasses give
  ``string_spec``, ``batch``, ``same_batch``, ``guard``). A format whose
  graphs take something else than strings (MediaPipe's token ids)
  overrides :meth:`text_signature`."""

  def text_signature(self, module: tf.Module, fn: Callable, names: Sequence[str]):
    """A ``tf.function`` of string [B] inputs ``names`` calling ``fn`` on
    them flattened (one input) or flattened and gated on equal sizes (two),
    an empty batch answered as the format can (``guard``)."""
    del module  # the strings are the inputs
    if len(names) == 1:
      body = lambda text: self.guard(fn, [self.batch(text)])  # pylint: disable=unnecessary-lambda-assignment
    else:
      body = lambda a, b: self.guard(fn, self.same_batch(  # pylint: disable=unnecessary-lambda-assignment
          self.batch(a), self.batch(b)))
    return tf.function(body, autograph=False,
                       input_signature=[self.string_spec(n) for n in names])

  def document_features(self, texts: Sequence[tf.Tensor], settings) -> tuple:
    """``(features, flags)`` of one or two text batches read by a
    :class:`~bert_tf.modeling.long_document.LongDocument` method: the
    model's features ([B, S], or [B, K, S] windows) and ``num_windows``
    int32 [B], ``truncated`` bool [B]. A format with a tokenizer
    (``tokenize`` / ``pack_tokens`` / ``trim``) reads every method; one
    without (ids in) reads its ids as one window and cannot tell a cut."""
    if not hasattr(self, "tokenize"):
      features = self.pack(texts)
      batch = tf.shape(features["input_ids"])[:1]
      return features, {"num_windows": tf.ones(batch, tf.int32),
                        "truncated": tf.zeros(batch, tf.bool)}
    tokens = self.tokenize(texts)
    if settings.method == "head":
      return self.pack_tokens(tokens), long_document.head_flags(
          tokens, self.preprocessor.max_seq_length)
    packed = long_document.pack(tokens, settings, self.preprocessor, training=False)
    flags = {k: packed.pop(k) for k in ("num_windows", "truncated")}
    return self.trim(packed), flags


class GraphOps(TextOps):
  """The SavedModel format's ops: tensorflow-text's ragged tokenizer
  (:class:`bert_tf.preprocessing.BertPreprocessor`, the one that fine-tunes),
  any batch size, every request trimmed to its longest row.

  Args:
    preprocessor: the :class:`BertPreprocessor` the model trained with
      (None for the id-level encoder).
    dtype: the model body's compute dtype, one of :data:`SERVING_DTYPES`
      (bfloat16: weights stored and multiplied in bfloat16, LayerNorm and
      softmax in float32; outputs float32 either way).
    xla: the model body XLA-compiled on the bucketed shapes of
      :func:`xla_shapes` for small requests, larger ones as the plain graph.

  Raises:
    SpecError: ``dtype`` not one of :data:`SERVING_DTYPES`.
  """

  format = SAVED_MODEL

  def __init__(self, preprocessor=None, dtype: str = "float32", xla: bool = False):
    if dtype not in SERVING_DTYPES:
      raise spec_lib.SpecError("--serving_dtype=%s: one of %s" % (
          dtype, ", ".join(SERVING_DTYPES)), argument="serving_dtype")
    self.preprocessor = preprocessor
    self.dtype = dtype
    self.xla = bool(xla)

  def attach(self, module: tf.Module, model) -> None:
    """Puts ``model``'s weights into ``module`` (:func:`base.track_tf_variables`)
    and, with ``xla``, its compiled body (static shapes: every row computed);
    nothing for ``model`` None."""
    if model is None:
      return
    base.track_tf_variables(module, model, None if self.dtype == "float32" else self.dtype)
    if self.xla:
      module._xla_body = tf.function(  # pylint: disable=protected-access
          lambda f: tf.cast(base.serving_call(module, f, skip_padding=False), tf.float32),
          jit_compile=True, autograph=False)

  def string_spec(self, name: str) -> tf.TensorSpec:
    return base.string_spec(name)

  def batch(self, text: tf.Tensor) -> tf.Tensor:
    """``text`` flattened to [B] (:func:`base.as_batch`)."""
    return base.as_batch(text)

  def same_batch(self, text_a: tf.Tensor, text_b: tf.Tensor):
    """Both flattened and gated on equal sizes (:func:`base.check_same_batch`)."""
    return base.check_same_batch(text_a, text_b)

  def tokenize(self, texts: Sequence[tf.Tensor]) -> list:
    """Word-piece ids of each text batch (int64 RaggedTensors [B, (T)])."""
    return [self.preprocessor.tokenize(t) for t in texts]

  def pack_tokens(self, tokens: Sequence[tf.RaggedTensor]) -> Dict[str, tf.Tensor]:
    """``[CLS] a [SEP] (b [SEP])`` int32 [B, S'] (the original's round-robin
    truncation) trimmed to the longest row."""
    return preprocessing.trim_to_longest(self.preprocessor.pack(list(tokens)))

  @staticmethod
  def trim(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Padding columns beyond the longest row dropped (any rank)."""
    return preprocessing.trim_to_longest(features)

  def pack(self, texts: Sequence[tf.Tensor]) -> Dict[str, tf.Tensor]:
    """``[CLS] a [SEP] (b [SEP])`` int32 [B, S'] trimmed to the longest row."""
    return self.pack_tokens(self.tokenize(texts))

  def padded(self, texts: Sequence[tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The same ids padded to ``max_seq_length`` (TF Hub's preprocessor)."""
    return self.preprocessor(*texts)

  def guard(self, fn: Callable, texts: Sequence[tf.Tensor]) -> dict:
    """``fn(*texts)``: the SavedModel's ops answer an empty batch as any other."""
    return fn(*texts)

  def gate(self, x: tf.Tensor, y: tf.Tensor, message: str, *tensors):
    """``tensors`` passed on once ``x == y`` holds (else INVALID_ARGUMENT
    with ``message`` when run)."""
    check = tf.debugging.assert_equal(x, y, message=message)
    with tf.control_dependencies([check]):
      return tuple(tf.identity(t) for t in tensors)

  def choice_features(self, context: tf.Tensor, endings: tf.Tensor,
                      num_choices: int) -> Dict[str, tf.Tensor]:
    """Every choice ``[CLS] context [SEP] ending [SEP]`` int32 [B, N, S']
    (:func:`bert_tf.modeling.multiple_choice.choice_features`)."""
    del num_choices  # the endings' shape [B, N] says it
    return multiple_choice.choice_features(self.preprocessor, context, endings)

  def metadata(self) -> dict:
    """The format's options as the metadata records them."""
    out = {"xla": self.xla, "dtype": self.dtype}
    if self.xla:
      out["xla_shapes"] = len(xla_shapes(self.preprocessor.max_seq_length))
    return out

  def logits(self, module: tf.Module, features: Dict[str, tf.Tensor]) -> tf.Tensor:
    """The model's output on ``features`` as float32, padding rows skipped
    (with ``xla``: :func:`xla_or_graph_call`)."""
    if self.xla:
      return xla_or_graph_call(module, features, self.preprocessor.max_seq_length)
    return tf.cast(base.serving_call(module, features), tf.float32)

  def encoder_outputs(self, module: tf.Module, features: Dict[str, tf.Tensor]) -> dict:
    """The encoder's output dict on ``features`` (any width)."""
    return base.serving_call(module, features)


def xla_or_graph_call(module, features, max_seq_length):
  """:func:`bert_tf.export.base.serving_call`, XLA-compiled on a bucketed shape when small.

  Pads the [B, S] features (ids 0, mask 0: attention never reads padding,
  and the padding rows are dropped after) to the smallest shape of
  :func:`xla_shapes` that holds them and runs the module's compiled body
  (``jit_compile=True``, :meth:`GraphOps.attach`) on it; a request that fits
  none runs as the plain graph. Same outputs within float32 rounding
  (tested at 1e-5). For a model whose output is one float tensor [B, ...]
  (a classifier's logits).
  """
  ids = features["input_ids"]
  batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
  step = XLA_LENGTH_STEP
  padded_len = tf.maximum(tf.minimum((length + step - 1) // step * step,
                                     max_seq_length), length)
  sizes = tf.constant(sorted({b for b, _ in xla_shapes(max_seq_length)}), tf.int32)
  padded_batch = tf.gather(sizes, tf.minimum(  # the smallest size >= batch (1 for 0)
      tf.searchsorted(sizes, tf.reshape(batch, [1]))[0], tf.size(sizes) - 1))
  small = tf.logical_and(batch <= padded_batch,
                         padded_batch * padded_len <= XLA_MAX_TOKENS)

  def compiled():
    padded = {k: tf.pad(features[k], [[0, padded_batch - batch],
                                      [0, padded_len - length]])
              for k in ("input_ids", "input_mask", "segment_ids")}
    return module._xla_body(padded)[:batch]  # pylint: disable=protected-access

  def graph():
    return tf.cast(base.serving_call(module, features), tf.float32)

  return tf.cond(small, compiled, graph)


class ServingModule(tf.Module):
  """A task's serving computation over a format's ops (see the module doc).

  Subclasses set ``kind`` (a task kind name) and define
  :meth:`build_signatures` (``tf.function``s with input signatures, their
  output dicts the task's), and may extend :meth:`metadata` and
  :meth:`warmup_requests`. What the kind's :class:`ServingSpec` holds is the
  class's too: ``defaults`` and ``extra_settings`` (read by
  :meth:`ServingSpec.create`), :meth:`settings_from_run`,
  :meth:`settings_from_model`, :meth:`check_spec`.

  Args:
    model: the task's Keras model (the encoder for ``encoder``/``features``;
      None for ``preprocessor``).
    preprocessor: the :class:`BertPreprocessor` the model trained with.
    spec: the :class:`ServingSpec` (its ``kind`` must be the class's).
    ops: the format's ops (default :class:`GraphOps`: the SavedModel's).

  Attributes:
    serve: the ``serving_default`` function; ``serve_pair``: the ``pair``
      signature's, or None.

  Raises:
    SpecError: a spec of another kind.
  """

  kind = ""
  # The kind's serving defaults (ServingSpec fields or extra_settings).
  defaults: Dict[str, object] = {}
  # Settings of the kind beyond ServingSpec's fields (kept in spec.settings).
  extra_settings: Sequence[str] = ()

  @classmethod
  def settings_from_run(cls, run_config) -> dict:
    """The spec settings a run's settings file gives (default: none)."""
    del run_config
    return {}

  @classmethod
  def settings_from_model(cls, model, *, is_pair: bool = False,
                          num_choices: Optional[int] = None) -> dict:
    """The spec settings an in-memory model gives (default: none)."""
    del model, is_pair, num_choices
    return {}

  @classmethod
  def check_spec(cls, spec: spec_lib.ServingSpec) -> None:
    """Raises SpecError for a spec the kind cannot serve (default: none)."""
    del spec

  def __init__(self, model, preprocessor, spec: spec_lib.ServingSpec, ops=None):
    super().__init__(name="bert_%s_serving" % (self.kind or "task"))
    if spec.kind != self.kind:
      raise spec_lib.SpecError("a %s serving module for a %s spec" % (self.kind, spec.kind),
                               argument="what")
    self.spec = spec
    self.ops = ops if ops is not None else GraphOps(preprocessor)
    self.preprocessor = preprocessor
    self.ops.attach(self, model)
    self.serve_pair = None
    self.serve, pair = self.build_signatures()
    if pair is not None:
      self.serve_pair = pair

  @property
  def model(self):
    """The Keras model (held untracked; its variables are the module's)."""
    return self._layer.obj  # pylint: disable=protected-access

  def build_signatures(self):
    """``(serving_default function, pair function or None)``."""
    raise NotImplementedError

  def text_function(self, fn: Callable, names: Sequence[str]) -> Callable:
    """The signature function of ``fn`` over text inputs ``names`` in the
    format's ops (:meth:`TextOps.text_signature`)."""
    return self.ops.text_signature(self, fn, names)

  def signatures(self) -> Dict[str, Callable]:
    """``{"serving_default": ..., "pair": ...}`` (pair where there is one)."""
    out = {"serving_default": self.serve}
    if self.serve_pair is not None:
      out["pair"] = self.serve_pair
    return out

  def input_names(self):
    """The inputs of each signature: a list (one signature) or a dict."""
    names = {k: [s.name for s in f.input_signature] for k, f in self.signatures().items()}
    return names["serving_default"] if len(names) == 1 else names

  def metadata(self) -> dict:
    """The metadata file's task part (:meth:`ServingSpec.metadata` + inputs)."""
    out = self.spec.metadata()
    out["inputs"] = self.input_names()
    return out

  def warmup_requests(self) -> List[tuple]:
    """``[(signature, {input: values})]`` replayed by TF Serving at load."""
    return text_requests(self.input_names())


def text_requests(inputs) -> List[tuple]:
  """Warm-up requests of :data:`WARMUP_SENTENCES` (and replies) for string
  signatures whose inputs are ``inputs`` (a list, or a dict by signature)."""
  by_signature = inputs if isinstance(inputs, dict) else {"serving_default": inputs}
  out = []
  for name, names in by_signature.items():
    texts = (list(WARMUP_SENTENCES), list(WARMUP_REPLIES))
    out.append((name, {n: texts[min(i, 1)] for i, n in enumerate(names)}))
  return out


module_class = spec_lib.module_class


def build(spec: spec_lib.ServingSpec, model, preprocessor, ops=None) -> ServingModule:
  """The serving module of ``spec.kind`` over ``ops`` (default the SavedModel's).

  Raises:
    SpecError / ValueError: the module's checks (labels that do not fit
      the model, lengths).
  """
  return module_class(spec.kind)(model, preprocessor, spec, ops)


def describe(names: Optional[Sequence[str]]) -> str:
  """``a, b`` for a message."""
  return ", ".join(names or ())
