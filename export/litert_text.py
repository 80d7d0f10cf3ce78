"""Text in LiteRT ops: the tokenizer, dense packing and UTF-8 arithmetic.

The pieces of the ``litert`` format's graphs (:mod:`bert_tf.export.litert`)
that stand for the SavedModel's ragged and string ops, in ops that have
LiteRT kernels (builtins, or tensorflow-text's
``tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS``):

* :func:`fast_tokenizer`, :func:`dense_features`, :func:`pack_segments`:
  ``FastBertTokenizer`` + ``RoundRobinTrimmer`` + ``[CLS] a [SEP] (b [SEP])``
  packed to a fixed [B, max_seq_length] with dense ops (no ``RaggedRange``);
* :func:`split_words_bytes`, :func:`substrings`: whitespace words from a
  sentence's bytes (``ByteSplitter``; code points decoded by integer
  arithmetic, LiteRT having no bitwise kernel) and cut out with
  ``ByteSplitByOffsets`` (the one substring kernel LiteRT has);
* :func:`pad_index`, :func:`dense_rows`: row-major values to dense padded
  rows by gathers (LiteRT selects no strings);
* :func:`max_context_ranks`: ``run_squad._check_is_max_context``'s float64
  score as exact int32 ranks.

Source: tensorflow-text's LiteRT guide (``FastBertTokenizer`` in TFLite,
``tflite_registrar``); the original ``run_classifier.py``
``_truncate_seq_pair`` and ``run_squad.py`` doc-stride windows.
"""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
import tensorflow as tf


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


def utf8_valid(b: tf.Tensor) -> tf.Tensor:
  """Which bytes belong to a well-formed UTF-8 sequence (Unicode's Table
  3-7: no overlong forms, surrogates or code points above U+10FFFF).

  Args:
    b: int32 [B, N] bytes (0-255); padding must be a byte that is not a
      continuation byte (e.g. 32).

  Returns:
    bool [B, N]. The bytes TensorFlow's ``unicode_transcode(errors="replace")``
    replaces by U+FFFD are exactly the others (a maximal invalid subpart is
    never part of a well-formed sequence, and a continuation byte never
    starts one).
  """
  pad = column(b) + 32
  nxt = [b]
  for _ in range(3):
    nxt.append(tf.concat([nxt[-1], pad], 1)[:, 1:])
  b0, b1, b2, b3 = nxt
  within = lambda x, lo, hi: tf.logical_and(x >= lo, x <= hi)  # pylint: disable=unnecessary-lambda-assignment
  cont = lambda x: within(x, 0x80, 0xBF)  # pylint: disable=unnecessary-lambda-assignment
  one = b0 <= 0x7F
  two = within(b0, 0xC2, 0xDF) & cont(b1)
  three = ((tf.equal(b0, 0xE0) & within(b1, 0xA0, 0xBF)) |
           (within(b0, 0xE1, 0xEC) & cont(b1)) | (tf.equal(b0, 0xED) & within(b1, 0x80, 0x9F)) |
           (within(b0, 0xEE, 0xEF) & cont(b1))) & cont(b2)
  four = ((tf.equal(b0, 0xF0) & within(b1, 0x90, 0xBF)) |
          (within(b0, 0xF1, 0xF3) & cont(b1)) | (tf.equal(b0, 0xF4) & within(b1, 0x80, 0x8F))
          ) & cont(b2) & cont(b3)
  size = (tf.cast(one, tf.int32) + 2 * tf.cast(two, tf.int32) + 3 * tf.cast(three, tf.int32)
          + 4 * tf.cast(four, tf.int32))                                     # 0: no start
  valid = size > 0
  for k in (1, 2, 3):
    valid = valid | (shift(size, k) > k)
  return valid


def valid_runs(text: tf.Tensor) -> tf.RaggedTensor:
  """The maximal runs of well-formed UTF-8 of each string: string [B, (R)].

  Invalid bytes (:func:`utf8_valid`) are left out, as the SavedModel's
  :meth:`bert_tf.preprocessing.BertPreprocessor.sanitize` replaces them by
  U+FFFD and deletes that; a valid string is one run (itself), an empty one
  none. Cut with tensorflow-text's ``ByteSplitByOffsets``.
  """
  import tensorflow_text as text_lib  # pylint: disable=g-import-not-at-top
  raw = text_lib.ByteSplitter().split(text)
  nbytes = tf.cast(raw.row_lengths(), tf.int32)
  b = tf.RaggedTensor.from_row_splits(tf.cast(raw.flat_values, tf.int32), raw.row_splits,
                                      validate=False).to_tensor(32)            # [B, N]
  pos = tf.range(tf.shape(b)[1])[tf.newaxis, :]
  valid = tf.cast(utf8_valid(b) & (pos < nbytes[:, tf.newaxis]), tf.int32)
  zero = column(b)
  prev = tf.concat([zero, valid], 1)[:, :-1]
  nxt = tf.concat([valid, zero], 1)[:, 1:]
  starts = tf.cast(tf.where(valid * (1 - prev) > 0), tf.int32)             # [R, 2]
  ends = tf.cast(tf.where(valid * (1 - nxt) > 0), tf.int32)
  counts = tf.cast(tf.reduce_sum(valid * (1 - prev), 1), tf.int64)
  return text_lib.ByteSplitter().split_by_offsets(
      text, tf.RaggedTensor.from_row_lengths(starts[:, 1], counts, validate=False),
      tf.RaggedTensor.from_row_lengths(ends[:, 1] + 1, counts, validate=False))


def tokenize_valid(tokenizer, text: tf.Tensor) -> tf.RaggedTensor:
  """``tokenizer.tokenize`` of each string's well-formed UTF-8 (int [B, (T)]).

  Each run of :func:`valid_runs` is tokenized and a string's runs joined: a
  valid string gives exactly ``tokenizer.tokenize(text)``; invalid bytes
  are dropped as the SavedModel drops them, except that a word they sit
  inside is split there (as FastBertNormalizer splits one at a control
  character, :data:`bert_tf.export.litert.TOKEN_DIFFERENCES`).
  """
  runs = valid_runs(text)
  pieces = tokenizer.tokenize(runs.flat_values)                            # [R, (t)]
  splits = tf.gather(pieces.row_splits, runs.row_splits)
  return tf.RaggedTensor.from_row_splits(pieces.flat_values, splits, validate=False)


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
    tokenizers agree on (round-robin trimming, zero padding); invalid UTF-8
    dropped (:func:`tokenize_valid`).
  """
  return pack_segments(preprocessor, [tokenize_valid(tokenizer, t) for t in texts])


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


def whitespace_ranges():
  """Python ``str.isspace`` as inclusive code point ranges (the SavedModel's
  split, :data:`bert_tf.modeling.tagging.WHITESPACE`)."""
  out = []
  for c in range(0x110000):
    if chr(c).isspace():
      if out and out[-1][1] == c - 1:
        out[-1][1] = c
      else:
        out.append([c, c])
  return tuple(tuple(r) for r in out)


WHITESPACE_RANGES = whitespace_ranges()


def shift(x, k):
  """``x`` [B, N] int32 moved k columns right (zeros enter on the left)."""
  zeros = tf.zeros(tf.stack([tf.shape(x)[0], k]), x.dtype)
  return tf.concat([zeros, x], 1)[:, :tf.shape(x)[1]]


def column(x):
  """The first column of ``x`` [B, N] as zeros [B, 1] (also when N is 0)."""
  return tf.zeros_like(tf.reduce_sum(x, 1, keepdims=True))


def substrings(sentence: tf.Tensor, counts, start_byte, end_byte) -> tf.Tensor:
  """``sentence[row][start:end]`` (bytes) of each of N ranges, with one ""
  after them: string [N + 1], so that index N pads a dense gather (an
  empty batch: string [0], nothing to pad).

  Args:
    sentence: string [B]; counts: int [B], ranges per row;
      start_byte, end_byte: int [N], the ranges in row-major order.

  LiteRT has no substring kernel of core TensorFlow; tensorflow-text's
  ``ByteSplitByOffsets`` is one, and an empty range after the last row's
  gives the "" (LiteRT concatenates no strings).
  """
  import tensorflow_text as text  # pylint: disable=g-import-not-at-top
  batch = tf.shape(sentence)[0]
  counts = tf.cast(counts, tf.int64) + tf.one_hot(batch - 1, batch, dtype=tf.int64)
  zero = tf.zeros(tf.reshape(tf.minimum(batch, 1), [1]), tf.int32)
  starts = tf.concat([tf.cast(start_byte, tf.int32), zero], 0)
  ends = tf.concat([tf.cast(end_byte, tf.int32), zero], 0)
  return text.ByteSplitter().split_by_offsets(
      sentence, tf.RaggedTensor.from_row_lengths(starts, counts, validate=False),
      tf.RaggedTensor.from_row_lengths(ends, counts, validate=False)).flat_values


def split_words_bytes(sentence: tf.Tensor) -> dict:
  """Whitespace words of ``sentence`` string [B] from its bytes (dense ops).

  The split of :func:`bert_tf.modeling.tagging.split_words` (Python
  ``str.split()``'s whitespace, :data:`WHITESPACE_RANGES`; NUL is not
  whitespace) on valid UTF-8: tensorflow-text ``ByteSplitter`` gives the
  bytes, each code point's value is decoded at its lead byte, and offsets
  are counted in code points (a code point starts at every byte that is not
  ``10xxxxxx``).

  Returns:
    dict: ``row``, ``start_byte``, ``end_byte``, ``start_char``,
    ``end_char`` int32 [N] (the N words in row-major order; ends exclusive),
    ``num_words`` int32 [B].
  """
  import tensorflow_text as text  # pylint: disable=g-import-not-at-top
  raw = text.ByteSplitter().split(sentence)
  nbytes = tf.cast(raw.row_lengths(), tf.int32)
  # Padding is a space: words end at the sentence's end.
  b = tf.RaggedTensor.from_row_splits(tf.cast(raw.flat_values, tf.int32), raw.row_splits,
                                      validate=False).to_tensor(32)            # [B, N]
  pad = column(b) + 32
  b1 = tf.concat([b, pad], 1)[:, 1:]
  b2 = tf.concat([b1, pad], 1)[:, 1:]
  # Bit fields by integer division (LiteRT has no bitwise kernel); bytes 0-255.
  cont = lambda v: tf.math.floormod(v, 64)  # pylint: disable=unnecessary-lambda-assignment
  one = b < 0x80
  two = tf.equal(b // 32, 6)      # 110xxxxx
  three = tf.equal(b // 16, 14)   # 1110xxxx
  cp = tf.where(one, b, tf.where(
      two, tf.math.floormod(b, 32) * 64 + cont(b1), tf.where(
          three, tf.math.floormod(b, 16) * 4096 + cont(b1) * 64 + cont(b2), -1)))
  lead_ws = tf.zeros_like(b, tf.bool)
  for lo, hi in WHITESPACE_RANGES:
    lead_ws = tf.logical_or(lead_ws, tf.logical_and(cp >= lo, cp <= hi))
  lead_ws = tf.cast(lead_ws, tf.int32)
  size = tf.where(one, 1, tf.where(two, 2, 3)) * lead_ws
  ws = tf.minimum(1, lead_ws + shift(tf.cast(size >= 2, tf.int32), 1) +
                  shift(tf.cast(size >= 3, tf.int32), 2))
  one_col = column(b) + 1
  prev_ws = tf.concat([one_col, ws], 1)[:, :-1]
  next_ws = tf.concat([ws, one_col], 1)[:, 1:]
  word = 1 - ws
  starts = tf.cast(tf.where(word * prev_ws > 0), tf.int32)                   # [N, 2]
  ends = tf.cast(tf.where(word * next_ws > 0), tf.int32)
  pos = tf.range(tf.shape(b)[1])[tf.newaxis, :]
  lead = tf.cast(tf.logical_and(pos < nbytes[:, tf.newaxis], tf.not_equal(b // 64, 2)),
                 tf.int32)
  chars = tf.cumsum(tf.concat([lead, column(b)], 1), axis=1, exclusive=True)  # [B, N+1]
  end_b = ends[:, 1] + 1
  return {"row": starts[:, 0], "start_byte": starts[:, 1], "end_byte": end_b,
          "start_char": tf.gather_nd(chars, starts),
          "end_char": tf.gather_nd(chars, tf.stack([ends[:, 0], end_b], 1)),
          "num_words": tf.reduce_sum(word * prev_ws, 1)}


def pad_index(counts) -> tuple:
  """Gather indexes of a dense [B, max(counts)] layout of N = sum(counts)
  row-major values: ``(index int32 [B, W], valid bool [B, W])``, index N
  after each row's ``counts`` (where the table holds its pad)."""
  counts = tf.cast(counts, tf.int32)
  width = tf.reduce_max(tf.concat([counts, [0]], 0))
  j = tf.range(width)[tf.newaxis, :]
  valid = j < counts[:, tf.newaxis]
  return tf.where(valid, tf.cumsum(counts, exclusive=True)[:, tf.newaxis] + j,
                  tf.reduce_sum(counts)), valid


def dense_rows(flat, counts, pad) -> tuple:
  """[N] numbers in row-major order -> ``(values [B, max(counts)], valid)``,
  ``pad`` after each row's ``counts`` (:func:`pad_index`)."""
  idx, valid = pad_index(counts)
  return tf.gather(tf.concat([flat, tf.cast([pad], flat.dtype)], 0), idx), valid


def max_context_ranks(m: int) -> np.ndarray:
  """``rank[min_context * (m + 1) + window_length]``: the order of
  ``run_squad._check_is_max_context``'s float64 score ``min(left, right) +
  0.01 * window_length`` as int32 (equal scores, equal ranks), so the graph
  compares exactly what the SavedModel compares in float64."""
  mc, wl = np.meshgrid(np.arange(m // 2 + 1), np.arange(m + 1), indexing="ij")
  score = mc.astype(np.float64) + 0.01 * wl.astype(np.float64)
  return np.unique(score.ravel(), return_inverse=True)[1].astype(np.int32)
