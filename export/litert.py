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
3. dense packing ``[CLS] a [SEP] b [SEP]`` to a fixed ``[B, max_seq_length]``
   (``RaggedTensorToTensor`` to a fixed width, then only dense builtins), so
   the encoder's shapes are static and XNNPACK runs it;
4. the model (built-in ops only; ``skip_padding=False``, every position
   computed) and the task's outputs. The classifier and multiple-choice
   graphs run it at the smallest of :data:`BUCKETS` / ``max_seq_length``
   that holds the batch's longest row (``IF`` branches of fixed shapes:
   short requests do not pay for the full width).

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
* invalid UTF-8 is tokenized as the kernel reads it, not replaced by
  U+FFFD first (the client, :class:`bert_tf.export.client.LiteRTSignature`,
  refuses it in one line);
* uncased: ``FastBertNormalizer`` lower-cases by NFKC case folding, the
  original by ``str.lower`` + NFD: ligatures, full-width forms, ``\u00df``,
  fractions, Roman numerals and final sigma tokenize differently (measured:
  8 of 4,535 corpus lines uncased, 0 cased, besides the control characters).

Task outputs that the LiteRT runtime cannot compute are reduced: NER
answers per whitespace word (``WhitespaceTokenizer``, a LiteRT kernel) with
``tags`` string [B, W] ("" as padding), ``tag_ids`` int32 [B, W] (-1),
``num_words`` int32 [B] and ``truncated`` bool [B] from the first window of
``max_seq_length`` pieces (words past it get ``O``, as the SavedModel's
words past ``max_windows``), plus the per-piece ``logits`` [B, S, L]; no
doc-stride windows, no ``words`` strings (LiteRT's ``RaggedTensorToTensor``
has no string kernel), no entity spans or character offsets; SQuAD is refused (its doc-stride windows and span choice
are ragged and string ops that have no LiteRT kernel), before any work.

Source: tensorflow-text's LiteRT guide (``FastBertTokenizer`` in TFLite,
``tflite_registrar``), MediaPipe Model Maker's BERT text classifier, and
``tf.lite.TFLiteConverter`` (TF 2.21) post-training dynamic-range / float16
quantization.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf import errors
from bert_tf import io_utils
from bert_tf.export import base
from bert_tf.export import client

MODEL_FILE = client.TFLITE_FILE
QUANTIZE = ("none", "dynamic_int8", "float16")
# Encoder widths of the classifier and multiple-choice graphs: a batch runs
# at the smallest that holds its longest row (fixed shapes, so XNNPACK runs
# every one); the export's max_seq_length is the last.
BUCKETS = (16, 32, 64)
# The exports (fine_tuned.WHATS) this format writes, and the one it refuses.
WHATS = ("classifier", "ner", "swag", "preprocessor", "encoder", "features")
REFUSED = {"squad": "SQuAD's doc-stride windows, offsets and best-span choice are "
                    "ragged and string ops with no LiteRT kernel; export it as "
                    "--format=saved_model"}
TOKEN_DIFFERENCES = (
    "control and format characters (\\x00, \\x07, U+200B, U+00AD...) split a word "
    "where the original deletes them and joins its halves",
    "invalid UTF-8 bytes are read by FastBertNormalizer as they are, not replaced by "
    "U+FFFD first",
)
# Uncased models only: FastBertNormalizer lower-cases by NFKC case folding.
UNCASED_DIFFERENCE = (
    "uncased: NFKC case folding where the original lower-cases and applies NFD: "
    "ligatures, full-width forms, \u00df, fractions, Roman numerals, final sigma "
    "(\ufb01 -> fi, \uff21 -> a, \u00df -> ss, \u00bd -> 1/2, \u03c2 -> \u03c3)")
UNUSED_DIFFERENCE = ("--preserve_unused_tokens is not honoured: FastBertTokenizer "
                     "splits [unusedN] into [ unused ##N ]")


class LiteRTExportError(errors.BertTfError, ValueError):
  """A LiteRT export that cannot be written as asked (one line)."""


def fast_tokenizer(preprocessor):
  """The preprocessor's tokenizer as tensorflow-text ``FastBertTokenizer``.

  Args:
    preprocessor: a :class:`bert_tf.preprocessing.BertPreprocessor` (its
      vocab lines, ``do_lower_case``).

  Returns:
    ``tensorflow_text.FastBertTokenizer`` giving int32 ids; words over 200
    bytes become ``[UNK]`` (the SavedModel's ``max_bytes_per_word``).
  """
  import tensorflow_text as text  # pylint: disable=g-import-not-at-top
  return text.FastBertTokenizer(
      vocab=list(preprocessor.vocab_lines()), token_out_type=tf.int32,
      unknown_token="[UNK]", max_bytes_per_word=200,
      lower_case_nfd_strip_accents=preprocessor.do_lower_case)


def dense_features(preprocessor, tokenizer, texts: Sequence[tf.Tensor]) -> Dict[str, tf.Tensor]:
  """``[CLS] a [SEP] (b [SEP])`` of one or two string batches, dense.

  Args:
    preprocessor: the :class:`BertPreprocessor` (``max_seq_length`` S and
      the special ids).
    tokenizer: :func:`fast_tokenizer`'s.
    texts: one or two string [B] tensors.

  Returns:
    dict of int32 [B, S]: ``input_ids``, ``input_mask``, ``segment_ids``;
    the ids of :meth:`BertPreprocessor.__call__` for every text the two
    tokenizers agree on (round-robin trimming, zero padding).
  """
  return pack_segments(preprocessor, [tokenizer.tokenize(t) for t in texts])


def pack_segments(preprocessor, segments: Sequence[tf.RaggedTensor]) -> Dict[str, tf.Tensor]:
  """:func:`dense_features` of one or two int ragged id batches [B, (T)]."""
  import tensorflow_text as text  # pylint: disable=g-import-not-at-top
  seq = preprocessor.max_seq_length
  n = len(segments)
  if n == 2:
    # RoundRobinTrim's LiteRT kernel crashes the process on batches of
    # different sizes; PACK (its input here) refuses them with an error.
    splits = tf.stack([segments[0].row_splits, segments[1].row_splits])
    segments = [tf.RaggedTensor.from_row_splits(seg.values, splits[k], validate=False)
                for k, seg in enumerate(segments)]
  segments = text.RoundRobinTrimmer(max_seq_length=seq - n - 1).trim(segments)
  pos = tf.range(seq, dtype=tf.int32)[tf.newaxis, :]
  pad = tf.constant(preprocessor.pad_id, tf.int32)
  ids = tf.where(pos == 0, tf.constant(preprocessor.cls_id, tf.int32), pad)
  ids = ids + tf.zeros_like(tf.cast(segments[0].row_splits[1:, tf.newaxis], tf.int32))
  segment_ids = tf.zeros_like(ids)
  offset = tf.ones_like(ids[:, :1])
  for k, seg in enumerate(segments):
    dense = tf.cast(seg.to_tensor(default_value=0, shape=[None, seq]), tf.int32)
    length = tf.cast(seg.row_splits[1:] - seg.row_splits[:-1], tf.int32)[:, tf.newaxis]
    rel = pos - offset
    inside = tf.logical_and(rel >= 0, rel < length)
    picked = tf.gather(dense, tf.clip_by_value(rel, 0, seq - 1), batch_dims=1)
    ids = tf.where(inside, picked, ids)
    ids = tf.where(tf.equal(rel, length), tf.constant(preprocessor.sep_id, tf.int32), ids)
    if k:
      segment_ids = tf.where(tf.logical_and(rel >= 0, rel <= length), k, segment_ids)
    offset = offset + length + 1
  mask = tf.cast(pos < offset, tf.int32)
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segment_ids}


class LiteRTModule(tf.Module):
  """The serving function of one export, in LiteRT-convertible ops.

  Args:
    what: one of :data:`WHATS`.
    model: the task's Keras model (``classifier``, ``ner``, ``swag``) or the
      :class:`BertEncoder` (``encoder``, ``features``); None for
      ``preprocessor``.
    preprocessor: the :class:`BertPreprocessor` the model was trained with.
    labels: label names (classifier, ner); None for regression / others.
    is_pair, is_regression: the classifier's shape.
    num_choices: endings per context (``swag``).

  Attributes:
    serve: the ``tf.function`` with the signature's ``input_signature``.
  """

  def __init__(self, what: str, model, preprocessor, labels: Optional[List[str]] = None,
               is_pair: bool = False, is_regression: bool = False, num_choices: int = 4):
    super().__init__(name="bert_litert_serving")
    self.what = what
    if model is not None:
      base.track_tf_variables(self, model)
    self.preprocessor = preprocessor
    self.tokenizer = fast_tokenizer(preprocessor) if what != "encoder" else None
    self.labels = labels
    self.is_pair, self.is_regression = bool(is_pair), bool(is_regression)
    self.num_choices = int(num_choices)
    seq = preprocessor.max_seq_length if preprocessor is not None else None
    s = lambda n: tf.TensorSpec([None], tf.string, name=n)
    if what == "classifier" and is_pair:
      self.serve = tf.function(lambda text_a, text_b: self._classify([text_a, text_b]),
                               input_signature=[s("text_a"), s("text_b")], autograph=False)
    elif what == "classifier":
      self.serve = tf.function(lambda text: self._classify([text]),
                               input_signature=[s("text")], autograph=False)
    elif what == "preprocessor":
      self.serve = tf.function(lambda text: self._preprocess([text]),
                               input_signature=[s("text")], autograph=False)
    elif what == "features":
      self.serve = tf.function(lambda text_a: self._features([text_a]),
                               input_signature=[s("text_a")], autograph=False)
    elif what == "ner":
      self.serve = tf.function(self._tag, input_signature=[s("sentence")], autograph=False)
    elif what == "swag":
      self.serve = tf.function(self._choose, autograph=False, input_signature=[
          s("context"), tf.TensorSpec([None, self.num_choices], tf.string, name="endings")])
    elif what == "encoder":
      i = lambda n: tf.TensorSpec([None, seq], tf.int32, name=n)
      self.serve = tf.function(self._encode, autograph=False, input_signature=[
          i("input_word_ids"), i("input_mask"), i("input_type_ids")])
    else:
      raise LiteRTExportError("--what=%s: the litert format writes %s" % (
          what, ", ".join(WHATS)), argument="what")

  def _call(self, features, **kwargs):
    return base.serving_call(self, features, **kwargs)

  def _pack(self, texts):
    return dense_features(self.preprocessor, self.tokenizer, texts)

  def _bucketed(self, features):
    """The model on ``features`` [B, S] cut to the smallest of :data:`BUCKETS`
    (and S) that holds the batch's longest row: one ``IF`` per bucket, each
    branch a fixed-shape subgraph that XNNPACK runs. Outputs must not depend
    on the width (classifier, multiple choice)."""
    seq = self.preprocessor.max_seq_length
    widths = [w for w in BUCKETS if w < seq] + [seq]
    longest = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=-1))

    def run(width):
      return lambda: tf.cast(self._call({k: v[..., :width] for k, v in features.items()},
                                        skip_padding=False), tf.float32)
    out = run(widths[-1])
    for width in reversed(widths[:-1]):
      out = (lambda w, rest: lambda: tf.cond(longest <= w, run(w), rest))(width, out)
    return out()

  def _classify(self, texts):
    logits = self._bucketed(self._pack(texts))
    if self.is_regression:
      return {"predictions": logits[:, 0]}
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
            "label_ids": label_ids,
            "labels": tf.gather(tf.constant(self.labels), label_ids)}

  def _preprocess(self, texts):
    f = self._pack(texts)
    return {"input_word_ids": f["input_ids"], "input_mask": f["input_mask"],
            "input_type_ids": f["segment_ids"], "input_ids": tf.identity(f["input_ids"]),
            "segment_ids": tf.identity(f["segment_ids"])}

  def _features(self, texts):
    f = self._pack(texts)
    out = self._call(f, skip_padding=False)
    return {"encoder_outputs": tf.cast(tf.stack(out["encoder_outputs"], axis=1), tf.float32),
            "sequence_output": tf.cast(out["sequence_output"], tf.float32),
            "pooled_output": tf.cast(out["pooled_output"], tf.float32),
            "input_mask": f["input_mask"], "input_ids": tf.identity(f["input_ids"]),
            "segment_ids": f["segment_ids"]}

  def _encode(self, input_word_ids, input_mask, input_type_ids):
    out = self._call({"input_ids": input_word_ids, "input_mask": input_mask,
                      "segment_ids": input_type_ids}, skip_padding=False)
    result = {"sequence_output": tf.cast(out["sequence_output"], tf.float32),
              "pooled_output": tf.cast(out["pooled_output"], tf.float32)}
    for i, layer in enumerate(out["encoder_outputs"]):
      result["encoder_outputs_%d" % i] = tf.cast(layer, tf.float32)
    return result

  def _tag(self, sentence):
    import tensorflow_text as text  # pylint: disable=g-import-not-at-top
    seq = self.preprocessor.max_seq_length
    # Words split on whitespace (the CoNLL reader's words), then pieces per
    # word, regrouped per sentence with dense gathers on the row splits.
    words = text.WhitespaceTokenizer().tokenize(sentence)
    pieces = self.tokenizer.tokenize(words.flat_values)
    splits = pieces.row_splits
    sentence_splits = tf.gather(splits, words.row_splits)
    per_sentence = tf.RaggedTensor.from_row_splits(pieces.values, sentence_splits,
                                                   validate=False)
    f = pack_segments(self.preprocessor, [per_sentence])
    logits = tf.cast(self._call(f, skip_padding=False), tf.float32)
    piece_tags = tf.argmax(logits, axis=-1, output_type=tf.int32)
    # Each word's first piece, as a position in [CLS] pieces [SEP].
    first = tf.cast(splits[:-1] - tf.gather(sentence_splits, words.value_rowids()),
                    tf.int32) + 1
    first = tf.RaggedTensor.from_row_splits(first, words.row_splits,
                                            validate=False).to_tensor(-1)
    is_word = first >= 0
    covered = tf.logical_and(is_word, first < seq - 1)
    read = tf.gather(piece_tags, tf.clip_by_value(first, 0, seq - 1), batch_dims=1)
    outside = self.labels.index("O") if "O" in self.labels else 0
    tag_ids = tf.where(covered, read, tf.where(is_word, outside, -1))
    names = tf.constant(list(self.labels) + [""])
    return {"tags": tf.gather(names, tf.where(is_word, tag_ids, len(self.labels))),
            "tag_ids": tag_ids,
            "num_words": tf.cast(words.row_lengths(), tf.int32),
            "truncated": tf.reduce_any(tf.logical_and(is_word, tf.logical_not(covered)), 1),
            "logits": logits, "input_ids": tf.identity(f["input_ids"]),
            "input_mask": f["input_mask"]}

  def _choose(self, context, endings):
    n = self.num_choices
    contexts = tf.reshape(tf.tile(context[:, tf.newaxis], [1, n]), [-1])
    f = self._pack([contexts, tf.reshape(endings, [-1])])
    seq = self.preprocessor.max_seq_length
    f = {k: tf.reshape(v, [-1, n, seq]) for k, v in f.items()}
    logits = self._bucketed(f)
    return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
            "label_id": tf.argmax(logits, axis=-1, output_type=tf.int32)}


def check_options(what: str, quantize: str) -> None:
  """Refuses, before any work, an export the litert format cannot write.

  Raises:
    LiteRTExportError: ``what`` is SQuAD (:data:`REFUSED`, the reason) or
      not one of :data:`WHATS`; ``quantize`` not one of :data:`QUANTIZE`.
  """
  if what in REFUSED:
    raise LiteRTExportError("--format=litert --what=%s: not convertible (%s)" % (
        what, REFUSED[what]), argument="format")
  if what not in WHATS:
    raise LiteRTExportError("--format=litert --what=%s: the litert format writes %s" % (
        what, ", ".join(WHATS)), argument="what")
  if quantize not in QUANTIZE:
    raise LiteRTExportError("--quantize=%s: one of %s" % (quantize, ", ".join(QUANTIZE)),
                            argument="quantize")


def convert(module: LiteRTModule, quantize: str = "none") -> bytes:
  """The ``.tflite`` flatbuffer of ``module.serve`` (signature ``serving_default``).

  Args:
    module: a :class:`LiteRTModule`.
    quantize: ``none`` (float32), ``dynamic_int8`` (int8 weights, dynamic-range
      activations: ``Optimize.DEFAULT``) or ``float16`` (float16 weights).

  Returns:
    bytes.

  Raises:
    LiteRTExportError: the converter refused the graph (its first line).
  """
  fn = module.serve.get_concrete_function()
  converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], module)
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
        module.what, line.strip()[:400])) from e


def token_warnings(preserve_unused_tokens: bool, do_lower_case: bool = False) -> List[str]:
  """The tokenizer differences from the original that this export carries."""
  out = list(TOKEN_DIFFERENCES)
  if do_lower_case:
    out.append(UNCASED_DIFFERENCE)
  if preserve_unused_tokens:
    out.insert(0, UNUSED_DIFFERENCE)
  return out


def export_litert(what: str, model, preprocessor, export_dir: str,
                  version: Optional[int] = None, *, quantize: str = "none",
                  labels: Optional[Sequence[str]] = None, is_pair: bool = False,
                  is_regression: bool = False, num_choices: int = 4,
                  task_name: str = "", max_seq_length: Optional[int] = None,
                  config=None) -> str:
  """Writes ``export_dir/<version>/model.tflite`` and its metadata file.

  Args:
    what: one of :data:`WHATS` (SQuAD refused: :data:`REFUSED`).
    model: the task's Keras model (encoder / features: the ``BertEncoder``).
    preprocessor: the :class:`BertPreprocessor` (None only for ``encoder``
      with ``max_seq_length``).
    export_dir: the export base directory; version: default the next free.
    quantize: one of :data:`QUANTIZE`.
    labels, is_pair, is_regression, num_choices, task_name: the task's.
    max_seq_length: the id-level encoder's fixed width (default the
      preprocessor's).
    config: the model's :class:`BertConfig` (recorded in the metadata).

  Returns:
    the version directory's path (written under a temporary name and
    renamed when whole).

  Raises:
    LiteRTExportError: an option that cannot be honoured (before any work),
      a graph the converter refuses.
    FileExistsError: that version exists.
  """
  check_options(what, quantize)
  import tensorflow_text  # pylint: disable=g-import-not-at-top
  seq = int(max_seq_length or preprocessor.max_seq_length)
  if preprocessor is None:
    preprocessor = _WidthOnly(seq)
  pre_unused = bool(getattr(preprocessor, "preserve_unused_tokens", False))
  notes = [] if what == "encoder" else token_warnings(
      pre_unused, bool(getattr(preprocessor, "do_lower_case", False)))
  if pre_unused and what != "encoder":
    warnings.warn("LiteRT export: " + UNUSED_DIFFERENCE, stacklevel=2)
  module = LiteRTModule(what, model, preprocessor,
                        None if labels is None else [str(l) for l in labels],
                        is_pair, is_regression, num_choices)
  flat = convert(module, quantize)
  version = base.next_version(export_dir) if version is None else int(version)
  final = os.path.join(export_dir, str(version))
  inputs = [s.name for s in module.serve.input_signature]
  metadata = {
      "export": {"ner": "tagging", "swag": "multiple_choice",
                 "features": "encoder_all_layers"}.get(what, what),
      "format": "litert", "file": MODEL_FILE, "quantize": quantize,
      "task": task_name or None, "task_name": task_name,
      "labels": None if labels is None else [str(l) for l in labels],
      "is_pair": bool(is_pair) if what == "classifier" else (True if what == "swag" else None),
      "is_regression": bool(is_regression), "inputs": inputs,
      "max_seq_length": seq,
      "do_lower_case": getattr(preprocessor, "do_lower_case", None),
      "preserve_unused_tokens": pre_unused,
      "tokenizer": None if what == "encoder" else "tensorflow_text.FastBertTokenizer",
      "token_differences": notes,
      "requires": "ai_edge_litert InterpreterWithCustomOps with "
                  "tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS (tensorflow-text %s)"
                  % tensorflow_text.__version__,
      "tensorflow_version": tf.__version__,
      "tensorflow_text_version": tensorflow_text.__version__,
  }
  if what == "swag":
    metadata["num_choices"] = int(num_choices)
  if what == "ner":
    metadata["outputs_per"] = ("tags / tag_ids [B, W]: each whitespace word's first piece "
                               "in the first window (words past it: O, truncated); "
                               "logits [B, S, L] per piece")
  if config is not None:
    metadata.update(num_hidden_layers=config.num_hidden_layers,
                    hidden_size=config.hidden_size)
  with io_utils.atomic_directory(final) as tmp:
    with open(os.path.join(tmp, MODEL_FILE), "wb") as f:
      f.write(flat)
    extra = os.path.join(tmp, client.ASSETS_EXTRA)
    os.makedirs(extra)
    with open(os.path.join(extra, client.METADATA_FILE), "w", encoding="utf-8") as f:
      json.dump(metadata, f, indent=2)
  return final


class _WidthOnly:
  """Stands for a preprocessor where only the width is needed (id-level encoder)."""

  def __init__(self, seq):
    self.max_seq_length = seq
    self.do_lower_case = None


def xnnpack_share(tflite_path: str, request: Dict[str, np.ndarray],
                  num_threads: int = 1) -> Dict[str, int]:
  """How much of a ``.tflite`` XNNPACK takes over, measured on ``request``.

  LiteRT's Python interpreter applies XNNPACK (its default delegate) at the
  first call; afterwards the node list holds the file's operators and one
  ``DELEGATE`` node per partition that XNNPACK took. An operator is counted
  delegated when it lies inside a partition: between the partition's input
  and output tensors.

  Args:
    tflite_path: the file; request: the signature's inputs (a batch-1
      request: :func:`warmup_inputs`); num_threads: the interpreter's.

  Returns:
    ``{"ops": N, "delegated": D, "partitions": K, "subgraphs": G}``: of the
    main graph; G further subgraphs (the length buckets' encoders, ``IF``
    branches, which LiteRT's Python API does not list node by node; XNNPACK
    takes them too: BUILD_NOTES, "LiteRT export tokens").
  """
  interp = client.litert_interpreter(tflite_path, num_threads)
  interp.get_signature_runner()(**request)
  nodes = interp._get_ops_details()  # pylint: disable=protected-access
  ops = [n for n in nodes if n["op_name"] != "DELEGATE"]
  producer = {int(t): n["index"] for n in ops for t in n["outputs"]}
  inputs_of = {n["index"]: [int(t) for t in n["inputs"] if t >= 0] for n in ops}
  delegated = set()
  parts = [n for n in nodes if n["op_name"] == "DELEGATE"]
  for part in parts:
    boundary = {int(t) for t in part["inputs"]}
    stack, seen = [int(t) for t in part["outputs"]], set()
    while stack:
      t = stack.pop()
      if t in seen or t in boundary or t not in producer:
        continue
      seen.add(t)
      op = producer[t]
      delegated.add(op)
      stack.extend(inputs_of[op])
  return {"ops": len(ops), "delegated": len(delegated), "partitions": len(parts),
          "subgraphs": interp.num_subgraphs() - 1}


def warmup_inputs(what: str, is_pair: bool = False, num_choices: int = 4,
                  seq: int = 8) -> Dict[str, np.ndarray]:
  """A batch-1 request of the export's inputs (for :func:`xnnpack_share`)."""
  s = lambda *v: np.array([x.encode() for x in v], dtype=object)
  if what == "swag":
    return {"context": s("He opens the door."),
            "endings": np.array([[b"and walks in."] * num_choices], dtype=object)}
  if what == "encoder":
    z = np.zeros([1, seq], np.int32)
    return {"input_word_ids": z, "input_mask": z + 1, "input_type_ids": z}
  if what == "classifier" and is_pair:
    return {"text_a": s("a gorgeous film"), "text_b": s("I liked it")}
  name = {"classifier": "text", "preprocessor": "text", "features": "text_a",
          "ner": "sentence"}[what]
  return {name: s("Empire State Building is in New York.")}


def write_litert(run, what: str, export_dir: str, version: Optional[int] = None,
                 xla: bool = False, dtype: str = "float32", quantize: str = "none",
                 preprocessor=None) -> str:
  """The ``litert`` entry of :data:`bert_tf.export.fine_tuned.FORMATS`.

  Args:
    run: a :class:`bert_tf.export.fine_tuned.RunDir` holding its model.
    what: one of :data:`WHATS` (checked by ``export_run``).
    export_dir, version: as ``export_run``.
    xla, dtype: must be False / ``float32`` (a SavedModel-only choice).
    quantize: one of :data:`QUANTIZE`.
    preprocessor: the run's :class:`BertPreprocessor`
      (``fine_tuned.run_preprocessor``; None for ``encoder``).

  Returns:
    the version directory holding ``model.tflite``.

  Raises:
    LiteRTExportError: ``xla``, ``dtype``, ``what`` or ``quantize`` that the
      format cannot honour (before any work); the converter's refusal.
  """
  check_options(what, quantize)
  if xla or dtype != "float32":
    raise LiteRTExportError("--format=litert: --xla / --serving_dtype are SavedModel "
                            "options; use --quantize=dynamic_int8|float16",
                            argument="format")
  cfg = run.run_config
  if what == "classifier" and cfg.get("multi_label"):
    raise LiteRTExportError("--format=litert: a multi-label classifier exports as a "
                            "SavedModel only (--format=saved_model)", argument="format")
  pre = None if what == "encoder" else preprocessor
  kwargs = dict(quantize=quantize, task_name=run.task_name, config=run.config,
                max_seq_length=run.max_seq_length)
  if what == "classifier":
    kwargs.update(is_pair=cfg["is_pair"], is_regression=cfg["is_regression"],
                  labels=None if cfg["is_regression"] else cfg["labels"])
  elif what == "ner":
    kwargs.update(labels=cfg["labels"])
  elif what == "swag":
    kwargs.update(num_choices=int(cfg.get("num_choices") or 4))
  model = run.encoder if what in ("encoder", "features") else run.model
  return export_litert(what, model, pre, export_dir, version, **kwargs)


def print_summary(what: str, run, path: str) -> None:
  """The export tool's lines for a LiteRT export: the file, its size and
  quantization, the share of operators XNNPACK took (on a batch-1 request),
  and the tokenizer differences (:data:`TOKEN_DIFFERENCES`)."""
  meta = client.read_metadata(path)
  tflite = os.path.join(path, MODEL_FILE)
  share = xnnpack_share(tflite, warmup_inputs(what, bool(meta.get("is_pair")),
                                              int(meta.get("num_choices") or 4),
                                              int(meta["max_seq_length"])))
  print("exported %s (%s, checkpoint %s) to %s (%.1f MB, quantize=%s); XNNPACK "
        "delegated %d of %d operators of the main graph (%.0f%%, %d partitions)%s; load "
        "with ai_edge_litert + tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS" % (
            what, run.task_name, run.checkpoint, tflite, os.path.getsize(tflite) / 1e6,
            meta.get("quantize"), share["delegated"], share["ops"],
            100.0 * share["delegated"] / max(1, share["ops"]), share["partitions"],
            "; the encoder runs in %d length-bucket subgraphs, not in these counts "
            "(LiteRT's Python API lists no operators of a subgraph)" % share["subgraphs"]
            if share["subgraphs"] else ""))
  for note in meta.get("token_differences") or ():
    print("warning: the in-graph tokenizer differs from the original's: " + note)
