"""Sharded pretraining data: streaming, multi-process, bounded memory.

The original ``create_pretraining_data.py`` (google-research/bert) holds the
whole corpus and every instance in memory and runs on one core. This mode
keeps its algorithm (sentence-pair chunks up to a target length,
``short_seq_prob``, the "put back" of unused segments, random front/back
truncation of the longer segment, 15% masking with 80/10/10 replacement) but
streams:

* **Shards.** Document ``k`` of the input stream (blank-line separated,
  continuing across files, as in the original) belongs to shard
  ``k % num_shards``. Shard ``s`` is written to
  ``<output_file>-0000s-of-0000N`` by one of ``num_workers`` processes; each
  shard has its own random stream seeded from ``(random_seed, s)``
  (``numpy.random.SeedSequence``), so the output depends on the seed and the
  number of shards, not on the number of workers.
* **Windows.** A worker reads its shard's documents into a window until the
  window holds ``window_tokens`` tokens, makes the window's instances
  (``dupe_factor`` passes over its documents, as the original does over the
  whole corpus), shuffles them, writes them and drops the window. Memory is
  bounded by the window, not the corpus.

Differences from faithful mode (documented and tested):

1. Random-next segments B come from another document of the same window of
   the same shard (the original: any document of the whole corpus). A window
   with one document takes them from that document, as the original does
   with a one-document corpus.
2. Instances are shuffled within a window (the original: all at once); shard
   files are not interleaved round-robin. Shuffle again when reading
   (``tf.data``), as pretraining input pipelines do anyway.
3. ``IsNext`` is exactly 50/50: a chunk of one segment whose coin says
   "actual next" takes the following segment as B (or, at the end of a
   document, splits the segment at a random token). The original always
   makes such chunks random-next (55% random next on Austen).
4. Masking is vectorized with numpy (:meth:`ShardMaker.mask`, the 80/10/10
   rule written once for this representation): a uniformly random subset
   (:func:`random_subsets`) of
   ``min(max_predictions_per_seq, max(1, round(len * masked_lm_prob)))``
   non-special positions (all of them if fewer), then one uniform draw per
   position for 80% ``[MASK]`` / 10% kept / 10% random vocab entry; the
   truncation's front/back split is a Binomial(n, 1/2) draw. Same
   distributions as the original, different random numbers.
5. Whole-word masking is not offered here (faithful mode has it).
6. Tokenization is the exact memoized tokenizer
   (:class:`bert_tf.data.pretraining.tokens.MemoTokenizer`), so the
   tokens equal the original's.

Documents come from :func:`bert_tf.data.pretraining.documents.iter_documents`
with a shard argument; records are encoded and framed by
:mod:`bert_tf.data.pretraining.records`. Workers run on a
``concurrent.futures.ProcessPoolExecutor``, one task per worker (a fixed
set of shards each). TF-free: workers are forked when TensorFlow is not
loaded.

Output files are written under temporary names and renamed only when every
shard is complete. :func:`write_shard` is the one per-shard function: the
local pool here and the Beam pipeline
(:mod:`bert_tf.data.pretraining.beam_runner`, ``--runner=beam``) both call
it, so their shards are byte-identical; ``kind="documents"`` makes the
tokenized-document shards of ``create_pretraining_documents.py --num_workers``.
"""


import concurrent.futures
import multiprocessing
import os
import queue as queue_lib
import random
import sys
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from bert_tf import errors
from bert_tf import tokenization
from bert_tf.data.pretraining import documents as documents_lib
from bert_tf.data.pretraining import records as records_lib
from bert_tf.data.pretraining import tokens as tokens_lib

InputError = errors.InputError


_BATCH = 2048  # instances vectorized together


def shard_paths(output_file: str, num_shards: int) -> List[str]:
  """``<output_file>-%05d-of-%05d`` for each shard: list of str."""
  return ["%s-%05d-of-%05d" % (output_file, i, num_shards) for i in range(num_shards)]


def shard_seeds(random_seed: int, shard: int):
  """``(python_seed, numpy SeedSequence)`` of one shard's random stream."""
  ss = np.random.SeedSequence(entropy=int(random_seed) % (1 << 63), spawn_key=(shard,))
  py_seed = int.from_bytes(ss.generate_state(4, dtype=np.uint32).tobytes(), "little")
  return py_seed, ss


def random_subsets(rng: np.random.Generator, c: np.ndarray, m: np.ndarray,
                   width: int, fill: int) -> np.ndarray:
  """A uniformly random ``m[i]``-subset of ``range(c[i])`` for every row ``i``.

  Floyd's algorithm (Bentley & Floyd, CACM 1987), one step for all rows at
  a time: step ``s`` draws ``t`` uniformly from ``[0, c - m + s]`` and takes
  ``t``, or ``c - m + s`` if ``t`` is already taken. Float64 draws make the
  floor exact for ``c < 2**29``.

  Args:
    rng: ``numpy.random.Generator``.
    c, m: int64 [rows], ``0 <= m <= c``, ``m <= width``.
    width: columns of the result; fill: the value of unused columns.

  Returns:
    int64 [rows, width]: row ``i`` holds its subset (in draw order) in the
    first ``m[i]`` columns, ``fill`` after them.
  """
  rows = len(c)
  u = rng.random((rows, width))
  chosen = np.full((rows, width), fill, np.int64)
  for step in range(int(m.max(initial=0))):
    top = c - m + step  # this step draws from [0, top]
    t = (u[:, step] * (top + 1)).astype(np.int64)
    dup = (chosen[:, :step] == t[:, None]).any(axis=1)
    chosen[:, step] = np.where(step < m, np.where(dup, top, t), fill)
  return chosen


class _Window:
  """Documents of one window, flattened into one int64 array."""

  def __init__(self, documents):
    self.seg_starts = []  # per document: list of flat offsets of its segments
    self.seg_lens = []
    pieces = []
    offset = 0
    for doc in documents:
      starts, lens = [], []
      for seg in doc:
        starts.append(offset)
        lens.append(len(seg))
        offset += len(seg)
        pieces.extend(seg)
      self.seg_starts.append(starts)
      self.seg_lens.append(lens)
    self.flat = np.array(pieces, dtype=np.int64)


def _max_vocab_id(vocab, vocab_file=None):
  """The largest id of ``vocab``; InputError if it needs more than 3 varint bytes."""
  max_id = int(max(vocab.values()))
  if max_id >= 1 << 21:
    raise InputError("vocab ids above 2**21 are not supported (got %d%s)"
                     % (max_id, "" if vocab_file is None else " in %s" % vocab_file))
  return max_id


class ShardMaker:
  """Makes the records of one shard, window by window.

  Args:
    vocab: ``{token: id}``.
    random_seed, shard: the shard's random stream (:func:`shard_seeds`).
    max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
    max_predictions_per_seq: as the original's flags.
    encoder: optional :class:`~bert_tf.data.pretraining.records.RecordEncoder`
      for this vocab and these lengths (shared between shards).

  Example:

    >>> maker = ShardMaker(vocab, random_seed=12345, shard=0)
    >>> records = maker.window_records(documents)  # serialized, shuffled
  """

  def __init__(self, vocab: dict, random_seed: int, shard: int,
               max_seq_length: int = 128, dupe_factor: int = 10,
               short_seq_prob: float = 0.1, masked_lm_prob: float = 0.15,
               max_predictions_per_seq: int = 20,
               encoder: Optional[records_lib.RecordEncoder] = None):
    py_seed, ss = shard_seeds(random_seed, shard)
    self.rng = random.Random(py_seed)
    self.np_rng = np.random.default_rng(ss)
    self.max_seq_length = max_seq_length
    self.dupe_factor = dupe_factor
    self.short_seq_prob = short_seq_prob
    self.masked_lm_prob = masked_lm_prob
    self.max_predictions_per_seq = max_predictions_per_seq
    self.cls_id = vocab["[CLS]"]
    self.sep_id = vocab["[SEP]"]
    self.mask_id = vocab["[MASK]"]
    self.rand_ids = np.array([vocab[w] for w in vocab], dtype=np.int64)
    max_id = _max_vocab_id(vocab)
    self.encoder = encoder or records_lib.RecordEncoder(max_id, max_seq_length,
                                                 max_predictions_per_seq)
    self.varints = records_lib.PackedVarints(max(max_id, max_seq_length))

  # -- pairs (Python, per chunk) ------------------------------------------

  def _pairs(self, win):
    """Instance spans of one window: 6 int64 arrays + label array."""
    # Uniform ints on [0, n) are int(rand() * n): one float draw, bias < 2**-40.
    rand = self.rng.random
    num_docs = len(win.seg_starts)
    max_num_tokens = self.max_seq_length - 3
    a_s, a_l, b_s, b_l, lab = [], [], [], [], []
    for _ in range(self.dupe_factor):
      for d in range(num_docs):
        starts = win.seg_starts[d]
        lens = win.seg_lens[d]
        nseg = len(starts)
        target = max_num_tokens
        if rand() < self.short_seq_prob:
          target = 2 + int(rand() * (max_num_tokens - 1))
        first = 0
        length = 0
        i = 0
        while i < nseg:
          length += lens[i]
          if i == nseg - 1 or length >= target:
            count = i - first + 1
            a_end = 1 if count == 1 else 1 + int(rand() * (count - 1))
            a_start = starts[first]
            la = starts[first + a_end - 1] + lens[first + a_end - 1] - a_start
            random_next = rand() < 0.5
            if not random_next:
              if count >= 2:
                bs = starts[first + a_end]
                lb = starts[i] + lens[i] - bs
              elif i + 1 < nseg:  # one segment: B is the following one
                i += 1
                bs, lb = starts[i], lens[i]
              elif la >= 2:  # last segment of the document: split it
                cut = 1 + int(rand() * (la - 1))
                bs, lb = a_start + cut, la - cut
                la = cut
              else:
                random_next = True
            if random_next:
              target_b = target - la
              if num_docs >= 2:
                r = int(rand() * (num_docs - 1))
                if r >= d:
                  r += 1
              else:
                r = d
              rstarts, rlens = win.seg_starts[r], win.seg_lens[r]
              j = int(rand() * len(rstarts))
              bs = rstarts[j]
              lb = 0
              while j < len(rstarts):
                lb = rstarts[j] + rlens[j] - bs
                if lb >= target_b:
                  break
                j += 1
              i -= count - a_end
            a_s.append(a_start)
            a_l.append(la)
            b_s.append(bs)
            b_l.append(lb)
            lab.append(random_next)
            first = i + 1
            length = 0
          i += 1
    return (np.array(a_s, np.int64), np.array(a_l, np.int64), np.array(b_s, np.int64),
            np.array(b_l, np.int64), np.array(lab, bool))

  # -- vectorized truncation, packing, masking, encoding --------------------

  def mask(self, labels: np.ndarray) -> np.ndarray:
    """The 80/10/10 rule: replacement ids for the chosen positions' ``labels``.

    Per position (int64 [rows, P]): 80% ``[MASK]``, 10% unchanged, 10% a
    uniformly random vocab entry (any entry, as the original's
    ``vocab_words[randint]``); one float32 draw and one integer draw each.
    """
    shape = labels.shape
    u = self.np_rng.random(shape, dtype=np.float32)
    rnd = self.rand_ids[self.np_rng.integers(0, len(self.rand_ids), shape)]
    return np.where(u < 0.8, self.mask_id, np.where(u < 0.9, labels, rnd))

  def _truncate(self, a_s, a_l, b_s, b_l):
    """The original's truncate_seq_pair, in closed form (vectorized)."""
    m = self.max_seq_length - 3
    excess = np.maximum(a_l + b_l - m, 0)
    a_longer = a_l > b_l
    first = np.minimum(excess, np.abs(a_l - b_l))
    rest = excess - first
    ta = np.where(a_longer, first, 0) + rest // 2
    tb = np.where(a_longer, 0, first) + (rest + 1) // 2
    fa = self.np_rng.binomial(ta, 0.5)
    fb = self.np_rng.binomial(tb, 0.5)
    return a_s + fa, a_l - ta, b_s + fb, b_l - tb

  def _encode_batch(self, flat_padded, a_s, a_l, b_s, b_l, lab):
    """Packs, masks and serializes one batch of instance spans: list of bytes.

    ``flat_padded`` is the window's tokens (int64) with ``max_seq_length``
    zeros before and after.
    """
    rows = len(a_s)
    big_l = self.max_seq_length
    max_pred = self.max_predictions_per_seq
    # Row i of `win` is flat_padded[i:i + big_l]: one row gather per segment.
    win = sliding_window_view(flat_padded, big_l)
    j = np.arange(big_l)[None, :]
    la, lb = a_l[:, None], b_l[:, None]
    in_a = (j >= 1) & (j <= la)
    in_b = (j >= la + 2) & (j < la + 2 + lb)
    # Position j of A reads flat[a_s + j - 1], of B flat[b_s + j - la - 2].
    ids = np.where(in_a, win[a_s + (big_l - 1)],
                   np.where(in_b, win[b_s - a_l + (big_l - 2)], 0))
    r = np.arange(rows)
    ids[:, 0] = self.cls_id
    ids[r, a_l + 1] = self.sep_id
    ids[r, a_l + b_l + 2] = self.sep_id
    n = a_l + b_l + 3
    c = a_l + b_l  # candidates: every A and B position
    m = np.minimum(np.minimum(max_pred, np.maximum(
        1, np.rint(n * self.masked_lm_prob).astype(np.int64))), c)
    chosen = random_subsets(self.np_rng, c, m, max_pred, fill=big_l)
    # Candidate index -> position (A is 1..la, B starts at la + 2), sorted.
    pos = np.sort(np.where(chosen < big_l, chosen + 1 + (chosen >= la), big_l), axis=1)
    valid = pos < big_l
    posc = np.where(valid, pos, 0)
    labels = np.where(valid, np.take_along_axis(ids, posc, axis=1), 0)
    new = self.mask(labels)
    rr, cc = np.nonzero(valid)
    ids[rr, pos[rr, cc]] = new[rr, cc]
    varints = self.varints
    ids_buf, ids_off = varints(ids)
    pos_buf, pos_off = varints(posc)
    lab_buf, lab_off = varints(labels)
    encode = self.encoder.encode_payloads
    return [encode(ids_buf[ids_off[i]:ids_off[i + 1]], ni, lai,
                   pos_buf[pos_off[i]:pos_off[i + 1]], lab_buf[lab_off[i]:lab_off[i + 1]],
                   mi, li)
            for i, ni, lai, mi, li in zip(range(rows), n.tolist(), a_l.tolist(), m.tolist(),
                                          lab.tolist())]

  def window_records(self, documents: List[List[List[int]]]) -> List[bytes]:
    """The shuffled, serialized records of one window of documents: list of bytes."""
    win = _Window(documents)
    a_s, a_l, b_s, b_l, lab = self._pairs(win)
    a_s, a_l, b_s, b_l = self._truncate(a_s, a_l, b_s, b_l)
    pad = np.zeros(self.max_seq_length, np.int64)
    flat_padded = np.concatenate([pad, win.flat, pad])
    records = []
    for start in range(0, len(a_s), _BATCH):
      sl = slice(start, start + _BATCH)
      records.extend(self._encode_batch(flat_padded, a_s[sl], a_l[sl], b_s[sl], b_l[sl],
                                        lab[sl]))
    perm = self.np_rng.permutation(len(records))
    return [records[i] for i in perm]


def peak_rss_mb() -> float:
  """Peak resident set size of this process so far, in MiB (Linux ``ru_maxrss``)."""
  import resource  # pylint: disable=g-import-not-at-top
  kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return kb / 1024.0 if sys.platform != "darwin" else kb / 2.0 ** 20


def write_shard(input_files: Sequence[str], tok: tokens_lib.MemoTokenizer,
                encoder: records_lib.RecordEncoder, shard: int, num_shards: int,
                path: str, params: dict,
                on_bytes: Optional[Callable[[int], None]] = None) -> Tuple[str, int]:
  """Makes and writes one shard to a temporary file; returns ``(tmp, count)``.

  The one per-shard function of the scalable modes: the local worker pool
  (:func:`create_sharded`) and the Beam pipeline
  (:mod:`bert_tf.data.pretraining.beam_runner`) both call it, so a shard's
  bytes depend only on the inputs, ``shard``, ``num_shards`` and ``params``.

  Args:
    input_files: paths (local or ``tf.io.gfile`` URLs), read in order.
    tok, encoder: from :func:`prepare` (built once, shared by the shards).
    shard, num_shards: document ``k`` belongs to shard ``k % num_shards``.
    path: the shard's final name; the temporary file is its sibling.
    params: ``kind`` (``"instances"``: masked-LM/NSP records, the default;
      ``"documents"``: one record of token ids per document, as
      ``create_pretraining_documents.py``), and for instances ``window_tokens``
      and :class:`ShardMaker`'s keyword arguments.
    on_bytes: optional progress callable ``(n)``: ``n`` more input bytes read.

  Returns:
    ``(temporary path, records written)``; the caller renames it to ``path``.

  Raises:
    InputError: an input file cannot be read. No temporary file is left.
  """
  params = dict(params)
  kind = params.pop("kind", "instances")
  window_tokens = params.pop("window_tokens", None)
  maker = (None if kind == "documents" else
           ShardMaker(tok.vocab, shard=shard, encoder=encoder, **params))
  writer = records_lib.TFRecordWriter(path)
  try:
    docs = documents_lib.iter_documents(input_files, tok.tokenize_to_ids,
                                        shard=(shard, num_shards), on_bytes=on_bytes)
    if maker is None:
      for doc in docs:
        writer.write(records_lib.encode_document(doc))
    else:
      window, size = [], 0
      for doc in docs:
        window.append(doc)
        size += sum(len(s) for s in doc)
        if size >= window_tokens:
          writer.write_many(maker.window_records(window))
          window, size = [], 0
      if window:
        writer.write_many(maker.window_records(window))
    writer.commit_to_temp()
  except BaseException:
    writer.abort()
    raise
  return writer.tmp_path, writer.count


def prepare(vocab_file: str, do_lower_case: bool = True, max_seq_length: int = 128,
            max_predictions_per_seq: int = 20, preserve_unused_tokens: bool = False,
            max_cache_words: int = 500_000
            ) -> Tuple[tokens_lib.MemoTokenizer, records_lib.RecordEncoder]:
  """The tokenizer and record encoder every shard of one run shares.

  Raises:
    tokenization.VocabError: a bad vocab (or one without ``[UNK] [CLS]
      [SEP] [MASK]``).
    InputError: vocab ids above 2**21.
  """
  full = tokenization.FullTokenizer(vocab_file, do_lower_case,
                                    preserve_unused_tokens=preserve_unused_tokens)
  tokenization.check_vocab(full.vocab, vocab_file)  # masking needs [MASK]
  tok = tokens_lib.MemoTokenizer(full, max_cache_words=max_cache_words)
  max_id = _max_vocab_id(tok.vocab, vocab_file)
  return tok, records_lib.RecordEncoder(max_id, max_seq_length, max_predictions_per_seq)


def shard_params(kind: str = "instances", random_seed: int = 12345,
                 max_seq_length: int = 128, dupe_factor: int = 10,
                 short_seq_prob: float = 0.1, masked_lm_prob: float = 0.15,
                 max_predictions_per_seq: int = 20, window_tokens: int = 250_000) -> dict:
  """The ``params`` of :func:`write_shard` for ``kind`` (documents take none
  of the instance flags): a dict of plain values (picklable, JSON-able)."""
  if kind == "documents":
    return dict(kind="documents")
  if kind != "instances":
    raise InputError("unknown shard kind %r" % kind)
  return dict(kind="instances", random_seed=random_seed, max_seq_length=max_seq_length,
              dupe_factor=dupe_factor, short_seq_prob=short_seq_prob,
              masked_lm_prob=masked_lm_prob,
              max_predictions_per_seq=max_predictions_per_seq,
              window_tokens=window_tokens)


# Per worker process: (tokenizer, encoder, progress queue), set by _init_worker.
_WORKER = {}


def _init_worker(tok, encoder, progress_queue):
  _WORKER.update(tok=tok, encoder=encoder, queue=progress_queue)


def _run_task(input_files, shards, num_shards, paths, params):
  """One worker task: its shards, in order; ``([(shard, tmp, count)], peak_rss_mb)``.

  A failure is re-raised as InputError naming the exception type (the pool
  pickles it back to the main process).
  """
  progress_queue = _WORKER["queue"]
  written = []
  try:
    for s in shards:
      tmp, count = write_shard(input_files, _WORKER["tok"], _WORKER["encoder"], s,
                               num_shards, paths[s], params, progress_queue.put)
      written.append((s, tmp, count))
  except Exception as e:  # pylint: disable=broad-except
    for _, tmp, _ in written:
      if os.path.exists(tmp):
        os.remove(tmp)
    raise InputError("%s: %s" % (type(e).__name__, e)) from None
  return written, peak_rss_mb()


def _start_method():
  """``fork`` (starts in milliseconds) unless TensorFlow is loaded: ``spawn``."""
  if "tensorflow" in sys.modules or "fork" not in multiprocessing.get_all_start_methods():
    return "spawn"
  return "fork"


def create_sharded(input_files: Sequence[str], output_file: str, vocab_file: str,
                   do_lower_case: bool = True, num_workers: int = 1,
                   num_shards: Optional[int] = None, random_seed: int = 12345,
                   max_seq_length: int = 128, dupe_factor: int = 10,
                   short_seq_prob: float = 0.1, masked_lm_prob: float = 0.15,
                   max_predictions_per_seq: int = 20, window_tokens: int = 250_000,
                   progress: Optional[Callable[[int, int], None]] = None,
                   preserve_unused_tokens: bool = False, kind: str = "instances") -> dict:
  """Sharded mode: writes ``num_shards`` TFRecord shards with ``num_workers`` processes.

  Args:
    input_files: list of paths (documents continue across files).
    output_file: shard ``s`` goes to ``<output_file>-%05d-of-%05d``.
    num_workers: worker processes (forked or spawned, see below; at most
      ``num_shards`` used); worker ``w`` makes shards ``w, w + num_workers,
      ...``.
    num_shards: default ``num_workers``.
    window_tokens: tokens per window (memory bound; random-next pool).
    progress: optional callable ``(bytes_done, bytes_total)``.
    preserve_unused_tokens: the original's ``--preserve_unused_tokens``
      (vocab entries ``[unusedN]`` in the text stay whole tokens).
    kind: ``"instances"`` (masked-LM/NSP records) or ``"documents"`` (one
      record of token ids per document: ``create_pretraining_documents.py
      --num_workers``; the instance flags are unused).
    Other args: as the original's flags.

  Returns:
    dict: ``files`` (list), ``counts`` (records per shard), ``num_instances``
    (records in all, documents for ``kind="documents"``),
    ``worker_peak_rss_mb`` (list, MiB, one per worker), ``peak_rss_mb``
    (this process).

  Raises:
    InputError: bad flags, unreadable input, or a failed worker (message
      names the worker's exception); no output file is left behind.
    tokenization.VocabError: a bad vocab (one without ``[UNK] [CLS] [SEP]
      [MASK]``, which the records need).

  Workers are forked when this process has not imported TensorFlow (as
  ``tools/create_pretraining_data.py`` in this mode), and ``spawn``-ed
  otherwise (a fork of a process that has imported TensorFlow is unsafe), so
  a calling script needs the usual ``if __name__ == "__main__":`` guard.

  Example:

    >>> stats = create_sharded(["corpus.txt"], "/tmp/out", "vocab.txt", num_workers=2)
    >>> stats["files"]  # ['/tmp/out-00000-of-00002', '/tmp/out-00001-of-00002']
  """
  if num_workers < 1:
    raise InputError("--num_workers must be >= 1 in scalable mode, got %d" % num_workers)
  num_shards = num_workers if num_shards is None else num_shards
  if num_shards < 1:
    raise InputError("--num_shards must be >= 1, got %d" % num_shards)
  if max_seq_length < 5:
    raise InputError("--max_seq_length must be at least 5, got %d" % max_seq_length)
  if window_tokens < 1:
    raise InputError("--window_tokens must be >= 1")
  # Vocab errors surface here, in this process; the workers share the result.
  tok, encoder = prepare(vocab_file, do_lower_case, max_seq_length,
                         max_predictions_per_seq, preserve_unused_tokens)
  for p in input_files:
    if not os.access(p, os.R_OK):
      raise InputError("cannot read input file %r" % p)
  paths = shard_paths(output_file, num_shards)
  params = shard_params(kind, random_seed=random_seed, max_seq_length=max_seq_length,
                        dupe_factor=dupe_factor, short_seq_prob=short_seq_prob,
                        masked_lm_prob=masked_lm_prob,
                        max_predictions_per_seq=max_predictions_per_seq,
                        window_tokens=window_tokens)
  total_bytes = sum(os.path.getsize(p) for p in input_files) * num_shards
  num_workers = min(num_workers, num_shards)
  ctx = multiprocessing.get_context(_start_method())
  progress_queue = ctx.Queue()
  temps, counts, rss, error = {}, {}, [], None
  done_bytes = 0

  def drain(timeout):
    nonlocal done_bytes
    try:
      while True:
        done_bytes += progress_queue.get(timeout=timeout)
        timeout = 0
        if progress is not None:
          progress(min(done_bytes, total_bytes), total_bytes)
    except queue_lib.Empty:
      pass

  pool = concurrent.futures.ProcessPoolExecutor(
      max_workers=num_workers, mp_context=ctx, initializer=_init_worker,
      initargs=(tok, encoder, progress_queue))
  try:
    futures = [pool.submit(_run_task, input_files,
                           list(range(w, num_shards, num_workers)), num_shards, paths,
                           params)
               for w in range(num_workers)]
    pending = set(futures)
    while pending and error is None:
      done, pending = concurrent.futures.wait(pending, timeout=0.2)
      drain(0)
      for f in done:
        try:
          written, worker_rss = f.result()
        except InputError as e:
          error = str(e)
          continue
        except concurrent.futures.BrokenExecutor as e:
          error = "a worker process died (%s)" % e
          continue
        rss.append(worker_rss)
        for s, tmp, count in written:
          temps[s], counts[s] = tmp, count
    if error is not None:
      for f in pending:
        f.cancel()
      # Tasks already running finish (bounded work); their shards are removed.
      for f in pending:
        try:
          written, _ = f.result()
        except (InputError, concurrent.futures.CancelledError,
                concurrent.futures.BrokenExecutor):
          continue
        for s, tmp, _ in written:
          temps[s] = tmp
  finally:
    pool.shutdown(wait=True, cancel_futures=True)
    drain(0)
    progress_queue.close()
    if error is not None or len(temps) != num_shards:
      for t in temps.values():
        if os.path.exists(t):
          os.remove(t)
  if error is not None:
    raise InputError("scalable mode failed: %s" % error)
  for s in range(num_shards):
    os.replace(temps[s], paths[s])
  if progress is not None:
    progress(total_bytes, total_bytes)
  return dict(files=paths, counts=[counts[s] for s in range(num_shards)],
              num_instances=sum(counts.values()), worker_peak_rss_mb=rss,
              peak_rss_mb=peak_rss_mb())
