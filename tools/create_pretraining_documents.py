"""Tokenizes a corpus once into TFRecords of documents for dynamic masking.

Same input flags and format as ``tools/create_pretraining_data.py`` (one
sentence per line, a blank line between documents). Each record holds one
document's word-piece ids (``token_ids``) and its ``sentence_lengths``;
``bert_tf.data.pretraining.dynamic.dynamic_pretraining_dataset`` (used by
``tools/run_pretraining.py --dynamic``) makes sentence pairs and masks from
them on the fly, new ones every epoch.

  python tools/create_pretraining_documents.py --input_file=corpus.txt \
    --output_file=docs.tfrecord --vocab_file=vocab.txt --do_lower_case=True
"""

import sys
import time

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import app
from absl import flags

from bert_tf import errors
from bert_tf.data.pretraining import dynamic

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of globs).")
flags.DEFINE_string("output_file", None,
                    "Output TFRecord file (or comma-separated list: documents are "
                    "written round-robin over them).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_bool("preserve_unused_tokens", False,
                  "If True, Wordpiece tokenization will not be applied to words in the vocab "
                  "(the original's flag: vocab entries [unusedN] in the text stay whole).")
flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])


def main(argv):
  del argv
  start = time.time()
  last = [0.0]

  def progress(docs, tokens):
    now = time.time()
    if now - last[0] >= 2.0:
      last[0] = now
      sys.stderr.write("\r  tokenized %d documents, %d tokens" % (docs, tokens))
      sys.stderr.flush()

  try:
    num_docs, num_tokens, outputs = dynamic.write_documents(
        FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case, progress=progress,
        preserve_unused_tokens=FLAGS.preserve_unused_tokens)
  except errors.BertTfError as e:
    _startup.fail("create_pretraining_documents", e)
  if last[0]:
    sys.stderr.write("\n")
  print("wrote %d documents (%d tokens) to %s (%.1fs)" %
        (num_docs, num_tokens, ",".join(outputs), time.time() - start))


def run():
  """Console-script entry point."""
  app.run(main)


if __name__ == "__main__":
  run()
