r"""Answers requests with an exported SavedModel: one JSON line per request row.

  bert-predict-saved-model [flags] EXPORT [STRING ...]
  bert-predict-saved-model [flags] --input_file=ROWS.jsonl EXPORT

EXPORT is a SavedModel version directory (``EXPORT_DIR/1``) or an export
directory holding numeric version folders (the highest is served, as TF
Serving does). Every export of bert_tf works: classifier (``text``, or
``text_a`` + ``text_b``; regression too), SQuAD v1/v2 (``question`` +
``context``), NER (``sentence``), multiple choice (``context`` + ``endings``
[B, N]), the feature-extraction encoder (``text_a``; ``--pair``: ``text_a``
+ ``text_b``), the preprocessor and the id-level encoder.

EXPORT may also be a LiteRT export (``export_saved_model.py --format=litert``):
a ``model.tflite``, its version folder or the export directory; it is served
by ``ai_edge_litert`` with tensorflow-text's kernels, the same inputs and
rows (``--num_threads`` sets the interpreter's threads).

The request comes from the command line or from ``--input_file``:

* Command-line STRINGs fill the signature's inputs row by row, in the
  export's input order (``bert_tf_export.json``'s ``inputs``: text_a text_b,
  question context, context endings; alphabetical for a foreign SavedModel):
  a string input [B] takes one STRING per row; ``endings`` [B, N] takes N
  STRINGs (N = the export's ``num_choices``); any other input (int ids, or
  a width the export does not record) takes one JSON value per row
  (``'[101, 2023, 102]'``). ``question context question context ...``
  gives two rows. Put ``--`` before STRINGs that start with ``-``.
* ``--input_file`` (``-``: standard input) holds JSON lines in TF Serving's
  row format, one instance per line: ``{"question": "...", "context":
  "..."}``; ``{"b64": "..."}`` for a binary string; a bare value for a
  one-input signature. Blank lines are skipped. The rows of one request
  must have the same width (``endings`` lists of one length, id lists of
  one length).

Each row prints as one JSON object of every output of the signature for that
row, keys sorted: strings decoded as UTF-8, tensors as (nested) lists,
floats rounded to ``--precision`` significant digits (-inf/inf/nan as
JSON's ``-Infinity``/``Infinity``/``NaN``, which Python's ``json`` reads).
``--with_inputs`` adds the row's inputs under ``"inputs"``. A request that
does not fit the signature is one line naming the inputs it expects, and
nothing is printed; ``--output_file`` is written atomically.

A thin absl shell over :mod:`bert_tf.export.client` (the request/response
logic; flag values passed as arguments). Imports only TensorFlow,
tensorflow-text, absl and the standard library (the client, which holds
itself to those; the standard-library start-up module, which only filters
TensorFlow's banner; the atomic writer), no model or export-writing code, as
a client or TF Serving would: proof that the export is self-contained.

  bert-predict-saved-model /tmp/export "a gorgeous film" "dull"
  bert-predict-saved-model /tmp/squad/1 "Who won?" "The Broncos won the game."
  bert-predict-saved-model --input_file=questions.jsonl /tmp/squad
"""

import errno
import os
import sys
from typing import List, Optional, Sequence

from bert_tf.tools import _startup  # standard library only: a quiet TF start-up
_startup.setup(tensorflow=True)

from absl import flags  # noqa: E402  pylint: disable=wrong-import-position
import tensorflow as tf  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import

from bert_tf import io_utils  # noqa: E402  pylint: disable=wrong-import-position
# The client's steps, under the names this tool has always offered.
from bert_tf.export.client import (  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
    DEFAULT_SIGNATURE, InputSpec, PredictError, batch_tensors, check_rows,
    decode_outputs, expected, predict, read_metadata, read_signatures,
    resolve_export, rows_from_args, rows_from_jsonl, signature_inputs)
from bert_tf.export import client  # noqa: E402  pylint: disable=wrong-import-position

TOOL = "predict_saved_model"

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "JSON lines, one request row each in TF "
                    "Serving's row format ({\"question\": ..., \"context\": ...}); "
                    "'-' reads standard input. Instead of command-line STRINGs.")
flags.DEFINE_string("signature_name", DEFAULT_SIGNATURE, "The signature to call.")
flags.DEFINE_bool("pair", False, "Call the export's 'pair' signature (preprocessor, "
                  "feature extraction); a pair classifier needs no flag.")
flags.DEFINE_integer("batch_size", 64, "Rows per signature call.", lower_bound=1)
flags.DEFINE_integer("precision", 6, "Significant digits of printed floats (0: "
                     "every digit of the float32 value).", lower_bound=0)
flags.DEFINE_bool("with_inputs", False, "Also print each row's inputs under \"inputs\".")
flags.DEFINE_integer("num_threads", None, "A .tflite export's interpreter (and "
                     "XNNPACK) threads; default LiteRT's.", lower_bound=1)
flags.DEFINE_string("output_file", None, "Write the JSON lines here (atomically) "
                    "instead of standard output.")


def write_lines(lines: Sequence[str], output_file: Optional[str] = None) -> None:
  """Writes the JSON lines to stdout, or to ``output_file`` atomically
  (a temporary sibling, renamed when whole).

  Raises:
    OSError: ``output_file``'s directory is missing or unwritable.
  """
  data = "".join(l + "\n" for l in lines).encode("utf-8")
  if not output_file:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return
  directory = os.path.dirname(os.path.abspath(output_file))
  if not os.path.isdir(directory):  # a typo'd path is refused, not created
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), directory)
  with io_utils.atomic_output(output_file) as tmp:
    with open(tmp, "wb") as f:
      f.write(data)


def serve(argv: Sequence[str]) -> List[str]:
  """The JSON lines for ``argv`` (``[prog, EXPORT, STRING...]``) and the flags
  (:func:`bert_tf.export.client.serve`).

  Raises:
    PredictError: every bad request, export or flag combination.
  """
  if len(argv) < 2:
    raise PredictError("usage: bert-predict-saved-model [flags] EXPORT [STRING ...] "
                       "(or --input_file=ROWS.jsonl); --help explains")
  return client.serve(argv[1], argv[2:], input_file=FLAGS.input_file,
                      signature_name=FLAGS.signature_name, pair=FLAGS.pair,
                      batch_size=FLAGS.batch_size, precision=FLAGS.precision,
                      with_inputs=FLAGS.with_inputs, num_threads=FLAGS.num_threads)


def main(argv):
  """absl main: prints (or writes) the JSON lines; one error line on bad input."""
  try:
    lines = serve(argv)
    write_lines(lines, FLAGS.output_file)
  except PredictError as e:
    _startup.fail(TOOL, e)
  except OSError as e:
    _startup.fail(TOOL, OSError("--output_file: %s" % e))


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
