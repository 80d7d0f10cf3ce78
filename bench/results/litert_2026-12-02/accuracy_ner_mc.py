"""LiteRT vs SavedModel for fine-tuned MiniLM NER and multiple choice, through the tools.

  MINILM=$(.venv/bin/python tools/minilm_dir.py)
  .venv/bin/python tools/run_ner.py --do_train --do_eval --data_dir=../shared/data/ner_wnut16 \
    --dev_file=$PWD/data/ner_wnut16/dev.txt --init_checkpoint="$MINILM" --output_dir=/tmp/lite/ner --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3
  .venv/bin/python tools/run_swag.py --do_train --do_eval --data_dir=../shared/data/mc_wikihow \
    --dev_file=$PWD/data/mc_wikihow/dev.csv --init_checkpoint="$MINILM" --output_dir=/tmp/lite/swag --max_seq_length=128 \
    --train_batch_size=16 --learning_rate=5e-5 --num_train_epochs=3
  .venv/bin/python bench/results/litert_2026-12-02/accuracy_ner_mc.py /tmp/lite/ner /tmp/lite/swag

(the README's NER and multiple-choice commands, trained on the full sets
in ../shared/data, evaluated on the bundled dev slices: the bundled train
slices leave a 3-epoch NER model at F1 0).
Exports each run with tools/export_saved_model.py (SavedModel, and
--format=litert with --quantize=none|dynamic_int8|float16), answers the
bundled dev sets with each and writes accuracy_ner_mc.md beside this file:
NER entity F1 (conlleval / seqeval default) and multiple-choice accuracy,
the change against the SavedModel in points, agreement with it, file size.
"""
import csv, os, subprocess, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
from bert_tf.data import conll
from bert_tf.export import client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
py = os.path.join(ROOT, ".venv", "bin", "python")
tool = os.path.join(ROOT, "tools", "export_saved_model.py")


def export(run, args):
  p = subprocess.run([py, tool, "--output_dir=" + run] + args, capture_output=True,
                     text=True, check=True)
  return p.stdout.strip().splitlines()[0]


def strings(rows):
  return np.array([s.encode() for s in rows], dtype=object)


def rows_of(batches, key):
  """Per-row values of output ``key`` over the batches (rows may differ in width)."""
  return [row for b in batches for row in np.asarray(b[key])]


def evaluate(run, inputs_of, score, agree, batch=32):
  """Rows of (quantize, MB, metric, points vs SavedModel, agreement %)."""
  out = run + "_exports"
  export(run, ["--export_dir=%s/sm" % out])
  sm = tf.saved_model.load(client.resolve_export(out + "/sm")).signatures["serving_default"]
  n = inputs_of(None, None)
  ref = [{k: v.numpy() for k, v in sm(**{k: tf.constant(v) for k, v in
                                         inputs_of(i, batch).items()}).items()}
         for i in range(0, n, batch)]
  base = score(ref)
  rows, notes = [("SavedModel", "-", base, 0.0, 100.0)], []
  for q in ("none", "dynamic_int8", "float16"):
    notes.append(export(run, ["--export_dir=%s/lite_%s" % (out, q), "--format=litert",
                              "--quantize=" + q]))
    path = client.resolve_litert(out + "/lite_" + q)
    sig = client.LiteRTSignature(path, num_threads=2)
    got = [sig(**inputs_of(i, batch)) for i in range(0, n, batch)]
    m = score(got)
    rows.append((q, "%.1f" % (os.path.getsize(path) / 1e6), m, 100 * (m - base),
                 100 * agree(got, ref)))
  return rows, notes


def main():
  ner_run, swag_run = sys.argv[1], sys.argv[2]
  dev = conll.read_conll(os.path.join(ROOT, "data/ner_wnut16/dev.txt"))
  sents = [" ".join(s.words) for s in dev]
  n_words = [len(s.words) for s in dev]

  def ner_inputs(i, b):
    if i is None:
      return len(sents)
    return {"sentence": strings(sents[i:i + b])}

  def ner_tags(batches):
    return [[t.decode() for t in row[:k]] for row, k in zip(rows_of(batches, "tags"), n_words)]

  def ner_f1(batches):
    return conll.entity_scores([s.tags for s in dev], ner_tags(batches))["f1"]

  def ner_agree(got, ref):
    a, b = ner_tags(got), ner_tags(ref)
    return np.mean([x == y for ra, rb in zip(a, b) for x, y in zip(ra, rb)])

  with open(os.path.join(ROOT, "data/mc_wikihow/dev.csv"), encoding="utf-8", newline="") as f:
    mc = list(csv.DictReader(f))
  n_choices = len([k for k in mc[0] if k.startswith("ending")])
  contexts = [r["sent1"] for r in mc]
  endings = [[(r["sent2"] + " " + r["ending%d" % j]).strip() for j in range(n_choices)]
             for r in mc]
  gold = np.array([int(r["label"]) for r in mc])

  def mc_inputs(i, b):
    if i is None:
      return len(mc)
    e = np.array([[s.encode() for s in row] for row in endings[i:i + b]], dtype=object)
    return {"context": strings(contexts[i:i + b]), "endings": e}

  def mc_choice(batches):
    return np.array([row.argmax() for row in rows_of(batches, "probabilities")])

  def mc_acc(batches):
    return float((mc_choice(batches) == gold).mean())

  def mc_agree(got, ref):
    return float((mc_choice(got) == mc_choice(ref)).mean())

  lines = ["# Fine-tuned all-MiniLM-L6-v2: LiteRT vs SavedModel, NER and multiple choice", "",
           "Commands: accuracy_ner_mc.py's docstring.", ""]
  for title, run, inputs, score, agree, metric, unit in (
      ("NER, WNUT-16 dev (%d tweets)" % len(sents), ner_run, ner_inputs, ner_f1, ner_agree,
       "entity F1", "word tags equal to SavedModel"),
      ("Multiple choice, WikiHow dev (%d questions of %d choices)" % (len(mc), n_choices),
       swag_run, mc_inputs, mc_acc, mc_agree, "accuracy", "choices equal to SavedModel")):
    rows, notes = evaluate(run, inputs, score, agree)
    lines += ["## " + title, "", "| export | .tflite MB | %s | vs SavedModel (points) | %s |"
              % (metric, unit), "|---|---|---|---|---|"]
    lines += ["| %s | %s | %.2f%% | %+.2f | %.2f%% |" % (q, mb, 100 * m, d, a)
              for q, mb, m, d, a in rows]
    lines += [""] + ["tool: " + n for n in notes] + [""]
  text = "\n".join(lines)
  with open(os.path.join(HERE, "accuracy_ner_mc.md"), "w", encoding="utf-8") as f:
    f.write(text)
  print(text)


if __name__ == "__main__":
  main()
