"""Fine-tunes BERT on a classification task, evaluates, predicts, exports.

Flags follow google-research/bert ``run_classifier.py``; added:
``--export_dir`` (a TF Serving SavedModel with the tokenizer inside),
``--distribution_strategy``, ``--optimizer``, ``--dtype``,
``--bucket_by_length``. ``--init_checkpoint`` takes our checkpoints, the
original ``bert_model.ckpt``, or a Hugging Face BERT directory (then
``--bert_config_file`` and ``--vocab_file`` default to its files).

  python tools/run_classifier.py --task_name=sst-2 --do_train --do_eval \
    --data_dir=data/movie_review_sentences --init_checkpoint=HF_DIR \
    --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export
"""

import sys

import _bootstrap  # pylint: disable=unused-import
import _common
from absl import app
from absl import flags

from bert_tf import checkpoints
from bert_tf import classifier
from bert_tf import config as config_lib
from bert_tf import tokenization
from bert_tf.data import classifier_data

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Directory with train.tsv, dev.tsv, test.tsv.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.")
flags.DEFINE_string("task_name", None, "Task: " + ", ".join(sorted(classifier_data.TASKS)) + ".")
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
_common.define_training_flags()
flags.mark_flags_as_required(["task_name", "data_dir", "output_dir"])


def main(argv):
  del argv
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
    sys.exit("run_classifier: error: at least one of --do_train, --do_eval, "
             "--do_predict or --export_dir must be set")
  try:
    strategy = _common.strategy_from_flags()
    params = classifier.ClassifierParams(
        task_name=FLAGS.task_name, data_dir=FLAGS.data_dir, output_dir=FLAGS.output_dir,
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
        bucket_by_length=FLAGS.bucket_by_length, dtype=FLAGS.dtype)
    classifier.run_classifier(params, strategy, do_train=FLAGS.do_train,
                              do_eval=FLAGS.do_eval, do_predict=FLAGS.do_predict)
  except (classifier_data.TaskError, config_lib.ConfigError,
          tokenization.VocabError, checkpoints.CheckpointError,
          FileExistsError, ValueError) as e:
    sys.exit("run_classifier: error: %s" % e)


if __name__ == "__main__":
  app.run(main)
