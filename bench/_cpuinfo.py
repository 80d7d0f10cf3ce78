"""The CPU line every benchmark table prints (the house rule: model + flags).

Benchmarks import it as ``from _cpuinfo import cpu_info`` (a script's own
folder is first on ``sys.path``).

The flags come from ``bert_tf.precision.cpu_flags`` (the one reader of
``/proc/cpuinfo`` flags; ``--dtype=auto`` decides with it). That module is
standard library only, but it is loaded here from its file
(``../bert_tf/precision.py``), not as ``bert_tf.precision``: importing the
package would run ``bert_tf/__init__.py`` (it sets ``KERAS_BACKEND`` and
installs import hooks), and the Hugging Face side of the comparisons
(``hf_finetune_compare.py``) runs where ``bert_tf`` need not be installed
and TensorFlow need not exist. A process that has already imported
``bert_tf.precision`` reuses that module.
"""

import importlib.util
import os
import subprocess
import sys

_PRECISION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "bert_tf", "precision.py")


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
