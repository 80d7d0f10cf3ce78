"""MediaPipe Tasks export: the ``mediapipe`` format.

One file, ``<export_dir>/<version>/model.tflite``, beside the metadata file
every export writes (``assets.extra/bert_tf_export.json``), that MediaPipe
Tasks' text tasks run as they are, with no kernel to build: ``TextClassifier``
(``--what=classifier``) and ``TextEmbedder`` (``--what=features``), in Python
(PyPI ``mediapipe`` 1.2.2, ``mediapipe.tasks.python.text``), on Android
(``com.google.mediapipe:tasks-text``), iOS and the Web. MediaPipe Model
Maker's BERT layout, as MediaPipe's C++ reads it (``text_preprocessing_graph.cc``,
``bert_preprocessor_calculator.cc``, ``classification_postprocessing_graph.cc``,
``embedding_postprocessing_graph.cc``):

* one subgraph (the model called with ``skip_padding=False``: no ``tf.cond``),
  LiteRT builtin ops only (MediaPipe registers no custom op);
* three int32 inputs [1, S] (S = ``max_seq_length``; [1, None] with
  ``dynamic_length``), found by their metadata names ``ids``, ``mask``,
  ``segment_ids``: MediaPipe tokenizes the text itself with the vocab of
  the metadata and fills them with ``[CLS] pieces[:S-2] [SEP]``, mask 1 on
  those tokens, segment ids 0 (one text: a pair model is refused);
* the classifier's one output ``probabilities`` float32 [1, L], read by
  ``TextClassifier`` as the scores (no softmax of its own): softmax, or a
  sigmoid per label for a multi-label model (``score_threshold=0.5`` then
  gives the label set); the labels are the metadata's label file;
* the embedder's one output ``embedding`` float32 [1, H], read by
  ``TextEmbedder`` as it is: ``mean`` (default; the mean of
  ``sequence_output`` over the tokens the mask marks) or ``pooled`` (the
  pooler's ``pooled_output``, which BERT trains for next-sentence
  prediction, not for similarity). ``mean`` is all-MiniLM-L6-v2's pooling
  (sentence-transformers) and the better sentence embedding for BERT
  (Reimers & Gurevych, 2019); ``l2_normalize`` is MediaPipe's own
  ``TextEmbedderOptions`` option, not the file's;
* TFLite metadata written by MediaPipe's own writer
  (``text_classifier.MetadataWriter.create_for_bert_model``; the embedder
  through the generic ``MetadataWriter``, the wheel having no text-embedder
  writer): a ``BertTokenizer`` process unit with the vocab packed in the
  file, and the labels.

The task computation is each kind's serving module
(:class:`bert_tf.export.saved_model.ClassifierServing`,
:class:`bert_tf.export.features.FeaturesServing`) over :class:`MediaPipeOps`,
whose signature takes the packed ids instead of strings; the file is
converted by :func:`bert_tf.export.litert.convert` and written through
:func:`bert_tf.export.base.write_version`.

MediaPipe's tokenizer is not the original ``FullTokenizer``: it lower-cases
ASCII only and strips no accent (:data:`TOKEN_DIFFERENCES`, warned at
export; cased models are refused). Measured on the project's tokenizer
corpora, see ``tests/test_mediapipe.py``.

Source: MediaPipe's sources and golden metadata
(``mediapipe/tasks/testdata/metadata/bert_text_classifier_with_bert_tokenizer.json``),
MediaPipe Model Maker's BERT text classifier, ``tf.lite.TFLiteConverter``
(TF 2.21).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
import types
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import errors
from bert_tf import task_kinds
from bert_tf.export import base
from bert_tf.export import client
from bert_tf.export import litert
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib

FORMAT = task_kinds.MEDIAPIPE
MODEL_FILE = client.TFLITE_FILE
QUANTIZE = litert.QUANTIZE
EMBEDDINGS = ("mean", "pooled")
DEFAULT_EMBEDDING = "mean"
# The input tensors' names (the converter's "serving_default_<name>:0"),
# matched to MediaPipe's roles by the metadata writer.
INPUT_NAMES = ("ids", "mask", "segment_ids")
# MediaPipe's BertTokenizer looks these up by name (a missing one: id 0).
REQUIRED_TOKENS = ("[CLS]", "[SEP]", "[UNK]")
VOCAB_FILE = "vocab.txt"
PACKAGE = "mediapipe==1.2.2"
INSTALL = "pip install %s (or the bert_tf[mediapipe] extra)" % PACKAGE
# MediaPipe's tokenizer (bert_preprocessor_calculator.cc: absl::AsciiStrToLower,
# then bert_tokenizer.cc: an RE2 split on [\t\n\f\r ], punctuation and CJK,
# then WordPiece with max_bytes_per_token=100) against the original
# FullTokenizer; each class counted in tests/test_mediapipe.py.
TOKEN_DIFFERENCES = (
    "accents are kept (no NFD, no accent stripping): caf\u00e9, clich\u00e9s, na\u00efve "
    "become [UNK] or other pieces where the original reads cafe, cliches, naive",
    "only ASCII is lower-cased: \u00c9COLE, \u0130stanbul, \u0141azienki become [UNK]",
    "Hangul syllables are not decomposed into jamo (no NFD): \ud55c\uad6d\uc5b4 becomes [UNK]",
    "non-ASCII whitespace (U+00A0, U+2009, U+3000...) splits no word: 'a<U+00A0>b' is "
    "[UNK] where the original reads a, b",
    "control and format characters (U+0007, U+000B, U+200B, U+FFFD...) are kept and "
    "U+000C splits, where the original deletes them all: 'b<U+200B>c' is [UNK] and "
    "'a<U+000C>b' a, b (the original: bc, ab)",
    "a word of over 100 bytes is [UNK] (the original: over 200 characters)",
    "the Python API cuts the text at its first NUL character",
)
UNUSED_DIFFERENCE = ("--preserve_unused_tokens is not honoured: MediaPipe splits [unusedN] "
                     "into [ unused ##N ]")
TASKS = {"classifier": "TextClassifier", "features": "TextEmbedder"}


class MediaPipeExportError(errors.BertTfError, ValueError):
  """A MediaPipe export that cannot be written as asked (one line)."""


# ---------------------------------------------------------------- MediaPipe


# The one module the PyPI mediapipe 1.2.2 wheel (cp311 manylinux) lacks:
# mediapipe/tasks/python/metadata/metadata.py imports this pybind11 module
# of the 0.10.x wheels only for GetMinimumMetadataParserVersion.
_PYWRAP = "mediapipe.tasks.cc.metadata.python._pywrap_metadata_version"


def _min_parser_version(metadata_buf: bytes) -> str:
  """``GetMinimumMetadataParserVersion`` of MediaPipe's
  ``tasks/cc/metadata/metadata_version.cc``: the largest schema version of
  the fields the metadata uses (the history in the wheel's
  ``metadata_schema.fbs``, "Schema Semantic version: 1.5.0"). Ours (a BERT
  tokenizer process unit, a vocabulary file) gives ``1.1.0``, as MediaPipe's
  golden file."""
  from mediapipe.tasks.metadata import metadata_schema_py_generated as fb  # pylint: disable=g-import-not-at-top
  md = fb.ModelMetadataT.InitFromObj(fb.ModelMetadata.GetRootAsModelMetadata(metadata_buf, 0))
  found = [(1, 0, 0)]
  unit_versions = {fb.ProcessUnitOptions.BertTokenizerOptions: (1, 1, 0),
                   fb.ProcessUnitOptions.SentencePieceTokenizerOptions: (1, 1, 0),
                   fb.ProcessUnitOptions.RegexTokenizerOptions: (1, 2, 1)}

  def files(fs):
    for f in fs or ():
      found.extend(v for cond, v in ((f.type == fb.AssociatedFileType.VOCABULARY, (1, 0, 1)),
                                     (f.type == fb.AssociatedFileType.SCANN_INDEX_FILE,
                                      (1, 4, 0)),
                                     (f.version is not None, (1, 4, 1))) if cond)

  def units(us):
    found.extend(unit_versions.get(u.optionsType, (1, 0, 0)) for u in us or ())

  for sg in md.subgraphMetadata or ():
    for t in (sg.inputTensorMetadata or []) + (sg.outputTensorMetadata or []):
      files(t.associatedFiles)
      units(t.processUnits)
      content = t.content
      if content is not None and content.contentPropertiesType == \
          fb.ContentProperties.AudioProperties:
        found.append((1, 3, 0))
    files(sg.associatedFiles)
    for field, version in (("inputProcessUnits", (1, 1, 0)), ("outputProcessUnits", (1, 1, 0)),
                           ("inputTensorGroups", (1, 2, 0)), ("outputTensorGroups", (1, 2, 0)),
                           ("customMetadata", (1, 5, 0))):
      if getattr(sg, field) is not None:
        found.append(version)
    units(sg.inputProcessUnits)
    units(sg.outputProcessUnits)
  files(md.associatedFiles)
  return "%d.%d.%d" % max(found)


def _install_pywrap_stand_in() -> None:
  """Registers :data:`_PYWRAP` (and its missing parent packages) in
  ``sys.modules`` with :func:`_min_parser_version`, when the real module
  cannot be imported (the PyPI 1.2.2 wheel); a later wheel that ships it
  is used as it is."""
  try:
    importlib.import_module(_PYWRAP)
    return
  except ImportError:
    pass
  parts = _PYWRAP.split(".")
  for i in range(3, len(parts)):  # mediapipe.tasks.cc, .metadata, .python
    name = ".".join(parts[:i])
    if name not in sys.modules:
      try:
        importlib.import_module(name)
      except ImportError:
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules[name] = package
  leaf = types.ModuleType(_PYWRAP)
  leaf.__doc__ = "bert_tf's stand-in: the mediapipe 1.2.2 wheel does not ship this module."
  leaf.GetMinimumMetadataParserVersion = lambda buf: _min_parser_version(bytes(buf))
  sys.modules[_PYWRAP] = leaf
  for i in range(4, len(parts) + 1):
    setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[".".join(parts[:i])])


def installed() -> bool:
  """True when the ``mediapipe`` package can be imported (not imported here)."""
  try:
    return importlib.util.find_spec("mediapipe") is not None
  except (ImportError, ValueError):
    return False


@functools.lru_cache(maxsize=None)  # a failed import is not cached: it raises
def load_mediapipe() -> types.SimpleNamespace:
  """MediaPipe's modules this format uses, imported once.

  ``mediapipe`` is imported on a thread of its own: importing it imports
  ``sounddevice``, whose OSError (no PortAudio library) MediaPipe keeps in a
  module global, traceback included; on this thread that traceback holds
  no frame of the caller (otherwise every caller's locals, a 90 MB model
  among them, would live until exit, and MediaPipe's ``MetadataWriter``
  would then fail in ``__del__`` at shutdown).

  Returns:
    namespace with ``text`` (``mediapipe.tasks.python.text``: TextClassifier,
    TextEmbedder), ``metadata_writer``, ``text_classifier`` (the writers),
    ``metadata`` (``MetadataDisplayer``), ``schema`` (the TFLite flatbuffer
    schema MediaPipe reads with) and ``version``.

  Raises:
    MediaPipeExportError: mediapipe is not installed (:data:`INSTALL`).
  """
  failed = []

  def run():
    try:
      importlib.import_module("mediapipe")
    except ImportError as e:
      failed.append(e)
  thread = threading.Thread(target=run, name="import-mediapipe")
  thread.start()
  thread.join()
  if failed:
    raise MediaPipeExportError("--format=mediapipe needs MediaPipe (%s): %s" % (
        failed[0], INSTALL), argument="format")
  _install_pywrap_stand_in()
  # pylint: disable=g-import-not-at-top
  import mediapipe
  from mediapipe.tasks.metadata import schema_py_generated
  from mediapipe.tasks.python import text
  from mediapipe.tasks.python.metadata import metadata
  from mediapipe.tasks.python.metadata.metadata_writers import metadata_writer
  from mediapipe.tasks.python.metadata.metadata_writers import text_classifier
  # pylint: enable=g-import-not-at-top
  return types.SimpleNamespace(text=text, metadata_writer=metadata_writer,
                               text_classifier=text_classifier, metadata=metadata,
                               schema=schema_py_generated, version=mediapipe.__version__)


# ---------------------------------------------------------------- refusals


def check_options(kind: str, quantize: str = "none", embedding: str = DEFAULT_EMBEDDING,
                  dynamic_length: bool = False) -> None:
  """Refuses, before any work, what the format cannot write for ``kind``
  (the :class:`bert_tf.export.formats.Format` check hook).

  Raises:
    MediaPipeExportError: a kind MediaPipe has no task for (the kind
      record's refusal), ``quantize`` not one of :data:`QUANTIZE`,
      ``embedding`` not one of :data:`EMBEDDINGS` or set for another kind
      than ``features``, mediapipe not installed.
  """
  del dynamic_length  # any bool
  reason = task_kinds.get(kind, argument="what").refusal(FORMAT)
  if reason:
    raise MediaPipeExportError("--format=mediapipe --what=%s: %s; MediaPipe's text tasks are "
                               "TextClassifier (classifier) and TextEmbedder (features)" % (
                                   kind, reason), argument="what")
  if quantize not in QUANTIZE:
    raise MediaPipeExportError("--quantize=%s: --format=mediapipe writes one of %s" % (
        quantize, ", ".join(QUANTIZE)), argument="quantize")
  if embedding not in EMBEDDINGS:
    raise MediaPipeExportError("--embedding=%s: one of %s" % (embedding, ", ".join(EMBEDDINGS)),
                               argument="embedding")
  if embedding != DEFAULT_EMBEDDING and kind != "features":
    raise MediaPipeExportError("--embedding is for --what=features (TextEmbedder); this is "
                               "--what=%s" % kind, argument="embedding")
  if not installed():
    raise MediaPipeExportError("--format=mediapipe needs MediaPipe, which is not installed: "
                               + INSTALL, argument="format")


def check_vocab(lines: Sequence[str]) -> None:
  """Refuses a vocab whose ids MediaPipe's tokenizer would read differently.

  MediaPipe's loader (``tasks/cc/text/utils/vocab_utils.cc``) skips empty
  lines, so every later id would shift by one, and looks ``[CLS]``,
  ``[SEP]``, ``[UNK]`` up by name (a missing one silently gives id 0).

  Args:
    lines: the vocab's tokens in id order (``BertPreprocessor.vocab_lines()``).

  Raises:
    MediaPipeExportError: an empty line (its 1-based number), or a missing
      required token.
  """
  for i, token in enumerate(lines):
    if not token:
      raise MediaPipeExportError(
          "--format=mediapipe: vocab line %d is empty; MediaPipe's vocab loader skips empty "
          "lines, so every later id would shift by one" % (i + 1), argument="format")
  missing = [t for t in REQUIRED_TOKENS if t not in set(lines)]
  if missing:
    raise MediaPipeExportError(
        "--format=mediapipe: the vocab has no %s, which MediaPipe's BertTokenizer looks up "
        "by name" % ", ".join(missing), argument="format")


def check_spec(spec: spec_lib.ServingSpec, vocab_lines: Optional[Sequence[str]]) -> None:
  """Refuses, before the model is traced, an export of ``spec`` MediaPipe
  cannot run as the SavedModel answers.

  Raises:
    MediaPipeExportError: a sentence-pair or regression classifier, one
      that reads long texts other than by ``head``, a cased
      model (MediaPipe lower-cases every input), a vocab of
      :func:`check_vocab`'s refusals.
  """
  if spec.kind == "classifier" and spec.is_pair:
    raise MediaPipeExportError(
        "--format=mediapipe: this classifier takes sentence pairs; MediaPipe's TextClassifier "
        "takes one text (its BERT preprocessor writes segment ids 0 only); use "
        "--format=litert", argument="format")
  method = getattr(spec.long_document, "method", "head")
  if spec.kind == "classifier" and method != "head":
    raise MediaPipeExportError(
        "--format=mediapipe: this classifier reads long texts by --long_document=%s; "
        "MediaPipe's TextClassifier reads one window ([CLS] the first pieces [SEP]); use "
        "--format=litert (it reads them as the SavedModel does)" % method, argument="format")
  if spec.kind == "classifier" and spec.is_regression:
    raise MediaPipeExportError(
        "--format=mediapipe: a regression model has no MediaPipe task (TextClassifier reads "
        "class scores); use --format=litert", argument="format")
  if spec.do_lower_case is False:
    raise MediaPipeExportError(
        "--format=mediapipe: a cased model; MediaPipe lower-cases every input before its "
        "tokenizer, so the model would see other ids; use --format=litert", argument="format")
  if vocab_lines is not None:
    check_vocab(vocab_lines)


# ---------------------------------------------------------------- the ops


class MediaPipeOps(serving.TextOps):
  """The ``mediapipe`` format's ops: the signature takes MediaPipe's packed
  ids (int32 ``ids``, ``mask``, ``segment_ids`` [1, S]) in place of text,
  hands them to the serving module's computation as its packed features,
  calls the model on every position (one subgraph) and returns only the
  output MediaPipe reads (:meth:`outputs`).

  Args:
    preprocessor: the :class:`BertPreprocessor` the model trained with (its
      ``max_seq_length`` is S).
    embedding: the features kind's ``embedding``: ``mean`` or ``pooled``.
    dynamic_length: inputs [1, None]: MediaPipe then sends each text's
      ``[CLS] pieces [SEP]`` unpadded (its ``has_dynamic_input_tensors``
      path) and the graph cuts them to S as the static path does. Same
      scores; faster on short texts; needs a MediaPipe runtime with that
      path (an older one fails at load: "bert_max_seq_len must be at least 2").
  """

  format = FORMAT
  fixed_shapes = True
  string_tables = False  # no vocab-string output (the features' ``tokens``)

  def __init__(self, preprocessor, embedding: str = DEFAULT_EMBEDDING,
               dynamic_length: bool = False):
    self.preprocessor = preprocessor
    self.embedding = embedding
    self.dynamic_length = bool(dynamic_length)

  def attach(self, module: tf.Module, model) -> None:
    """``model``'s weights into ``module`` as plain tf.Variables: the converter
    given the Keras object instead leaves every weight an uninitialised
    resource variable (NaN in LiteRT)."""
    base.track_tf_variables(module, model)

  def text_signature(self, module: tf.Module, fn, names: Sequence[str]):
    """The one MediaPipe signature: ``fn`` on the packed ids. None for a
    two-text signature (MediaPipe's text tasks take one text)."""
    if len(names) != 1:
      return None
    seq = self.preprocessor.max_seq_length
    specs = [tf.TensorSpec([1, None if self.dynamic_length else seq], tf.int32, name=n)
             for n in INPUT_NAMES]

    def body(ids, mask, segment_ids):
      features = {"input_ids": ids, "input_mask": mask, "segment_ids": segment_ids}
      if self.dynamic_length:
        features = cut_to_length(features, seq)
      return self.outputs(module.kind, fn(features))
    return tf.function(body, input_signature=specs, autograph=False)

  def pack(self, texts: Sequence[Dict[str, tf.Tensor]]) -> Dict[str, tf.Tensor]:
    """The features :meth:`text_signature` passed as the one "text"."""
    return texts[0]

  padded = pack

  def logits(self, module: tf.Module, features: Dict[str, tf.Tensor]) -> tf.Tensor:
    """The model's float32 output, every position computed (no ``tf.cond``)."""
    return tf.cast(base.serving_call(module, features, skip_padding=False), tf.float32)

  def encoder_outputs(self, module: tf.Module, features: Dict[str, tf.Tensor]) -> dict:
    return base.serving_call(module, features, skip_padding=False)

  def outputs(self, kind: str, out: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """What MediaPipe reads of the module's outputs: the classifier's
    ``probabilities`` [1, L]; the features' ``embedding`` [1, H] (float32)."""
    if kind == "classifier":
      return {"probabilities": out["probabilities"]}
    if self.embedding == "pooled":
      return {"embedding": out["pooled_output"]}
    return {"embedding": masked_mean(out["sequence_output"], out["input_mask"])}

  def metadata(self) -> dict:
    return {"dynamic_length": self.dynamic_length}


def masked_mean(sequence_output: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """float32 [B, H]: the mean of ``sequence_output`` [B, S, H] over the
  positions where ``mask`` [B, S] is 1 (sentence-transformers' mean pooling)."""
  weights = tf.cast(mask, tf.float32)[:, :, tf.newaxis]
  total = tf.reduce_sum(tf.cast(sequence_output, tf.float32) * weights, axis=1)
  return total / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)


def cut_to_length(features: Dict[str, tf.Tensor], seq: int) -> Dict[str, tf.Tensor]:
  """``[CLS] pieces [SEP]`` [1, N] cut to ``[CLS] pieces[:seq-2] [SEP]``
  (MediaPipe's static packing) when N > ``seq``; unchanged otherwise."""
  keep = tf.minimum(tf.shape(features["input_ids"])[1], seq) - 1
  return {k: tf.concat([v[:, :keep], v[:, -1:]], axis=1) for k, v in features.items()}


# ---------------------------------------------------------------- the file


def check_flatbuffer(flat: bytes, schema) -> None:
  """What MediaPipe checks at load, checked at export: one subgraph, three
  int32 [1, S] inputs (S >= 2 or dynamic), float32 outputs, builtin ops only,
  no weight left as a resource variable.

  Args:
    flat: the ``.tflite`` bytes; schema: the TFLite flatbuffer schema module
      (:func:`load_mediapipe`'s ``schema``).

  Raises:
    MediaPipeExportError: the first of these that fails.
  """
  model = schema.Model.GetRootAsModel(flat, 0)
  if model.SubgraphsLength() != 1:
    raise MediaPipeExportError("the converted graph has %d subgraphs; MediaPipe runs one"
                               % model.SubgraphsLength())
  sg = model.Subgraphs(0)
  inputs = [sg.Tensors(sg.Inputs(i)) for i in range(sg.InputsLength())]
  shapes = [(t.ShapeSignatureAsNumpy() if t.ShapeSignatureLength() else t.ShapeAsNumpy())
            .tolist() for t in inputs]
  if (len(inputs) != 3 or any(t.Type() != schema.TensorType.INT32 for t in inputs)
      or any(s[:1] != [1] or len(s) != 2 or s != shapes[0] or 0 <= s[1] < 2 for s in shapes)):
    raise MediaPipeExportError("inputs %s: MediaPipe needs three int32 [1, S]" % shapes)
  if any(sg.Tensors(sg.Outputs(i)).Type() != schema.TensorType.FLOAT32
         for i in range(sg.OutputsLength())):
    raise MediaPipeExportError("an output is not float32")
  names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
  ops = {names.get(max(model.OperatorCodes(i).BuiltinCode(),
                       model.OperatorCodes(i).DeprecatedBuiltinCode()))
         for i in range(model.OperatorCodesLength())}
  bad = sorted(ops & {"CUSTOM", "VAR_HANDLE", "READ_VARIABLE"})
  if bad:
    raise MediaPipeExportError("the converted graph holds %s ops, which MediaPipe cannot run"
                               % ", ".join(bad))


def convert(module: tf.Module, quantize: str = "none") -> bytes:
  """``module.serve`` as ``.tflite`` bytes (no metadata yet), checked
  (:func:`check_flatbuffer`).

  Args:
    module: a serving module over :class:`MediaPipeOps` (or any ``tf.Module``
      with ``serve``, ``serve_pair`` None and ``kind``).
    quantize: ``none`` (float32), ``dynamic_int8`` or ``float16`` weights
      (:func:`bert_tf.export.litert.convert`); outputs stay float32.

  Raises:
    MediaPipeExportError / LiteRTExportError: the converter's refusal, a
      graph MediaPipe cannot load.
  """
  flat = litert.convert(module, quantize)
  check_flatbuffer(flat, load_mediapipe().schema)
  return flat


def write_metadata(flat: bytes, vocab_lines: Sequence[str], labels: Optional[Sequence[str]],
                   task: str) -> Tuple[bytes, dict]:
  """``flat`` with MediaPipe's TFLite metadata, written by MediaPipe's writer.

  Args:
    flat: :func:`convert`'s bytes.
    vocab_lines: the vocab in id order, packed as :data:`VOCAB_FILE`.
    labels: the class names in id order (``TextClassifier``); None for
      ``TextEmbedder``.
    task: ``TextClassifier`` or ``TextEmbedder``.

  Returns:
    ``(model bytes, the metadata as MediaPipe's MetadataDisplayer reads it)``.
  """
  mp = load_mediapipe()
  writer_lib = mp.metadata_writer
  buf = bytearray(flat)
  ids, mask, segment = ("serving_default_%s:0" % n for n in INPUT_NAMES)
  with tempfile.TemporaryDirectory() as tmp:
    vocab = os.path.join(tmp, VOCAB_FILE)
    with open(vocab, "w", encoding="utf-8", newline="\n") as f:
      f.write("\n".join(vocab_lines) + "\n")
    tokenizer = writer_lib.BertTokenizer(vocab)
    if task == TASKS["classifier"]:
      writer = mp.text_classifier.MetadataWriter.create_for_bert_model(
          buf, tokenizer, writer_lib.Labels().add([str(l) for l in labels]),
          ids_name=ids, mask_name=mask, segment_name=segment)
    else:
      writer = writer_lib.MetadataWriter.create(buf)
      writer.add_general_info(task, "Embeds the input text (BERT).")
      writer.add_bert_text_input(tokenizer, ids, mask, segment)
      writer.add_feature_output(name="embedding", description="The text embedding.")
    model, shown = writer.populate()
  return bytes(model), json.loads(shown)


def token_warnings(spec: spec_lib.ServingSpec) -> List[str]:
  """The tokenizer differences from the original that this export carries."""
  out = list(TOKEN_DIFFERENCES)
  if spec.preserve_unused_tokens:
    out.insert(0, UNUSED_DIFFERENCE)
  return out


def export_metadata(module: serving.ServingModule, quantize: str, vocab_size: int,
                    mediapipe_version: str, shown: dict) -> dict:
  """The metadata file of a MediaPipe export: the module's and the format's
  (file, task, output, quantization, vocab, tokenizer differences)."""
  ops = module.ops
  meta = module.metadata()
  meta.update(ops.metadata())
  meta.update({
      "format": FORMAT, "file": MODEL_FILE, "quantize": quantize,
      "mediapipe_task": TASKS[module.kind],
      "outputs": ["probabilities"] if module.kind == "classifier" else ["embedding"],
      "tokenizer": "MediaPipe BertTokenizer (the vocab in the file's TFLite metadata)",
      "vocab": VOCAB_FILE, "vocab_size": vocab_size,
      "token_differences": token_warnings(module.spec),
      "requires": "MediaPipe Tasks: mediapipe.tasks.python.text.%s (PyPI %s), Android "
                  "com.google.mediapipe:tasks-text" % (TASKS[module.kind], PACKAGE),
      "mediapipe_version": mediapipe_version, "tensorflow_version": tf.__version__,
      "tflite_metadata": shown})
  if module.kind == "features":
    meta["embedding"] = ops.embedding
  encoder = getattr(module.model, "encoder", module.model)
  meta.update(num_hidden_layers=encoder.config.num_hidden_layers,
              hidden_size=encoder.config.hidden_size)
  return meta


def write(module: serving.ServingModule, export_dir: str, version: Optional[int] = None,
          quantize: str = "none") -> str:
  """Writes ``export_dir/<version>/model.tflite`` (with MediaPipe's metadata)
  of a serving module over :class:`MediaPipeOps`, and the metadata file
  (:func:`bert_tf.export.base.write_version`).

  Returns:
    the version directory's path (written under a temporary name and
    renamed when whole).

  Raises:
    MediaPipeExportError: the options or the spec refused (before any
      work), a graph MediaPipe cannot load. FileExistsError: that version
      exists; ExportDirError: ``export_dir`` holds something besides versions.
  """
  ops = module.ops
  check_options(module.kind, quantize, ops.embedding, ops.dynamic_length)
  vocab_lines = module.preprocessor.vocab_lines()
  check_spec(module.spec, vocab_lines)
  base.check_export_dir(export_dir)
  flat, shown = write_metadata(convert(module, quantize), vocab_lines, module.spec.labels,
                               TASKS[module.kind])
  meta = export_metadata(module, quantize, len(vocab_lines), load_mediapipe().version, shown)

  def fill(directory):
    with open(os.path.join(directory, MODEL_FILE), "wb") as f:
      f.write(flat)
    return {}
  return base.write_version(export_dir, version, fill, meta)


# ---------------------------------------------------------------- diagnostics


class _IdEcho(tf.Module):
  """``embedding`` = the ``ids`` input as float32 [1, S] (see :func:`token_ids_model`)."""

  kind = "features"
  serve_pair = None

  def __init__(self, seq: int):
    super().__init__(name="mediapipe_id_echo")
    specs = [tf.TensorSpec([1, seq], tf.int32, name=n) for n in INPUT_NAMES]

    def serve(ids, mask, segment_ids):
      # mask and segment_ids stay inputs: MediaPipe's BERT models have three.
      unused = tf.cast(mask + segment_ids, tf.float32)
      return {"embedding": tf.cast(ids, tf.float32) + 0.0 * unused}
    self.serve = tf.function(serve, input_signature=specs, autograph=False)


def token_ids_model(vocab_lines: Sequence[str], seq: int = 512) -> bytes:
  """A ``.tflite`` whose ``TextEmbedder`` embedding is the ids MediaPipe's
  own tokenizer gives a text ([CLS] pieces [SEP], then zeros to ``seq``):
  MediaPipe has no tokenizer API; with it, its ids can be compared with
  the SavedModel's ``input_ids`` (:func:`token_ids`).

  Args:
    vocab_lines: the export's vocab in id order; seq: S (>= 2).
  """
  return write_metadata(convert(_IdEcho(seq)), vocab_lines, None, TASKS["features"])[0]


def token_ids(embedder, text: str) -> List[int]:
  """The ids MediaPipe fed :func:`token_ids_model`'s file for ``text``
  (padding cut; ``embedder`` a ``TextEmbedder`` of that file)."""
  values = np.asarray(embedder.embed(text).embeddings[0].embedding)
  ids = values.astype(np.int64).tolist()
  while ids and ids[-1] == 0:
    ids.pop()
  return ids
