"""One runner for every training job: loop, distribution, resume, outputs.

:class:`Runner` runs a :class:`bert_tf.tasks.base.Task`: it builds the model
and optimizer in the strategy's scope, resumes from the newest checkpoint in
``output_dir`` (weights, optimizer, dropout RNG and, for tasks with
``resumable_input``, every worker's data position; a missing or truncated
newest checkpoint is skipped with a warning), trains in loops of at most
``iterations_per_loop`` steps with :class:`bert_tf.training.Trainer` (a
progress line with its ETA every ``iterations_per_loop`` steps and at least
about every ``progress_seconds``, whatever the step time), saves
checkpoints every ``save_checkpoints_steps``, writes TensorBoard scalars to
``output_dir/train`` and ``output_dir/eval``, evaluates at the steps it is
given and writes ``eval_results.txt``, keeps the best model by the task's
metric in ``output_dir/best/``, then lets the task predict and calls the
export hook it is given (the library never imports :mod:`bert_tf.export`).

Source: the loop and outputs of google-research/bert ``run_pretraining.py``
and ``run_classifier.py`` (``eval_results.txt``, ``save_checkpoints_steps``,
``iterations_per_loop``), without ``TPUEstimator``.

Example::

  from bert_tf import distribute, runner
  from bert_tf.tasks import classification
  task = classification.ClassificationTask(params)
  results = runner.Runner(runner.RunnerParams(output_dir="out")).run(
      task, distribute.get_strategy("one_device"), do_train=True, do_eval=True)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
import time
from typing import Callable, Optional, Sequence

from absl import logging
import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from bert_tf import checkpoints
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import optimization
from bert_tf import precision
from bert_tf import run_dir
from bert_tf import training
from bert_tf.tasks import base

DTYPES = precision.DTYPES
RECIPE_FILE = run_dir.RECIPE_FILE

# Params fields that do not change what training computes: where files go,
# what else the run does, how often it logs or saves, on how many devices.
# Every other field of a task's params is its training recipe, recorded in
# RECIPE_FILE and checked when a run resumes.
NOT_RECIPE = frozenset({
    "output_dir", "do_train", "do_eval", "do_predict", "export_dir",
    "predict_file", "dev_file", "test_file", "eval_batch_size",
    "predict_batch_size", "max_eval_steps", "n_best_size", "max_answer_length",
    "null_score_diff_threshold", "verbose_logging", "keep_best",
    "iterations_per_loop", "progress_seconds", "save_checkpoints_steps", "keep_checkpoint_max",
    "stop_at_step", "distribution_strategy", "num_cpu_devices", "deterministic",
    "jit_compile", "num_accumulation_steps", "tfds_data_dir", "strict_utf8"})


@dataclasses.dataclass
class RunnerParams:
  """How the runner runs (the fields are the tools' flags of the same name).

  Attributes:
    output_dir: checkpoints, ``eval_results.txt``, ``train/``, ``eval/``,
      ``best/``.
    iterations_per_loop: the most steps per ``tf.function`` call (host
      loop) and the steps between progress lines.
    progress_seconds: a progress line (with its ETA) at least about this
      often whatever the step time, the first one about this long after the
      first step (:class:`bert_tf.training.ProgressCadence`); None: lines
      every ``iterations_per_loop`` steps only.
    save_checkpoints_steps: checkpoint cadence in steps.
    keep_checkpoint_max: checkpoints kept.
    stop_at_step: end this run early at this step (checkpointed); a rerun
      resumes.
    num_accumulation_steps: micro-batches per replica per update.
    jit_compile: XLA-compile each micro-batch's forward and backward pass.
    deterministic: op determinism (bit-identical reruns and resumes).
    seed: Keras/TensorFlow/Python random seed.
    dtype: Keras dtype policy (``float32``, ``mixed_bfloat16``,
      ``mixed_float16`` with dynamic loss scaling) or ``auto``
      (``mixed_bfloat16`` where the hardware computes bfloat16, else
      ``float32``: :func:`bert_tf.precision.resolve_dtype`).
    keep_best: keep the best model by the task's ``best_metric`` in
      ``output_dir/best/`` (when evaluating during training).
  """
  output_dir: str
  iterations_per_loop: int = 100
  progress_seconds: Optional[float] = 60.0
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 3
  stop_at_step: Optional[int] = None
  num_accumulation_steps: int = 1
  jit_compile: bool = False
  deterministic: bool = False
  seed: int = 12345
  dtype: str = "float32"
  keep_best: bool = True

  @classmethod
  def from_params(cls, params, **overrides) -> "RunnerParams":
    """The runner's fields taken by name from a task's params dataclass."""
    values = {f.name: getattr(params, f.name) for f in dataclasses.fields(cls)
              if hasattr(params, f.name)}
    values.update(overrides)
    return cls(**values)


def device_of(strategy) -> str:
  """``"tpu"``, ``"gpu"`` or ``"cpu"``: where ``strategy`` computes."""
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return "tpu"
  devices = getattr(strategy.extended, "worker_devices", ()) or ()
  return "gpu" if any("GPU" in d.upper() for d in devices) else "cpu"


def set_dtype_policy(dtype: str, strategy=None,
                     print_fn: Optional[Callable[[str], None]] = None) -> str:
  """Sets the Keras dtype policy named by ``dtype`` (``auto`` resolved).

  ``auto`` becomes ``mixed_bfloat16`` where the hardware computes bfloat16
  (a TPU; a CPU with ``avx512_bf16``/``amx_bf16``), else ``float32``
  (:func:`bert_tf.precision.resolve_dtype`); the choice is printed with
  ``print_fn``. ``mixed_bfloat16`` on a CPU without bf16 units logs a warning
  (it runs at ~0.2-0.3x float32 there) and goes on.

  Args:
    dtype: one of :data:`DTYPES`.
    strategy: the ``tf.distribute`` strategy (None: the CPU).
    print_fn: where the ``auto`` line goes (None: nowhere).

  Returns:
    the policy name set (never ``auto``).

  Raises:
    errors.ParamsError: an unknown value (argument ``dtype``).
  """
  if dtype not in DTYPES:
    raise errors.ParamsError("dtype: unknown %r (%s)" % (dtype, ", ".join(DTYPES)),
                             argument="dtype")
  device = "cpu" if strategy is None else device_of(strategy)
  policy, reason = precision.resolve_dtype(dtype, device)
  if dtype == "auto" and print_fn is not None:
    print_fn("--dtype=auto: %s (%s)" % (policy, reason))
  warning = precision.slow_dtype_warning(policy, device)
  if warning:
    logging.warning(warning)
  keras.config.set_dtype_policy(policy)
  return policy


def write_scalars(writer, step: int, scalars: dict) -> None:
  """TensorBoard scalars (``tf.summary.write`` with the ``scalars`` plugin's
  metadata: what ``tf.summary.scalar`` writes, without needing the
  ``tensorboard`` package at training time)."""
  meta = summary_pb2.SummaryMetadata(
      plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
  with writer.as_default(step=step):
    for k, v in scalars.items():
      tf.summary.write(k, tf.constant(float(v), tf.float32), metadata=meta)
  writer.flush()


def format_metrics(metrics: dict) -> str:
  """``k=v`` pairs, sorted, 4 decimals."""
  return " ".join("%s=%.4f" % (k, v) for k, v in sorted(metrics.items()))


format_results = io_utils.format_results


def enable_determinism_for_run(output_dir: str, seed: int) -> int:
  """:func:`bert_tf.training.enable_determinism` with the run's recorded pool size.

  The first run of a job records its intra-op thread count in
  ``output_dir/determinism.json``; a resumed run (on this or another
  machine, under any CPU allotment) uses the recorded count, so its CPU
  reductions are blocked as the first run's were. Call it before TensorFlow's
  runtime starts (the tools do, before creating the strategy); a later call
  is accepted when the pool size already in force is the recorded one.

  Returns:
    the intra-op pool size in force.

  Raises:
    RuntimeError: TensorFlow already started with another pool size.
  """
  path = os.path.join(output_dir, run_dir.DETERMINISM_FILE)
  recorded = None
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      recorded = int(json.load(f)["intra_op_threads"])
  threads = training.enable_determinism(seed, recorded)
  if recorded is None:
    os.makedirs(output_dir, exist_ok=True)
    io_utils.atomic_write_text(path, json.dumps({"intra_op_threads": threads}) + "\n")
  return threads


def training_recipe(task) -> Optional[dict]:
  """The training recipe of ``task``: its params fields outside
  :data:`NOT_RECIPE`, as JSON values; None when the task has no params
  dataclass."""
  params = getattr(task, "params", None)
  if params is None or not dataclasses.is_dataclass(params):
    return None
  recipe = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)
            if f.name not in NOT_RECIPE}
  return json.loads(json.dumps(recipe, default=str))


def check_recipe(output_dir: str, recipe: Optional[dict], resuming: bool) -> None:
  """Refuses to resume a run with another training recipe; records the recipe.

  A rerun of a run directory resumes its training. The original's
  TPUEstimator resumed whatever the flags said, so a rerun with another
  ``--learning_rate`` silently continued (or, when finished, printed
  ``resumed ... at step N`` and trained nothing). Here the first run writes
  its recipe to ``output_dir/train_flags.json``; a resume compares.

  Args:
    output_dir: the run directory.
    recipe: :func:`training_recipe` of this run (None: nothing to check).
    resuming: a checkpoint of an earlier run is in ``output_dir``.

  Raises:
    bert_tf.errors.ParamsError: the flags differ from the recorded ones; the
      message lists each ``--flag: run value (recorded) vs now``.
  """
  if recipe is None:
    return
  path = os.path.join(output_dir, RECIPE_FILE)
  if resuming and os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      old = json.load(f)
    diff = sorted(k for k in set(old) & set(recipe) if old[k] != recipe[k])
    if diff:
      raise errors.ParamsError(
          "%s holds a run trained with other flags: %s. Resuming would continue "
          "a different recipe: rerun with the run's flags to resume it, or "
          "use a new --output_dir" % (output_dir, "; ".join(
              "--%s=%s (the run) vs %s (now)" % (k, json.dumps(old[k]),
                                                 json.dumps(recipe[k]))
              for k in diff)), argument=diff[0])
    return
  io_utils.atomic_write_text(path, json.dumps(recipe, indent=2, sort_keys=True) + "\n")


def format_duration(seconds: float) -> str:
  """``h:mm:ss`` (``m:ss`` under an hour) of a duration in seconds."""
  seconds = max(0, int(round(seconds)))
  h, rest = divmod(seconds, 3600)
  m, s = divmod(rest, 60)
  return "%d:%02d:%02d" % (h, m, s) if h else "%d:%02d" % (m, s)


# The ETA of the progress lines (defined with the loop that feeds it).
EtaEstimator = training.EtaEstimator


def worker_info(strategy) -> tuple:
  """``(num_workers, worker_index, is_chief)`` of this process."""
  resolver = getattr(strategy, "cluster_resolver", None)
  local = training.local_replica_count(strategy)
  num_workers = max(1, strategy.num_replicas_in_sync // max(1, local))
  if (resolver is None or num_workers == 1 or
      isinstance(strategy, tf.distribute.TPUStrategy)):
    return 1, 0, True
  task_type, task_id = resolver.task_type, resolver.task_id or 0
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  index = 0 if task_type == "chief" else task_id + (1 if has_chief else 0)
  return num_workers, index, strategy.extended.should_checkpoint


def _better(value: float, best: Optional[float], lowest: bool = False) -> bool:
  """Whether a dev ``value`` replaces the kept ``best``: higher (lower with
  ``lowest``), or EQUAL (a tie keeps the later model: it has trained longer
  on the same score); a NaN never replaces a number."""
  if best is None or (isinstance(best, float) and math.isnan(best)):
    return True
  if math.isnan(value):
    return False
  return value <= best if lowest else value >= best


def best_metric_name(best_metric: str) -> str:
  """The name ``best.json`` records for a task's ``best_metric``: without
  the ``eval_`` prefix (``eval_acc_and_f1`` -> ``acc_and_f1``)."""
  return best_metric[len("eval_"):] if best_metric.startswith("eval_") else best_metric


BEST_MODEL_KEY = "best_model"


def best_model_line(best: dict, output_dir: str) -> str:
  """The ``eval_results.txt`` line that points at the kept best model:
  ``best_model = step S by <metric>=<value>, the model prediction and export
  use; its figures: <output_dir>/best/eval_results.txt``."""
  return "%s = step %d by %s=%.4f, the model prediction and export use; its " \
         "figures: %s\n" % (BEST_MODEL_KEY, best["step"], best["metric"], best["value"],
                            os.path.join(output_dir, run_dir.BEST_DIR, run_dir.EVAL_RESULTS))


def _short(value: str) -> str:
  """A figure of ``eval_results.txt`` with 4 decimals (other text as it is)."""
  try:
    return "%.4f" % float(value)
  except ValueError:
    return value


read_results = run_dir.read_results


def read_best_state(output_dir: str) -> Optional[dict]:
  """The best model's record ``{step, metric, value}``, or None."""
  path = os.path.join(output_dir, run_dir.BEST_DIR, run_dir.BEST_STATE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def save_best(objects: dict, output_dir: str, run_files: Sequence[str], step: int,
              metric: str, value: float, results: dict) -> None:
  """Replaces ``<output_dir>/best/`` with the current weights, atomically.

  The directory is complete before it gets its name: checkpoint ``ckpt-1``
  of ``objects`` (weights, no optimizer slots; read it with
  ``tf.train.latest_checkpoint``), the task's ``run_files`` (so it is a
  model directory on its own), its ``eval_results.txt`` and ``best.json``.
  """
  final = os.path.join(output_dir, run_dir.BEST_DIR)
  tmp = tempfile.mkdtemp(prefix=".best.", suffix=".tmp", dir=output_dir)
  old = None
  try:
    tf.train.Checkpoint(**objects).save(os.path.join(tmp, "ckpt"))
    for name in run_files:
      shutil.copyfile(os.path.join(output_dir, name), os.path.join(tmp, name))
    with open(os.path.join(tmp, run_dir.EVAL_RESULTS), "w", encoding="utf-8") as f:
      f.write(format_results(results))
    with open(os.path.join(tmp, run_dir.BEST_STATE), "w", encoding="utf-8") as f:
      json.dump({"step": int(step), "metric": metric, "value": value}, f, indent=2)
    if os.path.exists(final):
      old = tempfile.mkdtemp(prefix=".best.", suffix=".old", dir=output_dir)
      os.rmdir(old)
      os.rename(final, old)
    os.rename(tmp, final)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  if old:
    shutil.rmtree(old, ignore_errors=True)


def restore_best(objects: dict, output_dir: str) -> Optional[dict]:
  """Loads ``<output_dir>/best/`` into ``objects``; returns its record or None.

  Strict (:func:`bert_tf.checkpoints.restore_object_checkpoint`): every
  variable of ``objects`` comes from ``best/``, or one error line.

  Raises:
    CheckpointError, CorruptCheckpointError: ``best/`` does not fit the
      model or does not read whole.
  """
  state = read_best_state(output_dir)
  path = run_dir.best_checkpoint(output_dir)
  if state is None or path is None:
    return None
  checkpoints.restore_object_checkpoint(
      path, "the best model of %s" % output_dir,
      hint="the run directory's best/ was kept by another model", **objects)
  return state


class _Checkpoints:
  """The run's checkpoint manager plus, on a multi-worker job, this worker's
  data-position checkpoint (``output_dir/data-worker-<i>/``) saved at the
  same steps, so that every worker resumes its own input position.

  Duck-types the two members of ``tf.train.CheckpointManager`` that
  :meth:`bert_tf.training.Trainer.train` uses (``save``, ``latest_checkpoint``).
  """

  def __init__(self, manager, data_manager=None):
    self.manager = manager
    self.data_manager = data_manager

  @property
  def latest_checkpoint(self):
    return self.manager.latest_checkpoint

  def save(self, checkpoint_number=None, check_interval=True):
    path = self.manager.save(checkpoint_number=checkpoint_number,
                             check_interval=check_interval)
    if path is not None and self.data_manager is not None:
      self.data_manager.save(checkpoint_number=checkpoint_number)
    return path


@dataclasses.dataclass
class RunState:
  """Everything one run of :class:`Runner` holds between its steps.

  Attributes:
    task: the task run.
    strategy: the ``tf.distribute`` strategy.
    spec: ``task.optimizer_spec()`` (learning rate, steps, warm-up).
    do_train, do_eval: what the run does (:meth:`Runner.run`'s flags).
    model: the task's Keras model (built in ``strategy.scope()``).
    optimizer: its optimizer; ``optimizer.iterations`` is the global step.
    model_objects: the trackables ``best/`` keeps (no optimizer slots).
    checkpoints: the run's checkpoint manager (and data positions).
    iterator: the training input (None when not training).
    num_workers, worker_index, is_chief: this process in the job.
    resumed_from: the checkpoint restored, or None (initialized).
    results: what :meth:`Runner.run` returns, filled step by step.
    eval_writer: the ``eval/`` TensorBoard writer (made at the first
      evaluation).
  """
  task: base.Task
  strategy: tf.distribute.Strategy
  spec: base.OptimizerSpec
  do_train: bool
  do_eval: bool
  model: keras.Model
  optimizer: keras.optimizers.Optimizer
  model_objects: dict
  checkpoints: "_Checkpoints"
  iterator: Optional[object]
  num_workers: int
  worker_index: int
  is_chief: bool
  resumed_from: Optional[str] = None
  results: dict = dataclasses.field(default_factory=dict)
  eval_writer: Optional[object] = None

  @property
  def step(self) -> int:
    """The global step (``optimizer.iterations``) as a Python int."""
    return int(self.optimizer.iterations.numpy())


class Runner:
  """Runs a :class:`bert_tf.tasks.base.Task` (see the module docstring).

  :meth:`run` checks the arguments, then goes through named steps on one
  :class:`RunState`: :meth:`build`, :meth:`restore_or_initialize`,
  :meth:`train_until` (evaluating at the given steps),
  :meth:`evaluate_and_keep_best`, :meth:`predict_and_export`.

  Args:
    params: :class:`RunnerParams`.
    print_fn: progress lines go here (every ``iterations_per_loop`` steps
      and at least about every ``progress_seconds``; one per evaluation).
    clock: monotonic seconds for the progress cadence, elapsed time and ETA
      (tests pass a fake one).

  Example::

    Runner(RunnerParams(output_dir="/tmp/run", iterations_per_loop=10)).run(
        task, tf.distribute.OneDeviceStrategy("/cpu:0"), do_train=True)
  """

  def __init__(self, params: RunnerParams, print_fn: Callable[[str], None] = print,
               clock: Callable[[], float] = time.monotonic):
    self.params = params
    self.print_fn = print_fn
    self.clock = clock

  def run(self, task: base.Task, strategy, do_train: bool = True,
          do_eval: bool = False, do_predict: bool = False,
          eval_at_steps: Sequence[int] = (),
          export_fn: Optional[Callable[[keras.Model], str]] = None,
          on_finish: Optional[Callable] = None) -> dict:
    """Trains (resuming), evaluates, predicts and exports, as asked.

    Args:
      task: the task.
      strategy: a ``tf.distribute.Strategy``.
      do_train: train to ``task.optimizer_spec().num_train_steps`` (or
        ``stop_at_step``).
      do_eval: evaluate at each of ``eval_at_steps`` reached while training
        and at the end (once when nothing is trained).
      do_predict: let the task write its test predictions (best model).
      eval_at_steps: steps (ascending) at which to evaluate during training.
      export_fn: called with the final model (the best one when kept);
        returns the export path, reported as ``export_path``.
      on_finish: ``on_finish(model, optimizer)`` at the end (tests).

    Returns:
      dict: ``train_<metric>`` (last loop), the last evaluation's results and
      ``global_step``, ``best_step``/``best_<metric>``, ``test_files``,
      ``export_path``, as they apply.

    Raises:
      bert_tf.errors.BertTfError subclasses naming the bad argument or file.
    """
    p = self.params
    task.check_inputs()
    if p.deterministic:
      enable_determinism_for_run(p.output_dir, p.seed)
    else:
      keras.utils.set_random_seed(p.seed)
    set_dtype_policy(p.dtype, strategy, self.print_fn)
    spec = task.optimizer_spec()
    warning = task.warmup_warning() if do_train else None
    if warning:
      self.print_fn(warning)
    num_workers, worker_index, is_chief = worker_info(strategy)
    batch = getattr(task, "train_batch_size", None)
    if do_train and batch is not None and batch % (
        strategy.num_replicas_in_sync * p.num_accumulation_steps):
      raise errors.ParamsError(
          "train_batch_size %d is not divisible by the %d replicas x %d "
          "accumulation steps" % (batch, strategy.num_replicas_in_sync,
                                  p.num_accumulation_steps),
          argument="train_batch_size")
    os.makedirs(p.output_dir, exist_ok=True)
    ckpt_dir = p.output_dir
    if is_chief and do_train:  # before anything in output_dir is rewritten
      # (listed, not latest_checkpoint: a run whose newest files were
      # deleted by hand still resumes, from an older checkpoint)
      check_recipe(p.output_dir, training_recipe(task),
                   resuming=bool(run_dir.listed_checkpoints(p.output_dir)))
    if is_chief:
      if do_train or not all(os.path.exists(os.path.join(p.output_dir, f))
                             for f in task.run_files if f):
        task.write_run_files(p.output_dir)  # a predict/export run keeps the training run's
    else:
      ckpt_dir = tempfile.mkdtemp(prefix=".worker%d." % worker_index,
                                  dir=p.output_dir)
    try:
      state = self.build(task, strategy, spec, (num_workers, worker_index, is_chief),
                         ckpt_dir, do_train, do_eval)
      self.restore_or_initialize(state)
      end = spec.num_train_steps
      if p.stop_at_step:
        end = min(end, p.stop_at_step)
      evaluated = self.train_until(state, end, eval_at_steps)
      if do_eval and not evaluated:
        state.results.update(self.evaluate_and_keep_best(state))
      self.predict_and_export(state, do_predict, export_fn)
      state.results["global_step"] = state.step
      if on_finish is not None:
        on_finish(state.model, state.optimizer)
      return state.results
    finally:
      if not is_chief:
        shutil.rmtree(ckpt_dir, ignore_errors=True)

  # --- the steps --------------------------------------------------------------

  def build(self, task: base.Task, strategy, spec: base.OptimizerSpec,
            worker: tuple, ckpt_dir: str, do_train: bool, do_eval: bool) -> RunState:
    """Model and optimizer in ``strategy.scope()``, the training input, the
    checkpoint (model, optimizer, dropout RNG, data position) and its manager
    writing to ``ckpt_dir``.

    Args:
      task, strategy: as :meth:`run` got them.
      spec: ``task.optimizer_spec()``.
      worker: :func:`worker_info` ``(num_workers, worker_index, is_chief)``.
      ckpt_dir: where this process saves checkpoints (``output_dir`` on the
        chief, a scratch directory on the other workers).
      do_train, do_eval: :meth:`run`'s flags.

    Returns:
      a :class:`RunState` at step 0 (nothing restored yet).
    """
    p = self.params
    num_workers, worker_index, is_chief = worker
    with strategy.scope():
      model = task.build_model()
      optimizer = optimization.create_optimizer(
          spec.learning_rate, spec.num_train_steps, spec.num_warmup_steps,
          spec.name)
      if keras.config.dtype_policy().name == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
      optimizer.build(model.trainable_variables)
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    if tpu and getattr(model, "skip_padding", False):
      model.skip_padding = False  # TPU programs need static shapes
    iterator = None
    if do_train:
      iterator = self._train_iterator(task, strategy, num_workers, worker_index, tpu)
    model_objects = task.checkpoint_objects(model)
    objects = dict(model_objects, optimizer=optimizer,
                   rng=training.seed_generator_states(model))
    data_manager = None
    if iterator is not None and task.resumable_input and not tpu:
      if num_workers == 1:
        objects["iterator"] = iterator
      else:  # every worker keeps its own data position
        data_manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(iterator=iterator),
            os.path.join(p.output_dir, run_dir.DATA_DIR_PREFIX + str(worker_index)),
            max_to_keep=p.keep_checkpoint_max, checkpoint_name="data")
    manager = self._checkpoint_manager(tf.train.Checkpoint(**objects), optimizer, ckpt_dir)
    return RunState(task=task, strategy=strategy, spec=spec, do_train=do_train,
                    do_eval=do_eval,
                    model=model, optimizer=optimizer, model_objects=model_objects,
                    checkpoints=_Checkpoints(manager, data_manager), iterator=iterator,
                    num_workers=num_workers, worker_index=worker_index,
                    is_chief=is_chief)

  def _checkpoint_manager(self, checkpoint, optimizer,
                          directory: str) -> tf.train.CheckpointManager:
    """The run's checkpoint manager over ``directory`` (its state file read
    when made: :meth:`restore_or_initialize` makes it anew after a repair)."""
    p = self.params
    return tf.train.CheckpointManager(
        checkpoint, directory, max_to_keep=p.keep_checkpoint_max,
        step_counter=optimizer.iterations, checkpoint_interval=p.save_checkpoints_steps)

  def restore_or_initialize(self, state: RunState) -> None:
    """Resumes from the newest whole checkpoint of ``output_dir`` (and this
    worker's data position), else lets the task load its initial weights;
    sets ``state.resumed_from``. A newer checkpoint that is missing or
    truncated is skipped with one warning line naming it and the steps
    trained again (:func:`bert_tf.training.restore_latest`)."""
    manager = state.checkpoints.manager
    latest = training.restore_latest(
        manager if state.is_chief else
        tf.train.CheckpointManager(manager.checkpoint, self.params.output_dir,
                                   max_to_keep=None),
        warn_fn=self.print_fn, repair=state.is_chief)
    if state.is_chief and latest and latest != manager.latest_checkpoint:
      # The state file was repaired (skipped checkpoints dropped): a manager
      # made now saves and sweeps on from the restored one.
      state.checkpoints.manager = self._checkpoint_manager(
          manager.checkpoint, state.optimizer, manager.directory)
    state.resumed_from = latest
    if latest:
      self.print_fn("resumed from %s at step %d" % (latest, state.step))
      if state.checkpoints.data_manager is not None:
        self._restore_data_position(state.checkpoints.data_manager, state.step,
                                    state.worker_index)
    else:
      what = state.task.initialize(state.model)
      if what:
        self.print_fn("initialized from " + what)

  def train_until(self, state: RunState, end: int, eval_at_steps: Sequence[int]) -> bool:
    """Trains to step ``end`` in loops of ``iterations_per_loop`` steps
    (checkpointed at the cadence), with :meth:`evaluate_and_keep_best` at
    each of ``eval_at_steps`` on the way and at ``end`` when evaluating.

    Returns:
      whether an evaluation ran (False also when nothing was trained).
    """
    p, task = self.params, state.task
    step = state.step
    if state.do_train and state.resumed_from and step >= end:
      self.print_fn("training is complete (step %d of %d): nothing to train; "
                    "a new --output_dir trains anew" % (step, end))
    if not state.do_train or step >= end:
      return False
    model, optimizer = state.model, state.optimizer
    if task.normalized_loss:
      compute, normalizer = (lambda f, t: task.compute_loss(model, f, t)), \
          task.loss_normalizers
    else:
      compute, normalizer = (lambda f: task.compute_loss(model, f)), None
    trainer = training.Trainer(
        state.strategy, model, optimizer, compute,
        num_accumulation_steps=p.num_accumulation_steps,
        normalizer_fn=normalizer, jit_compile=p.jit_compile)
    writer = (tf.summary.create_file_writer(os.path.join(p.output_dir, "train"))
              if state.is_chief else tf.summary.create_noop_writer())
    # One cadence for the whole run: its ETA keeps the steady step time
    # across evaluations. Multi-worker jobs keep fixed loops (every worker
    # must run calls of the same length).
    cadence = training.ProgressCadence(
        p.iterations_per_loop, p.progress_seconds, clock=self.clock,
        fixed=state.num_workers > 1)
    log = self._loop_logger(state, end, writer, cadence)
    stops = [s for s in eval_at_steps if step < s < end] if state.do_eval else []
    last, evaluated = {}, False
    # SIGINT/SIGTERM: a checkpoint at the current step, then Interrupted.
    with training.StopRequest() as stop_request:
      for stop in stops + [end]:
        try:
          last = trainer.train(state.iterator, stop, state.checkpoints,
                               steps_per_loop=p.iterations_per_loop, log_fn=log,
                               examples_per_step=batch_size_of(task),
                               stop=stop_request, cadence=cadence)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
          task.explain_data_error(e)
          raise
        if state.do_eval:
          state.results.update(self.evaluate_and_keep_best(state))
          evaluated = True
    if last:
      state.results.update({"train_" + k: v for k, v in task.train_metrics(last).items()})
    return evaluated

  def _loop_logger(self, state: RunState, end: int, writer,
                   cadence: training.ProgressCadence) -> Callable:
    """The ``log_fn(gstep, sums, seconds)`` of :meth:`train_until`: one log
    line (metrics, learning rate, throughput, elapsed, ETA from ``cadence``'s
    steady step time) and the ``train/`` scalars per line."""
    task, optimizer = state.task, state.optimizer
    total = state.spec.num_train_steps
    started = self.clock()

    def log(gstep, sums, seconds):
      m = task.train_metrics(sums)
      lr = float(optimizer.learning_rate)
      rate = sums.get("examples_per_second", 0.0)
      elapsed = self.clock() - started
      eta = cadence.eta.seconds_left(end - gstep)
      self.print_fn("step %d/%d %s lr=%.3g %.1f %s/s (%.1fs) elapsed %s eta %s" % (
          gstep, total, format_metrics(m), lr, rate, task.example_unit, seconds,
          format_duration(elapsed), format_duration(eta)))
      write_scalars(writer, gstep, dict(m, learning_rate=lr, **{task.throughput_name: rate}))

    return log

  def evaluate_and_keep_best(self, state: RunState) -> dict:
    """One dev evaluation of the current weights: the task's figures plus
    ``global_step``; on the chief, its ``eval/`` scalars, ``best/`` replaced
    when it is the best so far (:meth:`keep_best`), and ``eval_results.txt``.

    Returns:
      dict: the evaluation's results (floats) and ``global_step`` (int).
    """
    try:
      out = state.task.evaluate(state.model, self.print_fn)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      state.task.explain_data_error(e)
      raise
    gstep = state.step
    out["global_step"] = gstep
    if state.is_chief:
      if state.eval_writer is None:
        state.eval_writer = tf.summary.create_file_writer(
            os.path.join(self.params.output_dir, "eval"))
      write_scalars(state.eval_writer, gstep,
                    {k: v for k, v in out.items() if k != "global_step"})
      best = self.keep_best(state, out) if state.do_train else None
      self._write_eval_results(out, best)
    return out

  def keep_best(self, state: RunState, out: dict) -> Optional[dict]:
    """Replaces ``best/`` with the current weights when ``out``'s
    ``task.best_metric`` is the best so far (highest, or lowest with
    ``task.best_is_lowest``; a tie keeps the later step). A ``best/`` kept
    by another metric is replaced.

    Returns:
      the kept best model's record ``{step, metric, value}``, or None when
      the run keeps no best model (``keep_best`` off, no ``best_metric``).
    """
    task, p = state.task, self.params
    if not (p.keep_best and task.best_metric):
      return None
    value = out[task.best_metric]
    metric = best_metric_name(task.best_metric)
    best = read_best_state(p.output_dir)
    kept = None if best is None or best["metric"] != metric else best["value"]
    if _better(value, kept, task.best_is_lowest):
      save_best(state.model_objects, p.output_dir, task.run_files, out["global_step"],
                metric, value, out)
      best = read_best_state(p.output_dir)
      self.print_fn("new best dev model: %s=%.4f at step %d -> %s" % (
          metric, value, out["global_step"], os.path.join(p.output_dir, run_dir.BEST_DIR)))
    return best

  def _write_eval_results(self, out: dict, best: Optional[dict]) -> None:
    """The original's ``eval_results.txt``: this (the latest) step's figures;
    when the kept best model is another step's, a line says where its
    figures are."""
    text = format_results(out)
    if best is not None and best["step"] != out["global_step"]:
      text += best_model_line(best, self.params.output_dir)
    io_utils.atomic_write_text(os.path.join(self.params.output_dir, run_dir.EVAL_RESULTS), text)

  def predict_and_export(self, state: RunState, do_predict: bool,
                         export_fn: Optional[Callable[[keras.Model], str]]) -> None:
    """With prediction or an export hook: restores ``best/`` when kept (else
    the final weights stay), lets the task predict, calls ``export_fn`` on
    the chief, and prints which model it was and its dev figures. Adds
    ``best_step``/``best_<metric>``, ``test_files``, ``export_path`` to
    ``state.results``."""
    if not do_predict and export_fn is None:
      return
    p, task, results = self.params, state.task, state.results
    final_step = state.step
    best = None
    if p.keep_best and task.best_metric:
      best = restore_best(state.model_objects, p.output_dir)
    if best is not None:
      self.print_fn("using the best dev model for prediction/export: step %d, "
                    "%s=%.4f (%s)" % (best["step"], best["metric"], best["value"],
                                      os.path.join(p.output_dir, run_dir.BEST_DIR)))
      results["best_step"] = best["step"]
      results["best_" + best["metric"]] = best["value"]
    else:
      self.print_fn("using the final model (step %d) for prediction/export" %
                    final_step)
    if do_predict:
      files = task.predict(state.model, p.output_dir, self.print_fn)
      results["test_files"] = files
      if files:
        self.print_fn("wrote %s" % ", ".join(files))
    if export_fn is not None and state.is_chief:
      path = export_fn(state.model)
      results["export_path"] = path
      self.print_fn("exported SavedModel to %s" % path)
    if do_predict or (export_fn is not None and state.is_chief):
      self.print_fn(self._model_report(task, best, final_step, results))

  # --- helpers ----------------------------------------------------------------

  def _model_report(self, task, best, final_step, results) -> str:
    """The last line of a run that predicts or exports: which model (step,
    why) and its dev figures, with the file they are in."""
    what = "exported" if "export_path" in results else "predicted with"
    p = self.params
    if best is not None:
      path = os.path.join(p.output_dir, run_dir.BEST_DIR, run_dir.EVAL_RESULTS)
      figures = read_results(path) or {}
      head = ("%s the best dev model: step %d of %d, %s %s (a tie keeps the "
              "later step)" % (what, best["step"], final_step,
                               "lowest" if task.best_is_lowest else "highest",
                               best["metric"]))
    else:
      path = os.path.join(p.output_dir, run_dir.EVAL_RESULTS)
      figures = read_results(path) or {}
      if figures.get("global_step") != str(final_step):
        figures = {}  # no evaluation of this step
      why = ("no dev evaluation kept a best model" if task.best_metric
             else "the task keeps no best model")
      head = "%s the final model: step %d (%s)" % (what, final_step, why)
    figures = {k: v for k, v in figures.items()
               if k not in ("global_step", BEST_MODEL_KEY)}
    if not figures:
      return head + "; no dev figures"
    return "%s; dev figures (%s): %s" % (head, path, " ".join(
        "%s=%s" % (k, _short(v)) for k, v in sorted(figures.items())))

  def _train_iterator(self, task, strategy, num_workers, worker_index, tpu):
    batch = batch_size_of(task)

    def train_dataset(per_replica_batch, ctx):
      dataset = task.train_dataset(per_replica_batch, ctx)
      if not task.autotune_input:
        options = tf.data.Options()
        options.autotune.enabled = False
        dataset = dataset.with_options(options)
      return dataset

    if tpu:
      return iter(strategy.distribute_datasets_from_function(
          lambda ctx: train_dataset(ctx.get_per_replica_batch_size(batch), ctx)))
    ctx = tf.distribute.InputContext(num_workers, worker_index,
                                     strategy.num_replicas_in_sync)
    dataset = train_dataset(batch // num_workers, ctx)
    if task.resumable_input:
      return iter(dataset)  # a plain iterator: checkpointable (exact resume)
    return iter(strategy.experimental_distribute_dataset(dataset))

  def _restore_data_position(self, data_manager, step, worker_index):
    """Restores this worker's data position saved at ``step``."""
    want = os.path.join(data_manager.directory, "data-%d" % step)
    if os.path.exists(want + ".index"):
      checkpoints.restore_object_checkpoint(
          want, "worker %d's data position" % worker_index,
          hint="the input pipeline changed", iterator=data_manager.checkpoint.iterator)
      self.print_fn("worker %d: restored its data position at step %d"
                    % (worker_index, step))
    else:
      logging.warning("worker %d: no data position saved at step %d in %s; "
                      "reading from the start", worker_index, step,
                      data_manager.directory)


def batch_size_of(task) -> int:
  """The task's global training batch size (``train_batch_size``)."""
  return int(getattr(task, "train_batch_size"))
