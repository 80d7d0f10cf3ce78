r"""Tokenizes a corpus once into TFRecords of documents for dynamic masking.

Same input flags and format as ``tools/create_pretraining_data.py`` (one
sentence per line, a blank line between documents). Each record holds one
document's word-piece ids (``token_ids``) and its ``sentence_lengths``;
``bert_tf.data.pretraining.dynamic.dynamic_pretraining_dataset`` (used by
``tools/run_pretraining.py --dynamic``) makes sentence pairs and masks from
them on the fly, new ones every epoch.

  python tools/create_pretraining_documents.py --input_file=corpus.txt \
    --output_file=docs.tfrecord --vocab_file=vocab.txt --do_lower_case=True
"""

import time

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf import errors
from bert_tf.tools import _text_input
from bert_tf.data.pretraining import dynamic

_text_input.define_text_input_flags(
    __name__, "Output TFRecord file (or comma-separated list: documents are "
    "written round-robin over them).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  start = time.time()
  bar = _text_input.ProgressBar("tokenizing", "doc")

  def progress(docs, tokens):  # pylint: disable=unused-argument
    bar.update(docs, None)

  try:
    _text_input.check_input_encoding()  # one warning per non-UTF-8 file
    num_docs, num_tokens, outputs = dynamic.write_documents(
        FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case, progress=progress,
        preserve_unused_tokens=FLAGS.preserve_unused_tokens)
  except errors.BertTfError as e:
    _startup.fail("create_pretraining_documents", e)
  bar.close()
  print("wrote %d documents (%d tokens) to %s (%.1fs)" %
        (num_docs, num_tokens, ",".join(outputs), time.time() - start))


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
