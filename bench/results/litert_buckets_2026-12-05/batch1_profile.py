"""Where a batch-1 short call's time goes, LiteRT vs ONNX Runtime (issue 71).

  PYTHONPATH=bench .venv/bin/python bench/results/litert_buckets_2026-12-05/batch1_profile.py OPTIONS_DIR

OPTIONS_DIR: what ``options.py build`` wrote (its files.json). LiteRT's
Python API has no op profiler, so the call is taken apart by timing pieces,
batch 1, 2 threads, medians of 200 calls each (4 rounds of 10 untimed
and 50 timed calls back to back, the pieces in turn):

* the whole call through ``client.LiteRTSignature`` and through the bare
  signature runner (the client's checks are Python);
* the tokenizer alone: the ``preprocessor`` export (same FastBertTokenizer and
  dense packing, no model);
* the encoder alone on ids at fixed widths (``encoder`` exports of the same
  weights, float32 and int8: ``max_seq_length`` = width);
* the own-length branch replanning: one question repeated vs two of
  different lengths alternated (each call a new width);
* ONNX Runtime: the fast tokenizer alone, ``session.run`` alone on its ids.
"""
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

WIDTHS = (8, 12, 16, 20, 24, 32, 64, 128)
OPTION = "one16_24_32_48_64_96"


def export_pieces(out):
  """{(kind, quantize, width): path}: the preprocessor and encoder exports."""
  import options  # pylint: disable=g-import-not-at-top
  from bert_tf.export import litert  # pylint: disable=g-import-not-at-top
  model, pre, _ = options.build_model()
  paths = {}
  path = litert.export_litert("preprocessor", None, pre, os.path.join(out, "pre"))
  paths[("pre", "none", 128)] = os.path.join(path, litert.MODEL_FILE)
  for q in options.QUANT:
    for w in WIDTHS:
      path = litert.export_litert("encoder", model.encoder, None,
                                  os.path.join(out, "enc_%s_%d" % (q, w)), quantize=q,
                                  max_seq_length=w)
      paths[("enc", q, w)] = os.path.join(path, litert.MODEL_FILE)
  return paths


def interleaved(calls, n=200, rounds=4, warm=10):
  """{name: median ms}: each of ``calls`` {name: f()} in turn, n/rounds
  timed calls back to back after ``warm`` untimed ones (the previous
  runtime's threads spin down meanwhile)."""
  times = {k: [] for k in calls}
  for _ in range(rounds):
    for k, f in calls.items():
      for _ in range(warm):
        f()
      for _ in range(n // rounds):
        t = time.perf_counter()
        f()
        times[k].append(time.perf_counter() - t)
  return {k: 1e3 * statistics.median(v) for k, v in times.items()}


def main(opt_dir):
  import transformers  # pylint: disable=g-import-not-at-top
  import bench_serving_peers as bsp  # pylint: disable=g-import-not-at-top
  from bert_tf.export import client  # pylint: disable=g-import-not-at-top
  from bert_tf.tools.minilm_dir import minilm_dir  # pylint: disable=g-import-not-at-top
  with open(os.path.join(opt_dir, "files.json")) as f:
    files = json.load(f)
  index = os.path.join(opt_dir, "pieces.json")
  if not os.path.exists(index):
    with open(index, "w") as f:
      json.dump({"|".join(map(str, k)): v for k, v in export_pieces(
          os.path.join(opt_dir, "pieces")).items()}, f)
  with open(index) as f:
    pieces = {tuple(int(x) if x.isdigit() else x for x in k.split("|")): v
              for k, v in json.load(f).items()}
  tok = transformers.BertTokenizerFast.from_pretrained(minilm_dir())
  q = "What is the name of the river that runs through Paris?"  # 14 pieces
  q2 = "Who wrote it?"
  print("load %.2f; question: %d word pieces with [CLS]/[SEP]" % (
      os.getloadavg()[0], len(tok(q)["input_ids"])))
  text = np.array([q.encode()], dtype=object)
  for quant in ("none", "dynamic_int8"):
    calls = {}
    for name in ("fixed16_32_64", OPTION):
      sig = client.LiteRTSignature(files[name][quant]["path"], num_threads=2)
      calls[name + " client"] = lambda sig=sig: sig(text=text)
      calls[name + " runner"] = lambda r=sig.runner: r(text=text)
    alt = [np.array([q.encode()], dtype=object), np.array([q2.encode()], dtype=object)]
    state = [0]

    def alternate(r=sig.runner):  # pylint: disable=dangerous-default-value
      state[0] ^= 1
      return r(text=alt[state[0]])
    calls[OPTION + " runner, 14 / 6 pieces alternated"] = alternate
    calls[OPTION + " runner, 6 pieces repeated"] = lambda r=sig.runner: r(text=alt[1])
    pre = client.LiteRTSignature(pieces[("pre", "none", 128)], num_threads=2).runner
    calls["tokenizer + packing alone (preprocessor export)"] = lambda: pre(text=text)
    for w in WIDTHS:
      r = client.LiteRTSignature(pieces[("enc", quant, w)], num_threads=2).runner
      ids = {k: np.ones([1, w], np.int32) for k in r.get_input_details()}
      calls["encoder alone, width %d" % w] = lambda r=r, ids=ids: r(**ids)
    sess = bsp.ort_session(files["onnx"][quant], 2)
    enc = tok([q], return_tensors="np")
    feed = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    calls["ORT: fast tokenizer alone"] = lambda: tok([q], padding=True, truncation=True,
                                                     max_length=128, return_tensors="np")
    calls["ORT: session.run alone (14 pieces)"] = lambda: sess.run(["logits"], feed)
    for k, v in interleaved(calls).items():
      print("| %s | %s | %.3f |" % (quant, k, v))
  print("load %.2f at the end" % os.getloadavg()[0])


if __name__ == "__main__":
  main(sys.argv[1])
