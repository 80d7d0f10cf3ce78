"""Runs the ORIGINAL ``optimization.create_optimizer`` (bert-tensorflow 1.0.4).

Usage: python original_optimizer.py WORKDIR
Reads WORKDIR/opt_case.npz (initial weights, 10 batches, hyper-parameters),
trains 10 steps in a TF1 graph, writes WORKDIR/opt_original.npz: each
variable after the last step (``kernel``) and after every step (``kernel_3``).
"""

import sys

import numpy as np
import tensorflow.compat.v1 as tf


def loss_fn(tfm, x, y, kernel, bias, gamma):
  """Shared toy loss: a dense layer, a LayerNorm-named scale, squared error."""
  h = tfm.matmul(x, kernel) + bias
  return tfm.reduce_mean(tfm.square(h * gamma - y))


def main(workdir):
  tf.disable_eager_execution()
  from bert import optimization  # pylint: disable=g-import-not-at-top
  case = np.load(workdir + "/opt_case.npz")
  x = tf.placeholder(tf.float32, case["x"].shape[1:])
  y = tf.placeholder(tf.float32, case["y"].shape[1:])
  with tf.variable_scope("dense"):
    kernel = tf.get_variable("kernel", initializer=case["kernel"])
    bias = tf.get_variable("bias", initializer=case["bias"])
  with tf.variable_scope("LayerNorm"):
    gamma = tf.get_variable("gamma", initializer=case["gamma"])
  loss = loss_fn(tf, x, y, kernel, bias, gamma)
  train_op = optimization.create_optimizer(
      loss, float(case["init_lr"]), int(case["num_train_steps"]),
      int(case["num_warmup_steps"]), use_tpu=False)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    steps = {}
    for i in range(case["x"].shape[0]):
      sess.run(train_op, {x: case["x"][i], y: case["y"][i]})
      for name, value in zip(["kernel", "bias", "gamma"], sess.run([kernel, bias, gamma])):
        steps["%s_%d" % (name, i)] = value
        steps[name] = value  # after the last step
    np.savez(workdir + "/opt_original.npz", **steps)


if __name__ == "__main__":
  main(sys.argv[1])
