r"""Learns a WordPiece vocab.txt from a corpus, in the original BERT layout.

``[PAD]`` = 0, ``[unused0..98]`` = 1..99, ``[UNK] [CLS] [SEP] [MASK]`` =
100..103, further ``[unusedN]`` slots (``--num_unused`` in all, 994 in the
original), then the learned word pieces (tensorflow-text's WordPiece
learner on text normalized as the reference BasicTokenizer does). See
``bert_tf/vocab_builder.py``.

  python tools/build_vocab.py --input_file=corpus.txt --output_file=vocab.txt \
    --vocab_size=30522 --do_lower_case=True
"""

import time

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf import errors
from bert_tf import vocab_builder

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of globs).")
flags.DEFINE_string("output_file", None, "Output vocab file (one token per line).")
flags.DEFINE_integer("vocab_size", 30522, "Lines of the output vocab, reserved tokens included.")
flags.DEFINE_bool("do_lower_case", True, "Learn an uncased vocab (lower case, strip accents).")
flags.DEFINE_integer("num_unused", vocab_builder.ORIGINAL_NUM_UNUSED,
                     "[unusedN] slots reserved for later special tokens (>= 99).")
flags.DEFINE_integer("max_unique_chars", 1000, "Alphabet size cap of the learner.")
flags.DEFINE_integer("min_count", 10, "Lower bound of the learner's count-threshold search.")
flags.mark_flags_as_required(["input_file", "output_file"])


def main(argv):
  del argv
  start = time.time()
  try:
    vocab, num_learned = vocab_builder.build_vocab(
        FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_size,
        do_lower_case=FLAGS.do_lower_case, num_unused=FLAGS.num_unused,
        max_unique_chars=FLAGS.max_unique_chars, min_count=FLAGS.min_count)
  except (errors.InputError, errors.VocabBuildError) as e:
    _startup.fail("build_vocab", e)
  print("wrote %s: %d tokens (%d learned) (%.1fs)" %
        (FLAGS.output_file, len(vocab), num_learned, time.time() - start))


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
