r"""Extracts fixed contextual features (hidden states) of every token.

Flags and output follow google-research/bert ``extract_features.py`` (paper
section 5.3): ``--input_file`` holds one example per line, ``text_a`` or
``text_a ||| text_b``; ``--output_file`` gets one JSON line per input line,
``{"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index":
-1, "values": [...]}, ...]}, ...]}`` with values rounded to 6 decimals,
written atomically (nothing appears on error). An empty input line gives
the tokens ``[CLS]`` ``[SEP]``, as in the original; a line with more than one
``|||`` is an error naming the file and line.

Added: ``--init_checkpoint`` also takes a Hugging Face BERT directory (then
``--bert_config_file`` and ``--vocab_file`` default to its files) or our
checkpoints; ``--bert_config_file`` / ``--vocab_file`` default to the files
beside the checkpoint. ``--use_tpu``, ``--master``, ``--num_tpu_cores`` and
``--use_one_hot_embeddings`` are accepted for compatibility and ignored.
``--export_dir`` also (or only) writes a TF Serving SavedModel: raw strings
in, every layer's hidden states out (:func:`bert_tf.export.export_encoder_all_layers`).

  python tools/extract_features.py --input_file=input.txt \
    --output_file=/tmp/output.jsonl --vocab_file=$BERT/vocab.txt \
    --bert_config_file=$BERT/bert_config.json \
    --init_checkpoint=$BERT/bert_model.ckpt --layers=-1,-2,-3,-4 \
    --max_seq_length=128 --batch_size=8
"""

import sys
import time

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags
import tensorflow as tf

from bert_tf.tools import _common
from bert_tf import export
from bert_tf.tasks import feature_extraction

FLAGS = flags.FLAGS
TOOL = "extract_features"

flags.DEFINE_string("input_file", None, "Input text: one example per line, "
                    "'text_a' or 'text_a ||| text_b'.")
flags.DEFINE_string("output_file", None, "Output JSON-lines file (written atomically).")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes "
                    "(-1 = last layer; Python indexing over the L layers).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pre-trained "
                    "model (default: a Hugging Face --init_checkpoint's config.json, "
                    "or bert_config.json beside the checkpoint).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum tokens per example after "
                     "WordPiece tokenization, [CLS]/[SEP] included; longer "
                     "examples are truncated.")
flags.DEFINE_string("init_checkpoint", None, "Weights: an original TF1 checkpoint "
                    "(bert_model.ckpt), a Hugging Face BERT directory, or ours.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file the model was trained "
                    "on (default: vocab.txt of a Hugging Face --init_checkpoint or "
                    "beside the config).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_bool("preserve_unused_tokens", False,
                  "If True, Wordpiece tokenization will not be applied to words in the vocab "
                  "(the original's flag: vocab entries [unusedN] in the text stay whole).")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; ignored.")
flags.DEFINE_string("master", None, "Accepted for compatibility; ignored.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; ignored.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility; ignored.")
flags.DEFINE_string("export_dir", None, "Also write a TF Serving SavedModel of the "
                    "model (raw strings in, every layer's hidden states out; "
                    "bert_tf.export.export_encoder_all_layers) as EXPORT_DIR/<version>/.")
flags.mark_flags_as_required(["init_checkpoint"])


def main(argv):
  if len(argv) > 1:
    sys.exit("%s: error: unexpected arguments: %s" % (TOOL, " ".join(argv[1:])))
  if bool(FLAGS.input_file) != bool(FLAGS.output_file):
    missing = "output_file" if FLAGS.input_file else "input_file"
    sys.exit("%s: error: --%s is required with --%s" % (
        TOOL, missing, "input_file" if FLAGS.input_file else "output_file"))
  if not (FLAGS.input_file or FLAGS.export_dir):
    sys.exit("%s: error: --input_file and --output_file (or --export_dir) are "
             "required" % TOOL)
  # Full float32 matmuls on Ampere+ GPUs (TF32 would cost ~1e-3 of the
  # values' precision; no effect on CPU).
  tf.config.experimental.enable_tensor_float_32_execution(False)
  try:
    extractor = feature_extraction.FeatureExtractor.from_checkpoint(
        FLAGS.init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case, max_seq_length=FLAGS.max_seq_length,
        layers=FLAGS.layers, batch_size=FLAGS.batch_size,
        preserve_unused_tokens=FLAGS.preserve_unused_tokens)
    if FLAGS.input_file:
      start = time.monotonic()
      n = extractor.write_json(FLAGS.input_file, FLAGS.output_file)
      print("%s: wrote %d examples x %d layers (%s) to %s in %.1fs" % (
          TOOL, n, len(extractor.layer_indexes),
          ",".join(str(i) for i in extractor.layer_indexes), FLAGS.output_file,
          time.monotonic() - start))
    if FLAGS.export_dir:
      path = export.export_encoder_all_layers(
          extractor.encoder, FLAGS.export_dir, vocab_file=extractor.vocab_file,
          do_lower_case=extractor.do_lower_case, max_seq_length=FLAGS.max_seq_length,
          preserve_unused_tokens=FLAGS.preserve_unused_tokens)
      print("%s: SavedModel written to %s" % (TOOL, path))
  except _common.REPORTED as e:
    _common.fail(TOOL, e)


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
