"""The hand-written GELU gradient and the 16-bit dropout against TensorFlow's;
the Trainer's freed-host-memory setting against the page faults it saves;
the layer walk (``layers.all_layers``) and the resume's state-file repair
(``training.restore_latest``) through public Keras and TensorFlow calls."""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import layers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_gelu_fused_grad_equals_autodiff(dtype):
  x = tf.cast(tf.random.stateless_normal([64, 300], [1, 2]) * 3.0, dtype)
  dy = tf.cast(tf.random.stateless_normal([64, 300], [3, 4]), dtype)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours = layers.gelu_tanh_fused_grad(x)
    ref = tf.nn.gelu(x, approximate=True)
  np.testing.assert_array_equal(ours.numpy(), ref.numpy())  # same forward op
  g_ours = tf.cast(tape.gradient(ours, x, output_gradients=dy), tf.float32).numpy()
  g_auto = tf.cast(tape.gradient(ref, x, output_gradients=dy), tf.float32).numpy()
  # Truth: the derivative in float64 at the same (rounded) inputs.
  xd = tf.cast(x, tf.float64).numpy()
  k, c = np.sqrt(2 / np.pi), 0.044715
  t = np.tanh(k * (xd + c * xd ** 3))
  truth = tf.cast(dy, tf.float64).numpy() * (
      0.5 * (1 + t) + 0.5 * xd * (1 - t * t) * k * (1 + 3 * c * xd * xd))
  err_ours = np.abs(g_ours - truth).max()
  err_auto = np.abs(g_auto - truth).max()
  # At least as accurate as autodiff (float32: both ~1e-5 at |dy| ~ 3; a
  # wrong term, e.g. a missing factor 3, is off by > 0.1).
  assert err_ours <= 1.2 * err_auto, (err_ours, err_auto)
  assert err_ours < (2e-5 if dtype == tf.float32 else 0.1), err_ours
  # The derivative has its known values: 0.5 at 0, ~1 far right, ~0 far left.
  z = tf.constant([0.0, 10.0, -10.0])
  with tf.GradientTape() as t3:
    t3.watch(z)
    w = layers.gelu_tanh_fused_grad(z)
  np.testing.assert_allclose(t3.gradient(w, z).numpy(), [0.5, 1.0, 0.0], atol=1e-6)


def test_dropout_rate_scale_and_fresh_masks():
  x = tf.ones([64, 12, 128, 128])
  seed = tf.constant([5, 6], tf.int32)
  y = layers.dropout(x, 0.1, seed).numpy()
  kept = y != 0
  assert abs(1 - kept.mean() - 0.1) < 0.001  # 12.6M draws: sd 0.0001
  np.testing.assert_allclose(y[kept], 1 / 0.9, rtol=1e-7)
  # Neighbouring elements (the two halves of one uint32) are independent.
  flat = kept.reshape(-1, 2)
  both_dropped = (~flat[:, 0] & ~flat[:, 1]).mean()
  assert abs(both_dropped - 0.01) < 0.0005
  # Deterministic per seed; another seed gives another mask.
  np.testing.assert_array_equal(layers.dropout(x, 0.1, seed).numpy(), y)
  assert (layers.dropout(x, 0.1, seed + 1).numpy() != y).mean() > 0.1
  # Odd sizes and the gradient (the mask times the scale).
  v = tf.ones([3, 5, 7])
  with tf.GradientTape() as tape:
    tape.watch(v)
    out = layers.dropout(v, 0.5, seed)
  g = tape.gradient(out, v).numpy()
  np.testing.assert_array_equal(g, out.numpy())


def test_dropout_layer_draws_a_new_mask_per_call():
  d = layers.Dropout(0.25, seed=3)
  x = tf.ones([4096])
  a, b = d(x, training=True).numpy(), d(x, training=True).numpy()
  assert abs((a == 0).mean() - 0.25) < 0.03 and (a != b).any()
  np.testing.assert_array_equal(d(x, training=False).numpy(), x.numpy())
  np.testing.assert_array_equal(layers.Dropout(1.0)(x, training=True).numpy(), 0 * x.numpy())
  # A noise_shape (one mask per row here) goes through Keras' own dropout.
  rows = layers.Dropout(0.5, noise_shape=(64, 1), seed=1)(tf.ones([64, 32]), training=True)
  assert set(np.unique(rows.numpy().std(axis=1))) == {0.0}


# A new process (the setting is process-wide): builds a Trainer, then counts
# the page faults of allocating 64 MiB again after freeing it (TensorFlow's
# CPU tensors come from the same malloc).
_RETAIN_PROBE = r"""
import resource
import keras, numpy as np, tensorflow as tf
from bert_tf import optimization, training
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
opt = optimization.AdamWeightDecay(1e-3)
opt.build(model.trainable_variables)
training.Trainer(tf.distribute.get_strategy(), model, opt, lambda f: (0.0, {}))
def faults():
  return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = np.ones(16 << 20, np.float32); del a
before = faults()
a = np.ones(16 << 20, np.float32); del a
print(training.retain_freed_host_memory(), faults() - before)
"""


def _second_allocation_faults(env_value):
  env = dict(os.environ)
  env.pop("BERT_TF_RETAIN_HOST_MEMORY", None)
  if env_value is not None:
    env["BERT_TF_RETAIN_HOST_MEMORY"] = env_value
  out = subprocess.run([sys.executable, "-c", _RETAIN_PROBE], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True).stdout.split()
  return out[-2] == "True", int(out[-1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="the setting is glibc malloc's")
@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_trainer_keeps_freed_host_memory_for_reuse():
  """A Trainer makes a freed large block come back without page faults
  (glibc's default unmaps it and faults every page of the next one in:
  16,384 faults for 64 MiB, or 32 with transparent huge pages);
  ``BERT_TF_RETAIN_HOST_MEMORY=0`` keeps glibc's default."""
  on, faults_on = _second_allocation_faults(None)
  off, faults_off = _second_allocation_faults("0")
  assert on and not off
  assert faults_off >= 32, faults_off
  assert faults_on * 10 < faults_off, (faults_on, faults_off)


def test_all_layers_finds_every_sublayer_once_through_public_attributes():
  """``layers.all_layers`` (Keras' public ``Model.layers`` and the layers'
  public attributes): a classifier's every layer, each once, the blocks in
  their order; lists, tuples and dicts of layers, a shared layer and a
  reference back to a parent."""
  import collections  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import models  # pylint: disable=g-import-not-at-top
  config = config_lib.BertConfig.from_json_file(
      os.path.join(ROOT, "data", "configs", "bert_tiny_config.json"))
  clf = models.build_classifier(config, 3)
  found = layers.all_layers(clf)
  assert found[0] is clf and len({id(l) for l in found}) == len(found)
  # 2 blocks x 6 projections + the pooler; the embeddings' dropout, 2 per
  # block and the head's; the embeddings' LayerNorm and 2 per block.
  assert collections.Counter(type(l).__name__ for l in found) == {
      "BertClassifier": 1, "BertEncoder": 1, "BertEmbeddings": 1, "TransformerBlock": 2,
      "Dense": 13, "Dropout": 6, "LayerNormalization": 5, "DenseHead": 1}
  assert [l.name for l in found if isinstance(l, layers.TransformerBlock)] == [
      "layer_0", "layer_1"]

  class Holder(keras.layers.Layer):

    def __init__(self):
      super().__init__()
      shared = keras.layers.Dense(2, name="shared")
      self.listed = [shared, keras.layers.Dense(2, name="in_list")]
      self.pair = (keras.layers.Dense(2, name="in_tuple"), shared)
      self.named = {"a": keras.layers.Dense(2, name="in_dict")}
      self.back = self  # a reference to itself: visited once

  holder = Holder()
  assert [l.name for l in layers.all_layers(holder)] == [
      holder.name, "shared", "in_list", "in_tuple", "in_dict"]


def test_a_resume_past_a_missing_checkpoint_rewrites_the_state_file(tmp_path):
  """``restore_latest`` skips a newest checkpoint whose files are gone and
  rewrites the state file as ``tf.train.CheckpointManager`` writes it
  (relative paths, the kept entries' timestamps): a manager made next goes
  on from the one restored, and the file of the one skipped stays out."""
  from bert_tf import training  # pylint: disable=g-import-not-at-top
  v = tf.Variable(0.0)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), str(tmp_path), max_to_keep=5)
  for step in (2, 4, 6):
    v.assign(float(step))
    manager.save(checkpoint_number=step)
  stamps = list(tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_timestamps)
  for name in os.listdir(tmp_path):
    if name.startswith("ckpt-6."):
      os.remove(tmp_path / name)
  lines = []
  again = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), str(tmp_path), max_to_keep=5)
  assert training.restore_latest(again, warn_fn=lines.append) == str(tmp_path / "ckpt-4")
  assert v.numpy() == 4.0 and len(lines) == 1 and "ckpt-6 is missing" in lines[0]
  text = (tmp_path / "checkpoint").read_text()
  assert 'model_checkpoint_path: "ckpt-4"' in text and "ckpt-6" not in text, text
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert list(state.all_model_checkpoint_timestamps) == stamps[:2]
  after = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), str(tmp_path), max_to_keep=5)
  assert after.latest_checkpoint == str(tmp_path / "ckpt-4")
  after.save(checkpoint_number=6)
  assert [os.path.basename(p) for p in after.checkpoints] == ["ckpt-2", "ckpt-4", "ckpt-6"]
