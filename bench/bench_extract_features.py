"""Feature extraction side by side: ``tools/extract_features.py`` vs the ORIGINAL.

Both scripts run whole, each in its own process, on the SAME original-format
TF1 checkpoint, input file and flags; the table gives end-to-end wall time
(process start to the written JSON-lines file) and sentences/s. The original
is bert-tensorflow 1.0.4's ``extract_features.py``, patched at run time by
``tests/original_extract_features.py`` (a stand-in for the removed
``tf.estimator``; a graph + ``tf.Session``, fixed ``max_seq_length``
padding). Ours pads each batch only to its longest example (batches formed
from length-sorted windows). Also printed: ours without the JSON writing
(the encoder alone, in process) to show where the time goes: both sides
spend much of it in Python's ``round(float(x), 6)`` + ``json.dumps`` of
``tokens x layers x H`` numbers.

The checkpoint: random weights of the given shape (``--layers_n``,
``--hidden``; default the all-MiniLM-L6-v2 shape, 6 x 384) with the uncased
vocab, written by :func:`bert_tf.checkpoints.save_tf1_checkpoint`. Input: the
first ``--sentences`` lines of ``data/corpus/sample_text.txt`` (cycled).

  .venv/bin/python bench/bench_extract_features.py --sentences 256
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from _cpuinfo import cpu_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "data", "vocab", "uncased_vocab.txt")
TEXT = os.path.join(ROOT, "data", "corpus", "sample_text.txt")


def make_checkpoint(workdir, layers, hidden):
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
  cfg = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
         "hidden_dropout_prob": 0.1, "hidden_size": hidden, "initializer_range": 0.02,
         "intermediate_size": 4 * hidden, "max_position_embeddings": 512,
         "num_attention_heads": max(1, hidden // 64), "num_hidden_layers": layers,
         "type_vocab_size": 2, "vocab_size": 30522}
  path = os.path.join(workdir, "bert_config.json")
  with open(path, "w") as f:
    json.dump(cfg, f)
  enc = encoder_lib.BertEncoder(config_lib.BertConfig.from_dict(cfg), name="bert")
  prefix = checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(enc),
                                           os.path.join(workdir, "bert_model.ckpt"))
  return path, prefix


def write_input(path, n):
  with open(TEXT, encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()]
  with open(path, "w", encoding="utf-8") as f:
    for i in range(n):
      f.write(lines[i % len(lines)] + "\n")


def timed(cmd, cwd):
  start = time.perf_counter()
  proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
  if proc.returncode:
    sys.exit("failed: %s\n%s" % (" ".join(cmd), proc.stderr[-3000:]))
  return time.perf_counter() - start


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--sentences", type=int, default=256)
  ap.add_argument("--max_seq_length", type=int, default=128)
  ap.add_argument("--batch_size", type=int, default=32)
  ap.add_argument("--layers", default="-1,-2,-3,-4")
  ap.add_argument("--layers_n", type=int, default=6)
  ap.add_argument("--hidden", type=int, default=384)
  args = ap.parse_args()
  work = tempfile.mkdtemp(prefix="bench_extract_")
  config, ckpt = make_checkpoint(work, args.layers_n, args.hidden)
  inp = os.path.join(work, "input.txt")
  write_input(inp, args.sentences)
  flags = ["--input_file=" + inp, "--vocab_file=" + VOCAB, "--bert_config_file=" + config,
           "--init_checkpoint=" + ckpt, "--max_seq_length=%d" % args.max_seq_length,
           "--batch_size=%d" % args.batch_size, "--layers=" + args.layers]
  py = sys.executable
  theirs = timed([py, os.path.join(ROOT, "tests", "original_extract_features.py"),
                  os.path.join(work, "orig_pkg"),
                  "--output_file=" + os.path.join(work, "orig.jsonl")] + flags,
                 os.path.join(ROOT, "tests"))
  ours = timed([py, os.path.join(ROOT, "tools", "extract_features.py"),
                "--output_file=" + os.path.join(work, "ours.jsonl")] + flags, ROOT)
  # The encoder alone (no JSON), in this process, after a warm-up batch.
  from bert_tf.data import extract  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import feature_extraction  # pylint: disable=g-import-not-at-top
  ex = feature_extraction.FeatureExtractor.from_checkpoint(
      ckpt, config, VOCAB, max_seq_length=args.max_seq_length,
      batch_size=args.batch_size, layers=args.layers)
  examples = extract.read_examples(inp)
  list(ex.extract(examples[:args.batch_size]))
  start = time.perf_counter()
  for _ in ex.extract(examples):
    pass
  encoder_only = time.perf_counter() - start
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu, cpu_flags = cpu_info()
  print("CPU: %s (%d cores visible; flags: %s); TensorFlow %s" % (
      cpu, os.cpu_count(), " ".join(cpu_flags) or "none", tf.__version__))
  print("model: %d layers x H %d (random weights, TF1 checkpoint); flags: %s" % (
      args.layers_n, args.hidden, " ".join(f for f in flags if "file" not in f
                                            and "checkpoint" not in f)))
  print("%d sentences (data/corpus/sample_text.txt)\n" % args.sentences)
  print("| run | wall s | sentences/s |")
  print("|---|---|---|")
  print("| original extract_features.py (process, end to end) | %.1f | %.1f |" % (
      theirs, args.sentences / theirs))
  print("| ours tools/extract_features.py (process, end to end) | %.1f | %.1f |" % (
      ours, args.sentences / ours))
  print("| ours, encoder only (no JSON, warm) | %.2f | %.1f |" % (
      encoder_only, args.sentences / encoder_only))


if __name__ == "__main__":
  main()
