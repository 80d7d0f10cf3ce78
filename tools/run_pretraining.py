"""Masked-LM + next-sentence pretraining over original-format TFRecords.

Flags follow google-research/bert ``run_pretraining.py`` (same names and
defaults; ``--tpu_zone``, ``--gcp_project``, ``--master`` feed the
TPUClusterResolver, ``--num_tpu_cores`` is accepted for compatibility: the
strategy finds the cores itself). Added: ``--distribution_strategy``
(one_device, mirrored, multi_worker_mirrored with TF_CONFIG, tpu),
``--optimizer`` (adamw_original, adamw, lamb), ``--num_accumulation_steps``,
``--dtype`` (float32, mixed_bfloat16, mixed_float16 with dynamic loss
scaling), ``--jit_compile``, ``--nsp`` (false: the paper's No-NSP
ablation), ``--dynamic`` (mask on the fly from tokenized-document records),
``--deterministic`` (op determinism: bit-identical resume), ``--vocab_file``.
Restarting with the same ``--output_dir`` resumes from the latest
checkpoint, data position and dropout state included.

  python tools/run_pretraining.py --input_file=out.tfrecord --output_dir=/tmp/pt \
    --bert_config_file=bert_config.json --do_train --num_train_steps=300
"""

import os
import sys

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import app
from absl import flags

from bert_tf.tools import _common
from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import pretraining
from bert_tf import tokenization
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
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size (all replicas, all accumulation steps).")
flags.DEFINE_integer("eval_batch_size", 8, "Eval batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (Adam).")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warm-up steps.")
flags.DEFINE_integer("iterations_per_loop", 100, "Steps per loop (and per progress line).")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU (TPUClusterResolver).")
flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU (TPUClusterResolver).")
flags.DEFINE_string("master", None, "TPU master address (used when --tpu_name is unset).")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; TPUStrategy finds the cores.")
flags.DEFINE_bool("nsp", True, "Train the next-sentence head (False: the paper's No-NSP ablation).")
flags.DEFINE_integer("stop_at_step", None, "Stop (with a checkpoint) at this step; a rerun resumes to --num_train_steps.")
flags.DEFINE_integer("num_accumulation_steps", 1, "Split each replica's batch into this many micro-batches; one update from their summed gradients.")
flags.DEFINE_enum("dtype", "float32", list(pretraining.DTYPES), "Compute dtype policy (mixed_float16 adds dynamic loss scaling).")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the forward and backward pass.")
flags.DEFINE_bool("deterministic", False, "Enable TensorFlow op determinism (bit-identical reruns and resumes).")
flags.DEFINE_string("vocab_file", None, "Vocab of the model; default: vocab.txt beside --bert_config_file or --init_checkpoint. Checked against vocab_size.")
flags.DEFINE_bool("dynamic", False, "Input files hold tokenized documents (tools/create_pretraining_documents.py); pairs and masks are made on the fly.")
flags.DEFINE_float("masked_lm_prob", 0.15, "--dynamic: masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "--dynamic: probability of a shorter target length.")
flags.DEFINE_bool("do_whole_word_mask", False, "--dynamic: mask whole words.")
flags.DEFINE_integer("keep_checkpoint_max", 3, "Checkpoints kept.")
_common.define_training_flags()
flags.mark_flags_as_required(["bert_config_file", "input_file", "output_dir"])


def find_vocab_file():
  """``--vocab_file``, else a ``vocab.txt`` beside the config or init checkpoint."""
  if FLAGS.vocab_file:
    if not os.path.exists(FLAGS.vocab_file):
      raise ValueError("--vocab_file: %r does not exist" % FLAGS.vocab_file)
    return FLAGS.vocab_file
  places = [os.path.dirname(os.path.abspath(FLAGS.bert_config_file))]
  if FLAGS.init_checkpoint:
    ic = FLAGS.init_checkpoint
    places.append(ic if os.path.isdir(ic) else os.path.dirname(os.path.abspath(ic)))
  for d in places:
    if os.path.exists(os.path.join(d, "vocab.txt")):
      return os.path.join(d, "vocab.txt")
  return None


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
        nsp=FLAGS.nsp, seed=FLAGS.seed, stop_at_step=FLAGS.stop_at_step,
        vocab_file=find_vocab_file(),
        num_accumulation_steps=FLAGS.num_accumulation_steps, dtype=FLAGS.dtype,
        jit_compile=FLAGS.jit_compile, deterministic=FLAGS.deterministic,
        dynamic=FLAGS.dynamic, masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max)
    pretraining.run_pretraining(config, params, strategy, do_train=FLAGS.do_train,
                                do_eval=FLAGS.do_eval)
  except (config_lib.ConfigError, pretraining_data.InputError,
          checkpoints.CheckpointError, tokenization.VocabError, ValueError) as e:
    sys.exit("run_pretraining: error: %s" % e)


def run():
  """Console-script entry point."""
  app.run(main)


if __name__ == "__main__":
  run()
