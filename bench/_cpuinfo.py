"""The CPU line every benchmark table prints (the house rule: model + flags),
and the record of each run under ``bench/results/`` (:func:`record`).

Benchmarks import it as ``from _cpuinfo import record`` (a script's own
folder is first on ``sys.path``).

The flags come from ``bert_tf.precision.cpu_flags`` (the one reader of
``/proc/cpuinfo`` flags), loaded from its file, not as a package: importing
``bert_tf`` would set ``KERAS_BACKEND`` and install import hooks in the
Hugging Face side's processes.
"""

import atexit
import importlib.util
import os
import shlex
import subprocess
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PRECISION = os.path.join(_ROOT, "bert_tf", "precision.py")
# BENCH_RESULTS: another folder for the records (a driver of many runs).
RESULTS = os.environ.get("BENCH_RESULTS") or os.path.join(_ROOT, "bench", "results")


def _precision():
  """``bert_tf.precision``: the imported module, else loaded from its file.

  Raises:
    ImportError: ``bert_tf/precision.py`` is not next to ``bench/``.
  """
  mod = sys.modules.get("bert_tf.precision")
  if mod is not None:
    return mod
  spec = importlib.util.spec_from_file_location("_bert_tf_precision", _PRECISION)
  if spec is None or not os.path.exists(_PRECISION):
    raise ImportError("no %s (bench/_cpuinfo.py reads the CPU flags with it)" % _PRECISION)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def _model_name() -> str:
  """The CPU model from ``lscpu``, else ``/proc/cpuinfo``; ``"unknown CPU"``."""
  try:
    out = subprocess.run(["lscpu"], capture_output=True, text=True,
                         check=False).stdout
  except OSError:
    out = ""
  for line in out.splitlines():
    key, _, value = line.partition(":")
    if key.strip() == "Model name" and value.strip():
      return value.strip()
  try:
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
          return value.strip()
  except OSError:
    pass
  return "unknown CPU"


def cpu_info() -> tuple[str, list[str]]:
  """``(model name, sorted avx2/avx512*/amx* flags)``.

  The model from ``lscpu`` (``/proc/cpuinfo`` as a fallback), the flags
  from ``bert_tf.precision.cpu_flags()`` (``/proc/cpuinfo``);
  ``("unknown CPU", [])`` where neither exists. Never raises (a missing
  ``bert_tf/precision.py`` reads as no flags).
  """
  try:
    flags = _precision().cpu_flags()
  except Exception:  # pylint: disable=broad-except
    flags = frozenset()
  return _model_name(), sorted(f for f in flags
                               if f == "avx2" or f.startswith(("avx512", "amx")))


def cpu_line() -> str:
  """``"CPU: <model>, <n> cores; flags: <avx2/avx512*/amx*>"``, the line a
  benchmark prints above its table."""
  model, flags = cpu_info()
  return "CPU: %s, %d cores; flags: %s" % (model, os.cpu_count() or 0,
                                          " ".join(flags) or "(none)")


def command_line() -> str:
  """``"command: <python> <arguments>"``, the line under the CPU line."""
  return "command: " + " ".join(
      shlex.quote(a) for a in [os.path.relpath(sys.executable, _ROOT)] + sys.argv)


class _Tee:
  """A text stream that writes to ``stream`` and to the file ``copy``."""

  def __init__(self, stream, copy):
    self.stream, self.copy = stream, copy

  def write(self, text):
    self.copy.write(text)
    return self.stream.write(text)

  def flush(self):
    self.copy.flush()
    self.stream.flush()

  def __getattr__(self, name):  # isatty, encoding, fileno, ...
    return getattr(self.stream, name)


def record(name: str | None = None) -> list[str]:
  """Starts a benchmark's record; returns its first two lines (CPU, command).

  Prints :func:`cpu_line` and :func:`command_line`, and copies everything the
  process prints on ``sys.stdout`` from then on (progress, the table) to
  ``bench/results/<name>/<UTC date>_<time>.txt`` (``name``: the script's,
  without ``.py``, unless given). The file is written as
  ``<path>.partial`` and renamed when the process exits without an uncaught
  exception or a non-zero ``sys.exit`` (which ``record`` wraps: an exit is
  not an exception to ``sys.excepthook``): a killed or failed run never
  leaves a file that looks whole. Prints the path at the end.
  """
  name = name or os.path.splitext(os.path.basename(sys.argv[0]))[0]
  folder = os.path.join(RESULTS, name)
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, time.strftime("%Y-%m-%d_%H%M%S", time.gmtime()) + ".txt")
  copy = open(path + ".partial", "w", encoding="utf-8")  # pylint: disable=consider-using-with
  sys.stdout = _Tee(sys.stdout, copy)
  failed = []
  hook = sys.excepthook
  sys.excepthook = lambda *exc: (failed.append(1), hook(*exc))
  exit_ = sys.exit
  sys.exit = lambda status=None: (status in (None, 0) or failed.append(1), exit_(status))

  def close():
    sys.stdout.flush()
    sys.stdout = sys.stdout.stream if isinstance(sys.stdout, _Tee) else sys.stdout
    copy.close()
    if not failed:
      os.replace(path + ".partial", path)
      sys.__stdout__.write("record: %s\n" % os.path.relpath(path))

  atexit.register(close)
  lines = [cpu_line(), command_line()]
  print("\n".join(lines), flush=True)
  return lines
