"""Batch-1 serving's floor: the encoder's weight matmuls at a few rows, kernel by kernel.

Issue 24 item 2 asks for serving at or below ONNX Runtime at batch 1 with a
short question (~12 word pieces). At that size a call is bound by the
weight matmuls: every call multiplies a handful of rows by all ~42 MB of an
all-MiniLM-L6-v2 encoder's float32 block weights. This script times exactly
that work and nothing else, on every matmul kernel the runtimes in
``bench/bench_serving_peers.py`` reach, so the part of the gap that is the
kernels' (not our graph's) can be read off one table:

* ``TF XLA``: ``tf.function(jit_compile=True)``; XLA's CPU backend (TF 2.21:
  its dots run in YNNPACK kernels, ``ynn::dot_fp32_*`` under ``perf``). What
  ``tools/export_saved_model.py --xla`` serves small requests with.
* ``TF graph, variables``: ``tf.function``, the weights ``tf.Variable`` (what
  every export holds); oneDNN's MatMul.
* ``TF graph, constants``: the same with the weights as ``Const`` nodes
  (``tf.constant`` in the traced function); oneDNN then keeps its reordered
  copy of a constant weight between calls.
* ``ORT MLAS``: ONNX Runtime 1.32 on an ONNX graph of the same MatMuls, the
  weights as initializers (MLAS prepacks them once at session load).
* ``torch``: ``x @ w`` under ``torch.inference_mode()``.

The work per call, for each of the 6 blocks: ``h [M, 384] @ qkv [384, 1152]``,
its first 384 columns ``@ out [384, 384]``, ``@ ff1 [384, 1536]``,
``@ ff2 [1536, 384]`` -> next ``h`` (the MiniLM block shapes; attention,
biases, LayerNorm and GELU left out). ``M`` = tokens of the request. Same
random weights (seed 0) everywhere; outputs checked against numpy float64
(relative max error printed). Each runtime makes its calls back to back,
in 4 blocks of ``--calls / 4`` with the order of runtimes rotated at each
block, ``--threads`` intra-op threads each (TensorFlow, ORT, torch).
Alternating call by call instead was tried and dropped: torch's OpenMP
workers spin after each call and the runtime called next lost up to 2x
(TF XLA at M=8: 7.5 ms alternating against 3.2-4.2 ms alone).

Columns: median ms per call; GFLOP/s (2 * M * 10.6 M weights / time); GB/s
of weight bytes read (42.5 MB float32, 21.2 MB bfloat16 / time). With
``--bf16``: also bfloat16 weights for TF graph (constants) and torch
(reported where the CPU has bf16 units; elsewhere emulated and slow).

  .venv/bin/python bench/small_matmul_rates.py [--rows=8,16,32,128] [--calls=200]

Needs ``pip install --no-deps -r bench/requirements.txt`` (onnx,
onnxruntime) and torch. Needs idle cores.
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _cpuinfo import cpu_line  # pylint: disable=wrong-import-position

HIDDEN, FF, LAYERS = 384, 1536, 6
SHAPES = ((HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, FF), (FF, HIDDEN))
WEIGHTS = LAYERS * sum(a * b for a, b in SHAPES)  # 10.6 M
PASSES = 4  # blocks of calls per runtime and M


def reference(x, ws):
  """The chain in float64 numpy: x [M, 384], ws the 4 * LAYERS matrices."""
  h = x.astype("float64")
  for l in range(LAYERS):
    q = h @ ws[4 * l]
    h = ((q[:, :HIDDEN] @ ws[4 * l + 1]) @ ws[4 * l + 2]) @ ws[4 * l + 3]
  return h


def tf_runners(ws, bf16):
  """{name: f(x numpy) -> numpy} for the TensorFlow kernels."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def chain(get):
    def f(x):
      h = x
      for l in range(LAYERS):
        q = tf.matmul(h, get(4 * l))
        h = tf.matmul(tf.matmul(tf.matmul(q[:, :HIDDEN], get(4 * l + 1)),
                                get(4 * l + 2)), get(4 * l + 3))
      return h
    return f

  variables = [tf.Variable(w) for w in ws]
  out = {
      "TF XLA": tf.function(chain(lambda i: variables[i]), jit_compile=True),
      "TF graph, variables": tf.function(chain(lambda i: variables[i])),
      "TF graph, constants": tf.function(chain(lambda i: tf.constant(ws[i]))),
  }
  if bf16:
    out["TF graph, constants, bf16"] = tf.function(
        lambda x: tf.cast(chain(lambda i: tf.cast(tf.constant(ws[i]), tf.bfloat16))(
            tf.cast(x, tf.bfloat16)), tf.float32))
  return {name: (lambda f: lambda x: f(tf.constant(x)).numpy())(f)
          for name, f in out.items()}


def ort_runner(ws, threads, work):
  """ONNX Runtime on the chain as an ONNX graph (weights as initializers)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import onnx  # pylint: disable=g-import-not-at-top
  from onnx import helper, numpy_helper, TensorProto  # pylint: disable=g-import-not-at-top
  from bench_serving_peers import ort_session  # pylint: disable=g-import-not-at-top
  inits = [numpy_helper.from_array(w, "w%d" % i) for i, w in enumerate(ws)]
  inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (
      ("starts", [0]), ("ends", [HIDDEN]), ("axes", [1]))]
  nodes, h = [], "x"
  for l in range(LAYERS):
    names = ["l%d_%s" % (l, s) for s in ("q", "qs", "o", "f1", "h")]
    nodes += [helper.make_node("MatMul", [h, "w%d" % (4 * l)], [names[0]]),
              helper.make_node("Slice", [names[0], "starts", "ends", "axes"], [names[1]]),
              helper.make_node("MatMul", [names[1], "w%d" % (4 * l + 1)], [names[2]]),
              helper.make_node("MatMul", [names[2], "w%d" % (4 * l + 2)], [names[3]]),
              helper.make_node("MatMul", [names[3], "w%d" % (4 * l + 3)], [names[4]])]
    h = names[4]
  graph = helper.make_graph(
      nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", HIDDEN])],
      [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["M", HIDDEN])], inits)
  model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
  path = os.path.join(work, "chain.onnx")
  onnx.save(model, path)
  sess = ort_session(path, threads)
  return {"ORT MLAS": lambda x: sess.run(None, {"x": x})[0]}


def torch_runners(ws, bf16):
  import torch  # pylint: disable=g-import-not-at-top

  def make(dtype):
    tw = [torch.from_numpy(w).to(dtype) for w in ws]

    def f(x):
      with torch.inference_mode():
        h = torch.from_numpy(x).to(dtype)
        for l in range(LAYERS):
          q = h @ tw[4 * l]
          h = ((q[:, :HIDDEN] @ tw[4 * l + 1]) @ tw[4 * l + 2]) @ tw[4 * l + 3]
        return h.float().numpy()
    return f

  out = {"torch": make(torch.float32)}
  if bf16:
    out["torch, bf16"] = make(torch.bfloat16)
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--rows", default="8,16,32,128", help="M values (tokens per call)")
  ap.add_argument("--calls", type=int, default=200, help="timed calls per runtime and M")
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--bf16", action="store_true", help="also bfloat16 weights (TF, torch)")
  args = ap.parse_args()

  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import onnxruntime  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  torch.set_num_threads(args.threads)

  rng = np.random.default_rng(0)
  ws = [(rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
        for _ in range(LAYERS) for s in SHAPES]
  with tempfile.TemporaryDirectory() as work:
    runners = {}
    runners.update(tf_runners(ws, args.bf16))
    runners.update(ort_runner(ws, args.threads, work))
    runners.update(torch_runners(ws, args.bf16))
    names = list(runners)
    print(cpu_line())
    print("small_matmul_rates: MiniLM block weight chain (L=%d, H=%d, FF=%d; %.1f M weights, "
          "%.1f MB float32); TF %s, onnxruntime %s, torch %s; %d intra-op threads; "
          "%d calls per cell in 4 blocks, runtimes rotated; load average %.1f"
          % (LAYERS, HIDDEN, FF, WEIGHTS / 1e6, WEIGHTS * 4 / 1e6, tf.__version__,
             onnxruntime.__version__, torch.__version__, args.threads, args.calls,
             os.getloadavg()[0]))
    print("| M (tokens) | kernel | median ms | p90 ms | GFLOP/s | weight GB/s | rel. error |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for m in (int(v) for v in args.rows.split(",")):
      x = rng.standard_normal((m, HIDDEN)).astype(np.float32)
      ref = reference(x, ws)
      err = {}
      for name, f in runners.items():
        got = f(x)
        err[name] = float(np.abs(got - ref).max() / np.abs(ref).max())
        for _ in range(5):
          f(x)
      times = {n: [] for n in names}
      for i in range(PASSES):
        k = i % len(names)
        for name in names[k:] + names[:k]:
          for _ in range(args.calls // PASSES):
            t0 = time.perf_counter()
            runners[name](x)
            times[name].append(time.perf_counter() - t0)
      for name in names:
        t = sorted(times[name])
        med = statistics.median(t)
        nbytes = WEIGHTS * (2 if "bf16" in name else 4)
        print("| %d | %s | %.2f | %.2f | %.0f | %.1f | %.1e |" % (
            m, name, med * 1e3, t[int(0.9 * (len(t) - 1))] * 1e3,
            2 * m * WEIGHTS / med / 1e9, nbytes / med / 1e9, err[name]), flush=True)


if __name__ == "__main__":
  main()
