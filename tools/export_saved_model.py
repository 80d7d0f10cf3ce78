"""Exports a fine-tuned run (``run_classifier.py --output_dir``) as a SavedModel.

Reads ``bert_config.json``, ``vocab.txt``, ``classifier_config.json`` and the
best dev model (``best/``, when the run kept one), else the latest
checkpoint (or ``--checkpoint``) of ``--output_dir`` and writes
``--export_dir/<version>/`` in TF Serving's layout:

  --what=classifier    strings in, probabilities/labels out (the default)
  --what=preprocessor  strings in, input_word_ids/input_mask/input_type_ids out
  --what=encoder       token ids in, sequence_output/pooled_output/
                       encoder_outputs_<i> out

  python tools/export_saved_model.py --output_dir=/tmp/sst2 \
    --export_dir=/tmp/sst2_export --what=classifier

See ``export/saved_model.py`` for the signatures.
"""

import sys

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import app
from absl import flags

from bert_tf import config as config_lib
from bert_tf import tokenization

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "The run_classifier.py --output_dir to export.")
flags.DEFINE_string("export_dir", None, "Writes EXPORT_DIR/<version>/.")
flags.DEFINE_enum("what", "classifier", ["classifier", "preprocessor", "encoder"],
                  "Which part to export.")
flags.DEFINE_integer("max_seq_length", None,
                     "Tokens per input (default: the run's max_seq_length).")
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix (default: best/ if "
                    "present, else the latest).")
flags.DEFINE_integer("version", None, "Version number (default: next free).")
flags.mark_flags_as_required(["output_dir", "export_dir"])


def main(argv):
  del argv
  from bert_tf.export import fine_tuned  # pylint: disable=g-import-not-at-top
  from bert_tf.export import saved_model  # pylint: disable=g-import-not-at-top
  try:
    run = fine_tuned.load_fine_tuned(FLAGS.output_dir, FLAGS.checkpoint,
                                     FLAGS.max_seq_length)
    if FLAGS.what == "classifier":
      path = saved_model.export_classifier(
          run.model, run.preprocessor, run.labels, FLAGS.export_dir,
          run.task_name, run.is_pair, FLAGS.version,
          is_regression=run.is_regression)
    elif FLAGS.what == "preprocessor":
      path = saved_model.export_preprocessor(run.preprocessor, FLAGS.export_dir,
                                             FLAGS.version)
    else:
      path = saved_model.export_encoder(run.model.encoder, FLAGS.export_dir,
                                        FLAGS.version,
                                        run.preprocessor.max_seq_length)
  except (fine_tuned.FineTunedDirError, config_lib.ConfigError,
          tokenization.VocabError, FileExistsError, ValueError) as e:
    _startup.fail("export_saved_model", e)
  meta = saved_model.read_metadata(path)
  version = meta["min_tf_serving_version"]
  print("exported %s (%s, checkpoint %s) to %s; TF Serving %s" % (
      FLAGS.what, run.task_name, run.checkpoint, path,
      "any version (core ops only)" if version == "any" else ">= " + version))


def run():
  """Console-script entry point."""
  app.run(main)


if __name__ == "__main__":
  run()
