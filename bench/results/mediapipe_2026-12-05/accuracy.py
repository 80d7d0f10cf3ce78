"""MediaPipe's TextClassifier vs the SavedModel, fine-tuned MiniLM, through the tools.

  .venv/bin/python tools/run_classifier.py --task_name=sst-2 \\
    --data_dir=data/movie_review_sentences \\
    --init_checkpoint="$(.venv/bin/python tools/minilm_dir.py)" --do_train --do_eval \\
    --max_seq_length=64 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3 \\
    --output_dir=/tmp/mp_bench/sst2
  .venv/bin/python bench/results/mediapipe_2026-12-05/accuracy.py /tmp/mp_bench/sst2

Exports the run with tools/export_saved_model.py (the SavedModel; --format=mediapipe
with --quantize=none|dynamic_int8|float16, and none with --dynamic_length),
answers the 1,035 dev sentences with each (MediaPipe's TextClassifier one
text a call, as an app calls it; the SavedModel in batches of 64 for the
labels, one text a call for its time), counts the lines where MediaPipe's
tokenizer gives other ids than the SavedModel's (the id-echo file of
bert_tf.export.mediapipe.token_ids_model) and writes README.md beside this
file.
"""
import importlib.util
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401

from bert_tf import preprocessing  # noqa: E402
from bert_tf.export import mediapipe  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# bench/_cpuinfo.py's CPU line, the module loaded from its file (no sys.path edit).
_spec = importlib.util.spec_from_file_location("_cpuinfo", os.path.join(ROOT, "bench",
                                                                        "_cpuinfo.py"))
_cpuinfo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cpuinfo)
cpu_line = _cpuinfo.cpu_line

run = sys.argv[1]
out = run + "_mediapipe"
py = os.path.join(ROOT, ".venv", "bin", "python")
tool = os.path.join(ROOT, "tools", "export_saved_model.py")
with open(os.path.join(ROOT, "data/movie_review_sentences/dev.tsv"), encoding="utf-8") as f:
  rows = [l.rstrip("\n").split("\t") for l in f][1:]
sents, gold = [r[0] for r in rows], np.array([int(r[1]) for r in rows])
mp = mediapipe.load_mediapipe()
NOTES = ("The score differences beyond float32 rounding on the float32 files are the lines "
         "whose ids differ (MediaPipe's tokenizer keeps accents); every label is still the "
         "SavedModel's. ms/text: MediaPipe's TextClassifier.classify, one text a call, "
         "static files padded to 64 tokens; `--dynamic_length` runs each text at its own "
         "length. Timings on shared cores: compare within this table only.")


def export(name, args):
  p = subprocess.run([py, tool, "--output_dir=" + run, "--export_dir=%s/%s" % (out, name)]
                     + args, capture_output=True, text=True, check=True)
  return p.stdout.strip().splitlines()[0], os.path.join(out, name, "1")


def classify(path):
  with mp.text.TextClassifier.create_from_model_path(
      os.path.join(path, mediapipe.MODEL_FILE)) as clf:
    scores = np.zeros([len(sents), 2], np.float32)
    start = time.time()
    for i, s in enumerate(sents):
      for c in clf.classify(s).classifications[0].categories:
        scores[i, c.index] = c.score
    return scores, 1000 * (time.time() - start) / len(sents)


line, sm_path = export("saved_model", [])
sm = tf.saved_model.load(sm_path).signatures["serving_default"]
ref = np.concatenate([sm(text=tf.constant(sents[i:i + 64]))["probabilities"].numpy()
                      for i in range(0, len(sents), 64)])
start = time.time()
for s in sents[:300]:
  sm(text=tf.constant([s]))
sm_ms = 1000 * (time.time() - start) / 300
feat = tf.saved_model.load(export("features", ["--what=features"])[1]).signatures[
    "serving_default"]
ours = []
for i in range(0, len(sents), 64):
  f = feat(text_a=tf.constant(sents[i:i + 64]))
  ours += [r[m > 0].tolist() for r, m in zip(f["input_ids"].numpy(), f["input_mask"].numpy())]
echo_path = os.path.join(out, "ids.tflite")
with open(echo_path, "wb") as f:
  f.write(mediapipe.token_ids_model(
      preprocessing.read_vocab_lines(os.path.join(run, "vocab.txt")), 512))
with mp.text.TextEmbedder.create_from_model_path(echo_path) as echo:
  same = np.array([mediapipe.token_ids(echo, s) == o for s, o in zip(sents, ours)])

base = (ref.argmax(-1) == gold).mean()
lines = [
    "# MediaPipe export (issue 70 item 1), %s" % time.strftime("%Y-%m-%d", time.gmtime()), "",
    cpu_line() + " (2 vCPUs shared with other agents' jobs; load average %.1f at the "
    "start)." % os.getloadavg()[0],
    "TF %s, mediapipe %s (PyPI), XNNPACK (MediaPipe's default)." % (tf.__version__,
                                                                    mp.version), "",
    "all-MiniLM-L6-v2 fine-tuned 3 epochs on the 9,531 movie-review train sentences "
    "(max_seq_length 64; the best dev model `run_classifier.py` kept), then this script:", "",
    "```sh"] + [l[2:] for l in __doc__.split("\n\n")[1].splitlines()] + ["```", "",
    "Dev set: %d sentences; MediaPipe's own tokenizer gives the SavedModel's ids on %d "
    "(the others hold accented words, `TOKEN_DIFFERENCES`). SavedModel dev accuracy "
    "%.2f%%, %.1f ms/text one text a call." % (len(sents), same.sum(), 100 * base, sm_ms), "",
    "| MediaPipe file | MB | dev accuracy | vs SavedModel (points) | labels equal to "
    "SavedModel | max abs score diff, equal-id lines | max abs score diff, all | ms/text |",
    "|---|---|---|---|---|---|---|---|"]
notes = [line]
for name, args in (("none", []), ("dynamic_int8", ["--quantize=dynamic_int8"]),
                   ("float16", ["--quantize=float16"]),
                   ("none, --dynamic_length", ["--dynamic_length"])):
  line, path = export(name.replace(", --", "_"), ["--format=mediapipe"] + args)
  notes.append(line)
  got, ms = classify(path)
  acc = (got.argmax(-1) == gold).mean()
  diff = np.abs(got - ref)
  lines.append("| %s | %.1f | %.2f%% | %+.2f | %d / %d | %.2e | %.2e | %.1f |" % (
      name, os.path.getsize(os.path.join(path, mediapipe.MODEL_FILE)) / 1e6, 100 * acc,
      100 * (acc - base), (got.argmax(-1) == ref.argmax(-1)).sum(), len(sents),
      diff[same].max(), diff.max(), ms))
  print(lines[-1], flush=True)
lines += ["", NOTES, "", "Export tool lines:", ""] + ["    " + n for n in notes]
with open(os.path.join(HERE, "README.md"), "w", encoding="utf-8") as f:
  f.write("\n".join(lines) + "\n")
print("\n".join(lines))
