"""Prints predictions of an exported SavedModel for raw sentences.

Imports only TensorFlow and tensorflow-text (no project code), as a client
or TF Serving would: proof that the export is self-contained.

  python tools/predict_saved_model.py /tmp/export/1 "a gorgeous film" "dull"
  python tools/predict_saved_model.py --pair /tmp/export/1 "text a" "text b"
"""

import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)


def main(argv):
  pair = "--pair" in argv
  args = [a for a in argv[1:] if a != "--pair"]
  if len(args) < 2:
    sys.exit("usage: predict_saved_model.py [--pair] SAVED_MODEL_DIR TEXT [TEXT ...]")
  fn = tf.saved_model.load(args[0]).signatures["serving_default"]
  texts = args[1:]
  if pair:
    out = fn(text_a=tf.constant(texts[0::2]), text_b=tf.constant(texts[1::2]))
    texts = ["%s | %s" % ab for ab in zip(texts[0::2], texts[1::2])]
  else:
    out = fn(text=tf.constant(texts))
  for text, label, probs in zip(texts, out["labels"].numpy(),
                                out["probabilities"].numpy()):
    print("%-6s p=%s  %s" % (label.decode(), " ".join("%.3f" % p for p in probs),
                             text))


if __name__ == "__main__":
  main(sys.argv)
