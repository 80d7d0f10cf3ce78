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

``preserve_unused_tokens`` is the original's ``--preserve_unused_tokens``
(:func:`bert_tf.tokenization.preserve_token`): a whitespace-separated word
(after cleaning and CJK spacing, before lower-casing) that is exactly
``[unusedN]`` and in the vocab stays one token. tensorflow-text's
``preserve_unused_token`` alone keeps every ``\\[unused\\d+\\]`` match, also
inside a word (``x[unused1]``), when not in the vocab and after our
lower-casing (``[UNUSED1]``); so the words the original keeps are found
first (:meth:`BertPreprocessor.unused_token_starts`) and every other ``[``
gets a space after it, which changes no token (``[`` is always a token of
its own) but leaves tensorflow-text's rule only the words to keep. The ids
are the original's, except for a vocab entry ``[unusedN]`` written with
non-ASCII digits (tensorflow-text matches ``[0-9]``, the original any
Unicode digit; no released vocab has one).
"""

import contextlib
import dataclasses
import os
import threading
from typing import Optional, Sequence

from absl import logging

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as text

from bert_tf import errors
from bert_tf import tokenization

VOCAB_ASSET = "vocab.txt"

# The code points that the original's BasicTokenizer spaces out as CJK
# (``_is_chinese_char``).
_CJK_CHAR = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}"
             r"\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}"
             r"\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")


class BertPreprocessor(tf.Module):
  """Tokenizes and packs one or two batches of raw strings.

  Args:
    vocab_file: WordPiece vocab (one token per line; the lookup table keys
      are the whole lines, a trailing ``\\r`` dropped, as TensorFlow's
      ``TextFileInitializer`` reads them), or the list of those lines (an
      in-memory vocab: id = list index; what a ``.keras`` file's
      :class:`PreprocessorLayer` holds).
    do_lower_case: lower-case and strip accents (uncased models).
    max_seq_length: output width S, specials included (>= 3 for pairs).
    preserve_unused_tokens: keep vocab entries ``[unusedN]`` whole, as the
      original's ``--preserve_unused_tokens`` (see the module docstring).

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

  def __init__(self, vocab_file, do_lower_case: bool = True,
               max_seq_length: int = 128, name: str = "bert_preprocessor",
               preserve_unused_tokens: bool = False):
    super().__init__(name=name)
    if isinstance(vocab_file, (list, tuple)):
      self.vocab_file = None
      lines = [str(t) for t in vocab_file]
      # One str, not a list: tf.Module would track a list attribute.
      self._vocab_text = "\n".join(lines)
      vocab = {}
      for index, token in enumerate(lines):
        if token in vocab:
          raise tokenization.VocabError(
              "in-memory vocab: duplicate token %r (entries %d and %d)"
              % (token, vocab[token] + 1, index + 1))
        vocab[token] = index
      tokenization.check_vocab(vocab, "<in-memory vocab>")
      initializer = tf.lookup.KeyValueTensorInitializer(
          tf.constant(lines, tf.string), tf.range(len(lines), dtype=tf.int64))
    else:
      self.vocab_file = os.fspath(vocab_file)
      self._vocab_text = None
      vocab = tokenization.load_vocab(vocab_file)
      tokenization.check_vocab(vocab, vocab_file)
      initializer = tf.lookup.TextFileInitializer(
          self.vocab_file, key_dtype=tf.string,
          key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
          value_dtype=tf.int64, value_index=tf.lookup.TextFileIndex.LINE_NUMBER)
    if max_seq_length < 3:
      raise errors.ParamsError("max_seq_length must be at least 3, got %d"
                               % max_seq_length, argument="max_seq_length")
    self.do_lower_case = bool(do_lower_case)
    self.max_seq_length = int(max_seq_length)
    self.preserve_unused_tokens = bool(preserve_unused_tokens)
    # A CutTally while a caller traces a pipeline it wants cuts counted in
    # (counting_cuts); None in every export and task pipeline.
    self._cut_tally = None
    self.vocab_size = len(vocab)
    self.cls_id = vocab["[CLS]"]
    self.sep_id = vocab["[SEP]"]
    self.pad_id = vocab.get("[PAD]", 0)
    self.unk_id = vocab["[UNK]"]
    table = tf.lookup.StaticVocabularyTable(initializer, num_oov_buckets=1)
    self._table = table
    # Lower-casing and accent stripping are done in normalize() exactly as
    # the reference does (str.lower, NFD, drop Mn); tensorflow-text's own
    # lower_case=True applies NFKC case folding (ß -> ss, ligatures, ...).
    # 200 bytes: ASCII words up to the reference's 200-character limit.
    self.tokenizer = text.BertTokenizer(
        table, token_out_type=tf.int64, unknown_token="[UNK]",
        lower_case=False, max_bytes_per_word=200,
        preserve_unused_token=self.preserve_unused_tokens)

  def vocab_lines(self) -> list:
    """The lookup table's keys in id order (list of str): the vocab file's
    lines as TensorFlow reads them (split on ``\\n``, one trailing ``\\r``
    dropped, a final newline adds no line), or the in-memory list.

    Raises:
      tokenization.VocabError: the vocab file can no longer be read.
    """
    if self._vocab_text is not None:
      return self._vocab_text.split("\n")
    return read_vocab_lines(self.vocab_file)

  @staticmethod
  def sanitize(strings):
    """Valid UTF-8 with the original's deleted characters removed ([B] string)."""
    s = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace",
                                     replacement_char=0xFFFD)
    # Python's str.split() in the reference also splits on U+2028/U+2029.
    s = tf.strings.regex_replace(s, r"[\t\n\r\p{Zs}\x{2028}\x{2029}]", " ")
    return tf.strings.regex_replace(s, r"[\x{0}\x{FFFD}\p{Cc}\p{Cf}]", "")

  def _fold_case(self, s):
    """For uncased models: ``str.lower()``, NFD, Unicode Mn removed."""
    if self.do_lower_case:
      s = tf.strings.lower(s, encoding="utf-8")
      s = text.normalize_utf8(s, "NFD")
      s = tf.strings.regex_replace(s, r"\p{Mn}", "")
    return s

  def unused_token_starts(self, chars: tf.RaggedTensor) -> tf.Tensor:
    """Where the original's ``--preserve_unused_tokens`` keeps a word whole.

    Args:
      chars: string RaggedTensor [B, (C)], one code point per element (any
        text: each is sanitized here, as :meth:`sanitize` does).

    Returns:
      bool [N] over ``chars.flat_values``: True at the ``[`` of every word
      that the reference ``BasicTokenizer`` keeps (the sanitized word,
      between spaces, CJK characters and the row's ends, is exactly
      ``[unused<ASCII digits>]`` and in the vocab), False elsewhere.
    """
    flat = chars.flat_values
    san = self.sanitize(flat)
    n = tf.size(flat, out_type=tf.int64)
    # Word boundaries: a space, a CJK character (the original spaces them
    # out before splitting on whitespace), a row start.
    boundary = tf.logical_or(tf.equal(san, " "),
                             tf.strings.regex_full_match(san, _CJK_CHAR))
    index = tf.range(n)
    row_start = tf.equal(index, tf.gather(chars.row_starts(), chars.value_rowids()))
    after_boundary = tf.concat([[True], boundary[:-1]], 0)[:n]
    new_word = boundary | after_boundary | row_start
    word = tf.cumsum(tf.cast(new_word, tf.int64)) - 1
    words = tf.strings.unsorted_segment_join(san, word, num_segments=n)
    keep = tf.logical_and(
        tf.strings.regex_full_match(words, r"\[unused[0-9]+\]"),
        # Not the OOV bucket (the last id: size() counts it).
        tf.not_equal(self._table.lookup(words), self._table.size() - 1))
    return tf.logical_and(tf.gather(keep, word), tf.equal(flat, "["))

  def _space_brackets(self, chars):
    """Code points [B, (C)] -> the same with every ``[`` that does not start a
    kept word followed by a space (see the module docstring)."""
    flat = chars.flat_values
    lone = tf.logical_and(tf.equal(flat, "["),
                          tf.logical_not(self.unused_token_starts(chars)))
    return chars.with_flat_values(tf.where(lone, "[ ", flat))

  def normalize(self, strings):
    """Sanitized, and for uncased models lower-cased with accents stripped.

    Matches the reference ``BasicTokenizer``: ``str.lower()``, NFD, then
    Unicode Mn (non-spacing marks) removed. [B] string. With
    ``preserve_unused_tokens`` every ``[`` that does not start a word to
    keep is followed by a space (no token changes).
    """
    s = self.sanitize(strings)
    if self.preserve_unused_tokens:
      chars = tf.strings.unicode_split(s, "UTF-8")
      s = tf.strings.reduce_join(self._space_brackets(chars), axis=-1)
    return self._fold_case(s)

  def normalize_chars(self, chars: tf.RaggedTensor) -> tf.RaggedTensor:
    """:meth:`normalize` of each code point on its own, for offsets.

    Args:
      chars: string RaggedTensor [B, (C)], one code point per element.

    Returns:
      string RaggedTensor [B, (C)]: each code point's normalized text (empty
      for a deleted one; ``"[ "`` for a ``[`` that does not start a word that
      ``preserve_unused_tokens`` keeps). Joined per row, it tokenizes as
      :meth:`normalize` of the row, except that NFD's canonical reordering
      of combining marks does not cross code points.
    """
    if self.preserve_unused_tokens:
      chars = self._space_brackets(chars)
    return chars.with_flat_values(self._fold_case(self.sanitize(chars.flat_values)))

  def tokenize(self, strings):
    """Word-piece ids of each string: int64 RaggedTensor [B, (tokens)]."""
    tokens = self.tokenizer.tokenize(self.normalize(strings))
    return tokens.merge_dims(-2, -1)

  def pack(self, segments, truncation: str = "round_robin"):
    """Truncates and packs a list of 1 or 2 ragged id batches into [B, S] inputs.

    Args:
      segments: list of int RaggedTensors [B, (T)].
      truncation: ``"round_robin"`` (the original ``_truncate_seq_pair``:
        longest first, ties trim the second) or ``"waterfall"`` (the first
        segment keeps what fits, the second the rest: the first window of
        the original ``run_squad.py``, query then context).

    Returns:
      dict of int32 [B, max_seq_length]: ``input_ids``, ``input_mask``,
      ``segment_ids``.
    """
    budget = self.max_seq_length - len(segments) - 1
    if self._cut_tally is not None:
      self._cut_tally.record(sum(s.row_lengths() for s in segments) > budget)
    if truncation == "waterfall":
      trimmer = text.WaterfallTrimmer(max_seq_length=budget)
    else:
      trimmer = text.RoundRobinTrimmer(max_seq_length=budget)
    trimmed = trimmer.trim(segments)
    ids, segment_ids = text.combine_segments(
        trimmed, start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id)
    input_ids, input_mask = text.pad_model_inputs(
        ids, self.max_seq_length, pad_value=self.pad_id)
    segment_ids, _ = text.pad_model_inputs(segment_ids, self.max_seq_length)
    return {"input_ids": tf.cast(input_ids, tf.int32),
            "input_mask": tf.cast(input_mask, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32)}

  @contextlib.contextmanager
  def counting_cuts(self, tally: Optional["CutTally"]):
    """Within the block, every :meth:`pack` traced records into ``tally``
    which of its rows it cuts (a :class:`CutTally`; None: nothing).

    For a pipeline traced inside the block (``Dataset.map``): the Keras task
    models count what their ``fit`` / ``evaluate`` / ``predict`` text cut.
    Traced outside it (exports, the tasks' pipelines), :meth:`pack` has no
    counting op.
    """
    previous, self._cut_tally = self._cut_tally, tally
    try:
      yield tally
    finally:
      self._cut_tally = previous

  def record_cuts(self, cut) -> None:
    """Records a batch's bool [B] cut flags into the tally of
    :meth:`counting_cuts` when one is counting (traced into the caller's
    graph); nothing otherwise. For packings other than :meth:`pack` (a
    :class:`PreprocessorLayer`'s long-document methods)."""
    if self._cut_tally is not None:
      self._cut_tally.record(cut)

  def __call__(self, text_a, text_b=None):
    segments = [self.tokenize(text_a)]
    if text_b is not None:
      segments.append(self.tokenize(text_b))
    return self.pack(segments)


@dataclasses.dataclass(frozen=True)
class LengthReport:
  """How many examples of a split are longer than ``max_seq_length``.

  Lengths count every token the packed input would hold untruncated:
  word pieces of all segments plus ``[CLS]`` and one ``[SEP]`` per segment
  (the original ``convert_single_example``'s budget).

  Attributes:
    split: the split's name (``train``, ``dev``, ...).
    examples: number of examples (int).
    truncated: examples whose length exceeds ``max_seq_length`` (int).
    p50, p90, max: length percentiles in tokens (int; 0 for no examples).
    max_seq_length: the length they were cut at (tokens).
    unit: what an example is, plural (``examples``; ``questions``,
      ``sentences`` for SQuAD and NER).
    rule: what counts as cut, as :meth:`line` says it (empty: longer than
      ``max_seq_length``; a task whose long inputs become windows says so).

  Example::

    report = length_report(preprocessor, ["a long text ..."], split="train")
    print(report.line())  # train: 0 of 1 examples (0.0%) longer than ...
  """
  split: str
  examples: int
  truncated: int
  p50: int
  p90: int
  max: int
  max_seq_length: int
  unit: str = "examples"
  rule: str = ""

  @classmethod
  def from_lengths(cls, split: str, lengths, max_seq_length: int, cut=None,
                   unit: str = "examples", rule: str = "") -> "LengthReport":
    """The report of untruncated lengths.

    Args:
      split: the split's name.
      lengths: int [N] token lengths, specials included.
      max_seq_length: the length they are cut at.
      cut: bool [N], the examples counted as cut (default: ``lengths >
        max_seq_length``).
      unit: what an example is, plural (``examples``, ``questions``).
      rule: what "cut" means, for :meth:`line` (default: longer than the
        length flag).

    Returns:
      a :class:`LengthReport` (percentiles by numpy's ``"higher"`` method:
      lengths that occur).
    """
    lengths = np.asarray(lengths, np.int64).reshape(-1)
    if not len(lengths):
      return cls(split, 0, 0, 0, 0, 0, int(max_seq_length), unit, rule)
    cut = lengths > max_seq_length if cut is None else np.asarray(cut, bool)
    return cls(split, int(len(lengths)), int(cut.sum()),
               int(np.percentile(lengths, 50, method="higher")),
               int(np.percentile(lengths, 90, method="higher")), int(lengths.max()),
               int(max_seq_length), unit, rule)

  @property
  def share(self) -> float:
    """``truncated / examples`` (0.0 for an empty split)."""
    return self.truncated / self.examples if self.examples else 0.0

  def line(self, flag: str = "--max_seq_length") -> str:
    """One line for people, naming the share cut and the length flag."""
    rule = self.rule or "longer than %s=%d tokens were cut" % (flag, self.max_seq_length)
    return ("%s: %d of %d %s (%.1f%%) %s (length p50 %d / p90 %d / max %d tokens)" % (
        self.split, self.truncated, self.examples, self.unit, 100 * self.share, rule,
        self.p50, self.p90, self.max))

  def to_dict(self) -> dict:
    """JSON-ready figures, for a run's settings file."""
    out = dataclasses.asdict(self)
    out["share"] = round(self.share, 6)
    return out


def token_lengths(preprocessor: "BertPreprocessor", text_a: Sequence[str],
                  text_b: Optional[Sequence[str]] = None,
                  batch_size: int = 512) -> np.ndarray:
  """Untruncated lengths of raw examples with ``preprocessor``'s tokenizer.

  Each length counts the word pieces of all segments plus ``[CLS]`` and one
  ``[SEP]`` per segment (the original ``convert_single_example``'s budget).

  Args:
    preprocessor: the :class:`BertPreprocessor` that featurizes them.
    text_a: first segments, N strings.
    text_b: second segments (N strings) for pair tasks, else None.
    batch_size: strings tokenized per call (memory bound only).

  Returns:
    int64 numpy [N].

  Raises:
    ValueError: ``text_b`` given with another length than ``text_a``.
  """
  text_a = list(text_a)
  if text_b is not None and len(text_b) != len(text_a):
    raise ValueError("length_report: %d first and %d second segments" %
                     (len(text_a), len(text_b)))
  specials = 2 if text_b is None else 3
  lengths = np.zeros(len(text_a), np.int64)
  for start in range(0, len(text_a), batch_size):
    end = min(start + batch_size, len(text_a))
    n = preprocessor.tokenize(tf.constant(text_a[start:end])).row_lengths().numpy()
    if text_b is not None:
      n = n + preprocessor.tokenize(tf.constant(list(text_b[start:end]))).row_lengths().numpy()
    lengths[start:end] = n + specials
  return lengths


def length_report(preprocessor: "BertPreprocessor", text_a: Sequence[str],
                  text_b: Optional[Sequence[str]] = None, split: str = "train",
                  batch_size: int = 512) -> LengthReport:
  """Measures untruncated lengths of raw examples with ``preprocessor``'s tokenizer.

  Hugging Face's tokenizer warns when a text is longer than the model takes;
  the original cuts silently. This counts what ``pack`` cuts.

  Args:
    preprocessor: the :class:`BertPreprocessor` that featurizes the split.
    text_a: first segments, N strings.
    text_b: second segments (N strings) for pair tasks, else None.
    split: name used in the report's line.
    batch_size: strings tokenized per call (memory bound only).

  Returns:
    A :class:`LengthReport` (:func:`token_lengths`).

  Raises:
    ValueError: ``text_b`` given with another length than ``text_a``.
  """
  return LengthReport.from_lengths(
      split, token_lengths(preprocessor, text_a, text_b, batch_size),
      preprocessor.max_seq_length)


class CutTally:
  """Rows that :meth:`BertPreprocessor.pack` cut, counted while a pipeline
  runs (:meth:`BertPreprocessor.counting_cuts`), for one warning line per
  Keras ``fit`` / ``evaluate`` / ``predict`` call, as Hugging Face's
  tokenizer warns when a text is longer than the model takes.

  Per batch the cut flags are a comparison of the row lengths ``pack``
  already has, added to an int64 [2] CPU variable held here (not by the
  model: nothing goes into a checkpoint or export); ~0 of the pipeline's
  time on 596 batches of SST-2 sentences. Made inside a ``tf.distribute``
  strategy's scope (where a variable would be a distributed one), it counts
  through a ``tf.py_function`` instead (~1 ms a batch, the GIL).

  Attributes:
    rows: rows packed so far (int).
    cut: of those, rows longer than ``max_seq_length`` (int).

  Example::

    tally = CutTally()
    with preprocessor.counting_cuts(tally):
      ds = strings.batch(32).map(preprocessor)
    for batch in ds: ...
    tally.warn("BertClassifier.predict", preprocessor.max_seq_length)
  """

  def __init__(self):
    self._lock = threading.Lock()
    self._py_counts = [0, 0]
    self._counts = None
    if not tf.distribute.has_strategy():
      with tf.init_scope(), tf.device("/CPU:0"):
        self._counts = tf.Variable(tf.zeros([2], tf.int64), trainable=False,
                                   name="cut_tally")

  def _add(self, cut) -> np.int64:
    cut = cut.numpy()
    with self._lock:
      self._py_counts[0] += int(cut.size)
      self._py_counts[1] += int(cut.sum())
    return np.int64(0)

  def record(self, cut) -> None:
    """Adds a batch's bool [B] cut flags (traced into the caller's graph)."""
    if self._counts is None:
      tf.py_function(self._add, [cut], tf.int64)
      return
    self._counts.assign_add(tf.stack([tf.size(cut, out_type=tf.int64),
                                      tf.reduce_sum(tf.cast(cut, tf.int64))]))

  def _totals(self) -> tuple:
    with self._lock:
      rows, cut = self._py_counts
    if self._counts is not None:
      counted = self._counts.numpy()
      rows, cut = rows + int(counted[0]), cut + int(counted[1])
    return rows, cut

  @property
  def rows(self) -> int:
    return self._totals()[0]

  @property
  def cut(self) -> int:
    return self._totals()[1]

  def line(self, caller: str, max_seq_length: int, unit: str = "texts",
           rule: Optional[str] = None) -> Optional[str]:
    """``"<caller>: N (x%) of the M <unit> preprocessed were longer than
    max_seq_length=S tokens and were cut ..."``, or None when nothing was
    cut. M counts what the pipeline packed: under a multi-device strategy
    Keras may read ahead a batch twice; the share stays the data's.

    Args:
      caller, max_seq_length, unit: as the line reads them.
      rule: what happened to the rows counted and its remedy, in place of
        ``"were longer than max_seq_length=S tokens and were cut (build the
        preprocessor with a larger max_seq_length=, ...)"`` (a classifier's
        long-document methods name theirs: ``BertClassifier.cut_rule``).
    """
    rows, cut = self._totals()
    if not cut:
      return None
    if rule is None:
      rule = ("were longer than max_seq_length=%d tokens and were cut (build the "
              "preprocessor with a larger max_seq_length=, up to the model's "
              "max_position_embeddings)" % max_seq_length)
    return "%s: %d (%.1f%%) of the %d %s preprocessed %s" % (
        caller, cut, 100.0 * cut / rows, rows, unit, rule)

  def warn(self, caller: str, max_seq_length: int, unit: str = "texts",
           rule: Optional[str] = None) -> Optional[str]:
    """Logs :meth:`line` as one warning when something was cut; returns it."""
    line = self.line(caller, max_seq_length, unit, rule)
    if line:
      logging.warning("%s", line)
    return line


def trim_to_longest(features):
  """Drops padding columns beyond the longest row of a batch.

  Exact for BERT (padding is masked out); saves compute on short texts.

  Args:
    features: dict with int ``input_mask`` [B, S] (or [B, K, S]: windows
      or choices, trimmed to the longest of all) and other tensors of that
      shape (keys ``input_ids``, ``input_mask``, ``segment_ids``); other
      keys are passed through.

  Returns:
    the same dict with [..., S'] tensors, S' = max row length (at least 1).
  """
  longest = tf.maximum(tf.reduce_max(tf.reduce_sum(features["input_mask"], -1)), 1)
  out = dict(features)
  for k in ("input_ids", "input_mask", "segment_ids"):
    out[k] = features[k][..., :longest]
  return out


def read_vocab_lines(vocab_file) -> list:
  """A vocab file's lines as the in-graph lookup table keys them.

  TensorFlow's ``TextFileInitializer`` (``WHOLE_LINE`` keys): lines split on
  ``\\n``, one trailing ``\\r`` dropped, nothing else stripped; a final
  newline adds no line. Decoded as UTF-8 (invalid bytes replaced).

  Args:
    vocab_file: path of the vocab file.

  Returns:
    list of str, index = token id.

  Raises:
    tokenization.VocabError: the file cannot be read.
  """
  try:
    with open(vocab_file, "rb") as f:
      data = f.read()
  except OSError as e:
    raise tokenization.VocabError("cannot read vocab file %r: %s" % (vocab_file, e)) from e
  lines = data.split(b"\n")
  if lines and lines[-1] == b"":
    lines.pop()
  return [(l[:-1] if l.endswith(b"\r") else l).decode("utf-8", "replace") for l in lines]


def long_document_dict(value) -> Optional[dict]:
  """A :class:`PreprocessorLayer`'s ``long_document`` settings as their JSON
  dict (what its config records), or None.

  Args:
    value: None; a :class:`bert_tf.modeling.long_document.LongDocument`
      (its ``to_dict``); its dict (a ``.keras`` config, ``config.json``'s
      ``bert_tf_long_document``); or a method name (``"windows"``: the
      method's default settings).

  Raises:
    ParamsError: a value of another type. The settings themselves are
      checked against the length by the model the layer is given to
      (:func:`bert_tf.modeling.models.as_preprocessor_layer`: this module
      sits below :mod:`bert_tf.modeling.long_document`).
  """
  value = _long_document_value(value)
  return value if value is None or isinstance(value, dict) else dict(value.to_dict())


def _long_document_value(value):
  """None, a dict (a method name as ``{"method": name}``) or an object with
  ``to_dict`` (a ``LongDocument``), as given.

  Raises:
    ParamsError: another type.
  """
  if value is None or callable(getattr(value, "to_dict", None)):
    return value
  if isinstance(value, str):
    return {"method": value}
  if isinstance(value, dict):
    return dict(value)
  raise errors.ParamsError(
      "long_document must be a LongDocument, its dict or a method name "
      "(head, tail, head_tail, windows), got %r" % (value,), argument="long_document")


@keras.saving.register_keras_serializable(package="bert_tf")
class PreprocessorLayer(keras.layers.Layer):
  """A :class:`BertPreprocessor` as a Keras layer: what a task model carries
  to take raw strings (keras-hub's habit: the preprocessor is part of the
  model's config, its vocabulary a ``.keras`` asset).

  The config holds ``do_lower_case``, ``max_seq_length``,
  ``preserve_unused_tokens`` and, when set, ``long_document`` (the
  settings' dict), never a path; the vocabulary is written by
  :meth:`save_assets` as ``vocab.txt`` inside the ``.keras`` file and read
  back by :meth:`load_assets` into an in-memory :class:`BertPreprocessor`
  (same lookup keys and ids as the file's table). The tokenizing and
  packing are :class:`BertPreprocessor`'s, the object the tasks and the
  SavedModel exports use.

  Args:
    vocab: a vocab file path, the list of its lines (:func:`read_vocab_lines`),
      a :class:`BertPreprocessor` (used as is; its settings win over the
      arguments), or None (set later by :meth:`load_assets` /
      :meth:`set_vocabulary`).
    do_lower_case, max_seq_length, preserve_unused_tokens: as
      :class:`BertPreprocessor`.
    long_document: how a text longer than one window is read, for a
      :class:`~bert_tf.modeling.models.BertClassifier` (a
      :class:`~bert_tf.modeling.long_document.LongDocument`, its dict or a
      method name: :func:`long_document_dict`). The classifier checks the
      settings against ``max_seq_length`` when it is built (the other
      models refuse them), keeps a layer whose ``long_document`` is the
      resolved ``LongDocument`` and packs its text by it
      (:class:`~bert_tf.modeling.long_document.DocumentPacker`); the layer
      records it. None: the original's packing (the first
      ``max_seq_length`` tokens).

  Attributes:
    long_document: None, the settings as given (a method name as its
      dict), or, in a classifier, the resolved ``LongDocument``.
    **kwargs: Keras layer arguments (``name``).

  Call args:
    text_a: string [B]; text_b: optional string [B].

  Returns:
    dict of int32 [B, max_seq_length]: ``input_ids``, ``input_mask``,
    ``segment_ids`` (:meth:`BertPreprocessor.__call__`).

  Raises:
    tokenization.VocabError, errors.ParamsError: as :class:`BertPreprocessor`;
    errors.ParamsError: a ``long_document`` of another type; called with
    ``long_document`` (its classifier packs the windows);
    ValueError: used before it has a vocabulary.

  Example:
    >>> layer = PreprocessorLayer("vocab.txt", True, 128)  # doctest: +SKIP
    >>> layer.bert_preprocessor(tf.constant(["hello world"]))["input_ids"].shape  # doctest: +SKIP
    TensorShape([1, 128])
    >>> layer = PreprocessorLayer("vocab.txt", True, 128, long_document="windows")  # doctest: +SKIP
    >>> BertClassifier(config, 20, preprocessor=layer).predict(["a long post ..."])  # doctest: +SKIP
  """

  def __init__(self, vocab=None, do_lower_case: bool = True, max_seq_length: int = 128,
               preserve_unused_tokens: bool = False, long_document=None, **kwargs):
    kwargs.setdefault("name", "preprocessor")
    super().__init__(**kwargs)
    if isinstance(vocab, BertPreprocessor):
      do_lower_case, max_seq_length = vocab.do_lower_case, vocab.max_seq_length
      preserve_unused_tokens = vocab.preserve_unused_tokens
    self.do_lower_case = bool(do_lower_case)
    self.max_seq_length = int(max_seq_length)
    self.preserve_unused_tokens = bool(preserve_unused_tokens)
    self.long_document = _long_document_value(long_document)
    self._preprocessor = None
    if vocab is not None:
      self.set_vocabulary(vocab)
    self.built = True

  def set_vocabulary(self, vocab) -> None:
    """Sets the vocabulary (a path, a list of lines or a :class:`BertPreprocessor`)."""
    if not isinstance(vocab, BertPreprocessor):
      vocab = BertPreprocessor(vocab, self.do_lower_case, self.max_seq_length,
                               preserve_unused_tokens=self.preserve_unused_tokens)
    self._preprocessor = vocab

  @property
  def bert_preprocessor(self) -> BertPreprocessor:
    """The :class:`BertPreprocessor` (pass it to the ``bert_tf.export`` functions).

    Raises:
      ValueError: no vocabulary yet.
    """
    if self._preprocessor is None:
      raise ValueError("%s has no vocabulary: build it with a vocab file or a "
                       "BertPreprocessor, or load it from a .keras file" % self.name)
    return self._preprocessor

  def with_long_document(self, long_document) -> "PreprocessorLayer":
    """A new layer over the same :class:`BertPreprocessor` (or, before
    :meth:`load_assets`, none yet), settings and name, that records
    ``long_document`` (as the argument; None: the original's packing)."""
    return PreprocessorLayer(self._preprocessor, self.do_lower_case, self.max_seq_length,
                             self.preserve_unused_tokens, long_document=long_document,
                             name=self.name)

  def get_config(self) -> dict:
    """Keras config: ``name``, ``trainable``, ``dtype``, ``do_lower_case``,
    ``max_seq_length``, ``preserve_unused_tokens`` and, when set,
    ``long_document`` (its dict; the vocab is an asset)."""
    config = super().get_config()
    config.update(do_lower_case=self.do_lower_case, max_seq_length=self.max_seq_length,
                  preserve_unused_tokens=self.preserve_unused_tokens)
    if self.long_document is not None:
      config["long_document"] = long_document_dict(self.long_document)
    return config

  def save_assets(self, dir_path: str) -> None:
    """Writes the vocabulary as ``dir_path/vocab.txt`` (Keras ``.keras`` saving)."""
    lines = self.bert_preprocessor.vocab_lines()
    with open(os.path.join(dir_path, VOCAB_ASSET), "w", encoding="utf-8",
              newline="\n") as f:
      f.write("".join(line + "\n" for line in lines))

  def load_assets(self, dir_path: str) -> None:
    """Reads the vocabulary from ``dir_path/vocab.txt`` into memory (Keras
    ``.keras`` loading; the temporary directory may go away afterwards)."""
    self.set_vocabulary(read_vocab_lines(os.path.join(dir_path, VOCAB_ASSET)))

  def __call__(self, *args, **kwargs):
    # Refused before Keras' __call__, which rewords (and retypes) errors.
    if self.long_document is not None:
      raise errors.ParamsError(
          "%s has long_document settings: its BertClassifier packs the text by them "
          "(model.predict / model(texts)); or long_document.DocumentPacker("
          "layer.bert_preprocessor, settings)" % self.name, argument="long_document")
    return super().__call__(*args, **kwargs)

  def call(self, text_a, text_b=None):
    return self.bert_preprocessor(text_a, text_b)
