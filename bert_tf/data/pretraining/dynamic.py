"""Dynamic pretraining data: sentence pairs and masks made on the fly in tf.data.

Two stages:

1. :func:`write_documents` (``tools/create_pretraining_documents.py``)
   tokenizes the corpus ONCE (the exact memoized tokenizer,
   :class:`bert_tf.data.pretraining.tokens.MemoTokenizer`: the reference
   tokenizer's ids) and writes one ``tf.train.Example`` per document: ``token_ids`` (int64, every sentence's
   word-piece ids concatenated) and ``sentence_lengths`` (int64, one entry per
   sentence; they sum to ``len(token_ids)``). Documents follow the original
   ``create_pretraining_data.py``: a blank line starts one, a line that
   tokenizes to nothing is dropped, documents continue across input files
   (:func:`bert_tf.data.pretraining.documents.iter_documents`). Reading is
   streamed: memory holds one document, not the corpus.
2. :func:`dynamic_pretraining_dataset` builds ``[CLS] A [SEP] B [SEP]`` pairs
   and masked-LM targets from those records inside the tf.data graph, fresh
   for every epoch, and yields exactly the batches of
   :func:`bert_tf.data.pretraining.input.pretraining_dataset`.

What matches the original (google-research/bert ``create_pretraining_data.py``),
rule for rule:

* per document and pass, one target length: ``max_seq_length - 3``, or with
  probability ``short_seq_prob`` uniform in ``[2, max_seq_length - 3]``;
* a chunk gathers whole sentences until its length reaches the target or the
  document ends; ``a_end`` uniform in ``[1, len(chunk) - 1]`` (1 for a
  one-sentence chunk); B is a random document's text (label 1) when the chunk
  has one sentence or with probability 0.5, else the rest of the chunk
  (label 0, IsNext); a random B starts at a uniform sentence of the other
  document and takes sentences until it holds ``target - len(A)`` tokens; the
  chunk's unused sentences are put back (the next chunk starts after A);
* ``truncate_seq_pair``: the longer segment (ties: B) loses tokens until the
  pair fits ``max_seq_length - 3``; each removal is from the front or the
  back with probability 1/2. Computed in closed form: the final lengths are
  the original's, and the number removed from the front of a segment is
  Binomial(removed, 1/2), the same distribution as the original's sequence
  of coin flips;
* masking: ``num_to_predict = min(max_predictions_per_seq, max(1,
  round(len(tokens) * masked_lm_prob)))`` (length with the specials, round
  half to even as Python 3); candidates are every position but
  ``[CLS]``/``[SEP]``; with whole-word masking a ``##`` piece joins the
  previous candidate group (even across ``[SEP]``, as the original);
  groups are taken in a uniformly random order, skipping a group that would
  overflow ``num_to_predict``; per masked token 80% ``[MASK]``, 10% a
  uniformly random vocab id (any entry, as the original), 10% unchanged;
  positions ascending; padding id 0, weights 1.0 for real predictions.

Deviations (forced by streaming; none changes the statistics tested):

* the random-next B comes from one of ``NUM_PARTNER_DOCUMENTS`` (3)
  documents that follow the current one in the (shuffled) stream, chosen
  uniformly per instance, instead of from any document of the corpus; the
  original's "not the same document" retry becomes: the partners are other
  stream positions (with fewer than 4 documents in the corpus, or across an
  epoch boundary, a partner can be the document itself, as the original
  also allows after 10 failed draws);
* documents and instances are shuffled with finite buffers
  (``DOCUMENT_SHUFFLE_BUFFER``, ``INSTANCE_SHUFFLE_BUFFER``), not globally;
  there is no ``dupe_factor``: every epoch is a new pass with new targets,
  splits, random-next choices and masks;
* ``nsp=False`` (the paper's No-NSP ablation): B is always the actual
  continuation (label 0); a one-sentence chunk is split at a uniformly random
  token (B is empty when that sentence is one token long).

Randomness: only stateless ops (``tf.random.stateless_*``) seeded from
``(seed, element index)``, plus seeded ``shuffle``. The stream is therefore a
pure function of the seed: identical across runs, independent of
``num_parallel_calls`` scheduling, and the tf.data iterator state (saved in a
training checkpoint) restores it exactly. tensorflow-text does the packing
(``combine_segments``), masking (``mask_language_model`` with a stateless
``ItemSelector`` and ``MaskValuesChooser``: tensorflow-text's own
``RandomItemSelector`` selects ``ceil(rate * candidates)`` with stateful
``tf.random.shuffle`` and cannot do the original's count or whole-word
groups) and padding (``pad_model_inputs``).
"""

import logging
import random
from typing import Callable, List, Optional, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_text as text

from bert_tf import errors
from bert_tf import tokenization
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import records
from bert_tf.data.pretraining import tokens

InputError = errors.InputError

NUM_PARTNER_DOCUMENTS = 3
DOCUMENT_SHUFFLE_BUFFER = 1000
INSTANCE_SHUFFLE_BUFFER = 10000

DOCUMENT_FEATURES = records.DOCUMENT_FEATURES


def _document_spec():
  return {"token_ids": tf.io.RaggedFeature(tf.int64),
          "sentence_lengths": tf.io.RaggedFeature(tf.int64)}


# --------------------------------------------------------------------------
# Stage 1: tokenized documents.


def document_to_example(document: List[List[int]]) -> bytes:
  """One document (list of id lists) -> serialized ``tf.train.Example`` (bytes):
  :func:`bert_tf.data.pretraining.records.encode_document` (int64
  ``token_ids``, ``sentence_lengths``)."""
  return records.encode_document(document)


def write_documents(input_file: str, output_file: str, vocab_file: str,
                    do_lower_case: bool = True,
                    progress: Optional[Callable[[int, int], None]] = None,
                    preserve_unused_tokens: bool = False
                    ) -> Tuple[int, int, List[str]]:
  """Tokenizes a corpus once into TFRecords of documents (stage 1).

  Args:
    input_file: comma-separated globs of raw text (one sentence per line, a
      blank line between documents; the original's input format).
    output_file: comma-separated output paths; documents are written
      round-robin over them (shards). Every file is written under a temporary
      name and renamed only when all are whole.
    vocab_file: WordPiece vocab (one token per line).
    do_lower_case: lower-case and strip accents (uncased vocab).
    progress: optional callable ``(documents_written, tokens_written)``.
    preserve_unused_tokens: the original's ``--preserve_unused_tokens``
      (vocab entries ``[unusedN]`` in the text stay whole tokens).

  Returns:
    ``(num_documents, num_tokens, output_files)``.

  Raises:
    InputError: empty/unmatched glob, unreadable input, no document in the
      corpus, empty ``output_file``.
    tokenization.VocabError: bad vocab file (or one without ``[UNK] [CLS]
      [SEP] [MASK]``, which dynamic masking needs).
  """
  tokenizer = tokenization.FullTokenizer(
      vocab_file, do_lower_case, preserve_unused_tokens=preserve_unused_tokens)
  tokenization.check_vocab(tokenizer.vocab, vocab_file)  # masking needs [MASK]
  tokenization.warn_if_case_mismatch(tokenizer.vocab, do_lower_case, vocab_file)
  memo = tokens.MemoTokenizer(tokenizer)
  input_files = documents.expand_input_files(input_file)
  output_files = [p.strip() for p in output_file.split(",") if p.strip()]
  if not output_files:
    raise InputError("--output_file is empty")
  num_tokens = 0

  def serialized():
    nonlocal num_tokens
    num_docs = 0
    for doc in documents.iter_documents(input_files, memo.tokenize_to_ids):
      yield document_to_example(doc)
      num_docs += 1
      num_tokens += sum(len(s) for s in doc)
      if progress is not None:
        progress(num_docs, num_tokens)
    if not num_docs:  # raised inside the writer: no file is left behind
      raise InputError(
          "--input_file %r holds no text that tokenizes to anything" % input_file)

  num_docs = records.write_records(serialized(), output_files)
  return num_docs, num_tokens, output_files


def _check_document_file(path, vocab_size, vocab_file):
  """Reads the first record of ``path``; raises InputError naming the file."""
  try:
    first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
  except (tf.errors.OpError, OSError) as e:
    raise InputError(
        "%s: not a readable TFRecord file: %s" % (path, e)) from e
  if first is None:
    return
  ex = tf.train.Example()
  try:
    ex.ParseFromString(first.numpy())
  except Exception as e:  # protobuf DecodeError
    raise InputError(
        "%s: first record is not a tf.train.Example: %s" % (path, e)) from e
  feats = ex.features.feature
  if not all(k in feats for k in DOCUMENT_FEATURES):
    raise InputError(
        "%s: not a tokenized-document file (features %s, expected %s); write "
        "it with tools/create_pretraining_documents.py" %
        (path, sorted(feats), list(DOCUMENT_FEATURES)))
  ids = feats["token_ids"].int64_list.value
  if ids and max(ids) >= vocab_size:
    raise InputError(
        "%s: token id %d >= vocab size %d of %s: the documents were tokenized "
        "with another vocab" % (path, max(ids), vocab_size, vocab_file))


# --------------------------------------------------------------------------
# Stage 2: pairs and masks in tf.data.


def truncated_lengths(len_a, len_b, max_num_tokens):
  """Final segment lengths of the original ``truncate_seq_pair`` (vectorized).

  The original removes one token at a time from the longer segment (ties:
  B) until ``len_a + len_b <= max_num_tokens``.

  Args:
    len_a, len_b: int tensors of the same shape (tokens).
    max_num_tokens: int, ``max_seq_length - 3``.

  Returns:
    ``(new_len_a, new_len_b)``, same shape and dtype.
  """
  half_a = (max_num_tokens + 1) // 2  # ties trim B, so A keeps the odd token
  over = len_a + len_b > max_num_tokens
  new_a = tf.minimum(len_a, tf.maximum(max_num_tokens - len_b,
                                       tf.cast(half_a, len_a.dtype)))
  new_a = tf.where(over, new_a, len_a)
  new_b = tf.where(over, max_num_tokens - new_a, len_b)
  return new_a, new_b


def _seed_pair(seed, *data):
  """Stateless seed [2] int64 from a base seed [2] and int scalars."""
  s = seed
  for d in data:
    s = tf.random.experimental.stateless_fold_in(s, tf.cast(d, tf.int64))
  return s


def _uniform_int(u, n):
  """Maps uniform [0,1) floats to ints in [0, n) (n >= 1)."""
  n = tf.cast(n, tf.int64)
  return tf.minimum(tf.cast(tf.floor(u * tf.cast(n, u.dtype)), tf.int64), n - 1)


def _make_instances(serialized, seed, max_seq_length, short_seq_prob, nsp):
  """Instances of one source document (original chunking rules).

  Args:
    serialized: string [1 + NUM_PARTNER_DOCUMENTS]: the source document then
      its partner documents (random-next candidates).
    seed: int64 [2], this document's stateless seed.

  Returns:
    dict: ``tokens_a``, ``tokens_b`` int64 RaggedTensor [K, (len)],
    ``next_sentence_labels`` int64 [K].
  """
  docs = tf.io.parse_example(serialized, _document_spec())
  tokens = docs["token_ids"].values
  lengths = docs["sentence_lengths"]
  sent_rows = tf.cast(lengths.row_splits, tf.int64)   # doc d: sentences [sr[d], sr[d+1])
  gcum = tf.concat([[0], tf.cumsum(lengths.values)], 0)  # sentence s starts at gcum[s]
  check = tf.debugging.assert_equal(
      gcum[-1], tf.size(tokens, out_type=tf.int64),
      message="corrupt document record: sentence_lengths do not sum to len(token_ids)")
  with tf.control_dependencies([check]):
    gcum = tf.identity(gcum)
  max_num_tokens = max_seq_length - 3
  n_own = sent_rows[1]
  u = tf.random.stateless_uniform([2], _seed_pair(seed, 0), dtype=tf.float64)
  target = tf.where(u[0] < short_seq_prob,
                    2 + _uniform_int(u[1], max_num_tokens - 1),
                    tf.constant(max_num_tokens, tf.int64))

  def chunk_end(start, want, limit):
    # First e > start with gcum[e] - gcum[start] >= want, else limit.
    e = tf.searchsorted(gcum, tf.reshape(gcum[start] + want, [1]), side="left")[0]
    return tf.minimum(tf.maximum(tf.cast(e, tf.int64), start + 1), limit)

  def body(i, k, a0, a1, b0, b1, lab):
    r = tf.random.stateless_uniform([4], _seed_pair(seed, 1, k), dtype=tf.float64)
    e = chunk_end(i, target, n_own)
    n_chunk = e - i
    a_end = tf.where(n_chunk >= 2, i + 1 + _uniform_int(r[0], n_chunk - 1), i + 1)
    if nsp:
      is_random = tf.logical_or(n_chunk == 1, r[1] < 0.5)
    else:
      is_random = tf.constant(False)
    ta0, ta1 = gcum[i], gcum[a_end]
    # Random next: a partner document, a uniform start sentence in it.
    part = 1 + _uniform_int(r[2], NUM_PARTNER_DOCUMENTS)
    p_first, p_end = sent_rows[part], sent_rows[part + 1]
    start = p_first + _uniform_int(r[3], p_end - p_first)
    b_end = chunk_end(start, target - (ta1 - ta0), p_end)
    rb0 = gcum[start]
    rb1 = gcum[b_end]
    # Actual next: the rest of the chunk (No-NSP: split a lone sentence).
    nb0, nb1 = gcum[a_end], gcum[e]
    if not nsp:
      seg_len = ta1 - ta0
      split = ta0 + tf.where(seg_len >= 2, 1 + _uniform_int(r[2], seg_len - 1),
                             seg_len)
      lone = n_chunk == 1
      ta1 = tf.where(lone, split, ta1)
      nb0 = tf.where(lone, split, nb0)
    tb0 = tf.where(is_random, rb0, nb0)
    tb1 = tf.where(is_random, rb1, nb1)
    next_i = tf.where(is_random, a_end, e)
    return (next_i, k + 1, a0.write(tf.cast(k, tf.int32), ta0),
            a1.write(tf.cast(k, tf.int32), ta1), b0.write(tf.cast(k, tf.int32), tb0),
            b1.write(tf.cast(k, tf.int32), tb1),
            lab.write(tf.cast(k, tf.int32), tf.cast(is_random, tf.int64)))

  arrays = [tf.TensorArray(tf.int64, size=0, dynamic_size=True) for _ in range(5)]
  _, _, a0, a1, b0, b1, lab = tf.while_loop(
      lambda i, *_: i < n_own, body,
      [tf.constant(0, tf.int64), tf.constant(0, tf.int64)] + arrays)
  a0, a1, b0, b1, lab = [t.stack() for t in (a0, a1, b0, b1, lab)]
  la, lb = a1 - a0, b1 - b0
  na, nb = truncated_lengths(la, lb, max_num_tokens)
  k = tf.shape(la)[0]
  fronts = tf.random.stateless_binomial(
      [2, k], _seed_pair(seed, 2),
      counts=tf.cast(tf.stack([la - na, lb - nb]), tf.float64),
      probs=tf.constant(0.5, tf.float64), output_dtype=tf.int64)
  a0 = a0 + fronts[0]
  b0 = b0 + fronts[1]
  tokens_a = tf.gather(tokens, tf.ragged.range(a0, a0 + na))
  tokens_b = tf.gather(tokens, tf.ragged.range(b0, b0 + nb))
  return {"tokens_a": tokens_a, "tokens_b": tokens_b,
          "next_sentence_labels": lab}


class OriginalCountSelector(text.RandomItemSelector):
  """Stateless ``RandomItemSelector`` with the original's counts and word groups.

  Per row (``input_ids`` int RaggedTensor [B, (T)] packed with specials):
  ``num_to_predict = min(max_predictions_per_seq, max(1, round(T *
  masked_lm_prob)))``; candidate groups (single positions, or whole words
  when ``whole_word`` is on: a ``##`` piece joins the previous candidate) in
  a random order from ``tf.random.stateless_uniform(seed)``, greedily taken,
  skipping one that would overflow. Source: ``create_masked_lm_predictions``
  in the original ``create_pretraining_data.py``.

  Args:
    seed: int [2] stateless seed (one per batch).
    masked_lm_prob, max_predictions_per_seq: as the original's flags.
    unselectable_ids: ids never selected (``[CLS]``, ``[SEP]``, ``[PAD]``).
    is_continuation: bool [V] (``##`` pieces) for whole-word masking, or None.
  """

  def __init__(self, seed, masked_lm_prob, max_predictions_per_seq,
               unselectable_ids, is_continuation=None):
    super().__init__(max_selections_per_batch=int(max_predictions_per_seq),
                     selection_rate=float(masked_lm_prob),
                     unselectable_ids=list(unselectable_ids))
    self._seed = seed
    self._prob = float(masked_lm_prob)
    self._max = int(max_predictions_per_seq)
    self._is_cont = is_continuation

  def get_selection_mask(self, input_ids, axis=1):
    """Bool RaggedTensor shaped like ``input_ids``: the positions to predict."""
    if axis != 1:
      raise ValueError("OriginalCountSelector works on axis 1, got %d" % axis)
    selectable_rt = self.get_selectable(input_ids, axis)
    selectable = selectable_rt.to_tensor(False)            # [B, T]
    ids = input_ids.to_tensor(0)
    batch = tf.shape(ids, out_type=tf.int64)[0]
    width = tf.shape(ids, out_type=tf.int64)[1]
    row_len = input_ids.row_lengths()
    num_to_predict = tf.minimum(
        tf.cast(self._max, tf.int64),
        tf.maximum(tf.constant(1, tf.int64), tf.cast(tf.round(
            tf.cast(row_len, tf.float64) * self._prob), tf.int64)))
    if self._is_cont is not None:
      cont = tf.gather(self._is_cont, ids)
      seen = tf.cumsum(tf.cast(selectable, tf.int64), axis=1, exclusive=True) > 0
      starts = selectable & ~(cont & seen)
    else:
      starts = selectable
    group = tf.cumsum(tf.cast(starts, tf.int64), axis=1) - 1    # [B, T]
    group = tf.where(selectable, group, width)                  # dump slot
    flat_group = group + tf.range(batch)[:, None] * (width + 1)
    sizes = tf.math.unsorted_segment_sum(
        tf.reshape(tf.cast(selectable, tf.int64), [-1]),
        tf.reshape(flat_group, [-1]),
        batch * (width + 1))
    sizes = tf.reshape(sizes, [batch, width + 1])[:, :width]    # [B, G]
    keys = tf.random.stateless_uniform(tf.stack([batch, width]), self._seed)
    keys = tf.where(sizes > 0, keys, 2.0)
    order = tf.argsort(keys, axis=1, stable=True)
    sorted_sizes = tf.gather(sizes, order, batch_dims=1)
    if self._is_cont is None:
      take_sorted = (tf.range(width)[None, :] < num_to_predict[:, None]) & (
          sorted_sizes > 0)
    else:
      def step(count, size):
        take = (size > 0) & (count + size <= num_to_predict)
        return count + tf.where(take, size, 0)
      counts = tf.scan(step, tf.transpose(sorted_sizes),
                       initializer=tf.zeros([batch], tf.int64))
      counts = tf.transpose(counts)                              # after each
      before = tf.concat([tf.zeros([batch, 1], tf.int64), counts[:, :-1]], 1)
      take_sorted = counts > before
    inverse = tf.argsort(order, axis=1, stable=True)
    take_group = tf.gather(take_sorted, inverse, batch_dims=1)   # [B, G]
    take_group = tf.concat([take_group, tf.zeros([batch, 1], tf.bool)], 1)
    chosen = tf.gather(take_group, group, batch_dims=1) & selectable
    return tf.RaggedTensor.from_tensor(chosen, lengths=row_len)


class StatelessMaskValuesChooser(text.MaskValuesChooser):
  """tensorflow-text's 80/10/10 chooser with stateless randomness.

  Per selected token: ``u < mask_token_rate`` -> ``mask_token``; ``u <
  mask_token_rate + random_token_rate`` -> uniform id in ``[0, vocab_size)``
  (any entry, as the original's ``vocab_words[randint]``); else unchanged.

  Args:
    seed: int [2] stateless seed (one per batch).
    vocab_size, mask_token, mask_token_rate, random_token_rate: as
      ``tensorflow_text.MaskValuesChooser``.
  """

  def __init__(self, seed, vocab_size, mask_token, mask_token_rate=0.8,
               random_token_rate=0.1):
    super().__init__(vocab_size, mask_token, mask_token_rate, random_token_rate)
    self._seed = seed

  def get_mask_values(self, masked_lm_ids):
    """Replacement ids, RaggedTensor shaped and typed like ``masked_lm_ids``."""
    flat = masked_lm_ids.flat_values
    shape = tf.shape(flat)
    u = tf.random.stateless_uniform(shape, _seed_pair(self._seed, 0))
    rand = tf.random.stateless_uniform(shape, _seed_pair(self._seed, 1), minval=0,
                                       maxval=self.vocab_size, dtype=flat.dtype)
    mask_rate = self._mask_token_rate
    values = tf.where(u < mask_rate, tf.cast(self.mask_token, flat.dtype),
                      tf.where(u < mask_rate + self.random_token_rate, rand, flat))
    return masked_lm_ids.with_flat_values(values)


def dynamic_pretraining_dataset(input_file, vocab_file, batch_size, max_seq_length,
                                max_predictions_per_seq, masked_lm_prob=0.15,
                                short_seq_prob=0.1, do_whole_word_mask=False,
                                nsp=True, seed=None, is_training=True,
                                input_context=None):
  """Masked-LM / next-sentence batches made on the fly from document TFRecords.

  Args:
    input_file: comma-separated globs of files written by
      :func:`write_documents` (``tools/create_pretraining_documents.py``).
    vocab_file: the vocab the documents were tokenized with (special ids,
      vocab size for random replacements, ``##`` pieces for whole words).
    batch_size: per-replica batch size (examples).
    max_seq_length: S, tokens per example with the specials (>= 5).
    max_predictions_per_seq: P, the cap on masked positions (>= 1).
    masked_lm_prob: fraction of the sequence to predict (0.15).
    short_seq_prob: probability of a shorter target length (0.1).
    do_whole_word_mask: mask every piece of a word together.
    nsp: False for the No-NSP ablation (B is always the real continuation,
      every label 0).
    seed: int; the whole stream (pairs, masks, order) is a function of it.
      None draws one at random.
    is_training: shuffle, repeat forever (new pairs and masks each epoch),
      drop the last partial batch; else one ordered pass, deterministic
      (seed 0 when None), the last batch may be short.
    input_context: ``tf.distribute.InputContext``: shard files per input
      pipeline (documents when there are fewer files than pipelines); the
      seed is varied per pipeline.

  Returns:
    ``tf.data.Dataset`` of dicts, the same as
    :func:`bert_tf.data.pretraining.input.pretraining_dataset`: int32
    ``input_ids``, ``input_mask``, ``segment_ids`` [B, S]; int32
    ``masked_lm_positions``, ``masked_lm_ids`` and float32
    ``masked_lm_weights`` [B, P]; int32 ``next_sentence_labels`` [B, 1]
    (0 = IsNext, 1 = random next).

  Raises:
    InputError: a glob matches no file (names it), a file is
      not a document file or was tokenized with a larger vocab (names it),
      bad sizes or probabilities (names the argument).
    tokenization.VocabError: bad vocab file.
  """
  if max_seq_length < 5:
    raise InputError(
        "max_seq_length must be at least 5, got %d" % max_seq_length)
  if max_predictions_per_seq < 1:
    raise InputError(
        "max_predictions_per_seq must be >= 1, got %d" % max_predictions_per_seq)
  if not 0.0 < masked_lm_prob < 1.0:
    raise InputError(
        "masked_lm_prob must be in (0, 1), got %r" % masked_lm_prob)
  if not 0.0 <= short_seq_prob <= 1.0:
    raise InputError(
        "short_seq_prob must be in [0, 1], got %r" % short_seq_prob)
  if batch_size < 1:
    raise InputError("batch_size must be >= 1, got %d" % batch_size)
  files = documents.expand_input_files(input_file)
  vocab = tokenization.load_vocab(vocab_file)
  tokenization.check_vocab(vocab, vocab_file)
  vocab_size = len(vocab)
  for path in files:
    _check_document_file(path, vocab_size, vocab_file)
  cls_id, sep_id, mask_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
  pad_id = vocab.get("[PAD]", 0)
  is_cont = None
  if do_whole_word_mask:
    flags = np.zeros([vocab_size], bool)
    for tok, i in vocab.items():
      flags[i] = tok.startswith("##")
    is_cont = tf.constant(flags)

  if seed is None:
    seed = 0 if not is_training else random.SystemRandom().randrange(2**31)
  pipeline_id = 0
  num_pipelines = 1
  if input_context is not None:
    pipeline_id = input_context.input_pipeline_id
    num_pipelines = input_context.num_input_pipelines
  base = tf.constant([int(seed), pipeline_id], tf.int64)
  doc_base = _seed_pair(base, 11)
  mask_base = _seed_pair(base, 12)
  shuffle_seed = int(seed) * 1000003 + pipeline_id

  ds = tf.data.Dataset.from_tensor_slices(tf.constant(files))
  shard_docs = False
  if num_pipelines > 1:
    if len(files) >= num_pipelines:
      ds = ds.shard(num_pipelines, pipeline_id)
    else:
      shard_docs = True
  if is_training:
    ds = ds.shuffle(len(files), seed=shuffle_seed, reshuffle_each_iteration=True)
  ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if shard_docs:
    ds = ds.shard(num_pipelines, pipeline_id)
  k = NUM_PARTNER_DOCUMENTS
  if is_training:
    ds = ds.shuffle(DOCUMENT_SHUFFLE_BUFFER, seed=shuffle_seed + 1,
                    reshuffle_each_iteration=True).repeat()
  else:
    # One pass: the first documents again at the end, as the last ones' partners.
    ds = ds.concatenate(ds.repeat().take(k))

  # Window of k+1 consecutive documents: the oldest is the source, the other
  # k its random-next partners.
  # The map functions use no Python control flow on tensors: autograph off
  # (its conversion of the loop and of tensorflow-text is slow to trace).
  plain = tf.autograph.experimental.do_not_convert

  @plain
  def window(state, record):
    count, docs = state
    docs = tf.concat([docs[1:], [record]], 0)
    return (count + 1, docs), (count >= k, docs)

  ds = ds.scan((tf.constant(0, tf.int64), tf.fill([k + 1], "")), window)
  ds = ds.filter(plain(lambda is_full, _: is_full))
  ds = ds.map(plain(lambda _, window_docs: window_docs))
  ds = ds.enumerate()

  @plain
  def instances(index, docs):
    return _make_instances(docs, _seed_pair(doc_base, index), max_seq_length,
                           short_seq_prob, nsp)

  ds = ds.map(instances, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  ds = ds.unbatch()
  if is_training:
    ds = ds.shuffle(INSTANCE_SHUFFLE_BUFFER, seed=shuffle_seed + 2,
                    reshuffle_each_iteration=True)
  ds = ds.ragged_batch(batch_size, drop_remainder=is_training)
  ds = ds.enumerate()

  @plain
  def mask_and_pack(index, batch):
    batch_seed = _seed_pair(mask_base, index)
    ids, segment_ids = text.combine_segments(
        [batch["tokens_a"], batch["tokens_b"]], start_of_sequence_id=cls_id,
        end_of_segment_id=sep_id)
    selector = OriginalCountSelector(
        _seed_pair(batch_seed, 0), masked_lm_prob, max_predictions_per_seq,
        [cls_id, sep_id, pad_id], is_cont)
    chooser = StatelessMaskValuesChooser(_seed_pair(batch_seed, 1), vocab_size,
                                         mask_id)
    masked, positions, labels = text.mask_language_model(ids, selector, chooser)
    input_ids, input_mask = text.pad_model_inputs(masked, max_seq_length,
                                                  pad_value=pad_id)
    segment_ids, _ = text.pad_model_inputs(segment_ids, max_seq_length)
    positions, weights = text.pad_model_inputs(positions, max_predictions_per_seq)
    labels, _ = text.pad_model_inputs(labels, max_predictions_per_seq)
    return {
        "input_ids": tf.cast(input_ids, tf.int32),
        "input_mask": tf.cast(input_mask, tf.int32),
        "segment_ids": tf.cast(segment_ids, tf.int32),
        "masked_lm_positions": tf.cast(positions, tf.int32),
        "masked_lm_ids": tf.cast(labels, tf.int32),
        "masked_lm_weights": tf.cast(weights, tf.float32),
        "next_sentence_labels": tf.cast(
            tf.reshape(batch["next_sentence_labels"], [-1, 1]), tf.int32),
    }

  @plain
  def static_batch(features):
    # drop_remainder: the batch dimension is static, as the static pipeline's.
    return {k: tf.ensure_shape(v, [batch_size] + v.shape[1:].as_list())
            for k, v in features.items()}

  ds = ds.map(mask_and_pack, num_parallel_calls=tf.data.AUTOTUNE,
              deterministic=True)
  if is_training:
    ds = ds.map(static_batch)
  logging.info("dynamic pretraining pipeline over %d document file(s)", len(files))
  return ds.prefetch(tf.data.AUTOTUNE)
