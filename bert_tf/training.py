"""A small custom training loop over ``tf.distribute`` strategies.

Used by pretraining (:mod:`bert_tf.pretraining`) and fine-tuning
(:mod:`bert_tf.classifier`). One optimizer step:

1. each replica computes the gradients of its part of the global batch
   (with ``num_accumulation_steps = k``, of k micro-batches in turn, summing
   the gradients: a ``tf.while_loop``, so the graph does not grow with k);
2. the gradients are SUMMED across replicas (one all-reduce);
3. the summed gradients are clipped to the optimizer's ``global_clipnorm``
   (the original's ``tf.clip_by_global_norm(grads, 1.0)``);
4. the optimizer applies them (its own all-reduce is switched off, and its
   ``global_clipnorm`` is taken over by step 3).

So the step does not depend on the number of replicas or micro-batches: 2
replicas, or 2 micro-batches, take the same step as one device on the whole
batch. (Keras 3 optimizers clip each replica's gradients BEFORE their
all-reduce, and the original on TPU clipped per core, both of which change
the step with the replica count; here clipping always sees the global
gradient.) Losses must be normalized by global quantities for this to be
exact: pass ``normalizer_fn`` and the Trainer sums its counters over all
micro-batches and replicas before the forward pass (see
:func:`bert_tf.pretraining.pretraining_metrics`).

Input: either a ``tf.distribute`` distributed iterator (per-replica
batches), or a plain ``tf.data`` iterator of this worker's batches, which is
split evenly over the worker's replicas inside the step. A plain iterator is
a trackable object, so it can go into the checkpoint (``tf.train.Checkpoint(
iterator=...)``) for an exact resume; ``tf.distribute``'s distributed
iterators cannot (TF 2.21 raises "expecting iterator to be a trackable
object").

Checkpoints go through ``tf.train.CheckpointManager``, which writes each
checkpoint's files before updating the ``checkpoint`` index file, so a
killed job never leaves an index naming a partial checkpoint.
"""

import collections
import os
import signal
import threading
import time
from typing import Callable, Optional, Sequence

from absl import logging
import keras
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import errors
from bert_tf import run_dir


def onednn_enabled() -> bool:
  """Whether this TensorFlow runs oneDNN kernels (``TF_ENABLE_ONEDNN_OPTS``,
  read once when TensorFlow loads; on by default on x86 CPUs)."""
  try:
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  except ImportError:  # pragma: no cover (a TensorFlow without the probe)
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") not in ("0", "false")
  return bool(_pywrap_util_port.IsMklEnabled())


def enable_determinism(seed: int, intra_op_threads: Optional[int] = None) -> int:
  """Bit-reproducible training: op determinism, seeds, a FIXED intra-op pool.

  Call it before TensorFlow's runtime starts (before any op, device listing
  or ``tf.distribute`` strategy), in the killed run and in its resume alike.

  Op determinism alone does not make a RESUMED run bit-identical: the
  blocking of CPU reductions (oneDNN's MatMul/BatchMatMul, Eigen's
  reductions) follows the size of the intra-op thread pool, and
  TensorFlow sizes that pool from the CPUs the process may use when it
  starts (its affinity mask: ``taskset``, a container's cpuset, another
  machine). Measured on this repository's tiny BERT, 2-CPU machine: the
  gradients of one fixed batch with 1, 2 and 4 intra-op threads differ in 27
  of 28 tensors (up to 1e-7); a run resumed at step 6 under ``taskset -c 0``
  (1 thread) ends with 134 of 145 checkpoint tensors differing from the
  uninterrupted 2-thread run; the same resume with the pool fixed at 2
  threads is bit-identical. Fixing the pool size here makes the
  partitioning independent of where and how the process starts. (The
  inter-op pool does not change results: 1 or 2 inter-op threads give the
  same bits; it is left alone.)

  oneDNN's kernels are the other source of run-to-run differences: TensorFlow
  hands oneDNN its intra-op pool, and oneDNN runs a primitive on one thread
  when it is called on a pool thread (``get_in_parallel()``), which happens
  by timing (an XLA kernel finishing on a pool thread, the executor running
  the next MatMul inline there). A warning is logged when oneDNN is on; the
  tools turn it off for ``--deterministic`` (``TF_ENABLE_ONEDNN_OPTS=0``
  before TensorFlow loads, ``tools/_startup.py``).

  Args:
    seed: Python, NumPy and TensorFlow/Keras seed
      (``keras.utils.set_random_seed``).
    intra_op_threads: intra-op pool size (int >= 1). None: the number of
      CPUs this process may use now (what TensorFlow would pick). Pass the
      same number to every run of one training job (record the returned
      value with the run) to resume bit-identically on another machine or
      CPU allotment.

  Returns:
    the intra-op pool size in force (int).

  Raises:
    ValueError: ``intra_op_threads`` < 1.
    RuntimeError: TensorFlow's runtime already started with another pool
      size (the pool cannot be resized then).
  """
  try:
    available = len(os.sched_getaffinity(0))
  except AttributeError:  # not Linux
    available = os.cpu_count() or 1
  intra_op_threads = int(available if intra_op_threads is None else intra_op_threads)
  if intra_op_threads < 1:
    raise ValueError("intra_op_threads must be >= 1, got %d" % intra_op_threads)
  try:
    tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
  except RuntimeError:
    # Already started: fine only if it started with this very pool size.
    started = tf.config.threading.get_intra_op_parallelism_threads()
    if (started or available) != intra_op_threads:  # 0: TensorFlow's default
      raise RuntimeError(
          "enable_determinism(intra_op_threads=%d) was called after "
          "TensorFlow's runtime started with %s intra-op threads; call it "
          "first thing (before creating a strategy or running any op)"
          % (intra_op_threads, started or "the default number of")) from None
  if onednn_enabled():
    logging.warning(
        "Determinism: TensorFlow runs oneDNN kernels, which may round a "
        "reduction differently depending on the thread that runs them (rare "
        "one-ulp differences under load); set TF_ENABLE_ONEDNN_OPTS=0 before "
        "importing TensorFlow (the tools do with --deterministic)")
  tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(seed)
  logging.info("Determinism: op determinism, seed %d, %d intra-op threads",
               seed, intra_op_threads)
  return intra_op_threads


class Interrupted(Exception):
  """Training stopped on SIGINT/SIGTERM after saving a checkpoint at ``step``.

  Attributes:
    step: the global step checkpointed (int).
    signum: the signal received (``signal.SIGINT`` or ``signal.SIGTERM``).
  """

  def __init__(self, step: int, signum: int):
    super().__init__("interrupted at step %d; rerun the same command to resume" % step)
    self.step = int(step)
    self.signum = int(signum)


class StopRequest:
  """Turns SIGINT (Ctrl-C) and SIGTERM into a stop at the next step boundary.

  A context manager. Inside it, the first of those signals sets
  :attr:`signum` and the ``tf.Variable`` :attr:`flag` that the training loop
  (:class:`Trainer`) reads before each step, so the loop under way ends after
  the step it is computing; the Trainer then saves a checkpoint at that step
  and raises :class:`Interrupted`. A second signal ends the process at once
  (the signal's default action: nothing is saved beyond the last
  checkpoint). The training loop runs in TensorFlow's C++ runtime, where
  Python signal handlers wait until it returns, so a watcher thread woken by
  ``signal.set_wakeup_fd`` sets the flag while the loop runs.

  Only the main thread can install signal handlers; elsewhere (a test
  runner's worker thread) the context does nothing. On exit the previous
  handlers are restored.

  Example::

    with StopRequest() as stop:
      trainer.train(iterator, 1000, manager, stop=stop)  # may raise Interrupted
  """

  SIGNALS = (signal.SIGINT, signal.SIGTERM)

  def __init__(self):
    self.signum = None
    self.flag = tf.Variable(False, trainable=False, name="stop_requested")
    self._received = 0  # signals handled in Python
    self._old = {}
    self._old_fd = -1
    self._pipe = None
    self._thread = None

  @property
  def requested(self) -> bool:
    return self.signum is not None

  def _handle(self, signum, frame):
    del frame
    self._received += 1
    if self._received > 1 and self._old:  # the second signal: stop now
      signal.signal(signum, signal.SIG_DFL)
      os.kill(os.getpid(), signum)
    if self.signum is None:
      self.signum = signum

  def _watch(self, fd):
    while True:
      try:
        data = os.read(fd, 64)
      except OSError:
        return
      if not data:
        return
      if self.signum is None:
        self.signum = data[0]
      self.flag.assign(True)

  def __enter__(self):
    if threading.current_thread() is not threading.main_thread():
      return self
    self._old = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
    r, w = os.pipe()
    os.set_blocking(w, False)
    self._pipe = (r, w)
    self._old_fd = signal.set_wakeup_fd(w)
    self._thread = threading.Thread(target=self._watch, args=(r,), daemon=True,
                                    name="bert_tf-stop-request")
    self._thread.start()
    return self

  def __exit__(self, *exc):
    if not self._old:
      return False
    signal.set_wakeup_fd(self._old_fd)
    for s, old in self._old.items():
      signal.signal(s, old)
    self._old = {}
    r, w = self._pipe
    os.close(w)  # the watcher reads EOF and returns
    self._thread.join(timeout=10)
    os.close(r)
    return False


class EtaEstimator:
  """Time left from the recent host loops' seconds per step.

  The first loop of a run traces and compiles the step (measured: ~2x the
  steady time per step on the tiny model); an ETA from the time since the
  start overstates the rest of the run by as much. This keeps the last
  ``window`` loops' ``(steps, seconds)`` (a loop: one call of the training
  function, :class:`Trainer`) and, once a second loop is seen, leaves the
  first out; the ETA is the remaining steps times their mean seconds per
  step.

  Example::

    eta = EtaEstimator()
    eta.update(steps=50, seconds=30.0)   # the first loop (compiles)
    eta.update(steps=50, seconds=10.0)
    eta.seconds_left(400)                # 80.0
  """

  def __init__(self, window: int = 10):
    self.first = None
    self.recent = collections.deque(maxlen=window)

  def update(self, steps: int, seconds: float) -> None:
    """Records one loop: ``steps`` steps in ``seconds`` seconds."""
    if steps <= 0:
      return
    if self.first is None:
      self.first = (steps, seconds)
    else:
      self.recent.append((steps, seconds))

  def seconds_per_step(self) -> float:
    """The mean over the recent loops (the first loop alone until another
    is seen; 0.0 before any)."""
    loops = list(self.recent) or ([self.first] if self.first else [])
    steps = sum(n for n, _ in loops)
    return sum(s for _, s in loops) / steps if steps else 0.0

  def seconds_left(self, steps_left: int) -> float:
    """Estimated seconds for ``steps_left`` more steps."""
    return self.seconds_per_step() * max(0, steps_left)


class ProgressCadence:
  """When the training loop comes back to Python for a progress line.

  A line (and a checkpoint at the save cadence) comes after every
  ``every_steps`` steps (``--iterations_per_loop``: steps per host loop, the
  original's TPU meaning; no call of the training function runs more), and,
  whatever the step time, about every ``every_seconds`` seconds: the first
  line within about ``every_seconds`` of the first step, then at that rhythm.
  The first two calls run one step each (the first traces and compiles, the
  second times a steady step); later calls are sized from that time to end
  near the next line's time. Measured case (issue 63): 512 tokens on 2 CPU
  cores at ~17 s per step with ``--iterations_per_loop=50`` printed its
  first line after 14.5 minutes; here after ~1 minute.

  With ``fixed`` (a multi-worker job: every worker must run calls of the
  same length, or their collectives would pair steps of different calls)
  calls and lines come every ``every_steps`` steps only, as before.

  Args:
    every_steps: steps between lines (>= 1), and the most per call.
    every_seconds: seconds between lines at most (about; one step more when
      a step is longer); None: no time-based lines.
    clock: seconds, monotonic (``time.monotonic``; tests pass a fake).
    fixed: calls of ``every_steps`` steps, no time-based lines.

  Attributes:
    eta: the :class:`EtaEstimator` fed with every call's steps and seconds.

  Example::

    cadence = ProgressCadence(every_steps=50, every_seconds=60.0)
    trainer.train(iterator, 1000, manager, cadence=cadence, log_fn=log)
  """

  def __init__(self, every_steps: int, every_seconds: Optional[float] = 60.0,
               clock: Callable[[], float] = time.monotonic, fixed: bool = False):
    self.every_steps = max(1, int(every_steps))
    self.every_seconds = every_seconds
    self.clock = clock
    self.fixed = fixed or every_seconds is None
    self.eta = EtaEstimator()
    self.calls = 0
    self.line_step = 0
    self.line_time = clock()

  def begin(self, step: int) -> None:
    """The loop (re)starts at ``step``: the next line is timed from now (an
    evaluation between two training spans printed lines of its own)."""
    self.line_step = int(step)
    self.line_time = self.clock()

  def _steady(self) -> Optional[float]:
    """Seconds per step once a steady call is timed, else None."""
    return self.eta.seconds_per_step() if self.calls >= 2 else None

  def next_call(self, step: int, end: int) -> int:
    """Steps (>= 1) for the next call from ``step`` toward ``end``."""
    n = min(self.every_steps - (step - self.line_step), end - step)
    if self.fixed or n <= 1:
      return max(1, n)
    if self.calls < 2:
      return 1  # trace and compile; then one steady step, timed
    per_step = self._steady()
    left = self.line_time + self.every_seconds - self.clock()
    if per_step and per_step > 0:
      n = min(n, int(round(left / per_step)))
    return max(1, n)

  def record(self, steps: int, seconds: float) -> None:
    """One call ran ``steps`` steps in ``seconds``."""
    self.calls += 1
    self.eta.update(steps, seconds)

  def line_due(self, step: int, end: int) -> bool:
    """Whether a line comes now, at ``step`` (``end``: the loop's last step)."""
    if step >= end or step - self.line_step >= self.every_steps:
      return True
    if self.fixed:
      return False
    elapsed = self.clock() - self.line_time
    half_step = (self._steady() or 0.0) / 2
    return elapsed + half_step >= self.every_seconds

  def line_done(self, step: int) -> None:
    """A line was printed at ``step``."""
    self.line_step = int(step)
    self.line_time = self.clock()


RETAIN_HOST_MEMORY_ENV = "BERT_TF_RETAIN_HOST_MEMORY"
_M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
_M_MMAP_MAX = -4
_retained = None


def retain_freed_host_memory() -> bool:
  """Keeps freed host memory in the process for reuse (glibc ``malloc``).

  TensorFlow's CPU allocator gets its buffers from ``malloc``. glibc serves a
  request above its mmap threshold (32 MiB at most) with a fresh ``mmap``
  and unmaps it on ``free``, so every training step maps the dense
  word-embedding gradient and the optimizer's temporaries anew (30,522 x 384
  float32 = 47 MB for all-MiniLM-L6-v2, 94 MB for BERT-BASE) and the kernel
  page-faults and zero-fills each of their 4 KiB pages again. This sets
  ``mallopt(M_MMAP_MAX, 0)`` (every block from the heap) and
  ``mallopt(M_TRIM_THRESHOLD, 2**31 - 1)`` (freed heap memory is not handed
  back to the system), so the next step reuses the same, already mapped
  pages. Numerics are unchanged; the peak memory is the same (the resident
  size stays at the peak instead of dropping between steps). glibc's
  per-thread heaps hold at most 64 MiB, so a larger block requested from a
  TensorFlow worker thread is still mapped anew (BERT-BASE's embedding
  gradient). Measured on 2 AMD EPYC Zen 5 cores, all-MiniLM-L6-v2:
  token tagging, a 32 x 54 batch, one process alternating the settings
  every 8 steps: 745 -> 718 ms per training step (medians of 7 rounds);
  ``tools/run_ner.py`` on WNUT-16 (``bench/bench_ner.py``, 3 epochs): 39.0
  -> 42.8 examples/s steady, 218 -> 155 s for the whole run; SWAG
  (``bench/bench_swag.py``): no change (10.8 and 10.7 examples/s).

  Process-wide and idempotent; :class:`Trainer` calls it. Set the
  environment variable ``BERT_TF_RETAIN_HOST_MEMORY=0`` to leave ``malloc``
  as it is (e.g. a process that must give memory back between phases).
  There is no tuning to do (and nothing is changed) where the C library is
  not glibc.

  Returns:
    True when the settings are in force (Linux with glibc), else False.
  """
  global _retained
  if _retained is not None:
    return _retained
  _retained = False
  if os.environ.get(RETAIN_HOST_MEMORY_ENV, "1").strip().lower() in ("0", "false", "no"):
    return _retained
  import ctypes  # pylint: disable=g-import-not-at-top
  import platform  # pylint: disable=g-import-not-at-top
  if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
    return _retained
  try:
    libc = ctypes.CDLL(None)
    mallopt = libc.mallopt
  except (OSError, AttributeError):  # pragma: no cover (glibc always has it)
    return _retained
  mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
  _retained = bool(mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
  if _retained:
    logging.info("Host memory: freed blocks kept for reuse (glibc mallopt "
                 "M_MMAP_MAX=0, M_TRIM_THRESHOLD=2^31-1; %s=0 turns this off)",
                 RETAIN_HOST_MEMORY_ENV)
  return _retained


def local_replica_count(strategy):
  """Replicas of ``strategy`` on this worker (1 for the default strategy)."""
  try:
    return len(strategy.extended.worker_devices)
  except RuntimeError:  # the default strategy has no worker_devices
    return 1


def _inner_optimizer(optimizer):
  return getattr(optimizer, "inner_optimizer", optimizer)


def _take_over_aggregation(optimizer):
  """Switches off the optimizer's own gradient all-reduce and global clipping.

  Keras 3's TensorFlow optimizers all-reduce (sum) the gradients passed to
  ``apply`` in a replica context (``TFOptimizer._all_reduce_sum_gradients``)
  after clipping them per replica. The Trainer all-reduces and clips itself,
  so it replaces that method on this optimizer instance by the identity
  (Keras 2's ``experimental_aggregate_gradients=False``). A test
  (``tests/test_pretraining.py``) compares a 2-replica step with a 1-device
  step, so a Keras change here cannot go unnoticed.

  The one private name of another library left in training: Keras 3 has
  no public way to apply gradients already summed over replicas
  (keras-team/keras#19308, open): ``apply`` in a replica context always
  sums, ``LossScaleOptimizer.apply`` refuses the cross-replica context, and
  the global clip must see the summed gradients. The public alternatives
  all-reduce every gradient twice (passing the clipped sum on one replica
  and zeros on the others) or clip before the sum (other numerics).

  Returns:
    the global clip norm the optimizer had (float or None).
  """
  inner = _inner_optimizer(optimizer)
  clip = getattr(inner, "global_clipnorm", None)
  inner.global_clipnorm = None
  if not hasattr(inner, "_all_reduce_sum_gradients"):
    raise TypeError("%s has no _all_reduce_sum_gradients: this Keras version "
                    "aggregates gradients differently; update "
                    "bert_tf.training" % type(inner).__name__)
  inner._all_reduce_sum_gradients = lambda grads_and_vars: list(grads_and_vars)  # pylint: disable=protected-access
  return clip


class Trainer:
  """Runs distributed training steps.

  Args:
    strategy: a ``tf.distribute.Strategy`` (variables created in its scope).
    model: the Keras model whose ``trainable_variables`` are trained.
    optimizer: a Keras 3 optimizer built in ``strategy.scope()``, possibly a
      ``keras.optimizers.LossScaleOptimizer`` (mixed_float16): the loss is
      then multiplied by its dynamic scale, the clip threshold too (clipping
      ``s*g`` at ``s*c`` equals clipping ``g`` at ``c``), and it unscales,
      skips steps with non-finite gradients and adapts the scale. The
      Trainer takes over its gradient all-reduce and ``global_clipnorm``
      (see :func:`_take_over_aggregation`).
    compute_fn: without ``normalizer_fn``: ``compute_fn(features) -> (loss,
      metrics)`` with ``loss`` a float32 scalar scaled so that the SUM over
      replicas is the global loss (divided by ``num_accumulation_steps``
      here when accumulating: exact for equal-sized micro-batches and
      per-example mean losses). With ``normalizer_fn``: ``compute_fn(
      features, totals)`` where ``totals`` holds the global sums of the
      normalizer counters and ``loss`` is scaled so that the SUM over
      micro-batches and replicas is the global loss. ``metrics`` is a dict
      of float32 scalar counters, summed over micro-batches and replicas.
    num_accumulation_steps: k >= 1; each replica's batch is split into k
      equal micro-batches whose gradients are summed before one update.
    normalizer_fn: optional ``normalizer_fn(features) -> dict`` of float32
      scalar counters (e.g. the masked-LM weight sum), computed from the
      inputs alone and summed over micro-batches and replicas.
    jit_compile: compile each micro-batch's forward and backward pass with
      XLA (``tf.function(jit_compile=True)``); the input pipeline, the
      all-reduce and the update stay outside.

  Creating a Trainer also calls :func:`retain_freed_host_memory` (freed
  host memory kept for the next step: the large per-step buffers are not
  page-faulted anew; opt out with ``BERT_TF_RETAIN_HOST_MEMORY=0``).
  """

  def __init__(self, strategy, model, optimizer, compute_fn,
               num_accumulation_steps=1, normalizer_fn=None, jit_compile=False):
    if int(num_accumulation_steps) < 1:
      raise ValueError("--num_accumulation_steps must be >= 1, got %r"
                       % num_accumulation_steps)
    self.strategy = strategy
    self.model = model
    self.optimizer = optimizer
    self.compute_fn = compute_fn
    self.normalizer_fn = normalizer_fn
    self.num_accumulation_steps = int(num_accumulation_steps)
    self.loss_scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    self.clip_norm = _take_over_aggregation(optimizer)
    retain_freed_host_memory()
    self._grads_fn = (tf.function(self._grads, jit_compile=True)
                      if jit_compile else self._grads)
    self._stop_flag = None  # the flag when no StopRequest is passed (_no_stop)
    # autograph=False: the loop is an explicit tf.while_loop and nothing in
    # the step branches on a tensor, so autograph would only rewrite Keras'
    # and our code (a tiny run 21.0 -> 18.1 s without it, the same values).
    self._step = tf.function(self._train_steps, reduce_retracing=True, autograph=False)

  # --- per replica -------------------------------------------------------

  def _micro_batches(self, features):
    """[k*b, ...] -> [k, b, ...] (k = num_accumulation_steps)."""
    k = self.num_accumulation_steps

    def split(x):
      b = x.shape[0]
      if b is None or b % k:
        raise ValueError("the per-replica batch (%s examples) is not divisible "
                         "by --num_accumulation_steps=%d" % (b, k))
      return tf.reshape(x, [k, b // k] + x.shape[1:].as_list())
    return tf.nest.map_structure(split, features)

  def _grads(self, features, totals):
    variables = self.model.trainable_variables
    with tf.GradientTape() as tape:
      if self.normalizer_fn is None:
        loss, metrics = self.compute_fn(features)
        loss = loss / float(self.num_accumulation_steps)
      else:
        loss, metrics = self.compute_fn(features, totals)
      if self.loss_scaling:
        loss = self.optimizer.scale_loss(loss)
    return tape.gradient(loss, variables), metrics

  def _replica_step(self, features):
    ctx = tf.distribute.get_replica_context()
    k = self.num_accumulation_steps
    variables = self.model.trainable_variables
    micro = self._micro_batches(features) if k > 1 else None
    totals = None
    if self.normalizer_fn is not None:
      if k > 1:
        per_micro = [self.normalizer_fn(tf.nest.map_structure(lambda x, i=i: x[i], micro))
                     for i in range(k)]
        totals = {n: tf.add_n([p[n] for p in per_micro]) for n in per_micro[0]}
      else:
        totals = self.normalizer_fn(features)
      totals = ctx.all_reduce(tf.distribute.ReduceOp.SUM, totals)

    if k == 1:
      grads, metrics = self._grads_fn(features, totals)
    else:
      grads, metrics = self._grads_fn(
          tf.nest.map_structure(lambda x: x[0], micro), totals)
      used = [i for i, g in enumerate(grads) if g is not None]

      def body(i, acc, msum):
        g, m = self._grads_fn(tf.nest.map_structure(lambda x: x[i], micro), totals)
        acc = [a + tf.convert_to_tensor(g[j]) for a, j in zip(acc, used)]
        return i + 1, acc, {n: msum[n] + m[n] for n in msum}

      _, acc, metrics = tf.while_loop(
          lambda i, *_: i < k, body,
          (tf.constant(1), [tf.convert_to_tensor(grads[j]) for j in used], metrics))
      grads = [None] * len(grads)
      for j, a in zip(used, acc):
        grads[j] = a

    pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
    reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                             [tf.convert_to_tensor(g) for g, _ in pairs])
    if self.clip_norm:
      threshold = float(self.clip_norm)
      if self.loss_scaling:
        threshold = threshold * tf.cast(self.optimizer.dynamic_scale, tf.float32)
      reduced, _ = tf.clip_by_global_norm(reduced, threshold)
    self.optimizer.apply(reduced, [v for _, v in pairs])
    return metrics

  # --- cross replica -----------------------------------------------------

  def _distribute(self, batch):
    """This worker's batch -> per-replica slices (plain iterators)."""
    n = local_replica_count(self.strategy)
    if n == 1:
      return self.strategy.experimental_distribute_values_from_function(
          lambda ctx: batch)

    def value_fn(ctx):
      i = ctx.replica_id_in_sync_group % n
      return tf.nest.map_structure(lambda x: tf.split(x, n, axis=0)[i], batch)
    return self.strategy.experimental_distribute_values_from_function(value_fn)

  def _one_step(self, iterator):
    batch = next(iterator)
    if not isinstance(iterator, tf.distribute.DistributedIterator):
      batch = self._distribute(batch)
    per_replica = self.strategy.run(self._replica_step, args=(batch,))
    return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
            for k, v in per_replica.items()}

  def _train_steps(self, iterator, num_steps, stop_flag):
    """``num_steps`` (>= 1) steps in one graph; the sums of their metrics.

    The step is traced ONCE, as the body of the loop: the metric counters
    (float32 scalars) travel as one vector whose length the first trace of
    the body fixes, so no step has to run before the loop to give the sums
    their structure (a second copy of the forward, backward and update
    graph, which doubled the time to trace and optimize the function:
    ~16 s more per run of MiniLM on one Zen 5 core, 2026-11-28). The first step
    always runs; before each later one the stop flag is read
    (SIGINT/SIGTERM: the loop ends at that step boundary).
    """
    keys = []

    def body(i, totals):
      step_sums = self._one_step(iterator)
      keys[:] = sorted(step_sums)
      packed = tf.stack([step_sums[k] for k in keys])
      return i + 1, packed + tf.pad(totals, [[0, len(keys) - tf.size(totals)]])

    def cond(i, totals):
      del totals
      return tf.logical_and(i < num_steps, tf.logical_or(
          tf.equal(i, 0), tf.logical_not(stop_flag.read_value())))

    _, totals = tf.while_loop(
        cond, body, (tf.constant(0), tf.zeros([0], tf.float32)),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None])))
    return {k: totals[j] for j, k in enumerate(keys)}

  def train(self, iterator, num_train_steps, manager=None, steps_per_loop=10,
            log_fn=None, examples_per_step=None, stop: Optional[StopRequest] = None,
            cadence: Optional[ProgressCadence] = None):
    """Trains until ``optimizer.iterations == num_train_steps``.

    Args:
      iterator: a distributed iterator (per-replica batches) or a plain
        ``tf.data`` iterator of this worker's batches (split over its
        replicas; batch size divisible by the local replica count).
      num_train_steps: the final global step (int); resumed runs continue
        from ``optimizer.iterations``.
      manager: optional ``tf.train.CheckpointManager``; ``save`` is called
        after every log line (it saves every ``checkpoint_interval`` steps)
        and at the end.
      steps_per_loop: the most steps per ``tf.function`` call (a host loop)
        and the steps between log lines (without ``cadence``).
      log_fn: ``log_fn(step, metrics_sums, seconds)`` at each log line: the
        sums and seconds of every step since the previous line.
      examples_per_step: global batch size, for the throughput figure.
      stop: an entered :class:`StopRequest`: when it is signalled, the loop
        under way ends after its current step, a checkpoint is saved at that
        step (``manager`` required) and :class:`Interrupted` is raised.
      cadence: when lines come and how long calls are
        (:class:`ProgressCadence`); default: a line every
        ``steps_per_loop`` steps and at least about every minute.

    Returns:
      the metric sums of the steps the last log line reported (dict of
      floats, ``steps`` among them), or {} if no step ran.

    Raises:
      Interrupted: ``stop`` was signalled (after the checkpoint is saved).
    """
    cadence = cadence or ProgressCadence(steps_per_loop)
    clock = cadence.clock
    last = {}
    step = int(self.optimizer.iterations.numpy())
    cadence.begin(step)
    span, span_steps, span_seconds = {}, 0, 0.0
    flag = stop.flag if stop is not None else self._no_stop()
    while step < num_train_steps and not (stop is not None and stop.requested):
      n = cadence.next_call(step, num_train_steps)
      start = clock()
      sums = self._step(iterator, tf.constant(n), flag)
      sums = {k: float(v) for k, v in sums.items()}
      seconds = clock() - start
      n = int(self.optimizer.iterations.numpy()) - step  # fewer when stopped
      step += n
      cadence.record(n, seconds)
      for k, v in sums.items():
        span[k] = span.get(k, 0.0) + v
      span_steps += n
      span_seconds += seconds
      if not (cadence.line_due(step, num_train_steps) or
              (stop is not None and stop.requested)):
        continue
      span["steps"] = float(span_steps)
      if examples_per_step:
        span["examples_per_second"] = span_steps * examples_per_step / max(span_seconds, 1e-9)
      last = span
      if log_fn is not None:
        log_fn(step, span, span_seconds)
      if manager is not None:
        manager.save(checkpoint_number=step, check_interval=True)
      cadence.line_done(step)
      span, span_steps, span_seconds = {}, 0, 0.0
    if manager is not None and step > 0:
      if manager.latest_checkpoint is None or not manager.latest_checkpoint.endswith(
          "-%d" % step):
        manager.save(checkpoint_number=step, check_interval=False)
    if stop is not None and stop.requested:
      raise Interrupted(step, stop.signum)
    return last

  def _no_stop(self):
    """A flag that is never set (training without a :class:`StopRequest`)."""
    if self._stop_flag is None:
      self._stop_flag = tf.Variable(False, trainable=False, name="stop_requested")
    return self._stop_flag


def seed_generator_states(model):
  """The state variables of every Keras ``SeedGenerator`` in ``model`` (dropout).

  Keras 3 keeps dropout's random state in ``seed_generator_state``
  variables that ``tf.train.Checkpoint(model=...)`` does not save (they are
  not tracked as checkpoint dependencies); put this list into the
  checkpoint so that a resumed run draws the same dropout masks.

  Returns:
    list of ``tf.Variable`` (int [2] each), in the model's layer order.
  """
  out = []
  for v in model.non_trainable_variables:
    if v.path.endswith("seed_generator_state"):
      out.append(v.value if hasattr(v, "value") and isinstance(
          v.value, tf.Variable) else v)
  return out


def _step_of(prefix: str) -> Optional[int]:
  """N of a ``.../ckpt-N`` prefix, or None."""
  tail = prefix.rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else None


def restore_latest(manager, warn_fn: Optional[Callable[[str], None]] = None,
                   repair: bool = True) -> Optional[str]:
  """Restores the newest WHOLE checkpoint of ``manager``; returns its path or None.

  The candidates are the checkpoints the directory's ``checkpoint`` state
  file lists, newest first (:func:`bert_tf.run_dir.listed_checkpoints`). One
  whose files are missing (deleted by hand) or do not read whole (a ``.data``
  file cut by a full disk or a killed copy: TensorFlow's reader raises
  ``IndexError: Read less bytes than requested``) costs only its own steps:
  it is skipped, and one line through ``warn_fn`` names it, the reason, the
  checkpoint resumed from and the steps trained again. Only a checkpoint
  whose every tensor reads and still fails to restore is a model that does
  not fit. (The original's ``TPUEstimator`` restored the state file's
  newest checkpoint only, and failed with a traceback.)

  Args:
    manager: a ``tf.train.CheckpointManager`` over the run directory.
    warn_fn: where the one warning line goes (None: ``absl.logging.warning``).
    repair: rewrite the state file without the skipped checkpoints, so a
      manager made after this call saves and sweeps on from the one
      restored (``manager`` keeps the list it read when it was made: the
      caller makes the one that saves next anew when the path returned is
      not ``manager.latest_checkpoint``). True on the chief; False on the
      other workers, which only read the chief's directory.

  Returns:
    the restored prefix (``DIR/ckpt-N``), or None when the state file lists
    no checkpoint (a new run).

  Raises:
    errors.CorruptCheckpointError: every listed checkpoint is missing or
      unreadable (names each and the fix).
    errors.CheckpointError: a readable checkpoint does not fit the model the
      flags build (names it and ``--bert_config_file``).
  """
  candidates = run_dir.listed_checkpoints(manager.directory)
  latest = manager.latest_checkpoint
  if latest and latest not in candidates:
    candidates.insert(0, latest)
  skipped = []
  for prefix in candidates:
    reason = (None if os.path.exists(prefix + ".index") else
              "is missing (no %s.index)" % os.path.basename(prefix))
    if reason is None:
      # expect_partial: a run that only evaluates or predicts restores no
      # input iterator, whose saved position is then left unused on purpose.
      try:
        manager.checkpoint.restore(prefix).assert_existing_objects_matched().expect_partial()
      except Exception as e:  # pylint: disable=broad-except
        # A failed restore leaves deferred restorations in the objects; the
        # next candidate's restore assigns every variable again.
        checkpoints.silence_unrestored_warnings()
        reason = checkpoints.unreadable_reason(prefix)
        if reason is None:
          if not isinstance(e, (ValueError, AssertionError, tf.errors.OpError)):
            raise
          raise errors.CheckpointError(
              "%s: the run's checkpoint does not fit the model the flags build "
              "(check --bert_config_file, or use a new --output_dir): %s"
              % (prefix, errors.first_line(e))) from None
        reason = "is truncated or unreadable (%s)" % reason
    if reason is not None:
      skipped.append((prefix, reason))
      continue
    if skipped:
      _report_skipped(skipped, prefix, warn_fn)
      if repair:
        _forget(manager.directory, [p for p, _ in skipped], prefix)
    logging.info("Resumed from %s", prefix)
    return prefix
  if skipped:
    raise errors.CorruptCheckpointError(
        "%s: no whole checkpoint to resume from: %s. Restore the files, or "
        "delete the checkpoint files and the 'checkpoint' file to train anew, "
        "or use a new --output_dir" % (manager.directory, "; ".join(
            "%s %s" % (p, r) for p, r in skipped)), path=skipped[0][0])
  return None


def _report_skipped(skipped, restored, warn_fn) -> None:
  """The one line about the checkpoints skipped on the way to ``restored``."""
  step = _step_of(restored)
  newest = max((_step_of(p) or 0) for p, _ in skipped)
  redo = ("steps %d-%d are trained again" % (step + 1, newest)
          if step is not None and newest > step else "no step is lost")
  line = ("warning: checkpoint %s; resuming from %s, the newest whole one: %s"
          % ("; ".join("%s %s" % (p, r) for p, r in skipped), restored, redo))
  (warn_fn or logging.warning)(line)


def _forget(directory: str, prefixes: Sequence[str], restored: str) -> None:
  """Rewrites the ``checkpoint`` state file of ``directory`` with
  ``restored`` as its newest checkpoint and without ``prefixes`` (their
  files stay for the user to look at; the next save at the same step
  replaces them).

  Through TensorFlow's public state-file functions
  (``tf.train.get_checkpoint_state``, ``tf.compat.v1.train.
  update_checkpoint_state``), as ``tf.train.CheckpointManager`` writes it:
  paths relative to the directory, each with its timestamp. A manager
  made before this call still holds the old list in memory: make the one
  that saves next after it (it reads the file when made).
  """
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return
  last = state.last_preserved_timestamp
  # The manager's list: entries newer than its last preserved checkpoint
  # (a state file without timestamps dates every entry to that one).
  stamps = list(state.all_model_checkpoint_timestamps) or [last] * len(
      state.all_model_checkpoint_paths)
  listed = [(p, t) for p, t in zip(state.all_model_checkpoint_paths, stamps) if t > last]
  kept = [(p, t) for p, t in listed if p not in prefixes and p != restored]
  kept.append((restored, dict(listed).get(restored, time.time())))
  root = os.path.abspath(directory)
  logger = tf.get_logger()
  level = logger.level
  logger.setLevel("ERROR")  # the v1 function's deprecation notice
  try:
    tf.compat.v1.train.update_checkpoint_state(
        root, os.path.relpath(restored, root),
        all_model_checkpoint_paths=[os.path.relpath(p, root) for p, _ in kept],
        all_model_checkpoint_timestamps=[t for _, t in kept],
        last_preserved_timestamp=last)
  finally:
    logger.setLevel(level)
