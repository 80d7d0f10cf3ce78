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
windows of the batch, [B * K, S], through one encoder call at the smallest
of :data:`BUCKETS` / S that holds the longest window; K the batch's most,
at most ``max_windows``), each word given the argmax at its first
piece in its max-context window (run_squad's float64 score compared as
exact ranks, :func:`max_context_ranks`), and entities found with
conlleval's chunk rules (:func:`entities`). Strings are padded with "" by
gathering from tables that end with an empty substring (LiteRT
concatenates no strings). SQuAD is refused (its question + context
windows and span choice are not written in these ops), before any work.

The preprocessor and features exports carry a second signature, ``pair``
(``text_a``, ``text_b``), as their SavedModels do.

Source: tensorflow-text's LiteRT guide (``FastBertTokenizer`` in TFLite,
``tflite_registrar``), MediaPipe Model Maker's BERT text classifier, and
``tf.lite.TFLiteConverter`` (TF 2.21) post-training dynamic-range / float16
quantization.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import warnings
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf import errors
from bert_tf import io_utils
from bert_tf.export import base
from bert_tf.export import client
from bert_tf.export import litert_delegation
from bert_tf.export import tagging as tagging_export
from bert_tf.modeling import tagging

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
# The NER signature's outputs: the SavedModel's, every one.
NER_OUTPUTS = tagging_export.OUTPUTS
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


def _whitespace_ranges():
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


WHITESPACE_RANGES = _whitespace_ranges()


def _shift(x, k):
  """``x`` [B, N] int32 moved k columns right (zeros enter on the left)."""
  zeros = tf.zeros(tf.stack([tf.shape(x)[0], k]), x.dtype)
  return tf.concat([zeros, x], 1)[:, :tf.shape(x)[1]]


def _column(x):
  """The first column of ``x`` [B, N] as zeros [B, 1] (also when N is 0)."""
  return tf.zeros_like(tf.reduce_sum(x, 1, keepdims=True))


def substrings(sentence: tf.Tensor, counts, start_byte, end_byte) -> tf.Tensor:
  """``sentence[row][start:end]`` (bytes) of each of N ranges, with one ""
  after them: string [N + 1], so that index N pads a dense gather.

  Args:
    sentence: string [B] (B >= 1); counts: int [B], ranges per row;
      start_byte, end_byte: int [N], the ranges in row-major order.

  LiteRT has no substring kernel of core TensorFlow; tensorflow-text's
  ``ByteSplitByOffsets`` is one, and an empty range after the last row's
  gives the "" (LiteRT concatenates no strings).

  Raises (when run):
    RuntimeError: an empty batch (no row to hold the "").
  """
  import tensorflow_text as text  # pylint: disable=g-import-not-at-top
  batch = tf.shape(sentence)[0]
  counts = tf.cast(counts, tf.int64) + tf.one_hot(batch - 1, batch, dtype=tf.int64)
  zero = tf.zeros([1], tf.int32)
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
  pad = _column(b) + 32
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
  ws = tf.minimum(1, lead_ws + _shift(tf.cast(size >= 2, tf.int32), 1) +
                  _shift(tf.cast(size >= 3, tf.int32), 2))
  one_col = _column(b) + 1
  prev_ws = tf.concat([one_col, ws], 1)[:, :-1]
  next_ws = tf.concat([ws, one_col], 1)[:, 1:]
  word = 1 - ws
  starts = tf.cast(tf.where(word * prev_ws > 0), tf.int32)                   # [N, 2]
  ends = tf.cast(tf.where(word * next_ws > 0), tf.int32)
  pos = tf.range(tf.shape(b)[1])[tf.newaxis, :]
  lead = tf.cast(tf.logical_and(pos < nbytes[:, tf.newaxis], tf.not_equal(b // 64, 2)),
                 tf.int32)
  chars = tf.cumsum(tf.concat([lead, _column(b)], 1), axis=1, exclusive=True)  # [B, N+1]
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


def tag_sentences(module: "LiteRTModule", sentence: tf.Tensor) -> dict:
  """The NER SavedModel's computation (:mod:`bert_tf.export.tagging`) in
  LiteRT ops.

  Args:
    module: a :class:`LiteRTModule` of ``ner`` (its model, tokenizer,
      labels, ``doc_stride``, ``max_windows``).
    sentence: string [B], B >= 1, valid UTF-8 (the client refuses other).

  Returns:
    the SavedModel's outputs (:data:`NER_OUTPUTS`), padded to the batch's
    most words W / entities E: ``words``, ``tags`` string [B, W] (""),
    ``num_words`` int32 [B], ``word_start_char`` / ``word_end_char`` int32
    [B, W] (code points, end exclusive), ``entity_type`` / ``entity_text``
    string [B, E], ``entity_start_char`` / ``entity_end_char`` int32 [B, E],
    ``num_entities`` int32 [B], ``truncated`` bool [B] (a word beyond
    ``max_windows`` windows, given ``O``).

  Windows as :meth:`bert_tf.modeling.tagging.TaggingPreprocessor.windows`
  (piece ``k * min(S - 2, doc_stride)`` starts window k); a piece lies in at
  most ``ceil((S - 2) / stride)`` windows, the candidates compared per word.

  Raises (when run):
    RuntimeError: an empty batch (:func:`substrings`).
  """
  pre = module.preprocessor
  seq = pre.max_seq_length
  m = seq - 2
  step = min(m, module.doc_stride)
  labels = module.labels
  o_id = labels.index("O")
  w = split_words_bytes(sentence)
  num_words = w["num_words"]
  words = substrings(sentence, num_words, w["start_byte"], w["end_byte"])    # [N + 1]
  n_words = tf.shape(w["row"])[0]
  # Pieces per word; a word of no piece is [UNK] (TaggingPreprocessor.word_pieces).
  pieces = module.tokenizer.tokenize(words)                                # [N + 1, (p)]
  plen = tf.cast(pieces.row_lengths(), tf.int32)[:n_words]
  new_len = tf.maximum(plen, 1)
  gstart = tf.cumsum(new_len, exclusive=True)                              # [N]
  total = tf.reduce_sum(new_len)
  rows = tf.cast(pieces.value_rowids(), tf.int32)
  k_in_word = tf.range(tf.size(pieces.flat_values)) - tf.gather(
      tf.cast(pieces.row_starts(), tf.int32), rows)
  pos = tf.gather(tf.concat([gstart, [0]], 0), rows) + k_in_word
  flat_ids = tf.scatter_nd(pos[:, tf.newaxis], pieces.flat_values + 1,
                           total[tf.newaxis]) - 1
  flat_ids = tf.where(flat_ids < 0, pre.unk_id, flat_ids)
  flat_ids = tf.concat([flat_ids, [pre.pad_id]], 0)                        # [T + 1]
  # Per sentence: its pieces, its windows (run_squad's doc-stride loop).
  len_d, is_word = dense_rows(new_len, num_words, 0)                       # [B, W]
  n_pieces = tf.reduce_sum(len_d, 1)                                       # [B]
  sent_start = tf.cumsum(n_pieces, exclusive=True)
  num_win = tf.where(n_pieces > 0, 1 + tf.maximum(0, (n_pieces - m + step - 1) // step), 0)
  num_win = tf.minimum(num_win, module.max_windows)
  k_max = tf.maximum(1, tf.reduce_max(tf.concat([num_win, [0]], 0)))
  kk = tf.range(k_max)[tf.newaxis, :]                                      # [1, K]
  wlen = tf.where(kk < num_win[:, tf.newaxis],
                  tf.clip_by_value(n_pieces[:, tf.newaxis] - kk * step, 0, m), 0)  # [B, K]
  wlen3 = tf.expand_dims(wlen, -1)
  t = tf.reshape(tf.range(seq), [1, 1, seq]) - 1                        # [1, 1, S]
  inside = tf.logical_and(t >= 0, t < wlen3)
  src = tf.reshape(sent_start, [-1, 1, 1]) + tf.expand_dims(kk, -1) * step + t
  ids = tf.gather(flat_ids, tf.where(inside, src, total))
  ids = tf.where(tf.equal(t, wlen3), pre.sep_id, ids)
  ids = tf.where(t < 0, pre.cls_id, ids)
  mask = tf.cast(t <= wlen3, tf.int32)
  batch = tf.shape(sentence)[0]
  flat = lambda x: tf.reshape(x, [-1, seq])  # pylint: disable=unnecessary-lambda-assignment
  # The windows' tags [B * K, S] at the smallest bucket width that holds the
  # longest window (padding positions are never read).
  piece_tags = module._bucketed(  # pylint: disable=protected-access
      {"input_ids": flat(ids), "input_mask": flat(mask), "segment_ids": flat(tf.zeros_like(ids))},
      post=lambda logits, width: tf.pad(tf.argmax(logits, axis=-1, output_type=tf.int32),
                                        [[0, 0], [0, seq - width]]))
  piece_tags = tf.reshape(piece_tags, [-1])
  # Each word's first piece in its max-context window (first window on ties).
  first, _ = dense_rows(gstart, num_words, 0)
  q = first - sent_start[:, tf.newaxis]                                    # [B, W]
  ranks = tf.constant(max_context_ranks(m))
  cands = -(-m // step)
  best_rank, best_pos = None, None
  for c in range(cands):
    k = q // step - (cands - 1) + c
    i = q - k * step
    wl = tf.gather(wlen, tf.clip_by_value(k, 0, k_max - 1), batch_dims=1)
    ok = (is_word & (k >= 0) & (k < num_win[:, tf.newaxis]) & (i >= 0) & (i < wl))
    rank = tf.where(ok, tf.gather(ranks, tf.clip_by_value(
        tf.minimum(i, wl - 1 - i), 0, m // 2) * (m + 1) + wl), -1)
    at = (tf.range(batch)[:, tf.newaxis] * k_max + k) * seq + i + 1  # in piece_tags
    if best_rank is None:
      best_rank, best_pos = rank, at
    else:
      # Strictly better only: the earlier window keeps a tie.
      better = rank > best_rank
      best_rank, best_pos = tf.maximum(rank, best_rank), tf.where(better, at, best_pos)
  covered = best_rank >= 0
  read = tf.gather(piece_tags, tf.where(covered, best_pos, 0))
  tag_ids = tf.where(covered, read, o_id)
  tags = tf.gather(tf.constant(list(labels) + [""]), tf.where(is_word, tag_ids, len(labels)))
  out = {"words": tf.gather(words, pad_index(num_words)[0]),
         "tags": tags, "num_words": num_words,
         "truncated": tf.reduce_any(is_word & ~covered, 1),
         "word_start_char": dense_rows(w["start_char"], num_words, 0)[0],
         "word_end_char": dense_rows(w["end_char"], num_words, 0)[0]}
  out.update(entities(labels, sentence, w, tf.where(is_word, tag_ids, o_id)))
  return out


def entities(labels: Sequence[str], sentence, w: dict, tag_ids) -> dict:
  """The NER SavedModel's entity outputs, with conlleval's chunk rules
  (:func:`bert_tf.modeling.tagging.entity_spans` in dense ops: each entity
  ends before the first chunk end after its start).

  Args:
    labels: the tags in id order (with ``O``); sentence: string [B];
    w: :func:`split_words_bytes`' dict; tag_ids: int32 [B, W], ``O`` after
    each row's words.

  Returns:
    ``entity_type``, ``entity_text`` string [B, E] (""),
    ``entity_start_char``, ``entity_end_char`` int32 [B, E] (code points,
    end exclusive; 0), ``num_entities`` int32 [B].
  """
  prefix_codes, type_ids, types = tagging.label_tables(labels)
  o_id = labels.index("O")
  prefix_t = tf.constant(prefix_codes, tf.int32)
  type_t = tf.constant(type_ids, tf.int32)
  o_col = _column(tag_ids) + o_id
  dense = tf.concat([tag_ids, o_col], 1)                                    # [B, W+1]
  prev = tf.concat([o_col, dense], 1)[:, :-1]
  cur_p, prev_p = tf.gather(prefix_t, dense), tf.gather(prefix_t, prev)
  cur_t, prev_t = tf.gather(type_t, dense), tf.gather(type_t, prev)
  is_ = lambda p, *codes: functools.reduce(  # pylint: disable=unnecessary-lambda-assignment
      tf.logical_or, [tf.equal(p, c) for c in codes])
  ends = (is_(prev_p, 3, 4) | (is_(prev_p, 1, 2) & is_(cur_p, 0, 1, 4)) |
          ((prev_p != 0) & (prev_t != cur_t)))
  starts = (is_(cur_p, 1, 4) | (is_(prev_p, 0, 3, 4) & is_(cur_p, 2, 3)) |
            ((cur_p != 0) & (prev_t != cur_t)))
  start_pos = tf.cast(tf.where(starts), tf.int32)                           # [E, 2]
  end_pos = tf.cast(tf.where(ends), tf.int32)
  end_count = tf.cumsum(tf.cast(ends, tf.int32), axis=1)
  row_end_start = tf.cumsum(end_count[:, -1], exclusive=True)
  row, first = start_pos[:, 0], start_pos[:, 1]
  nxt = tf.gather(end_pos[:, 1], tf.gather(row_end_start, row) +
                  tf.gather_nd(end_count, start_pos))
  word0 = tf.gather(tf.cumsum(w["num_words"], exclusive=True), row)
  g_first, g_last = word0 + first, word0 + nxt - 1
  num_e = tf.reduce_sum(tf.cast(starts, tf.int32), 1)
  idx, _ = pad_index(num_e)
  text = substrings(sentence, num_e, tf.gather(w["start_byte"], g_first),
                    tf.gather(w["end_byte"], g_last))
  type_id = tf.gather_nd(cur_t, start_pos)
  return {
      "entity_type": tf.gather(tf.constant(list(types) + [""]),
                               dense_rows(type_id, num_e, len(types))[0]),
      "entity_text": tf.gather(text, idx),
      "entity_start_char": dense_rows(tf.gather(w["start_char"], g_first), num_e, 0)[0],
      "entity_end_char": dense_rows(tf.gather(w["end_char"], g_last), num_e, 0)[0],
      "num_entities": num_e}


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
    multi_label: the classifier's labels are independent (a sigmoid each):
      the SavedModel's multi-label outputs (``probabilities`` float32
      [B, L], ``logits``, ``label_mask`` bool [B, L] at probability >= 0.5,
      ``labels`` string [B, L], "" where the mask is off).
    num_choices: endings per context (``swag``).

    doc_stride, max_windows: ``ner``: the SavedModel's windows
      (:func:`bert_tf.export.tagging.export_tagger`).

  Attributes:
    serve: the ``tf.function`` with the signature's ``input_signature``
      (``serving_default``); pair: the ``pair`` signature's (``text_a``,
      ``text_b``: preprocessor, features) or None.

  Raises:
    LiteRTExportError: an unknown ``what``; ``ner`` labels without ``O`` or
      ``doc_stride`` / ``max_windows`` below 1.
  """

  def __init__(self, what: str, model, preprocessor, labels: Optional[List[str]] = None,
               is_pair: bool = False, is_regression: bool = False, num_choices: int = 4,
               doc_stride: int = 64, max_windows: int = 256, multi_label: bool = False):
    super().__init__(name="bert_litert_serving")
    self.what = what
    if model is not None:
      base.track_tf_variables(self, model)
    self.preprocessor = preprocessor
    self.tokenizer = fast_tokenizer(preprocessor) if what != "encoder" else None
    self.labels = labels
    self.is_pair, self.is_regression = bool(is_pair), bool(is_regression)
    self.multi_label = bool(multi_label) and not self.is_regression
    self.num_choices = int(num_choices)
    self.doc_stride, self.max_windows = int(doc_stride), int(max_windows)
    if what == "ner" and (self.doc_stride < 1 or self.max_windows < 1):
      raise LiteRTExportError("doc_stride %d / max_windows %d: both must be at least 1" % (
          self.doc_stride, self.max_windows), argument="doc_stride")
    if what == "ner" and "O" not in (labels or ()):
      raise LiteRTExportError("--what=ner: the labels have no 'O' tag", argument="what")
    self.pair = None
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
      self.pair = tf.function(lambda text_a, text_b: self._preprocess([text_a, text_b]),
                              input_signature=[s("text_a"), s("text_b")], autograph=False)
    elif what == "features":
      self.serve = tf.function(lambda text_a: self._features([text_a]),
                               input_signature=[s("text_a")], autograph=False)
      self.pair = tf.function(lambda text_a, text_b: self._features([text_a, text_b]),
                              input_signature=[s("text_a"), s("text_b")], autograph=False)
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

  def _bucketed(self, features, post=None):
    """The model on ``features`` [B, S] cut to the smallest of :data:`BUCKETS`
    (and S) that holds the batch's longest row: one ``IF`` per bucket, each
    branch a fixed-shape subgraph that XNNPACK runs. Outputs must not depend
    on the width (classifier, multiple choice), or ``post(output, width)``
    makes them so (NER: per-position tags padded back to S)."""
    seq = self.preprocessor.max_seq_length
    widths = [w for w in BUCKETS if w < seq] + [seq]
    longest = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=-1))

    def run(width):
      def branch():
        out = tf.cast(self._call({k: v[..., :width] for k, v in features.items()},
                                 skip_padding=False), tf.float32)
        return out if post is None else post(out, width)
      return branch
    out = run(widths[-1])
    for width in reversed(widths[:-1]):
      out = (lambda w, rest: lambda: tf.cond(longest <= w, run(w), rest))(width, out)
    return out()

  def _classify(self, texts):
    logits = self._bucketed(self._pack(texts))
    if self.is_regression:
      return {"predictions": logits[:, 0]}
    if self.multi_label:
      probabilities = tf.sigmoid(logits)
      mask = probabilities >= 0.5
      # LiteRT selects no strings: gather the name, or the "" after the names.
      n = len(self.labels)
      pick = tf.where(mask, tf.range(n, dtype=tf.int32)[tf.newaxis, :], n)
      return {"probabilities": probabilities, "logits": logits, "label_mask": mask,
              "labels": tf.gather(tf.constant(list(self.labels) + [""]), pick)}
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
    return tag_sentences(self, sentence)

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
  """The ``.tflite`` flatbuffer of ``module.serve`` (signature
  ``serving_default``) and ``module.pair`` (signature ``pair``) when it has one.

  Args:
    module: a :class:`LiteRTModule`.
    quantize: ``none`` (float32), ``dynamic_int8`` (int8 weights, dynamic-range
      activations: ``Optimize.DEFAULT``) or ``float16`` (float16 weights).

  Returns:
    bytes.

  Raises:
    LiteRTExportError: the converter refused the graph (its first line).
  """
  if module.pair is None:
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
    tf.saved_model.save(root, tmp, signatures={"serving_default": module.serve,
                                               "pair": module.pair})
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
                  config=None, doc_stride: int = 64, max_windows: int = 256,
                  multi_label: bool = False) -> str:
  """Writes ``export_dir/<version>/model.tflite`` and its metadata file.

  Args:
    what: one of :data:`WHATS` (SQuAD refused: :data:`REFUSED`).
    model: the task's Keras model (encoder / features: the ``BertEncoder``).
    preprocessor: the :class:`BertPreprocessor` (None only for ``encoder``
      with ``max_seq_length``).
    export_dir: the export base directory; version: default the next free.
    quantize: one of :data:`QUANTIZE`.
    labels, is_pair, is_regression, num_choices, task_name, multi_label:
      the task's (:class:`LiteRTModule`).
    max_seq_length: the id-level encoder's fixed width (default the
      preprocessor's).
    config: the model's :class:`BertConfig` (recorded in the metadata).
    doc_stride, max_windows: ``ner``'s windows (as
      :func:`bert_tf.export.tagging.export_tagger`).

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
                        is_pair, is_regression, num_choices, doc_stride, max_windows,
                        multi_label)
  flat = convert(module, quantize)
  version = base.next_version(export_dir) if version is None else int(version)
  final = os.path.join(export_dir, str(version))
  inputs = [s.name for s in module.serve.input_signature]
  if module.pair is not None:
    inputs = {"serving_default": inputs, "pair": ["text_a", "text_b"]}
  metadata = {
      "export": {"ner": "tagging", "swag": "multiple_choice",
                 "features": "encoder_all_layers"}.get(what, what),
      "format": "litert", "file": MODEL_FILE, "quantize": quantize,
      "task": task_name or None, "task_name": task_name,
      "labels": None if labels is None else [str(l) for l in labels],
      "is_pair": bool(is_pair) if what == "classifier" else (True if what == "swag" else None),
      "is_regression": bool(is_regression), "multi_label": module.multi_label,
      "inputs": inputs,
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
    metadata.update(outputs=list(NER_OUTPUTS), doc_stride=int(doc_stride),
                    max_windows=int(max_windows),
                    offsets="start_char/end_char: Unicode code points, end exclusive")
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
  pre = None if what == "encoder" else preprocessor
  kwargs = dict(quantize=quantize, task_name=run.task_name, config=run.config,
                max_seq_length=run.max_seq_length)
  if what == "classifier":
    kwargs.update(is_pair=cfg["is_pair"], is_regression=cfg["is_regression"],
                  labels=None if cfg["is_regression"] else cfg["labels"],
                  multi_label=bool(cfg.get("multi_label")))
  elif what == "ner":
    # export_run's SavedModel: the training doc_stride, export_tagger's max_windows.
    kwargs.update(labels=cfg["labels"], doc_stride=int(cfg.get("doc_stride", 64)))
  elif what == "swag":
    kwargs.update(num_choices=int(cfg.get("num_choices") or 4))
  model = run.encoder if what in ("encoder", "features") else run.model
  return export_litert(what, model, pre, export_dir, version, **kwargs)


def print_summary(what: str, run, path: str) -> None:
  """The export tool's lines for a LiteRT export: the file, its size and
  quantization, the share of operators XNNPACK took in every graph of the
  file (:func:`bert_tf.export.litert_delegation.xnnpack_share`), and the
  tokenizer differences (:data:`TOKEN_DIFFERENCES`)."""
  meta = client.read_metadata(path)
  tflite = os.path.join(path, MODEL_FILE)
  share = litert_delegation.xnnpack_share(tflite)
  encoders = [g for g in share["graphs"] if g["matmuls"]]
  print("exported %s (%s, checkpoint %s) to %s (%.1f MB, quantize=%s); XNNPACK "
        "delegated %d of %d operators (%.0f%%) in %d partitions over the file's %d "
        "graphs; in the %d encoder graphs %d of %d (%.0f%%; left out: id and shape "
        "bookkeeping and each layer's query/key/value split); load with ai_edge_litert + "
        "tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS" % (
            what, run.task_name, run.checkpoint, tflite, os.path.getsize(tflite) / 1e6,
            meta.get("quantize"), share["delegated"], share["ops"],
            100.0 * share["delegated"] / max(1, share["ops"]), share["partitions"],
            len(share["graphs"]), len(encoders), sum(g["delegated"] for g in encoders),
            sum(g["ops"] for g in encoders),
            100.0 * sum(g["delegated"] for g in encoders)
            / max(1, sum(g["ops"] for g in encoders))))
  for note in meta.get("token_differences") or ():
    print("warning: the in-graph tokenizer differs from the original's: " + note)
