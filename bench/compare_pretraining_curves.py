r"""Our pretraining curves beside Hugging Face's, seed by seed (issue 25 item 1).

Reads the per-window progress lines of ``bench/pretraining_curves.sh``'s runs
(``OUT_DIR/<dtype>_s<seed>.log``: ``step 250/1000 ... masked_lm_accuracy=``)
and the Hugging Face references of ``bench/hf_pretraining_reference.py``
(its ``.json`` output, or the ``seed 1 step 250 masked_lm_accuracy=...``
lines it prints), and prints, for each metric and step, every side's mean
+- sample std, its [min, max] over the seeds, and whether our mean lies
inside the reference's [min, max] (the issue's "within the seed spread").
2-3 seeds make a range that can be narrow by chance (two references may
agree to 1e-4), so the gap of the means is also given in units of the
seed-to-seed std pooled over every side at that step (all runs of the
reference and ours, each side about its own mean).

  .venv/bin/python bench/compare_pretraining_curves.py OUT_DIR \
      --hf bench/results/pretraining/hf_gpu/curves_mlm_nsp_1000.log \
      [--hf OUT_DIR/hf_original_s3.log]

Each progress line covers the 50 steps before it (``--iterations_per_loop
=50``; the reference records the same window), so "step 250" is the mean
over steps 201-250 on both sides. A run's log with no progress line yet
(just started) is skipped with a line saying so; SystemExit names the
folder or file when there is nothing to compare.
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys

from _cpuinfo import cpu_line  # pylint: disable=wrong-import-position

METRICS = ("masked_lm_accuracy", "next_sentence_accuracy", "masked_lm_loss")
_OURS = re.compile(r"^step (\d+)/\d+ (.*)$")
_HF = re.compile(r"^seed (\d+) step (\d+) (.*)$")
_KV = re.compile(r"(\w+)=([-0-9.eE]+)")


def read_ours(path):
  """One run's log -> {step: {metric: value}} (the last line per step wins:
  a resumed run repeats nothing, but a rerun of a window would)."""
  curve = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      m = _OURS.match(line.strip())
      if m:
        curve[int(m.group(1))] = {k: float(v) for k, v in _KV.findall(m.group(2))}
  return curve


def read_hf(path):
  """A reference file (.json or its log) -> {seed: {step: {metric: value}}}."""
  runs = {}
  if path.endswith(".json"):
    with open(path, encoding="utf-8") as f:
      for run in json.load(f)["runs"]:
        runs[run["seed"]] = {c["step"]: c for c in run["curve"]}
  else:
    with open(path, encoding="utf-8") as f:
      for line in f:
        m = _HF.match(line.strip())
        if m:
          runs.setdefault(int(m.group(1)), {})[int(m.group(2))] = {
              k: float(v) for k, v in _KV.findall(m.group(3))}
  if not runs:
    raise SystemExit(f"{path}: no curve")
  return runs


def summary(values):
  """mean, sample std (0 for one value), min, max."""
  sd = statistics.stdev(values) if len(values) > 1 else 0.0
  return statistics.mean(values), sd, min(values), max(values)


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  ap.add_argument("out_dir", help="bench/pretraining_curves.sh's OUT_DIR")
  ap.add_argument("--hf", required=True, action="append",
                  help="reference .json or .log; repeat to pool seeds from several "
                       "files (e.g. seeds 1-2 from the GPU log, seed 3 from a CPU run)")
  ap.add_argument("--steps", default="250,500,1000")
  args = ap.parse_args()
  steps = [int(s) for s in args.steps.split(",")]
  sides = {}
  for path in sorted(glob.glob(os.path.join(args.out_dir, "*_s[0-9]*.log"))):
    if os.path.basename(path).startswith("hf_"):
      continue  # a reference run of pretraining_curves.sh's HF_SEEDS: pass it as --hf
    name, seed = re.match(r"(.*)_s(\d+)\.log$", os.path.basename(path)).groups()
    curve = read_ours(path)
    if not curve:
      print(f"{path}: no progress line yet, skipped", file=sys.stderr)
      continue
    sides.setdefault(name, {})[int(seed)] = curve
  if not sides:
    raise SystemExit(f"{args.out_dir}: no <dtype>_s<seed>.log")
  ref = {}
  for path in args.hf:
    for seed, curve in read_hf(path).items():
      if seed in ref:
        raise SystemExit(f"{path}: seed {seed} is already in an earlier --hf file")
      ref[seed] = curve
  ref_name = "HF " + "+".join(os.path.basename(p) for p in args.hf)
  sides = {ref_name: ref, **sides}
  print(cpu_line())
  print(f"reference: {', '.join(args.hf)}")
  for metric in METRICS:
    print(f"\n{metric} (window of 50 steps ending at the step)")
    print(f"| step | run | seeds | values | mean +- std | [min, max] | ours' mean in the reference's range | gap / pooled std |")
    print("|---:|---|---:|---|---|---|---|---:|")
    for step in steps:
      ref = [c[step][metric] for c in sides[ref_name].values() if step in c]
      if not ref:
        continue
      rm, _, rlo, rhi = summary(ref)
      ss = dof = 0
      for runs in sides.values():
        vals = [c[step][metric] for c in runs.values() if step in c]
        if len(vals) > 1:
          ss += statistics.variance(vals) * (len(vals) - 1)
          dof += len(vals) - 1
      pooled = (ss / dof) ** 0.5 if dof else 0.0
      for name, runs in sides.items():
        vals = [c[step][metric] for _, c in sorted(runs.items()) if step in c]
        if not vals:
          continue
        m, sd, lo, hi = summary(vals)
        if name == ref_name:
          verdict, gap = "", ""
        else:
          verdict = "yes" if rlo <= m <= rhi else "no"
          gap = f"{(m - rm) / pooled:+.2f}" if pooled > 0 else "-"
        print(f"| {step} | {name} | {len(vals)} | {' '.join(f'{v:.4f}' for v in vals)} | "
              f"{m:.4f} +- {sd:.4f} | [{lo:.4f}, {hi:.4f}] | {verdict} | {gap} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
