"""Subprocess helper for tests/test_pretraining.py (not a test module).

``python tests/distributed_worker.py steps DATA``: splits the CPU into 2
logical devices (must happen before TensorFlow initializes them, hence a
fresh process) and prints one JSON line comparing final weights after a few
steps of: one device vs MirroredStrategy on 2 devices (same global batch);
one step on a batch of 8 vs 2 accumulated micro-batches of 4; a Keras-style
Mirrored step (clip per replica, then all-reduce) as a negative control.

``python tests/distributed_worker.py worker DATA OUT_DIR NPZ``: one worker
of a MultiWorkerMirroredStrategy job (``TF_CONFIG`` in the environment):
pretrains a few steps with :func:`bert_tf.jobs.run_pretraining` and
dumps its final weights to ``NPZ``.
"""

import json
import os
import sys


import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "data", "configs", "bert_tiny_config.json")


def tiny_config():
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  cfg = config_lib.BertConfig.from_json_file(TINY)
  cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
  return cfg


def weights(model):
  """Trainable weights by ``index_path`` (Keras paths alone repeat across blocks)."""
  return {"%03d_%s" % (i, v.path.replace("/", "__")): v.numpy()
          for i, v in enumerate(model.trainable_variables)}


def max_diff(a, b):
  return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


def steps_mode(data):
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import optimization, training  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pretraining import input as pretraining_input  # pylint: disable=g-import-not-at-top
  cfg = tiny_config()
  num_steps, lr = 3, 2e-3
  batches = list(pretraining_input.pretraining_dataset(
      data, 8, 64, 10, is_training=False).take(num_steps))
  assert all(b["input_ids"].shape[0] == 8 for b in batches)

  def setup(strategy):
    keras.utils.set_random_seed(7)
    with strategy.scope():
      model = pretraining.build_pretrainer(cfg)
      opt = optimization.create_optimizer(lr, 10, 0)
      opt.build(model.trainable_variables)
    return model, opt

  def run(strategy, k=1):
    model, opt = setup(strategy)
    init = weights(model)

    def compute(features, totals):
      return pretraining.pretraining_metrics(model(features, training=True),
                                             features, True, totals)
    trainer = training.Trainer(strategy, model, opt, compute,
                               num_accumulation_steps=k,
                               normalizer_fn=pretraining.loss_normalizers)
    trainer.train(iter(tf.data.Dataset.from_tensor_slices(
        {n: tf.stack([b[n] for b in batches]) for n in batches[0]})),
                  num_steps, steps_per_loop=num_steps)
    return init, weights(model)

  one = tf.distribute.OneDeviceStrategy("/cpu:0")
  mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  init1, w1 = run(one)
  init2, w2 = run(mirrored)
  _, w_acc = run(one, k=2)

  # The global gradient norm of the first batch: clipping (1.0) binds.
  model, _ = setup(one)
  with tf.GradientTape() as tape:
    loss, _ = pretraining.pretraining_metrics(model(batches[0], training=True),
                                              batches[0])
  norm = float(tf.linalg.global_norm(tape.gradient(loss, model.trainable_variables)))

  # Negative control: the plain Keras way under Mirrored (each replica's loss
  # over its own half, gradients clipped per replica, then all-reduced).
  model, opt = setup(mirrored)

  @tf.function
  def keras_step(features):
    def replica(f):
      with tf.GradientTape() as tape:
        loss, _ = pretraining.pretraining_metrics(model(f, training=True), f)
        loss = loss / 2.0
      grads = tape.gradient(loss, model.trainable_variables)
      opt.apply_gradients(zip(grads, model.trainable_variables))
    mirrored.run(replica, args=(features,))
  dist = iter(mirrored.experimental_distribute_dataset(
      tf.data.Dataset.from_tensor_slices(
          {n: tf.concat([b[n] for b in batches], 0) for n in batches[0]}).batch(8)))
  for _ in range(num_steps):
    keras_step(next(dist))
  w_keras = weights(model)
  print(json.dumps({
      "init_diff": max_diff(init1, init2),
      "mirrored_vs_one": max_diff(w1, w2),
      "accumulated_vs_big_batch": max_diff(w1, w_acc),
      "keras_per_replica_clip_vs_one": max_diff(w1, w_keras),
      "moved": max_diff(w1, init1),
      "grad_norm": norm,
  }))


def worker_mode(data, out_dir, npz, stop_at_step="0", deterministic="0"):
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  from bert_tf import jobs  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  params = pretraining.PretrainingParams(
      input_file=data, output_dir=out_dir, max_seq_length=64,
      max_predictions_per_seq=10, train_batch_size=8, learning_rate=1e-3,
      num_train_steps=4, num_warmup_steps=1, save_checkpoints_steps=2,
      iterations_per_loop=2, stop_at_step=int(stop_at_step) or None,
      deterministic=deterministic == "1")

  def dump(model, optimizer):
    np.savez(npz, step=int(optimizer.iterations.numpy()), **weights(model))
  jobs.run_pretraining(tiny_config(), params, strategy, on_finish=dump)


if __name__ == "__main__":
  if sys.argv[1] == "steps":
    steps_mode(sys.argv[2])
  else:
    worker_mode(*sys.argv[2:])
