"""Fine-tuning stability on small sets: the original optimizer vs bias-corrected AdamW.

Issue 42's study: per task, seed and side, one run of the task's side-by-side
bench (which holds the recipe and the Hugging Face side) with the real
all-MiniLM-L6-v2. Sides: ``adamw_original`` (the original AdamWeightDecay, no
bias correction), ``adamw`` (ours, Keras AdamW, bias-corrected), ``hf``
(``torch.optim.AdamW``; its batches cut to their longest row for ner and mc,
as HF's example scripts by default). Tasks: ``movie`` (data/movie_review_sentences, seq
64), ``pairs`` (data/dialog_reply_pairs, first 2,000 training pairs), ``ner``
(../shared/data/ner_wnut16, the bench's 20 epochs), ``mc``
(../shared/data/mc_wikihow: 3 epochs, batch 16, lr 5e-5), ``squad``
(../shared/data/squad_v1: first 2,000 train / 500 dev questions, seq 256, 2
epochs). One JSON per run under ``--out``/runs; finished runs are skipped,
our side checkpoints (``--out``/work): the same command resumes; ours run
before HF's, ``--workers`` at once. The report
(``--out``/README.md; ``stability.png``, per-seed dots) gives per task and
side the dev mean, sample sd, min, max and the degenerate runs: at most 5
points above the trivial baseline (majority label's dev share; NER, SQuAD: 0).

Run by hand (hours: ~5-60 min per run on 2 cores)::

  .venv/bin/python bench/bench_finetune_stability.py            # the study, 5 seeds
  .venv/bin/python bench/bench_finetune_stability.py --tasks mc,ner,movie \\
      --seeds 1,2,3 --sides adamw_original,adamw --out /tmp/guard  # the guard
  .venv/bin/python bench/bench_finetune_stability.py --report   # table + PNG only
"""

import argparse
import concurrent.futures
import csv
import json
import os
import statistics
import shutil
import subprocess
import sys

from _cpuinfo import record

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
# task: (bench script, its flags, metric, dev file whose "label" column gives
# the majority rate, or None: trivial baseline 0)
TASKS = {
    "movie": ("bench_classifier.py", ["--max_seq_length=64"], "accuracy",
              os.path.join(ROOT, "data", "movie_review_sentences", "dev.tsv")),
    "pairs": ("bench_classifier.py", ["--task_name=pairs", "--max_train_sentences=2000",
                                      "--data_dir=" + os.path.join(ROOT, "data", "dialog_reply_pairs")],
              "accuracy", os.path.join(ROOT, "data", "dialog_reply_pairs", "dev.tsv")),
    "ner": ("bench_ner.py", ["--hf_padding=longest"], "f1", None),
    "mc": ("bench_swag.py", ["--hf_padding=longest"], "accuracy",
           os.path.join(SHARED, "mc_wikihow", "dev.csv")),
    "squad": ("bench_squad.py", ["--max_train_questions=2000", "--max_dev_questions=500",
                                 "--max_seq_length=256", "--epochs=2"], "f1", None),
}
SIDES = ("adamw_original", "adamw", "hf")


def trivial(task: str) -> float:
  """``task``'s trivial baseline (a fraction): the majority label's dev share, or 0."""
  dev = TASKS[task][3]
  if dev is None:
    return 0.0
  with open(dev, encoding="utf-8", newline="") as f:
    labels = [r["label"] for r in csv.DictReader(f, delimiter="\t" if dev.endswith("tsv") else ",")]
  return max(labels.count(l) for l in set(labels)) / len(labels)


def run(task: str, side: str, seed: int, out: str, threads: int) -> None:
  """One bench run on ``threads`` threads into ``out``/runs/<task>_<side>_seed<seed>.json
  (skipped when there). Its data and our side's checkpoints (every 200 steps)
  are kept in ``out``/work/<run> until it finishes, so a rerun resumes our
  side; exits with the bench's output tail when it fails."""
  name = "%s_%s_seed%d" % (task, side, seed)
  path, work = os.path.join(out, "runs", name + ".json"), os.path.join(out, "work", name)
  if os.path.exists(path):
    return
  script, flags = TASKS[task][:2]
  which = ["--which=hf"] if side == "hf" else ["--which=ours", "--ours_optimizer=" + side]
  cmd = [sys.executable, os.path.join(HERE, script), *flags, *which, "--seeds=%d" % seed,
         "--threads=%d" % threads, "--work_dir=" + work, "--save_checkpoints_steps=200",
         "--output=" + path + ".tmp"]
  print("%s %s seed %d: %s" % (task, side, seed, " ".join(cmd[1:])), flush=True)
  os.makedirs(work, exist_ok=True)
  proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(
      os.environ, TMPDIR=work, BENCH_RESULTS=os.path.join(out, "records", name)))
  if proc.returncode:
    sys.exit("%s %s seed %d failed:\n%s\n%s" % (task, side, seed, proc.stdout[-3000:],
                                                 proc.stderr[-3000:]))
  os.replace(path + ".tmp", path)
  shutil.rmtree(work)


def load(out: str) -> dict:
  """``{(task, side): {seed: metric}}`` of the finished runs in ``out``."""
  got = {}
  for name in sorted(n for n in os.listdir(os.path.join(out, "runs")) if n.endswith(".json")):
    task, rest = name[:-5].split("_", 1)
    side, seed = rest.rsplit("_seed", 1)
    with open(os.path.join(out, "runs", name), encoding="utf-8") as f:
      runs = json.load(f)["hf" if side == "hf" else "ours"]
    got.setdefault((task, side), {})[int(seed)] = runs[seed][TASKS[task][2]]
  return got


def report(out: str, lines: list) -> None:
  """Prints and writes the table (``out``/README.md) and ``stability.png``."""
  got = load(out)
  lines += ["", "| task (metric, trivial) | side | runs | mean | sd | min | max | "
            "degenerate |", "|---|---|---|---|---|---|---|---|"]
  for task in TASKS:
    base = trivial(task)
    for side in SIDES:
      if v := list(got.get((task, side), {}).values()):
        lines.append("| %s (%s, %.2f) | %s | %d | %.2f | %.2f | %.2f | %.2f | %d |" % (
            task, TASKS[task][2], 100 * base, side, len(v), 100 * statistics.mean(v),
            100 * (statistics.stdev(v) if len(v) > 1 else 0), 100 * min(v), 100 * max(v),
            sum(x <= base + 0.05 for x in v)))
  print("\n".join(lines), flush=True)
  with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
    f.write("# Fine-tuning stability (bench/bench_finetune_stability.py)\n\n"
            + "\n".join(l if l.startswith("|") else l + "\n" for l in lines) + "\n")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  tasks = [t for t in TASKS if any((t, s) in got for s in SIDES)]
  fig, axes = plt.subplots(1, max(len(tasks), 1), figsize=(3 * max(len(tasks), 1), 3.5))
  for ax, task in zip(getattr(axes, "flat", [axes]), tasks):
    for i, side in enumerate(SIDES):
      if v := got.get((task, side), {}):
        ax.scatter([i + 0.06 * (s - 3) for s in v], [100 * x for x in v.values()], s=14)
        ax.hlines(100 * statistics.mean(v.values()), i - 0.25, i + 0.25, color="k")
    ax.axhline(100 * trivial(task), color="r", lw=0.8, ls=":")
    ax.set_xticks(range(len(SIDES)), ["original", "adamw", "HF"])
    ax.set_title("%s (%s)" % (task, TASKS[task][2]), fontsize=9)
  fig.tight_layout()
  fig.savefig(os.path.join(out, "stability.png"), dpi=100)


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  for name, default in (("tasks", TASKS), ("sides", SIDES), ("seeds", "12345")):
    ap.add_argument("--" + name, default=",".join(default))
  ap.add_argument("--out", default=os.path.join(HERE, "results", "finetune_stability"))
  ap.add_argument("--report", action="store_true", help="Table and PNG of the runs so far.")
  ap.add_argument("--workers", type=int, default=2, help="Runs at once, on cpu_count/"
                  "workers threads each (two 1-thread runs: +12-17%% over one 2-thread)")
  args = ap.parse_args()
  os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
  lines = record()
  # Our sides for every seed first, then HF's (a stable sort).
  todo = sorted(((task, side, int(seed), args.out, max(1, os.cpu_count() // args.workers))
                 for seed in args.seeds.split(",") for task in args.tasks.split(",")
                 for side in args.sides.split(",")), key=lambda a: a[1] == "hf")
  if not args.report:
    pool = concurrent.futures.ThreadPoolExecutor(args.workers)
    try:  # a failed run stops the study once the runs in flight end
      list(pool.map(lambda a: run(*a), todo))
    finally:
      pool.shutdown(cancel_futures=True)
  report(args.out, lines)


if __name__ == "__main__":
  main()
