"""bert_tf's Keras classes, known to Keras before their modules load.

The tension: ``import bert_tf`` must load no TensorFlow (the pretraining-data
workers fork from TF-free modules), yet ``keras.models.load_model("x.keras")``
in a new process that ran ``import bert_tf`` must find ``bert_tf>BertClassifier``
and ``bert_tf>AdamWeightDecay`` in Keras's registry, and a class is registered
only when its module runs (Keras imports modules by name for its own
packages only).

The resolution: :func:`install` (called by ``bert_tf/__init__.py``) puts, into
Keras's global custom-object registry (``keras.saving.get_custom_objects()``,
the public live dictionary), one small stand-in per public serializable class:
:class:`LazyClass`, whose ``from_config`` imports the defining module (which
registers the real class over the stand-in) and delegates to it. When Keras
is not loaded yet, :func:`install` leaves a one-shot import hook
(``_import_hooks``) that does this right after ``keras`` finishes importing;
nothing here imports Keras or TensorFlow itself, so a process that never
imports Keras (a data worker) loads neither. ``tests/test_keras_native.py``
checks that :data:`CLASSES` equals what the modules register.

Standard library only.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from typing import Any, Dict

from bert_tf import _import_hooks

# registered name ("bert_tf>Class") -> defining module. Every class that
# bert_tf registers with keras.saving.register_keras_serializable.
CLASSES: Dict[str, str] = {
    "bert_tf>AdamWeightDecay": "bert_tf.optimization",
    "bert_tf>AdamW": "bert_tf.optimization",
    "bert_tf>WarmupLinearDecay": "bert_tf.optimization",
    "bert_tf>BertEmbeddings": "bert_tf.modeling.layers",
    "bert_tf>Dropout": "bert_tf.modeling.layers",
    "bert_tf>TransformerBlock": "bert_tf.modeling.layers",
    "bert_tf>BertEncoder": "bert_tf.modeling.encoder",
    "bert_tf>BertClassifier": "bert_tf.modeling.models",
    "bert_tf>BertPretrainer": "bert_tf.modeling.models",
    "bert_tf>BertQuestionAnswerer": "bert_tf.modeling.models",
    "bert_tf>DenseHead": "bert_tf.modeling.models",
    "bert_tf>MaskedLMHead": "bert_tf.modeling.models",
    "bert_tf>BertMultipleChoice": "bert_tf.modeling.multiple_choice",
    "bert_tf>BertTokenClassifier": "bert_tf.modeling.tagging",
    "bert_tf>PreprocessorLayer": "bert_tf.preprocessing",
}

_lock = threading.Lock()
_installed = []


class LazyClass:
  """Stands in Keras's registry for a bert_tf class until its module loads.

  Keras's deserializer looks a ``registered_name`` up in the registry and
  calls ``from_config`` on what it finds; this object imports ``module``
  (whose decorator then registers the real class in its place) and hands
  the call on. Any other attribute is read from the real class.

  Example::

    stand_in = LazyClass("bert_tf>BertEncoder", "bert_tf.modeling.encoder")
    encoder_cls = stand_in.resolve()   # imports TensorFlow, Keras, the module
  """

  def __init__(self, registered_name: str, module: str):
    self.registered_name = registered_name
    self.module = module

  def resolve(self) -> type:
    """The real class (imports its module).

    Raises:
      ImportError: the module cannot be imported.
    """
    mod = importlib.import_module(self.module)
    return getattr(mod, self.registered_name.split(">", 1)[1])

  def from_config(self, config: Dict[str, Any], *args, **kwargs):
    return self.resolve().from_config(config, *args, **kwargs)

  def __call__(self, *args, **kwargs):
    return self.resolve()(*args, **kwargs)

  def __getattr__(self, name: str):
    if name.startswith("__"):
      raise AttributeError(name)
    return getattr(self.resolve(), name)

  def __repr__(self) -> str:
    return "<bert_tf lazy Keras class %s from %s>" % (self.registered_name,
                                                     self.module)


def _register(keras_module) -> None:
  """Adds a :class:`LazyClass` for every name of :data:`CLASSES` that Keras
  does not know yet (a real class already registered stays)."""
  registry = keras_module.saving.get_custom_objects()
  for name, module in CLASSES.items():
    registry.setdefault(name, LazyClass(name, module))


@contextlib.contextmanager
def _register_after(module):
  yield  # keras/__init__.py runs here
  _register(module)


def install() -> None:
  """Makes bert_tf's classes loadable by ``keras.models.load_model``.

  Keras already imported: registers the stand-ins now. Otherwise: leaves the
  one-shot import hook that registers them when ``keras`` is imported.
  Imports neither Keras nor TensorFlow. Idempotent.
  """
  with _lock:
    if _installed:
      return
    _installed.append(True)
  if not _import_hooks.around_import("keras", _register_after):
    _register(sys.modules["keras"])
