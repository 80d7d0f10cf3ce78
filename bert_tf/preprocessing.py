"""``BertPreprocessor``: raw strings -> BERT inputs, in the TensorFlow graph.

One implementation, used both to fine-tune (inside the tf.data pipeline) and
inside every exported SavedModel, so serving cannot drift from training.

Steps (tensorflow-text ops):

1. sanitize: invalid UTF-8 is replaced, then U+FFFD, NUL and Unicode
   Cc/Cf characters are deleted and ``\\t\\n\\r`` and Unicode Zs become
   spaces, as the original ``BasicTokenizer._clean_text`` does;
2. for uncased models, lower-casing + NFD + dropping Mn marks (the
   reference's order; not tensorflow-text's NFKC case folding), then
   ``tensorflow_text.BertTokenizer`` (punctuation/CJK splitting + WordPiece
   against the vocab file, which becomes a SavedModel asset);
3. truncation with ``RoundRobinTrimmer``: the same lengths as the original
   ``run_classifier._truncate_seq_pair`` (longest first, ties trim text_b);
4. ``[CLS] a [SEP] b [SEP]`` packing with segment ids 0 / 1, zero padding to
   ``max_seq_length`` (original ``convert_single_example``).
"""

import os

import tensorflow as tf
import tensorflow_text as text

from bert_tf import errors
from bert_tf import tokenization


class BertPreprocessor(tf.Module):
  """Tokenizes and packs one or two batches of raw strings.

  Args:
    vocab_file: WordPiece vocab (one token per line).
    do_lower_case: lower-case and strip accents (uncased models).
    max_seq_length: output width S, specials included (>= 3 for pairs).

  Call args:
    text_a: string [B].
    text_b: optional string [B] (sentence pairs).

  Returns:
    dict of int32 [B, S]: ``input_ids``, ``input_mask``, ``segment_ids``.

  Raises:
    tokenization.VocabError: vocab missing, unreadable or without
      ``[UNK] [CLS] [SEP] [MASK]``.
    ValueError: ``max_seq_length`` too small.
  """

  def __init__(self, vocab_file, do_lower_case=True, max_seq_length=128,
               name="bert_preprocessor"):
    super().__init__(name=name)
    vocab = tokenization.load_vocab(vocab_file)
    tokenization.check_vocab(vocab, vocab_file)
    if max_seq_length < 3:
      raise errors.ParamsError("max_seq_length must be at least 3, got %d"
                               % max_seq_length, argument="max_seq_length")
    self.vocab_file = os.fspath(vocab_file)
    self.do_lower_case = bool(do_lower_case)
    self.max_seq_length = int(max_seq_length)
    self.vocab_size = len(vocab)
    self.cls_id = vocab["[CLS]"]
    self.sep_id = vocab["[SEP]"]
    self.pad_id = vocab.get("[PAD]", 0)
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.TextFileInitializer(
            self.vocab_file, key_dtype=tf.string,
            key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            value_dtype=tf.int64, value_index=tf.lookup.TextFileIndex.LINE_NUMBER),
        num_oov_buckets=1)
    # Lower-casing and accent stripping are done in normalize() exactly as
    # the reference does (str.lower, NFD, drop Mn); tensorflow-text's own
    # lower_case=True applies NFKC case folding (ß -> ss, ligatures, ...).
    # 200 bytes: ASCII words up to the reference's 200-character limit.
    self.tokenizer = text.BertTokenizer(
        table, token_out_type=tf.int64, unknown_token="[UNK]",
        lower_case=False, max_bytes_per_word=200)

  @staticmethod
  def sanitize(strings):
    """Valid UTF-8 with the original's deleted characters removed ([B] string)."""
    s = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace",
                                     replacement_char=0xFFFD)
    # Python's str.split() in the reference also splits on U+2028/U+2029.
    s = tf.strings.regex_replace(s, r"[\t\n\r\p{Zs}\x{2028}\x{2029}]", " ")
    return tf.strings.regex_replace(s, r"[\x{0}\x{FFFD}\p{Cc}\p{Cf}]", "")

  def normalize(self, strings):
    """Sanitized, and for uncased models lower-cased with accents stripped.

    Matches the reference ``BasicTokenizer``: ``str.lower()``, NFD, then
    Unicode Mn (non-spacing marks) removed. [B] string.
    """
    s = self.sanitize(strings)
    if self.do_lower_case:
      s = tf.strings.lower(s, encoding="utf-8")
      s = text.normalize_utf8(s, "NFD")
      s = tf.strings.regex_replace(s, r"\p{Mn}", "")
    return s

  def tokenize(self, strings):
    """Word-piece ids of each string: int64 RaggedTensor [B, (tokens)]."""
    tokens = self.tokenizer.tokenize(self.normalize(strings))
    return tokens.merge_dims(-2, -1)

  def pack(self, segments):
    """Truncates and packs a list of 1 or 2 ragged id batches into [B, S] inputs."""
    trimmer = text.RoundRobinTrimmer(
        max_seq_length=self.max_seq_length - len(segments) - 1)
    trimmed = trimmer.trim(segments)
    ids, segment_ids = text.combine_segments(
        trimmed, start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id)
    input_ids, input_mask = text.pad_model_inputs(
        ids, self.max_seq_length, pad_value=self.pad_id)
    segment_ids, _ = text.pad_model_inputs(segment_ids, self.max_seq_length)
    return {"input_ids": tf.cast(input_ids, tf.int32),
            "input_mask": tf.cast(input_mask, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32)}

  def __call__(self, text_a, text_b=None):
    segments = [self.tokenize(text_a)]
    if text_b is not None:
      segments.append(self.tokenize(text_b))
    return self.pack(segments)


def trim_to_longest(features):
  """Drops padding columns beyond the longest row of a batch.

  Exact for BERT (padding is masked out); saves compute on short texts.

  Args:
    features: dict with int ``input_mask`` [B, S] and other [B, S] tensors
      (keys ``input_ids``, ``input_mask``, ``segment_ids``); other keys are
      passed through.

  Returns:
    the same dict with [B, S'] tensors, S' = max row length (at least 1).
  """
  longest = tf.maximum(tf.reduce_max(tf.reduce_sum(features["input_mask"], 1)), 1)
  out = dict(features)
  for k in ("input_ids", "input_mask", "segment_ids"):
    out[k] = features[k][:, :longest]
  return out
