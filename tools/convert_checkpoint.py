r"""Converts BERT checkpoints: original TF1 <-> ours, Hugging Face -> either.

  # Hugging Face directory -> original TF1 format
  python tools/convert_checkpoint.py --input=HF_DIR --output=out/bert_model.ckpt \
      --output_format=tf1
  # original TF1 -> ours
  python tools/convert_checkpoint.py --input=uncased_L-12_H-768_A-12/bert_model.ckpt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json --output=out/ckpt
  # shrink a fine-tuned original checkpoint (drop adam_m / adam_v)
  python tools/convert_checkpoint.py --input=model.ckpt-1000 --output=small.ckpt \
      --output_format=tf1 --shrink

Optimizer slots are dropped (never copied).
"""


from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf import checkpoints
from bert_tf import convert
from bert_tf import config as config_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "HF BERT directory, original TF1 checkpoint, or ours.")
flags.DEFINE_string("output", None, "Output checkpoint prefix.")
flags.DEFINE_enum("output_format", "ours", ["ours", "tf1"], "Output format.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (not needed for a HF directory).")
flags.DEFINE_bool("shrink", False, "TF1 -> TF1: copy every variable but the Adam slots "
                  "(keeps task heads and global_step).")
flags.mark_flags_as_required(["input", "output"])


def main(argv):
  del argv
  try:
    if FLAGS.shrink:
      dst, kept, dropped = checkpoints.shrink_tf1_checkpoint(FLAGS.input, FLAGS.output)
      print("wrote %s: %d variables kept, %d optimizer slots dropped" % (dst, kept, dropped))
    else:
      print("wrote " + convert.convert_checkpoint(
          FLAGS.input, FLAGS.output, FLAGS.output_format, FLAGS.bert_config_file))
  except (checkpoints.CheckpointError, config_lib.ConfigError) as e:
    _startup.fail("convert_checkpoint", e)


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
