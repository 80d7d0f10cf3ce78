r"""Converts BERT checkpoints: original TF1 <-> ours, Hugging Face -> either,
and any of ours back to Hugging Face transformers.

  # Hugging Face directory -> original TF1 format
  python tools/convert_checkpoint.py --input=HF_DIR --output=out/bert_model.ckpt \
      --output_format=tf1
  # original TF1 -> ours
  python tools/convert_checkpoint.py --input=uncased_L-12_H-768_A-12/bert_model.ckpt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json --output=out/ckpt
  # shrink a fine-tuned original checkpoint (drop adam_m / adam_v)
  python tools/convert_checkpoint.py --input=model.ckpt-1000 --output=small.ckpt \
      --output_format=tf1 --shrink

  # a fine-tuned run (or .keras file, Hugging Face directory, original
  # checkpoint) -> a directory transformers' AutoModelFor<Task> and
  # AutoTokenizer load (config.json, model.safetensors, vocab.txt,
  # tokenizer.json, tokenizer_config.json); the task from the input, or --task
  python tools/convert_checkpoint.py --input=runs/ner --output=ner_hf --output_format=hf

A classifier that reads long documents (run_classifier --long_document, a
.keras file whose preprocessor has long_document) keeps its settings in
config.json (bert_tf_long_document, bert_tf_window_pooling, ...: from_preset
reads them back), and one warning line says that transformers will read one
window (its first max_seq_length tokens).

Optimizer slots are dropped (never copied).
"""


from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf import checkpoints
from bert_tf import convert
from bert_tf import config as config_lib
from bert_tf import errors

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "HF BERT directory, original TF1 checkpoint, or ours "
                    "(with --output_format=hf also a run directory or a .keras file).")
flags.DEFINE_string("output", None, "Output checkpoint prefix; with --output_format=hf a "
                    "new (or empty) directory.")
flags.DEFINE_enum("output_format", "ours", ["ours", "tf1", "hf"], "Output format: ours, "
                  "tf1 (original names), hf (a transformers directory).")
flags.DEFINE_enum("task", None, list(convert.TASKS), "With --output_format=hf: the task "
                  "whose transformers class to write (default: the input's own).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (not needed for a HF directory).")
flags.DEFINE_bool("shrink", False, "TF1 -> TF1: copy every variable but the Adam slots "
                  "(keeps task heads and global_step).")
flags.mark_flags_as_required(["input", "output"])
OWN_FLAGS = ("input", "output", "output_format", "task", "bert_config_file", "shrink")


def main(argv):
  del argv
  try:
    if FLAGS.shrink:
      dst, kept, dropped = checkpoints.shrink_tf1_checkpoint(FLAGS.input, FLAGS.output)
      print("wrote %s: %d variables kept, %d optimizer slots dropped" % (dst, kept, dropped))
    elif FLAGS.output_format == "hf":
      config = (config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
                if FLAGS.bert_config_file else None)
      print("wrote " + convert.to_transformers(FLAGS.input, FLAGS.output, FLAGS.task,
                                               config=config))
    else:
      if FLAGS.task:
        raise checkpoints.CheckpointError("--task is for --output_format=hf",
                                          argument="task")
      print("wrote " + convert.convert_checkpoint(
          FLAGS.input, FLAGS.output, FLAGS.output_format, FLAGS.bert_config_file))
  except errors.BertTfError as e:
    if FLAGS.output_format == "hf" and getattr(e, "argument", None) not in OWN_FLAGS:
      # What from_preset says of its argument (preset, num_labels, ...) is
      # about the path given as --input.
      message = str(e)
      if message.startswith("from_preset: "):
        message = message[len("from_preset: "):]
      e = errors.CheckpointError(message, argument="input")
    _startup.fail("convert_checkpoint", e)


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
