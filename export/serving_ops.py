"""Which non-core ops a SavedModel uses, where they live, which server has them.

TF Serving's ``tensorflow_model_server`` can only run ops linked into its
binary. Core TensorFlow ops are always there; the tokenizer ops come from
tensorflow-text, and each server release bundles one tensorflow-text
version. This module walks a SavedModel's graph (``graph_def`` nodes and
every function in its library), finds the ops that tensorflow-text's op
libraries register (``tensorflow_text/python/ops/_*.so``), and gives, per op,
the library file to load (``TF_LoadLibrary``) and the minimum TF Serving
version that links it.

Minimum server versions (sources):

* ``WordpieceTokenizeWithOffsets``: TF Serving 2.0.0 (its ``RELEASE.md``:
  "Some Tensorflow Text ops have been added to ModelServer ...
  wordpiece_tokenizer").
* every other tensorflow-text op that exists in tensorflow-text 2.2:
  TF Serving 2.2, which links all tensorflow-text ops (its build links the
  tensorflow-text op library since 2.2).
* ``FastBertNormalize`` (and the other fast-BERT ops): TF Serving 2.12,
  the first server bundling a tensorflow-text with them.
* ``TFText>RoundRobinTrim`` / ``TFText>RoundRobinGenerateMasks``: added in
  tensorflow-text 2.13 and missing from TF Serving 2.12-2.19, so 2.20.

The same table is in README.md ("Serving an export with TF Serving").
"""

import glob
import os

from tensorflow.core.framework import op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2

# Op name -> (minimum TF Serving version, source). Ops of tensorflow-text
# not listed here get DEFAULT_MIN_SERVING.
DEFAULT_MIN_SERVING = ("2.2", "TF Serving links all tensorflow-text ops "
                       "since 2.2")
MIN_SERVING_VERSION = {
    "WordpieceTokenizeWithOffsets": (
        "2.0", "tensorflow/serving RELEASE.md 2.0.0: wordpiece_tokenizer "
        "added to ModelServer"),
    "FastBertNormalize": ("2.12", "fast BERT ops: first in TF Serving 2.12"),
    "FastWordpieceTokenizeWithOffsets": ("2.12", "fast BERT ops: first in TF "
                                         "Serving 2.12"),
    "TFText>RoundRobinTrim": (
        "2.20", "added in tensorflow-text 2.13, missing "
        "from TF Serving 2.12-2.19"),
    "TFText>RoundRobinGenerateMasks": (
        "2.20", "added in tensorflow-text 2.13, missing "
        "from TF Serving 2.12-2.19"),
}


def read_saved_model_proto(saved_model_dir):
  """The parsed ``saved_model.pb`` of ``saved_model_dir`` (a ``SavedModel`` proto).

  Raises:
    FileNotFoundError: no ``saved_model.pb`` there.
  """
  sm = saved_model_pb2.SavedModel()
  with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
    sm.ParseFromString(f.read())
  return sm


def graph_ops(saved_model_dir):
  """Sorted names of every op in a SavedModel (all graphs and functions).

  Args:
    saved_model_dir: directory holding ``saved_model.pb``.

  Returns:
    sorted list of op type names (str).

  Raises:
    FileNotFoundError: no ``saved_model.pb`` there.
  """
  sm = read_saved_model_proto(saved_model_dir)
  ops = set()
  for mg in sm.meta_graphs:
    ops.update(n.op for n in mg.graph_def.node)
    for fn in mg.graph_def.library.function:
      ops.update(n.op for n in fn.node_def)
  return sorted(ops)


def tf_text_op_libraries():
  """``{op_name: library_path}`` for every op tensorflow-text's libraries register.

  Reads each ``tensorflow_text/python/ops/_*.so``'s op list through
  ``TF_LoadLibrary`` (TensorFlow caches loaded libraries, so this only reads
  the lists of the libraries ``import tensorflow_text`` already loaded).
  """
  import tensorflow_text  # pylint: disable=g-import-not-at-top
  from tensorflow.python.client import pywrap_tf_session as py_tf  # pylint: disable=g-import-not-at-top
  out = {}
  ops_dir = os.path.join(os.path.dirname(tensorflow_text.__file__), "python", "ops")
  for lib in sorted(glob.glob(os.path.join(ops_dir, "_*.so"))):
    handle = py_tf.TF_LoadLibrary(lib)
    try:
      op_list = op_def_pb2.OpList()
      op_list.ParseFromString(py_tf.TF_GetOpList(handle))
    finally:
      py_tf.TF_DeleteLibraryHandle(handle)
    for op in op_list.op:
      out.setdefault(op.name, lib)
  return out


def version_key(v):
  return tuple(int(x) for x in v.split("."))


def custom_ops_report(saved_model_dir):
  """The non-core ops of a SavedModel with their library and server version.

  Returns:
    dict: ``ops`` list of ``{"op", "library", "min_tf_serving", "source"}``
    (library = file name under ``tensorflow_text/python/ops/``),
    ``libraries`` (sorted file names to ``TF_LoadLibrary`` before loading),
    ``min_tf_serving`` (str, the largest per-op minimum; ``"any"`` when the
    graph has no non-core op).
  """
  libs = tf_text_op_libraries()
  ops = []
  for name in graph_ops(saved_model_dir):
    if name in libs:
      version, source = MIN_SERVING_VERSION.get(name, DEFAULT_MIN_SERVING)
      ops.append({"op": name, "library": os.path.basename(libs[name]),
                  "min_tf_serving": version, "source": source})
  versions = [o["min_tf_serving"] for o in ops]
  return {"ops": ops,
          "libraries": sorted({o["library"] for o in ops}),
          "min_tf_serving": max(versions, key=version_key) if versions else "any"}
