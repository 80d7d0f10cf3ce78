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
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf.export import base
from bert_tf.export import client
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib
from bert_tf.modeling import long_document

METADATA_FILE = base.METADATA_FILE
WARMUP_SENTENCES = serving.WARMUP_SENTENCES
WARMUP_REPLIES = serving.WARMUP_REPLIES
XLA_LENGTH_STEP = serving.XLA_LENGTH_STEP
XLA_MAX_TOKENS = serving.XLA_MAX_TOKENS
SERVING_DTYPES = serving.SERVING_DTYPES
xla_shapes = serving.xla_shapes


def classifier_outputs(logits: tf.Tensor, spec: spec_lib.ServingSpec) -> dict:
  """A classifier's outputs from its logits float32 [B, L] (any format).

  Returns:
    regression: ``predictions`` float32 [B]; multi-label: ``probabilities``
    (a sigmoid each) and ``logits`` float32 [B, L], ``label_mask`` bool
    [B, L] (probability >= 0.5, as ``BertClassifier.predict_labels``),
    ``labels`` string [B, L] (the name where the mask is on, else "");
    otherwise ``probabilities`` (softmax), ``logits``, ``label_ids`` int32
    [B] (argmax), ``labels`` string [B].
  """
  if spec.is_regression:
    return {"predictions": logits[:, 0]}
  names = tf.constant(list(spec.labels) + [""])
  if spec.multi_label:
    probabilities = tf.sigmoid(logits)
    mask = probabilities >= 0.5
    # A gather from the names with "" after them: LiteRT selects no strings.
    n = len(spec.labels)
    pick = tf.where(mask, tf.range(n, dtype=tf.int32)[tf.newaxis, :], n)
    return {"probabilities": probabilities, "logits": logits, "label_mask": mask,
            "labels": tf.gather(names, pick)}
  label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
  return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
          "label_ids": label_ids, "labels": tf.gather(names, label_ids)}


class ClassifierServing(serving.ServingModule):
  """Preprocessor + classifier behind a string signature (kind ``classifier``).

  Signature ``serving_default``: ``text`` string [B], or ``text_a`` and
  ``text_b`` string [B] for a pair spec; outputs :func:`classifier_outputs`.
  The ops decide the format's tokenizer and model call (SavedModel:
  :class:`bert_tf.export.serving.GraphOps`, with its ``xla`` and ``dtype``).

  Args:
    model: a built :class:`bert_tf.modeling.BertClassifier`.
    preprocessor: the :class:`bert_tf.preprocessing.BertPreprocessor` used to
      fine-tune it.
    spec: a ``classifier`` :class:`ServingSpec` (labels, problem type, pair).
    ops: the format's ops (default the SavedModel's).

  Raises:
    SpecError: labels that do not match the model's number of outputs.

  Example::

    spec = ServingSpec.create("classifier", 128, labels=("neg", "pos"))
    module = ClassifierServing(model, preprocessor, spec)
    module.serve(tf.constant(["a gorgeous movie"]))["labels"]
  """

  kind = "classifier"

  @classmethod
  def settings_from_run(cls, run_config) -> dict:
    """``classifier_config.json``: ``labels``, ``is_pair``,
    ``is_regression``, ``multi_label``."""
    regression = bool(run_config.get("is_regression"))
    return {"is_pair": bool(run_config.get("is_pair")),
            "warmup": run_config.get("warmup_examples") or None,
            "long_document": long_document.LongDocument.from_dict(
                run_config.get("long_document")),
            "labels": None if regression else run_config.get("labels"),
            "problem_type": spec_lib.REGRESSION if regression else (
                spec_lib.MULTI_LABEL if run_config.get("multi_label") else
                spec_lib.SINGLE_LABEL)}

  @classmethod
  def settings_from_model(cls, model, *, is_pair=False, num_choices=None) -> dict:
    """The model's ``problem_type`` and ``label_names`` (else ``0..L-1``)."""
    del num_choices
    problem = getattr(model, "problem_type", None) or spec_lib.SINGLE_LABEL
    layer = getattr(model, "preprocessor", None)
    return {"is_pair": bool(is_pair), "problem_type": problem,
            "long_document": getattr(layer, "long_document", None),
            "labels": None if problem == spec_lib.REGRESSION else (
                getattr(model, "label_names", None)
                or [str(i) for i in range(model.num_labels)])}

  @classmethod
  def check_spec(cls, spec) -> None:
    if not spec.is_regression and not spec.labels:
      raise spec_lib.SpecError("a classifier export: labels are required unless "
                               "is_regression", argument="labels")

  def __init__(self, model, preprocessor, spec: spec_lib.ServingSpec, ops=None):
    if not spec.is_regression:
      num = getattr(model, "num_labels", len(spec.labels))
      if num != len(spec.labels):
        raise spec_lib.SpecError("%d labels for a model with %d outputs" % (
            len(spec.labels), num), argument="labels")
    super().__init__(model, preprocessor, spec, ops)

  def build_signatures(self):
    names = ["text_a", "text_b"] if self.spec.is_pair else ["text"]
    return self.text_function(self.predict, names), None

  @property
  def long_document(self) -> long_document.LongDocument:
    """How a text longer than one window is read (the spec's; ``head``)."""
    settings = self.spec.long_document or long_document.LongDocument()
    return settings.resolved(self.spec.max_seq_length)

  def predict(self, text_a, text_b=None):
    """The serving computation on flat string [B] batches; the output dict
    (:func:`classifier_outputs`, ``num_windows`` int32 [B] and
    ``truncated`` bool [B]: the text was cut, by head/tail truncation or by
    the window cap)."""
    texts = [text_a] if text_b is None else [text_a, text_b]
    features, flags = self.ops.document_features(texts, self.long_document)
    out = classifier_outputs(self.ops.logits(self, features), self.spec)
    out.update(flags)
    return out

  def warmup_requests(self):
    """The run's own examples (and an empty string) when it recorded them,
    else the module's movie-review sentences."""
    rows = [list(r) for r in self.spec.warmup if len(r) == (2 if self.spec.is_pair else 1)]
    if not rows:
      return super().warmup_requests()
    names = self.input_names()
    rows.append([""] * len(names))
    return [("serving_default", {n: [r[i] for r in rows] for i, n in enumerate(names)})]

  def metadata(self) -> dict:
    spec = self.spec
    out = super().metadata()
    out.update(task=spec.task_name, task_name=spec.task_name, is_pair=spec.is_pair,
               is_regression=spec.is_regression, multi_label=spec.multi_label,
               long_document=self.long_document.to_dict())
    out.update(getattr(self.ops, "metadata", dict)())
    return out


class PreprocessorServing(serving.ServingModule):
  """The preprocessor alone behind string signatures (TF Hub's split; kind
  ``preprocessor``).

  Signatures: ``serving_default`` (``text``) and ``pair`` (``text_a``,
  ``text_b``) string [B] -> int32 [B, max_seq_length] ``input_word_ids`` =
  ``input_ids``, ``input_mask``, ``input_type_ids`` = ``segment_ids``
  (padded to ``max_seq_length``, not trimmed, as TF Hub's).
  """

  kind = "preprocessor"

  def build_signatures(self):
    single = self.text_function(lambda t: self._outputs([t]), ["text"])
    pair = self.text_function(lambda a, b: self._outputs([a, b]), ["text_a", "text_b"])
    return single, pair

  def _outputs(self, texts):
    features = self.ops.padded(texts)
    return {"input_word_ids": features["input_ids"],
            "input_mask": features["input_mask"],
            "input_type_ids": features["segment_ids"],
            "input_ids": tf.identity(features["input_ids"]),
            "segment_ids": tf.identity(features["segment_ids"])}

  def metadata(self) -> dict:
    out = super().metadata()
    out["vocab_size"] = getattr(self.preprocessor, "vocab_size", None)
    return out


class EncoderServing(serving.ServingModule):
  """The encoder alone behind an int32 signature (TF Hub's split; kind
  ``encoder``).

  Inputs int32 [B, S]: ``input_word_ids``, ``input_mask``,
  ``input_type_ids`` (S any width <= ``max_position_embeddings`` in the
  SavedModel, ``max_seq_length`` in a fixed-shape format); outputs
  ``sequence_output`` [B, S, H], ``pooled_output`` [B, H],
  ``encoder_outputs_<i>`` [B, S, H] (float32). Mismatched shapes or S >
  ``max_position_embeddings`` -> INVALID_ARGUMENT; ids outside the vocab ->
  INVALID_ARGUMENT from the embedding gather.
  """

  kind = "encoder"

  @property
  def encoder(self):
    return self.model

  def build_signatures(self):
    width = getattr(self.ops, "encoder_width", lambda spec: None)(self.spec)
    spec = lambda n: tf.TensorSpec([None, width], tf.int32, name=n)  # pylint: disable=unnecessary-lambda-assignment
    return tf.function(self._serve, autograph=False, input_signature=[
        spec("input_word_ids"), spec("input_mask"), spec("input_type_ids")]), None

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
    if getattr(self.ops, "fixed_shapes", False):
      checks = []  # fixed shapes: the interpreter checks them
    with tf.control_dependencies(checks):
      out = self.ops.encoder_outputs(self, {"input_ids": tf.identity(input_word_ids),
                                            "input_mask": input_mask,
                                            "segment_ids": input_type_ids})
    result = {"sequence_output": tf.cast(out["sequence_output"], tf.float32),
              "pooled_output": tf.cast(out["pooled_output"], tf.float32)}
    for i, layer in enumerate(out["encoder_outputs"]):
      result["encoder_outputs_%d" % i] = tf.cast(layer, tf.float32)
    return result

  def metadata(self) -> dict:
    config = self.encoder.config
    out = super().metadata()
    out.update(num_hidden_layers=config.num_hidden_layers, hidden_size=config.hidden_size,
               max_position_embeddings=config.max_position_embeddings)
    return out

  def warmup_requests(self):
    # One row of id 0 (valid for any vocab), one position unmasked.
    seq = self.spec.max_seq_length
    mask = np.zeros([1, seq], np.int32)
    mask[0, 0] = 1
    return [("serving_default", {"input_word_ids": np.zeros([1, seq], np.int32),
                                 "input_mask": mask,
                                 "input_type_ids": np.zeros([1, seq], np.int32)})]


def read_metadata(saved_model_dir: str) -> dict:
  """The export's ``assets.extra/bert_tf_export.json`` as a dict.

  Raises:
    OSError: no metadata file (not a bert_tf export); ValueError: not JSON.
  """
  with open(client.metadata_path(saved_model_dir), encoding="utf-8") as f:
    return json.load(f)


def export_classifier(model, preprocessor, labels: Optional[Sequence[str]], export_dir: str,
                      task_name: str = "", is_pair: bool = False,
                      version: Optional[int] = None, is_regression: bool = False,
                      xla: bool = False, dtype: str = "float32",
                      multi_label: bool = False) -> str:
  """Writes ``export_dir/<version>/`` (a classifier SavedModel); returns its path.

  Args:
    model: a built :class:`bert_tf.modeling.BertClassifier`.
    preprocessor: the :class:`BertPreprocessor` used to fine-tune it.
    labels: label names in id order (None for regression).
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    task_name: recorded in the metadata file.
    is_pair, is_regression, multi_label: the classifier's shape
      (:class:`ClassifierServing`).
    version: integer version; default :func:`bert_tf.export.base.next_version`.
    xla, dtype: the SavedModel's model body (:class:`serving.GraphOps`).

  Returns:
    the path of the version directory.

  Raises:
    FileExistsError: that version already exists.
    SpecError (a ValueError): a classification export without labels,
      labels that do not match the model's number of outputs, an unknown
      ``dtype``.
  """
  problem = spec_lib.REGRESSION if is_regression else (
      spec_lib.MULTI_LABEL if multi_label else spec_lib.SINGLE_LABEL)
  spec = spec_lib.ServingSpec.create(
      "classifier", preprocessor.max_seq_length, task_name=task_name,
      labels=None if is_regression else labels, problem_type=problem, is_pair=is_pair,
      long_document=getattr(model, "long_document", None),
      do_lower_case=preprocessor.do_lower_case,
      preserve_unused_tokens=preprocessor.preserve_unused_tokens)
  ops = serving.GraphOps(preprocessor, dtype=dtype, xla=xla)
  return base.write_module(ClassifierServing(model, preprocessor, spec, ops),
                           export_dir, version)


def export_preprocessor(preprocessor, export_dir: str, version: Optional[int] = None) -> str:
  """Writes the preprocessor alone as ``export_dir/<version>/``; returns the path.

  See :class:`PreprocessorServing` for the signatures.

  Raises:
    FileExistsError: that version already exists.
  """
  spec = spec_lib.ServingSpec.create(
      "preprocessor", preprocessor.max_seq_length, do_lower_case=preprocessor.do_lower_case,
      preserve_unused_tokens=preprocessor.preserve_unused_tokens)
  return base.write_module(PreprocessorServing(None, preprocessor, spec), export_dir, version)


def export_encoder(encoder, export_dir: str, version: Optional[int] = None,
                   max_seq_length: int = 128) -> str:
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
  spec = spec_lib.ServingSpec.create("encoder", max_seq_length)
  return base.write_module(EncoderServing(encoder, None, spec), export_dir, version)
