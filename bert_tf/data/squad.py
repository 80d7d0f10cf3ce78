"""SQuAD v1.1 / v2.0 data: examples, windowed features, prediction post-processing.

Source: google-research/bert ``run_squad.py`` (PyPI ``bert-tensorflow==1.0.4``).
Every name that the original has keeps its meaning here, and the outputs are
identical (``tests/test_squad_data.py`` compares them, field by field, with
the original run under TF 2.21 by ``tests/original_squad.py``):

- :func:`read_squad_examples` (the original's function, with its
  ``FLAGS.version_2_with_negative`` turned into an argument),
- :func:`convert_examples_to_features` (doc-stride windows,
  ``_check_is_max_context``, ``_improve_answer_span``, unique ids from
  1000000000), plus the generator :func:`iter_features`,
- :func:`write_predictions` (n-best, ``get_final_text``, null odds), whose
  dicts :func:`compute_predictions` returns without writing anything.

What differs from the original, all on input it could not handle:
bad files raise :class:`bert_tf.errors.InputError` naming the file and the
JSON path (``data[3].paragraphs[0].qas[5].answers``) instead of a bare
``KeyError``/``IndexError``; impossible arguments (``doc_stride <= 0``,
``max_seq_length <= max_query_length + 3``, which make the original loop
forever or fail later) raise ``InputError`` with ``argument=``; a feature
without a ``RawResult`` raises ``InputError``; and in SQuAD 2.0 mode an
example whose n-best holds only the null answer gets Hugging Face's nonce
``"empty"`` entry where the original raises ``AttributeError``. Files are
written atomically (temporary name, then rename).

This module imports neither TensorFlow nor Keras: the token-id lists of
:class:`InputFeatures` are plain Python ``int`` lists that a caller turns
into a ``tf.data`` pipeline.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from bert_tf import errors
from bert_tf import io_utils
from bert_tf import tokenization

logger = logging.getLogger(__name__)

FIRST_UNIQUE_ID = 1000000000  # the original's first feature id
# The original's nonce n-best text when no valid span exists (write_predictions).
NO_SPAN_TEXT = "empty"


class SquadExample:
  """One question on one paragraph (original ``run_squad.SquadExample``).

  Attributes:
    qas_id: ``str``, the question's ``id`` in the SQuAD JSON.
    question_text: ``str``, the question.
    doc_tokens: ``list[str]``, the paragraph split on whitespace (the
      original's rule: space, tab, CR, LF and U+202F). Examples of one
      paragraph share one list object.
    orig_answer_text: ``str`` (training) or ``None``; ``""`` when impossible.
    start_position, end_position: ``int`` word indexes into ``doc_tokens``
      (inclusive) of the answer in training mode, ``-1`` when impossible,
      ``None`` outside training.
    is_impossible: ``bool``; only read from the file in training mode with
      ``version_2_with_negative`` (the original's behaviour).
  """

  def __init__(self, qas_id: str, question_text: str, doc_tokens: list[str],
               orig_answer_text: str | None = None,
               start_position: int | None = None,
               end_position: int | None = None,
               is_impossible: bool = False):
    self.qas_id = qas_id
    self.question_text = question_text
    self.doc_tokens = doc_tokens
    self.orig_answer_text = orig_answer_text
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible

  def __str__(self):
    return self.__repr__()

  def __repr__(self):
    s = "qas_id: %s" % self.qas_id
    s += ", question_text: %s" % self.question_text
    s += ", doc_tokens: [%s]" % (" ".join(self.doc_tokens))
    if self.start_position:
      s += ", start_position: %d" % self.start_position
      s += ", end_position: %d" % self.end_position
      s += ", is_impossible: %r" % self.is_impossible
    return s


class InputFeatures:
  """One window of one example (original ``run_squad.InputFeatures``).

  Attributes:
    unique_id: ``int``, from 1000000000 upwards, one per feature.
    example_index: ``int``, index of the example in the list given to
      :func:`convert_examples_to_features`.
    doc_span_index: ``int``, index of this window within its example.
    tokens: ``list[str]``, ``[CLS] query [SEP] doc-window [SEP]``, unpadded.
    token_to_orig_map: ``dict[int, int]``, position in ``tokens`` -> word
      index in ``example.doc_tokens`` (document positions only).
    token_is_max_context: ``dict[int, bool]``, position in ``tokens`` ->
      whether this window is the token's max-context window.
    input_ids, input_mask, segment_ids: ``list[int]`` of length
      ``max_seq_length`` (zero-padded).
    start_position, end_position: ``int`` token positions of the answer
      (training), ``0`` when the answer is outside the window or the example
      is impossible; ``None`` outside training.
    is_impossible: ``bool``, copied from the example.
  """

  def __init__(self, unique_id: int, example_index: int, doc_span_index: int,
               tokens: list[str], token_to_orig_map: dict[int, int],
               token_is_max_context: dict[int, bool], input_ids: list[int],
               input_mask: list[int], segment_ids: list[int],
               start_position: int | None = None,
               end_position: int | None = None,
               is_impossible: bool | None = None):
    self.unique_id = unique_id
    self.example_index = example_index
    self.doc_span_index = doc_span_index
    self.tokens = tokens
    self.token_to_orig_map = token_to_orig_map
    self.token_is_max_context = token_is_max_context
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible

  def __repr__(self):
    return ("InputFeatures(unique_id=%d, example_index=%d, doc_span_index=%d, "
            "tokens=%d, start_position=%r, end_position=%r, is_impossible=%r)"
            % (self.unique_id, self.example_index, self.doc_span_index,
               len(self.tokens), self.start_position, self.end_position,
               self.is_impossible))


class SquadExamples(list):
  """The list of :class:`SquadExample` that :func:`read_squad_examples` returns.

  A plain ``list`` with the skipped training questions attached.

  Attributes:
    skipped_ids: ``list[str]``, ids of the training questions skipped with
      the original's "Could not find answer" warning.
  """

  def __init__(self, items: Iterable[SquadExample] = (),
               skipped_ids: Sequence[str] = ()):
    super().__init__(items)
    self.skipped_ids = list(skipped_ids)

  @property
  def num_skipped(self) -> int:
    """Number of training questions skipped ("Could not find answer")."""
    return len(self.skipped_ids)


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def load_squad_json(input_file: str | os.PathLike) -> Any:
  """Reads a JSON file (UTF-8, an optional BOM allowed) with clear errors.

  Returns:
    The parsed JSON value.

  Raises:
    InputError: the file cannot be read, is not UTF-8 (names the byte
      offset) or is not JSON (names line and column); ``argument`` is
      ``"input_file"``.
  """
  path = os.fspath(input_file)
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except OSError as e:
    raise errors.InputError("cannot read %s: %s" % (path, e),
                            argument="input_file") from e
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise errors.InputError(
        "%s is not valid UTF-8 (byte offset %d: %s)" % (path, e.start, e.reason),
        argument="input_file") from e
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise errors.InputError("%s is not valid JSON: %s (line %d, column %d)"
                            % (path, e.msg, e.lineno, e.colno),
                            argument="input_file") from e


def _field(obj: Any, key: str, path: str, where: str, kind: type | tuple):
  """``obj[key]`` checked for presence and type, or an InputError naming
  the file (``where``) and the JSON path."""
  if not isinstance(obj, dict):
    raise errors.InputError("%s: %s is a %s, expected a JSON object"
                            % (where, path or "the top level", type(obj).__name__),
                            argument="input_file")
  if key not in obj:
    raise errors.InputError("%s: missing key %r at %s" % (where, key, path or "the top level"),
                            argument="input_file")
  value = obj[key]
  sub = "%s.%s" % (path, key) if path else key
  # bool is an int subclass: an int field must not accept true/false.
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
    raise errors.InputError("%s: %s is a %s, expected %s"
                            % (where, sub, type(value).__name__, names),
                            argument="input_file")
  return value


def _is_whitespace(c: str) -> bool:
  # The original read_squad_examples' own rule (not str.isspace()).
  return c == " " or c == "\t" or c == "\r" or c == "\n" or ord(c) == 0x202F


def _split_paragraph(paragraph_text: str) -> tuple[list[str], list[int]]:
  """Whitespace words of the paragraph and each character's word index."""
  doc_tokens = []
  char_to_word_offset = []
  prev_is_whitespace = True
  for c in paragraph_text:
    if _is_whitespace(c):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        doc_tokens.append(c)
      else:
        doc_tokens[-1] += c
      prev_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def read_squad_examples(input_file: str | os.PathLike, is_training: bool,
                        version_2_with_negative: bool = False) -> SquadExamples:
  """Reads a SQuAD JSON file into examples (original ``read_squad_examples``).

  The paragraph is split on whitespace (the original's rule); in training
  mode every question needs exactly one answer (or ``is_impossible`` with
  ``version_2_with_negative``), the answer's character offset is mapped to
  word indexes, and a question whose answer text is not found at its
  ``answer_start`` is skipped with the original's warning
  ``Could not find answer: '...' vs. '...'`` and counted in
  ``result.skipped_ids``. Outside training, answers are not read at all.

  Args:
    input_file: path of a SQuAD v1.1 / v2.0 JSON file (UTF-8).
    is_training: read answers and positions (the original's flag).
    version_2_with_negative: read ``is_impossible`` (training mode only, as
      the original's ``FLAGS.version_2_with_negative``).

  Returns:
    :class:`SquadExamples`, a list of :class:`SquadExample` in file order.

  Raises:
    InputError: the file is unreadable, not UTF-8, not JSON; a key is
      missing or has the wrong type (the message names the file and the JSON
      path, e.g. ``data[3].paragraphs[0].qas[5].answers``); a training
      question without exactly one answer; an ``answer_start`` outside its
      paragraph.
  """
  where = os.fspath(input_file)
  root = load_squad_json(input_file)
  input_data = _field(root, "data", "", where, list)

  examples = SquadExamples()
  for ai, entry in enumerate(input_data):
    apath = "data[%d]" % ai
    paragraphs = _field(entry, "paragraphs", apath, where, list)
    for pi, paragraph in enumerate(paragraphs):
      ppath = "%s.paragraphs[%d]" % (apath, pi)
      paragraph_text = _field(paragraph, "context", ppath, where, str)
      doc_tokens, char_to_word_offset = _split_paragraph(paragraph_text)
      qas = _field(paragraph, "qas", ppath, where, list)
      for qi, qa in enumerate(qas):
        qpath = "%s.qas[%d]" % (ppath, qi)
        qas_id = _field(qa, "id", qpath, where, (str, int))
        question_text = _field(qa, "question", qpath, where, str)
        start_position = None
        end_position = None
        orig_answer_text = None
        is_impossible = False
        if is_training:
          if version_2_with_negative:
            is_impossible = _field(qa, "is_impossible", qpath, where, bool)
          answers = _field(qa, "answers", qpath, where, list)
          if len(answers) != 1 and not is_impossible:
            raise errors.InputError(
                "%s: %s.answers has %d answers: for training, each question "
                "should have exactly 1 answer." % (where, qpath, len(answers)),
                argument="input_file")
          if not is_impossible:
            answer_path = "%s.answers[0]" % qpath
            answer = answers[0]
            orig_answer_text = _field(answer, "text", answer_path, where, str)
            answer_offset = _field(answer, "answer_start", answer_path, where, int)
            answer_length = len(orig_answer_text)
            last = answer_offset + answer_length - 1
            n = len(char_to_word_offset)
            if not (0 <= answer_offset < n and 0 <= last < n):
              raise errors.InputError(
                  "%s: %s.answer_start=%d (text of %d characters) lies outside "
                  "its paragraph of %d characters" % (
                      where, answer_path, answer_offset, answer_length, n),
                  argument="input_file")
            start_position = char_to_word_offset[answer_offset]
            end_position = char_to_word_offset[last]
            # Only answers whose text can be recovered from the document are
            # kept (the original's rule; usually odd Unicode).
            actual_text = " ".join(doc_tokens[start_position:(end_position + 1)])
            cleaned_answer_text = " ".join(
                tokenization.whitespace_tokenize(orig_answer_text))
            if actual_text.find(cleaned_answer_text) == -1:
              logger.warning("%s: %s (id %s): Could not find answer: '%s' vs. '%s' "
                             "(the context's words vs. the answer text); question "
                             "skipped, as the original does", where, qpath, qas_id,
                             actual_text, cleaned_answer_text)
              examples.skipped_ids.append(qas_id)
              continue
          else:
            start_position = -1
            end_position = -1
            orig_answer_text = ""
        examples.append(SquadExample(
            qas_id=qas_id, question_text=question_text, doc_tokens=doc_tokens,
            orig_answer_text=orig_answer_text, start_position=start_position,
            end_position=end_position, is_impossible=is_impossible))
  return examples


# --------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------

_DocSpan = collections.namedtuple("DocSpan", ["start", "length"])

ExampleLengths = collections.namedtuple(
    "ExampleLengths", ["query_tokens", "doc_tokens", "windows"])
ExampleLengths.__doc__ = """One example's untruncated lengths in WordPieces.

query_tokens: the question's pieces before the ``max_query_length`` cut;
doc_tokens: the context's pieces; windows: the doc-stride windows made
(``InputFeatures`` of the example). The example's full input would be
``query_tokens + doc_tokens + 3`` tokens (``[CLS]`` and two ``[SEP]``).
"""


def _improve_answer_span(doc_tokens: Sequence[str], input_start: int,
                         input_end: int, tokenizer: Any,
                         orig_answer_text: str) -> tuple[int, int]:
  """Tightest WordPiece span equal to the tokenized answer text.

  Source: original ``run_squad._improve_answer_span`` (same search order:
  earliest start, then longest end). Returns ``(start, end)`` token indexes
  (inclusive), unchanged when no sub-span matches.
  """
  tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
  for new_start in range(input_start, input_end + 1):
    for new_end in range(input_end, new_start - 1, -1):
      text_span = " ".join(doc_tokens[new_start:(new_end + 1)])
      if text_span == tok_answer_text:
        return (new_start, new_end)
  return (input_start, input_end)


def _check_is_max_context(doc_spans: Sequence[_DocSpan], cur_span_index: int,
                          position: int) -> bool:
  """Whether ``doc_spans[cur_span_index]`` is the max-context span of token
  ``position`` (original ``run_squad._check_is_max_context``): score =
  min(left, right context) + 0.01 * span length, first best span wins."""
  best_score = None
  best_span_index = None
  for (span_index, doc_span) in enumerate(doc_spans):
    end = doc_span.start + doc_span.length - 1
    if position < doc_span.start:
      continue
    if position > end:
      continue
    num_left_context = position - doc_span.start
    num_right_context = end - position
    score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
    if best_score is None or score > best_score:
      best_score = score
      best_span_index = span_index
  return cur_span_index == best_span_index


def _check_arguments(max_seq_length, doc_stride, max_query_length):
  if max_seq_length <= max_query_length + 3:
    raise errors.InputError(
        "The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
        % (max_seq_length, max_query_length), argument="max_seq_length")
  if doc_stride <= 0:
    raise errors.InputError("doc_stride must be positive, got %d" % doc_stride,
                            argument="doc_stride")
  if max_query_length <= 0:
    raise errors.InputError("max_query_length must be positive, got %d"
                            % max_query_length, argument="max_query_length")


def iter_features(examples: Sequence[SquadExample], tokenizer: Any,
                  max_seq_length: int, doc_stride: int, max_query_length: int,
                  is_training: bool,
                  lengths: list | None = None) -> Iterator[InputFeatures]:
  """Yields the features of :func:`convert_examples_to_features` one by one.

  Same arguments and output; the paragraph's WordPiece tokenization is reused
  across consecutive questions of one paragraph (same ``doc_tokens`` list).
  ``lengths``: see :func:`convert_examples_to_features`.
  """
  _check_arguments(max_seq_length, doc_stride, max_query_length)
  unique_id = FIRST_UNIQUE_ID
  cached_doc = None  # (doc_tokens object, tok_to_orig_index, orig_to_tok_index, all_doc_tokens)
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])

  for (example_index, example) in enumerate(examples):
    query_tokens = tokenizer.tokenize(example.question_text)
    query_length = len(query_tokens)
    if len(query_tokens) > max_query_length:
      query_tokens = query_tokens[0:max_query_length]
    query_ids = tokenizer.convert_tokens_to_ids(query_tokens)

    if cached_doc is not None and cached_doc[0] is example.doc_tokens:
      _, tok_to_orig_index, orig_to_tok_index, all_doc_tokens, all_doc_ids = cached_doc
    else:
      tok_to_orig_index = []
      orig_to_tok_index = []
      all_doc_tokens = []
      for (i, token) in enumerate(example.doc_tokens):
        orig_to_tok_index.append(len(all_doc_tokens))
        sub_tokens = tokenizer.tokenize(token)
        for sub_token in sub_tokens:
          tok_to_orig_index.append(i)
          all_doc_tokens.append(sub_token)
      all_doc_ids = tokenizer.convert_tokens_to_ids(all_doc_tokens)
      cached_doc = (example.doc_tokens, tok_to_orig_index, orig_to_tok_index,
                    all_doc_tokens, all_doc_ids)

    tok_start_position = None
    tok_end_position = None
    if is_training and example.is_impossible:
      tok_start_position = -1
      tok_end_position = -1
    if is_training and not example.is_impossible:
      tok_start_position = orig_to_tok_index[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
      else:
        tok_end_position = len(all_doc_tokens) - 1
      (tok_start_position, tok_end_position) = _improve_answer_span(
          all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
          example.orig_answer_text)

    # The -3 accounts for [CLS], [SEP] and [SEP].
    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3

    # Sliding windows of up to max_tokens_for_doc tokens, doc_stride apart.
    doc_spans = []
    start_offset = 0
    while start_offset < len(all_doc_tokens):
      length = len(all_doc_tokens) - start_offset
      if length > max_tokens_for_doc:
        length = max_tokens_for_doc
      doc_spans.append(_DocSpan(start=start_offset, length=length))
      if start_offset + length == len(all_doc_tokens):
        break
      start_offset += min(length, doc_stride)
    if lengths is not None:
      lengths.append(ExampleLengths(query_length, len(all_doc_tokens), len(doc_spans)))

    doc_offset = len(query_tokens) + 2
    for (doc_span_index, doc_span) in enumerate(doc_spans):
      span_end = doc_span.start + doc_span.length
      tokens = (["[CLS]"] + query_tokens + ["[SEP]"] +
                all_doc_tokens[doc_span.start:span_end] + ["[SEP]"])
      token_to_orig_map = {}
      token_is_max_context = {}
      for i in range(doc_span.length):
        split_token_index = doc_span.start + i
        token_to_orig_map[doc_offset + i] = tok_to_orig_index[split_token_index]
        token_is_max_context[doc_offset + i] = _check_is_max_context(
            doc_spans, doc_span_index, split_token_index)
      input_ids = ([cls_id] + query_ids + [sep_id] +
                   all_doc_ids[doc_span.start:span_end] + [sep_id])
      n = len(input_ids)
      segment_ids = [0] * doc_offset + [1] * (doc_span.length + 1)
      input_mask = [1] * n
      pad = max_seq_length - n
      if pad > 0:
        input_ids += [0] * pad
        input_mask += [0] * pad
        segment_ids += [0] * pad
      assert len(input_ids) == max_seq_length, (len(input_ids), max_seq_length)

      start_position = None
      end_position = None
      if is_training and not example.is_impossible:
        # A window without the whole answer is kept with positions 0/0.
        doc_start = doc_span.start
        doc_end = doc_span.start + doc_span.length - 1
        if not (tok_start_position >= doc_start and tok_end_position <= doc_end):
          start_position = 0
          end_position = 0
        else:
          start_position = tok_start_position - doc_start + doc_offset
          end_position = tok_end_position - doc_start + doc_offset
      if is_training and example.is_impossible:
        start_position = 0
        end_position = 0

      if example_index < 20 and logger.isEnabledFor(logging.DEBUG):
        logger.debug("*** Example *** unique_id: %s example_index: %s "
                     "doc_span_index: %s tokens: %s start_position: %s "
                     "end_position: %s", unique_id, example_index,
                     doc_span_index, " ".join(tokens), start_position,
                     end_position)

      yield InputFeatures(
          unique_id=unique_id, example_index=example_index,
          doc_span_index=doc_span_index, tokens=tokens,
          token_to_orig_map=token_to_orig_map,
          token_is_max_context=token_is_max_context, input_ids=input_ids,
          input_mask=input_mask, segment_ids=segment_ids,
          start_position=start_position, end_position=end_position,
          is_impossible=example.is_impossible)
      unique_id += 1


def convert_examples_to_features(
    examples: Sequence[SquadExample], tokenizer: Any, max_seq_length: int,
    doc_stride: int, max_query_length: int, is_training: bool,
    output_fn: Callable[[InputFeatures], Any] | None = None,
    lengths: list | None = None,
) -> list[InputFeatures]:
  """Examples -> doc-stride windows (original ``convert_examples_to_features``).

  Each example becomes one feature per window of at most
  ``max_seq_length - len(query) - 3`` document WordPieces, windows starting
  ``doc_stride`` tokens apart; ``[CLS] query [SEP] window [SEP]`` zero-padded
  to ``max_seq_length``; the query is cut to ``max_query_length`` WordPieces.
  In training mode the answer is moved to the tightest matching WordPiece
  span (``_improve_answer_span``); windows without it, and impossible
  examples, get positions 0/0. Unique ids count from 1000000000.

  Args:
    examples: from :func:`read_squad_examples`.
    tokenizer: a :class:`bert_tf.tokenization.FullTokenizer` (anything with
      ``tokenize`` and ``convert_tokens_to_ids``).
    max_seq_length: tokens per feature (e.g. 384).
    doc_stride: tokens between window starts (e.g. 128).
    max_query_length: WordPieces kept of the question (e.g. 64).
    is_training: compute start/end positions.
    output_fn: optional callback called with every feature as it is made
      (the original's argument, e.g. a TFRecord writer).
    lengths: optional list; one :class:`ExampleLengths` per example is
      appended (the untruncated question and context lengths and the
      windows made: what ``max_query_length`` and ``max_seq_length`` cut).

  Returns:
    ``list[InputFeatures]`` in order (all of them, also when ``output_fn``
    is given; use :func:`iter_features` to stream without a list).

  Raises:
    InputError: ``max_seq_length <= max_query_length + 3`` (the original's
      ``validate_flags_or_throw`` message), ``doc_stride <= 0`` or
      ``max_query_length <= 0``, with ``argument`` set.
  """
  features = []
  for feature in iter_features(examples, tokenizer, max_seq_length, doc_stride,
                               max_query_length, is_training, lengths):
    if output_fn is not None:
      output_fn(feature)
    features.append(feature)
  return features


# --------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------

RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])
RawResult.__doc__ = """The model's output for one feature (original ``RawResult``).

unique_id: ``int``, the feature's id; start_logits, end_logits: sequences of
``max_seq_length`` floats (lists or 1-D numpy arrays; converted to Python
floats, as the original's ``main`` does).
"""

_PrelimPrediction = collections.namedtuple(
    "PrelimPrediction",
    ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestPrediction = collections.namedtuple(
    "NbestPrediction", ["text", "start_logit", "end_logit"])


def _get_best_indexes(logits: Sequence[float], n_best_size: int) -> list[int]:
  """Indexes of the ``n_best_size`` largest logits, largest first, ties in
  index order (original ``run_squad._get_best_indexes``)."""
  index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
  return [index for index, _ in index_and_score[:n_best_size]]


def _compute_softmax(scores: Sequence[float]) -> list[float]:
  """Softmax of Python floats, max-shifted (original ``_compute_softmax``);
  ``[]`` for no scores."""
  if not scores:
    return []
  max_score = None
  for score in scores:
    if max_score is None or score > max_score:
      max_score = score
  exp_scores = []
  total_sum = 0.0
  for score in scores:
    x = math.exp(score - max_score)
    exp_scores.append(x)
    total_sum += x
  return [score / total_sum for score in exp_scores]


def _strip_spaces(text):
  ns_chars = []
  ns_to_s_map = collections.OrderedDict()
  for (i, c) in enumerate(text):
    if c == " ":
      continue
    ns_to_s_map[len(ns_chars)] = i
    ns_chars.append(c)
  return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text: str, orig_text: str, do_lower_case: bool,
                   verbose_logging: bool = False) -> str:
  """Projects a de-tokenized prediction back onto the original words.

  Source: original ``run_squad.get_final_text``. ``pred_text`` (normalized
  WordPiece text, e.g. ``"steve smith"``) is located in the basic-tokenized
  ``orig_text`` (e.g. ``"Steve Smith's"``), aligned character by character
  with spaces removed, and the matching slice of ``orig_text`` is returned
  (``"Steve Smith"``). When any step fails, ``orig_text`` is returned
  (logged at INFO with ``verbose_logging``, as the original's flag).

  Returns:
    ``str``, a substring of ``orig_text``.
  """
  tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  tok_text = " ".join(tokenizer.tokenize(orig_text))

  start_position = tok_text.find(pred_text)
  if start_position == -1:
    if verbose_logging:
      logger.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
    return orig_text
  end_position = start_position + len(pred_text) - 1

  (orig_ns_text, orig_ns_to_s_map) = _strip_spaces(orig_text)
  (tok_ns_text, tok_ns_to_s_map) = _strip_spaces(tok_text)

  if len(orig_ns_text) != len(tok_ns_text):
    if verbose_logging:
      logger.info("Length not equal after stripping spaces: '%s' vs '%s'",
                  orig_ns_text, tok_ns_text)
    return orig_text

  tok_s_to_ns_map = {}
  for (i, tok_index) in tok_ns_to_s_map.items():
    tok_s_to_ns_map[tok_index] = i

  orig_start_position = None
  if start_position in tok_s_to_ns_map:
    ns_start_position = tok_s_to_ns_map[start_position]
    if ns_start_position in orig_ns_to_s_map:
      orig_start_position = orig_ns_to_s_map[ns_start_position]
  if orig_start_position is None:
    if verbose_logging:
      logger.info("Couldn't map start position")
    return orig_text

  orig_end_position = None
  if end_position in tok_s_to_ns_map:
    ns_end_position = tok_s_to_ns_map[end_position]
    if ns_end_position in orig_ns_to_s_map:
      orig_end_position = orig_ns_to_s_map[ns_end_position]
  if orig_end_position is None:
    if verbose_logging:
      logger.info("Couldn't map end position")
    return orig_text

  return orig_text[orig_start_position:(orig_end_position + 1)]


def compute_predictions(
    all_examples: Sequence[SquadExample], all_features: Iterable[InputFeatures],
    all_results: Iterable[RawResult], n_best_size: int, max_answer_length: int,
    do_lower_case: bool, version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0, verbose_logging: bool = False,
) -> tuple[dict[str, str], dict[str, list[dict[str, Any]]], dict[str, float]]:
  """The three outputs of :func:`write_predictions`, without writing them.

  Source: the body of original ``run_squad.write_predictions``. Per example:
  the ``n_best_size`` best start and end logits of each feature give
  candidate spans (inside the document, start's max-context window,
  ``end >= start``, at most ``max_answer_length`` tokens), ranked by
  ``start_logit + end_logit``; their texts go through :func:`get_final_text`;
  duplicates are dropped. With ``version_2_with_negative`` the null answer
  (position 0 of the feature with the smallest null score) competes, and
  ``""`` is predicted iff ``null score - best non-null score >
  null_score_diff_threshold``.

  Args:
    all_examples: the examples the features were made from.
    all_features: from :func:`convert_examples_to_features` (any order).
    all_results: one :class:`RawResult` per feature.
    n_best_size: candidates kept per example (the original's default 20).
    max_answer_length: longest answer in WordPieces (default 30).
    do_lower_case: the tokenizer's setting (for :func:`get_final_text`).
    version_2_with_negative: SQuAD 2.0 (null answers, null odds).
    null_score_diff_threshold: see above (SQuAD 2.0 only).
    verbose_logging: log :func:`get_final_text`'s alignment failures.

  Returns:
    ``(predictions, nbest, null_odds)``, ``OrderedDict``s in example order:
    ``qas_id -> answer text``; ``qas_id -> list of {"text", "probability",
    "start_logit", "end_logit"}`` (Python floats); ``qas_id -> null score
    minus best non-null score`` (empty for SQuAD 1.1).

  Raises:
    InputError: a feature has no result (names its unique_id).
  """
  example_index_to_features = collections.defaultdict(list)
  for feature in all_features:
    example_index_to_features[feature.example_index].append(feature)

  unique_id_to_result = {}
  for result in all_results:
    unique_id_to_result[int(result.unique_id)] = result

  all_predictions = collections.OrderedDict()
  all_nbest_json = collections.OrderedDict()
  scores_diff_json = collections.OrderedDict()

  for (example_index, example) in enumerate(all_examples):
    features = example_index_to_features[example_index]

    prelim_predictions = []
    score_null = 1000000  # large and positive
    min_null_feature_index = 0  # the window with the minimum null score
    null_start_logit = 0
    null_end_logit = 0
    for (feature_index, feature) in enumerate(features):
      result = unique_id_to_result.get(feature.unique_id)
      if result is None:
        raise errors.InputError(
            "no RawResult for feature unique_id=%d (example %d, %r)"
            % (feature.unique_id, example_index, example.qas_id))
      # Python floats, as the original's main() makes them.
      start_logits = [float(x) for x in result.start_logits]
      end_logits = [float(x) for x in result.end_logits]
      start_indexes = _get_best_indexes(start_logits, n_best_size)
      end_indexes = _get_best_indexes(end_logits, n_best_size)
      if version_2_with_negative:
        feature_null_score = start_logits[0] + end_logits[0]
        if feature_null_score < score_null:
          score_null = feature_null_score
          min_null_feature_index = feature_index
          null_start_logit = start_logits[0]
          null_end_logit = end_logits[0]
      num_tokens = len(feature.tokens)
      for start_index in start_indexes:
        if start_index >= num_tokens:
          continue
        if start_index not in feature.token_to_orig_map:
          continue
        if not feature.token_is_max_context.get(start_index, False):
          continue
        for end_index in end_indexes:
          if end_index >= num_tokens:
            continue
          if end_index not in feature.token_to_orig_map:
            continue
          if end_index < start_index:
            continue
          length = end_index - start_index + 1
          if length > max_answer_length:
            continue
          prelim_predictions.append(
              _PrelimPrediction(
                  feature_index=feature_index, start_index=start_index,
                  end_index=end_index, start_logit=start_logits[start_index],
                  end_logit=end_logits[end_index]))

    if version_2_with_negative:
      prelim_predictions.append(
          _PrelimPrediction(
              feature_index=min_null_feature_index, start_index=0, end_index=0,
              start_logit=null_start_logit, end_logit=null_end_logit))
    prelim_predictions = sorted(
        prelim_predictions, key=lambda x: (x.start_logit + x.end_logit),
        reverse=True)

    seen_predictions = {}
    nbest = []
    for pred in prelim_predictions:
      if len(nbest) >= n_best_size:
        break
      feature = features[pred.feature_index]
      if pred.start_index > 0:  # a non-null prediction
        tok_tokens = feature.tokens[pred.start_index:(pred.end_index + 1)]
        orig_doc_start = feature.token_to_orig_map[pred.start_index]
        orig_doc_end = feature.token_to_orig_map[pred.end_index]
        orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
        tok_text = " ".join(tok_tokens)
        # De-tokenize WordPieces that have been split off.
        tok_text = tok_text.replace(" ##", "")
        tok_text = tok_text.replace("##", "")
        # Clean whitespace.
        tok_text = tok_text.strip()
        tok_text = " ".join(tok_text.split())
        orig_text = " ".join(orig_tokens)

        final_text = get_final_text(tok_text, orig_text, do_lower_case,
                                    verbose_logging)
        if final_text in seen_predictions:
          continue
        seen_predictions[final_text] = True
      else:
        final_text = ""
        seen_predictions[final_text] = True

      nbest.append(_NbestPrediction(text=final_text, start_logit=pred.start_logit,
                                    end_logit=pred.end_logit))

    # If the empty option did not make the n-best, include it.
    if version_2_with_negative:
      if "" not in seen_predictions:
        nbest.append(_NbestPrediction(text="", start_logit=null_start_logit,
                                      end_logit=null_end_logit))
      # Only the null answer: the original fails here (AttributeError);
      # like Hugging Face, add a nonce non-null entry.
      if not any(entry.text for entry in nbest):
        nbest.insert(0, _NbestPrediction(text=NO_SPAN_TEXT, start_logit=0.0,
                                         end_logit=0.0))
    # In very rare edge cases there is no valid prediction: a nonce one.
    if not nbest:
      nbest.append(_NbestPrediction(text=NO_SPAN_TEXT, start_logit=0.0, end_logit=0.0))

    total_scores = []
    best_non_null_entry = None
    for entry in nbest:
      total_scores.append(entry.start_logit + entry.end_logit)
      if not best_non_null_entry:
        if entry.text:
          best_non_null_entry = entry

    probs = _compute_softmax(total_scores)

    nbest_json = []
    for (i, entry) in enumerate(nbest):
      output = collections.OrderedDict()
      output["text"] = entry.text
      output["probability"] = probs[i]
      output["start_logit"] = entry.start_logit
      output["end_logit"] = entry.end_logit
      nbest_json.append(output)

    if not version_2_with_negative:
      all_predictions[example.qas_id] = nbest_json[0]["text"]
    else:
      score_diff = score_null - best_non_null_entry.start_logit - (
          best_non_null_entry.end_logit)
      scores_diff_json[example.qas_id] = score_diff
      if score_diff > null_score_diff_threshold:
        all_predictions[example.qas_id] = ""
      else:
        all_predictions[example.qas_id] = best_non_null_entry.text

    all_nbest_json[example.qas_id] = nbest_json

  return all_predictions, all_nbest_json, scores_diff_json


def predictions_json(obj: Mapping) -> str:
  """The original's file text: ``json.dumps(obj, indent=4) + "\\n"``."""
  return json.dumps(obj, indent=4) + "\n"


def write_predictions(
    all_examples: Sequence[SquadExample], all_features: Iterable[InputFeatures],
    all_results: Iterable[RawResult], n_best_size: int, max_answer_length: int,
    do_lower_case: bool, output_prediction_file: str | os.PathLike,
    output_nbest_file: str | os.PathLike,
    output_null_log_odds_file: str | os.PathLike | None,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0, verbose_logging: bool = False,
) -> tuple[dict[str, str], dict[str, list[dict[str, Any]]], dict[str, float]]:
  """Writes ``predictions.json``, ``nbest_predictions.json`` and (SQuAD 2.0)
  ``null_odds.json`` (original ``run_squad.write_predictions``).

  The arguments ``FLAGS.version_2_with_negative``,
  ``FLAGS.null_score_diff_threshold`` and ``FLAGS.verbose_logging`` of the
  original are parameters here; see :func:`compute_predictions` for the
  rest. The file text is the original's (``json.dumps(..., indent=4)`` plus
  a newline). All files are written to temporary names and renamed only when
  every one is whole; ``output_null_log_odds_file`` is written only with
  ``version_2_with_negative`` (may be ``None`` otherwise).

  Returns:
    The ``(predictions, nbest, null_odds)`` dicts of :func:`compute_predictions`.

  Raises:
    InputError: a feature has no result; ``version_2_with_negative`` without
      ``output_null_log_odds_file``.
    OSError: a file cannot be written.
  """
  if version_2_with_negative and output_null_log_odds_file is None:
    raise errors.InputError("version_2_with_negative needs an output_null_log_odds_file",
                            argument="output_null_log_odds_file")
  logger.info("Writing predictions to: %s", output_prediction_file)
  logger.info("Writing nbest to: %s", output_nbest_file)
  predictions, nbest, null_odds = compute_predictions(
      all_examples, all_features, all_results, n_best_size, max_answer_length,
      do_lower_case, version_2_with_negative=version_2_with_negative,
      null_score_diff_threshold=null_score_diff_threshold,
      verbose_logging=verbose_logging)
  outputs = [(output_prediction_file, predictions), (output_nbest_file, nbest)]
  if version_2_with_negative:
    outputs.append((output_null_log_odds_file, null_odds))
  paths = [os.fspath(p) for p, _ in outputs]
  with io_utils.atomic_outputs(paths) as tmps:
    for tmp, (_, obj) in zip(tmps, outputs):
      with open(tmp, "w", encoding="utf-8") as f:
        f.write(predictions_json(obj))
  return predictions, nbest, null_odds
