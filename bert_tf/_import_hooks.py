"""Code that runs around the import of a top-level module (standard library only).

``import bert_tf`` must load no TensorFlow, yet two things must happen when
TensorFlow or Keras do load in a process that imported ``bert_tf``: Keras
must know bert_tf's classes (``_keras_registry``), and TensorFlow's C++
start-up banner must not reach the user (``_quiet``). :func:`around_import`
leaves a one-shot ``sys.meta_path`` finder that lets the ordinary finders
find the module and wraps its ``exec_module`` in the given context managers.

Example::

  @contextlib.contextmanager
  def after_keras(module):
    yield                    # keras/__init__.py runs here
    print("keras loaded", module.__version__)

  around_import("keras", after_keras)
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
import threading
from typing import Callable, ContextManager, Dict, List

Wrapper = Callable[[object], ContextManager]

_lock = threading.RLock()
_pending: Dict[str, List[Wrapper]] = {}


class _Finder(importlib.abc.MetaPathFinder):
  """Finds nothing itself: for a module with pending wrappers, asks the other
  finders and wraps the loader's ``exec_module`` once."""

  def find_spec(self, fullname, path, target=None):  # pylint: disable=unused-argument
    with _lock:
      wrappers = _pending.pop(fullname, None)
      if not _pending:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]
    if not wrappers:
      return None
    spec = importlib.util.find_spec(fullname)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
      return spec
    loader = spec.loader
    original = loader.exec_module

    def exec_module(module):
      try:
        with contextlib.ExitStack() as stack:
          for wrapper in wrappers:
            stack.enter_context(wrapper(module))
          original(module)
      finally:
        loader.__dict__.pop("exec_module", None)  # back to the class's method

    loader.exec_module = exec_module
    return spec


def around_import(name: str, wrapper: Wrapper) -> bool:
  """Runs the import of the top-level module ``name`` inside ``wrapper(module)``.

  Args:
    name: a top-level module name (``"keras"``, ``"tensorflow"``).
    wrapper: called with the new module object before its code runs; returns
      a context manager entered around that code (code after its ``yield``
      runs once the module is whole).

  Returns:
    False when ``name`` is already imported (nothing is left pending; the
    caller acts at once), else True.
  """
  if "." in name:
    raise ValueError("around_import: %r is not a top-level module" % name)
  with _lock:
    if name in sys.modules:
      return False
    _pending.setdefault(name, []).append(wrapper)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
      sys.meta_path.insert(0, _Finder())
  return True
