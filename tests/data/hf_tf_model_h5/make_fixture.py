"""Writes this folder: a tiny TFBertForSequenceClassification saved by
transformers 4.57.6's TensorFlow classes (tf_model.h5), and its own logits.

Not run by the tests (they read the files it wrote). To rebuild, with the
project's venv (TF 2.21, tf-keras 2.21):

  pip install --no-deps --target /tmp/tf4 transformers==4.57.6 \
      "tokenizers==0.22.*" "huggingface-hub<1.0"
  TF_USE_LEGACY_KERAS=1 PYTHONPATH=/tmp/tf4 python tests/data/hf_tf_model_h5/make_fixture.py

The vocab is the specials plus the word pieces (all-MiniLM-L6-v2's uncased
vocab, data/vocab/uncased_vocab.txt) of the two movie-review sentences in
expected.json; the weights are seeded normal(0, 0.2) draws for a 2-layer, 32-wide
BERT with 3 named labels. expected.json holds the sentences, the ids
transformers' BertTokenizer gives them and the TF model's logits.
"""

import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def main():
  assert os.environ.get("TF_USE_LEGACY_KERAS") == "1"
  import numpy as np
  import tensorflow as tf
  import transformers
  assert transformers.__version__ == "4.57.6", transformers.__version__
  with open(os.path.join(ROOT, "data", "movie_review_sentences", "dev.tsv"),
            encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  sentences = [rows[0][0], rows[-1][0]]
  full = transformers.BertTokenizer(os.path.join(ROOT, "data", "vocab", "uncased_vocab.txt"))
  pieces = sorted({p for s in sentences for p in full.tokenize(s)})
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + pieces
  with open(os.path.join(HERE, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(vocab) + "\n")
  tok = transformers.BertTokenizer(os.path.join(HERE, "vocab.txt"))
  config = transformers.BertConfig(
      vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=48, max_position_embeddings=64, hidden_act="gelu",
      id2label={0: "negative", 1: "neutral", 2: "positive"},
      label2id={"negative": 0, "neutral": 1, "positive": 2},
      architectures=["BertForSequenceClassification"])
  tf.keras.utils.set_random_seed(0)
  model = transformers.TFBertForSequenceClassification(config)
  enc = tok(sentences, padding=True, return_tensors="tf")
  model(enc)  # builds the weights
  # Weights far from the 0.02 init, so that the logits tell the sentences
  # (and any misread weight) apart.
  rng = np.random.RandomState(0)
  for w in model.weights:
    w.assign(rng.normal(0, 0.2, w.shape).astype(np.float32))
  logits = model(enc, training=False).logits.numpy()
  model.save_pretrained(HERE)  # tf_model.h5 + config.json
  with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
    json.dump({"sentences": sentences, "input_ids": enc["input_ids"].numpy().tolist(),
               "attention_mask": enc["attention_mask"].numpy().tolist(),
               "logits": np.asarray(logits, np.float64).tolist(),
               "made_with": "transformers %s TFBertForSequenceClassification, "
                            "tensorflow %s" % (transformers.__version__, tf.__version__)},
              f, indent=1)
  print(sorted(os.listdir(HERE)), logits)


if __name__ == "__main__":
  sys.exit(main())
