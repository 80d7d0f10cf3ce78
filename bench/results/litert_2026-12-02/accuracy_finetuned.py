"""LiteRT vs SavedModel for a fine-tuned MiniLM classifier, through the tools.

  .venv/bin/python tools/run_classifier.py --task_name=sst-2 \
    --data_dir=data/movie_review_sentences --init_checkpoint="$MINILM" --do_train \
    --do_eval --max_seq_length=64 --train_batch_size=32 --learning_rate=5e-5 \
    --num_train_epochs=1 --output_dir=/tmp/h61/sst2
  .venv/bin/python bench/results/litert_2026-12-02/accuracy_finetuned.py /tmp/h61/sst2

Exports the run with tools/export_saved_model.py (SavedModel, and
--format=litert with --quantize=none|dynamic_int8|float16), answers the
1,035 dev sentences with each, and writes accuracy_finetuned.md beside this
file: dev accuracy, labels equal to the SavedModel's, max |logit diff|, file
size, the tool's XNNPACK line.
"""
import os, subprocess, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
from bert_tf.export import client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
run = sys.argv[1]
out = run + "_exports"
py = os.path.join(ROOT, ".venv", "bin", "python")
tool = os.path.join(ROOT, "tools", "export_saved_model.py")
with open(os.path.join(ROOT, "data/movie_review_sentences/dev.tsv"), encoding="utf-8") as f:
  rows = [l.rstrip("\n").split("\t") for l in f][1:]
sents, gold = [r[0] for r in rows], np.array([int(r[1]) for r in rows])

def export(args):
  p = subprocess.run([py, tool, "--output_dir=" + run] + args, capture_output=True,
                     text=True, check=True)
  return p.stdout.strip().splitlines()[0]

export(["--export_dir=%s/sm" % out])
sm = tf.saved_model.load(client.resolve_export(out + "/sm")).signatures["serving_default"]
ref = np.concatenate([sm(text=tf.constant(sents[i:i + 64]))["logits"].numpy()
                      for i in range(0, len(sents), 64)])
lines = ["# Fine-tuned all-MiniLM-L6-v2 (1 epoch, max_seq_length 64), movie-review dev "
         "(%d sentences): LiteRT vs SavedModel" % len(sents), "",
         "Commands: see accuracy_finetuned.py's docstring (2 shared vCPUs, other agents' "
         "jobs running).", "",
         "SavedModel dev accuracy: %.2f%%" % (100 * (ref.argmax(-1) == gold).mean()), "",
         "| quantize | .tflite MB | dev accuracy | vs SavedModel (points) | labels equal to SavedModel | max abs logit diff |",
         "|---|---|---|---|---|---|"]
notes = []
for q in ("none", "dynamic_int8", "float16"):
  notes.append(export(["--export_dir=%s/lite_%s" % (out, q), "--format=litert",
                       "--quantize=" + q]))
  path = client.resolve_litert(out + "/lite_" + q)
  sig = client.LiteRTSignature(path, num_threads=2)
  got = np.concatenate([sig(text=np.array([s.encode() for s in sents[i:i + 64]],
                                          dtype=object))["logits"]
                        for i in range(0, len(sents), 64)])
  acc, base = (got.argmax(-1) == gold).mean(), (ref.argmax(-1) == gold).mean()
  lines.append("| %s | %.1f | %.2f%% | %+.2f | %.2f%% | %.2e |" % (
      q, os.path.getsize(path) / 1e6, 100 * acc, 100 * (acc - base),
      100 * (got.argmax(-1) == ref.argmax(-1)).mean(), np.abs(got - ref).max()))
  print(lines[-1], flush=True)
lines += ["", "Export tool lines:", ""] + ["    " + n for n in notes]
open(os.path.join(HERE, "accuracy_finetuned.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
