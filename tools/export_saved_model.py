r"""Exports a finished run directory as a TF Serving SavedModel.

Any run works: ``run_classifier.py``, ``run_squad.py``, ``run_ner.py``,
``run_swag.py`` and ``run_pretraining.py`` ``--output_dir``s. The run's kind
comes from its own files (``classifier_config.json``, ``squad_config.json``,
``ner_config.json``, ``swag_config.json``; only ``bert_config.json``: a
pretraining run), and the model is rebuilt from them and from the best dev
model (``best/``, when the run kept one), else the latest checkpoint (or
``--checkpoint``). Writes ``--export_dir/<version>/`` in TF Serving's layout:

  --what (default: the run's own model; a pretraining run: encoder)
    classifier    text (or text_a, text_b) in, probabilities/labels out
                  (regression: predictions)
    squad         question, context in, answer + code-point offsets out
    ner           sentence in, per-word tags and entity spans out
    swag          context [B] + endings [B, N] in, probabilities out
    preprocessor  strings in, input_word_ids/input_mask/input_type_ids out
    encoder       token ids in, sequence_output/pooled_output/
                  encoder_outputs_<i> out
    features      strings in, every layer's hidden states out

A pretraining run keeps no vocab: ``preprocessor`` and ``features`` take
``--vocab_file`` (and ``--do_lower_case``) for it.

  bert-export-saved-model --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export
  bert-export-saved-model --output_dir=/tmp/squad --export_dir=/tmp/squad_export
  bert-export-saved-model --output_dir=/tmp/pretrain --export_dir=/tmp/features \
    --what=features --vocab_file=vocab.txt

Or serve a fine-tuned model as it is, without retraining: ``--from_preset``
takes what ``from_preset`` takes (a Hugging Face directory or
``hf://ORG/NAME[@REVISION]`` from the local cache, an original fine-tuned
``model.ckpt-N``, one of our runs, a ``.keras`` file); the task comes from the
preset (a Hugging Face ``architectures`` entry, the model class, the run) or
``--task``:

  bert-export-saved-model --from_preset=hf://ORG/NAME --export_dir=/tmp/served

On a phone (Android, iOS, Web) with no kernel to build: ``--format=mediapipe``
writes a ``model.tflite`` that MediaPipe Tasks' ``TextClassifier`` (a
classifier run) or ``TextEmbedder`` (``--what=features``) runs as it is, the
vocab and labels in its TFLite metadata:

  bert-export-saved-model --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_mp \
    --format=mediapipe --quantize=dynamic_int8

Check an export with ``bert-predict-saved-model EXPORT_DIR ...``. See
``export/fine_tuned.py`` for the run files and ``export/*.py`` for the
signatures.
"""

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

import os  # noqa: E402  pylint: disable=wrong-import-position

from absl import flags  # noqa: E402  pylint: disable=wrong-import-position

from bert_tf.export import base  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf.export import client  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf.export import fine_tuned  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf.export import formats  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf.export import from_preset  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf.export import mediapipe as mediapipe_format  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf.export import saved_model  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf import preprocessing  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf.tools import _common  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "The run to export: the --output_dir of "
                    "run_classifier.py, run_squad.py, run_ner.py, run_swag.py or "
                    "run_pretraining.py.")
flags.DEFINE_string("from_preset", None, "Instead of --output_dir: a preset to serve as "
                    "it is (a Hugging Face directory or hf://ORG/NAME[@REVISION] in the "
                    "local cache, an original model.ckpt-N, a run directory, a .keras file).")
flags.DEFINE_enum("task", None, list(from_preset.TASKS), "With --from_preset: the task "
                  "(default: the preset's, e.g. its Hugging Face architectures).")
flags.DEFINE_bool("is_pair", False, "With --from_preset: a classifier export takes "
                  "text_a, text_b pairs.")
flags.DEFINE_string("export_dir", None, "Writes EXPORT_DIR/<version>/.")
flags.DEFINE_enum("what", None, list(fine_tuned.WHATS), "Which export (default: the run's own "
                  "model: classifier, squad, ner or swag; encoder for a pretraining "
                  "run). preprocessor, encoder and features fit every run.")
flags.DEFINE_integer("max_seq_length", None,
                     "Tokens per input (default: the run's max_seq_length; 128 for "
                     "a pretraining run).")
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix (default: best/ if "
                    "present, else the latest).")
flags.DEFINE_integer("version", None, "Version number (default: next free).")
flags.DEFINE_string("vocab_file", None, "A pretraining run's vocab (for --what="
                    "preprocessor or features; fine-tuned runs use their vocab.txt).")
flags.DEFINE_bool("do_lower_case", None, "A pretraining run's casing (default "
                  "true; fine-tuned runs use their own).")
flags.DEFINE_bool("xla", False, "Classifier exports: run small requests (at most %d "
                  "tokens once the batch is padded to a power of two and the length to "
                  "a multiple of %d) through an XLA-compiled model body, larger ones "
                  "as the plain graph; at most %d compiled shapes at 128 tokens. "
                  "Faster on CPU for short inputs; TF Serving needs "
                  "--xla_cpu_compilation_enabled." % (
                      saved_model.XLA_MAX_TOKENS, saved_model.XLA_LENGTH_STEP,
                      len(saved_model.xla_shapes(128))))
flags.DEFINE_enum("serving_dtype", "float32", list(saved_model.SERVING_DTYPES),
                  "Classifier exports: the model body's compute dtype. bfloat16 stores "
                  "and multiplies the encoder's weights in bfloat16 (LayerNorm and "
                  "softmax stay float32): faster on CPUs with bf16 units (avx512_bf16, "
                  "AMX), slower without; logits within bfloat16 rounding of float32's.")
flags.DEFINE_enum("format", "saved_model", sorted(formats.FORMATS), "saved_model: "
                  "EXPORT_DIR/<version>/ for TF Serving; litert: EXPORT_DIR/<version>/"
                  "model.tflite with the tokenizer inside (ai-edge-litert + "
                  "tensorflow_text.tflite_registrar), every --what but squad; mediapipe: "
                  "EXPORT_DIR/<version>/model.tflite for MediaPipe Tasks' TextClassifier "
                  "(classifier) or TextEmbedder (features), the tokenizer MediaPipe's "
                  "(needs %s)." % mediapipe_format.PACKAGE)
flags.DEFINE_enum("quantize", "none", ["none", "dynamic_int8", "float16"], "--format=litert "
                  "and mediapipe: float32 weights, int8 weights with dynamic-range "
                  "activations, or float16 weights.")
flags.DEFINE_enum("embedding", mediapipe_format.DEFAULT_EMBEDDING,
                  list(mediapipe_format.EMBEDDINGS), "--format=mediapipe --what=features: "
                  "TextEmbedder's vector: mean (the mean of sequence_output over the "
                  "tokens; all-MiniLM-L6-v2's pooling, the better sentence embedding) or "
                  "pooled (the pooler's pooled_output, trained for next-sentence "
                  "prediction). L2 normalization is TextEmbedder's own l2_normalize "
                  "option.")
flags.DEFINE_bool("dynamic_length", False, "--format=mediapipe: inputs [1, None]; "
                  "MediaPipe sends each text's tokens unpadded and the graph cuts them at "
                  "--max_seq_length: same scores, faster on short texts; needs a MediaPipe "
                  "runtime with dynamic input tensors.")
flags.mark_flags_as_required(["export_dir"])
flags.mark_flags_as_mutual_exclusive(["output_dir", "from_preset"], required=True)

TOOL = "export_saved_model"

def _check_before_loading() -> None:
  """Refuses a format, option or kind that cannot be written, before the
  model is read (a refused export never loads, warns or writes)."""
  if FLAGS.from_preset:
    for flag in ("checkpoint", "vocab_file", "do_lower_case"):
      if FLAGS[flag].present:
        raise fine_tuned.FineTunedDirError(
            "--%s is for --output_dir; a --from_preset carries its own" % flag,
            argument=flag)
    run_kind = from_preset.TASKS[FLAGS.task] if FLAGS.task else None
  else:
    run_kind = fine_tuned.run_kind(FLAGS.output_dir)
  what = FLAGS.what or (fine_tuned.exports(run_kind)[0] if run_kind else None)
  formats.get(FLAGS.format)
  base.check_export_dir(FLAGS.export_dir)
  if what:
    formats.check(FLAGS.format, what, **_format_options())
    # A format that refuses some settings (MediaPipe: pairs, regression, casing,
    # the vocab) reads them from the run's files, before the weights.
    if not FLAGS.from_preset and formats.get(FLAGS.format).check_spec is not None:
      run = fine_tuned.read_run(FLAGS.output_dir, FLAGS.max_seq_length, FLAGS.vocab_file,
                                FLAGS.do_lower_case)
      vocab = preprocessing.read_vocab_lines(run.vocab_file) if run.vocab_file else None
      formats.check_spec(FLAGS.format, run.export_spec(what), vocab)
  elif FLAGS.quantize != "none" and "quantize" not in dict(formats.get(FLAGS.format).options):
    formats.check(FLAGS.format, "encoder", quantize=FLAGS.quantize)


def _format_options() -> dict:
  """The format options of the flags (each format refuses another's)."""
  return {"xla": FLAGS.xla, "dtype": FLAGS.serving_dtype, "quantize": FLAGS.quantize,
          "embedding": FLAGS.embedding, "dynamic_length": FLAGS.dynamic_length}


def _summary(what: str, run, path: str) -> None:
  """The tool's lines for a written export: what, from where, the length,
  what loads it; a LiteRT file's size and the tokenizer differences it
  carries."""
  meta = client.read_metadata(path)
  seq = meta.get("max_seq_length")
  if FLAGS.format == "litert":
    tflite = os.path.join(path, client.TFLITE_FILE)
    print("exported %s (%s, checkpoint %s) to %s (%.1f MB, quantize=%s, max_seq_length "
          "%s); load with ai_edge_litert + tensorflow_text.tflite_registrar."
          "SELECT_TFTEXT_OPS" % (what, run.task_name, run.checkpoint, tflite,
                                 os.path.getsize(tflite) / 1e6, meta.get("quantize"), seq))
    for note in meta.get("token_differences") or ():
      print("warning: the in-graph tokenizer differs from the original's: " + note)
    return
  if FLAGS.format == "mediapipe":
    _mediapipe_summary(what, run, path, meta)
    return
  version = meta["min_tf_serving_version"]
  hint = ("; it takes token ids (input_word_ids, input_mask, input_type_ids): for raw "
          "text in, export --what=features (every layer's output from text) or "
          "--what=preprocessor beside it" if what == "encoder" else "")
  print("exported %s (%s, checkpoint %s, max_seq_length %s) to %s; TF Serving %s%s" % (
      what, run.task_name, run.checkpoint, seq, path,
      "any version (core ops only)" if version == "any" else ">= " + version, hint))


def _mediapipe_summary(what: str, run, path: str, meta: dict) -> None:
  """A MediaPipe file's line (size, length, output, the task that runs it)
  and one warning per class of MediaPipe's tokenizer differences."""
  tflite = os.path.join(path, client.TFLITE_FILE)
  output = ("probabilities" if what == "classifier" else
            "embedding (%s)" % meta.get("embedding"))
  print("exported %s (%s, checkpoint %s) to %s (%.1f MB, quantize=%s, max_seq_length %s%s, "
        "output %s); run it with MediaPipe Tasks' %s (Python mediapipe.tasks.python.text, "
        "Android com.google.mediapipe:tasks-text)" % (
            what, run.task_name, run.checkpoint, tflite, os.path.getsize(tflite) / 1e6,
            meta.get("quantize"), meta.get("max_seq_length"),
            ", dynamic" if meta.get("dynamic_length") else "", output,
            meta.get("mediapipe_task")))
  for note in meta.get("token_differences") or ():
    print("warning: MediaPipe's tokenizer differs from the original's: " + note)


def main(argv):
  """absl main: one export, one summary line; one error line on bad input."""
  if len(argv) > 1:
    _common.fail(TOOL, ValueError("unexpected arguments: %s" % " ".join(argv[1:])))
  try:
    _check_before_loading()
    if FLAGS.from_preset:
      run = from_preset.load_preset(FLAGS.from_preset, FLAGS.task, FLAGS.max_seq_length,
                                    FLAGS.is_pair)
    else:
      run = fine_tuned.load_run(FLAGS.output_dir, FLAGS.checkpoint, FLAGS.max_seq_length,
                                FLAGS.vocab_file, FLAGS.do_lower_case)
    what = FLAGS.what or fine_tuned.exports(run.kind)[0]
    path = fine_tuned.export_run(run, what, FLAGS.export_dir, FLAGS.version,
                                  format=FLAGS.format, **_format_options())
  except _common.REPORTED as e:
    _common.fail(TOOL, e)
  _summary(what, run, path)


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
