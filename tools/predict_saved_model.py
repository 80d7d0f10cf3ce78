"""Prints predictions of an exported SavedModel for raw sentences.

Imports only TensorFlow and tensorflow-text (no model or export code; the
standard-library start-up module only filters TensorFlow's banner), as a client
or TF Serving would: proof that the export is self-contained. Pair exports
(inputs ``text_a``, ``text_b``) are recognised from the export's
``assets.extra/bert_tf_export.json``; ``--pair`` forces them.

  python tools/predict_saved_model.py /tmp/export/1 "a gorgeous film" "dull"
  python tools/predict_saved_model.py --pair /tmp/export/1 "text a" "text b"
"""

import json
import os
import sys

from bert_tf.tools import _startup  # standard library only: a quiet TF start-up

tf = _startup.import_tensorflow()
import tensorflow_text  # noqa: F401,E402  pylint: disable=wrong-import-position  (registers the tokenizer ops)


def _is_pair(path):
  meta = os.path.join(path, "assets.extra", "bert_tf_export.json")
  if not os.path.exists(meta):
    return False
  with open(meta, encoding="utf-8") as f:
    return bool(json.load(f).get("is_pair"))


def main(argv):
  args = [a for a in argv[1:] if a != "--pair"]
  if len(args) < 2:
    sys.exit("usage: predict_saved_model.py [--pair] SAVED_MODEL_DIR TEXT [TEXT ...]")
  if not os.path.exists(os.path.join(args[0], "saved_model.pb")):
    sys.exit("predict_saved_model: error: %s has no saved_model.pb (pass the "
             "version directory, e.g. EXPORT_DIR/1)" % args[0])
  pair = "--pair" in argv or _is_pair(args[0])
  fn = tf.saved_model.load(args[0]).signatures["serving_default"]
  texts = args[1:]
  if pair:
    if len(texts) % 2:
      sys.exit("predict_saved_model: error: a pair export needs an even number "
               "of texts (text_a text_b ...), got %d" % len(texts))
    out = fn(text_a=tf.constant(texts[0::2]), text_b=tf.constant(texts[1::2]))
    texts = ["%s | %s" % ab for ab in zip(texts[0::2], texts[1::2])]
  else:
    out = fn(text=tf.constant(texts))
  if "predictions" in out:  # regression (STS-B)
    for text, value in zip(texts, out["predictions"].numpy()):
      print("%.4f  %s" % (value, text))
    return
  for text, label, probs in zip(texts, out["labels"].numpy(),
                                out["probabilities"].numpy()):
    print("%-6s p=%s  %s" % (label.decode(), " ".join("%.3f" % p for p in probs),
                             text))


def run():
  """Console-script entry point."""
  main(sys.argv)


if __name__ == "__main__":
  run()
