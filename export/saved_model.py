"""SavedModel export: raw strings in, probabilities and labels out.

Three exports, all in TF Serving's ``<export_dir>/<version>/`` layout
(written under a temporary name, renamed to the numeric version when whole;
TF Serving ignores non-numeric directories):

* **classifier** (:func:`export_classifier`): ``BertPreprocessor``
  (tensorflow-text tokenizer, the vocab a SavedModel asset) ->
  ``trim_to_longest`` -> ``BertClassifier`` -> softmax, exactly the
  preprocessing used while fine-tuning. Signature ``serving_default``:

  - inputs: ``text`` string [B] (single-sentence tasks), or ``text_a`` and
    ``text_b`` string [B] (pair tasks; different lengths ->
    ``INVALID_ARGUMENT``); another rank is flattened to [B] (:func:`bert_tf.export.base.as_batch`);
  - outputs: ``probabilities`` float32 [B, num_labels], ``logits`` float32
    [B, num_labels], ``label_ids`` int32 [B], ``labels`` string [B]; for
    regression (STS-B) only ``predictions`` float32 [B].

* **preprocessor** (:func:`export_preprocessor`, the TF Hub
  ``bert_*_preprocess`` half): ``serving_default`` (``text``) and ``pair``
  (``text_a``, ``text_b``) -> int32 [B, max_seq_length] under TF Hub's names
  ``input_word_ids``, ``input_mask``, ``input_type_ids`` and under the
  original BERT's names ``input_ids``, ``segment_ids`` (``input_mask`` is
  the same in both). Padded to ``max_seq_length`` (not trimmed), as TF Hub's.

* **encoder** (:func:`export_encoder`, the TF Hub encoder half):
  ``serving_default`` takes int32 [B, S] ``input_word_ids``, ``input_mask``,
  ``input_type_ids`` (the preprocessor's outputs; S <=
  ``max_position_embeddings``) and returns ``sequence_output`` float32
  [B, S, H], ``pooled_output`` float32 [B, H] and ``encoder_outputs_<i>``
  float32 [B, S, H] for every layer i (0-based; the last equals
  ``sequence_output``).

Each export holds ``assets.extra/tf_serving_warmup_requests`` (see
:mod:`export.warmup`) and ``assets.extra/bert_tf_export.json`` (metadata:
task, labels, ``max_seq_length``, ``is_pair``, the signatures, every
non-core op with its library and minimum TF Serving version, see
:mod:`export.serving_ops`).

Loading needs the tensorflow-text ops: ``import tensorflow_text`` in Python,
``TF_LoadLibrary`` of the listed ``_*.so`` files in C/C++, or a TF Serving
build that links them (>= ``min_tf_serving_version`` in the metadata).
"""

import json

import numpy as np
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.export import base
from bert_tf.export import client

METADATA_FILE = base.METADATA_FILE
WARMUP_SENTENCES = ("A gorgeous, witty, seductive movie.", "",
                    "The plot is a mess and the acting is even worse. " * 30)
WARMUP_REPLIES = ("yeah.", "let me see what i can do.", "")


# An ``xla=True`` export runs the model body XLA-compiled where that is
# faster: small requests, whose time goes to per-op dispatch (measured on 2
# cores, all-MiniLM-L6-v2: 1 x 12 tokens 11.3 -> 7.7 ms; 1 x 128 on par;
# 32 x 24 and 1 x 384 6-12% slower than oneDNN's graph). The request is
# padded to a power-of-two batch and a multiple of XLA_LENGTH_STEP tokens;
# when that holds at most XLA_MAX_TOKENS tokens it runs compiled, otherwise
# (unpadded) as the plain graph. So at most 23 compiled shapes at 128 tokens
# (xla_shapes), whatever the requests.
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


def _xla_or_graph_call(module, features, max_seq_length):
  """:func:`bert_tf.export.base.serving_call`, XLA-compiled on a bucketed shape when small.

  Pads the [B, S] features (ids 0, mask 0: attention never reads padding,
  and the padding rows are dropped after) to the smallest shape of
  :func:`xla_shapes` that holds them and runs ``module._xla_body``
  (``jit_compile=True``) on it; a request that fits none runs as the plain
  graph. Same outputs within float32 rounding (tested at 1e-5). For a model
  whose output is one float tensor [B, ...] (a classifier's logits).
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


class ClassifierServingModule(tf.Module):
  """Preprocessor + classifier behind a string signature.

  Args:
    model: a built :class:`bert_tf.modeling.BertClassifier`.
    preprocessor: the :class:`bert_tf.preprocessing.BertPreprocessor` used to
      fine-tune it.
    labels: list of label names (str), index = label id; may be None for
      regression.
    is_pair: two string inputs (``text_a``, ``text_b``) instead of ``text``.
    is_regression: one output ``predictions`` float32 [B] (the single logit,
      original ``run_classifier`` regression head as in STS-B).
    multi_label: a multi-label classifier (transformers' ``problem_type
      "multi_label_classification"``, trained with a sigmoid per label):
      outputs ``probabilities`` float32 [B, L] (sigmoid of each logit),
      ``logits`` [B, L], ``label_mask`` bool [B, L] (probability >= 0.5,
      as ``BertClassifier.predict_labels``) and ``labels`` string [B, L]
      (the label's name where ``label_mask``, else "").
    xla: run the model body XLA-compiled (``jit_compile=True``) on bucketed
      shapes for small requests (:func:`xla_shapes`; larger ones as the
      plain graph; logits within float32 rounding of it). TF Serving runs it
      with ``--xla_cpu_compilation_enabled``.
    dtype: the model body's compute dtype, ``"float32"`` (the default, the
      trained model's numerics) or ``"bfloat16"`` (weights stored and
      multiplied in bfloat16, LayerNorm and softmax in float32: faster where
      the CPU has bf16 units, ``avx512_bf16`` or AMX; logits within bfloat16
      rounding, not bit-identical). Outputs are float32 either way.

  Raises:
    ValueError: ``dtype`` not one of :data:`SERVING_DTYPES`.
  """

  def __init__(self, model, preprocessor, labels, is_pair=False,
               is_regression=False, xla=False, dtype="float32", multi_label=False):
    super().__init__(name="bert_classifier_serving")
    if dtype not in SERVING_DTYPES:
      raise ValueError("dtype must be one of %s, got %r" % (", ".join(SERVING_DTYPES), dtype))
    self.dtype = dtype
    base.track_tf_variables(self, model, None if dtype == "float32" else dtype)
    self.xla = bool(xla)
    if self.xla:
      # Static shapes under XLA: every row computed (skip_padding=False).
      self._xla_body = tf.function(
          lambda f: tf.cast(base.serving_call(self, f, skip_padding=False), tf.float32),
          jit_compile=True, autograph=False)
    self.preprocessor = preprocessor
    self.is_pair = bool(is_pair)
    self.is_regression = bool(is_regression)
    self.multi_label = bool(multi_label) and not self.is_regression
    if not self.is_regression:
      self.label_names = tf.constant([str(l) for l in labels])
    if self.is_pair:
      self.serve = tf.function(self._serve_pair, autograph=False, input_signature=[
          base.string_spec("text_a"), base.string_spec("text_b")])
    else:
      self.serve = tf.function(self._serve_single, autograph=False,
                               input_signature=[base.string_spec("text")])

  @property
  def model(self):
    return self._layer.obj

  def predict(self, text_a, text_b=None):
    """The serving computation; returns the signature's output dict."""
    features = preprocessing.trim_to_longest(self.preprocessor(text_a, text_b))
    if self.xla:
      logits = _xla_or_graph_call(self, features, self.preprocessor.max_seq_length)
    else:
      logits = tf.cast(base.serving_call(self, features), tf.float32)
    if self.is_regression:
      return {"predictions": logits[:, 0]}
    if self.multi_label:
      probabilities = tf.sigmoid(logits)
      mask = probabilities >= 0.5
      names = tf.broadcast_to(self.label_names, tf.shape(logits))
      return {"probabilities": probabilities, "logits": logits, "label_mask": mask,
              "labels": tf.where(mask, names, tf.zeros_like(names))}
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
            "label_ids": label_ids,
            "labels": tf.gather(self.label_names, label_ids)}

  def _serve_single(self, text):
    return self.predict(base.as_batch(text))

  def _serve_pair(self, text_a, text_b):
    return self.predict(*base.check_same_batch(text_a, text_b))


class PreprocessorServingModule(tf.Module):
  """:class:`BertPreprocessor` alone behind string signatures (TF Hub split).

  Signatures: ``serving_default`` (``text`` string [B]) and ``pair``
  (``text_a``, ``text_b`` string [B]) -> int32 [B, max_seq_length]
  ``input_word_ids`` = ``input_ids``, ``input_mask``, ``input_type_ids`` =
  ``segment_ids``.
  """

  def __init__(self, preprocessor):
    super().__init__(name="bert_preprocessor_serving")
    self.preprocessor = preprocessor
    self.serve = tf.function(lambda text: self._outputs(preprocessor(base.as_batch(text))),
                             autograph=False,
                             input_signature=[base.string_spec("text")])
    self.serve_pair = tf.function(
        lambda text_a, text_b: self._outputs(
            preprocessor(*base.check_same_batch(text_a, text_b))),
        autograph=False, input_signature=[base.string_spec("text_a"), base.string_spec("text_b")])

  @staticmethod
  def _outputs(features):
    return {"input_word_ids": features["input_ids"],
            "input_mask": features["input_mask"],
            "input_type_ids": features["segment_ids"],
            "input_ids": tf.identity(features["input_ids"]),
            "segment_ids": tf.identity(features["segment_ids"])}


class EncoderServingModule(tf.Module):
  """:class:`BertEncoder` alone behind an int32 signature (TF Hub split).

  Inputs int32 [B, S]: ``input_word_ids``, ``input_mask``,
  ``input_type_ids``; outputs ``sequence_output`` [B, S, H],
  ``pooled_output`` [B, H], ``encoder_outputs_<i>`` [B, S, H] (float32).
  Mismatched shapes or S > ``max_position_embeddings`` -> INVALID_ARGUMENT;
  ids outside the vocab -> INVALID_ARGUMENT from the embedding gather.
  """

  def __init__(self, encoder):
    super().__init__(name="bert_encoder_serving")
    base.track_tf_variables(self, encoder)
    spec = lambda n: tf.TensorSpec([None, None], tf.int32, name=n)
    self.serve = tf.function(self._serve, autograph=False, input_signature=[
        spec("input_word_ids"), spec("input_mask"), spec("input_type_ids")])

  @property
  def encoder(self):
    return self._layer.obj

  def _serve(self, input_word_ids, input_mask, input_type_ids):
    shape = tf.shape(input_word_ids)
    checks = [
        tf.debugging.assert_equal(tf.shape(input_mask), shape, message=
                                  "input_mask must have input_word_ids' shape"),
        tf.debugging.assert_equal(tf.shape(input_type_ids), shape, message=
                                  "input_type_ids must have input_word_ids' shape"),
        tf.debugging.assert_less_equal(
            shape[1], self.encoder.config.max_position_embeddings,
            message="sequence longer than max_position_embeddings")]
    with tf.control_dependencies(checks):
      out = base.serving_call(self, {"input_ids": tf.identity(input_word_ids),
                                 "input_mask": input_mask,
                                 "segment_ids": input_type_ids})
    result = {"sequence_output": tf.cast(out["sequence_output"], tf.float32),
              "pooled_output": tf.cast(out["pooled_output"], tf.float32)}
    for i, layer in enumerate(out["encoder_outputs"]):
      result["encoder_outputs_%d" % i] = tf.cast(layer, tf.float32)
    return result


def read_metadata(saved_model_dir: str) -> dict:
  """The export's ``assets.extra/bert_tf_export.json`` as a dict.

  Raises:
    OSError: no metadata file (not a bert_tf export); ValueError: not JSON.
  """
  with open(client.metadata_path(saved_model_dir), encoding="utf-8") as f:
    return json.load(f)


def _text_requests(signature_name, is_pair):
  if is_pair:
    return [(signature_name, {"text_a": list(WARMUP_SENTENCES),
                              "text_b": list(WARMUP_REPLIES)})]
  return [(signature_name, {"text": list(WARMUP_SENTENCES)})]


def export_classifier(model, preprocessor, labels, export_dir, task_name="",
                      is_pair=False, version=None, is_regression=False, xla=False,
                      dtype="float32", multi_label=False):
  """Writes ``export_dir/<version>/`` (a classifier SavedModel); returns its path.

  Args:
    model, preprocessor, labels, is_pair, is_regression, xla, dtype,
      multi_label: see :class:`ClassifierServingModule`.
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    task_name: recorded in the metadata file.
    version: integer version; default :func:`next_version`.

  Returns:
    the path of the version directory.

  Raises:
    FileExistsError: that version already exists.
    ValueError: a classification export without labels, labels that do
      not match the model's number of outputs, or an unknown ``dtype``.
  """
  if not is_regression:
    if not labels:
      raise ValueError("export_classifier: labels are required unless "
                       "is_regression=True")
    num = getattr(model, "num_labels", len(labels))
    if num != len(labels):
      raise ValueError("export_classifier: %d labels for a model with %d outputs"
                       % (len(labels), num))
  module = ClassifierServingModule(model, preprocessor, labels, is_pair,
                                   is_regression, xla, dtype, multi_label)
  metadata = {
      "export": "classifier", "task": task_name, "task_name": task_name,
      "labels": None if labels is None else [str(l) for l in labels],
      "is_pair": bool(is_pair), "is_regression": bool(is_regression),
      "multi_label": module.multi_label,
      "inputs": ["text_a", "text_b"] if is_pair else ["text"],
      "max_seq_length": preprocessor.max_seq_length,
      "do_lower_case": preprocessor.do_lower_case,
      "preserve_unused_tokens": preprocessor.preserve_unused_tokens,
      "xla": bool(xla),
      "dtype": dtype,
  }
  if xla:
    metadata["xla_shapes"] = len(xla_shapes(preprocessor.max_seq_length))
  return base.write_export(module, {"serving_default": module.serve},
                       export_dir, version, metadata,
                       _text_requests("serving_default", is_pair))


def export_preprocessor(preprocessor, export_dir, version=None):
  """Writes the preprocessor alone as ``export_dir/<version>/``; returns the path.

  See :class:`PreprocessorServingModule` for the signatures.

  Raises:
    FileExistsError: that version already exists.
  """
  module = PreprocessorServingModule(preprocessor)
  signatures = {"serving_default": module.serve, "pair": module.serve_pair}
  metadata = {"export": "preprocessor", "task": None, "labels": None,
              "is_pair": None, "max_seq_length": preprocessor.max_seq_length,
              "do_lower_case": preprocessor.do_lower_case,
              "preserve_unused_tokens": preprocessor.preserve_unused_tokens,
              "vocab_size": preprocessor.vocab_size,
              "inputs": {"serving_default": ["text"], "pair": ["text_a", "text_b"]}}
  return base.write_export(module, signatures, export_dir, version, metadata,
                       _text_requests("serving_default", False) +
                       _text_requests("pair", True))


def export_encoder(encoder, export_dir, version=None, max_seq_length=128):
  """Writes the encoder alone as ``export_dir/<version>/``; returns the path.

  Args:
    encoder: a built :class:`bert_tf.modeling.BertEncoder`.
    export_dir, version: as :func:`export_classifier`.
    max_seq_length: recorded in the metadata and the width of the warm-up
      request (the signature itself takes any S <= max_position_embeddings).

  Raises:
    FileExistsError: that version already exists.
    ValueError: ``max_seq_length`` above ``max_position_embeddings``.
  """
  config = encoder.config
  if max_seq_length > config.max_position_embeddings:
    raise ValueError("--max_seq_length %d exceeds max_position_embeddings %d" %
                     (max_seq_length, config.max_position_embeddings))
  module = EncoderServingModule(encoder)
  # One row of id 0 (valid for any vocab), one position unmasked.
  mask = np.zeros([1, max_seq_length], np.int32)
  mask[0, 0] = 1
  request = {"input_word_ids": np.zeros([1, max_seq_length], np.int32),
             "input_mask": mask,
             "input_type_ids": np.zeros([1, max_seq_length], np.int32)}
  metadata = {"export": "encoder", "task": None, "labels": None,
              "is_pair": None, "max_seq_length": int(max_seq_length),
              "num_hidden_layers": config.num_hidden_layers,
              "hidden_size": config.hidden_size,
              "max_position_embeddings": config.max_position_embeddings,
              "inputs": ["input_word_ids", "input_mask", "input_type_ids"]}
  return base.write_export(module, {"serving_default": module.serve},
                       export_dir, version, metadata,
                       [("serving_default", request)])
