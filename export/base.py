"""What every SavedModel export shares: variable tracking, tracing, writing.

The plumbing under the task exports (:mod:`bert_tf.export.saved_model`,
``squad``, ``tagging``, ``multiple_choice``, ``features``), under public
names so that no export module reaches into another's privates:

* :class:`Untracked`, :func:`track_tf_variables`, :func:`serving_call`: a
  Keras model inside a ``tf.Module`` whose SavedModel the session-based C++
  loader (TF Serving) restores and serves;
* :func:`string_spec`, :func:`as_batch`, :func:`check_same_batch`,
  :func:`row_ids`: the string signatures' inputs;
* :func:`check_export_dir`, :func:`next_version`, :func:`write_version`:
  ``<export_dir>/<version>/`` of any format written under a temporary name
  and renamed when whole, with the metadata file (its name and the version
  rule are the client's, :mod:`bert_tf.export.client`, so reader and writer
  agree); :func:`write_export` / :func:`write_module`: a SavedModel with
  warm-up requests through it.
"""

import json
import os
import re
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from bert_tf import errors
from bert_tf import io_utils
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling import tagging
from bert_tf.export import client
from bert_tf.export import serving_ops
from bert_tf.export import warmup

METADATA_FILE = client.METADATA_FILE


class Untracked:
  """Holds an object out of ``tf.Module`` attribute tracking."""

  def __init__(self, obj):
    self.obj = obj


def hold(module: tf.Module, model) -> None:
  """Keeps ``model`` on ``module`` untracked, where :func:`serving_call`
  finds it: for a module used in-process, whose model is not saved."""
  module._layer = Untracked(model)  # pylint: disable=protected-access


def track_tf_variables(module: tf.Module, layer, dtype: Optional[str] = None) -> None:
  """Makes ``layer``'s weights part of ``module``'s SavedModel as plain tf.Variables.

  A Keras 3 variable wraps a ``tf.Variable``; when the Keras object itself is
  tracked, ``tf.saved_model.save`` checkpoints a *copy* of each variable
  (``Variable_N`` in the graph) while the serving functions read the
  wrapped one. Python's object-graph loader reconnects them, but the
  session-based C++ loader that TF Serving uses (``LoadSavedModel`` /
  ``TF_LoadSessionFromSavedModel``) only runs the restore op, which fills the
  copies: the first request fails with "Could not find variable
  pooler/bias" (found by ``tests/test_export.py``'s C loader). Tracking the
  wrapped ``tf.Variable``s directly, and not the Keras object, gives one
  variable per weight that is both restored and read.

  Every query/key/value kernel and bias is saved once, as the concatenated
  copies of a :class:`bert_tf.modeling.layers.FusedQKV` (``fused_qkv``):
  the serving graph, traced through :func:`serving_call`, reads those and
  never concatenates kernels per request. With ``dtype`` (``"bfloat16"``)
  those copies, and every other projection of the blocks, are saved in that
  dtype and the graph computes in it (``FusedQKV(dtype=...)``).
  """
  hold(module, layer)
  fused = bert_layers.FusedQKV(layer, dtype=dtype)
  module._fused_qkv = Untracked(fused)
  replaced = {id(v) for v in fused.replaced}
  module.weights = [v.value for v in layer.variables if id(v.value) not in replaced]
  module.fused_qkv = list(fused.variables)


def serving_call(module: tf.Module, inputs, **kwargs):
  """``module``'s model on ``inputs`` (``training=False``) as the export traces
  it: with the fused query/key/value copies where :func:`track_tf_variables`
  made them (a module that holds its model untracked, for in-process use,
  calls it plainly). ``kwargs`` go to the model's call."""
  model = module._layer.obj  # pylint: disable=protected-access
  fused = getattr(module, "_fused_qkv", None)
  if fused is None:
    return model(inputs, training=False, **kwargs)
  with fused.obj.active():
    return model(inputs, training=False, **kwargs)


def string_spec(name: str) -> tf.TensorSpec:
  """A string [B] signature input called ``name``."""
  return tf.TensorSpec([None], tf.string, name=name)


def as_batch(text: tf.Tensor) -> tf.Tensor:
  """``text`` as a 1-D string batch [B]: any other rank is flattened.

  Signature shapes are not enforced at run time (neither by
  ``tf.saved_model.load`` signatures nor by TF Serving), so a [B, 1] or
  scalar request is given the defined meaning "these strings, in row-major
  order" instead of reaching the tokenizer with an unexpected rank. A plain
  ``tf.reshape(text, [-1])`` is not enough: the signature declares [B], so
  grappler removes that reshape as a no-op and a [B, 1] request would reach
  the ops unflattened. ``PlaceholderWithDefault`` with an unknown shape hides
  the declared shape, so the reshape stays.
  """
  hidden = tf.compat.v1.placeholder_with_default(text, shape=None)
  return tf.reshape(hidden, [-1])


def check_same_batch(text_a: tf.Tensor, text_b: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """``(text_a, text_b)`` flattened and gated on equal sizes (string [B] each).

  Raises (when run):
    tf.errors.InvalidArgumentError: the two batches differ in size.
  """
  text_a, text_b = as_batch(text_a), as_batch(text_b)
  check = tf.debugging.assert_equal(
      tf.size(text_a), tf.size(text_b),
      message="text_a and text_b must hold the same number of strings")
  with tf.control_dependencies([check]):
    return tf.identity(text_a), tf.identity(text_b)


# int64 [N]: the row of each of a ragged tensor's N values (one definition,
# in the modeling layer, which the exports may import).
row_ids = tagging.row_ids


def next_version(export_dir: str) -> int:
  """1 + the largest numeric version directory in ``export_dir`` (1 if none;
  the rule of :func:`bert_tf.export.client.version_numbers`)."""
  return max(client.version_numbers(export_dir), default=0) + 1


def signature_summary(saved_model_dir: str) -> Dict[str, Dict[str, List[str]]]:
  """``{signature: {"inputs": [names], "outputs": [names]}}`` of a written
  SavedModel, read from its ``saved_model.pb``."""
  sm = serving_ops.read_saved_model_proto(saved_model_dir)
  return {name: {"inputs": sorted(sig.inputs), "outputs": sorted(sig.outputs)}
          for mg in sm.meta_graphs for name, sig in mg.signature_def.items()
          if not name.startswith("__")}


class ExportDirError(errors.BertTfError, ValueError):
  """An export directory that holds something besides model versions."""


# Leftovers of io_utils.atomic_directory killed mid-write: ".<version>.<random>.tmp".
_TEMP_VERSION = re.compile(r"^\.\d+\..*\.tmp$")


def check_export_dir(export_dir: str) -> None:
  """Refuses an ``export_dir`` that holds anything but version directories.

  TF Serving serves the highest numeric folder of its ``model_base_path``
  and ignores the rest; a directory that holds other files is most likely
  not an export directory (a run directory, a data folder), and a version
  written there would be served from the wrong place.

  Raises:
    ExportDirError: an entry other than a numeric directory (or a
      temporary directory of an interrupted export), naming it.
  """
  if not os.path.isdir(export_dir):
    return
  versions = set(map(str, client.version_numbers(export_dir)))
  others = sorted(e for e in os.listdir(export_dir)
                  if e not in versions and not _TEMP_VERSION.match(e))
  if others:
    raise ExportDirError(
        "%s holds %s%s besides model versions: an export directory holds only "
        "numbered versions (TF Serving's model_base_path); pass an empty or new "
        "directory" % (export_dir, others[0], " and %d more" % (len(others) - 1)
                       if len(others) > 1 else ""), argument="export_dir")


def write_module(module: tf.Module, export_dir: str, version: Optional[int] = None) -> str:
  """Writes a serving module (:class:`bert_tf.export.serving.ServingModule`)
  as a SavedModel: its signatures, metadata and warm-up requests
  (:func:`write_export`); returns the version path."""
  return write_export(module, module.signatures(), export_dir, version,
                      module.metadata(), module.warmup_requests())


def write_version(export_dir: str, version: Optional[int],
                  fill: Callable[[str], dict], metadata: dict) -> str:
  """Writes ``export_dir/<version>/`` whole or not at all; returns its path.

  The one versioned, atomic writer of every format: ``fill(directory)``
  writes the format's files into a temporary directory and returns
  metadata of its own (merged over ``metadata``); the metadata file goes to
  ``assets.extra/`` (:data:`METADATA_FILE`); the directory is renamed to the
  version when whole (a killed export leaves no version).

  Raises:
    FileExistsError: that version already exists.
    ExportDirError: ``export_dir`` holds something besides versions.
  """
  check_export_dir(export_dir)
  version = next_version(export_dir) if version is None else int(version)
  final = os.path.join(export_dir, str(version))
  with io_utils.atomic_directory(final) as tmp:
    metadata = dict(metadata, **(fill(tmp) or {}))
    extra = os.path.join(tmp, client.ASSETS_EXTRA)
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, METADATA_FILE), "w", encoding="utf-8") as f:
      json.dump(metadata, f, indent=2)
  return final


def write_export(module: tf.Module, signatures: Dict[str, Callable], export_dir: str,
                 version: Optional[int], metadata: dict, requests: list) -> str:
  """Saves ``module`` with ``signatures`` + warm-up + metadata; returns the path.

  ``signatures``: name -> the module's ``tf.function`` (with its
  ``input_signature``), traced once, inside ``tf.saved_model.save``: a
  concrete function taken before the save is traced again there (the
  function cache keys on the save context's variable policy), which cost a
  tiny classifier export ~0.6 s of its 2.6 s (2026-11-29).

  Raises:
    FileExistsError: that version already exists.
    ExportDirError: ``export_dir`` holds something besides versions.
  """
  import tensorflow_text  # pylint: disable=g-import-not-at-top

  def fill(tmp):
    tf.saved_model.save(module, tmp, signatures=signatures)
    extra = os.path.join(tmp, client.ASSETS_EXTRA)
    os.makedirs(extra, exist_ok=True)
    n = warmup.write_warmup_requests(os.path.join(extra, warmup.WARMUP_FILE), requests)
    report = serving_ops.custom_ops_report(tmp)
    return {
        "signatures": signature_summary(tmp),
        "custom_ops": report["ops"],
        "op_libraries": report["libraries"],
        "min_tf_serving_version": report["min_tf_serving"],
        "warmup_requests": n,
        "tensorflow_version": tf.__version__,
        "tensorflow_text_version": tensorflow_text.__version__,
        "requires": "import tensorflow_text (tensorflow-text %s ops), or "
                    "TF_LoadLibrary of op_libraries, or TF Serving >= %s" % (
                        tensorflow_text.__version__, report["min_tf_serving"]),
    }
  return write_version(export_dir, version, fill, metadata)
