r"""Tokenizes a corpus once into TFRecords of documents for dynamic masking.

Same input flags and format as ``tools/create_pretraining_data.py`` (one
sentence per line, a blank line between documents). Each record holds one
document's word-piece ids (``token_ids``) and its ``sentence_lengths``;
``bert_tf.data.pretraining.dynamic.dynamic_pretraining_dataset`` (used by
``tools/run_pretraining.py --dynamic``) makes sentence pairs and masks from
them on the fly, new ones every epoch.

  python tools/create_pretraining_documents.py --input_file=corpus.txt \
    --output_file=docs.tfrecord --vocab_file=vocab.txt --do_lower_case=True

Scalable mode (``--num_workers=N``, N >= 1), as ``create_pretraining_data.py``'s:
document ``k`` goes to shard ``k % num_shards``, written to
``<output_file>-0000s-of-0000S`` by N worker processes (the same records as
the default mode, grouped by shard instead of round-robin); with
``--runner=beam`` the same shards, byte for byte, from an Apache Beam
pipeline, and a manifest ``<output_file>.json``.
"""

import time

from bert_tf.tools import _startup
_startup.setup(tensorflow=False)  # TF loads only in the default mode (forked workers)

from absl import flags
from absl import logging

from bert_tf import errors
from bert_tf.tools import _text_input
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import sharded

_text_input.define_text_input_flags(
    __name__, "Output TFRecord file (or comma-separated list: documents are "
    "written round-robin over them); in scalable mode the prefix of the shard "
    "files <output_file>-00000-of-0000N.")
_text_input.define_scalable_flags(
    __name__, "0: one process, documents round-robin over the --output_file list. "
    "N >= 1: scalable mode with N worker processes and --num_shards shards.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  start = time.time()
  bar = _text_input.ProgressBar("tokenizing", "doc")

  def progress(docs, tokens):  # pylint: disable=unused-argument
    bar.update(docs, None)

  try:
    if FLAGS.num_workers < 0:
      raise errors.InputError("--num_workers must be >= 0")
    if FLAGS.num_workers == 0 and FLAGS.num_shards is not None:
      raise errors.InputError("--num_shards needs --num_workers >= 1")
    if FLAGS.num_workers and "," in FLAGS.output_file:
      raise errors.InputError(
          "--output_file must be one prefix in scalable mode, got %r" % FLAGS.output_file)
    _text_input.check_runner_flags()  # bad Beam options: one line, before any reading
    _text_input.check_input_encoding()  # one warning per non-UTF-8 file
    few = documents.few_documents_warning(FLAGS.input_file)
    if few:
      logging.warning(few)
    if FLAGS.num_workers and FLAGS.runner == "beam":
      from bert_tf.data.pretraining import beam_runner  # pylint: disable=g-import-not-at-top
      stats = beam_runner.run(
          "documents", documents.expand_input_files(FLAGS.input_file), FLAGS.output_file,
          FLAGS.vocab_file, FLAGS.num_shards or FLAGS.num_workers,
          FLAGS.beam_pipeline_options,
          flags=dict(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                     preserve_unused_tokens=FLAGS.preserve_unused_tokens,
                     input_file=FLAGS.input_file),
          do_lower_case=FLAGS.do_lower_case,
          preserve_unused_tokens=FLAGS.preserve_unused_tokens)
      print("wrote %d documents to %d shards %s and the manifest %s on Beam (%.1fs)" %
            (stats["num_instances"], len(stats["files"]), ",".join(stats["files"]),
             stats["manifest"], time.time() - start))
      return
    if FLAGS.num_workers:
      stats = sharded.create_sharded(
          documents.expand_input_files(FLAGS.input_file), FLAGS.output_file,
          FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
          num_workers=FLAGS.num_workers, num_shards=FLAGS.num_shards,
          preserve_unused_tokens=FLAGS.preserve_unused_tokens, kind="documents")
      print("wrote %d documents to %d shards %s (%.1fs; peak RSS: main %.0f MB, "
            "workers %s MB)" %
            (stats["num_instances"], len(stats["files"]), ",".join(stats["files"]),
             time.time() - start, stats["peak_rss_mb"],
             "+".join("%.0f" % r for r in stats["worker_peak_rss_mb"])))
      return
    _startup.import_tensorflow()  # the default mode's writer module imports it
    from bert_tf.data.pretraining import dynamic  # pylint: disable=g-import-not-at-top
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
