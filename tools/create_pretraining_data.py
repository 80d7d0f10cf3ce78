"""Creates masked-LM / next-sentence TFRecords from raw text.

Same flags and output as google-research/bert ``create_pretraining_data.py``:
one sentence per line, a blank line between documents; records hold
``input_ids``, ``input_mask``, ``segment_ids``, ``masked_lm_positions``,
``masked_lm_ids``, ``masked_lm_weights``, ``next_sentence_labels``.

  python tools/create_pretraining_data.py --input_file=corpus.txt \
    --output_file=out.tfrecord --vocab_file=vocab.txt --do_lower_case=True
"""

import sys
import time

import _bootstrap  # pylint: disable=unused-import
from absl import app
from absl import flags

from bert_tf import tokenization
from bert_tf.data import pretraining_data

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of globs).")
flags.DEFINE_string("output_file", None, "Output TFRecord file (or comma-separated list).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_bool("do_whole_word_mask", False, "Whether to use whole word masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences shorter than the maximum length.")
flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])


def main(argv):
  del argv
  start = time.time()
  last = [0.0]

  def progress(done, total):
    now = time.time()
    if now - last[0] >= 2.0 or done == total:
      last[0] = now
      sys.stderr.write("\r  creating instances: %d/%d documents (%.0f%%)" %
                       (done, total, 100.0 * done / total))
      if done == total:
        sys.stderr.write("\n")
      sys.stderr.flush()

  try:
    num_docs, num_instances, outputs = pretraining_data.create_pretraining_data(
        FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
        progress=progress)
  except (pretraining_data.InputError, tokenization.VocabError) as e:
    sys.exit("create_pretraining_data: error: %s" % e)
  print("wrote %d instances from %d documents to %s (%.1fs)" %
        (num_instances, num_docs, ",".join(outputs), time.time() - start))


if __name__ == "__main__":
  app.run(main)
