"""SQuAD side by side: bert_tf vs Hugging Face transformers, same recipe.

Fine-tunes the real all-MiniLM-L6-v2 on SQuAD with ONE recipe, per seed
(``--seeds 1,2,3``), on both sides:

* ``transformers.BertForQuestionAnswering`` (CPU PyTorch): AdamW (eps 1e-6,
  decay 0.01 without LayerNorm/biases), linear warm-up over 10% then decay
  to 0, clipping 1.0, dropout 0.1; HF's ``run_qa.py`` preprocessing
  (``truncation="only_second"``, ``stride``, overflowing tokens + offsets,
  padded to ``max_seq_length``, answer outside a window at [CLS]) and
  ``utils_qa.postprocess_qa_predictions`` (n-best 20, max answer 30, v2: no
  answer when the null score beats the best span by more than 0). An epoch
  is one shuffled pass over the windows, last partial batch kept.
* ``tools/run_squad.py`` with the original's flags: its windows, its
  ``int(questions / batch * epochs)`` steps (``--ours_epochs_over=features``:
  HF's count over windows), ``AdamWeightDecay`` (``--ours_optimizer=adamw``:
  bias-corrected) and ``write_predictions``.

Kept recipe differences (each side runs its standard pipeline): HF's
``stride`` is the OVERLAP of windows, the original's ``doc_stride`` the STEP
(both get ``--doc_stride``); HF keeps the whole question (the original cuts
it to 64); the step counts (both printed).

Both sides' ``predictions.json`` are scored by
:func:`bert_tf.squad_metrics.evaluate_file` (the official formulas); v2's
headline EM/F1 are the predictions as written, ``best_exact``/``best_f1``
(threshold search over ``null_odds``) go to the JSON. Table
(``bench/_sidebyside.py``): F1 per seed, then mean, sample sd and min..max
of F1 and EM (and v2's best F1) per side.

Data: ``--version 1``: ``../shared/data/squad_v1/`` (17,991 train questions;
seq 384, doc_stride 128, 2 epochs, lr 5e-5, batch 32); ``--version 2``:
``../shared/data/squad_v2_disfl/`` (6 epochs). ``--max_train_questions`` /
``--max_dev_questions`` take the first N questions for both sides. Records:
``bench/results/bench_squad/``; runs go to ``--output`` (JSON; ``--which`` /
``--seeds`` split a comparison, ``--merge a.json,b.json`` joins).

Run by hand (hours on 2 cores; needs ``tools/setup.sh --test``)::

  .venv/bin/python bench/bench_squad.py --version 1             # 3 seeds, both
  .venv/bin/python bench/bench_squad.py --version 2
  .venv/bin/python bench/bench_squad.py --max_train_questions 64 --max_dev_questions 32 \\
      --max_seq_length 128 --doc_stride 64 --epochs 1 --seeds 1   # smoke test
"""

import argparse
import collections
import json
import math
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time

from _sidebyside import finish, hf_optimizer, minilm_dir, resume_flags, run_seeds, start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
VERSION_DATA = {1: "squad_v1", 2: "squad_v2_disfl"}
VERSION_EPOCHS = {1: 2, 2: 6}


# ---------------------------------------------------------------- helpers


def subset_squad(src, dst, max_questions):
  """Writes the first ``max_questions`` questions of ``src`` (file order,
  articles and paragraphs kept) to ``dst``; returns the question count."""
  with open(src, encoding="utf-8") as f:
    data = json.load(f)
  left = max_questions if max_questions else float("inf")
  articles, n = [], 0
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
  with open(dst, "w", encoding="utf-8") as f:
    json.dump(dict(data, data=articles), f)
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
  # Fractions, as the other benches' metrics (the table prints percents).
  return {k: float(v) / (1 if k.endswith("thresh") else 100) for k, v in res.items()
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
         "--seed=%d" % seed, "--output_dir=%s" % out_dir,
         "--optimizer=%s" % args.ours_optimizer,
         "--epochs_over=%s" % args.ours_epochs_over,
         "--save_checkpoints_steps=%d" % args.save_checkpoints_steps]
  if args.version == 2:
    cmd += ["--version_2_with_negative",
            "--null_score_diff_threshold=%g" % args.null_score_diff_threshold]
  print("ours: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
  start = time.time()
  counts = {}
  with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, env=dict(
      os.environ, TF_NUM_INTRAOP_THREADS=str(args.threads)),
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
  results = os.path.join(out_dir, "eval_results.txt")  # the trained step count
  if os.path.exists(results):
    with open(results, encoding="utf-8") as f:
      res["steps"] = int(float(dict(l.split(" = ") for l in f.read().splitlines())
                               .get("global_step", res.get("steps", 0))))
  res.setdefault("steps", 0)
  return res


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--version", type=int, choices=(1, 2), default=1,
                 help="1: squad_v1 (SQuAD v1.1 format), 2: squad_v2_disfl (v2.0)")
  p.add_argument("--data_dir", default=None, help="default ../shared/data/squad_v1 or _v2_disfl")
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
  p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch's and TF's")
  p.add_argument("--ours_optimizer", default="adamw_original",
                 choices=("adamw_original", "adamw"),
                 help="tools/run_squad.py --optimizer (adamw: bias-corrected, as torch's "
                      "AdamW; the issue-22 runs used it)")
  p.add_argument("--ours_epochs_over", default="examples", choices=("examples", "features"),
                 help="tools/run_squad.py --epochs_over: the original's step count over "
                      "questions, or HF's over windows (the issue-22 runs)")
  p.add_argument("--output", default="/tmp/bench_squad.json")
  p.add_argument("--merge", default=None, help="Comma-separated results files of one "
                 "recipe: print their joined table, write it to --output, run nothing.")
  resume_flags(p)
  args = p.parse_args()
  if args.epochs is None:
    args.epochs = VERSION_EPOCHS[args.version]
  if args.epochs != int(args.epochs):
    p.error("--epochs: whole epochs only (the HF loop counts passes)")
  args.epochs = int(args.epochs)
  lines, results = start(args, "f1", "F1")
  results["also"] = [["exact_match", "EM"]] + ([["best_f1", "best F1"]] if args.version == 2
                                               else [])
  data_dir = args.data_dir or os.path.join(SHARED_DATA, VERSION_DATA[args.version])
  work = args.work_dir or tempfile.mkdtemp(prefix="bench_squad_")  # kept: the predictions
  os.makedirs(work, exist_ok=True)
  train_file, dev_file = os.path.join(work, "train.json"), os.path.join(work, "dev.json")
  n_train = subset_squad(os.path.join(data_dir, "train.json"), train_file,
                         args.max_train_questions)
  n_dev = subset_squad(os.path.join(data_dir, "dev.json"), dev_file, args.max_dev_questions)
  lines.append("SQuAD v%s: %s: %d train, %d dev questions (the first, file order); seq %d, "
               "doc_stride %d, %d epochs, lr %g, batch %d; ours --optimizer=%s "
               "--epochs_over=%s; runs in %s"
               % ("1.1" if args.version == 1 else "2.0", data_dir, n_train, n_dev,
                  args.max_seq_length, args.doc_stride, args.epochs, args.learning_rate,
                  args.batch_size, args.ours_optimizer, args.ours_epochs_over, work))
  run = lambda side, fn: lambda seed: fn(args, seed, train_file, dev_file, os.path.join(  # pylint: disable=unnecessary-lambda-assignment
      work, "%s_seed%d" % (side, seed)))
  run_seeds(args, results, run("hf", run_hf), run("ours", run_ours))
  finish(args, lines, results, "f1", "F1")


if __name__ == "__main__":
  main()
