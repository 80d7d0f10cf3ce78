"""SavedModel export for feature extraction: raw strings in, every layer's
hidden states out (paper section 5.3; the serving form of google-research/bert
``extract_features.py``).

:func:`export_encoder_all_layers` writes ``<export_dir>/<version>/`` (TF
Serving layout, written atomically, warm-up requests and
``assets.extra/bert_tf_export.json`` as every export of
:mod:`bert_tf.export.saved_model`) with two signatures:

* ``serving_default``: ``text_a`` string [B];
* ``pair``: ``text_a``, ``text_b`` string [B] each (different sizes ->
  ``INVALID_ARGUMENT``).

Both return, with S = the longest tokenized example of the request (at most
``max_seq_length``; padding columns beyond it are dropped):

* ``encoder_outputs`` float32 [B, L, S, H]: the output of every transformer
  block, layer 0 first (``extract_features.py --layers=-1`` is
  ``encoder_outputs[:, -1]``);
* ``sequence_output`` float32 [B, S, H] (= ``encoder_outputs[:, -1]``),
  ``pooled_output`` float32 [B, H];
* ``input_mask``, ``input_ids``, ``segment_ids`` int32 [B, S];
* ``tokens`` string [B, S]: the word piece at each position (``""`` at
  padding), the ``token`` of the original's JSON output.

Tokenization is :class:`bert_tf.preprocessing.BertPreprocessor` (in graph,
tensorflow-text), with the original's truncation lengths. It differs from
the original's Python ``FullTokenizer`` only on rare edge cases (see
DESIGN.md section 2), and where ``text_b`` tokenizes to nothing: the
original then drops the second ``[SEP]``; the export keeps
``[CLS] a [SEP] [SEP]``. Empty strings, invalid UTF-8 (replaced, then
deleted as U+FFFD) and very long strings (truncated) are served, not
rejected. Loading needs ``import tensorflow_text`` (or its op libraries).
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from bert_tf import preprocessing
from bert_tf import tokenization
from bert_tf.export import base
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib


class FeaturesServing(serving.ServingModule):
  """Preprocessor + :class:`BertEncoder`, every layer's output (kind
  ``features``; see the module doc).

  Args:
    encoder: a built :class:`bert_tf.modeling.BertEncoder` with its weights.
    preprocessor: a :class:`bert_tf.preprocessing.BertPreprocessor` of the
      model's vocab.
    spec: a ``features`` :class:`ServingSpec`.
    ops: the format's ops (default the SavedModel's).

  Attributes:
    serve, serve_pair: the ``serving_default`` and ``pair`` tf.functions
      (outputs: see the module doc).

  Raises:
    ValueError: ``max_seq_length`` above ``max_position_embeddings``.
  """

  kind = "features"

  def __init__(self, encoder, preprocessor, spec: spec_lib.ServingSpec, ops=None):
    config = encoder.config
    if spec.max_seq_length > config.max_position_embeddings:
      raise ValueError("max_seq_length %d exceeds max_position_embeddings %d" % (
          spec.max_seq_length, config.max_position_embeddings))
    super().__init__(encoder, preprocessor, spec, ops)

  @property
  def encoder(self):
    return self.model

  def build_signatures(self):
    if getattr(self.ops, "string_tables", True):
      vocab = tokenization.load_vocab(self.preprocessor.vocab_file)
      words = [""] * len(vocab)
      for word, index in vocab.items():
        words[index] = word
      self.vocab = tf.Variable(words, trainable=False, dtype=tf.string, name="vocab")
    single = self.text_function(lambda t: self.predict(t), ["text_a"])  # pylint: disable=unnecessary-lambda
    return single, self.text_function(self.predict, ["text_a", "text_b"])

  def predict(self, text_a: tf.Tensor, text_b: Optional[tf.Tensor] = None) -> dict:
    """The serving computation on string [B] batches; returns the output dict
    (``tokens`` where the format has string tables)."""
    features = self.ops.pack([text_a] if text_b is None else [text_a, text_b])
    out = self.ops.encoder_outputs(self, features)
    mask = features["input_mask"]
    ids = features["input_ids"]
    result = {
        "encoder_outputs": tf.cast(tf.stack(out["encoder_outputs"], axis=1), tf.float32),
        "sequence_output": tf.cast(out["sequence_output"], tf.float32),
        "pooled_output": tf.cast(out["pooled_output"], tf.float32),
        "input_mask": mask, "input_ids": tf.identity(ids),
        "segment_ids": features["segment_ids"]}
    if hasattr(self, "vocab"):
      result["tokens"] = tf.where(mask > 0, tf.gather(self.vocab, ids), tf.constant(""))
    return result

  def metadata(self) -> dict:
    config = self.encoder.config
    out = super().metadata()
    out.update(num_hidden_layers=config.num_hidden_layers, hidden_size=config.hidden_size)
    return out

  def warmup_requests(self):
    sentences = list(serving.WARMUP_SENTENCES)
    return [("serving_default", {"text_a": sentences}),
            ("pair", {"text_a": sentences, "text_b": list(serving.WARMUP_REPLIES)})]


def export_encoder_all_layers(encoder, export_dir: str, vocab_file: Optional[str] = None,
                              do_lower_case: bool = True, max_seq_length: int = 128,
                              version: Optional[int] = None,
                              preprocessor: "Optional[preprocessing.BertPreprocessor]" = None,
                              preserve_unused_tokens: bool = False) -> str:
  """Writes the feature-extraction SavedModel; returns the version directory.

  Args:
    encoder: a built :class:`bert_tf.modeling.BertEncoder` with its weights.
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    vocab_file, do_lower_case, max_seq_length: the in-graph tokenizer (a
      :class:`BertPreprocessor`; the vocab becomes a SavedModel asset), unless
      ``preprocessor`` is given.
    version: integer version; default: the next free one.
    preprocessor: a ready :class:`BertPreprocessor` instead of the three above
      (and ``preserve_unused_tokens``).
    preserve_unused_tokens: the tokenizer keeps vocab entries ``[unusedN]``
      whole (the original's ``--preserve_unused_tokens``).

  Returns:
    the path ``export_dir/<version>``.

  Raises:
    FileExistsError: that version already exists.
    ValueError: neither ``vocab_file`` nor ``preprocessor``, or
      ``max_seq_length`` above ``max_position_embeddings``.
    VocabError: unreadable vocab.
  """
  if preprocessor is None:
    if not vocab_file:
      raise ValueError("export_encoder_all_layers: vocab_file or preprocessor is required")
    preprocessor = preprocessing.BertPreprocessor(
        vocab_file, do_lower_case, max_seq_length,
        preserve_unused_tokens=preserve_unused_tokens)
  spec = spec_lib.ServingSpec.create(
      "features", preprocessor.max_seq_length, do_lower_case=preprocessor.do_lower_case,
      preserve_unused_tokens=preprocessor.preserve_unused_tokens)
  return base.write_module(FeaturesServing(encoder, preprocessor, spec), export_dir, version)
