"""Fast faithful pretraining data: the original's records, several times faster.

Source: google-research/bert ``create_pretraining_data.py`` (bert-tensorflow
1.0.4, plus master's ``--do_whole_word_mask``). The reference port in
:mod:`bert_tf.data.pretraining_data` follows the original line by line; this
module computes the same records (same ``random.Random`` draws in the same
order, same features) with three changes that cannot alter the output:

* **Tokenization** (59% of the original's time) is memoized per
  whitespace-separated word (:class:`MemoTokenizer`). The original's cleaning
  and CJK spacing map each character independently, and every later step
  (lower-casing, accent stripping, punctuation splitting, WordPiece) works on
  one whitespace-separated word at a time, so ``tokenize(line)`` is the
  concatenation of ``tokenize(word)`` over the words of the cleaned line: the
  cache is exact, not an approximation.
* **Instances are built on token ids**, not strings, and the random calls are
  inlined: ``randint(a, b)`` is ``a + _randbelow(b - a + 1)`` and ``shuffle``
  is Fisher-Yates over ``_randbelow(i + 1)``, exactly as CPython's
  ``random.py`` implements them (checked against the interpreter's own
  ``random.Random`` at import; on a mismatch the stdlib methods are used).
* **Records are encoded directly** as ``tf.train.Example`` protobuf bytes
  (:class:`RecordEncoder`) right after each instance is made; the final
  ``rng.shuffle`` permutes the encoded records, a list of the same length as
  the original's instance list, so the permutation is the same.

The map inside ``tf.train.Example`` has no fixed byte order (the original's
own files differ byte-wise from run to run), so records are compared parsed,
feature by feature; this module always writes the original's insertion order.

Nothing here imports TensorFlow: TFRecord files are framed by
:class:`TFRecordWriter` with the ``google-crc32c`` library (falling back to
``tf.io.TFRecordWriter`` when that is missing), so worker processes of the
scalable mode start in well under a second.
"""

import functools
import logging
import os
import random
import re
import struct
import sys

from bert_tf import io_utils
from bert_tf import tokenization
from bert_tf import errors

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


InputError = errors.InputError  # re-exported; defined in bert_tf.errors


# ---------------------------------------------------------------------------
# Tokenization


class _CharMap(dict):
  """``str.translate`` table: the original's per-character cleaning + CJK spacing.

  Filled lazily from the reference ``BasicTokenizer`` (``_clean_text`` then
  ``_tokenize_chinese_chars`` on the single character), so it is the
  original's rule by construction.
  """

  def __init__(self, basic_tokenizer):
    super().__init__()
    self._basic = basic_tokenizer

  def __missing__(self, cp):
    ch = chr(cp)
    out = self._basic._tokenize_chinese_chars(self._basic._clean_text(ch))  # pylint: disable=protected-access
    value = ch if out == ch else out
    self[cp] = value
    return value


# ASCII punctuation as the original defines it (33-47, 58-64, 91-96, 123-126;
# every ASCII character of a Unicode P* category lies in these ranges).
_ASCII_PUNC_SPLIT = re.compile(r"[!-/:-@\[-`{-~]|[^!-/:-@\[-`{-~]+")


_PLAIN_WORD = re.compile(r"^[a-z0-9]+$", re.M)


class MemoTokenizer:
  """Exact, memoized :class:`bert_tf.tokenization.FullTokenizer`.

  ``tokenize(text)`` equals ``full_tokenizer.tokenize(text)`` for every
  string (tested against the reference and the original on real text and on
  generated Unicode). Cleaning (delete NUL, U+FFFD, Cc/Cf; whitespace to a
  space) and CJK spacing are per-character maps, done with one
  ``str.translate``; the cleaned text is split on whitespace and each word's
  WordPiece tokens are computed once by the reference tokenizer and cached.

  Args:
    full_tokenizer: the reference tokenizer (its vocab and case flag).
    max_cache_words: the cache is cleared when it holds this many words, so
      memory stays bounded on corpora with unbounded vocabularies.
  """

  def __init__(self, full_tokenizer, max_cache_words=2_000_000):
    self.full_tokenizer = full_tokenizer
    self.vocab = full_tokenizer.vocab
    self._char_map = _CharMap(full_tokenizer.basic_tokenizer)
    self._tokens = {}
    self._ids = {}
    self._max_cache_words = max_cache_words
    self._prefill_ids()

  def _prefill_ids(self):
    """Seeds the id cache with the vocab's whole-word entries.

    A word of ASCII lower-case letters and digits that is itself a vocab
    entry is its own tokenization (cleaning, lower-casing, accent stripping
    and punctuation splitting leave it unchanged; WordPiece's longest match is
    the whole word), and so is its capitalized form when lower-casing. Most
    running words of English text are such words, so most cache misses (a
    reference tokenization each) are gone before the first line.
    """
    lower = self.full_tokenizer.do_lower_case
    max_chars = self.full_tokenizer.wordpiece_tokenizer.max_input_chars_per_word
    vocab, ids = self.vocab, self._ids
    joined = "\n".join(vocab)
    # ASCII lower-case letters and digits only (str.islower() or isdigit()).
    seeded = {w: (vocab[w],) for w in _PLAIN_WORD.findall(joined) if len(w) <= max_chars}
    ids.update(seeded)
    if lower:
      ids.update({w.capitalize(): i for w, i in seeded.items() if not w.isdigit()})

  def _word_tokens(self, word):
    """Tokens of one cleaned, whitespace-free word (a cache miss).

    ASCII words skip what cannot change them (cleaning and CJK spacing were
    done by the translate table; NFD accent stripping is the identity on
    ASCII) and split punctuation with a regex over the original's ASCII
    punctuation set; every other word goes through the reference tokenizer.
    """
    if not word.isascii():
      return self.full_tokenizer.tokenize(word)
    if self.full_tokenizer.do_lower_case:
      word = word.lower()
    wordpiece = self.full_tokenizer.wordpiece_tokenizer
    wp, vocab = wordpiece.tokenize, self.vocab
    max_chars = wordpiece.max_input_chars_per_word
    out = []
    for piece in _ASCII_PUNC_SPLIT.findall(word):
      # A piece that is itself a vocab entry is its own longest match.
      if len(piece) <= max_chars and piece in vocab:
        out.append(piece)
      else:
        out += wp(piece)
    return out

  def _clean(self, text):
    """The original's cleaning and CJK spacing; printable ASCII is unchanged
    by both, so it skips the (per-character, Python-level) translate."""
    if text.isascii() and text.isprintable():
      return text
    return text.translate(self._char_map)

  def tokenize(self, text):
    """WordPiece token strings of ``text`` (``str`` or UTF-8 ``bytes``): list of str."""
    text = tokenization.convert_to_unicode(text)
    cache = self._tokens
    out = []
    for word in self._clean(text).split():
      toks = cache.get(word)
      if toks is None:
        if len(cache) >= self._max_cache_words:
          cache.clear()
        toks = cache[word] = tuple(self._word_tokens(word))
      out += toks
    return out

  def tokenize_to_ids(self, text):
    """Vocab ids of ``tokenize(text)``: list of int (ids in ``[0, len(vocab))``)."""
    text = tokenization.convert_to_unicode(text)
    cache = self._ids
    words = self._clean(text).split()
    try:  # every word cached (the common case once the cache is warm)
      return [i for word in words for i in cache[word]]
    except KeyError:
      pass
    out = []
    for word in words:
      ids = cache.get(word)
      if ids is None:
        if len(cache) >= self._max_cache_words:
          cache.clear()
        vocab = self.vocab
        ids = cache[word] = tuple(vocab[t] for t in self._word_tokens(word))
      out += ids
    return out


def read_lines(path, block_size=1 << 20):
  """Yields the stripped lines of ``path`` as the original reads them.

  The original reads with ``GFile.readline()`` (lines end at ``\\n`` only)
  and ``convert_to_unicode`` (invalid UTF-8 bytes dropped), then
  ``str.strip()``. Reads in 1 MiB blocks, so memory does not grow with the
  file.

  Raises:
    InputError: the file cannot be read (names it).
  """
  try:
    f = open(path, "rb")  # pylint: disable=consider-using-with
  except OSError as e:
    raise InputError("cannot read input file %r: %s" % (path, e)) from e
  with f:
    rest = b""
    while True:
      try:
        block = f.read(block_size)
      except OSError as e:
        raise InputError("cannot read input file %r: %s" % (path, e)) from e
      if not block:
        break
      block = rest + block
      cut = block.rfind(b"\n") + 1
      rest = block[cut:]
      if cut:
        try:
          text = block[:cut].decode("utf-8")
        except UnicodeDecodeError:
          text = "\n".join(line.decode("utf-8", "ignore")
                           for line in block[:cut].split(b"\n"))
        lines = text.split("\n")
        lines.pop()  # the empty string after the last "\n"
        for line in lines:
          yield line.strip()
    if rest:
      yield rest.decode("utf-8", "ignore").strip()


def read_documents(input_files, tokenizer):
  """Documents of token ids, exactly as the original builds ``all_documents``.

  Args:
    input_files: paths read in order; documents continue across files.
    tokenizer: a :class:`MemoTokenizer`.

  Returns:
    list of documents; a document is a non-empty list of non-empty lists of
    int token ids.

  Raises:
    InputError: an input file cannot be read.
  """
  all_documents = [[]]
  tokenize = tokenizer.tokenize_to_ids
  for path in input_files:
    for line in read_lines(path):
      if not line:
        all_documents.append([])
        continue
      ids = tokenize(line)
      if ids:
        all_documents[-1].append(ids)
  return [d for d in all_documents if d]


# ---------------------------------------------------------------------------
# The random stream


def _randbelow(getrandbits, n):
  """CPython ``Random._randbelow_with_getrandbits(n)``: int in ``[0, n)``."""
  k = n.bit_length()
  r = getrandbits(k)
  while r >= n:
    r = getrandbits(k)
  return r


_BITS = [n.bit_length() for n in range(4097)]


def _shuffle(x, getrandbits):
  """CPython ``Random.shuffle(x)`` (Fisher-Yates, same draws), in place."""
  bits = _BITS if len(x) < len(_BITS) else [n.bit_length() for n in range(len(x) + 1)]
  for i in range(len(x) - 1, 0, -1):
    k = bits[i + 1]
    j = getrandbits(k)
    while j > i:
      j = getrandbits(k)
    x[i], x[j] = x[j], x[i]


def _inlined_rng_matches_stdlib():
  """True when the inlined draws equal this interpreter's ``random.Random``."""
  for seed in (0, 1, 12345):
    a, b = random.Random(seed), random.Random(seed)
    for n in (1, 2, 3, 5, 7, 64, 127, 128, 129, 1000, 30522):
      if a.randint(0, n - 1) != _randbelow(b.getrandbits, n):
        return False
      if a.randint(2, n + 2) != 2 + _randbelow(b.getrandbits, n + 1):
        return False
      x, y = list(range(n)), list(range(n))
      a.shuffle(x)
      _shuffle(y, b.getrandbits)
      if x != y or a.random() != b.random():
        return False
  return True


@functools.cache
def inlined_rng_ok():
  """True when the inlined draws equal this interpreter's ``random.Random``
  (checked on first use, once per process: the check takes ~0.1 s, kept off
  import); False means the stdlib methods are used."""
  ok = _inlined_rng_matches_stdlib()
  if not ok:  # pragma: no cover (a future CPython changed random.py)
    logging.warning("random.Random differs from the inlined copy; using its methods")
  return ok


# ---------------------------------------------------------------------------
# Record encoding


def varint(n):
  """Protobuf base-128 varint of a non-negative int: bytes."""
  out = bytearray()
  while True:
    b = n & 0x7F
    n >>= 7
    if n:
      out.append(b | 0x80)
    else:
      out.append(b)
      return bytes(out)


def varint_table(n):
  """``[varint(i) for i in range(n)]``, built without a call per entry."""
  lo = min(n, 128)
  mid = min(n, 1 << 14)
  hi = min(n, 1 << 21)
  return ([bytes((i,)) for i in range(lo)] +
          [bytes((i & 0x7F | 0x80, i >> 7)) for i in range(lo, mid)] +
          [bytes((i & 0x7F | 0x80, (i >> 7) & 0x7F | 0x80, i >> 14)) for i in range(mid, hi)] +
          [varint(i) for i in range(hi, n)])


def _len_delimited(tag, payload):
  return tag + varint(len(payload)) + payload


class RecordEncoder:
  """Serializes instances as ``tf.train.Example`` bytes, the original's features.

  Features, in the original's order: ``input_ids``, ``input_mask``,
  ``segment_ids`` (int64, ``[max_seq_length]``, zero-padded),
  ``masked_lm_positions``, ``masked_lm_ids`` (int64,
  ``[max_predictions_per_seq]``, zero-padded), ``masked_lm_weights`` (float,
  1.0 per prediction then 0.0), ``next_sentence_labels`` (int64, ``[1]``,
  1 = random next). Packed repeated fields, as protobuf writes them; the
  bytes parse to the same ``tf.train.Example`` as the original's.

  Args:
    max_token_id: the largest id that can occur (``len(vocab) - 1``).
    max_seq_length, max_predictions_per_seq: the padded lengths.
  """

  def __init__(self, max_token_id, max_seq_length, max_predictions_per_seq):
    self.max_seq_length = max_seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    self._var = varint_table(max(max_token_id, max_seq_length) + 1)
    self._key = {name: b"\x0a" + varint(len(name)) + name.encode() + b"\x12"
                 for name in FEATURE_NAMES}
    self._fixed = {}
    # Entry prefix by packed-payload length (ids below 2**35: at most 5
    # bytes per varint).
    self._prefix = {name: [self._int_prefix(name, p)
                           for p in range(5 * max(max_seq_length, max_predictions_per_seq) + 1)]
                    for name in ("input_ids", "masked_lm_positions", "masked_lm_ids")}
    self._labels = [self._int_entry("next_sentence_labels", b"\x00"),
                    self._int_entry("next_sentence_labels", b"\x01")]

  def _len(self, n):
    return self._var[n] if n < len(self._var) else varint(n)

  def _int_prefix(self, name, p):
    """Bytes of an int64 map entry before its packed payload of ``p`` bytes."""
    inner = 1 + len(self._len(p)) + p
    feat = 1 + len(self._len(inner)) + inner
    body = len(self._key[name]) + len(self._len(feat)) + feat
    return (b"\x0a" + self._len(body) + self._key[name] + self._len(feat) + b"\x1a" +
            self._len(inner) + b"\x0a" + self._len(p))

  def _entry(self, name, feature):
    body = self._key[name] + self._len(len(feature)) + feature
    return b"\x0a" + self._len(len(body)) + body

  def _int_entry(self, name, payload):
    # Feature.int64_list (field 3) -> Int64List.value (field 1, packed).
    inner = b"\x0a" + self._len(len(payload)) + payload
    return self._entry(name, b"\x1a" + self._len(len(inner)) + inner)

  def _float_entry(self, name, payload):
    # Feature.float_list (field 2) -> FloatList.value (field 1, packed).
    return self._entry(name, _len_delimited(b"\x12", _len_delimited(b"\x0a", payload)))

  def _mask_and_segments(self, n, len_a):
    key = (n, len_a)
    got = self._fixed.get(key)
    if got is None:
      pad = self.max_seq_length - n
      got = (self._int_entry("input_mask", b"\x01" * n + b"\x00" * pad) +
             self._int_entry("segment_ids", b"\x00" * (len_a + 2) +
                             b"\x01" * (n - len_a - 2) + b"\x00" * pad))
      self._fixed[key] = got
    return got

  def _weights(self, m):
    key = -1 - m
    got = self._fixed.get(key)
    if got is None:
      got = self._fixed[key] = self._float_entry(
          "masked_lm_weights", struct.pack("<%df" % self.max_predictions_per_seq,
                                           *([1.0] * m + [0.0] * (
                                               self.max_predictions_per_seq - m))))
    return got

  def encode(self, input_ids, len_a, positions, label_ids, is_random_next):
    """One record.

    Args:
      input_ids: ids of ``[CLS] A [SEP] B [SEP]`` after masking (list of int,
        at most ``max_seq_length``).
      len_a: number of A tokens (segment 0 is ``len_a + 2`` long).
      positions: sorted masked positions (list of int).
      label_ids: original ids at ``positions``.
      is_random_next: bool.

    Returns:
      the serialized ``tf.train.Example`` (bytes).

    Raises:
      InputError: more tokens than ``max_seq_length`` or predictions than
        ``max_predictions_per_seq``.
    """
    n = len(input_ids)
    m = len(positions)
    if n > self.max_seq_length or m > self.max_predictions_per_seq:
      raise InputError("instance of %d tokens / %d predictions exceeds "
                       "max_seq_length %d / max_predictions_per_seq %d" %
                       (n, m, self.max_seq_length, self.max_predictions_per_seq))
    var = self._var.__getitem__
    mpad = b"\x00" * (self.max_predictions_per_seq - m)
    return self.encode_payloads(
        b"".join(map(var, input_ids)) + b"\x00" * (self.max_seq_length - n), n, len_a,
        b"".join(map(var, positions)) + mpad, b"".join(map(var, label_ids)) + mpad,
        m, is_random_next)

  def encode_payloads(self, ids_payload, n, len_a, positions_payload, labels_payload,
                      m, is_random_next):
    """One record from already packed, already padded varint payloads.

    Args:
      ids_payload: varints of the ``max_seq_length`` padded input ids (bytes).
      n: unpadded length; len_a: number of A tokens.
      positions_payload, labels_payload: varints of the
        ``max_predictions_per_seq`` padded positions / label ids (bytes).
      m: number of predictions; is_random_next: bool.

    Returns:
      the serialized ``tf.train.Example`` (bytes).
    """
    prefix = self._prefix
    features = b"".join((
        prefix["input_ids"][len(ids_payload)], ids_payload,
        self._fixed.get((n, len_a)) or self._mask_and_segments(n, len_a),
        prefix["masked_lm_positions"][len(positions_payload)], positions_payload,
        prefix["masked_lm_ids"][len(labels_payload)], labels_payload,
        self._fixed.get(-1 - m) or self._weights(m),
        self._labels[1 if is_random_next else 0]))
    return b"\x0a" + self._len(len(features)) + features


# ---------------------------------------------------------------------------
# TFRecord files


def _load_crc32c():
  try:
    import google_crc32c  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return google_crc32c.value if google_crc32c.implementation == "c" else None


_CRC32C = _load_crc32c()


_U32 = struct.Struct("<I")


def _masked_crc(data):
  crc = _CRC32C(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordWriter:
  """Writes a TFRecord file atomically (temporary name, renamed on ``commit``).

  Framing per record, as ``tf.io.TFRecordWriter``: ``uint64`` length,
  masked CRC-32C of the length, the data, masked CRC-32C of the data (all
  little-endian). Uses the ``google-crc32c`` library; without it, falls back
  to ``tf.io.TFRecordWriter`` (imports TensorFlow).

  Args:
    path: the final file name; its directory is created.
  """

  def __init__(self, path):
    self.path = path
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    self._tmp = io_utils.temp_name(path)
    self.count = 0
    self._headers = {}
    if _CRC32C is not None:
      self._f = open(self._tmp, "wb")  # pylint: disable=consider-using-with
      self._tf = None
    else:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      self._f = None
      self._tf = tf.io.TFRecordWriter(self._tmp)

  def _header(self, n):
    """Length + masked CRC of the length (12 bytes), cached per length."""
    got = self._headers.get(n)
    if got is None:
      length = struct.pack("<Q", n)
      got = self._headers[n] = length + struct.pack("<I", _masked_crc(length))
    return got

  def write(self, record):
    """Appends one record (bytes)."""
    if self._f is not None:
      self._f.write(self._header(len(record)) + record +
                    struct.pack("<I", _masked_crc(record)))
    else:
      self._tf.write(record)
    self.count += 1

  def write_many(self, records):
    """Appends records (a list of bytes) in order, framed in one buffer."""
    if self._f is None:
      for record in records:
        self.write(record)
      return
    headers, header, pack, crc = self._headers, self._header, _U32.pack, _masked_crc
    for i in range(0, len(records), 4096):  # ~6 MB buffers at seq 128
      self._f.write(b"".join([b for r in records[i:i + 4096] for b in (
          headers.get(len(r)) or header(len(r)), r, pack(crc(r)))]))
    self.count += len(records)

  @property
  def tmp_path(self):
    """The temporary file being written."""
    return self._tmp

  def commit_to_temp(self):
    """Closes the file, leaving it under :attr:`tmp_path` (the caller renames)."""
    if self._f is not None:
      self._f.close()
    else:
      self._tf.close()

  def commit(self):
    """Closes the file and renames it to its final name."""
    self.commit_to_temp()
    os.replace(self._tmp, self.path)

  def abort(self):
    """Closes and deletes the temporary file (the final name is untouched)."""
    try:
      if self._f is not None:
        self._f.close()
      elif self._tf is not None:
        self._tf.close()
    finally:
      if os.path.exists(self._tmp):
        os.remove(self._tmp)


def write_records(records, output_files):
  """Writes ``records`` round-robin over ``output_files`` (the original's order).

  Every file is written under a temporary name; all are renamed only when
  all are whole.

  Returns:
    number of records written.
  """
  writers = []
  try:
    for p in output_files:
      writers.append(TFRecordWriter(p))
    n = len(writers)
    for i, record in enumerate(records):
      writers[i % n].write(record)
  except BaseException:
    for w in writers:
      w.abort()
    raise
  for w in writers:
    w.commit()
  return len(records)


# ---------------------------------------------------------------------------
# Instance creation (faithful)


class _Context:
  """Per-run constants of the faithful instance builder."""

  def __init__(self, vocab, rng, max_seq_length, short_seq_prob, masked_lm_prob,
               max_predictions_per_seq, do_whole_word_mask, encoder):
    vocab_words = list(vocab.keys())
    self.rand_ids = [vocab[w] for w in vocab_words]
    self.num_words = len(vocab_words)
    inv = {}
    for w, i in vocab.items():
      inv[i] = w
    self.continuation = bytearray(max(vocab.values()) + 1)
    for i, w in inv.items():
      if w.startswith("##"):
        self.continuation[i] = 1
    self.cls_id = vocab["[CLS]"]
    self.sep_id = vocab["[SEP]"]
    self.mask_id = vocab["[MASK]"]
    self.rng = rng
    self.max_seq_length = max_seq_length
    self.short_seq_prob = short_seq_prob
    self.masked_lm_prob = masked_lm_prob
    self.max_predictions_per_seq = max_predictions_per_seq
    self.do_whole_word_mask = do_whole_word_mask
    self.encoder = encoder


def _records_from_document(ctx, all_documents, document_index, out):
  """Appends the encoded instances of one document for one pass to ``out``.

  Same control flow and random draws as the original
  ``create_instances_from_document`` + ``truncate_seq_pair`` +
  ``create_masked_lm_predictions`` (see the reference port in
  :mod:`bert_tf.data.pretraining_data`).
  """
  rng = ctx.rng
  rand = rng.random
  getrandbits = rng.getrandbits
  if inlined_rng_ok():
    randbelow = lambda n: _randbelow(getrandbits, n)  # pylint: disable=unnecessary-lambda-assignment
    shuffle = lambda x: _shuffle(x, getrandbits)  # pylint: disable=unnecessary-lambda-assignment
  else:  # pragma: no cover
    randbelow = lambda n: rng.randint(0, n - 1)  # pylint: disable=unnecessary-lambda-assignment
    shuffle = rng.shuffle
  document = all_documents[document_index]
  num_docs = len(all_documents)
  max_num_tokens = ctx.max_seq_length - 3
  target_seq_length = max_num_tokens
  if rand() < ctx.short_seq_prob:
    target_seq_length = 2 + randbelow(max_num_tokens - 1)
  masked_lm_prob = ctx.masked_lm_prob
  max_pred = ctx.max_predictions_per_seq
  wwm = ctx.do_whole_word_mask
  cont = ctx.continuation
  mask_id = ctx.mask_id
  rand_ids = ctx.rand_ids
  num_words = ctx.num_words
  encode = ctx.encoder.encode
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = 1 + randbelow(len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a += current_chunk[j]
        tokens_b = []
        if len(current_chunk) == 1 or rand() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = randbelow(num_docs)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = randbelow(len(random_document))
          for j in range(random_start, len(random_document)):
            tokens_b += random_document[j]
            if len(tokens_b) >= target_b_length:
              break
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          for j in range(a_end, len(current_chunk)):
            tokens_b += current_chunk[j]
        # truncate_seq_pair
        while len(tokens_a) + len(tokens_b) > max_num_tokens:
          trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
          if rand() < 0.5:
            del trunc[0]
          else:
            trunc.pop()
        la = len(tokens_a)
        lb = len(tokens_b)
        assert la >= 1 and lb >= 1
        ids = [ctx.cls_id]
        ids += tokens_a
        ids.append(ctx.sep_id)
        ids += tokens_b
        ids.append(ctx.sep_id)
        n = la + lb + 3
        num_to_predict = min(max_pred, max(1, int(round(n * masked_lm_prob))))
        out_ids = ids[:]
        if not wwm:
          # Candidates: every position but [CLS], the middle and the final
          # [SEP] (the tokenizer never emits "[CLS]"/"[SEP]": it splits the
          # brackets off as punctuation).
          cand = list(range(1, la + 1))
          cand += range(la + 2, n - 1)
          shuffle(cand)
          chosen = cand[:num_to_predict]
          for index in chosen:
            if rand() < 0.8:
              out_ids[index] = mask_id
            elif rand() < 0.5:
              pass
            else:
              out_ids[index] = rand_ids[randbelow(num_words)]
          chosen.sort()
        else:
          cand = []
          for index in range(1, n - 1):
            if index == la + 1:
              continue
            if cand and cont[ids[index]]:
              cand[-1].append(index)
            else:
              cand.append([index])
          shuffle(cand)
          chosen = []
          for index_set in cand:
            if len(chosen) >= num_to_predict:
              break
            if len(chosen) + len(index_set) > num_to_predict:
              continue
            # Groups are disjoint, so no index is ever already covered.
            for index in index_set:
              if rand() < 0.8:
                out_ids[index] = mask_id
              elif rand() < 0.5:
                pass
              else:
                out_ids[index] = rand_ids[randbelow(num_words)]
              chosen.append(index)
          chosen.sort()
        out.append(encode(out_ids, la, chosen, [ids[p] for p in chosen],
                          is_random_next))
      current_chunk = []
      current_length = 0
    i += 1


def create_records(all_documents, vocab, rng, max_seq_length=128, dupe_factor=10,
                   short_seq_prob=0.1, masked_lm_prob=0.15,
                   max_predictions_per_seq=20, do_whole_word_mask=False,
                   progress=None):
  """Every record of the corpus, in the original's final (shuffled) order.

  Args:
    all_documents: from :func:`read_documents` (shuffled here in place).
    vocab: ``{token: id}`` of the tokenizer (``vocab_words`` is its keys, in
      order, as in the original).
    rng: ``random.Random(random_seed)``.
    progress: optional callable ``(done_documents, total_documents)``.

  Returns:
    list of serialized ``tf.train.Example`` (bytes).

  Raises:
    InputError: no document, or ``max_seq_length`` < 5.
  """
  if not all_documents:
    raise InputError("the input files hold no text that tokenizes to anything")
  if max_seq_length < 5:
    raise InputError("--max_seq_length must be at least 5, got %d" % max_seq_length)
  encoder = RecordEncoder(max(vocab.values()), max_seq_length, max_predictions_per_seq)
  ctx = _Context(vocab, rng, max_seq_length, short_seq_prob, masked_lm_prob,
                 max_predictions_per_seq, do_whole_word_mask, encoder)
  rng.shuffle(all_documents)
  records = []
  total = dupe_factor * len(all_documents)
  done = 0
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      _records_from_document(ctx, all_documents, document_index, records)
      done += 1
      if progress is not None:
        progress(done, total)
  rng.shuffle(records)
  return records


def peak_rss_mb():
  """Peak resident set size of this process so far, in MiB (Linux ``ru_maxrss``)."""
  import resource  # pylint: disable=g-import-not-at-top
  kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return kb / 1024.0 if sys.platform != "darwin" else kb / 2.0 ** 20
