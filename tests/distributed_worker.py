"""Subprocess helper for tests/test_pretraining.py (not a test module).

``python tests/distributed_worker.py steps DATA``: splits the CPU into 2
logical devices (must happen before TensorFlow initializes them, hence a
fresh process) and prints one JSON line comparing final weights after a few
steps of: one device vs MirroredStrategy on 2 devices (same global batch);
one step on a batch of 8 vs 2 accumulated micro-batches of 4; a Keras-style
Mirrored step (clip per replica, then all-reduce) as a negative control.

``python tests/distributed_worker.py worker DATA OUT_DIR NPZ [STOP_AT_STEP
DETERMINISTIC ITERATIONS_PER_LOOP TRACE_NPZ]``: one worker of a
MultiWorkerMirroredStrategy job (``TF_CONFIG`` in the environment):
pretrains a few steps with :func:`bert_tf.jobs.run_pretraining` and dumps
its final weights to ``NPZ``. With ``TRACE_NPZ`` it also dumps what a
one-device reference needs to replay the job: the weights before the first
step (``init/``), this worker's batch of every step (``batch/``, rebuilt
from the task's own ``train_dataset`` call with the same arguments) and the
metrics the job logged after every step (``metric/``, float64).

``python tests/distributed_worker.py reference TRACE_NPZ... OUT_NPZ``: the
one-device reference of a multi-worker job (the same :func:`train` that
``steps`` runs on one device): starts from the job's initial weights and
takes one step per global batch (the workers' batches of that step,
concatenated), with the job's optimizer (AdamWeightDecay, lr 1e-3, 4
steps, 1 warm-up step); writes the final weights and the per-step metrics.
"""

import json
import os
import sys


import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "data", "configs", "bert_tiny_config.json")

# The multi-worker job's recipe (worker_mode) and the reference's (reference_mode).
MW_LEARNING_RATE, MW_TRAIN_STEPS, MW_WARMUP_STEPS = 1e-3, 4, 1
# The metrics compared per step (the job logs them after every loop).
STEP_METRICS = ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
                "next_sentence_accuracy", "learning_rate")


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


def setup(strategy, lr, num_train_steps, num_warmup_steps, init=None,
          optimizer="adamw_original"):
  """The tiny pretrainer (seed 7, no dropout) and ``optimizer`` (the
  original's by default), built in ``strategy``'s scope; ``init``: weights
  to start from instead (a :func:`weights` dict)."""
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import optimization  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(7)
  with strategy.scope():
    model = pretraining.build_pretrainer(tiny_config())
    opt = optimization.create_optimizer(lr, num_train_steps, num_warmup_steps, optimizer)
    opt.build(model.trainable_variables)
  if init is not None:
    names = sorted(init)
    assert len(names) == len(model.trainable_variables), (len(names),)
    for name, v in zip(names, model.trainable_variables):
      assert name.endswith(v.path.replace("/", "__")), (name, v.path)
      v.assign(init[name])
  return model, opt


def train(strategy, batches, lr, num_train_steps, num_warmup_steps, k=1, init=None,
          optimizer="adamw_original"):
  """One optimizer step per global batch of ``batches`` under ``strategy``
  (:class:`bert_tf.training.Trainer`, the library's step), k micro-batches.

  Returns:
    ``(initial weights, final weights, per-step metrics)``: the metrics a
    run logs after each step (:func:`pretraining.summarize` of the step's
    sums, and the learning rate after the step), a list of dicts.
  """
  from bert_tf import training  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  model, opt = setup(strategy, lr, num_train_steps, num_warmup_steps, init, optimizer)
  start = weights(model)

  def compute(features, totals):
    return pretraining.pretraining_metrics(model(features, training=True),
                                           features, True, totals)
  trainer = training.Trainer(strategy, model, opt, compute,
                             num_accumulation_steps=k,
                             normalizer_fn=pretraining.loss_normalizers)
  per_step = []

  def log(step, sums, seconds):
    del step, seconds
    per_step.append(dict(pretraining.summarize(sums),
                         learning_rate=float(opt.learning_rate)))
  trainer.train(iter(tf.data.Dataset.from_tensor_slices(
      {n: tf.stack([b[n] for b in batches]) for n in batches[0]})),
                len(batches), steps_per_loop=1, log_fn=log)
  assert len(per_step) == len(batches)
  return start, weights(model), per_step


def steps_mode(data):
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pretraining import input as pretraining_input  # pylint: disable=g-import-not-at-top
  num_steps, lr = 3, 2e-3
  batches = list(pretraining_input.pretraining_dataset(
      data, 8, 64, 10, is_training=False).take(num_steps))
  assert all(b["input_ids"].shape[0] == 8 for b in batches)

  def run(strategy, k=1, optimizer="adamw_original"):
    init, final, _ = train(strategy, batches, lr, 10, 0, k=k, optimizer=optimizer)
    return init, final

  one = tf.distribute.OneDeviceStrategy("/cpu:0")
  mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  init1, w1 = run(one)
  init2, w2 = run(mirrored)
  _, w_acc = run(one, k=2)
  # AdamW's fused update is handed per-device slot components too.
  _, a1 = run(one, optimizer="adamw")
  _, a2 = run(mirrored, optimizer="adamw")

  # The global gradient norm of the first batch: clipping (1.0) binds.
  model, _ = setup(one, lr, 10, 0)
  with tf.GradientTape() as tape:
    loss, _ = pretraining.pretraining_metrics(model(batches[0], training=True),
                                              batches[0])
  norm = float(tf.linalg.global_norm(tape.gradient(loss, model.trainable_variables)))

  # Negative control: the plain Keras way under Mirrored (each replica's loss
  # over its own half, gradients clipped per replica, then all-reduced).
  model, opt = setup(mirrored, lr, 10, 0)

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
      "adamw_mirrored_vs_one": max_diff(a1, a2),
      "adamw_vs_original": max_diff(w1, a1),
      "keras_per_replica_clip_vs_one": max_diff(w1, w_keras),
      "moved": max_diff(w1, init1),
      "grad_norm": norm,
  }))


def worker_mode(data, out_dir, npz, stop_at_step="0", deterministic="0",
                iterations_per_loop="2", trace_npz=None):
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  from bert_tf import jobs  # pylint: disable=g-import-not-at-top
  from bert_tf import runner  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  params = pretraining.PretrainingParams(
      input_file=data, output_dir=out_dir, max_seq_length=64,
      max_predictions_per_seq=10, train_batch_size=8,
      learning_rate=MW_LEARNING_RATE, num_train_steps=MW_TRAIN_STEPS,
      num_warmup_steps=MW_WARMUP_STEPS, save_checkpoints_steps=2,
      iterations_per_loop=int(iterations_per_loop),
      stop_at_step=int(stop_at_step) or None,
      deterministic=deterministic == "1")
  trace = {}
  if trace_npz:
    # Observe the job without changing it: the weights the runner starts
    # from (after task.initialize), the arguments of this worker's
    # train_dataset call, and every scalar the runner logs.
    task_cls = pretraining.PretrainingTask
    initialize, train_dataset = task_cls.initialize, task_cls.train_dataset
    write_scalars = runner.write_scalars

    def traced_initialize(self, model):
      out = initialize(self, model)
      trace["init"] = weights(model)
      return out

    def traced_train_dataset(self, batch_size, input_context):
      trace["dataset_args"] = (self, batch_size, input_context)
      return train_dataset(self, batch_size, input_context)

    def traced_write_scalars(writer, step, scalars):
      trace.setdefault("metrics", []).append(dict(scalars, step=step))
      return write_scalars(writer, step, scalars)
    task_cls.initialize = traced_initialize
    task_cls.train_dataset = traced_train_dataset
    runner.write_scalars = traced_write_scalars

  def dump(model, optimizer):
    step = int(optimizer.iterations.numpy())
    np.savez(npz, step=step, **weights(model))
    if trace_npz:
      assert "init" in trace, "the job resumed: no initial weights to trace"
      # This worker's batches: the same call on a fresh pipeline (fixed seed).
      batches = list(train_dataset(*trace["dataset_args"]).take(step))
      out = {"init/" + k: v for k, v in trace["init"].items()}
      for name in batches[0]:
        out["batch/" + name] = np.stack([b[name].numpy() for b in batches])
      for name in STEP_METRICS:
        out["metric/" + name] = np.array([m[name] for m in trace["metrics"]],
                                         np.float64)
      out["metric/step"] = np.array([m["step"] for m in trace["metrics"]])
      np.savez(trace_npz, **out)
  jobs.run_pretraining(tiny_config(), params, strategy, on_finish=dump)


def reference_mode(*paths):
  """The one-device replay of a traced multi-worker job (see the docstring)."""
  traces, out = [np.load(p) for p in paths[:-1]], paths[-1]
  init = {k[len("init/"):]: traces[0][k] for k in traces[0].files
          if k.startswith("init/")}
  names = [k[len("batch/"):] for k in traces[0].files if k.startswith("batch/")]
  num_steps = len(traces[0]["batch/input_ids"])
  batches = [{n: tf.constant(np.concatenate([t["batch/" + n][s] for t in traces]))
              for n in names} for s in range(num_steps)]
  one = tf.distribute.OneDeviceStrategy("/cpu:0")
  _, final, per_step = train(one, batches, MW_LEARNING_RATE, MW_TRAIN_STEPS,
                             MW_WARMUP_STEPS, init=init)
  np.savez(out, **final, **{"metric/" + n: np.array([m[n] for m in per_step])
                            for n in STEP_METRICS})


if __name__ == "__main__":
  if sys.argv[1] == "steps":
    steps_mode(sys.argv[2])
  elif sys.argv[1] == "reference":
    reference_mode(*sys.argv[2:])
  else:
    worker_mode(*sys.argv[2:])
