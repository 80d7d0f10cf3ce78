"""Token-tagging (NER) SavedModel: raw sentences in, per-word tags and entity
spans out (paper section 4.3).

The graph is the fine-tuning computation, inside TensorFlow:

1. invalid UTF-8 is replaced by U+FFFD (``unicode_transcode``, as
   ``export.squad``); the sentence is split into words on whitespace
   (Python ``str.split()``'s set: ``\\t-\\r``, ``\\x1c-\\x20``, ``\\x85``
   and Unicode Z*; tensorflow-text ``regex_split_with_offsets``), the split
   the CoNLL reader guarantees for training words;
2. every word -> word pieces, windows, ``[CLS] window [SEP]``
   (:class:`bert_tf.modeling.tagging.TaggingPreprocessor`, the object the
   task trained with; the vocab a SavedModel asset);
3. one model call for all windows of the batch; each word takes the argmax
   of its first piece's logits in its max-context window;
4. entities from the tags with conlleval's chunk rules
   (:func:`bert_tf.modeling.tagging.entity_spans`).

Signature ``serving_default``: input ``sentence`` string [B] (another rank
is flattened); outputs, padded to the longest row of the batch:

* ``words`` string [B, W] and ``tags`` string [B, W] ("" as padding),
  ``num_words`` int32 [B];
* ``word_start_char``, ``word_end_char`` int32 [B, W];
* ``entity_type``, ``entity_text`` string [B, E], ``entity_start_char``,
  ``entity_end_char`` int32 [B, E], ``num_entities`` int32 [B];
* ``truncated`` bool [B]: words beyond ``max_windows`` windows were given
  ``O`` without being read (only for huge inputs).

Offsets are Unicode code points, end exclusive:
``sentence[start_char:end_char]`` in Python is the word / entity text (for
invalid UTF-8: offsets into the sentence with its invalid bytes replaced by
U+FFFD). An entity's text is the sentence's own text from its first word's
start to its last word's end (inner whitespace kept).

Defined answers, never a serving error: an empty or whitespace-only
sentence has no words and no entities; any string (1 MB and more) is split
and tagged whole, up to ``max_windows`` windows.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from bert_tf.export import base
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib
from bert_tf.modeling import tagging

WHITESPACE = tagging.WHITESPACE
WARMUP_SENTENCES = ("Empire State Building = ESB .", "", "Caf\u00e9 de Flore in Paris " * 40)
OUTPUTS = ("entity_end_char", "entity_start_char", "entity_text", "entity_type",
           "num_entities", "num_words", "tags", "truncated", "word_end_char",
           "word_start_char", "words")


class TaggingServing(serving.ServingModule):
  """Word split + :class:`TaggingPreprocessor` + :class:`BertTokenClassifier`
  + tags and entities behind a string signature (kind ``ner``).

  Args:
    model: a built :class:`bert_tf.modeling.tagging.BertTokenClassifier`.
    preprocessor: the :class:`BertPreprocessor` used to fine-tune it.
    spec: an ``ner`` :class:`ServingSpec` (labels, ``doc_stride``,
      ``max_windows``: the serving cap on windows per sentence).
    ops: the format's ops (default the SavedModel's). A format whose ops
      cannot run ragged ops supplies its own tagger (``ops.tag_sentences``,
      the same outputs in dense ops).

  Raises:
    SpecError: labels that do not match the model's ``num_labels``.

  Example::

    spec = ServingSpec.create("ner", 128, labels=task.labels)
    module = TaggingServing(model, task.preprocessor, spec)
    out = module.serve(tf.constant(["Empire State Building = ESB ."]))
  """

  kind = "ner"
  # The training default stride; the serving cap on windows per sentence.
  defaults = {"doc_stride": 64, "max_windows": 256}

  @classmethod
  def settings_from_run(cls, run_config) -> dict:
    """``ner_config.json``: ``labels``, ``doc_stride``."""
    return {"labels": run_config.get("labels"), "doc_stride": run_config.get("doc_stride")}

  @classmethod
  def settings_from_model(cls, model, *, is_pair=False, num_choices=None) -> dict:
    """The token classifier's tag names (``label_names``, its ``id2label``)."""
    del is_pair, num_choices
    if not getattr(model, "label_names", None):
      raise spec_lib.SpecError("the token classifier names no tags (id2label); the tagger "
                               "export needs BIO tag names", argument="from_preset")
    return {"labels": model.label_names}

  @classmethod
  def check_spec(cls, spec) -> None:
    if "O" not in (spec.labels or ()):
      raise spec_lib.SpecError("the NER export needs BIO tag names with an 'O' tag (the "
                               "labels are %s)" % (list(spec.labels or ()),),
                               argument="labels")

  def __init__(self, model, preprocessor, spec: spec_lib.ServingSpec, ops=None):
    if len(spec.labels) != getattr(model, "num_labels", -1):
      raise spec_lib.SpecError("%d labels for a model of %s outputs" % (
          len(spec.labels), getattr(model, "num_labels", "unknown")), argument="labels")
    self.tp = tagging.TaggingPreprocessor(preprocessor, spec.doc_stride, spec.max_windows)
    self.labels = list(spec.labels)
    self.prefix_codes, self.type_ids, self.types = tagging.label_tables(self.labels)
    self.o_id = self.labels.index("O")
    super().__init__(model, preprocessor, spec, ops)

  def build_signatures(self):
    return self.text_function(self.tag, ["sentence"]), None

  @staticmethod
  def split_words(sentence):
    """:func:`bert_tf.modeling.tagging.split_words` (whitespace words with
    code-point and byte offsets; also the tagger's text input)."""
    return tagging.split_words(sentence)

  def tag(self, sentence):
    """The serving computation on a flat [B] batch; the output dict."""
    own = getattr(self.ops, "tag_sentences", None)
    return own(self, sentence) if own is not None else self.graph_tag(sentence)

  def graph_tag(self, sentence):
    """:meth:`tag` in ragged ops (the SavedModel's)."""
    sentence = tf.strings.unicode_transcode(sentence, "UTF-8", "UTF-8", errors="replace",
                                            replacement_char=0xFFFD)
    words, s_char, e_char, s_byte, e_byte = self.split_words(sentence)
    pieces = self.tp.word_pieces(words)
    win = self.tp.windows(pieces["ids"])
    logits = base.serving_call(
        self, {k: win[k] for k in tagging.FEATURE_NAMES})
    word_logits, covered = self.tp.word_logits(win, pieces, logits)
    ids = tf.where(covered, tf.argmax(word_logits, -1), self.o_id)
    tag_ids = words.with_flat_values(ids)
    label_t = tf.constant(self.labels)
    ent = tagging.entity_spans(tag_ids, self.prefix_codes, self.type_ids)
    batch = tf.shape(sentence, tf.int64)[0]
    first = ent["first"] + tf.gather(words.row_starts(), ent["row"])  # global word index
    last = ent["last"] + tf.gather(words.row_starts(), ent["row"])
    num_e = tf.math.bincount(tf.cast(ent["row"], tf.int32),
                             minlength=tf.cast(batch, tf.int32),
                             maxlength=tf.cast(batch, tf.int32), dtype=tf.int64)
    as_rows = lambda v: tf.RaggedTensor.from_row_lengths(v, num_e)  # pylint: disable=unnecessary-lambda-assignment
    b0 = as_rows(tf.gather(s_byte.flat_values, first))
    b1 = as_rows(tf.gather(e_byte.flat_values, last))
    b0d, b1d = b0.to_tensor(0), b1.to_tensor(0)
    ent_text = tf.strings.substr(tf.expand_dims(sentence, 1), tf.cast(b0d, tf.int32),
                                 tf.cast(b1d - b0d, tf.int32), unit="BYTE")
    ent_mask = tf.sequence_mask(num_e, tf.shape(b0d, tf.int64)[1])
    ent_text = tf.where(ent_mask, ent_text, "")
    types = tf.constant(self.types + [""])
    i32 = lambda r: tf.cast(r.to_tensor(0), tf.int32)  # pylint: disable=unnecessary-lambda-assignment
    uncovered = tf.math.unsorted_segment_sum(
        tf.cast(~covered, tf.int32), tf.cast(base.row_ids(words), tf.int32),
        tf.cast(batch, tf.int32)) > 0
    return {
        "words": words.to_tensor(""),
        "tags": tag_ids.with_flat_values(tf.gather(label_t, ids)).to_tensor(""),
        "num_words": tf.cast(words.row_lengths(), tf.int32),
        "word_start_char": i32(s_char), "word_end_char": i32(e_char),
        "entity_type": as_rows(tf.gather(types, ent["type_id"])).to_tensor(""),
        "entity_text": ent_text,
        "entity_start_char": i32(as_rows(tf.gather(s_char.flat_values, first))),
        "entity_end_char": i32(as_rows(tf.gather(e_char.flat_values, last))),
        "num_entities": tf.cast(num_e, tf.int32),
        "truncated": uncovered,
    }

  def metadata(self) -> dict:
    out = super().metadata()
    out.update(task="ner", is_pair=False, outputs=list(OUTPUTS),
               doc_stride=int(self.spec.doc_stride), max_windows=int(self.spec.max_windows),
               offsets="start_char/end_char: Unicode code points, end exclusive")
    return out

  def warmup_requests(self):
    return [("serving_default", {"sentence": list(WARMUP_SENTENCES)})]


def export_tagger(model, preprocessor, labels: Sequence[str], export_dir: str,
                  doc_stride: int = 64, max_windows: int = 256,
                  version: Optional[int] = None) -> str:
  """Writes ``export_dir/<version>/`` (a token-tagging SavedModel); returns
  its path. See the module docstring for the signature.

  Args:
    model: a built :class:`bert_tf.modeling.tagging.BertTokenClassifier`.
    preprocessor: the :class:`bert_tf.preprocessing.BertPreprocessor` used
      to fine-tune it (vocab, lower-casing, ``max_seq_length``).
    labels: the tags in label-id order (``ner_config.json``'s ``labels``).
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    doc_stride: as in training.
    max_windows: windows per sentence at most (the serving guard).
    version: integer version; default
      :func:`bert_tf.export.base.next_version`.

  Returns:
    the path of the version directory (written under a temporary name and
    renamed when whole).

  Raises:
    FileExistsError: that version already exists.
    SpecError (a ValueError): labels that do not fit the model or lack
      ``O``, ``doc_stride`` / ``max_windows`` below 1.

  Example::

    from bert_tf import export
    path = export.export_tagger(model, task.preprocessor, task.labels, "exports/ner")
  """
  spec = spec_lib.ServingSpec.create(
      "ner", preprocessor.max_seq_length, labels=labels, doc_stride=doc_stride,
      max_windows=max_windows, do_lower_case=preprocessor.do_lower_case,
      preserve_unused_tokens=preprocessor.preserve_unused_tokens)
  return base.write_module(TaggingServing(model, preprocessor, spec), export_dir, version)
