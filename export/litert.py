"""LiteRT (``.tflite``) export with the tokenizer inside: the ``litert`` format.

One file, ``<export_dir>/<version>/model.tflite``, beside the metadata file
every export writes (``assets.extra/bert_tf_export.json``, with the label
list), answering raw strings under LiteRT (PyPI ``ai-edge-litert``) with
XNNPACK: the small-batch CPU / on-device runtime (issue 61).

The graph (every op a LiteRT builtin or one of tensorflow-text's LiteRT
kernels, ``tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS``; no ragged op
and no string op of core TensorFlow at the boundary):

1. ``FastBertTokenizer`` (tensorflow-text ``FastBertNormalizer`` +
   ``FastWordpieceTokenizer``: the original ``BasicTokenizer`` +
   ``WordpieceTokenizer`` end to end; uncased models lower-case, NFD and
   strip accents inside it);
2. ``RoundRobinTrimmer`` to ``max_seq_length`` - 2 (one text) or - 3 (a
   pair): the original ``_truncate_seq_pair`` (longest first, ties trim
   text_b);
3. dense packing ``[CLS] a [SEP] b [SEP]`` to ``[B, max_seq_length]``
   (``RaggedTensorToTensor`` to a fixed width, then only dense builtins);
4. the model (built-in ops only; ``skip_padding=False``) on the batch cut
   to its longest row (:meth:`LiteOps.own_length`: one encoder graph whose
   shapes the interpreter sets per call and XNNPACK re-plans), and the
   task's outputs: a short request does not pay for the full width.

Signatures: ``serving_default`` with the SavedModel's input names (``text``
/ ``text_a`` + ``text_b``, ``sentence``, ``context`` + ``endings``,
``input_word_ids``...) and, where LiteRT has them, its output names and
dtypes (``labels`` as strings: LiteRT gathers strings). Differences from
the SavedModel, listed in :data:`TOKEN_DIFFERENCES` and warned at export:

* ``FastBertNormalizer`` cleans text differently from the original
  ``_clean_text``: a control or format character (``\\x00``, ``\\x07``,
  U+200B, U+00AD) splits the word where the original deletes it and joins
  the two halves;
* ``--preserve_unused_tokens`` cannot be honoured (``FastBertTokenizer`` has
  no such option): ``[unused1]`` becomes ``[``, ``unused``, ``##1``, ``]``;
* invalid UTF-8 is dropped as the SavedModel drops it, but a word it sits
  inside is split there (each well-formed run is tokenized alone:
  :func:`bert_tf.export.litert_text.tokenize_valid`; NER's client refuses it);
* uncased: ``FastBertNormalizer`` lower-cases by NFKC case folding, the
  original by ``str.lower`` + NFD: ligatures, full-width forms, ``\u00df``,
  fractions, Roman numerals and final sigma tokenize differently (measured:
  8 of 4,535 corpus lines uncased, 0 cased, besides the control characters).

NER answers what the NER SavedModel (:mod:`bert_tf.export.tagging`)
answers, every output (:data:`NER_OUTPUTS`: ``words``, ``tags``,
``num_words``, ``word_start_char`` / ``word_end_char``, ``entity_type``,
``entity_text``, ``entity_start_char`` / ``entity_end_char``,
``num_entities``, ``truncated``) with its dtypes and padding, in dense ops
(:func:`tag_sentences`): the words are split on ``str.split()``'s
whitespace from the sentence's bytes (tensorflow-text ``ByteSplitter``;
offsets counted in code points), cut out with ``ByteSplitByOffsets`` (the
one substring kernel LiteRT has), each word tokenized alone, the pieces
read in doc-stride windows of ``max_seq_length`` as the SavedModel (all
windows of the batch, [B * K, S], through one encoder call at the longest
window's width; K the batch's most, at most ``max_windows``), each word given the argmax at its first
piece in its max-context window (run_squad's float64 score compared as
exact ranks, :func:`max_context_ranks`), and entities found with
conlleval's chunk rules (:func:`entities`). Strings are padded with "" by
gathering from tables that end with an empty substring (LiteRT
concatenates no strings; :mod:`bert_tf.export.litert_ner`). SQuAD is
refused (its question + context windows and span choice are not written in
these ops; the refusal is its task kind's), before any work.

The task computation is each kind's serving module
(:mod:`bert_tf.export.serving`), the SavedModel's; this format gives it
:class:`LiteOps` (the tokenizer and packing of
:mod:`bert_tf.export.litert_text`, the model at the batch's own length) and
writes the converted file through :func:`bert_tf.export.base.write_version`.

The preprocessor and features exports carry a second signature, ``pair``
(``text_a``, ``text_b``), as their SavedModels do.

Source: tensorflow-text's LiteRT guide (``FastBertTokenizer`` in TFLite,
``tflite_registrar``), MediaPipe Model Maker's BERT text classifier, and
``tf.lite.TFLiteConverter`` (TF 2.21) post-training dynamic-range / float16
quantization.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from typing import Dict, List, Optional, Sequence

import tensorflow as tf

from bert_tf import errors
from bert_tf import task_kinds
from bert_tf.export import base
from bert_tf.export import client
from bert_tf.export import litert_ner
from bert_tf.export import litert_text
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib

FORMAT = task_kinds.LITERT
MODEL_FILE = client.TFLITE_FILE
QUANTIZE = ("none", "dynamic_int8", "float16")
TOKEN_DIFFERENCES = (
    "control and format characters (\\x00, \\x07, U+200B, U+00AD...) split a word "
    "where the original deletes them and joins its halves",
    "invalid UTF-8 bytes are dropped as the SavedModel drops them, but a word they sit "
    "inside is split there where the SavedModel joins its halves",
)
# Uncased models only: FastBertNormalizer lower-cases by NFKC case folding.
UNCASED_DIFFERENCE = (
    "uncased: NFKC case folding where the original lower-cases and applies NFD: "
    "ligatures, full-width forms, \u00df, fractions, Roman numerals, final sigma "
    "(\ufb01 -> fi, \uff21 -> a, \u00df -> ss, \u00bd -> 1/2, \u03c2 -> \u03c3)")
UNUSED_DIFFERENCE = ("--preserve_unused_tokens is not honoured: FastBertTokenizer "
                     "splits [unusedN] into [ unused ##N ]")
fast_tokenizer = litert_text.fast_tokenizer
dense_features = litert_text.dense_features


class LiteRTExportError(errors.BertTfError, ValueError):
  """A LiteRT export that cannot be written as asked (one line)."""


class LiteOps(serving.TextOps):
  """The ``litert`` format's ops (see the module doc): fixed shapes, dense
  packing, tensorflow-text's LiteRT kernels, the model at the batch's length.

  Args:
    preprocessor: the :class:`BertPreprocessor` the model trained with
      (None for the id-level encoder).
  """

  format = FORMAT
  fixed_shapes = True      # [B, max_seq_length] and [B, num_choices] inputs
  string_tables = False    # no vocab-string outputs (features' ``tokens``)

  def __init__(self, preprocessor=None):
    self.preprocessor = preprocessor
    self.tokenizer = None if preprocessor is None else litert_text.fast_tokenizer(preprocessor)

  def attach(self, module: tf.Module, model) -> None:
    """``model``'s weights into ``module`` and the tokenizer beside them."""
    if model is not None:
      base.track_tf_variables(module, model)
    module.tokenizer = self.tokenizer

  def string_spec(self, name: str) -> tf.TensorSpec:
    return tf.TensorSpec([None], tf.string, name=name)

  def batch(self, text: tf.Tensor) -> tf.Tensor:
    """``text`` flattened to [B] (row-major), as the SavedModel flattens it:
    the interpreter takes a [B, 1] request into the [B] input. A reshape to
    [-1] alone is folded away by the converter as a no-op on a [B] input;
    through [-1, 1] it stays (``tests/test_litert.py`` sends [B, 1])."""
    return tf.reshape(tf.reshape(text, [-1, 1]), [-1])

  def guard(self, fn, texts: Sequence[tf.Tensor]) -> dict:
    """``fn(*texts)``; an empty batch is answered by empty outputs where
    the model is called (:meth:`at_least_one_row`): strings cannot be padded
    in LiteRT (no string CONCATENATION kernel)."""
    return fn(*texts)

  @staticmethod
  def at_least_one_row(features: Dict[str, tf.Tensor]):
    """``(features with a zero row appended when they have none, rows)``:
    the encoder's kernels (UNPACK) refuse an empty batch, so zero rows run
    one row of padding whose outputs are then cut away."""
    rows = tf.shape(features["input_ids"])[0]
    pad = tf.maximum(0, 1 - rows)
    out = {}
    for k, v in features.items():
      zeros = tf.zeros(tf.concat([[pad], tf.shape(v)[1:]], 0), v.dtype)
      out[k] = tf.concat([v, zeros], 0)
    return out, rows

  def same_batch(self, text_a: tf.Tensor, text_b: tf.Tensor):
    # pack_segments refuses batches of different sizes (its PACK op).
    return text_a, text_b

  def gate(self, x, y, message, *tensors):  # pylint: disable=unused-argument
    # LiteRT has no assertion kernel: the reshape after it refuses bad sizes.
    return tensors

  def tokenize(self, texts: Sequence[tf.Tensor]) -> list:
    """Word-piece ids of each text batch, invalid UTF-8 dropped (int32
    RaggedTensors [B, (T)]; :func:`bert_tf.export.litert_text.tokenize_valid`)."""
    return [litert_text.tokenize_valid(self.tokenizer, t) for t in texts]

  def pack_tokens(self, tokens: Sequence[tf.RaggedTensor]) -> Dict[str, tf.Tensor]:
    """int32 [B, max_seq_length] (:func:`bert_tf.export.litert_text.pack_segments`)."""
    return litert_text.pack_segments(self.preprocessor, tokens)

  @staticmethod
  def trim(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """As packed: the model call cuts the batch to its length (:meth:`own_length`)."""
    return features

  def pack(self, texts: Sequence[tf.Tensor]) -> Dict[str, tf.Tensor]:
    """int32 [B, max_seq_length] (:func:`bert_tf.export.litert_text.dense_features`)."""
    return self.pack_tokens(self.tokenize(texts))

  padded = pack

  def choice_features(self, context, endings, num_choices: int) -> Dict[str, tf.Tensor]:
    """Every choice packed, int32 [B, N, max_seq_length]."""
    n, seq = int(num_choices), self.preprocessor.max_seq_length
    contexts = tf.reshape(tf.tile(context[:, tf.newaxis], [1, n]), [-1])
    f = self.pack([contexts, tf.reshape(endings, [-1])])
    return {k: tf.reshape(v, [-1, n, seq]) for k, v in f.items()}

  def own_length(self, module: tf.Module, features: Dict[str, tf.Tensor], post=None):
    """The model on int32 ``features`` [B, S] or [B, K, S] cut to the batch's
    longest row: one encoder graph with dynamic shapes, resized by the
    interpreter and re-planned by XNNPACK when the shape changes, so no
    padding column is computed (a 10-token question runs at 12 positions).
    Outputs must not depend on the width (classifier, multiple choice), or
    ``post(output, width)`` makes them so (NER: per-position tags padded
    back to S; ``width`` an int32 scalar). The padding is masked, so the
    outputs are the fixed-width graph's (logits bit-identical, measured:
    bench/results/litert_buckets_2026-12-05/, where length buckets and
    fixed shapes were slower at batch 32 and held XNNPACK's packed copy of
    the weights once per bucket)."""
    features, rows = self.at_least_one_row(features)
    mask = features["input_mask"]
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(mask, axis=-1)), 1)
    size = tf.concat([tf.shape(mask)[:-1], tf.reshape(longest, [1])], 0)
    cut = {k: tf.slice(v, tf.zeros_like(size), size) for k, v in features.items()}
    out = tf.cast(base.serving_call(module, cut, skip_padding=False), tf.float32)
    if post is not None:
      out = post(out, longest)
    return out[:rows]

  def logits(self, module: tf.Module, features: Dict[str, tf.Tensor]) -> tf.Tensor:
    return self.own_length(module, features)

  def encoder_outputs(self, module: tf.Module, features: Dict[str, tf.Tensor]) -> dict:
    features, rows = self.at_least_one_row(features)
    out = base.serving_call(module, features, skip_padding=False)
    return tf.nest.map_structure(lambda t: t[:rows], out)

  def encoder_width(self, spec: spec_lib.ServingSpec) -> int:
    return spec.max_seq_length

  def tag_sentences(self, module: tf.Module, sentence: tf.Tensor) -> dict:
    """NER in dense ops (:func:`bert_tf.export.litert_ner.tag_sentences`)."""
    return litert_ner.tag_sentences(module, self, sentence)


def check_options(kind: str, quantize: str) -> None:
  """Refuses, before any work, an export the litert format cannot write.

  Raises:
    LiteRTExportError: the kind's record refuses the format (its one-line
      reason) or has no export; ``quantize`` not one of :data:`QUANTIZE`.
  """
  record = task_kinds.get(kind, argument="what")
  reason = record.refusal(FORMAT)
  if reason:
    raise LiteRTExportError("--format=litert --what=%s: not convertible (%s)" % (
        kind, reason), argument="format")
  if quantize not in QUANTIZE:
    raise LiteRTExportError("--quantize=%s: one of %s" % (quantize, ", ".join(QUANTIZE)),
                            argument="quantize")


def convert(module: serving.ServingModule, quantize: str = "none") -> bytes:
  """The ``.tflite`` flatbuffer of ``module.serve`` (signature
  ``serving_default``) and ``module.serve_pair`` (signature ``pair``) when
  it has one.

  Args:
    module: a serving module over :class:`LiteOps`.
    quantize: ``none`` (float32), ``dynamic_int8`` (int8 weights, dynamic-range
      activations: ``Optimize.DEFAULT``) or ``float16`` (float16 weights).

  Returns:
    bytes.

  Raises:
    LiteRTExportError: the converter refused the graph (its first line).
  """
  if module.serve_pair is None:
    fn = module.serve.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], module)
    return _convert(converter, module, quantize)
  # Named signatures: the converter names several concrete functions after
  # their graphs, so they go through a SavedModel with the SavedModel's keys
  # (its root without a ``serve`` attribute, which the converter would take
  # for a Keras ``model.export`` and keep alone).
  root = tf.Module()
  root.module = module
  with tempfile.TemporaryDirectory() as tmp:
    tf.saved_model.save(root, tmp, signatures=module.signatures())
    converter = tf.lite.TFLiteConverter.from_saved_model(
        tmp, signature_keys=["serving_default", "pair"])
    return _convert(converter, module, quantize)


def _convert(converter, module, quantize):
  # tensorflow-text's kernels are custom ops; everything else must be a builtin.
  converter.allow_custom_ops = True
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if quantize != "none":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if quantize == "float16":
    converter.target_spec.supported_types = [tf.float16]
  try:
    return converter.convert()
  except Exception as e:  # pylint: disable=broad-except
    line = next((l for l in str(e).splitlines() if "error" in l.lower()), str(e))
    raise LiteRTExportError("LiteRT conversion of --what=%s failed: %s" % (
        module.kind, line.strip()[:400])) from e


def token_warnings(preserve_unused_tokens: bool, do_lower_case: bool = False) -> List[str]:
  """The tokenizer differences from the original that this export carries."""
  out = list(TOKEN_DIFFERENCES)
  if do_lower_case:
    out.append(UNCASED_DIFFERENCE)
  if preserve_unused_tokens:
    out.insert(0, UNUSED_DIFFERENCE)
  return out


def litert_metadata(module: serving.ServingModule, quantize: str) -> dict:
  """The metadata file of a ``.tflite`` export: the module's, the format's
  (file, quantization, tokenizer and its differences, what loads it)."""
  import tensorflow_text  # pylint: disable=g-import-not-at-top
  spec = module.spec
  text_in = spec.kind != "encoder"
  meta = module.metadata()
  meta.update({
      "format": FORMAT, "file": MODEL_FILE, "quantize": quantize,
      "tokenizer": "tensorflow_text.FastBertTokenizer" if text_in else None,
      "token_differences": token_warnings(spec.preserve_unused_tokens,
                                          bool(spec.do_lower_case)) if text_in else [],
      "requires": "ai_edge_litert InterpreterWithCustomOps with "
                  "tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS (tensorflow-text %s)"
                  % tensorflow_text.__version__,
      "tensorflow_version": tf.__version__,
      "tensorflow_text_version": tensorflow_text.__version__})
  encoder = getattr(module.model, "encoder", module.model) if spec.kind != "preprocessor" else None
  if encoder is not None and hasattr(encoder, "config"):
    meta.update(num_hidden_layers=encoder.config.num_hidden_layers,
                hidden_size=encoder.config.hidden_size)
  return meta


def write(module: serving.ServingModule, export_dir: str, version: Optional[int] = None,
          quantize: str = "none") -> str:
  """Writes ``export_dir/<version>/model.tflite`` of a serving module over
  :class:`LiteOps` and its metadata file (:func:`bert_tf.export.base.write_version`).

  Returns:
    the version directory's path (written under a temporary name and
    renamed when whole).

  Raises:
    LiteRTExportError: ``quantize`` or the kind refused (before any work);
      the converter's refusal.
    FileExistsError: that version exists; ExportDirError: ``export_dir``
      holds something besides versions.
  """
  check_options(module.kind, quantize)
  base.check_export_dir(export_dir)
  if module.spec.preserve_unused_tokens and module.kind != "encoder":
    warnings.warn("LiteRT export: " + UNUSED_DIFFERENCE, stacklevel=2)
  flat = convert(module, quantize)

  def fill(directory):
    with open(os.path.join(directory, MODEL_FILE), "wb") as f:
      f.write(flat)
    return {}
  return base.write_version(export_dir, version, fill, litert_metadata(module, quantize))


class _WidthOnly:
  """Stands for a preprocessor where only the width is needed (id-level encoder)."""

  def __init__(self, seq):
    self.max_seq_length = seq
    self.do_lower_case = None
    self.preserve_unused_tokens = False


def export_litert(what: str, model, preprocessor, export_dir: str,
                  version: Optional[int] = None, *, quantize: str = "none",
                  labels: Optional[Sequence[str]] = None, is_pair: bool = False,
                  is_regression: bool = False, num_choices: Optional[int] = None,
                  task_name: str = "", max_seq_length: Optional[int] = None,
                  doc_stride: Optional[int] = None, max_windows: Optional[int] = None,
                  multi_label: bool = False) -> str:
  """Writes ``export_dir/<version>/model.tflite`` and its metadata file.

  Args:
    what: a task kind the format writes (its record's ``formats``; SQuAD
      refused).
    model: the task's Keras model (encoder / features: the ``BertEncoder``).
    preprocessor: the :class:`BertPreprocessor` (None only for ``encoder``
      with ``max_seq_length``).
    export_dir: the export base directory; version: default the next free.
    quantize: one of :data:`QUANTIZE`.
    labels, is_pair, is_regression, multi_label, num_choices, task_name,
      doc_stride, max_windows: the task's (:class:`ServingSpec`; defaults
      :attr:`defaults` of the kind's serving module).
    max_seq_length: the id-level encoder's fixed width (default the
      preprocessor's).

  Returns:
    the version directory's path (written under a temporary name and
    renamed when whole).

  Raises:
    LiteRTExportError: an option that cannot be honoured (before any work),
      a graph the converter refuses. SpecError: settings that cannot be
      served. FileExistsError: that version exists.
  """
  check_options(what, quantize)
  seq = int(max_seq_length or preprocessor.max_seq_length)
  problem = spec_lib.REGRESSION if is_regression else (
      spec_lib.MULTI_LABEL if multi_label else spec_lib.SINGLE_LABEL)
  pre = preprocessor if preprocessor is not None else _WidthOnly(seq)
  spec = spec_lib.ServingSpec.create(
      what, seq, task_name=task_name, labels=labels, is_pair=is_pair,
      problem_type=problem, num_choices=num_choices, doc_stride=doc_stride,
      max_windows=max_windows, do_lower_case=getattr(pre, "do_lower_case", None),
      preserve_unused_tokens=bool(getattr(pre, "preserve_unused_tokens", False)))
  ops = LiteOps(None if what == "encoder" else pre)
  module = serving.build(spec, model, None if what == "encoder" else pre, ops)
  return write(module, export_dir, version, quantize)
