"""Fine-tunes BERT on a classification task, evaluates, predicts, exports.

Flags follow google-research/bert ``run_classifier.py``; added:
``--export_dir`` (a TF Serving SavedModel with the tokenizer inside),
``--distribution_strategy``, ``--optimizer``, ``--dtype``,
``--bucket_by_length``, the GLUE/XNLI tasks the original lacks (STS-B as
regression, QQP, MNLI matched + mismatched, QNLI, RTE, WNLI), generic
``--task_name=tsv|csv`` files (``--text_a_column``, ``--text_b_column``,
``--label_column``, ``--labels``), ``--xnli_language``, and prepared
tensorflow-datasets GLUE data (``--tfds_name=glue/sst2
--tfds_data_dir=DIR``; nothing is downloaded). ``--init_checkpoint`` takes
our checkpoints, the original ``bert_model.ckpt``, or a Hugging Face BERT
directory (then ``--bert_config_file`` and ``--vocab_file`` default to its
files). With ``--do_eval`` the dev set is scored after each epoch and the
best model kept in ``OUTPUT_DIR/best/``; ``--do_predict`` and
``--export_dir`` use it when present. ``--do_predict`` writes
``test_results.tsv`` (as the original) and the GLUE submission file
(``SST-2.tsv``, ``MNLI-m.tsv`` + ``MNLI-mm.tsv``, ...).

  python tools/run_classifier.py --task_name=sst-2 --do_train --do_eval \
    --data_dir=data/movie_review_sentences --init_checkpoint=HF_DIR \
    --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export
"""

import sys

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import app
from absl import flags

from bert_tf.tools import _common
from bert_tf import checkpoints
from bert_tf import classifier
from bert_tf import config as config_lib
from bert_tf import tokenization
from bert_tf.data import classifier_data

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Directory with the task files in the GLUE/XNLI layout (train.tsv, dev.tsv, test.tsv; MNLI dev_matched.tsv, ...).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.")
flags.DEFINE_string("task_name", None, "Task (case-insensitive): " +
                    ", ".join(classifier_data.task_names()) +
                    ". Default with --tfds_name: its GLUE task.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the pretrained model.")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results go.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights: ours, original TF1, or a Hugging Face directory.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum total input length in WordPiece tokens.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the test set (test_results.tsv).")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (Adam).")
flags.DEFINE_float("num_train_epochs", 3.0, "Number of training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps for linear warm-up.")
flags.DEFINE_integer("iterations_per_loop", 50, "Steps per loop (and per progress line).")
flags.DEFINE_string("export_dir", None, "Export a SavedModel to EXPORT_DIR/<version>/.")
flags.DEFINE_enum("dtype", "float32", ["float32", "mixed_bfloat16", "mixed_float16"], "Compute dtype policy.")
flags.DEFINE_bool("bucket_by_length", True, "Batch training examples of similar length (faster).")
flags.DEFINE_string("xnli_language", "en", "XNLI: language of multinli.train.<lang>.tsv and of the dev/test rows.")
flags.DEFINE_string("text_a_column", None, "tsv/csv tasks: header name of the first text column.")
flags.DEFINE_string("text_b_column", None, "tsv/csv tasks: header name of the second text column (pair tasks).")
flags.DEFINE_string("label_column", None, "tsv/csv tasks: header name of the label column.")
flags.DEFINE_list("labels", None, "tsv/csv tasks: label names in id order (default: sorted train labels).")
flags.DEFINE_string("tfds_name", None, "Read a prepared tensorflow-datasets GLUE set instead of --data_dir, e.g. glue/sst2.")
flags.DEFINE_string("tfds_data_dir", None, "tensorflow-datasets data_dir holding --tfds_name (never downloaded).")
flags.DEFINE_bool("keep_best", True, "With --do_train --do_eval: keep the best dev model in OUTPUT_DIR/best/.")
_common.define_training_flags()
flags.mark_flags_as_required(["output_dir"])


def main(argv):
  del argv
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
    sys.exit("run_classifier: error: at least one of --do_train, --do_eval, "
             "--do_predict or --export_dir must be set")
  task_name = FLAGS.task_name
  if not task_name and FLAGS.tfds_name:
    task_name = classifier_data.TFDS_CONFIGS.get(FLAGS.tfds_name.split("/")[-1].split(":")[0])
  if not task_name:
    sys.exit("run_classifier: error: --task_name is required (or a GLUE --tfds_name)")
  if not (FLAGS.data_dir or FLAGS.tfds_name):
    sys.exit("run_classifier: error: --data_dir (or --tfds_name) is required")
  if FLAGS.tfds_name and not FLAGS.tfds_data_dir:
    sys.exit("run_classifier: error: --tfds_name needs --tfds_data_dir (nothing is downloaded)")
  try:
    strategy = _common.strategy_from_flags()
    params = classifier.ClassifierParams(
        task_name=task_name, data_dir=FLAGS.data_dir, output_dir=FLAGS.output_dir,
        vocab_file=FLAGS.vocab_file, bert_config_file=FLAGS.bert_config_file,
        init_checkpoint=FLAGS.init_checkpoint, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size,
        learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.num_train_epochs,
        warmup_proportion=FLAGS.warmup_proportion,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        iterations_per_loop=FLAGS.iterations_per_loop, optimizer=FLAGS.optimizer,
        seed=FLAGS.seed, export_dir=FLAGS.export_dir,
        bucket_by_length=FLAGS.bucket_by_length, dtype=FLAGS.dtype,
        xnli_language=FLAGS.xnli_language, text_a_column=FLAGS.text_a_column,
        text_b_column=FLAGS.text_b_column, label_column=FLAGS.label_column,
        labels=FLAGS.labels, tfds_name=FLAGS.tfds_name,
        tfds_data_dir=FLAGS.tfds_data_dir, keep_best=FLAGS.keep_best)
    classifier.run_classifier(params, strategy, do_train=FLAGS.do_train,
                              do_eval=FLAGS.do_eval, do_predict=FLAGS.do_predict)
  except (classifier_data.TaskError, config_lib.ConfigError,
          tokenization.VocabError, checkpoints.CheckpointError,
          FileExistsError, ValueError) as e:
    sys.exit("run_classifier: error: %s" % e)


def run():
  """Console-script entry point."""
  app.run(main)


if __name__ == "__main__":
  run()
