"""The paper's Table 7 (section 5.3) on real data: frozen BERT features into a
BiLSTM tagger, beside fine-tuning.

The feature-based approach: the pretrained encoder is NOT trained; each
word's vector is taken from its first word piece (the paper's tagging
recipe) out of one or several layers, and a two-layer bidirectional LSTM
with a softmax layer on top learns the tags. Rows (the paper's, with
all-MiniLM-L6-v2's 6 layers where BERT-BASE has 12):

* ``embeddings``: the embedding output (word + position + segment, after
  LayerNorm), layer 0;
* ``second_to_last``: the output of layer L-1;
* ``last``: the output of layer L;
* ``weighted_sum_last_four``: a learned softmax-weighted sum of layers
  L-3..L times a learned scale (ELMo's scalar mix; the paper's "Sum Last
  Four Hidden" with learned weights);
* ``concat_last_four``: layers L-3..L concatenated (4H per word);
* ``weighted_sum_all``: the scalar mix of all L Transformer layers (the
  paper's "Sum All 12 Layers").

The fine-tuning row is ``tools/run_ner.py``'s dev F1 (``--fine_tuning_results``:
its ``eval_results.txt``), trained with the recipe given there.

Words: the CoNLL tokens (:func:`bert_tf.data.conll.read_conll`), each
tokenized alone with the reference tokenizer, as ``tools/run_ner.py``
does; a sentence longer than ``--max_seq_length - 2`` pieces is cut at word
boundaries into consecutive chunks, each encoded as its own
``[CLS] ... [SEP]`` sequence (no word loses its vector). A word with no
piece (all characters removed by the tokenizer) gets ``[UNK]``.

Training: Adam (``--learning_rate``), ``--epochs`` passes over the train
sentences in a seeded shuffle, batch ``--batch_size``, dropout
``--dropout`` on the LSTM inputs and outputs; the loss is the mean
cross-entropy over words. Dev entity F1 (conlleval semantics,
:func:`bert_tf.data.conll.entity_scores`) after every epoch; the table
gives the last epoch's F1 and the best epoch's.

Prints the CPU (model, avx2/avx512*/amx* flags) and the command line before
the table; writes the rows to ``--output`` (JSON).

  .venv/bin/python bench/table7_feature_based.py \\
      --fine_tuning_results=/tmp/ner_ft/eval_results.txt
"""

import argparse
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from bert_tf import tokenization  # pylint: disable=wrong-import-position
from bert_tf.data import conll  # pylint: disable=wrong-import-position
from bert_tf.modeling import encoder as encoder_lib  # pylint: disable=wrong-import-position
from bert_tf.tools.minilm_dir import minilm_dir  # pylint: disable=wrong-import-position
from _cpuinfo import cpu_info  # pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = ("embeddings", "second_to_last", "last", "weighted_sum_last_four",
        "concat_last_four", "weighted_sum_all")
PAPER = {"fine_tuning": 96.4, "embeddings": 91.0, "second_to_last": 95.6,
         "last": 94.9, "weighted_sum_last_four": 95.9, "concat_last_four": 96.1,
         "weighted_sum_all": 95.5}


def word_pieces(tokenizer, words, max_pieces):
  """Chunks of one sentence: lists of ``(piece ids, first-piece index per word)``,
  each at most ``max_pieces`` pieces, cut at word boundaries."""
  unk = tokenizer.vocab["[UNK]"]
  chunks, ids, firsts = [], [], []
  for w in words:
    p = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) or [unk]
    p = p[:max_pieces]
    if ids and len(ids) + len(p) > max_pieces:
      chunks.append((ids, firsts))
      ids, firsts = [], []
    firsts.append(len(ids))
    ids.extend(p)
  chunks.append((ids, firsts))
  return chunks


def layer_features(encoder, tokenizer, sentences, max_seq_length, batch_size=64):
  """Per sentence: float32 [n_words, L + 1, H] (embeddings, layers 1..L) at
  each word's first piece."""
  cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  chunks = []  # (sentence index, ids, firsts)
  for i, s in enumerate(sentences):
    for ids, firsts in word_pieces(tokenizer, s.words, max_seq_length - 2):
      chunks.append((i, [cls] + ids + [sep], [f + 1 for f in firsts]))

  @tf.function(reduce_retracing=True)
  def run(ids, mask):
    out = encoder({"input_ids": ids, "input_mask": mask,
                   "segment_ids": tf.zeros_like(ids)}, training=False)
    return tf.stack([out["embedding_output"]] + list(out["encoder_outputs"]), 2)

  per_chunk = [None] * len(chunks)
  order = sorted(range(len(chunks)), key=lambda k: len(chunks[k][1]))
  for b in range(0, len(order), batch_size):
    idx = order[b:b + batch_size]
    width = max(len(chunks[k][1]) for k in idx)
    ids = np.zeros([len(idx), width], np.int32)
    mask = np.zeros([len(idx), width], np.int32)
    for r, k in enumerate(idx):
      ids[r, :len(chunks[k][1])] = chunks[k][1]
      mask[r, :len(chunks[k][1])] = 1
    stacked = run(tf.constant(ids), tf.constant(mask)).numpy()
    for r, k in enumerate(idx):
      per_chunk[k] = stacked[r, chunks[k][2]]
  feats = [[] for _ in sentences]
  for (i, _, _), f in zip(chunks, per_chunk):
    feats[i].append(f)
  return [np.concatenate(f, 0) for f in feats]


class ScalarMix(keras.layers.Layer):
  """ELMo's scalar mix: ``gamma * sum_k softmax(w)_k * x[..., k, :]``.

  Input float32 [B, T, K, H]; output [B, T, H].
  """

  def build(self, input_shape):
    self.w = self.add_weight(name="w", shape=(input_shape[-2],), initializer="zeros")
    self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")

  def call(self, x):
    return self.gamma * tf.einsum("btkh,k->bth", x, tf.nn.softmax(self.w))


def build_tagger(row, num_layers, hidden, num_labels, units, dropout):
  """``(select, model)``: the layer indices the row reads, and the BiLSTM tagger."""
  last = num_layers  # index L in [embeddings, 1..L]
  select = {"embeddings": [0], "second_to_last": [last - 1], "last": [last],
            "weighted_sum_last_four": list(range(last - 3, last + 1)),
            "concat_last_four": list(range(last - 3, last + 1)),
            "weighted_sum_all": list(range(1, last + 1))}[row]
  feats = keras.Input([None, len(select), hidden], name="features")
  mask = keras.Input([None], dtype="bool", name="mask")
  if row.startswith("weighted_sum"):
    x = ScalarMix()(feats)
  else:
    x = keras.layers.Reshape([-1, len(select) * hidden])(feats)
  x = keras.layers.Dropout(dropout)(x)
  for _ in range(2):
    x = keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True))(
        x, mask=mask)
    x = keras.layers.Dropout(dropout)(x)
  logits = keras.layers.Dense(num_labels)(x)
  return select, keras.Model([feats, mask], logits)


def batches(feats, labels, select, batch_size, order):
  for b in range(0, len(order), batch_size):
    idx = order[b:b + batch_size]
    width = max(len(feats[i]) for i in idx)
    x = np.zeros([len(idx), width, len(select), feats[0].shape[-1]], np.float32)
    y = np.zeros([len(idx), width], np.int32)
    m = np.zeros([len(idx), width], bool)
    for r, i in enumerate(idx):
      n = len(feats[i])
      x[r, :n] = feats[i][:, select]
      m[r, :n] = True
      if labels is not None:
        y[r, :n] = labels[i]
    yield x, y, m


def train_row(row, args, train_feats, train_y, dev_feats, dev_sentences, label_list):
  keras.utils.set_random_seed(args.seed)
  num_layers, hidden = train_feats[0].shape[1] - 1, train_feats[0].shape[2]
  select, model = build_tagger(row, num_layers, hidden, len(label_list),
                               args.lstm_units, args.dropout)
  opt = keras.optimizers.Adam(args.learning_rate)
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  @tf.function(reduce_retracing=True)
  def step(x, y, m):
    with tf.GradientTape() as tape:
      logits = model([x, m], training=True)
      loss = loss_fn(y, logits, sample_weight=tf.cast(m, tf.float32))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  @tf.function(reduce_retracing=True)
  def predict(x, m):
    return tf.argmax(model([x, m], training=False), -1)

  rng = np.random.RandomState(args.seed)
  gold = [s.tags for s in dev_sentences]
  history = []
  t0 = time.time()
  for epoch in range(args.epochs):
    order = rng.permutation(len(train_feats))
    for x, y, m in batches(train_feats, train_y, select, args.batch_size, order):
      step(tf.constant(x), tf.constant(y), tf.constant(m))
    preds = []
    for x, _, m in batches(dev_feats, None, select, 64, np.arange(len(dev_feats))):
      p = predict(tf.constant(x), tf.constant(m)).numpy()
      preds.extend([[label_list[t] for t in p[r, :m[r].sum()]] for r in range(len(p))])
    f1 = conll.entity_scores(gold, preds)["f1"] * 100
    history.append(f1)
    print("  %-24s epoch %2d  dev F1 %.2f  (%.0f s)" % (row, epoch + 1, f1,
                                                      time.time() - t0), flush=True)
  return {"row": row, "dev_f1_last": history[-1], "dev_f1_best": max(history),
          "best_epoch": int(np.argmax(history)) + 1, "history": history,
          "seconds": time.time() - t0}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--data_dir", default=os.path.join(os.path.dirname(ROOT), "shared",
                                                     "data", "ner_wnut16"))
  ap.add_argument("--init_checkpoint", default=None, help="HF BERT dir (default: MiniLM)")
  ap.add_argument("--max_seq_length", type=int, default=128)
  ap.add_argument("--epochs", type=int, default=20)
  ap.add_argument("--batch_size", type=int, default=32)
  ap.add_argument("--learning_rate", type=float, default=1e-3)
  ap.add_argument("--lstm_units", type=int, default=256)
  ap.add_argument("--dropout", type=float, default=0.2)
  ap.add_argument("--seed", type=int, default=1)
  ap.add_argument("--rows", default=",".join(ROWS))
  ap.add_argument("--max_sentences", type=int, default=None, help="smoke runs")
  ap.add_argument("--fine_tuning_results", default=None,
                  help="tools/run_ner.py eval_results.txt for the fine-tuning row")
  ap.add_argument("--output", default="/tmp/table7.json")
  args = ap.parse_args()
  model_name, flags = cpu_info()
  print("CPU: %s; flags: %s" % (model_name, " ".join(flags) or "none"))
  print("command: %s" % " ".join(sys.argv))

  hf = args.init_checkpoint or minilm_dir()
  train = conll.read_conll(os.path.join(args.data_dir, "train.txt"))[:args.max_sentences]
  dev = conll.read_conll(os.path.join(args.data_dir, "dev.txt"))[:args.max_sentences]
  label_list = conll.label_list_from(train)
  index = {t: i for i, t in enumerate(label_list)}
  tokenizer = tokenization.FullTokenizer(os.path.join(hf, "vocab.txt"), do_lower_case=True)
  encoder = encoder_lib.BertEncoder.from_preset(hf)
  t0 = time.time()
  train_feats = layer_features(encoder, tokenizer, train, args.max_seq_length)
  dev_feats = layer_features(encoder, tokenizer, dev, args.max_seq_length)
  print("features: %d train / %d dev sentences, %d layers x %d, %.0f s" % (
      len(train), len(dev), train_feats[0].shape[1], train_feats[0].shape[2],
      time.time() - t0), flush=True)
  train_y = [np.array([index[t] for t in s.tags], np.int32) for s in train]

  results = []
  for row in args.rows.split(","):
    results.append(train_row(row, args, train_feats, train_y, dev_feats, dev, label_list))
  if args.fine_tuning_results:
    with open(args.fine_tuning_results, encoding="utf-8") as f:
      ev = dict(l.split(" = ", 1) for l in f.read().splitlines() if " = " in l)
    f1 = float(ev["eval_f1"])
    f1 = f1 * 100 if f1 <= 1 else f1
    results.insert(0, {"row": "fine_tuning", "dev_f1_last": f1, "dev_f1_best": f1})

  print("\n| system | dev F1, last epoch | dev F1, best epoch | paper (BERT-BASE, CoNLL-2003 dev) |")
  print("|---|---:|---:|---:|")
  for r in results:
    print("| %s | %.1f | %.1f | %.1f |" % (r["row"], r["dev_f1_last"], r["dev_f1_best"],
                                           PAPER[r["row"]]))
  with open(args.output, "w", encoding="utf-8") as f:
    json.dump({"cpu": [model_name, flags], "argv": sys.argv, "rows": results}, f, indent=1)


if __name__ == "__main__":
  main()
