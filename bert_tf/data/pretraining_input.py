"""tf.data pipeline over the original pretraining TFRecord format.

Source: google-research/bert ``run_pretraining.input_fn_builder``: parallel
interleave over shards, shuffle, repeat for training; int64 features cast to
int32; ``drop_remainder`` batches. Feature names are the original's.
"""

import tensorflow as tf

from bert_tf.data import pretraining_data


def feature_spec(max_seq_length, max_predictions_per_seq):
  """``tf.io.parse_example`` spec of one original pretraining record."""
  s, p = max_seq_length, max_predictions_per_seq
  return {
      "input_ids": tf.io.FixedLenFeature([s], tf.int64),
      "input_mask": tf.io.FixedLenFeature([s], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([s], tf.int64),
      "masked_lm_positions": tf.io.FixedLenFeature([p], tf.int64),
      "masked_lm_ids": tf.io.FixedLenFeature([p], tf.int64),
      "masked_lm_weights": tf.io.FixedLenFeature([p], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }


def pretraining_dataset(input_file, batch_size, max_seq_length,
                        max_predictions_per_seq, is_training=True, seed=None,
                        input_context=None):
  """Batches of pretraining features from original-format TFRecords.

  Args:
    input_file: comma-separated globs of TFRecord files.
    batch_size: per-replica batch size (examples).
    max_seq_length, max_predictions_per_seq: the widths the records were
      written with.
    is_training: shuffle and repeat forever; else one ordered pass.
    seed: shuffle seed (deterministic order when set).
    input_context: ``tf.distribute.InputContext`` to shard files per worker.

  Returns:
    ``tf.data.Dataset`` of dicts: int32 ``input_ids``, ``input_mask``,
    ``segment_ids`` [B, S]; int32 ``masked_lm_positions``, ``masked_lm_ids``
    and float32 ``masked_lm_weights`` [B, P]; int32 ``next_sentence_labels`` [B, 1].

  Raises:
    pretraining_data.InputError: the globs match no file (names the glob).
  """
  files = pretraining_data.expand_input_files(input_file)
  spec = feature_spec(max_seq_length, max_predictions_per_seq)

  def parse(serialized):
    ex = tf.io.parse_example(serialized, spec)
    return {k: (tf.cast(v, tf.int32) if v.dtype == tf.int64 else v)
            for k, v in ex.items()}

  ds = tf.data.Dataset.from_tensor_slices(tf.constant(files))
  if input_context is not None and input_context.num_input_pipelines > 1:
    ds = ds.shard(input_context.num_input_pipelines,
                  input_context.input_pipeline_id)
  if is_training:
    ds = ds.shuffle(len(files), seed=seed).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset,
                       cycle_length=min(4, len(files)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.shuffle(10000, seed=seed)
  else:
    ds = ds.flat_map(tf.data.TFRecordDataset)
  ds = ds.batch(batch_size, drop_remainder=is_training)
  ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)
