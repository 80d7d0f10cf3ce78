"""SWAG-layout multiple-choice CSV files (paper section 4.4), without TensorFlow.

The SWAG CSV layout (Zellers et al. 2018, ``train.csv`` / ``val.csv`` of
https://github.com/rowanz/swagaf, the files Hugging Face's ``run_swag.py``
reads): a header row, then one example per row, comma-separated, quoted
where needed::

  video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label

Only ``sent1``, ``sent2``, ``ending0`` .. ``ending{N-1}`` and (for labeled
files) ``label`` are read; ``video-id`` and ``fold-ind`` are kept as the
example id when present. The number of choices N is the number of
``ending<i>`` columns (``ending0`` .. without gaps). A SWAG test file has no
``label`` column (or empty labels): read it with ``with_labels=False``.

**Choice texts.** One ``[CLS] context [SEP] ending [SEP]`` sequence per
choice, where ``context = sent1`` and ``ending = sent2 + " " + ending<i>``.
This is the split of Hugging Face's SWAG example (``run_swag.py`` /
``run_swag_no_trainer.py``: first sentence ``sent1``, second
``f"{sent2} {ending}"``) and of the paper (section 4.4: "the given sentence"
as segment A and "a possible continuation" as segment B; SWAG's
``startphrase`` is ``sent1 + " " + sent2``, so the continuation's own
beginning ``sent2`` goes with each ending). It keeps the ending whole in
segment B, so the round-robin truncation shortens the longer of the two
parts as the original ``_truncate_seq_pair`` does. The joined text is
stripped, so an empty ``sent2`` (as in ``mc_wikihow``) gives the ending
alone; the WordPiece tokens are those of Hugging Face's ``" " + ending``
(whitespace is not a token).

Errors name the file and the line (the CSV line where the row starts; a
quoted field may span lines) and carry ``argument`` (the tool's flag).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from typing import List, Optional, Sequence, Tuple

from bert_tf import errors

CONTEXT_COLUMN = "sent1"
ENDING_PREFIX_COLUMN = "sent2"
LABEL_COLUMN = "label"
ID_COLUMNS = ("video-id", "fold-ind")
_ENDING = re.compile(r"ending(\d+)$")


@dataclasses.dataclass
class SwagExample:
  """One multiple-choice example.

  Attributes:
    example_id: ``video-id`` (and ``-fold-ind``) when present, else the
      data row number (1-based).
    context: ``sent1`` (segment A of every choice).
    start_ending: ``sent2`` (the start of every ending).
    endings: the N ``ending<i>`` texts.
    label: the index of the right ending in 0..N-1, or None (test files).
    line: the file line where the row starts (1-based; the header is line 1).

  Example:
    >>> ex = SwagExample("v-1", "A man sits.", "He", ["stands.", "eats."], 0)
    >>> ex.choice_texts
    (['A man sits.', 'A man sits.'], ['He stands.', 'He eats.'])
  """
  example_id: str
  context: str
  start_ending: str
  endings: List[str]
  label: Optional[int]
  line: int = 0

  @property
  def choice_texts(self) -> Tuple[List[str], List[str]]:
    """``(contexts, endings)``, N strings each: segment A and segment B of
    every choice (``sent1``; ``(sent2 + " " + ending<i>).strip()``)."""
    n = len(self.endings)
    return ([self.context] * n,
            [("%s %s" % (self.start_ending, e)).strip() for e in self.endings])


def _ending_columns(header: Sequence[str], path: str, argument: Optional[str]):
  """Indexes of ``ending0``..``ending{N-1}`` in ``header``."""
  found = {}
  for i, name in enumerate(header):
    m = _ENDING.match(name.strip())
    if m:
      found[int(m.group(1))] = i
  n = 0
  while n in found:
    n += 1
  if n < 2 or len(found) != n:
    raise errors.InputError(
        "%s:1: the header needs columns ending0 .. ending<N-1> (N >= 2, no "
        "gaps), found %s" % (path, sorted("ending%d" % k for k in found) or "none"),
        argument=argument)
  return [found[k] for k in range(n)]


def read_swag_examples(path: str, with_labels: bool = True,
                       num_choices: Optional[int] = None,
                       argument: Optional[str] = None,
                       limit: Optional[int] = None) -> List[SwagExample]:
  """Reads a SWAG-layout CSV file.

  Args:
    path: the CSV file (UTF-8, header row).
    with_labels: require a ``label`` column and a label in 0..N-1 on every
      row (train / dev files). Without it the labels are read when present
      and valid integers, else None.
    num_choices: the N to expect (e.g. the training file's); None: from the
      header.
    argument: the flag naming the file, carried by the errors.
    limit: read at most this many examples (None: all).

  Returns:
    list of :class:`SwagExample` in file order.

  Source: the SWAG CSV columns (rowanz/swagaf ``data/*.csv``) as Hugging
  Face ``run_swag.py`` reads them; the checks are ours.

  Example::

    examples = read_swag_examples("data/mc_wikihow/dev.csv")
    contexts, endings, labels = choice_arrays(examples)  # 450 x 4, 450

  Raises:
    bert_tf.errors.InputError: missing or unreadable file, no header, a
      missing header column (``sent1``, ``sent2``, ``ending<i>``, ``label``),
      a row with another number of fields than the header, an empty ending,
      a label that is not an integer in 0..N-1; naming the file and line.
  """
  if not os.path.isfile(path):
    raise errors.InputError("%r does not exist" % path, argument=argument)
  try:
    f = open(path, encoding="utf-8", newline="")
  except OSError as e:
    raise errors.InputError("cannot read %r: %s" % (path, e), argument=argument) from e
  examples = []
  with f:
    reader = csv.reader(f)
    try:
      header = next(reader, None)
      if not header:
        raise errors.InputError("%s: empty file (expected a SWAG header row)" % path,
                                argument=argument)
      names = [h.strip() for h in header]
      missing = [c for c in (CONTEXT_COLUMN, ENDING_PREFIX_COLUMN) if c not in names]
      if with_labels and LABEL_COLUMN not in names:
        missing.append(LABEL_COLUMN)
      if missing:
        raise errors.InputError(
            "%s:1: the header has no column %s (SWAG layout: video-id,fold-ind,"
            "startphrase,sent1,sent2,gold-source,ending0,..,label)" % (
                path, ", ".join(missing)), argument=argument)
      ending_cols = _ending_columns(names, path, argument)
      n = len(ending_cols)
      if num_choices is not None and n != num_choices:
        raise errors.InputError("%s:1: %d endings per example, expected %d" % (
            path, n, num_choices), argument=argument)
      ctx_col, prefix_col = names.index(CONTEXT_COLUMN), names.index(ENDING_PREFIX_COLUMN)
      label_col = names.index(LABEL_COLUMN) if LABEL_COLUMN in names else None
      id_cols = [names.index(c) for c in ID_COLUMNS if c in names]
      line = reader.line_num + 1
      for row in reader:
        start, line = line, reader.line_num + 1
        if limit is not None and len(examples) >= limit:
          break
        if not row:  # a blank line
          continue
        if len(row) != len(names):
          raise errors.InputError("%s:%d: %d fields, the header has %d" % (
              path, start, len(row), len(names)), argument=argument)
        endings = [row[c] for c in ending_cols]
        for k, e in enumerate(endings):
          if not e.strip():
            raise errors.InputError("%s:%d: ending%d is empty" % (path, start, k),
                                    argument=argument)
        label = None
        raw = row[label_col].strip() if label_col is not None else ""
        if raw or with_labels:
          try:
            label = int(raw)
          except ValueError:
            label = None
          if label is None or not 0 <= label < n:
            if with_labels:
              raise errors.InputError(
                  "%s:%d: label %r is not a choice index in 0..%d" % (
                      path, start, raw, n - 1), argument=argument)
            label = None
        example_id = "-".join(row[c] for c in id_cols) or str(len(examples) + 1)
        examples.append(SwagExample(example_id, row[ctx_col], row[prefix_col],
                                    endings, label, start))
    except csv.Error as e:
      raise errors.InputError("%s:%d: %s" % (path, reader.line_num, e),
                              argument=argument) from e
    except UnicodeDecodeError as e:
      raise errors.InputError("%s:%d: not UTF-8: %s" % (path, reader.line_num + 1, e),
                              argument=argument) from e
  return examples


def choice_arrays(examples: Sequence[SwagExample]) -> Tuple[list, list, list]:
  """Examples -> ``(contexts, endings, labels)``: lists of E lists of N
  strings (segment A and B of every choice) and E labels (None for
  unlabeled examples)."""
  contexts, endings, labels = [], [], []
  for ex in examples:
    a, b = ex.choice_texts
    contexts.append(a)
    endings.append(b)
    labels.append(ex.label)
  return contexts, endings, labels
