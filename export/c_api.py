"""Serving an export without Python: the TensorFlow C API's view of it.

TF Serving loads a SavedModel with the C++ loader and runs a signature by
its tensor names; a C program linked against the tensorflow pip wheel's
``libtensorflow_cc.so.2`` does the same (``TF_LoadSessionFromSavedModel``,
``TF_SessionRun``). This module holds the two pieces such a client needs
from Python, used by the tests' C loader (``tests/c_loader/serve.c``):

* :func:`signature_tensors` - a signature's input and output tensor names,
  read from ``saved_model.pb`` (what ``saved_model_cli show`` prints);
* :func:`build_c_program` - compile and link a C source against the wheel.

Example::

  from bert_tf.export import c_api
  inputs, outputs = c_api.signature_tensors("exports/sst2/1")
  # {'text': 'serving_default_text:0'}, {'labels': 'StatefulPartitionedCall:1', ...}
  exe = c_api.build_c_program("tests/c_loader/serve.c", "/tmp/serve")
"""

import os
import shutil
import subprocess
from typing import Dict, Tuple


def signature_tensors(saved_model_dir: str, signature: str = "serving_default"
                      ) -> Tuple[Dict[str, str], Dict[str, str]]:
  """The tensor names behind one signature of a SavedModel.

  Args:
    saved_model_dir: a SavedModel version directory (holds ``saved_model.pb``).
    signature: the signature key, e.g. ``"serving_default"``.

  Returns:
    ``({input key: "op:index"}, {output key: "op:index"})`` of the first
    meta graph (the one tagged ``serve`` in every bert_tf export).

  Raises:
    FileNotFoundError: no ``saved_model.pb`` in ``saved_model_dir``.
    KeyError: the SavedModel has no such signature (the message lists the
      ones it has).
  """
  from bert_tf.export import serving_ops  # pylint: disable=g-import-not-at-top
  sigs = serving_ops.read_saved_model_proto(saved_model_dir).meta_graphs[0].signature_def
  if signature not in sigs:
    raise KeyError("%s has no signature %r (it has %s)"
                   % (saved_model_dir, signature, ", ".join(sorted(sigs))))
  sig = sigs[signature]
  return ({k: v.name for k, v in sig.inputs.items()},
          {k: v.name for k, v in sig.outputs.items()})


def build_c_program(source: str, exe: str, optimize: str = "-O2",
                    timeout_s: float = 600.0) -> str:
  """Compiles and links a C program against the installed tensorflow wheel.

  The wheel ships the C API headers (``tensorflow/include/tensorflow/c``) and
  the TF_* symbols in ``libtensorflow_cc.so.2`` (which needs
  ``libtensorflow_framework.so.2``); the program gets an rpath to them. With
  ``ld.gold`` on the PATH it links the ~1 GB library in seconds, not ~45 s.

  Args:
    source: path of the ``.c`` file.
    exe: path of the executable to write.
    optimize: gcc's optimization flag.
    timeout_s: the compiler's time limit, seconds.

  Returns:
    ``exe``.

  Raises:
    RuntimeError: gcc is not on the PATH, the wheel lacks the C library or
      headers (names the missing files), or gcc fails (its last output).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gcc = shutil.which("gcc")
  if gcc is None:
    raise RuntimeError("gcc not found: building a C API client needs a C compiler")
  tf_dir = os.path.realpath(os.path.dirname(tf.__file__))
  need = [os.path.join(tf_dir, n) for n in ("libtensorflow_cc.so.2",
                                            "libtensorflow_framework.so.2")]
  need.append(os.path.join(tf_dir, "include", "tensorflow", "c", "c_api.h"))
  missing = [f for f in need if not os.path.exists(f)]
  if missing:
    raise RuntimeError("the tensorflow wheel lacks %s" % ", ".join(missing))
  cmd = [gcc, optimize, "-o", exe, source, "-I" + os.path.join(tf_dir, "include"),
         "-L" + tf_dir, "-l:libtensorflow_cc.so.2", "-l:libtensorflow_framework.so.2",
         "-Wl,-rpath," + tf_dir]
  if shutil.which("ld.gold"):
    cmd.insert(1, "-fuse-ld=gold")
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                        check=False)
  if proc.returncode:
    raise RuntimeError("gcc failed (%d) on %s:\n%s"
                       % (proc.returncode, source, proc.stderr[-3000:]))
  return exe
