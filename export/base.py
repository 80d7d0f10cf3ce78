"""What every SavedModel export shares: variable tracking, tracing, writing.

The plumbing under the task exports (:mod:`bert_tf.export.saved_model`,
``squad``, ``tagging``, ``multiple_choice``, ``features``), under public
names so that no export module reaches into another's privates:

* :class:`Untracked`, :func:`track_tf_variables`, :func:`serving_call`: a
  Keras model inside a ``tf.Module`` whose SavedModel the session-based C++
  loader (TF Serving) restores and serves;
* :func:`string_spec`, :func:`as_batch`, :func:`check_same_batch`,
  :func:`row_ids`: the string signatures' inputs;
* :func:`next_version`, :func:`write_export`: ``<export_dir>/<version>/``
  written under a temporary name and renamed when whole, with warm-up
  requests and the metadata file (its name and the version rule are the
  client's, :mod:`bert_tf.export.client`, so reader and writer agree).
"""

import json
import os
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from bert_tf import io_utils
from bert_tf.modeling import layers as bert_layers
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


def row_ids(ragged: tf.RaggedTensor) -> tf.Tensor:
  """int64 [N]: the row of each of ``ragged``'s N values (``value_rowids``)."""
  return tf.cast(ragged.value_rowids(), tf.int64)


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
  """
  version = next_version(export_dir) if version is None else int(version)
  final = os.path.join(export_dir, str(version))
  import tensorflow_text  # pylint: disable=g-import-not-at-top
  with io_utils.atomic_directory(final) as tmp:
    tf.saved_model.save(module, tmp, signatures=signatures)
    extra = os.path.join(tmp, client.ASSETS_EXTRA)
    os.makedirs(extra, exist_ok=True)
    n = warmup.write_warmup_requests(os.path.join(extra, warmup.WARMUP_FILE),
                                     requests)
    report = serving_ops.custom_ops_report(tmp)
    metadata = dict(metadata)
    metadata.update({
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
    })
    with open(os.path.join(extra, METADATA_FILE), "w", encoding="utf-8") as f:
      json.dump(metadata, f, indent=2)
  return final


