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
from bert_tf.export import saved_model


class AllLayersServingModule(tf.Module):
  """:class:`BertPreprocessor` + :class:`BertEncoder`, every layer's output.

  Args:
    encoder: a built :class:`bert_tf.modeling.BertEncoder` with its weights.
    preprocessor: a :class:`bert_tf.preprocessing.BertPreprocessor` of the
      model's vocab.

  Attributes:
    serve, serve_pair: the ``serving_default`` and ``pair`` tf.functions
      (outputs: see the module doc).
  """

  def __init__(self, encoder, preprocessor: "preprocessing.BertPreprocessor"):
    super().__init__(name="bert_all_layers_serving")
    base.track_tf_variables(self, encoder)
    self.preprocessor = preprocessor
    vocab = tokenization.load_vocab(preprocessor.vocab_file)
    words = [""] * len(vocab)
    for word, index in vocab.items():
      words[index] = word
    self.vocab = tf.Variable(words, trainable=False, dtype=tf.string, name="vocab")
    spec = lambda n: tf.TensorSpec([None], tf.string, name=n)
    self.serve = tf.function(
        lambda text_a: self.predict(base.as_batch(text_a)),
        autograph=False, input_signature=[spec("text_a")])
    self.serve_pair = tf.function(
        lambda text_a, text_b: self.predict(*base.check_same_batch(text_a, text_b)),
        autograph=False, input_signature=[spec("text_a"), spec("text_b")])

  @property
  def encoder(self):
    return self._layer.obj

  def predict(self, text_a: tf.Tensor, text_b: Optional[tf.Tensor] = None) -> dict:
    """The serving computation on string [B] batches; returns the output dict."""
    features = preprocessing.trim_to_longest(self.preprocessor(text_a, text_b))
    out = base.serving_call(self, features)
    mask = features["input_mask"]
    ids = features["input_ids"]
    tokens = tf.where(mask > 0, tf.gather(self.vocab, ids), tf.constant(""))
    return {
        "encoder_outputs": tf.cast(tf.stack(out["encoder_outputs"], axis=1), tf.float32),
        "sequence_output": tf.cast(out["sequence_output"], tf.float32),
        "pooled_output": tf.cast(out["pooled_output"], tf.float32),
        "input_mask": mask, "input_ids": tf.identity(ids),
        "segment_ids": features["segment_ids"], "tokens": tokens}


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
  config = encoder.config
  if preprocessor.max_seq_length > config.max_position_embeddings:
    raise ValueError("max_seq_length %d exceeds max_position_embeddings %d" % (
        preprocessor.max_seq_length, config.max_position_embeddings))
  module = AllLayersServingModule(encoder, preprocessor)
  signatures = {"serving_default": module.serve, "pair": module.serve_pair}
  metadata = {"export": "encoder_all_layers", "task": None, "labels": None,
              "is_pair": None, "inputs": {"serving_default": ["text_a"],
                                          "pair": ["text_a", "text_b"]},
              "max_seq_length": preprocessor.max_seq_length,
              "do_lower_case": preprocessor.do_lower_case,
              "preserve_unused_tokens": preprocessor.preserve_unused_tokens,
              "num_hidden_layers": config.num_hidden_layers,
              "hidden_size": config.hidden_size}
  sentences = list(saved_model.WARMUP_SENTENCES)
  requests = [("serving_default", {"text_a": sentences}),
              ("pair", {"text_a": sentences, "text_b": list(saved_model.WARMUP_REPLIES)})]
  return base.write_export(module, signatures, export_dir, version,
                                   metadata, requests)
