r"""Issue 39 item 6: the paper's fine-tuning procedure, measured.

On data/movie_review_sentences from the real all-MiniLM-L6-v2 at
max_seq_length 64 (tools/tune.py, three searches under --out):

1. ``grid/``: the paper's 18 configurations (Appendix A.3), 1 seed each,
   selected on a held-out 10% of train (``--holdout_fraction=0.1``), every
   trial's kept model reported on dev (``dev_metric``);
2. ``restarts/``: the best configuration with 5 seeds (same held-out
   split), dev accuracy mean, std, min, max;
3. ``default/``: the main job's recipe (lr 5e-5, batch 32, 3 epochs) once,
   trained on all of train, scored on dev (as the main job selects).

Every step is a resumable search: the same command goes on where it stopped
(finished trials kept, the interrupted one resumed from its checkpoint). The
table (CPU model and flags, wall times) is printed and written to
``--out/README.md``; the full log beside it (``--out`` under
``bench/results/``) or in ``bench/results/bench_tune/``.

  nice -n 10 .venv/bin/python bench/bench_tune.py --out=bench/results/tune_2026-11-28
  .venv/bin/python bench/bench_tune.py --out=/tmp/tune_check --smoke   # one 3-step trial
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _cpuinfo import RESULTS, cpu_line, record  # bench/ is the script's folder

PY = sys.executable
DATA = os.path.join(ROOT, "data", "movie_review_sentences")


def tune(out, search_space, *extra):
  """Runs (or resumes) one search; returns its best_trial.json and wall seconds."""
  started = time.time()
  cmd = [PY, os.path.join(ROOT, "tools", "tune.py"), "--task=classifier",
         "--task_name=sst-2", "--data_dir=" + DATA, "--init_checkpoint=" + minilm(),
         "--max_seq_length=64", "--eval_batch_size=64", "--output_dir=" + out,
         "--search_space=" + search_space] + list(extra)
  print("$ " + " ".join(cmd[1:]), flush=True)
  if subprocess.run(cmd, check=False, cwd=ROOT).returncode:  # its own line says why
    sys.exit("bench_tune: tools/tune.py stopped (above); rerun the same command to resume")
  with open(os.path.join(out, "best_trial.json"), encoding="utf-8") as f:
    return json.load(f), time.time() - started


def minilm():
  return subprocess.run([PY, os.path.join(ROOT, "tools", "minilm_dir.py")], check=True,
                        capture_output=True, text=True).stdout.strip()


def rows(out):
  import csv  # pylint: disable=import-outside-toplevel
  with open(os.path.join(out, "search_results.csv"), encoding="utf-8") as f:
    return list(csv.DictReader(f))


def space_file(out, name, space):
  os.makedirs(out, exist_ok=True)
  path = os.path.join(out, name)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(space, f)
  return path


def wall(out):
  return sum(float(r["wall_seconds"] or 0) for r in rows(out))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", required=True, help="results folder (resumable)")
  ap.add_argument("--smoke", action="store_true",
                  help="one 3-step trial of the grid step only (checks the command)")
  args = ap.parse_args()
  out = os.path.abspath(args.out)
  grid_dir = os.path.join(out, "grid")
  if args.smoke:  # a check of the command, not a result: nothing recorded
    print(cpu_line())
    space = space_file(out, "smoke_space.json", {"learning_rate": [5e-5],
                                                 "train_batch_size": [32],
                                                 "num_train_epochs": [0.01]})
    best, seconds = tune(grid_dir, space, "--holdout_fraction=0.1", "--export=false")
    print("smoke: trial %s holdout accuracy %.4f, dev %s, %.0f s" % (
        best["trial"], best["metric"], rows(grid_dir)[0]["dev_metric"], seconds))
    return
  inside = os.path.relpath(out, RESULTS)
  lines = record(None if inside.startswith("..") else inside)  # the log beside the results
  best, _ = tune(grid_dir, "paper", "--holdout_fraction=0.1")
  grid = rows(grid_dir)
  config = {k: [best[k]] for k in ("learning_rate", "train_batch_size", "num_train_epochs")}
  restarts_dir = os.path.join(out, "restarts")
  tune(restarts_dir, space_file(out, "best_config.json", config),
       "--holdout_fraction=0.1", "--num_restarts=5", "--export=false")
  restarts = [float(r["dev_metric"]) for r in rows(restarts_dir) if r["status"] == "COMPLETE"]
  default_dir = os.path.join(out, "default")
  default, _ = tune(default_dir, space_file(out, "default_config.json", {
      "learning_rate": [5e-5], "train_batch_size": [32], "num_train_epochs": [3]}),
                    "--export=false")
  best_row = [r for r in grid if int(r["trial"]) == best["trial"]][0]
  from bert_tf.runner import format_duration  # TF loads only for the table; pylint: disable=import-outside-toplevel
  table = lines + [
      "",
      "| what | learning_rate | batch | epochs | seeds | held-out 10% accuracy | dev accuracy | wall |",
      "|---|---|---|---|---|---|---|---|",
      "| paper grid, best of 18 on held-out 10%% | %g | %d | %g | 1 | %.4f | %.4f | %s (18 trials) |" % (
          best["learning_rate"], best["train_batch_size"], best["num_train_epochs"],
          best["metric"], float(best_row["dev_metric"]), format_duration(wall(grid_dir))),
      "| best configuration, 5 restarts (dev: mean +- std [min, max]) | %g | %d | %g | 5 | - | %.4f +- %.4f [%.4f, %.4f] | %s |" % (
          best["learning_rate"], best["train_batch_size"], best["num_train_epochs"],
          statistics.mean(restarts), statistics.stdev(restarts) if len(restarts) > 1 else 0.0,
          min(restarts), max(restarts), format_duration(wall(restarts_dir))),
      "| main job's default recipe, all of train | 5e-05 | 32 | 3 | 1 | - | %.4f | %s |" % (
          default["metric"], format_duration(wall(default_dir))),
      "",
      "Grid (every trial; dev_metric = its kept model on dev):", ""]
  with open(os.path.join(grid_dir, "search_results.md"), encoding="utf-8") as f:
    table += f.read().splitlines()[2:]
  text = "\n".join(table) + "\n"
  print(text)
  with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
    f.write(text)


if __name__ == "__main__":
  main()
