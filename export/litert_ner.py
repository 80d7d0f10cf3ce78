"""NER in LiteRT ops: the NER SavedModel's outputs from dense ops.

The ``litert`` format's tagger (:meth:`bert_tf.export.litert.LiteOps.tag_sentences`,
used by :class:`bert_tf.export.tagging.TaggingServing`): every output of the
SavedModel's ragged pipeline (:data:`bert_tf.export.tagging.OUTPUTS`), with
its dtypes and padding. The words are split on ``str.split()``'s whitespace
from the sentence's bytes (:func:`bert_tf.export.litert_text.split_words_bytes`),
cut out with ``ByteSplitByOffsets``, each word tokenized alone
(:func:`word_piece_ids`), the pieces read in doc-stride windows of
``max_seq_length`` as the SavedModel (:func:`piece_windows`; all windows of
the batch, [B * K, S], through one encoder call at the longest window's
width; K the batch's most, at most
``max_windows``), each word given the argmax at its first piece in its
max-context window (:func:`max_context_positions`: run_squad's float64
score compared as exact ranks), and entities found with conlleval's chunk
rules (:func:`entities`). Strings are padded with "" by gathering from
tables that end with an empty substring (LiteRT concatenates no strings).

Source: the original ``run_squad.py`` (``_check_is_max_context``, the
doc-stride loop), conlleval's ``endOfChunk`` / ``startOfChunk``.
"""

from __future__ import annotations

from typing import Dict, Sequence

import tensorflow as tf

from bert_tf.export import litert_text as lt
from bert_tf.modeling import tagging


def word_piece_ids(tokenizer, preprocessor, words: tf.Tensor, n_words: tf.Tensor) -> dict:
  """The pieces of N words, one run of ids per word (a word of no piece is
  ``[UNK]``, as :meth:`bert_tf.modeling.tagging.TaggingPreprocessor.word_pieces`).

  Args:
    tokenizer: ``FastBertTokenizer`` (:func:`bert_tf.export.litert_text.fast_tokenizer`).
    preprocessor: the :class:`BertPreprocessor` (special ids).
    words: string [N + 1] (the words, then "").
    n_words: int32 scalar N.

  Returns:
    dict: ``flat_ids`` int32 [T + 1] (every word's pieces in order, then
    padding), ``length`` int32 [N] (pieces per word, at least 1),
    ``start`` int32 [N] (each word's first piece in ``flat_ids``),
    ``total`` int32 T.
  """
  pieces = tokenizer.tokenize(words)                                      # [N + 1, (p)]
  plen = tf.cast(pieces.row_lengths(), tf.int32)[:n_words]
  length = tf.maximum(plen, 1)
  start = tf.cumsum(length, exclusive=True)                                # [N]
  total = tf.reduce_sum(length)
  rows = tf.cast(pieces.value_rowids(), tf.int32)
  k_in_word = tf.range(tf.size(pieces.flat_values)) - tf.gather(
      tf.cast(pieces.row_starts(), tf.int32), rows)
  pos = tf.gather(tf.concat([start, [0]], 0), rows) + k_in_word
  flat_ids = tf.scatter_nd(pos[:, tf.newaxis], pieces.flat_values + 1,
                           total[tf.newaxis]) - 1
  flat_ids = tf.where(flat_ids < 0, preprocessor.unk_id, flat_ids)
  return {"flat_ids": tf.concat([flat_ids, [preprocessor.pad_id]], 0),
          "length": length, "start": start, "total": total}


def piece_windows(preprocessor, pieces: dict, num_words: tf.Tensor, doc_stride: int,
                  max_windows: int) -> dict:
  """Each sentence's pieces in ``[CLS] window [SEP]`` windows of
  ``max_seq_length`` S, piece ``k * min(S - 2, doc_stride)`` starting window
  k (:meth:`bert_tf.modeling.tagging.TaggingPreprocessor.windows`).

  Args:
    preprocessor: the :class:`BertPreprocessor`; pieces: :func:`word_piece_ids`;
    num_words: int32 [B]; doc_stride, max_windows: the spec's.

  Returns:
    dict: ``input_ids``, ``input_mask``, ``segment_ids`` int32 [B * K, S];
    ``window_length`` int32 [B, K] (pieces per window), ``num_windows``
    int32 [B], ``k_max`` K, ``sentence_start`` int32 [B] (first piece),
    ``is_word`` bool [B, W], ``step`` the stride in pieces.
  """
  seq = preprocessor.max_seq_length
  m = seq - 2
  step = min(m, int(doc_stride))
  len_d, is_word = lt.dense_rows(pieces["length"], num_words, 0)          # [B, W]
  n_pieces = tf.reduce_sum(len_d, 1)                                       # [B]
  sent_start = tf.cumsum(n_pieces, exclusive=True)
  num_win = tf.where(n_pieces > 0, 1 + tf.maximum(0, (n_pieces - m + step - 1) // step), 0)
  num_win = tf.minimum(num_win, int(max_windows))
  k_max = tf.maximum(1, tf.reduce_max(tf.concat([num_win, [0]], 0)))
  kk = tf.range(k_max)[tf.newaxis, :]                                      # [1, K]
  wlen = tf.where(kk < num_win[:, tf.newaxis],
                  tf.clip_by_value(n_pieces[:, tf.newaxis] - kk * step, 0, m), 0)  # [B, K]
  wlen3 = tf.expand_dims(wlen, -1)
  t = tf.reshape(tf.range(seq), [1, 1, seq]) - 1                          # [1, 1, S]
  inside = tf.logical_and(t >= 0, t < wlen3)
  src = tf.reshape(sent_start, [-1, 1, 1]) + tf.expand_dims(kk, -1) * step + t
  ids = tf.gather(pieces["flat_ids"], tf.where(inside, src, pieces["total"]))
  ids = tf.where(tf.equal(t, wlen3), preprocessor.sep_id, ids)
  ids = tf.where(t < 0, preprocessor.cls_id, ids)
  mask = tf.cast(t <= wlen3, tf.int32)
  flat = lambda x: tf.reshape(x, [-1, seq])  # pylint: disable=unnecessary-lambda-assignment
  return {"input_ids": flat(ids), "input_mask": flat(mask),
          "segment_ids": flat(tf.zeros_like(ids)), "window_length": wlen,
          "num_windows": num_win, "k_max": k_max, "sentence_start": sent_start,
          "is_word": is_word, "step": step}


def max_context_positions(win: dict, word_start: tf.Tensor, num_words: tf.Tensor,
                          seq: int) -> tuple:
  """Where each word's first piece is read: in its max-context window (the
  first window on ties), as a position of the windows' flat [B * K * S]
  outputs.

  Args:
    win: :func:`piece_windows`; word_start: int32 [N] (first piece of each
    word); num_words: int32 [B]; seq: S.

  Returns:
    ``(position int32 [B, W], covered bool [B, W])``: covered is False for
    padding and for words beyond ``max_windows`` windows.
  """
  m, step, k_max = seq - 2, win["step"], win["k_max"]
  wlen, num_win = win["window_length"], win["num_windows"]
  first, _ = lt.dense_rows(word_start, num_words, 0)
  q = first - win["sentence_start"][:, tf.newaxis]                         # [B, W]
  batch = tf.shape(num_words)[0]
  ranks = tf.constant(lt.max_context_ranks(m))
  best_rank, best_pos = None, None
  for c in range(-(-m // step)):
    k = q // step - (-(-m // step) - 1) + c
    i = q - k * step
    wl = tf.gather(wlen, tf.clip_by_value(k, 0, k_max - 1), batch_dims=1)
    ok = (win["is_word"] & (k >= 0) & (k < num_win[:, tf.newaxis]) & (i >= 0) & (i < wl))
    rank = tf.where(ok, tf.gather(ranks, tf.clip_by_value(
        tf.minimum(i, wl - 1 - i), 0, m // 2) * (m + 1) + wl), -1)
    at = (tf.range(batch)[:, tf.newaxis] * k_max + k) * seq + i + 1
    if best_rank is None:
      best_rank, best_pos = rank, at
    else:
      # Strictly better only: the earlier window keeps a tie.
      better = rank > best_rank
      best_rank, best_pos = tf.maximum(rank, best_rank), tf.where(better, at, best_pos)
  return best_pos, best_rank >= 0


def tag_sentences(module, ops, sentence: tf.Tensor) -> Dict[str, tf.Tensor]:
  """The NER SavedModel's computation (:mod:`bert_tf.export.tagging`) in
  LiteRT ops.

  Args:
    module: the :class:`bert_tf.export.tagging.TaggingServing` (its model,
      ``tokenizer``, ``labels``, spec's ``doc_stride`` / ``max_windows``).
    ops: the format's ops (:class:`bert_tf.export.litert.LiteOps`: the
      own-length model call).
    sentence: string [B], valid UTF-8 (the client refuses other: the
      offsets are counted on valid UTF-8).

  Returns:
    the SavedModel's outputs, padded to the batch's most words W /
    entities E: ``words``, ``tags`` string [B, W] (""), ``num_words`` int32
    [B], ``word_start_char`` / ``word_end_char`` int32 [B, W] (code points,
    end exclusive), ``entity_type`` / ``entity_text`` string [B, E],
    ``entity_start_char`` / ``entity_end_char`` int32 [B, E],
    ``num_entities`` int32 [B], ``truncated`` bool [B] (a word beyond
    ``max_windows`` windows, given ``O``).
  """
  pre, labels = module.preprocessor, module.labels
  seq = pre.max_seq_length
  o_id = labels.index("O")
  w = lt.split_words_bytes(sentence)
  num_words = w["num_words"]
  words = lt.substrings(sentence, num_words, w["start_byte"], w["end_byte"])  # [N + 1]
  pieces = word_piece_ids(module.tokenizer, pre, words, tf.shape(w["row"])[0])
  win = piece_windows(pre, pieces, num_words, module.spec.doc_stride,
                      module.spec.max_windows)
  # The windows' tags [B * K, S] from the model at the longest window's
  # width (padding positions are never read).
  piece_tags = ops.own_length(
      module, {k: win[k] for k in ("input_ids", "input_mask", "segment_ids")},
      post=lambda logits, width: tf.pad(tf.argmax(logits, axis=-1, output_type=tf.int32),
                                        [[0, 0], [0, seq - width]]))
  position, covered = max_context_positions(win, pieces["start"], num_words, seq)
  read = tf.gather(tf.reshape(piece_tags, [-1]), tf.where(covered, position, 0))
  is_word = win["is_word"]
  tag_ids = tf.where(covered, read, o_id)
  tags = tf.gather(tf.constant(list(labels) + [""]), tf.where(is_word, tag_ids, len(labels)))
  out = {"words": tf.gather(words, lt.pad_index(num_words)[0]),
         "tags": tags, "num_words": num_words,
         "truncated": tf.reduce_any(is_word & ~covered, 1),
         "word_start_char": lt.dense_rows(w["start_char"], num_words, 0)[0],
         "word_end_char": lt.dense_rows(w["end_char"], num_words, 0)[0]}
  out.update(entities(labels, sentence, w, tf.where(is_word, tag_ids, o_id)))
  return out


def entities(labels: Sequence[str], sentence, w: dict, tag_ids) -> dict:
  """The NER SavedModel's entity outputs, with conlleval's chunk rules
  (:func:`bert_tf.modeling.tagging.entity_spans` in dense ops: each entity
  ends before the first chunk end after its start).

  Args:
    labels: the tags in id order (with ``O``); sentence: string [B];
    w: :func:`bert_tf.export.litert_text.split_words_bytes`' dict; tag_ids: int32 [B, W], ``O`` after
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
  o_col = lt.column(tag_ids) + o_id
  dense = tf.concat([tag_ids, o_col], 1)                                    # [B, W+1]
  prev = tf.concat([o_col, dense], 1)[:, :-1]
  cur_p, prev_p = tf.gather(prefix_t, dense), tf.gather(prefix_t, prev)
  cur_t, prev_t = tf.gather(type_t, dense), tf.gather(type_t, prev)
  ends, starts = tagging.chunk_boundaries(prev_p, cur_p, prev_t, cur_t)
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
  idx, _ = lt.pad_index(num_e)
  text = lt.substrings(sentence, num_e, tf.gather(w["start_byte"], g_first),
                    tf.gather(w["end_byte"], g_last))
  type_id = tf.gather_nd(cur_t, start_pos)
  return {
      "entity_type": tf.gather(tf.constant(list(types) + [""]),
                               lt.dense_rows(type_id, num_e, len(types))[0]),
      "entity_text": tf.gather(text, idx),
      "entity_start_char": lt.dense_rows(tf.gather(w["start_char"], g_first), num_e, 0)[0],
      "entity_end_char": lt.dense_rows(tf.gather(w["end_char"], g_last), num_e, 0)[0],
      "num_entities": num_e}
