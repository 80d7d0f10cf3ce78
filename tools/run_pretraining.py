"""Masked-LM + next-sentence pretraining over original-format TFRecords.

Flags follow google-research/bert ``run_pretraining.py``; added:
``--distribution_strategy``, ``--optimizer``, ``--nsp``, ``--num_cpu_devices``.
Restarting with the same ``--output_dir`` resumes from the latest checkpoint.

  python tools/run_pretraining.py --input_file=out.tfrecord --output_dir=/tmp/pt \
    --bert_config_file=bert_config.json --do_train --num_train_steps=300
"""

import sys

import _bootstrap  # pylint: disable=unused-import
import _common
from absl import app
from absl import flags

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import pretraining
from bert_tf.data import pretraining_data

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to train.")
flags.DEFINE_string("input_file", None, "Input TF example files (comma-separated globs).")
flags.DEFINE_string("output_dir", None, "Where checkpoints and eval_results.txt go.")
flags.DEFINE_string("init_checkpoint", None, "Initial encoder weights (ours, original TF1, or a Hugging Face directory).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked LM predictions per record.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the input files.")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Eval batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (Adam).")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warm-up steps.")
flags.DEFINE_integer("iterations_per_loop", 100, "Steps per loop (and per progress line).")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_bool("nsp", True, "Train the next-sentence head (False: the paper's No-NSP ablation).")
flags.DEFINE_integer("stop_at_step", None, "Stop (with a checkpoint) at this step; a rerun resumes to --num_train_steps.")
_common.define_training_flags()
flags.mark_flags_as_required(["bert_config_file", "input_file", "output_dir"])


def main(argv):
  del argv
  if not FLAGS.do_train and not FLAGS.do_eval:
    sys.exit("run_pretraining: error: at least one of --do_train or --do_eval must be set")
  try:
    config = config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
    pretraining_data.expand_input_files(FLAGS.input_file)
    strategy = _common.strategy_from_flags()
    params = pretraining.PretrainingParams(
        input_file=FLAGS.input_file, output_dir=FLAGS.output_dir,
        init_checkpoint=FLAGS.init_checkpoint, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        learning_rate=FLAGS.learning_rate, num_train_steps=FLAGS.num_train_steps,
        num_warmup_steps=FLAGS.num_warmup_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        iterations_per_loop=FLAGS.iterations_per_loop,
        max_eval_steps=FLAGS.max_eval_steps, optimizer=FLAGS.optimizer,
        nsp=FLAGS.nsp, seed=FLAGS.seed, stop_at_step=FLAGS.stop_at_step)
    pretraining.run_pretraining(config, params, strategy, do_train=FLAGS.do_train,
                                do_eval=FLAGS.do_eval)
  except (config_lib.ConfigError, pretraining_data.InputError,
          checkpoints.CheckpointError, ValueError) as e:
    sys.exit("run_pretraining: error: %s" % e)


if __name__ == "__main__":
  app.run(main)
