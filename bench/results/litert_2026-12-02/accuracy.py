"""LiteRT accuracy vs the SavedModel on the bundled dev sets (issue 61 item 4).

  .venv/bin/python bench/results/litert_2026-12-02/accuracy.py

The real all-MiniLM-L6-v2 encoder with heads made once with seed 0 (no
fine-tuned MiniLM is installed; the same weights in every format, so
agreement is the measure): a 2-label classifier on the movie-review dev
sentences (data/movie_review_sentences/dev.tsv), a tagger (WNUT-16's 13
labels) on data/ner_wnut16/dev.txt sentences, multiple choice on
data/mc_wikihow/dev.csv. The SavedModel (export_classifier /
export_multiple_choice; the tagger: the Keras model on BertPreprocessor's
ids, the SavedModel's computation) vs LiteRT float32 / dynamic_int8 /
float16: labels equal, max |logit diff|, agreement with float32 and
accuracy against gold (a random head: near chance, reported for the
"within 1 point" check). Writes accuracy.md beside this file.
"""
import csv, json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import keras
from bert_tf import checkpoints, preprocessing
from bert_tf.modeling import presets
from bert_tf.export import client, litert, saved_model, multiple_choice as mc_export
from bert_tf.modeling import models, tagging, multiple_choice
from bert_tf.tools.minilm_dir import minilm_dir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SEQ = 128
work = "/tmp/litert_accuracy"
keras.utils.set_random_seed(0)
mdir = minilm_dir()
config = checkpoints.read_hf_config(mdir)
pre = preprocessing.BertPreprocessor(os.path.join(mdir, "vocab.txt"), True, SEQ)

with open(os.path.join(ROOT, "data/movie_review_sentences/dev.tsv"), encoding="utf-8") as f:
  rows = [l.rstrip("\n").split("\t") for l in f][1:]
sents, gold = [r[0] for r in rows], np.array([int(r[1]) for r in rows])
blocks = open(os.path.join(ROOT, "data/ner_wnut16/dev.txt"), encoding="utf-8").read().split("\n\n")
ner = [[l.split("\t") for l in b.splitlines()] for b in blocks if b.strip()]
ner_text = [" ".join(w for w, _ in s) for s in ner]
with open(os.path.join(ROOT, "data/mc_wikihow/dev.csv"), encoding="utf-8") as f:
  mc_rows = list(csv.DictReader(f))

def b(v):
  return np.array([x.encode() for x in v], dtype=object)

def run_lite(path, feed, n, key, batch=64):
  sig = client.LiteRTSignature(path, num_threads=2)
  outs = []
  for i in range(0, n, batch):
    outs.append(sig(**{k: v[i:i + batch] for k, v in feed.items()})[key])
  return np.concatenate(outs)

table = []
def report(task, ref_logits, feed, n, key, model, what, kw, gold=None, mask=None):
  base_labels = ref_logits.argmax(-1)
  for q in litert.QUANTIZE:
    t = time.time()
    d = litert.export_litert(what, model, pre, os.path.join(work, task, q), quantize=q, **kw)
    path = os.path.join(d, litert.MODEL_FILE)
    got = run_lite(path, feed, n, key)
    lab = got.argmax(-1)
    diff = np.abs(got - ref_logits)
    if mask is not None:
      diff = diff * mask[..., None]
      agree = float(((lab == base_labels) * mask).sum() / mask.sum())
      acc = None
    else:
      agree = float((lab == base_labels).mean())
      acc = None if gold is None else float((lab == gold).mean())
    table.append((task, q, os.path.getsize(path) / 1e6, float(diff.max()), agree,
                  acc, None if gold is None else float((base_labels == gold).mean())))
    print(table[-1], "%.0fs" % (time.time() - t), flush=True)

# Classifier: SavedModel export vs LiteRT.
cls = models.build_classifier(config, 2)
presets.load_encoder_weights(cls.encoder, mdir)
sm = tf.saved_model.load(saved_model.export_classifier(
    cls, pre, ["0", "1"], os.path.join(work, "cls_sm"), "sst-2")).signatures["serving_default"]
ref = np.concatenate([sm(text=tf.constant(sents[i:i + 64]))["logits"].numpy()
                      for i in range(0, len(sents), 64)])
report("classifier (movie dev, %d)" % len(sents), ref, {"text": b(sents)}, len(sents),
       "logits", cls, "classifier", dict(labels=["0", "1"]), gold=gold)

# Tagger: the Keras model on the preprocessor's ids (first window, per piece).
tg = tagging.BertTokenClassifier(config, 13)
presets.load_encoder_weights(tg.encoder, mdir)
refs, masks = [], []
for i in range(0, len(ner_text), 64):
  f = pre(tf.constant(ner_text[i:i + 64]))
  refs.append(tg(f, training=False).numpy()); masks.append(f["input_mask"].numpy())
report("ner pieces (wnut16 dev, %d sentences)" % len(ner_text), np.concatenate(refs),
       {"sentence": b(ner_text)}, len(ner_text), "logits", tg, "ner",
       dict(labels=["L%d" % i for i in range(13)]), mask=np.concatenate(masks))

# Multiple choice: SavedModel vs LiteRT.
# SWAG's layout: context sent1, choice k = sent2 + ending<k>.
ctx = [r["sent1"] for r in mc_rows]
end_keys = ["ending%d" % k for k in range(4)]
ends = [[(r["sent2"] + " " + r[k]).strip() for k in end_keys] for r in mc_rows]
mgold = np.array([int(r["label"]) for r in mc_rows])
mcm = multiple_choice.build_multiple_choice(config)
presets.load_encoder_weights(mcm.encoder, mdir)
msm = tf.saved_model.load(mc_export.export_multiple_choice(
    mcm, pre, os.path.join(work, "mc_sm"), len(end_keys))).signatures["serving_default"]
mref = np.concatenate([msm(context=tf.constant(ctx[i:i + 16]),
                           endings=tf.constant(ends[i:i + 16]))["logits"].numpy()
                       for i in range(0, len(ctx), 16)])
report("multiple choice (wikiHow dev, %d)" % len(ctx), mref,
       {"context": b(ctx), "endings": np.array([b(e) for e in ends])}, len(ctx), "logits",
       mcm, "swag", dict(num_choices=len(end_keys)), gold=mgold)

lines = ["# LiteRT vs SavedModel, all-MiniLM-L6-v2 + seed-0 heads, max_seq_length %d" % SEQ, "",
         "Command: `.venv/bin/python bench/results/litert_2026-12-02/accuracy.py` "
         "(2 shared vCPUs, other agents' jobs running; timings not measured here).", "",
         "| task | quantize | .tflite MB | max abs logit diff vs SavedModel | labels equal to SavedModel | accuracy vs gold | SavedModel accuracy |",
         "|---|---|---|---|---|---|---|"]
for t, q, mb, d, a, acc, base in table:
  lines.append("| %s | %s | %.1f | %.2e | %.2f%% | %s | %s |" % (
      t, q, mb, d, 100 * a, "-" if acc is None else "%.2f%%" % (100 * acc),
      "-" if base is None else "%.2f%%" % (100 * base)))
open(os.path.join(HERE, "accuracy.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
