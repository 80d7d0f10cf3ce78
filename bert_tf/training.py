"""A small custom training loop over ``tf.distribute`` strategies.

Used by pretraining (:mod:`bert_tf.pretraining`) and fine-tuning
(:mod:`bert_tf.classifier`). Each step runs ``compute_fn`` on every replica,
sums the gradients across replicas (Keras 3 optimizers all-reduce them), and
sums the returned metric counters across replicas. Checkpoints go through
``tf.train.CheckpointManager``, which writes each checkpoint's files before
updating the ``checkpoint`` index file, so a killed job never leaves an index
naming a partial checkpoint.
"""

import time

from absl import logging
import tensorflow as tf


class Trainer:
  """Runs distributed training steps.

  Args:
    strategy: a ``tf.distribute.Strategy`` (variables created in its scope).
    model: the Keras model whose ``trainable_variables`` are trained.
    optimizer: a Keras 3 optimizer built in ``strategy.scope()``.
    compute_fn: ``compute_fn(features) -> (loss, metrics)`` run per replica;
      ``loss`` is a float32 scalar already scaled so that the SUM over
      replicas is the global loss; ``metrics`` is a dict of float32 scalar
      counters summed over replicas.
  """

  def __init__(self, strategy, model, optimizer, compute_fn):
    self.strategy = strategy
    self.model = model
    self.optimizer = optimizer
    self.compute_fn = compute_fn
    self._step = tf.function(self._train_steps, reduce_retracing=True)

  def _replica_step(self, features):
    with tf.GradientTape() as tape:
      loss, metrics = self.compute_fn(features)
    variables = self.model.trainable_variables
    grads = tape.gradient(loss, variables)
    self.optimizer.apply_gradients(zip(grads, variables))
    return metrics

  def _one_step(self, iterator):
    per_replica = self.strategy.run(self._replica_step, args=(next(iterator),))
    return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
            for k, v in per_replica.items()}

  def _train_steps(self, iterator, num_steps):
    totals = self._one_step(iterator)
    for _ in tf.range(num_steps - 1):
      step_sums = self._one_step(iterator)
      totals = {k: totals[k] + step_sums[k] for k in totals}
    return totals

  def train(self, iterator, num_train_steps, manager=None, steps_per_loop=10,
            log_fn=None, examples_per_step=None):
    """Trains until ``optimizer.iterations == num_train_steps``.

    Args:
      iterator: a (distributed) iterator of features.
      num_train_steps: the final global step (int); resumed runs continue
        from ``optimizer.iterations``.
      manager: optional ``tf.train.CheckpointManager``; ``save`` is called
        after every loop (it saves every ``checkpoint_interval`` steps) and
        at the end.
      steps_per_loop: steps per ``tf.function`` call and per log line.
      log_fn: ``log_fn(step, metrics_sums, seconds)`` after each loop.
      examples_per_step: global batch size, for the throughput figure.

    Returns:
      the metric sums of the last loop (dict of floats), or {} if no step ran.
    """
    last = {}
    step = int(self.optimizer.iterations.numpy())
    while step < num_train_steps:
      n = min(steps_per_loop, num_train_steps - step)
      start = time.time()
      sums = self._step(iterator, tf.constant(n))
      sums = {k: float(v) for k, v in sums.items()}
      seconds = time.time() - start
      step = int(self.optimizer.iterations.numpy())
      sums["steps"] = float(n)
      if examples_per_step:
        sums["examples_per_second"] = n * examples_per_step / max(seconds, 1e-9)
      last = sums
      if log_fn is not None:
        log_fn(step, sums, seconds)
      if manager is not None:
        manager.save(checkpoint_number=step, check_interval=True)
    if manager is not None and step > 0:
      if manager.latest_checkpoint is None or not manager.latest_checkpoint.endswith(
          "-%d" % step):
        manager.save(checkpoint_number=step, check_interval=False)
    return last


def restore_latest(manager):
  """Restores the newest checkpoint of ``manager``; returns its path or None."""
  latest = manager.latest_checkpoint
  if latest:
    manager.checkpoint.restore(latest).assert_existing_objects_matched()
    logging.info("Resumed from %s", latest)
  return latest
