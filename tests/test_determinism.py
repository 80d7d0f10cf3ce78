"""training.enable_determinism: results independent of the CPUs a process gets.

A resumed run must compute bit for bit what the uninterrupted run computed,
also when it starts with another CPU allotment (``taskset``, a container's
cpuset). TensorFlow sizes its intra-op pool from the process's CPU affinity,
and CPU reductions (here a oneDNN/Eigen MatMul with a long inner dimension)
are blocked by that pool size; ``enable_determinism`` fixes the pool size.

The probe runs with ``TF_ENABLE_ONEDNN_OPTS=0`` (Eigen's MatMul, whose
contraction is blocked by the pool size on every CPU): oneDNN's MatMul gave
the same bits for 1 and 2 threads on one machine (Xeon with AMX, 2026-11-24)
and different bits on another, which made the negative control below
machine-dependent.
"""

import os
import subprocess
import sys

import pytest

from conftest import ALL_CPUS, ROOT

# Sets the CPU affinity BEFORE TensorFlow starts, then prints a digest of a
# MatMul whose inner dimension (2048) is split by the thread pool.
_PROBE = """
import hashlib, os, sys
cpus, pin = sys.argv[1], sys.argv[2]
os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
import numpy as np
import tensorflow as tf
from bert_tf import training
if pin != "none":
  training.enable_determinism(7, int(pin))
x = tf.constant(np.random.RandomState(0).standard_normal([512, 2048]).astype(np.float32))
y = tf.constant(np.random.RandomState(1).standard_normal([2048, 64]).astype(np.float32))
print("digest", hashlib.sha256(tf.matmul(x, y).numpy().tobytes()).hexdigest())
"""


def _digest(cpus, pin):
  out = subprocess.run([sys.executable, "-c", _PROBE, cpus, pin], cwd=ROOT,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                TF_ENABLE_ONEDNN_OPTS="0"),
                       capture_output=True, text=True, timeout=300, check=True)
  return [l for l in out.stdout.splitlines() if l.startswith("digest")][-1]


@pytest.mark.slow  # 9-16 s (process start-ups / a reference run): full suite only, keeps the fast loop < 5 min
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_fixed_intra_op_pool_makes_results_independent_of_cpu_affinity():
  cpus = ALL_CPUS  # the machine's, not this test worker's share (conftest)
  one = str(cpus[0])
  pinned_all = _digest(",".join(map(str, cpus)), "2")
  assert _digest(one, "2") == pinned_all  # 1 CPU allowed, same 2-thread blocking
  if len(cpus) >= 2:
    # The probe is sensitive: without the fixed pool, a 1-CPU process gets a
    # 1-thread pool and other bits (the resume failure this guards against).
    assert _digest(one, "none") != pinned_all


def test_enable_determinism_refuses_a_late_different_pool_size():
  probe = """
import tensorflow as tf
from bert_tf import training
n = training.enable_determinism(3, 2)
assert n == 2 and tf.config.threading.get_intra_op_parallelism_threads() == 2
tf.constant(1.0) + 1.0  # the runtime starts
assert training.enable_determinism(3, 2) == 2  # same size: fine
try:
  training.enable_determinism(3, 3)
except RuntimeError as e:
  print("refused:", e)
try:
  training.enable_determinism(3, 0)
except ValueError as e:
  print("bad:", e)
"""
  out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "refused: enable_determinism(intra_op_threads=3)" in out.stdout
  assert "bad: intra_op_threads must be >= 1" in out.stdout


_ONEDNN_PROBE = """
import sys
sys.argv = ["tool"] + sys.argv[1:]
from bert_tf.tools import _startup
_startup.setup(tensorflow=True)
from bert_tf import training
print("onednn", training.onednn_enabled())
"""


def _onednn_in_tool(*args):
  out = subprocess.run([sys.executable, "-c", _ONEDNN_PROBE] + list(args), cwd=ROOT,
                       env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1"),
                       capture_output=True, text=True, timeout=300, check=True)
  return [l for l in out.stdout.splitlines() if l.startswith("onednn")][-1]


@pytest.mark.slow  # 9-16 s (process start-ups / a reference run): full suite only, keeps the fast loop < 5 min
def test_deterministic_flag_turns_onednn_off_before_tensorflow_loads():
  # oneDNN runs a primitive on one thread when it is called on an intra-op
  # pool thread, which happens by timing: its reductions are not
  # reproducible run to run. A tool given --deterministic loads TensorFlow
  # with Eigen's kernels, even over an explicit TF_ENABLE_ONEDNN_OPTS=1.
  assert _onednn_in_tool("--deterministic", "--seed=3") == "onednn False"
  assert _onednn_in_tool("--deterministic=true") == "onednn False"
  default = _onednn_in_tool()
  assert _onednn_in_tool("--deterministic=false") == default
  assert _onednn_in_tool("--nodeterministic") == default
  import platform  # pylint: disable=g-import-not-at-top
  if platform.machine() in ("x86_64", "AMD64"):
    assert default == "onednn True"  # the probe can tell (oneDNN is TF's x86 default)
