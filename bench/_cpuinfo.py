"""The CPU line every benchmark table prints (the house rule: model + flags).

Benchmarks import it as ``from _cpuinfo import cpu_info`` (a script's own
folder is first on ``sys.path``).
"""

import os
import subprocess


def cpu_info() -> tuple[str, list[str]]:
  """``(model name, sorted avx2/avx512*/amx* flags)``.

  From ``lscpu``, with ``/proc/cpuinfo`` as a fallback; ``("unknown CPU", [])``
  where neither exists. Never raises.
  """
  model, flags = "unknown CPU", []
  try:
    out = subprocess.run(["lscpu"], capture_output=True, text=True,
                         check=False).stdout
  except OSError:
    out = ""
  if not out and os.path.exists("/proc/cpuinfo"):
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      out = "\n".join(l.replace("model name", "Model name").replace(
          "flags\t", "Flags") for l in f.read().splitlines())
  for line in out.splitlines():
    key, _, value = line.partition(":")
    key = key.strip()
    if key == "Model name" and model == "unknown CPU":
      model = value.strip()
    elif key == "Flags" and not flags:
      flags = sorted(f for f in value.split()
                     if f == "avx2" or f.startswith(("avx512", "amx")))
  return model, flags


def cpu_line() -> str:
  """``"CPU: <model>, <n> cores; flags: <avx2/avx512*/amx*>"``, the line a
  benchmark prints above its table."""
  model, flags = cpu_info()
  return "CPU: %s, %d cores; flags: %s" % (model, os.cpu_count() or 0,
                                          " ".join(flags) or "(none)")
