"""The pretraining record schema, its encoder and the TFRecord writer.

Source: google-research/bert ``create_pretraining_data.py``
(``write_instance_to_example_files``: the feature names, dtypes and order)
and ``run_pretraining.py`` (``input_fn_builder``: the same names read back).

One implementation of each, shared by the faithful, sharded and dynamic
modes:

* :data:`FEATURE_NAMES` / :data:`FEATURE_DTYPES`: the original's features;
  :data:`DOCUMENT_FEATURES`: the dynamic mode's tokenized-document records;
* varints: :func:`varint` (one int), :func:`varint_table` (a lookup table)
  and :class:`PackedVarints` (numpy rows, the sharded mode's batches);
* :class:`RecordEncoder`: ``tf.train.Example`` bytes written by hand (the
  map inside ``tf.train.Example`` has no fixed byte order, so records are
  compared parsed; this module always writes the original's insertion
  order); :func:`encode_int64_example` for document records;
* :class:`TFRecordWriter` / :func:`write_records`: TFRecord framing with
  the ``google-crc32c`` library, atomic (temporary name, renamed when whole);
* :func:`parse_example_to_numpy`: a protobuf decoder for tests and checks.

TF-free (worker processes fork from it): without ``google-crc32c`` the
writer falls back to ``tf.io.TFRecordWriter``, loaded by name at run time.
"""

import importlib
import os
import struct
from typing import Dict, Iterable, List, Sequence

import numpy as np

from bert_tf import errors
from bert_tf import io_utils

InputError = errors.InputError
RecordError = errors.RecordError

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
"""The original's features, in its order: ``input_ids``, ``input_mask``,
``segment_ids`` ``[max_seq_length]``; ``masked_lm_positions``,
``masked_lm_ids``, ``masked_lm_weights`` ``[max_predictions_per_seq]``;
``next_sentence_labels`` ``[1]`` (1 = random next)."""

FEATURE_DTYPES = {name: ("float32" if name == "masked_lm_weights" else "int64")
                  for name in FEATURE_NAMES}
"""``{feature name: "int64" | "float32"}`` as stored in the records."""

DOCUMENT_FEATURES = ("token_ids", "sentence_lengths")
"""Tokenized-document records (dynamic mode): int64 ``token_ids`` (every
sentence's ids concatenated) and ``sentence_lengths`` (they sum to
``len(token_ids)``)."""


# ---------------------------------------------------------------------------
# Varints


def varint(n: int) -> bytes:
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


def varint_table(n: int) -> List[bytes]:
  """``[varint(i) for i in range(n)]`` (list of bytes), built without a call per entry."""
  lo = min(n, 128)
  mid = min(n, 1 << 14)
  hi = min(n, 1 << 21)
  return ([bytes((i,)) for i in range(lo)] +
          [bytes((i & 0x7F | 0x80, i >> 7)) for i in range(lo, mid)] +
          [bytes((i & 0x7F | 0x80, (i >> 7) & 0x7F | 0x80, i >> 14)) for i in range(mid, hi)] +
          [varint(i) for i in range(hi, n)])


class PackedVarints:
  """Row-wise packed protobuf varints of int arrays with values in ``[0, max_value]``.

  One table lookup per value gives its varint bytes (``max_value < 2**21``:
  at most 3, held little-endian in a uint32), another which of those 4 bytes
  are used; one ``compress`` drops the unused ones.

  Args:
    max_value: the largest value that will be encoded (``< 2**21``).

  Example:

    >>> buf, offsets = PackedVarints(30521)(np.array([[1, 300], [5, 0]]))
    >>> buf[offsets[0]:offsets[1]]  # b"\x01\xac\x02", row 0's varints
  """

  def __init__(self, max_value: int):
    v = np.arange(max_value + 1, dtype=np.uint32)
    nb = 1 + (v >= 128).astype(np.int8) + (v >= 16384).astype(np.int8)
    self.table = ((v & 0x7F) | ((nb > 1).astype(np.uint32) << 7) |
                  (((v >> 7) & 0x7F) << 8) | ((nb > 2).astype(np.uint32) << 15) |
                  ((v >> 14) << 16))
    # keep[v] viewed as 4 bools: which of the 4 bytes of table[v] are used.
    self.keep = (np.arange(4)[None, :] < nb[:, None]).astype(np.uint8).view(np.uint32).ravel()

  def __call__(self, values: np.ndarray):
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


def _len_delimited(tag, payload):
  return tag + varint(len(payload)) + payload


def encode_int64_example(features: Dict[str, Sequence[int]]) -> bytes:
  """A ``tf.train.Example`` of int64 features, serialized (bytes).

  Args:
    features: ``{name: non-negative ints}``, written in this order as packed
      ``int64_list`` features (as protobuf writes them).

  Returns:
    the serialized ``tf.train.Example`` (bytes).
  """
  entries = []
  for name, values in features.items():
    key = _len_delimited(b"\x0a", name.encode("utf-8"))
    payload = b"".join(map(varint, values))
    feature = _len_delimited(b"\x1a", _len_delimited(b"\x0a", payload))
    entries.append(_len_delimited(b"\x0a", key + _len_delimited(b"\x12", feature)))
  return _len_delimited(b"\x0a", b"".join(entries))


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

  Example:

    >>> enc = RecordEncoder(30521, max_seq_length=8, max_predictions_per_seq=2)
    >>> record = enc.encode([101, 7592, 103, 102, 2088, 102], 2, [2], [2088], False)
    >>> parse_example_to_numpy(record)["masked_lm_ids"]  # array([2088, 0])
  """

  def __init__(self, max_token_id: int, max_seq_length: int,
               max_predictions_per_seq: int):
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


def encode_document(document: Sequence[Sequence[int]]) -> bytes:
  """One tokenized document (list of id lists) -> serialized ``tf.train.Example``.

  Features (:data:`DOCUMENT_FEATURES`): int64 ``token_ids`` (every
  sentence's ids concatenated) and ``sentence_lengths`` (one per sentence).
  """
  return encode_int64_example({
      "token_ids": [t for sentence in document for t in sentence],
      "sentence_lengths": [len(s) for s in document]})


# ---------------------------------------------------------------------------
# TFRecord files


def count_tfrecords(path: str) -> int:
  """Records in a local TFRecord file, by its length headers (CRCs unchecked).

  Raises:
    RecordError: the file ends inside a record (a partial file).
  """
  n, size = 0, os.path.getsize(path)
  with open(path, "rb") as f:
    pos = 0
    while pos < size:
      header = f.read(12)
      if len(header) < 12:
        raise RecordError("%s: ends inside a record header" % path)
      pos += 12 + struct.unpack("<Q", header[:8])[0] + 4
      if pos > size:
        raise RecordError("%s: ends inside record %d" % (path, n))
      f.seek(pos)
      n += 1
  return n


def _load_crc32c():
  import google_crc32c  # pylint: disable=g-import-not-at-top
  # The C extension when it is built for this platform, else the package's
  # pure-Python implementation (same values, slower).
  return google_crc32c.value


_CRC32C = _load_crc32c()


_U32 = struct.Struct("<I")


def _masked_crc(data):
  crc = _CRC32C(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordWriter:
  """Writes a TFRecord file atomically (temporary name, renamed on ``commit``).

  Framing per record, as ``tf.io.TFRecordWriter`` (byte for byte):
  ``uint64`` length, masked CRC-32C of the length, the data, masked CRC-32C
  of the data (all little-endian), with the ``google-crc32c`` library.

  Args:
    path: the final file name; its directory is created.

  Example:

    >>> w = TFRecordWriter("/tmp/out.tfrecord")
    >>> w.write(b"record bytes")
    >>> w.commit()  # now /tmp/out.tfrecord exists, whole
  """

  def __init__(self, path: str):
    self.path = path
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    self._tmp = io_utils.temp_name(path)
    self.count = 0
    self._headers = {}
    self._f = open(self._tmp, "wb")  # pylint: disable=consider-using-with

  def _header(self, n):
    """Length + masked CRC of the length (12 bytes), cached per length."""
    got = self._headers.get(n)
    if got is None:
      length = struct.pack("<Q", n)
      got = self._headers[n] = length + struct.pack("<I", _masked_crc(length))
    return got

  def write(self, record: bytes) -> None:
    """Appends one record (bytes)."""
    self._f.write(self._header(len(record)) + record +
                  struct.pack("<I", _masked_crc(record)))
    self.count += 1

  def write_many(self, records: Sequence[bytes]) -> None:
    """Appends records (a list of bytes) in order, framed in one buffer."""
    headers, header, pack, crc = self._headers, self._header, _U32.pack, _masked_crc
    for i in range(0, len(records), 4096):  # ~6 MB buffers at seq 128
      self._f.write(b"".join([b for r in records[i:i + 4096] for b in (
          headers.get(len(r)) or header(len(r)), r, pack(crc(r)))]))
    self.count += len(records)

  @property
  def tmp_path(self) -> str:
    """The temporary file being written."""
    return self._tmp

  def commit_to_temp(self) -> None:
    """Closes the file, leaving it under :attr:`tmp_path` (the caller renames)."""
    self._f.close()

  def commit(self) -> None:
    """Closes the file and renames it to its final name."""
    self.commit_to_temp()
    os.replace(self._tmp, self.path)

  def abort(self) -> None:
    """Closes and deletes the temporary file (the final name is untouched)."""
    try:
      self._f.close()
    finally:
      if os.path.exists(self._tmp):
        os.remove(self._tmp)


def write_records(records: Iterable[bytes], output_files: Sequence[str]) -> int:
  """Writes ``records`` round-robin over ``output_files`` (the original's order).

  Every file is written under a temporary name; all are renamed only when
  all are whole. An exception raised while iterating ``records`` (a
  generator may raise to reject its input) leaves no file behind.

  Args:
    records: serialized records (bytes), a list or any iterable.
    output_files: paths; record ``i`` goes to ``output_files[i % len]``.

  Returns:
    number of records written.
  """
  writers = []
  count = 0
  try:
    for p in output_files:
      writers.append(TFRecordWriter(p))
    n = len(writers)
    if isinstance(records, list) and n == 1:
      writers[0].write_many(records)
      count = len(records)
    else:
      for count, record in enumerate(records, 1):
        writers[(count - 1) % n].write(record)
  except BaseException:
    for w in writers:
      w.abort()
    raise
  for w in writers:
    w.commit()
  return count


# ---------------------------------------------------------------------------
# Decoding (tests and checks)


def _read_varint(buf, i):
  shift = result = 0
  while True:
    b = buf[i]
    i += 1
    result |= (b & 0x7F) << shift
    if b < 0x80:
      return result, i
    shift += 7


def _fields(buf):
  """``(field number, wire type, value)`` of a protobuf message (bytes)."""
  i, n = 0, len(buf)
  while i < n:
    key, i = _read_varint(buf, i)
    field, wire = key >> 3, key & 7
    if wire == 0:
      value, i = _read_varint(buf, i)
    elif wire == 2:
      size, i = _read_varint(buf, i)
      value, i = buf[i:i + size], i + size
    elif wire == 5:
      value, i = buf[i:i + 4], i + 4
    elif wire == 1:
      value, i = buf[i:i + 8], i + 8
    else:
      raise RecordError("unsupported protobuf wire type %d" % wire)
    if i > n:
      raise RecordError("truncated protobuf message")
    yield field, wire, value


def _int64_values(feature_list):
  out = []
  for _, wire, value in _fields(feature_list):
    if wire == 2:  # packed
      j = 0
      while j < len(value):
        v, j = _read_varint(value, j)
        out.append(v)
    else:
      out.append(value)
  return [v - (1 << 64) if v >= 1 << 63 else v for v in out]


def _float_values(feature_list):
  raw = b"".join(value for _, _, value in _fields(feature_list))
  return np.frombuffer(raw, "<f4").astype(np.float32)


def parse_example_to_numpy(serialized: bytes) -> Dict[str, np.ndarray]:
  """Parses one serialized ``tf.train.Example`` into ``{name: np.ndarray}``.

  int64 features become int64 arrays, float features float32 arrays, bytes
  features object arrays of bytes; packed and unpacked lists both parse.

  Raises:
    RecordError: the bytes are not a protobuf message.
  """
  serialized = bytes(serialized)
  out = {}
  try:
    for field, _, features in _fields(serialized):
      if field != 1:
        continue
      for f2, _, entry in _fields(features):
        if f2 != 1:
          continue
        name, feature = "", b""
        for f3, _, v in _fields(entry):
          if f3 == 1:
            name = v.decode("utf-8")
          elif f3 == 2:
            feature = v
        value = np.zeros([0], np.int64)
        for kind, _, v in _fields(feature):
          if kind == 3:
            value = np.array(_int64_values(v), np.int64)
          elif kind == 2:
            value = _float_values(v)
          elif kind == 1:
            value = np.array([b for _, _, b in _fields(v)], object)
        out[name] = value
  except IndexError:
    raise RecordError("truncated protobuf message") from None
  return out
