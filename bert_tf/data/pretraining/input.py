"""tf.data pipeline over the original pretraining TFRecord format (static records).

Source: google-research/bert ``run_pretraining.input_fn_builder``: parallel
interleave over shards, shuffle, repeat for training; int64 features cast to
int32; ``drop_remainder`` batches. Feature names are the original's.

Bad input is reported naming the file: :func:`inspect_records` reads the
first record(s) of every shard before training (widths, token ids), and
:func:`find_bad_record` scans the shards one by one when a batch fails to
parse mid-run (a truncated or corrupt shard), so the error names the file and
record instead of tf.data's anonymous "corrupted record at N".
"""

from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf import errors
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import records

FEATURE_NAMES = records.FEATURE_NAMES


RecordError = errors.RecordError  # re-exported; defined in bert_tf.errors


_WIDTH = {"input_ids": "S", "input_mask": "S", "segment_ids": "S",
          "masked_lm_positions": "P", "masked_lm_ids": "P", "masked_lm_weights": "P",
          "next_sentence_labels": 1}


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
  """``tf.io.parse_example`` spec of one original pretraining record.

  Names and dtypes from :data:`bert_tf.data.pretraining.records.FEATURE_DTYPES`;
  widths ``[S]`` (``input_*``, ``segment_ids``), ``[P]`` (``masked_lm_*``),
  ``[1]`` (``next_sentence_labels``).
  """
  width = {"S": max_seq_length, "P": max_predictions_per_seq, 1: 1}
  return {name: tf.io.FixedLenFeature([width[_WIDTH[name]]],
                                      tf.as_dtype(records.FEATURE_DTYPES[name]))
          for name in FEATURE_NAMES}


def _shard(ds, input_context, num_files):
  """Per-worker shard: by file when there are enough files, else by record."""
  if input_context is None or input_context.num_input_pipelines <= 1:
    return ds, False
  if num_files >= input_context.num_input_pipelines:
    return ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id), False
  return ds, True


def pretraining_dataset(input_file: str, batch_size: int, max_seq_length: int,
                        max_predictions_per_seq: int, is_training: bool = True,
                        seed: Optional[int] = None,
                        input_context: Optional[tf.distribute.InputContext] = None
                        ) -> tf.data.Dataset:
  """Batches of pretraining features from original-format TFRecords.

  Args:
    input_file: comma-separated globs of TFRecord files; a shard manifest
      (``<output_file>.json``, the Beam runner's) stands for its shards.
    batch_size: batch size of this input pipeline (examples).
    max_seq_length, max_predictions_per_seq: the widths the records were
      written with.
    is_training: shuffle and repeat forever (``drop_remainder``); else one
      ordered pass over the files in glob order, the last batch kept.
    seed: shuffle seed (deterministic order when set).
    input_context: ``tf.distribute.InputContext``: each input pipeline
      (worker) reads its own shard, by file when there are at least as many
      files as pipelines, else by record.

  Returns:
    ``tf.data.Dataset`` of dicts: int32 ``input_ids``, ``input_mask``,
    ``segment_ids`` [B, S]; int32 ``masked_lm_positions``, ``masked_lm_ids``
    and float32 ``masked_lm_weights`` [B, P]; int32 ``next_sentence_labels`` [B, 1].

  Raises:
    errors.InputError: the globs match no file (names the glob).
    Iterating raises ``tf.errors.DataLossError`` / ``InvalidArgumentError``
    on a corrupt record: :func:`find_bad_record` names the file.
  """
  files = documents.expand_input_files(input_file)
  spec = feature_spec(max_seq_length, max_predictions_per_seq)

  def parse(serialized):
    ex = tf.io.parse_example(serialized, spec)
    return {k: (tf.cast(v, tf.int32) if v.dtype == tf.int64 else v)
            for k, v in ex.items()}

  ds = tf.data.Dataset.from_tensor_slices(tf.constant(files))
  ds, shard_records = _shard(ds, input_context, len(files))
  if is_training:
    ds = ds.shuffle(len(files), seed=seed).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset,
                       cycle_length=min(4, len(files)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if shard_records:
      ds = ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id)
    ds = ds.shuffle(10000, seed=seed)
  else:
    ds = ds.flat_map(tf.data.TFRecordDataset)
    if shard_records:
      ds = ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id)
  ds = ds.batch(batch_size, drop_remainder=is_training)
  ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)


def _example_widths(path, index, raw):
  try:
    ex = tf.train.Example.FromString(raw)
  except Exception as e:  # pylint: disable=broad-except
    raise RecordError("%s: record %d is not a tf.train.Example (%s)"
                      % (path, index, e)) from None
  widths, values = {}, {}
  for name in FEATURE_NAMES:
    if name not in ex.features.feature:
      raise RecordError("%s: record %d has no feature %r: not a pretraining "
                        "record (tools/create_pretraining_data.py writes them)"
                        % (path, index, name))
    f = ex.features.feature[name]
    v = list(f.int64_list.value) if name != "masked_lm_weights" else list(
        f.float_list.value)
    widths[name], values[name] = len(v), np.asarray(v)
  return widths, values


def count_records(files, at_most: int) -> int:
  """Records in ``files`` (in order), counting stops at ``at_most``.

  Returns:
    ``min(total records, at_most)`` (int): cheap on a large corpus.
  """
  n = 0
  for path in files:
    for _ in tf.data.TFRecordDataset(path).take(at_most - n):
      n += 1
    if n >= at_most:
      break
  return n


def inspect_records(files, max_seq_length, max_predictions_per_seq,
                    vocab_size=None, num_records=1):
  """Checks the first records of every shard against the flags, before training.

  Reads the first ``num_records`` records of each file (the first batch's
  worth for the first file is a good choice) and compares their feature
  widths with ``--max_seq_length`` / ``--max_predictions_per_seq`` and their
  token ids (``input_ids``, ``masked_lm_ids``) with ``vocab_size``.

  Args:
    files: list of TFRecord paths.
    vocab_size: the BERT config's ``vocab_size`` (int) or None.
    num_records: records read per file (int >= 1).

  Returns:
    dict: ``max_seq_length`` and ``max_predictions_per_seq`` found in the
    first file.

  Raises:
    RecordError: naming the file, record, feature, flag and both values:
      an empty or unreadable file, a record that is not a pretraining
      example, widths that differ from the flags, a token id >= vocab_size.
  """
  found = None
  for path in files:
    n = 0
    try:
      for raw in tf.data.TFRecordDataset(path).take(num_records):
        widths, values = _example_widths(path, n, raw.numpy())
        s, p = widths["input_ids"], widths["masked_lm_positions"]
        for name in ("input_mask", "segment_ids"):
          if widths[name] != s:
            raise RecordError("%s: record %d: %s has %d values but input_ids %d"
                              % (path, n, name, widths[name], s))
        for name in ("masked_lm_ids", "masked_lm_weights"):
          if widths[name] != p:
            raise RecordError("%s: record %d: %s has %d values but "
                              "masked_lm_positions %d" % (path, n, name,
                                                          widths[name], p))
        if s != max_seq_length:
          raise RecordError(
              "%s: records hold sequences of length %d (input_ids) but "
              "--max_seq_length=%d: pass --max_seq_length=%d" %
              (path, s, max_seq_length, s))
        if p != max_predictions_per_seq:
          raise RecordError(
              "%s: records hold %d masked-LM predictions (masked_lm_positions "
              "width) but --max_predictions_per_seq=%d: pass "
              "--max_predictions_per_seq=%d" % (path, p, max_predictions_per_seq, p))
        if vocab_size is not None:
          for name in ("input_ids", "masked_lm_ids"):
            top = int(values[name].max()) if values[name].size else 0
            if top >= vocab_size:
              raise RecordError(
                  "%s: record %d: %s holds token id %d >= the BERT config's "
                  "vocab_size %d (records made with a larger vocab?)"
                  % (path, n, name, top, vocab_size))
        found = found or {"max_seq_length": s, "max_predictions_per_seq": p}
        n += 1
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError,
            tf.errors.OutOfRangeError) as e:
      raise RecordError("%s: record %d does not read: %s"
                        % (path, n, e.message.splitlines()[0])) from None
    if n == 0:
      raise RecordError("%s: holds no records" % path)
  return found


def find_bad_record(files, max_seq_length, max_predictions_per_seq):
  """Scans ``files`` one by one; the first record that does not parse.

  Called after a batch failed to parse (it reads every record: slow on big
  corpora, but only on the error path).

  Returns:
    ``"FILE: record N: MESSAGE"`` naming the first bad record, or None.
  """
  spec = feature_spec(max_seq_length, max_predictions_per_seq)
  for path in files:
    n = 0
    try:
      for raw in tf.data.TFRecordDataset(path):
        tf.io.parse_single_example(raw, spec)
        n += 1
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      return "%s: record %d: %s" % (path, n, e.message.splitlines()[0])
  return None
