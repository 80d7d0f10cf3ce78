"""Length-bucket options of the LiteRT classifier export (issue 71): file
size, conversion time, memory and latency of each, float32 and int8.

  PYTHONPATH=bench .venv/bin/python bench/results/litert_buckets_2026-12-05/options.py build DIR
  PYTHONPATH=bench .venv/bin/python bench/results/litert_buckets_2026-12-05/options.py mem DIR
  PYTHONPATH=bench .venv/bin/python bench/results/litert_buckets_2026-12-05/options.py time DIR [none|dynamic_int8] [--raw]

all-MiniLM-L6-v2 classifier, seed-0 head (bench_serving_peers.py's), max_seq_length
128, exported by ``export.litert.export_litert`` with the option's
``BUCKETS`` and ``LiteOps.bucketed``:

* ``fixed16_32_64``: the export before issue 71 (buckets 16/32/64/128 for
  every batch: ``old_bucketed`` below, the code as it was);
* ``fixed_fine``: the same code, buckets 8/12/16/20/24/32/48/64/96;
* ``one16_32_64``, ``one16_24_...96`` (the export now), ``one_fine``: a
  batch of one [1, S] row at its own length, other batches on the buckets;
* ``dynamic_all``: every batch at its own length, one encoder subgraph; only
  with the attention bias written with ``tf.expand_dims`` (a change to
  ``bert_tf.modeling.layers.attention_bias_from_mask``, patched here):
  ``x[:, tf.newaxis, tf.newaxis, :]`` on a [B, L] mask with both dimensions
  unknown is a ``StridedSlice`` LiteRT has no builtin for.

``time``: the files of one precision and ONNX Runtime's model of the same
precision (``torch.onnx.export`` + ``quantize_dynamic`` for int8, as
bench_serving_peers.py builds them) side by side: batch 1 short (SQuAD v1.1
questions of 6-20 pieces), batch 1 x 128 tokens, batch 32 short; each
file's calls back to back, the order rotated each pass; medians in ms.
LiteRT through ``client.LiteRTSignature`` (the signature runner), or with
``--raw`` through :func:`raw_call` (what the runner costs).
"""
import gc
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

FINE = (8, 12, 16, 20, 24, 32, 48, 64, 96)
# name -> (bucketed implementation: "old" / "now" / "all", BUCKETS)
OPTIONS = {
    "fixed16_32_64": ("old", (16, 32, 64)),
    "fixed_fine": ("old", FINE),
    "one16_32_64": ("now", (16, 32, 64)),
    "one16_24_32_48_64_96": ("now", (16, 24, 32, 48, 64, 96)),
    "one_fine": ("now", FINE),
    "dynamic_all": ("all", ()),
}
QUANT = ("none", "dynamic_int8")


def old_bucketed(self, module, features, post=None):
  """``LiteOps.bucketed`` before issue 71 (commit c25f1cd), verbatim."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import base, litert  # pylint: disable=g-import-not-at-top
  seq = self.preprocessor.max_seq_length
  widths = [w for w in litert.BUCKETS if w < seq] + [seq]
  features, rows = self.at_least_one_row(features)
  longest = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=-1))

  def run(width):
    def branch():
      out = tf.cast(base.serving_call(module, {k: v[..., :width] for k, v in features.items()},
                                      skip_padding=False), tf.float32)
      return out if post is None else post(out, width)
    return branch
  out = run(widths[-1])
  for width in reversed(widths[:-1]):
    out = (lambda w, rest: lambda: tf.cond(longest <= w, run(w), rest))(width, out)
  return out()[:rows]


def all_bucketed(self, module, features, post=None):
  """Every batch at its own width: one IF branch fed the cut features."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import base  # pylint: disable=g-import-not-at-top
  features, rows = self.at_least_one_row(features)
  width = tf.maximum(1, tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=-1)))
  cut = {k: tf.slice(v, [0, 0], tf.stack([-1, width])) for k, v in features.items()}
  run = lambda: tf.cast(base.serving_call(module, cut, skip_padding=False), tf.float32)
  return tf.cond(width > 0, run, run)[:rows]


def patch_attention_bias():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import layers  # pylint: disable=g-import-not-at-top

  def bias(input_mask):
    mask = tf.cast(input_mask, tf.float32)
    return tf.expand_dims(tf.expand_dims((1.0 - mask) * -10000.0, 1), 1)
  layers.attention_bias_from_mask = bias


def build_model():
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import checkpoints, preprocessing  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import models, presets  # pylint: disable=g-import-not-at-top
  from bert_tf.tools.minilm_dir import minilm_dir  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  mdir = minilm_dir()
  model = models.build_classifier(checkpoints.read_hf_config(mdir), 2)
  presets.load_encoder_weights(model.encoder, mdir)
  return model, preprocessing.BertPreprocessor(os.path.join(mdir, "vocab.txt"), True, 128), mdir


def build_one(out, name):
  """One option's two files (a fresh process each: the patches stay in it)."""
  from bert_tf.export import litert  # pylint: disable=g-import-not-at-top
  impl, buckets = OPTIONS[name]
  if impl == "old":
    litert.LiteOps.bucketed = old_bucketed
  elif impl == "all":
    patch_attention_bias()
    litert.LiteOps.bucketed = all_bucketed
  litert.BUCKETS = buckets
  model, pre, _ = build_model()
  rows = {}
  for q in QUANT:
    t = time.perf_counter()
    d = litert.export_litert("classifier", model, pre, os.path.join(out, name, q),
                             labels=["0", "1"], quantize=q, task_name="sst-2")
    path = os.path.join(d, litert.MODEL_FILE)
    rows[q] = {"path": path, "convert_s": time.perf_counter() - t,
               "size_mb": os.path.getsize(path) / 1e6, "load": os.getloadavg()[0]}
  return rows


def build_onnx(out):
  """ONNX Runtime's float32 and int8 classifiers (bench_serving_peers.build_peers)."""
  import bench_serving_peers as bsp  # pylint: disable=g-import-not-at-top
  model, _, mdir = build_model()
  heads = {"cls": [model.classifier.output_weights.numpy(), model.classifier.output_bias.numpy()],
           "qa": [np.zeros([2, 384], np.float32), np.zeros([2], np.float32)]}
  onnx = bsp.build_peers(mdir, out, heads, 12, 384)["onnx"]
  return {"none": onnx[("cls", False, False)], "dynamic_int8": onnx[("cls", False, True)]}


def memory(path):
  """(load s, first call ms, RSS MB added after load and after calls at every width)."""
  code = ("import os, time, numpy as np\n"
          "from bert_tf.export import client\n"
          "rss = lambda: int(dict(l.split(':', 1) for l in open('/proc/self/status'))"
          "['VmRSS'].split()[0]) / 1024\n"
          "r0 = rss(); t = time.perf_counter(); sig = client.LiteRTSignature(%r, num_threads=2)\n"
          "load = time.perf_counter() - t; r1 = rss(); t = time.perf_counter()\n"
          "sig(text=np.array([b'what is the name of the river?'], dtype=object))\n"
          "first = time.perf_counter() - t\n"
          "for b in (1, 2):\n"
          "  for w in range(1, 130, 3): sig(text=np.array([b'x ' * w] * b, dtype=object))\n"
          "print(load, first * 1e3, r1 - r0, rss() - r0)\n" % path)
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True, cwd=ROOT).stdout.split()
  return [float(x) for x in out[-4:]]


def raw_call(path):
  """A call through the interpreter (its first graph, this file's one
  signature) that resizes and reallocates only when the batch size changes:
  ``SignatureRunner`` allocates on every call, and with a string input (a
  dynamic tensor) that prepares every graph again, each IF's branches too."""
  from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
  from bert_tf.export import client  # pylint: disable=g-import-not-at-top
  interp = litert.InterpreterWithCustomOps(custom_op_registerers=client.litert_registrars(),
                                           model_path=path, num_threads=2)
  runner = interp.get_signature_runner()
  text = runner.get_input_details()["text"]["index"]
  logits = runner.get_output_details()["logits"]["index"]
  shape = [None]

  def call(batch):
    if shape[0] != len(batch):
      interp.resize_tensor_input(text, [len(batch)])
      interp.allocate_tensors()
      shape[0] = len(batch)
    interp.set_tensor(text, np.array([t.encode() for t in batch], dtype=object))
    interp.invoke()
    return interp.get_tensor(logits)
  return call


def inputs(tok):
  import bench_serving_peers as bsp  # pylint: disable=g-import-not-at-top
  data = os.path.join(ROOT, "data")
  qs, _ = bsp.read_squad([os.path.join(data, "squad_v1", n) for n in ("dev.json", "train.json")])
  short = [q for q, i in zip(qs, tok(qs)["input_ids"]) if 6 <= len(i) <= 20]
  longs = bsp.long_texts(bsp.read_sentences(os.path.join(data, "movie_review_sentences",
                                                         "dev.tsv")), tok, 34, 128)
  return {"batch 1 short": [[q] for q in short[:100]], "batch 1 x 128": [[t] for t in longs],
          "batch 32 short": [short[i * 32:(i + 1) * 32] for i in range(6)]}


def time_files(files, onnx_path, passes=3, raw=False):
  """{case: {name: median ms}} of every file and ORT side by side."""
  import bench_serving_peers as bsp  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from bert_tf.export import client  # pylint: disable=g-import-not-at-top
  from bert_tf.tools.minilm_dir import minilm_dir  # pylint: disable=g-import-not-at-top
  tok = transformers.BertTokenizerFast.from_pretrained(minilm_dir())
  sess = bsp.ort_session(onnx_path, 2)

  def ort(batch):
    enc = tok(batch, padding=True, truncation=True, max_length=128, return_tensors="np")
    return sess.run(["logits"], {k: enc[k] for k in ("input_ids", "attention_mask",
                                                     "token_type_ids")})[0]
  calls = {"ORT": ort}
  for name, path in files.items():
    calls[name] = raw_call(path) if raw else (
        lambda b, sig=client.LiteRTSignature(path, num_threads=2): sig(
            text=np.array([t.encode() for t in b], dtype=object))["logits"])
  names, cases = list(calls), inputs(tok)
  diff = {n: 0.0 for n in names}
  for xs in cases.values():  # warm-up; every LiteRT option's logits vs the first's
    for x in xs:
      first = calls[names[1]](x)
      for n in names[2:]:
        diff[n] = max(diff[n], float(np.abs(calls[n](x) - first).max()))
  times = {}
  for case, xs in cases.items():
    for i in range(passes):
      for n in names[i % len(names):] + names[:i % len(names)]:
        gc.collect()
        for x in xs:
          t = time.perf_counter()
          calls[n](x)
          times.setdefault(case, {}).setdefault(n, []).append(time.perf_counter() - t)
  return {c: {n: 1e3 * statistics.median(v) for n, v in d.items()} for c, d in times.items()}, diff


def main(argv):
  what, out = argv[1], argv[2]
  index = os.path.join(out, "files.json")
  if what == "build_one":
    print(json.dumps(build_one(out, argv[3])))
    return
  if what == "build":
    os.makedirs(out, exist_ok=True)
    files = {"onnx": build_onnx(out)}
    for name in OPTIONS:
      res = subprocess.run([sys.executable, __file__, "build_one", out, name], check=True,
                           capture_output=True, text=True, cwd=ROOT)
      files[name] = json.loads(res.stdout.strip().splitlines()[-1])
      print(name, {q: (round(r["convert_s"], 1), round(r["size_mb"], 2), round(r["load"], 2))
                   for q, r in files[name].items()}, flush=True)
    with open(index, "w") as f:
      json.dump(files, f, indent=1)
    return
  with open(index) as f:
    files = json.load(f)
  if what == "mem":
    for name in OPTIONS:
      for q in QUANT:
        print(name, q, "load %.2f s, first call %.0f ms, RSS +%.0f MB loaded, +%.0f MB after "
              "calls at every width" % tuple(memory(files[name][q]["path"])), flush=True)
    return
  q = argv[3] if len(argv) > 3 else "none"
  raw = "--raw" in argv
  load = os.getloadavg()[0]
  med, diff = time_files({n: files[n][q]["path"] for n in OPTIONS}, files["onnx"][q], raw=raw)
  print("%s%s; load %.2f at the start, %.2f at the end; max |logit diff| vs %s: %s" % (
      q, " (raw_call)" if raw else "", load, os.getloadavg()[0], list(OPTIONS)[0], diff))
  print("| case | ORT | " + " | ".join(OPTIONS) + " |")
  print("|---|---|" + "---|" * len(OPTIONS))
  for case, d in med.items():
    print("| %s | %.2f | " % (case, d["ORT"]) + " | ".join(
        "%.2f (%.2fx)" % (d[n], d[n] / d["ORT"]) for n in OPTIONS) + " |")


if __name__ == "__main__":
  main(sys.argv)
