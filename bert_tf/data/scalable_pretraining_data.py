"""Scalable pretraining data: sharded, streaming, multi-process, bounded memory.

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
4. Masking is vectorized with numpy: a uniformly random subset
   (:func:`random_subsets`) of
   ``min(max_predictions_per_seq, max(1, round(len * masked_lm_prob)))``
   non-special positions (all of them if fewer), then one uniform draw per
   position for 80% ``[MASK]`` / 10% kept / 10% random vocab entry; the
   truncation's front/back split is a Binomial(n, 1/2) draw. Same
   distributions as the original, different random numbers.
5. Whole-word masking is not offered here (faithful mode has it).
6. Tokenization is the exact memoized tokenizer
   (:class:`bert_tf.data.fast_pretraining_data.MemoTokenizer`), so the
   tokens equal the original's.

Output files are written under temporary names and renamed only when every
shard is complete.
"""

import multiprocessing
import os
import queue as queue_lib
import random
import sys

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from bert_tf import tokenization
from bert_tf.data import fast_pretraining_data as fast
from bert_tf.data.fast_pretraining_data import InputError

_BATCH = 2048  # instances vectorized together


def shard_paths(output_file, num_shards):
  """``<output_file>-%05d-of-%05d`` for each shard: list of str."""
  return ["%s-%05d-of-%05d" % (output_file, i, num_shards) for i in range(num_shards)]


def shard_seeds(random_seed, shard):
  """``(python_seed, numpy SeedSequence)`` of one shard's random stream."""
  ss = np.random.SeedSequence(entropy=int(random_seed) % (1 << 63), spawn_key=(shard,))
  py_seed = int.from_bytes(ss.generate_state(4, dtype=np.uint32).tobytes(), "little")
  return py_seed, ss


def iter_shard_documents(input_files, shard, num_shards, tokenizer, on_bytes=None):
  """Yields the tokenized documents of one shard, streaming.

  Args:
    input_files: paths, read in order (documents continue across files).
    shard, num_shards: document ``k`` (0-based, counting every blank-line
      separated document of the stream) belongs to shard ``k % num_shards``.
    tokenizer: :class:`~bert_tf.data.fast_pretraining_data.MemoTokenizer`.
    on_bytes: optional callable ``(n)``: about ``n`` more input bytes read.

  Yields:
    documents: non-empty lists of non-empty lists of int token ids. Lines
    of other shards' documents are not tokenized.
  """
  doc_index = 0
  current = []
  mine = (doc_index % num_shards) == shard
  tokenize = tokenizer.tokenize_to_ids
  pending = 0
  for path in input_files:
    for line in fast.read_lines(path):
      pending += len(line) + 1
      if not line:
        if current:
          yield current
          current = []
        doc_index += 1
        mine = (doc_index % num_shards) == shard
        if on_bytes is not None and pending > (1 << 18):
          on_bytes(pending)
          pending = 0
        continue
      if mine:
        ids = tokenize(line)
        if ids:
          current.append(ids)
  if current:
    yield current
  if on_bytes is not None and pending:
    on_bytes(pending)


def random_subsets(rng, c, m, width, fill):
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
    encoder: optional :class:`~bert_tf.data.fast_pretraining_data.RecordEncoder`
      for this vocab and these lengths (shared between shards).
  """

  def __init__(self, vocab, random_seed, shard, max_seq_length=128, dupe_factor=10,
               short_seq_prob=0.1, masked_lm_prob=0.15, max_predictions_per_seq=20,
               encoder=None):
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
    self.encoder = encoder or fast.RecordEncoder(max_id, max_seq_length,
                                                 max_predictions_per_seq)
    self.varints = _Varints(max(max_id, max_seq_length))

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
    u = self.np_rng.random((rows, max_pred), dtype=np.float32)
    rnd = self.rand_ids[self.np_rng.integers(0, len(self.rand_ids), (rows, max_pred))]
    new = np.where(u < 0.8, self.mask_id, np.where(u < 0.9, labels, rnd))
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

  def window_records(self, documents):
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


class _Varints:
  """Row-wise packed protobuf varints of int arrays with values in ``[0, max_value]``.

  One table lookup per value gives its varint bytes (``max_value < 2**21``:
  at most 3, held little-endian in a uint32), another which of those 4 bytes
  are used; one ``compress`` drops the unused ones.
  """

  def __init__(self, max_value):
    v = np.arange(max_value + 1, dtype=np.uint32)
    nb = 1 + (v >= 128).astype(np.int8) + (v >= 16384).astype(np.int8)
    self.table = ((v & 0x7F) | ((nb > 1).astype(np.uint32) << 7) |
                  (((v >> 7) & 0x7F) << 8) | ((nb > 2).astype(np.uint32) << 15) |
                  ((v >> 14) << 16))
    # keep[v] viewed as 4 bools: which of the 4 bytes of table[v] are used.
    self.keep = (np.arange(4)[None, :] < nb[:, None]).astype(np.uint8).view(np.uint32).ravel()

  def __call__(self, values):
    """``(buffer, offsets)``: row ``i`` of ``values`` [rows, cols] (int64) is
    ``buffer[offsets[i]:offsets[i+1]]``."""
    rows, cols = values.shape
    if values.size and int(values.max()) < 128:  # one byte each
      return values.astype(np.uint8).tobytes(), list(range(0, rows * cols + 1, cols))
    keep = self.keep[values].view(bool)
    buf = self.table[values].view(np.uint8).compress(keep.ravel()).tobytes()
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(keep.reshape(rows, 4 * cols).sum(axis=1, dtype=np.int64), out=offsets[1:])
    return buf, offsets.tolist()


def _write_shard(input_files, tok, encoder, shard, num_shards, path, params,
                 on_bytes=None):
  """Makes and writes one shard to a temporary file; returns ``(tmp, count)``.

  ``tok`` (a MemoTokenizer) and ``encoder`` (a RecordEncoder) are built once
  by :func:`create_sharded` and shared by the shards.
  """
  window_tokens = params.pop("window_tokens")
  maker = ShardMaker(tok.vocab, shard=shard, encoder=encoder, **params)
  writer = fast.TFRecordWriter(path)
  try:
    window, size = [], 0
    for doc in iter_shard_documents(input_files, shard, num_shards, tok, on_bytes):
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


def _worker(input_files, tok, encoder, shards, num_shards, paths, params, queue):
  try:
    def on_bytes(n):
      queue.put(("bytes", n))
    for s in shards:
      tmp, count = _write_shard(input_files, tok, encoder, s, num_shards, paths[s],
                                dict(params), on_bytes)
      queue.put(("shard", s, tmp, count))
    queue.put(("done", fast.peak_rss_mb()))
  except BaseException as e:  # pylint: disable=broad-except
    queue.put(("error", "%s: %s" % (type(e).__name__, e)))


def _start_method():
  """``fork`` (starts in milliseconds) unless TensorFlow is loaded: ``spawn``."""
  if "tensorflow" in sys.modules or "fork" not in multiprocessing.get_all_start_methods():
    return "spawn"
  return "fork"


def create_sharded(input_files, output_file, vocab_file, do_lower_case=True,
                   num_workers=1, num_shards=None, random_seed=12345,
                   max_seq_length=128, dupe_factor=10, short_seq_prob=0.1,
                   masked_lm_prob=0.15, max_predictions_per_seq=20,
                   window_tokens=250_000, progress=None):
  """Scalable mode: writes ``num_shards`` TFRecord shards with ``num_workers`` processes.

  Args:
    input_files: list of paths (documents continue across files).
    output_file: shard ``s`` goes to ``<output_file>-%05d-of-%05d``.
    num_workers: worker processes (forked or spawned, see below; at most
      ``num_shards`` used).
    num_shards: default ``num_workers``.
    window_tokens: tokens per window (memory bound; random-next pool).
    progress: optional callable ``(bytes_done, bytes_total)``.
    Other args: as the original's flags.

  Returns:
    dict: ``files`` (list), ``counts`` (records per shard), ``num_instances``,
    ``worker_peak_rss_mb`` (list, MiB), ``peak_rss_mb`` (this process).

  Raises:
    InputError: bad flags, unreadable input, or a failed worker (message
      names the worker's exception); no output file is left behind.

  Workers are forked when this process has not imported TensorFlow (as
  ``tools/create_pretraining_data.py`` in this mode), and ``spawn``-ed
  otherwise (a fork of a process that has imported TensorFlow is unsafe), so
  a calling script needs the usual ``if __name__ == "__main__":`` guard.
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
  tok = fast.MemoTokenizer(tokenization.FullTokenizer(vocab_file, do_lower_case),
                           max_cache_words=500_000)
  max_id = _max_vocab_id(tok.vocab, vocab_file)
  encoder = fast.RecordEncoder(max_id, max_seq_length, max_predictions_per_seq)
  for p in input_files:
    if not os.access(p, os.R_OK):
      raise InputError("cannot read input file %r" % p)
  paths = shard_paths(output_file, num_shards)
  params = dict(random_seed=random_seed, max_seq_length=max_seq_length,
                dupe_factor=dupe_factor, short_seq_prob=short_seq_prob,
                masked_lm_prob=masked_lm_prob,
                max_predictions_per_seq=max_predictions_per_seq,
                window_tokens=window_tokens)
  total_bytes = sum(os.path.getsize(p) for p in input_files) * num_shards
  num_workers = min(num_workers, num_shards)
  ctx = multiprocessing.get_context(_start_method())
  queue = ctx.Queue()
  procs = []
  for w in range(num_workers):
    shards = list(range(w, num_shards, num_workers))
    p = ctx.Process(target=_worker, args=(input_files, tok, encoder, shards, num_shards,
                                          paths, params, queue),
                    daemon=True)
    p.start()
    procs.append(p)
  temps, counts, rss, error = {}, {}, [], None
  done_bytes = 0
  finished = 0
  try:
    while finished < num_workers and error is None:
      try:
        msg = queue.get(timeout=1.0)
      except queue_lib.Empty:
        if any(p.exitcode not in (None, 0) for p in procs):
          error = "a worker process died (exit codes %s)" % [p.exitcode for p in procs]
        continue
      if msg[0] == "bytes":
        done_bytes += msg[1]
        if progress is not None:
          progress(min(done_bytes, total_bytes), total_bytes)
      elif msg[0] == "shard":
        temps[msg[1]] = msg[2]
        counts[msg[1]] = msg[3]
      elif msg[0] == "done":
        rss.append(msg[1])
        finished += 1
      else:
        error = msg[1]
    for p in procs:
      p.join(timeout=None if error is None else 5)
  finally:
    if error is not None or len(temps) != num_shards:
      for p in procs:
        if p.is_alive():
          p.terminate()
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
              peak_rss_mb=fast.peak_rss_mb())
