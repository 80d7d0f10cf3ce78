"""Quiet start-up for the command-line tools (standard library and
``bert_tf._quiet`` only: no TensorFlow until asked).

TensorFlow prints a C++ banner while it loads: ``WARNING: All log messages
before absl::InitializeLog() ...``, ``Could not find cuda drivers``, the CPU
feature note, and on a machine without a GPU ``E0000 ... failed call to
cuInit``. None of it is about the user's job. :func:`import_tensorflow`
imports TensorFlow (and probes the devices, which is where ``cuInit`` runs)
inside :func:`bert_tf._quiet.filtered_stderr`, which writes back every line
that is not one of those known start-up lines: a real warning or error still
shows; ``TF_CPP_MIN_LOG_LEVEL`` defaults to 3 (C++ notes such as oneDNN's
``DT_INT64`` line at run time are not shown). ``--verbosity=N`` with N >= 0 (or ``-v``) on the
command line turns the filtering off and shows TensorFlow's INFO lines, as
before.

While TensorFlow loads, ``sklearn`` and ``matplotlib`` cannot be imported
(:func:`without_optional_imports`): Keras imports them when they are installed
(its scikit-learn wrappers, its image-gallery plot), which costs ~1.4 s of a
~4.5 s start (Zen 5, 2026-11-28) and no tool uses them then; later imports
(``bert-tune``'s PNG) work as usual.

It also defaults absl's ``--verbosity`` to WARNING (-1): TensorFlow logs its
INFO lines (checkpoint sharding, asset writing, ...) through absl, and the
tools print their own progress.
"""

import contextlib
import importlib.abc
import logging
import os
import re
import sys
from typing import Iterator, NoReturn

from bert_tf import _quiet


def verbosity_requested(argv=None) -> bool:
  """True when the command line asks for ``--verbosity`` >= 0 (or ``-v``)."""
  for arg in (sys.argv if argv is None else argv)[1:]:
    m = re.match(r"^--?(verbosity|v)(?:=(-?\d+))?$", arg)
    if m and (m.group(2) is None or int(m.group(2)) >= 0):
      return True
  return False


def determinism_requested(argv=None) -> bool:
  """True when the command line sets ``--deterministic`` (``=true``/``=1``)."""
  on = False
  for arg in (sys.argv if argv is None else argv)[1:]:
    m = re.match(r"^--(no)?deterministic(?:=(\w+))?$", arg)
    if m:
      on = not m.group(1) and (m.group(2) is None
                               or m.group(2).lower() in ("true", "t", "1", "yes"))
  return on


def configure(argv=None) -> bool:
  """Sets the quiet defaults (before TensorFlow is imported).

  With ``--deterministic`` on the command line it also sets
  ``TF_ENABLE_ONEDNN_OPTS=0`` (TensorFlow reads it once, when it loads):
  oneDNN's kernels are not bit-reproducible from run to run. TensorFlow
  gives oneDNN its intra-op pool, whose ``get_in_parallel()`` is true on the
  pool's own threads, and oneDNN then runs a primitive on ONE thread instead
  of the pool size. Which thread runs a kernel depends on timing: the
  executor runs the next expensive kernel inline on the thread where the
  previous one finished, and an asynchronous kernel (an XLA launch: the
  fused GELU gradient, the fused optimizer update) finishes on a pool
  thread. A MatMul whose reduction oneDNN splits by thread count (a weight
  gradient, summed over batch x sequence) then rounds differently: the
  one-ulp resume flake, seen only under load. Eigen's kernels, with the pool
  size fixed by :func:`bert_tf.training.enable_determinism`, block their
  reductions the same way on whichever thread they run.

  Returns:
    True when the tool runs quietly (no ``--verbosity`` >= 0 asked for).
  """
  quiet = not verbosity_requested(argv)
  os.environ.setdefault("KERAS_BACKEND", "tensorflow")
  if determinism_requested(argv):
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
  if quiet:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", _quiet.QUIET_LEVEL)
  else:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
  return quiet


# Optional packages Keras imports at load time when installed, which no tool
# uses while TensorFlow loads (keras/src/wrappers, keras/src/visualization).
OPTIONAL_IMPORTS = ("sklearn", "matplotlib")


class _Refuse(importlib.abc.MetaPathFinder):
  """A finder that makes ``names`` (and their submodules) unimportable."""

  def __init__(self, names):
    self.names = names

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    if fullname.split(".")[0] in self.names:
      raise ModuleNotFoundError("not while TensorFlow loads", name=fullname)
    return None


@contextlib.contextmanager
def without_optional_imports(names=OPTIONAL_IMPORTS) -> Iterator[None]:
  """Within the block, importing ``names`` raises ``ModuleNotFoundError``
  (those not imported yet); afterwards they import as usual (nothing is left
  in ``sys.modules``). Used around the TensorFlow import, where Keras treats
  a missing optional package as absent."""
  finder = _Refuse(tuple(n for n in names if n not in sys.modules))
  sys.meta_path.insert(0, finder)
  try:
    yield
  finally:
    sys.meta_path.remove(finder)


def import_tensorflow(argv=None):
  """Imports TensorFlow with its C++ start-up banner filtered (see above).

  Returns:
    the ``tensorflow`` module.
  """
  quiet = configure(argv)
  if "tensorflow" in sys.modules or not quiet:
    with without_optional_imports():
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf
  with _quiet.filtered_stderr(), without_optional_imports():
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.config.list_physical_devices()  # the CUDA probe (cuInit) runs here
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.WARNING)
  return tf


def set_absl_defaults() -> None:
  """absl ``--verbosity`` defaults to WARNING (-1); ``--verbosity=0`` is INFO."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  flags.FLAGS.set_default("verbosity", -1)
  absl_logging.set_verbosity(absl_logging.WARNING)


def setup(tensorflow: bool = True) -> None:
  """What every tool does first: quiet defaults, absl verbosity, and (when the
  tool needs it) a quiet TensorFlow import."""
  configure()
  if tensorflow:
    import_tensorflow()
  set_absl_defaults()


def register_key_flags(from_module: str, tool_module: str) -> None:
  """Makes the flags defined in ``from_module`` key flags of the tool (so
  ``--helpshort`` lists them); ``"__main__"`` means ``sys.argv[0]``, as absl
  looks it up."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  module = sys.argv[0] if tool_module == "__main__" else tool_module
  for flag in flags.FLAGS.get_key_flags_for_module(from_module):
    flags.FLAGS.register_key_flag_for_module(module, flag)


def run_app(main, tool_module: str) -> None:
  """Runs ``absl.app.run(main)`` for a tool, as a console script too.

  absl's ``--help``/``--helpshort`` print ``__main__``'s docstring and the
  key flags of the module named ``sys.argv[0]``. Run as ``python
  tools/X.py`` the tool IS ``__main__``; run as a console script
  (``bert-run-squad``), ``__main__`` is pip's wrapper and ``sys.argv[0]`` its
  path, so absl found neither the description nor a flag. This copies the
  tool module's docstring to ``__main__`` and registers the tool's key flags
  (its own and those it adopted) for ``sys.argv[0]``.

  Args:
    main: the tool's ``main(argv)``.
    tool_module: the tool's ``__name__``.
  """
  from absl import app  # pylint: disable=g-import-not-at-top
  main_module = sys.modules["__main__"]
  module = sys.modules[tool_module]
  if module is not main_module:
    main_module.__doc__ = module.__doc__
    register_key_flags(tool_module, "__main__")

  def main_with_plain_log_lines(argv):
    if not verbosity_requested():
      plain_log_lines()
    return main(argv)
  app.run(main_with_plain_log_lines)


class PlainFormatter(logging.Formatter):
  """``warning: <message>`` / ``error: <message>`` / ``<message>``: a log line
  for people, without absl's ``W1126 17:39:37.989433 1405... file.py:327]``
  prefix (``--verbosity=0`` or higher keeps absl's format, for debugging)."""

  def format(self, record):
    text = record.getMessage()
    if record.levelno >= logging.ERROR:
      text = "error: " + text
    elif record.levelno >= logging.WARNING:
      text = "warning: " + text
    if record.exc_info:
      text += "\n" + self.formatException(record.exc_info)
    return text


def plain_log_lines() -> None:
  """Gives absl's log handler the :class:`PlainFormatter` (after
  ``app.run`` has installed it)."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  absl_logging.get_absl_handler().setFormatter(PlainFormatter())


def fail(tool: str, error: Exception) -> NoReturn:
  """Exits with ``<tool>: error: <message>``. A ``bert_tf.errors`` error that
  names its argument is worded as the flag: ``max_seq_length must be ...``
  becomes ``--max_seq_length must be ...``, another message gets a
  ``--argument:`` prefix (unless it names the flag already)."""
  message = str(error)
  argument = getattr(error, "argument", None)
  if argument and ("--" + argument) not in message:
    if message.startswith(argument):
      message = "--" + message
    else:
      message = "--%s: %s" % (argument, message)
  sys.exit("%s: error: %s" % (tool, message))
