"""The hand-written GELU gradient and the 16-bit dropout against TensorFlow's."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import layers


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
