r"""Creates masked-LM / next-sentence TFRecords from raw text.

Same flags and output as google-research/bert ``create_pretraining_data.py``:
one sentence per line, a blank line between documents; records hold
``input_ids``, ``input_mask``, ``segment_ids``, ``masked_lm_positions``,
``masked_lm_ids``, ``masked_lm_weights``, ``next_sentence_labels``.

Faithful mode (default, ``--num_workers=0``): the original's records, record
for record, for the same files, vocab, flags and ``--random_seed``
(including ``--do_whole_word_mask``), several times faster than the
original. The whole corpus is held in memory, as in the original.

  python tools/create_pretraining_data.py --input_file=corpus.txt \
    --output_file=out.tfrecord --vocab_file=vocab.txt --do_lower_case=True

Scalable mode (``--num_workers=N``, N >= 1): streams documents in windows
with bounded memory, N processes, ``--num_shards`` output files
``<output_file>-00000-of-0000S`` each with its own seeded stream. Same
algorithm and statistics, different random draws and a windowed choice of
random-next documents: see ``bert_tf/data/pretraining/sharded.py``.

On Apache Beam (``--runner=beam``, scalable mode only): the same shards,
byte for byte, made by a Beam pipeline (one element per shard) on any Beam
runner, with a manifest ``<output_file>.json`` that ``run_pretraining.py
--input_file`` reads; see ``bert_tf/data/pretraining/beam_runner.py``:

  python tools/create_pretraining_data.py --input_file='corpus/*.txt' \
    --output_file=out/wiki --vocab_file=vocab.txt --num_workers=2 --num_shards=64 \
    --runner=beam --beam_pipeline_options=runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing

A progress bar (tqdm) goes to stderr when it is a terminal (``--noprogress``
turns it off).
"""

import time

from bert_tf.tools import _startup
_startup.setup(tensorflow=False)

from absl import flags
from absl import logging

from bert_tf import errors
from bert_tf.tools import _text_input
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import faithful
from bert_tf.data.pretraining import sharded

FLAGS = flags.FLAGS
_text_input.define_text_input_flags(__name__, "Output TFRecord file (or comma-separated "
                                    "list); in scalable mode the prefix of the shard "
                                    "files <output_file>-00000-of-0000N.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking "
                  "(faithful mode only).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences shorter than the maximum length.")
_text_input.define_scalable_flags(
    __name__, "0: faithful mode (the original's records, one process). N >= 1: "
    "scalable mode with N worker processes and sharded outputs.")
flags.DEFINE_integer("window_tokens", 250000,
                     "Scalable mode: tokens per window of documents (bounds memory; "
                     "random-next segments come from the same window).")


def main(argv):
  del argv
  start = time.time()
  try:
    if FLAGS.num_workers < 0:
      raise errors.InputError("--num_workers must be >= 0")
    _text_input.check_runner_flags()  # bad Beam options: one line, before any reading
    _text_input.check_input_encoding()  # one warning per non-UTF-8 file
    few = documents.few_documents_warning(FLAGS.input_file)
    if few:
      logging.warning(few)
    if FLAGS.num_workers == 0:
      if FLAGS.num_shards is not None:
        raise errors.InputError("--num_shards needs --num_workers >= 1")
      bar = _text_input.ProgressBar("creating instances", "doc")
      timings = {}
      num_docs, num_instances, outputs = faithful.create_pretraining_data(
          FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file,
          do_lower_case=FLAGS.do_lower_case,
          do_whole_word_mask=FLAGS.do_whole_word_mask,
          max_seq_length=FLAGS.max_seq_length,
          max_predictions_per_seq=FLAGS.max_predictions_per_seq,
          random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
          masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
          progress=bar.update, timings=timings,
          preserve_unused_tokens=FLAGS.preserve_unused_tokens)
      bar.close()
      print("wrote %d instances from %d documents to %s (%.1fs; read+tokenize %.1fs, "
            "create %.1fs, write %.1fs; peak RSS %.0f MB)" %
            (num_instances, num_docs, ",".join(outputs), time.time() - start,
             timings["read_tokenize"], timings["create"], timings["write"],
             sharded.peak_rss_mb()))
    else:
      if FLAGS.do_whole_word_mask:
        raise errors.InputError(
            "--do_whole_word_mask is only offered in faithful mode (--num_workers=0)")
      if "," in FLAGS.output_file:
        raise errors.InputError(
            "--output_file must be one prefix in scalable mode, got %r" % FLAGS.output_file)
    if FLAGS.num_workers and FLAGS.runner == "beam":
      from bert_tf.data.pretraining import beam_runner  # pylint: disable=g-import-not-at-top
      instance_flags = dict(
          random_seed=FLAGS.random_seed, max_seq_length=FLAGS.max_seq_length,
          dupe_factor=FLAGS.dupe_factor, short_seq_prob=FLAGS.short_seq_prob,
          masked_lm_prob=FLAGS.masked_lm_prob,
          max_predictions_per_seq=FLAGS.max_predictions_per_seq,
          window_tokens=FLAGS.window_tokens)
      stats = beam_runner.run(
          "instances", documents.expand_input_files(FLAGS.input_file), FLAGS.output_file,
          FLAGS.vocab_file, FLAGS.num_shards or FLAGS.num_workers,
          FLAGS.beam_pipeline_options,
          flags=dict(instance_flags, vocab_file=FLAGS.vocab_file,
                     do_lower_case=FLAGS.do_lower_case,
                     preserve_unused_tokens=FLAGS.preserve_unused_tokens,
                     input_file=FLAGS.input_file),
          do_lower_case=FLAGS.do_lower_case,
          preserve_unused_tokens=FLAGS.preserve_unused_tokens, **instance_flags)
      print("wrote %d instances to %d shards %s and the manifest %s on Beam (%.1fs; "
            "peak RSS per Beam worker %s MB)" %
            (stats["num_instances"], len(stats["files"]), ",".join(stats["files"]),
             stats["manifest"], time.time() - start,
             "+".join("%.0f" % r for r in stats["worker_peak_rss_mb"]) or "-"))
    elif FLAGS.num_workers:
      bar = _text_input.ProgressBar("reading input (all shards)", "B")
      stats = sharded.create_sharded(
          documents.expand_input_files(FLAGS.input_file), FLAGS.output_file,
          FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
          num_workers=FLAGS.num_workers, num_shards=FLAGS.num_shards,
          random_seed=FLAGS.random_seed, max_seq_length=FLAGS.max_seq_length,
          dupe_factor=FLAGS.dupe_factor, short_seq_prob=FLAGS.short_seq_prob,
          masked_lm_prob=FLAGS.masked_lm_prob,
          max_predictions_per_seq=FLAGS.max_predictions_per_seq,
          window_tokens=FLAGS.window_tokens, progress=bar.update,
          preserve_unused_tokens=FLAGS.preserve_unused_tokens)
      bar.close()
      print("wrote %d instances to %d shards %s (%.1fs; peak RSS: main %.0f MB, "
            "workers %s MB)" %
            (stats["num_instances"], len(stats["files"]), ",".join(stats["files"]),
             time.time() - start, stats["peak_rss_mb"],
             "+".join("%.0f" % r for r in stats["worker_peak_rss_mb"])))
  except errors.BertTfError as e:
    _startup.fail("create_pretraining_data", e)


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
