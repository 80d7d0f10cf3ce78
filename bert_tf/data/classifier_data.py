"""Fine-tuning task readers: GLUE / XNLI / any TSV or CSV -> labeled examples.

Source: google-research/bert ``run_classifier.py`` (``DataProcessor``,
``_read_tsv``: tab-separated, no quoting; ``XnliProcessor``,
``MnliProcessor``, ``MrpcProcessor``, ``ColaProcessor``) and, for the GLUE
tasks the original has no processor for, the file layouts of the GLUE
distribution (``download_glue_data.py``; the same columns as Hugging Face
``transformers``' former ``glue`` processors). Task names are
case-insensitive:

=========  ==================================================  ===============
task       train / dev rows (0-based columns)                  test rows
=========  ==================================================  ===============
cola       no header; ``source, label, mark, sentence`` (1, 3)  header; ``index, sentence``
sst-2      header; ``sentence, label``                          header; ``index, sentence``
mrpc       header; ``Quality, #1 ID, #2 ID, #1 String, #2 String``  same, ``index`` first
sts-b      header; ``index .. sentence1(7) sentence2(8) score(9)``  header; 7, 8
qqp        header; ``id qid1 qid2 question1 question2 is_duplicate``  ``id question1 question2``
mnli       header; sentence1(8) sentence2(9) gold_label(last);  ``test_matched.tsv``,
           ``dev_matched.tsv`` and ``dev_mismatched.tsv``       ``test_mismatched.tsv``
qnli       header; ``index question sentence label``            ``index question sentence``
rte, wnli  header; ``index sentence1 sentence2 label``          ``index sentence1 sentence2``
xnli       ``multinli/multinli.train.<lang>.tsv`` (header;      ``xnli.test.tsv``
           premise, hypo, label; ``contradictory`` ->
           ``contradiction``); ``xnli.dev.tsv`` rows of one
           language (column 0), label 1, texts 6 and 7
pairs      header; ``sentence1, sentence2, label``              same
tsv / csv  any file with a header row; columns named by ``--text_a_column``,
           ``--text_b_column``, ``--label_column``; labels from ``--labels``
           or the sorted set of train labels
=========  ==================================================  ===============

STS-B is a regression task (float labels). tensorflow-datasets GLUE
(``glue/sst2``, ...) is read from an existing ``--tfds_data_dir`` without
downloading (:func:`read_tfds_split`).
"""

import csv
import dataclasses
import os
import sys
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from bert_tf import errors
from bert_tf import io_utils

csv.field_size_limit(sys.maxsize)


TaskError = errors.TaskError  # re-exported; defined in bert_tf.errors


@dataclasses.dataclass(frozen=True)
class Columns:
  """Where the fields of one split's rows are.

  Each field is a 0-based column index (negative counts from the end, as the
  original MNLI ``line[-1]``), a header name (str; generic tasks), or None.

  Attributes:
    text_a: the first text.
    text_b: the second text (pair tasks) or None.
    label: the label (None: an unlabeled test split).
    index: the row id written to the GLUE submission file (None: row number).
    language: XNLI's language column (rows of other languages are skipped).
  """
  text_a: object
  text_b: object = None
  label: object = None
  index: object = None
  language: object = None


@dataclasses.dataclass(frozen=True)
class Split:
  """One data file of a task.

  Attributes:
    name: ``train``, ``dev``, ``dev_mismatched``, ``test``, ``test_mismatched``.
    filename: path relative to ``--data_dir`` (``{lang}`` is replaced by the
      task's language).
    columns: :class:`Columns`.
    header: the file starts with a header row (skipped, or used to resolve
      column names).
    submission: GLUE submission file stem for test splits (``MNLI-m``).
  """
  name: str
  filename: str
  columns: Columns
  header: bool = True
  submission: str = None


@dataclasses.dataclass(frozen=True)
class Task:
  """A fine-tuning task: its labels, files and metrics.

  Attributes:
    name: canonical task name (``--task_name``).
    labels: label strings (index = label id); () for regression; None means
      "infer from the train file" (generic tasks, see :func:`resolve_labels`).
    is_pair: two text inputs.
    train: the training :class:`Split`.
    dev: tuple of dev splits; the first one is the one the best model is
      chosen on (MNLI: matched).
    test: tuple of test splits.
    is_regression: float labels, one output (STS-B).
    label_aliases: tuple of ``(raw, label)`` pairs mapped on reading (XNLI's
      ``contradictory``).
    metrics: the metric family (:mod:`bert_tf.metrics`): ``accuracy``,
      ``mcc``, ``acc_and_f1``, ``pearson_and_spearman``.
    delimiter, quotechar: ``csv.reader`` arguments (the original: tab, none).
    language: XNLI language.
  """
  name: str
  labels: object
  is_pair: bool
  train: Split
  dev: tuple
  test: tuple
  is_regression: bool = False
  label_aliases: tuple = ()
  metrics: str = "accuracy"
  delimiter: str = "\t"
  quotechar: object = None
  language: str = None

  @property
  def num_outputs(self):
    """Model outputs: 1 for regression, else the number of labels."""
    return 1 if self.is_regression else len(self.labels)


@dataclasses.dataclass
class Examples:
  """Parsed rows of one split.

  Attributes:
    texts_a: list of str; texts_b: list of str or None (single-sentence).
    labels: list of int label ids, list of float (regression), or None.
    ids: list of str row ids for submission files.
    path: the file read (or ``tfds:NAME/SPLIT``).
  """
  texts_a: list
  texts_b: object
  labels: object
  ids: list
  path: str

  def __len__(self):
    return len(self.texts_a)


def _glue(name, labels, train_cols, test_cols, header=True, test_header=True,
          submission=None, metrics="accuracy", regression=False, pair=True):
  train = Split("train", "train.tsv", train_cols, header)
  return Task(name, labels, pair, train,
              (Split("dev", "dev.tsv", train_cols, header),),
              (Split("test", "test.tsv", test_cols, test_header, submission),),
              is_regression=regression, metrics=metrics)


_NLI = ("contradiction", "entailment", "neutral")
_MNLI_TRAIN = Columns(8, 9, -1)
_MNLI_TEST = Columns(8, 9, None, index=0)
_XNLI_DEV = Columns(6, 7, 1, language=0)

TASKS = {
    "cola": _glue("cola", ("0", "1"), Columns(3, None, 1), Columns(1, index=0),
                  header=False, submission="CoLA", metrics="mcc", pair=False),
    "sst-2": _glue("sst-2", ("0", "1"), Columns(0, None, 1), Columns(1, index=0),
                   submission="SST-2", pair=False),
    "mrpc": _glue("mrpc", ("0", "1"), Columns(3, 4, 0), Columns(3, 4, index=0),
                  submission="MRPC", metrics="acc_and_f1"),
    "sts-b": _glue("sts-b", (), Columns(7, 8, 9), Columns(7, 8, index=0),
                   submission="STS-B", metrics="pearson_and_spearman",
                   regression=True),
    "qqp": _glue("qqp", ("0", "1"), Columns(3, 4, 5), Columns(1, 2, index=0),
                 submission="QQP", metrics="acc_and_f1"),
    "mnli": Task(
        "mnli", _NLI, True, Split("train", "train.tsv", _MNLI_TRAIN),
        (Split("dev", "dev_matched.tsv", _MNLI_TRAIN),
         Split("dev_mismatched", "dev_mismatched.tsv", _MNLI_TRAIN)),
        (Split("test", "test_matched.tsv", _MNLI_TEST, True, "MNLI-m"),
         Split("test_mismatched", "test_mismatched.tsv", _MNLI_TEST, True,
               "MNLI-mm"))),
    "qnli": _glue("qnli", ("entailment", "not_entailment"), Columns(1, 2, 3),
                  Columns(1, 2, index=0), submission="QNLI"),
    "rte": _glue("rte", ("entailment", "not_entailment"), Columns(1, 2, 3),
                 Columns(1, 2, index=0), submission="RTE"),
    "wnli": _glue("wnli", ("0", "1"), Columns(1, 2, 3), Columns(1, 2, index=0),
                  submission="WNLI"),
    "xnli": Task(
        "xnli", _NLI, True,
        Split("train", os.path.join("multinli", "multinli.train.{lang}.tsv"),
              Columns(0, 1, 2)),
        (Split("dev", "xnli.dev.tsv", _XNLI_DEV),),
        (Split("test", "xnli.test.tsv", Columns(6, 7, None, language=0), True,
               "XNLI"),),
        label_aliases=(("contradictory", "contradiction"),), language="en"),
    # Existing project tasks: dialog reply pairs (sentence1, sentence2, label).
    "pairs": _glue("pairs", ("0", "1"), Columns(0, 1, 2), Columns(1, 2, index=0),
                   submission="pairs"),
}
ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-m": "mnli",
           "multinli": "mnli"}
GENERIC = ("tsv", "csv")
# tensorflow-datasets GLUE config -> task; tfds split names per task split.
TFDS_CONFIGS = {"cola": "cola", "sst2": "sst-2", "mrpc": "mrpc", "stsb": "sts-b",
                "qqp": "qqp", "mnli": "mnli", "qnli": "qnli", "rte": "rte",
                "wnli": "wnli"}
TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test",
               "dev_mismatched": "validation_mismatched",
               "test_mismatched": "test_mismatched"}


def task_names():
  """All ``--task_name`` values (sorted)."""
  return sorted(list(TASKS) + list(GENERIC))


def data_files_help() -> str:
  """The files each task reads from ``--data_dir`` (train, dev..., test...),
  tasks with the same files grouped: the ``--data_dir`` help."""
  groups = {}
  for name in task_names():
    task = get_task(name, xnli_language="<lang>", text_a_column="a", label_column="l")
    files = tuple(s.filename.format(lang="<lang>")
                  for s in (task.train,) + task.dev + task.test)
    groups.setdefault(files, []).append(name)
  return "; ".join("%s: %s" % ("/".join(names), ", ".join(files))
                   for files, names in groups.items())


def parse_labels(items) -> Tuple[Optional[tuple], tuple]:
  """``--labels`` -> ``(label names or None, ((data value, name), ...))``.

  Either label names in id order (``neg,pos``), or ``VALUE:NAME`` pairs
  that name the values the data holds (``0:ham,1:spam``: the ids in the
  pairs' order, the names into the run's ``labels``, the model's
  ``id2label`` and every export), as transformers' ``id2label`` names a
  dataset's integer labels.

  Args:
    items: the flag's comma-separated items (str or a sequence of str).

  Raises:
    TaskError: pairs mixed with plain names, an empty value or name, a
      value or name given twice (``argument="labels"``).
  """
  if isinstance(items, str):
    items = items.split(",")
  items = [i.strip() for i in items or () if i.strip()]
  if not items:
    return None, ()
  pairs = [i.split(":", 1) for i in items if ":" in i]
  if not pairs:
    return tuple(items), ()
  bad = [i for i in items if ":" not in i or not all(p.strip() for p in i.split(":", 1))]
  if bad:
    raise TaskError("--labels: %r is not VALUE:NAME; give every label as VALUE:NAME "
                    "(0:ham,1:spam) or none" % bad[0], argument="labels")
  values = [v.strip() for v, _ in pairs]
  names = tuple(n.strip() for _, n in pairs)
  for what, seq in (("value", values), ("name", names)):
    if len(set(seq)) != len(seq):
      raise TaskError("--labels: repeated %s in %s" % (what, ",".join(items)),
                      argument="labels")
  return names, tuple(zip(values, names))


def _named_labels(task: Task, aliases: tuple) -> Task:
  """``task`` with its fixed labels renamed by ``--labels`` VALUE:NAME pairs
  (every one of its labels named; its own aliases kept, renamed)."""
  names = dict(aliases)
  if set(names) != set(task.labels):
    raise TaskError("--labels: task %s's labels are %s; name each of them once (got %s)"
                    % (task.name, ",".join(task.labels), ",".join(names)),
                    argument="labels")
  own = tuple((raw, names[label]) for raw, label in task.label_aliases)
  return dataclasses.replace(task, labels=tuple(names[l] for l in task.labels),
                             label_aliases=own + tuple(aliases))


def get_task(name, xnli_language="en", text_a_column=None, text_b_column=None,
             label_column=None, labels=None, label_aliases=()):
  """The :class:`Task` for ``--task_name`` (case-insensitive).

  Args:
    name: a GLUE/XNLI task name, ``pairs``, or ``tsv`` / ``csv`` (generic).
    xnli_language: XNLI language code (``--xnli_language``).
    text_a_column, text_b_column, label_column: generic tasks' header names
      (or 0-based indices); text_b optional.
    labels: generic tasks: label strings (``--labels``); None infers them
      from train (sorted). Other tasks: ignored (but see ``label_aliases``).
    label_aliases: ``(data value, label name)`` pairs (:func:`parse_labels`
      of ``--labels=0:ham,1:spam``): the data's values read as the names;
      for a task with fixed labels, each of its labels renamed.

  Raises:
    TaskError: unknown name (listing the known ones), a generic task
      without ``--text_a_column`` / ``--label_column``, ``label_aliases``
      that do not name a fixed-label task's labels.
  """
  key = ALIASES.get(name.lower(), name.lower())
  if key in GENERIC:
    if not text_a_column or not label_column:
      raise TaskError("--task_name=%s needs --text_a_column and --label_column "
                      "(header names of the columns)" % key)
    cols = Columns(_column(text_a_column), _column(text_b_column),
                   _column(label_column))
    test_cols = dataclasses.replace(cols, label=None)
    ext = "." + key
    labels = tuple(labels) if labels else None
    if labels is not None and len(set(labels)) != len(labels):
      raise TaskError("--labels: repeated label in %s" % ",".join(labels))
    return Task(key, labels, text_b_column is not None and text_b_column != "",
                Split("train", "train" + ext, cols),
                (Split("dev", "dev" + ext, cols),),
                (Split("test", "test" + ext, test_cols, True, key),),
                label_aliases=tuple(label_aliases),
                delimiter="\t" if key == "tsv" else ",",
                quotechar=None if key == "tsv" else '"')
  if key not in TASKS:
    raise TaskError("--task_name: unknown task %r; known tasks: %s" %
                    (name, ", ".join(task_names())))
  task = TASKS[key]
  if key == "xnli":
    task = dataclasses.replace(task, language=xnli_language)
  if label_aliases and not task.is_regression:
    task = _named_labels(task, tuple(label_aliases))
  return task


def _column(c):
  if c is None or c == "":
    return None
  return int(c) if isinstance(c, int) or str(c).lstrip("-").isdigit() else str(c)


def split_path(task, data_dir, split):
  """Path of ``split`` (a :class:`Split`) under ``data_dir``."""
  return os.path.join(data_dir, split.filename.format(lang=task.language))


def _resolve(col, header, path):
  """A header name -> its index (ints pass through)."""
  if col is None or isinstance(col, int):
    return col
  if header is None:
    raise TaskError("%s: column %r named but the file has no header row" %
                    (path, col))
  if col not in header:
    raise TaskError("%s line 1: no column %r in the header (columns: %s)" %
                    (path, col, ", ".join(header)))
  return header.index(col)


def read_rows(task, path, split, strict_utf8=False):
  """Raw rows of a split file: yields ``(line_number, fields, header)``.

  Bytes that are not UTF-8 are replaced by U+FFFD, with one warning naming
  the file, the first such line and their count
  (:func:`bert_tf.io_utils.decode_lines`); ``strict_utf8`` refuses them.

  Raises:
    TaskError: the file is missing (naming the path and ``--data_dir``).
    InputError: with ``strict_utf8``, a line that is not UTF-8 (file, line).
  """
  if not os.path.exists(path):
    raise TaskError("data file %r does not exist (check --data_dir)" % path)
  with open(path, "rb") as raw:
    f = io_utils.decode_lines(raw, path, strict=strict_utf8)
    if task.quotechar is None:
      reader = csv.reader(f, delimiter=task.delimiter, quoting=csv.QUOTE_NONE)
    else:
      reader = csv.reader(f, delimiter=task.delimiter, quotechar=task.quotechar)
    header = None
    for row in reader:
      if split.header and header is None:
        header = [h.strip() for h in row]
        continue
      yield reader.line_num, row, header


def read_split(task, path, split, labels=None, with_labels=None, strict_utf8=False):
  """Reads one split file into :class:`Examples`.

  Args:
    task: a :class:`Task`.
    path: the file (see :func:`split_path`).
    split: the :class:`Split` describing its columns.
    labels: label strings (default ``task.labels``); None for a generic task
      reads the raw label strings (see :func:`resolve_labels`).
    with_labels: read labels (default: when the split has a label column).
    strict_utf8: refuse bytes that are not UTF-8 (default: replaced, one
      warning; :func:`read_rows`).

  Returns:
    :class:`Examples`; labels are int ids (classification), floats
    (regression), raw strings (``labels`` None), or None.

  Raises:
    TaskError: a missing file, a missing column, a row with too few
      columns or (in a file with a header) another number of fields than
      the header, an unknown label or a non-numeric regression score, naming the
      file and line; or an empty file.
  """
  labels = task.labels if labels is None else labels
  cols = split.columns
  if with_labels is None:
    with_labels = cols.label is not None
  if with_labels and cols.label is None:
    raise TaskError("%s: split %s has no label column" % (path, split.name))
  label_index = {l: i for i, l in enumerate(labels)} if labels else None
  aliases = dict(task.label_aliases)
  out = Examples([], [] if task.is_pair else None, [] if with_labels else None,
                 [], path)
  resolved = None
  for lineno, row, header in read_rows(task, path, split, strict_utf8):
    if resolved is None:
      resolved = [_resolve(c, header, path) for c in
                  (cols.text_a, cols.text_b if task.is_pair else None,
                   cols.label if with_labels else None, cols.index,
                   cols.language)]
      a, b, lab, idx, lang = resolved
      if idx is None and header is not None and split.submission:
        # Generic test files: an id column by its usual names, if any.
        idx = next((header.index(n) for n in ("index", "idx", "id")
                    if n in header), None)
        resolved[3] = idx
      positive = [c for c in resolved if c is not None and c >= 0]
      needed = max(positive) + 1
      if any(c is not None and c < 0 for c in resolved):
        needed += 1  # a column from the end must lie beyond the texts
    if not row or (len(row) == 1 and not row[0].strip()):
      continue
    if len(row) < needed:
      raise TaskError("%s line %d: expected at least %d %s-separated columns "
                      "for task %s, found %d" % (
                          path, lineno, needed,
                          "tab" if task.delimiter == "\t" else "comma",
                          task.name, len(row)))
    if header is not None and len(row) != len(header):
      # A stray delimiter inside a text shifts every later column: its
      # label would be a word of the text (a new class for generic tasks).
      raise TaskError("%s line %d: %d %s-separated fields, the header has %d "
                      "(a stray %s in a text, or a missing field?)" % (
                          path, lineno, len(row),
                          "tab" if task.delimiter == "\t" else "comma",
                          len(header), "tab" if task.delimiter == "\t" else "comma"))
    if lang is not None and row[lang].strip() != task.language:
      continue
    out.texts_a.append(row[a])
    if task.is_pair:
      out.texts_b.append(row[b])
    out.ids.append(row[idx].strip() if idx is not None else str(len(out.ids)))
    if with_labels:
      raw = row[lab].strip()
      if task.is_regression:
        try:
          out.labels.append(float(raw))
        except ValueError:
          raise TaskError("%s line %d: score %r is not a number" %
                          (path, lineno, raw)) from None
        continue
      raw = aliases.get(raw, raw)
      if label_index is None:
        out.labels.append(raw)
      elif raw not in label_index:
        raise TaskError("%s line %d: label %r is not one of %s" %
                        (path, lineno, raw, ", ".join(labels)))
      else:
        out.labels.append(label_index[raw])
  if not out.texts_a:
    extra = (" for language %r (--xnli_language)" % task.language
             if cols.language is not None else "")
    raise TaskError("data file %r holds no examples%s" % (path, extra))
  return out


def resolve_labels(task, train_examples=None):
  """A task whose ``labels`` are known.

  Generic tasks without ``--labels`` take the sorted set of the train
  file's label strings, and ``train_examples`` (raw strings) become ids.

  Returns:
    ``(task, train_examples)``.

  Raises:
    TaskError: labels unknown and no train examples to infer them from.
  """
  if task.labels is not None:
    return task, train_examples
  if train_examples is None or train_examples.labels is None:
    raise TaskError("task %s: give --labels=a,b,... (no train file to infer the "
                    "labels from)" % task.name)
  labels = tuple(sorted(set(train_examples.labels)))
  index = {l: i for i, l in enumerate(labels)}
  train_examples.labels = [index[l] for l in train_examples.labels]
  return dataclasses.replace(task, labels=labels), train_examples


def read_examples(task, path, with_labels=True):
  """Reads one TSV split with the task's train (or, unlabeled, test) columns.

  Kept for callers of the first version; see :func:`read_split`.

  Returns:
    ``(texts_a, texts_b, label_ids)``: lists of str, str (or None) and int
    (label_ids is None without labels).

  Raises:
    TaskError: as :func:`read_split`.
  """
  split = task.train if with_labels else task.test[0]
  ex = read_split(task, path, split, with_labels=with_labels)
  return ex.texts_a, ex.texts_b, ex.labels


def read_tfds_split(task, tfds_name, tfds_data_dir, split):
  """Reads a prepared tensorflow-datasets GLUE split; never downloads.

  Args:
    task: the :class:`Task` (labels, pair or not).
    tfds_name: ``glue/<config>`` (``glue/sst2``, ``glue/mnli``, ...).
    tfds_data_dir: the tfds data directory that already holds it.
    split: a :class:`Split` (its name picks the tfds split: ``dev`` ->
      ``validation``, MNLI ``dev`` -> ``validation_matched``, ...).

  Returns:
    :class:`Examples` (labels None for test splits, whose tfds labels are -1).

  Raises:
    TaskError: tfds missing, the data not prepared in ``tfds_data_dir``
      (naming it), or a label not in the task's labels.
  """
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise TaskError("--tfds_name needs tensorflow-datasets (%s)" % e) from None
  name = TFDS_SPLITS[split.name]
  if task.name == "mnli" and split.name in ("dev", "test"):
    name += "_matched"
  try:
    builder = tfds.builder(tfds_name, data_dir=tfds_data_dir, try_gcs=False)
  except Exception as e:  # pylint: disable=broad-except
    raise TaskError("--tfds_name=%s: %s" % (tfds_name, e)) from None
  if not tf.io.gfile.exists(os.path.join(builder.data_dir, "dataset_info.json")):
    raise TaskError("--tfds_name=%s is not prepared in --tfds_data_dir=%s (looked "
                    "for %s; nothing is downloaded: run tfds build there first)" %
                    (tfds_name, tfds_data_dir, builder.data_dir))
  if name not in builder.info.splits:
    raise TaskError("--tfds_name=%s in %s has no split %r (has %s)" % (
        tfds_name, tfds_data_dir, name, ", ".join(sorted(builder.info.splits))))
  features = builder.info.features
  config = getattr(builder, "builder_config", None)
  keys = list(getattr(config, "text_features", None) or
              [k for k in features.keys() if k not in ("label", "idx")])
  label_feature = features["label"] if "label" in features.keys() else None
  names = getattr(label_feature, "names", None)
  with_labels = split.columns.label is not None
  path = "tfds:%s/%s" % (tfds_name, name)
  out = Examples([], [] if task.is_pair else None, [] if with_labels else None,
                 [], path)
  label_index = {l: i for i, l in enumerate(task.labels or ())}
  values = set(task.labels or ()) | {v for v, _ in task.label_aliases}
  ds = builder.as_dataset(split=name, shuffle_files=False)
  for n, ex in enumerate(tfds.as_numpy(ds)):
    out.texts_a.append(ex[keys[0]].decode("utf-8", "replace"))
    if task.is_pair:
      out.texts_b.append(ex[keys[1]].decode("utf-8", "replace"))
    out.ids.append(str(int(ex["idx"])) if "idx" in ex else str(n))
    if with_labels:
      y = ex["label"]
      if task.is_regression:
        out.labels.append(float(y))
        continue
      # The data's values: the label ids themselves where the task's labels
      # (or the --labels values naming them) are the ids, else tfds' names.
      raw = str(int(y))
      if names is not None and raw not in values:
        raw = names[int(y)]
      raw = dict(task.label_aliases).get(raw, raw)
      if raw not in label_index:
        raise TaskError("%s example %d: label %r is not one of %s" % (
            path, n, raw, ", ".join(task.labels)))
      out.labels.append(label_index[raw])
  if not out.texts_a:
    raise TaskError("%s holds no examples" % path)
  return out


def index_batches(num_rows: int, batch_size: int, shuffle: bool = False,
                  seed: Optional[int] = None, drop_remainder: bool = False,
                  lengths=None, bucket_boundaries=None) -> tf.data.Dataset:
  """Batches of row indices: the checkpointable core of the fine-tuning
  input pipelines (the rows are gathered from in-memory arrays per batch).

  Shuffled, every epoch is one permutation of the N indices, drawn by a
  stateless op from ``(seed, epoch)`` (Philox). A training iterator's
  checkpoint then holds one int64 [N] tensor (the current epoch's
  permutation) and a position, not a shuffle buffer: ``Dataset.shuffle(N)``
  saves its buffer element by element, about 190 bytes per row (measured:
  N = 67,349, SST-2, 14 MB and 1.1 s per checkpoint, 1.8 s to restore;
  N = 392,702, MNLI, 82 MB, 6.9 s and 11.5 s; the permutation 0.9 and 5.7
  MB, 0.01-0.05 s). So a killed run resumes at its exact data position
  cheaply (:attr:`bert_tf.tasks.base.Task.resumable_input`).

  Args:
    num_rows: N, the rows to index (>= 1 when shuffled).
    batch_size: indices per batch.
    shuffle: a new permutation of all N indices every epoch (seeded),
      repeated forever (a batch may span two epochs, as
      ``shuffle().repeat().batch()``); False: one ordered pass.
    seed: the shuffle seed (None: one drawn from NumPy's global generator,
      which ``keras.utils.set_random_seed`` seeds).
    drop_remainder: only full batches.
    lengths: with ``bucket_boundaries``: int [N] token length of every row.
    bucket_boundaries: increasing lengths; batches then hold rows of
      similar length (``Dataset.bucket_by_sequence_length``: a bucket's
      batch is emitted when it holds ``batch_size`` rows; always full
      batches). Needs ``shuffle`` (the stream repeats).

  Returns:
    ``tf.data.Dataset`` of int64 [B] row indices.

  Raises:
    ValueError: ``shuffle`` with no rows; ``bucket_boundaries`` without
      ``shuffle`` or ``lengths``.

  Source: the original ``run_classifier.py`` shuffles its in-memory
  features every epoch (``d.repeat().shuffle(buffer_size=100)`` over a
  ``from_tensor_slices``); here the whole set, in another (stateless) way.
  """
  if not shuffle:
    if bucket_boundaries:
      raise ValueError("bucket_boundaries needs shuffle (a repeated stream)")
    return tf.data.Dataset.range(num_rows).batch(batch_size, drop_remainder=drop_remainder)
  if num_rows < 1:
    raise ValueError("no rows to shuffle")
  if seed is None:
    seed = int(np.random.randint(0, 2 ** 31 - 1))

  def permutation(epoch):
    return tf.random.experimental.stateless_shuffle(
        tf.range(num_rows, dtype=tf.int64),
        seed=tf.stack([tf.constant(seed, tf.int64), epoch]), alg="philox")
  ds = tf.data.Dataset.counter().map(permutation).unbatch()
  if not bucket_boundaries:
    return ds.batch(batch_size, drop_remainder=drop_remainder)
  if lengths is None:
    raise ValueError("bucket_boundaries needs the rows' lengths")
  lengths = tf.constant(lengths, tf.int32)
  return ds.bucket_by_sequence_length(
      lambda i: tf.gather(lengths, i), list(bucket_boundaries),
      [batch_size] * (len(bucket_boundaries) + 1), drop_remainder=True)


def examples_dataset(preprocessor, texts_a, texts_b, label_ids, batch_size,
                     shuffle=False, seed=None, drop_remainder=False,
                     bucket_boundaries=None, label_dtype=tf.int32):
  """tf.data pipeline: raw strings -> preprocessed, batched features.

  Batches of row indices (:func:`index_batches`: shuffled, optionally
  bucketed by length) gather the strings, and ``preprocessor`` (a
  :class:`BertPreprocessor`, the same object the export bakes in) tokenizes
  and packs each batch in the pipeline. Each batch is trimmed to its longest
  row (exact: padding is masked out). The iterator of a shuffled dataset is
  checkpointable (its state: the epoch's index permutation and position, the
  length buckets' indices and the prefetched batches; the tensorflow-text
  ops and the vocab lookup are no external state to tf.data), so a training
  run resumes at its exact data position.

  Args:
    preprocessor: a :class:`bert_tf.preprocessing.BertPreprocessor`.
    texts_a, texts_b: N str each (texts_b None for single-sentence tasks).
    label_ids: N int (or float for regression), or None.
    batch_size: examples per batch.
    shuffle: shuffle the whole set each epoch (seeded), and repeat forever
      (:func:`index_batches`).
    seed: the shuffle seed.
    drop_remainder: only full batches.
    bucket_boundaries: optional increasing token lengths; batches then hold
      examples of similar length (less padding, faster training). Needs
      ``shuffle`` (the stream repeats). The token length of every example is
      computed once, here (:func:`token_lengths`: one eager pass of
      ``preprocessor`` over the texts; 0.35 s for the 9,531 movie-review
      sentences at ``max_seq_length`` 64, 2 CPU cores).
    label_dtype: ``tf.int32`` (class ids) or ``tf.float32`` (regression).

  Returns:
    ``tf.data.Dataset`` of ``(features, labels)`` (or features alone when
    ``label_ids`` is None); features are int32 [B, S'] dicts
    (``input_ids``, ``input_mask``, ``segment_ids``; S' <= the
    preprocessor's ``max_seq_length``), labels ``label_dtype`` [B].

  Raises:
    ValueError: ``bucket_boundaries`` without ``shuffle``.
  """
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  cols = {"text_a": tf.constant(texts_a)}
  if texts_b is not None:
    cols["text_b"] = tf.constant(texts_b)
  if label_ids is not None:
    cols["label_ids"] = tf.constant(label_ids, label_dtype)

  def prep(idx):
    batch = {k: tf.gather(v, idx) for k, v in cols.items()}
    feats = preprocessor(batch["text_a"], batch.get("text_b"))
    if "label_ids" in batch:
      feats["label_ids"] = batch["label_ids"]
    return feats

  def split(feats):
    feats = preprocessing.trim_to_longest(feats)
    if "label_ids" in feats:
      y = feats.pop("label_ids")
      return feats, y
    return feats

  # No Python control flow on tensors here: skipping AutoGraph's conversion
  # of the tensorflow-text code makes tracing several times faster.
  plain = tf.autograph.experimental.do_not_convert
  lengths = None
  if bucket_boundaries and shuffle:
    lengths = token_lengths(preprocessor, texts_a, texts_b)
  ds = index_batches(len(texts_a), batch_size, shuffle=shuffle, seed=seed,
                     drop_remainder=drop_remainder, lengths=lengths,
                     bucket_boundaries=bucket_boundaries)
  ds = ds.map(plain(lambda idx: split(prep(idx))), num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)


def token_lengths(preprocessor, texts_a, texts_b=None, batch_size: int = 8192):
  """The packed length of every example in WordPiece tokens, specials
  included (the row sum of ``input_mask``; at most ``max_seq_length``).

  The preprocessor runs eagerly, ``batch_size`` texts a call: no tf.data
  function to trace and instantiate (~0.6 s, most of a small set's pass:
  32 sentences 0.6 -> 0.02-0.06 s, the 9,531 movie-review sentences 0.7 ->
  0.35 s at ``max_seq_length`` 64, Zen 5 2 vCPU, 2026-11-29).

  Args:
    preprocessor: a :class:`bert_tf.preprocessing.BertPreprocessor`.
    texts_a, texts_b: N str each (texts_b None for single texts).
    batch_size: texts tokenized per call.

  Returns:
    int32 numpy array [N].
  """
  out = []
  for start in range(0, len(texts_a), batch_size):
    cols = [tf.constant(texts_a[start:start + batch_size])]
    if texts_b is not None:
      cols.append(tf.constant(texts_b[start:start + batch_size]))
    out.append(tf.reduce_sum(preprocessor(*cols)["input_mask"], 1).numpy())
  return (np.concatenate(out).astype(np.int32) if out else np.zeros([0], np.int32))
