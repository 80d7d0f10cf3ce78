"""Pretraining-data creation speed and memory: the original vs ours, side by side.

Runs, one after the other on the same corpus and flags
(default: Jane Austen's six novels, 4 MB, ``dupe_factor=10``, seq 128):

* ``original``: google-research/bert ``create_pretraining_data.py`` (PyPI
  bert-tensorflow 1.0.4), ``python -m bert.create_pretraining_data``;
* ``faithful``: ``tools/create_pretraining_data.py`` (default mode: the
  original's records, record for record);
* ``scalable w=1`` / ``w=2``: ``--num_workers=1`` / ``2`` (sharded, streaming,
  bounded memory); ``Beam``: ``w=2`` with ``--runner=beam`` on the DirectRunner's
  Python engine, multi-processing, 2 workers (same shards, byte for byte);

each as its own process under ``/usr/bin/time``, and prints a table:
instances, wall seconds, CPU seconds (user + system, all processes),
instances/s by wall clock and by CPU time, the speedups over the original,
and peak RSS (MB; for the scalable mode the sum over the main process and its
workers, as the tool reports them; for Beam per worker). Then the scalable mode
(and faithful) on the corpus concatenated twice: does peak RSS grow with it?

Wall figures include waiting for a core, CPU figures do not. Our modes run
``--repeats`` times each, the median-wall run reported; with ``--rounds=N``
each speedup is the median of N per-round ratios.
``--verify`` compares faithful records with the original's, parsed.

Run by hand (not a test)::

  .venv/bin/python bench/bench_create_pretraining_data.py
  .venv/bin/python bench/bench_create_pretraining_data.py --max_lines=5000 --skip_2x
"""

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile

from _cpuinfo import record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.join(os.path.dirname(ROOT), "shared", "data", "corpus", "austen.txt")
DEFAULT_VOCAB = os.path.join(ROOT, "data", "vocab", "uncased_vocab.txt")


def _timed(cmd, workdir, name):
  """Runs ``cmd`` under /usr/bin/time; returns (stdout+stderr, wall, cpu, maxrss_mb)."""
  tfile = os.path.join(workdir, name + ".time")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tfile] + cmd,
                        cwd=workdir, env=env, capture_output=True, text=True)
  if proc.returncode != 0:
    raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), proc.stderr[-3000:]))
  with open(tfile) as f:
    wall, user, system, rss_kb = f.read().split()[-4:]
  return (proc.stdout + proc.stderr, float(wall), float(user) + float(system),
          int(rss_kb) / 1024.0)


def run_original(corpus, out, args, workdir):
  text, wall, cpu, rss = _timed(
      [sys.executable, "-m", "bert.create_pretraining_data", "--input_file=" + corpus,
       "--output_file=" + out, "--vocab_file=" + args.vocab,
       "--dupe_factor=%d" % args.dupe_factor, "--random_seed=12345"], workdir, "original")
  n = int(re.search(r"Wrote (\d+) total instances", text).group(1))
  return dict(instances=n, wall=wall, cpu=cpu, rss=rss, rss_detail="%.0f" % rss)


def run_ours(corpus, out, args, workdir, workers, name):
  """Runs ours ``args.repeats`` times; the run with the median wall time."""
  runs = sorted((_run_ours_once(corpus, out, args, workdir, workers, name)
                 for _ in range(args.repeats)), key=lambda r: r["wall"])
  got = runs[len(runs) // 2]
  if len(runs) > 1:
    got["rss_detail"] += " [wall %s]" % "/".join("%.1f" % r["wall"] for r in runs)
  return got


def _run_ours_once(corpus, out, args, workdir, workers, name):
  for old in glob.glob(out + "*"):  # a Beam rerun would skip the whole shards
    os.remove(old)
  cmd = [sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"),
         "--input_file=" + corpus, "--output_file=" + out, "--vocab_file=" + args.vocab,
         "--dupe_factor=%d" % args.dupe_factor, "--random_seed=12345", "--noprogress"]
  cmd += ["--num_workers=%d" % workers] if workers else []
  if name.startswith("beam"):  # the Python engine: no Prism download
    cmd += ["--runner=beam", "--beam_pipeline_options=runner=DirectRunner,direct_num_"
            "workers=%d,direct_running_mode=multi_processing" % workers]
  text, wall, cpu, rss = _timed(cmd, workdir, name)
  n = int(re.search(r"wrote (\d+) instances", text).group(1))
  if name.startswith("beam"):
    m = re.search(r"peak RSS per Beam worker ([\d+]+) MB", text).group(1)
    rss_sum, detail = rss, "per worker %s (main %.0f)" % (m, rss)
  elif workers:
    m = re.search(r"peak RSS: main (\d+) MB, workers ([\d+]+) MB", text)
    parts = [int(m.group(1))] + [int(x) for x in m.group(2).split("+")]
    rss_sum = float(sum(parts))
    detail = "%d (main %d + workers %s)" % (rss_sum, parts[0], "+".join(map(str, parts[1:])))
  else:
    rss_sum, detail = rss, "%.0f" % rss
  return dict(instances=n, wall=wall, cpu=cpu, rss=rss_sum, rss_detail=detail)


_EMPTY_PIPELINE = """
import time
t0 = time.time()
from bert_tf.data.pretraining import beam_runner
options, name = beam_runner.parse_pipeline_options(%r)
beam = beam_runner.import_beam()
with beam.Pipeline(runner=beam_runner._make_runner(name, options), options=options) as p:
  _ = (p | beam.Create(list(range(%d))) | beam.Reshuffle() | beam.Map(lambda s: s)
       | beam.combiners.ToList() | beam.Map(len))
print("empty pipeline %%.2f s" %% (time.time() - t0))
"""


def beam_fixed_cost(workdir, workers):
  """Wall and CPU seconds of the tool's Beam pipeline shape with shards that
  do nothing (interpreter + Beam import, SDK worker start-up, stages, tear-down):
  the part of the Beam column that does not grow with the corpus."""
  opts = ("runner=DirectRunner,direct_num_workers=%d,direct_running_mode=multi_processing"
          % workers)
  _, wall, cpu, rss = _timed([sys.executable, "-c", _EMPTY_PIPELINE % (opts, workers)],
                             workdir, "beam_empty")
  return dict(wall=wall, cpu=cpu, rss=rss)


def _break_even(mb, fixed, beam_rest, local):
  """Corpus size (MB) from which Beam's instances/s reach 0.8x the local mode's,
  taking both as linear in the corpus (Beam: ``fixed`` + ``beam_rest`` at
  ``mb``; local: ``local``): 0.8 (F + b M) <= l M."""
  if beam_rest <= 0.1 * fixed:
    return "the Beam run is all fixed cost at this corpus size: no rate to extrapolate"
  room = local - 0.8 * beam_rest
  if room <= 0:
    return "without the fixed cost Beam is still under 0.8x: no corpus size reaches it"
  return "at these rates Beam reaches 0.8x from about %.0f MB of corpus" % (
      0.8 * fixed * mb / room)


def verify(a, b):
  """Number of records of TFRecord ``a`` and ``b`` and how many differ (parsed)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def feats(path):
    for r in tf.data.TFRecordDataset(path).as_numpy_iterator():
      ex = tf.train.Example.FromString(r)
      yield {k: tuple(getattr(v, v.WhichOneof("kind")).value)
             for k, v in ex.features.feature.items()}
  fa, fb = list(feats(a)), list(feats(b))
  return len(fa), len(fb), sum(x != y for x, y in zip(fa, fb))


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--corpus", default=DEFAULT_CORPUS)
  p.add_argument("--vocab", default=DEFAULT_VOCAB)
  p.add_argument("--max_lines", type=int, default=0, help="use the first N lines (0: all)")
  p.add_argument("--dupe_factor", type=int, default=10)
  p.add_argument("--repeats", type=int, default=3,
                 help="runs of each of our modes (the median by wall time is reported)")
  p.add_argument("--rounds", type=int, default=1,
                 help="rounds of (original, then each of our modes): speedups are "
                      "medians of the per-round ratios (see the module docstring)")
  p.add_argument("--skip_original", action="store_true")
  p.add_argument("--skip_2x", action="store_true")
  p.add_argument("--verify", action="store_true",
                 help="compare faithful records with the original's (parsed)")
  args = p.parse_args()
  record()
  workdir = tempfile.mkdtemp(prefix="bench_cpd_")
  corpus = args.corpus
  with open(corpus, "rb") as f:
    data = f.read()
  if args.max_lines:
    data = b"\n".join(data.split(b"\n")[:args.max_lines]) + b"\n"
    corpus = os.path.join(workdir, "corpus.txt")
    with open(corpus, "wb") as f:
      f.write(data)
  double = os.path.join(workdir, "corpus_2x.txt")
  with open(double, "wb") as f:
    f.write(data.rstrip(b"\n") + b"\n\n" + data)
  print("corpus %s: %.1f MB, %d lines; dupe_factor %d, seq 128, 20 predictions; %d CPU "
        "cores, load average %.1f at start" % (args.corpus, len(data) / 1e6,
        data.count(b"\n"), args.dupe_factor, os.cpu_count(), os.getloadavg()[0]), flush=True)

  modes = [("faithful (default)", 0, "faithful"), ("scalable --num_workers=1", 1, "scalable1"),
           ("scalable --num_workers=2", 2, "scalable2"),
           ("scalable w=2 --runner=beam (DirectRunner, 2 processes)", 2, "beam2")]
  rounds = []  # per round: {name: result}
  for rnd in range(args.rounds):
    got = {}
    if not args.skip_original:
      got["original"] = run_original(corpus, os.path.join(workdir, "orig.tfrecord"), args, workdir)
      print("  round %d: original %.1f s" % (rnd + 1, got["original"]["wall"]), flush=True)
    for name, w, tag in modes:
      out = os.path.join(workdir, "ours.tfrecord" if w == 0 else tag)
      got[name] = run_ours(corpus, out, args, workdir, w, tag)
      print("  round %d: %s %.1f s" % (rnd + 1, name, got[name]["wall"]), flush=True)
    rounds.append(got)
  rows = ([("original (bert-tensorflow 1.0.4)", "original")] if not args.skip_original
          else []) + [(name, name) for name, _, _ in modes]
  print()
  print("| mode | instances | wall s | CPU s | inst/s (wall) | inst/s (CPU) | "
        "speedup wall | speedup CPU | peak RSS MB |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|---|")

  def speedups(key, field):
    """Per round: (our instances / field) / (original's instances / field)."""
    return [(g[key]["instances"] / g[key][field]) /
            (g["original"]["instances"] / g["original"][field]) for g in rounds]

  for label, key in rows:
    runs = [g[key] for g in rounds]
    r = sorted(runs, key=lambda x: x["wall"])[len(runs) // 2]  # median round
    ips_w, ips_c = r["instances"] / r["wall"], r["instances"] / r["cpu"]
    if args.skip_original:
      sw = sc = "-"
    else:
      ws, cs = speedups(key, "wall"), speedups(key, "cpu")
      sw, sc = "%.1fx" % statistics.median(ws), "%.1fx" % statistics.median(cs)
      if len(rounds) > 1:
        sw += " [%s]" % "/".join("%.1f" % x for x in ws)
    detail = r["rss_detail"]
    if len(rounds) > 1:
      detail += " {walls %s}" % "/".join("%.1f" % x["wall"] for x in runs)
    print("| %s | %d | %.1f | %.1f | %.0f | %.0f | %s | %s | %s |" %
          (label, r["instances"], r["wall"], r["cpu"], ips_w, ips_c, sw, sc, detail))
  ips = lambda key: statistics.median(g[key]["instances"] / g[key]["wall"] for g in rounds)
  print("\nBeam / local 2-worker instances/s (wall): %.2fx (target >= 0.8x)" % (
      ips(modes[3][0]) / ips(modes[2][0])))
  fixed = beam_fixed_cost(workdir, 2)
  beam_wall = statistics.median(g[modes[3][0]]["wall"] for g in rounds)
  local_wall = statistics.median(g[modes[2][0]]["wall"] for g in rounds)
  print("Beam's fixed cost (the same pipeline, shards that do nothing): %.1f s wall, "
        "%.1f s CPU; the rest of the Beam run %.1f s against the local mode's %.1f s "
        "(%s); %s" % (
            fixed["wall"], fixed["cpu"], beam_wall - fixed["wall"], local_wall,
            "%.2fx" % (local_wall / (beam_wall - fixed["wall"]))
            if beam_wall - fixed["wall"] > 0.1 * fixed["wall"] else "-", _break_even(
                len(data) / 1e6, fixed["wall"], beam_wall - fixed["wall"], local_wall)))
  if args.verify and not args.skip_original:
    n1, n2, diff = verify(os.path.join(workdir, "orig.tfrecord"),
                          os.path.join(workdir, "ours.tfrecord"))
    print("\nfaithful vs original: %d vs %d records, %d differ (parsed, feature by "
          "feature)" % (n1, n2, diff))
  if not args.skip_2x:
    print("\nPeak RSS against corpus size (%.1f MB vs %.1f MB):" %
          (len(data) / 1e6, os.path.getsize(double) / 1e6))
    print("| mode | instances 1x | instances 2x | peak RSS MB 1x | peak RSS MB 2x |")
    print("|---|---:|---:|---|---|")
    for w, name in ((1, "scalable --num_workers=1"), (2, "scalable --num_workers=2"),
                    (0, "faithful (default)")):
      one = rounds[-1][name]
      two = run_ours(double, os.path.join(workdir, "x2_%d" % w), args, workdir, w, "x2_%d" % w)
      print("| %s | %d | %d | %s | %s |" % (name, one["instances"], two["instances"],
                                             one["rss_detail"], two["rss_detail"]),
            flush=True)
  print("\n(work files in %s)" % workdir)


if __name__ == "__main__":
  main()
