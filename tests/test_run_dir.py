"""bert_tf.run_dir: the TF-free checkpoint rule equals TensorFlow's."""

import os

import tensorflow as tf

from bert_tf import run_dir


def _save(directory, n):
  ckpt = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0]))
  manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=5)
  for _ in range(n):
    manager.save()
  return manager


def test_latest_and_best_follow_tensorflow(tmp_path):
  out = str(tmp_path / "run")
  assert run_dir.latest_checkpoint(out) is None
  assert run_dir.model_checkpoint(out) is None
  _save(out, 3)
  assert run_dir.latest_checkpoint(out) == tf.train.latest_checkpoint(out)
  assert run_dir.latest_checkpoint(out).endswith("ckpt-3")
  assert run_dir.model_checkpoint(out) == tf.train.latest_checkpoint(out)
  best = os.path.join(out, run_dir.BEST_DIR)
  _save(best, 1)
  assert run_dir.model_checkpoint(out) == tf.train.latest_checkpoint(best)
  assert run_dir.run_dir_of(run_dir.model_checkpoint(out)) == out
  # A named checkpoint whose index is gone is no checkpoint, as for TF.
  os.remove(tf.train.latest_checkpoint(out) + ".index")
  assert run_dir.latest_checkpoint(out) is None
  assert tf.train.latest_checkpoint(out) is None


def test_run_kinds_from_settings_files(tmp_path):
  assert run_dir.run_kinds(str(tmp_path)) == []
  (tmp_path / run_dir.NER_CONFIG).write_text("{}")
  assert run_dir.run_kinds(str(tmp_path)) == ["ner"]
