"""Fine-tuning task readers: TSV files -> (text_a, text_b, label) examples.

Source: google-research/bert ``run_classifier.py`` (``DataProcessor`` and its
``_read_tsv``: tab-separated, no quoting). Tasks here:

* ``sst-2`` (alias ``sst2``): ``sentence<TAB>label`` with a header row
  (GLUE SST-2 layout); labels ``0``/``1``;
* ``pairs``: ``sentence1<TAB>sentence2<TAB>label`` with a header row;
* ``cola``: GLUE CoLA (no header; source, label, mark, sentence);
* ``mrpc``: GLUE MRPC (header; quality, id1, id2, string1, string2).

Files are ``train.tsv``, ``dev.tsv`` and ``test.tsv`` in ``--data_dir``.
"""

import csv
import dataclasses
import os
import sys

import tensorflow as tf

csv.field_size_limit(sys.maxsize)


class TaskError(ValueError):
  """Unknown task, or a data file that does not fit the task's layout."""


@dataclasses.dataclass(frozen=True)
class Task:
  """How a task's TSV files are laid out.

  Attributes:
    name: task name (``--task_name``).
    labels: label strings; index = label id.
    text_a: column index of the first text.
    text_b: column index of the second text, or None (single sentence).
    label: column index of the label.
    header: whether the files start with a header row.
    test_text_a, test_text_b: columns in ``test.tsv`` (which has no label).
  """
  name: str
  labels: tuple
  text_a: int
  text_b: object
  label: int
  header: bool = True
  test_text_a: int = 1
  test_text_b: object = None

  @property
  def is_pair(self):
    return self.text_b is not None


TASKS = {
    "sst-2": Task("sst-2", ("0", "1"), 0, None, 1, True, 1, None),
    "pairs": Task("pairs", ("0", "1"), 0, 1, 2, True, 1, 2),
    "cola": Task("cola", ("0", "1"), 3, None, 1, False, 1, None),
    "mrpc": Task("mrpc", ("0", "1"), 3, 4, 0, True, 3, 4),
}
ALIASES = {"sst2": "sst-2"}


def get_task(name):
  """The :class:`Task` for ``--task_name`` (case-insensitive).

  Raises:
    TaskError: unknown name, listing the known ones.
  """
  key = ALIASES.get(name.lower(), name.lower())
  if key not in TASKS:
    raise TaskError("--task_name: unknown task %r; known tasks: %s" %
                    (name, ", ".join(sorted(TASKS))))
  return TASKS[key]


def read_examples(task, path, with_labels=True):
  """Reads one TSV split.

  Returns:
    ``(texts_a, texts_b, label_ids)``: lists of str, str (or None) and int
    (label_ids is None without labels).

  Raises:
    TaskError: file missing, or a row too short or with an unknown label,
      naming the file and line.
  """
  if not os.path.exists(path):
    raise TaskError("data file %r does not exist (check --data_dir)" % path)
  label_index = {l: i for i, l in enumerate(task.labels)}
  col_a = task.text_a if with_labels else task.test_text_a
  col_b = task.text_b if with_labels else task.test_text_b
  needed = max(c for c in (col_a, col_b, task.label if with_labels else 0)
               if c is not None) + 1
  texts_a, texts_b, labels = [], [], []
  with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
    reader = csv.reader(f, delimiter="\t", quotechar=None)
    for lineno, row in enumerate(reader, start=1):
      if lineno == 1 and task.header:
        continue
      if not row:
        continue
      if len(row) < needed:
        raise TaskError("%s line %d: expected at least %d tab-separated columns "
                        "for task %s, found %d" % (path, lineno, needed,
                                                   task.name, len(row)))
      texts_a.append(row[col_a])
      texts_b.append(row[col_b] if col_b is not None else None)
      if with_labels:
        label = row[task.label].strip()
        if label not in label_index:
          raise TaskError("%s line %d: label %r is not one of %s" %
                          (path, lineno, label, ", ".join(task.labels)))
        labels.append(label_index[label])
  if not texts_a:
    raise TaskError("data file %r holds no examples" % path)
  return texts_a, (texts_b if task.is_pair else None), (labels if with_labels else None)


def examples_dataset(preprocessor, texts_a, texts_b, label_ids, batch_size,
                     shuffle=False, seed=None, drop_remainder=False,
                     bucket_boundaries=None):
  """tf.data pipeline: raw strings -> preprocessed, batched features.

  The preprocessing is ``preprocessor`` (a :class:`BertPreprocessor`), the
  same object the export bakes in. Each batch is trimmed to its longest row
  (exact: padding is masked out).

  Args:
    texts_a, texts_b: lists of str (texts_b None for single-sentence tasks).
    label_ids: list of int, or None.
    batch_size: examples per batch.
    shuffle: shuffle the whole set each epoch (seeded), and repeat forever.
    drop_remainder: only full batches.
    bucket_boundaries: optional increasing token lengths; batches then hold
      examples of similar length (less padding, faster training). Needs
      ``shuffle`` (the stream repeats) and labels.

  Returns:
    ``tf.data.Dataset`` of ``(features, label_ids)`` (or features alone when
    ``label_ids`` is None); features are int32 [B, S'] dicts.
  """
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  cols = {"text_a": tf.constant(texts_a)}
  if texts_b is not None:
    cols["text_b"] = tf.constant(texts_b)
  if label_ids is not None:
    cols["label_ids"] = tf.constant(label_ids, tf.int32)
  ds = tf.data.Dataset.from_tensor_slices(cols)
  if shuffle:
    ds = ds.shuffle(len(texts_a), seed=seed, reshuffle_each_iteration=True).repeat()

  def prep(batch):
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

  if bucket_boundaries:
    # Tokenize in large batches, then regroup single examples by length.
    ds = ds.batch(1024).map(prep, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    ds = ds.bucket_by_sequence_length(
        lambda f: tf.reduce_sum(f["input_mask"]), list(bucket_boundaries),
        [batch_size] * (len(bucket_boundaries) + 1), drop_remainder=True)
    ds = ds.map(split)
  else:
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    ds = ds.map(lambda b: split(prep(b)), num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)
