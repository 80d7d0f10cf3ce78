"""Lazy public-API attributes for a package ``__init__`` (PEP 562).

``import bert_tf`` must load no TensorFlow (the data workers fork from
TF-free modules), so the public names are imported on first use.

Example::

  __getattr__ = _lazy.getattr_for(__name__, {"BertEncoder": "bert_tf.modeling.encoder"})
"""

import importlib
import sys
from typing import Callable, Mapping


def getattr_for(package: str, api: Mapping[str, str]) -> Callable[[str], object]:
  """A module ``__getattr__`` that imports ``api[name]`` (a module path) and
  returns its attribute ``name``, caching it in the package.

  Raises (from the returned function):
    AttributeError: ``name`` is not in ``api``.
  """

  def __getattr__(name):  # pylint: disable=invalid-name
    if name in api:
      value = getattr(importlib.import_module(api[name]), name)
      setattr(sys.modules[package], name, value)
      return value
    raise AttributeError("module %r has no attribute %r" % (package, name))

  return __getattr__
