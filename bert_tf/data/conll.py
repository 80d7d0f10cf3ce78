"""CoNLL token-tagging files, tag schemes and entity-level scores, without TensorFlow.

Layouts read by :func:`read_conll` (one token per line, a blank line between
sentences, ``-DOCSTART-`` lines skipped as document boundaries):

* two columns ``token<TAB>tag`` (WNUT-16, most NER releases);
* the CoNLL-2003 four columns ``word POS chunk NER`` (spaces or tabs);
* one column (tokens only) for a file to predict (``with_tags=False``).

A line holding a TAB is split on TABs (fields stripped), any other line on
whitespace. The first token line fixes the file's column count; a line with
another count is an error naming the file and line. A token must be one
whitespace-free word (Python ``str.split()`` gives it back whole): the
exported model splits raw sentences on the same whitespace, so a token with
a space inside could not be tagged the same way at serving time.

Tags: ``O`` or ``P-TYPE`` with ``P`` one of ``B I E S`` (IOB1, IOB2 and
IOBES). Entities are read from tags with the chunk rules of conlleval
(``startOfChunk`` / ``endOfChunk``), which read all three schemes; they are
also the rules of ``seqeval`` 1.2.2's default mode (``get_entities``), so
:func:`entity_scores` equals ``seqeval.metrics`` ``precision_score``,
``recall_score``, ``f1_score`` and ``classification_report`` (tested for
IOB1, IOB2 and IOBES).

Errors name the file and the line and carry ``argument`` (the tool's flag).

Source: CoNLL-2000/2003 shared-task file layouts and ``conlleval`` (perl)
chunk rules; ``seqeval.metrics.sequence_labeling.get_entities`` (1.2.2).
"""

from __future__ import annotations

import dataclasses
import io
import os
from typing import Dict, List, Optional, Sequence, Tuple

from bert_tf import errors
from bert_tf import io_utils

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"
PREFIXES = ("B", "I", "E", "S")


@dataclasses.dataclass
class Sentence:
  """One sentence of a CoNLL file.

  Attributes:
    words: the tokens (each whitespace-free, non-empty).
    tags: one tag per token, or None (a file without tags).
    lines: the file line (1-based) of every token.

  Example:
    >>> s = Sentence(["Empire", "State", "Building"], ["B-fac", "I-fac", "I-fac"], [1, 2, 3])
    >>> get_entities(s.tags)
    [('fac', 0, 2)]
  """
  words: List[str]
  tags: Optional[List[str]]
  lines: List[int]

  @property
  def line(self) -> int:
    """The line of the first token."""
    return self.lines[0] if self.lines else 0

  @property
  def text(self) -> str:
    """The words joined by one space (what a client would send the export)."""
    return " ".join(self.words)


def split_tag(tag: str) -> Tuple[str, str]:
  """``(prefix, type)`` as seqeval's default mode reads a tag:
  ``"B-geo-loc"`` -> ``("B", "geo-loc")``, ``"O"`` -> ``("O", "_")``."""
  return tag[:1], (tag[1:].split("-", 1)[-1] or "_")


def valid_tag(tag: str) -> bool:
  """``O`` or ``P-TYPE`` with ``P`` in ``B I E S`` and a non-empty type."""
  return tag == OUTSIDE or (len(tag) > 2 and tag[0] in PREFIXES and tag[1] == "-")


def _end_of_chunk(prev_tag, tag, prev_type, type_):
  """conlleval ``endOfChunk`` (seqeval ``end_of_chunk``)."""
  if prev_tag in ("E", "S"):
    return True
  if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
    return True
  return prev_tag not in ("O", ".") and prev_type != type_


def _start_of_chunk(prev_tag, tag, prev_type, type_):
  """conlleval ``startOfChunk`` (seqeval ``start_of_chunk``)."""
  if tag in ("B", "S"):
    return True
  if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
    return True
  return tag not in ("O", ".") and prev_type != type_


def get_entities(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
  """Entities of one sentence's tags: ``[(type, first, last)]`` (word
  indexes, ``last`` inclusive), in order; conlleval's chunk rules (IOB1,
  IOB2 and IOBES alike).

  Example:
    >>> get_entities(["B-PER", "I-PER", "O", "I-LOC", "S-ORG"])
    [('PER', 0, 1), ('LOC', 3, 3), ('ORG', 4, 4)]
  """
  prev_tag, prev_type, begin = "O", "", 0
  chunks = []
  for i, chunk in enumerate(list(tags) + [OUTSIDE]):
    tag, type_ = split_tag(chunk)
    if _end_of_chunk(prev_tag, tag, prev_type, type_):
      chunks.append((prev_type, begin, i - 1))
    if _start_of_chunk(prev_tag, tag, prev_type, type_):
      begin = i
    prev_tag, prev_type = tag, type_
  return chunks


def detect_scheme(tags: Sequence[str]) -> str:
  """``"IOBES"`` when any tag has prefix E or S; else ``"IOB1"`` when some
  entity starts with ``I-`` (after ``O``, the start or another type), else
  ``"IOB2"``. Informational: the scores read every scheme."""
  prev = OUTSIDE
  iob1 = False
  for t in tags:
    if t[:1] in ("E", "S"):
      return "IOBES"
    if t[:1] == "I" and (prev == OUTSIDE or split_tag(prev)[1] != split_tag(t)[1]):
      iob1 = True
    prev = t
  return "IOB1" if iob1 else "IOB2"


def _numbered_lines(f, path, argument):
  """``(line number, text)`` of a binary file, lines ended by ``\\n``,
  ``\\r\\n`` or a lone ``\\r`` (as text mode with ``newline=""``), each
  decoded on its own so that invalid UTF-8 names its own line (text mode
  decodes 8 KB at a time and fails on the chunk's first line).

  Raises:
    bert_tf.errors.InputError: ``path:line: not UTF-8: ...``.
  """
  number = 0
  for chunk in f:  # split at b"\n" only
    try:
      text = chunk.decode("utf-8")
    except UnicodeDecodeError as e:
      raise errors.InputError("%s:%d: not UTF-8: %s" % (path, number + 1, e),
                              argument=argument) from e
    body, end = (text[:-2], "\r\n") if text.endswith("\r\n") else (
        (text[:-1], text[-1]) if text.endswith(("\n", "\r")) else (text, ""))
    parts = body.split("\r")
    for i, part in enumerate(parts):
      number += 1
      yield number, part + (end if i == len(parts) - 1 else "\r")


def read_conll(path: str, with_tags: bool = True,
               labels: Optional[Sequence[str]] = None,
               argument: Optional[str] = None,
               limit: Optional[int] = None) -> List[Sentence]:
  """Reads a CoNLL file (see the module docstring for the layouts).

  Args:
    path: the file (UTF-8).
    with_tags: require a tag column (2 or 4 columns). Without it a file of
      1 column is read with ``tags=None``; tags of a 2/4-column file are
      still read (and checked).
    labels: the known tags; a tag outside them is an error (dev / test files
      must use the training labels).
    argument: the flag naming the file, carried by the errors.
    limit: read at most this many sentences (None: all).

  Returns:
    list of :class:`Sentence` in file order (never an empty one: repeated
    blank lines and ``-DOCSTART-`` lines only separate sentences).

  Raises:
    bert_tf.errors.InputError: missing or unreadable file, invalid UTF-8, a
      line whose column count differs from the first token line's (or is
      not 2 or 4 with tags), a malformed tag, a tag not in ``labels``,
      naming the file and line.

  Example::

    dev = read_conll("../shared/data/ner_wnut16/dev.txt")   # 300 sentences
  """
  if not os.path.isfile(path):
    raise errors.InputError("%r does not exist" % path, argument=argument)
  known = None if labels is None else set(labels)
  sentences: List[Sentence] = []
  words, tags, lines = [], [], []
  columns, first_line, number = None, 0, 0

  def flush():
    if words:
      sentences.append(Sentence(list(words), list(tags) if columns != 1 else None,
                                list(lines)))
    words.clear()
    tags.clear()
    lines.clear()

  try:
    with open(path, "rb") as f:
      for number, raw in _numbered_lines(f, path, argument):
        line = raw.rstrip("\r\n")
        if not line.strip():
          flush()
          if limit is not None and len(sentences) >= limit:
            break
          continue
        fields = ([x.strip() for x in line.split("\t")] if "\t" in line
                  else line.split())
        if fields[0] == DOCSTART:
          flush()
          continue
        if columns is None:
          allowed = (2, 4) if with_tags else (1, 2, 4)
          if len(fields) not in allowed:
            raise errors.InputError(
                "%s:%d: %d columns; expected token<TAB>tag (2) or the CoNLL-2003 "
                "layout word POS chunk NER (4)%s" % (
                    path, number, len(fields), "" if with_tags else ", or tokens only (1)"),
                argument=argument)
          columns, first_line = len(fields), number
        elif len(fields) != columns:
          raise errors.InputError(
              "%s:%d: %d columns, the file's first token line (line %d) has %d" % (
                  path, number, len(fields), first_line, columns), argument=argument)
        word = fields[0]
        if not word or len(word.split()) != 1:
          raise errors.InputError(
              "%s:%d: token %r is empty or holds whitespace (one word per line)" % (
                  path, number, word), argument=argument)
        if columns != 1:
          tag = fields[-1]
          if not valid_tag(tag):
            raise errors.InputError(
                "%s:%d: tag %r is not O or B-/I-/E-/S-TYPE (IOB1, IOB2, IOBES)" % (
                    path, number, tag), argument=argument)
          if known is not None and tag not in known:
            raise errors.InputError(
                "%s:%d: tag %r is not one of the %d labels (%s)" % (
                    path, number, tag, len(known), " ".join(sorted(known))),
                argument=argument)
          tags.append(tag)
        words.append(word)
        lines.append(number)
      else:
        flush()
  except OSError as e:
    raise errors.InputError("cannot read %r: %s" % (path, e), argument=argument) from e
  if limit is not None:
    sentences = sentences[:limit]
  return sentences


def label_list_from(sentences: Sequence[Sentence]) -> List[str]:
  """The sorted set of the tags of ``sentences`` plus ``O``."""
  found = {t for s in sentences for t in (s.tags or ())}
  found.add(OUTSIDE)
  return sorted(found)


def check_label_list(labels: Sequence[str], argument: Optional[str] = None) -> List[str]:
  """``labels`` as a list, checked: well-formed tags, no repeats, ``O`` in.

  Raises:
    bert_tf.errors.InputError: naming the bad label.
  """
  labels = [l.strip() for l in labels]
  bad = [l for l in labels if not valid_tag(l)]
  if bad:
    raise errors.InputError("label %r is not O or B-/I-/E-/S-TYPE" % bad[0],
                            argument=argument)
  if len(set(labels)) != len(labels):
    raise errors.InputError("repeated labels in %s" % ",".join(labels), argument=argument)
  if OUTSIDE not in labels:
    raise errors.InputError("the labels need %r" % OUTSIDE, argument=argument)
  return labels


def _prf(correct: int, predicted: int, true: int) -> Tuple[float, float, float]:
  p = correct / predicted if predicted else 0.0
  r = correct / true if true else 0.0
  f = 2 * p * r / (p + r) if p + r else 0.0
  return p, r, f


def entity_scores(true_tags: Sequence[Sequence[str]],
                  pred_tags: Sequence[Sequence[str]]) -> Dict:
  """Entity-level micro precision / recall / F1 (exact type and span), overall
  and per type: conlleval's numbers (as fractions, not percent) and
  seqeval's default mode.

  Args:
    true_tags, pred_tags: per sentence, one tag per word (same lengths).

  Returns:
    ``{"precision", "recall", "f1", "true", "predicted", "correct",
    "accuracy" (word-level tag accuracy), "per_type": {type: {"precision",
    "recall", "f1", "support" (true entities), "predicted", "correct"}}}``;
    a ratio with a zero denominator is 0.0 (seqeval's default).

  Raises:
    ValueError: sentences of different lengths.
  """
  if len(true_tags) != len(pred_tags):
    raise ValueError("%d true sentences, %d predicted" % (len(true_tags), len(pred_tags)))
  true_set, pred_set = set(), set()
  words = right = 0
  for k, (t, p) in enumerate(zip(true_tags, pred_tags)):
    if len(t) != len(p):
      raise ValueError("sentence %d: %d true tags, %d predicted" % (k, len(t), len(p)))
    true_set.update((k,) + e for e in get_entities(t))
    pred_set.update((k,) + e for e in get_entities(p))
    words += len(t)
    right += sum(a == b for a, b in zip(t, p))
  correct = true_set & pred_set
  types = sorted({e[1] for e in true_set | pred_set})
  per_type = {}
  for ty in types:
    c = sum(e[1] == ty for e in correct)
    n_pred = sum(e[1] == ty for e in pred_set)
    n_true = sum(e[1] == ty for e in true_set)
    p, r, f = _prf(c, n_pred, n_true)
    per_type[ty] = {"precision": p, "recall": r, "f1": f, "support": n_true,
                    "predicted": n_pred, "correct": c}
  p, r, f = _prf(len(correct), len(pred_set), len(true_set))
  return {"precision": p, "recall": r, "f1": f, "true": len(true_set),
          "predicted": len(pred_set), "correct": len(correct),
          "accuracy": right / words if words else 0.0, "per_type": per_type}


def format_report(scores: Dict) -> str:
  """A conlleval-style table (percent) of :func:`entity_scores`."""
  out = io.StringIO()
  out.write("accuracy: %6.2f%%; precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f  "
            "(%d true, %d found, %d correct entities)\n" % (
                100 * scores["accuracy"], 100 * scores["precision"],
                100 * scores["recall"], 100 * scores["f1"], scores["true"],
                scores["predicted"], scores["correct"]))
  width = max([len(t) for t in scores["per_type"]] + [4])
  out.write("%*s  precision  recall     FB1  support  found\n" % (width, "type"))
  for ty, s in scores["per_type"].items():
    out.write("%*s  %8.2f%%  %6.2f%%  %6.2f  %7d  %5d\n" % (
        width, ty, 100 * s["precision"], 100 * s["recall"], 100 * s["f1"],
        s["support"], s["predicted"]))
  return out.getvalue()


def write_conll(path: str, sentences: Sequence[Sentence],
                pred_tags: Sequence[Sequence[str]]) -> str:
  """Writes predictions in CoNLL layout, atomically; returns ``path``.

  One line per word, a blank line after every sentence:
  ``token<TAB>gold<TAB>predicted`` when the sentences have tags (the input
  of ``conlleval -d '\\t'``), else ``token<TAB>predicted`` (the two-column
  layout :func:`read_conll` reads back).

  Raises:
    ValueError: a sentence with another number of predicted tags.
  """
  buf = io.StringIO()
  for k, (s, pred) in enumerate(zip(sentences, pred_tags)):
    if len(pred) != len(s.words):
      raise ValueError("sentence %d: %d words, %d predicted tags" % (
          k, len(s.words), len(pred)))
    for i, (w, p) in enumerate(zip(s.words, pred)):
      buf.write("%s\t%s\t%s\n" % (w, s.tags[i], p) if s.tags is not None
                else "%s\t%s\n" % (w, p))
    buf.write("\n")
  io_utils.atomic_write_text(path, buf.getvalue())
  return path
