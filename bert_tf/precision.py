"""Compute dtype policies: the names the tools take, ``auto``, and the slow-bf16 warning.

``--dtype`` takes a Keras dtype policy name (``float32``, the original's
numerics and the default; ``mixed_bfloat16``; ``mixed_float16``, with dynamic
loss scaling) or ``auto``: ``mixed_bfloat16`` where the hardware computes
bfloat16 natively (a TPU, or a CPU with ``avx512_bf16`` or ``amx_bf16``),
else ``float32``. On a GPU ``auto`` stays ``float32`` (pick
``mixed_float16``/``mixed_bfloat16`` yourself: which one pays depends on the
card). Standard library only (no TensorFlow import).

On a CPU without bf16 units ``mixed_bfloat16`` is emulated (each MatMul
converts to float32 and back) and runs at 0.2-0.3x float32's speed
(measured on an AVX2-only Xeon and an AVX-512 EPYC without ``avx512_bf16``):
:func:`slow_dtype_warning` says so; it is a warning, not an error.
"""

from __future__ import annotations

from typing import FrozenSet, Optional, Tuple

DTYPES = ("float32", "mixed_bfloat16", "mixed_float16", "auto")
# /proc/cpuinfo flags of CPU units that compute bfloat16 dot products.
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> FrozenSet[str]:
  """The CPU's feature flags (the first ``flags`` line of ``cpuinfo``).

  Returns:
    a frozenset of flag names; empty where the file is missing (not Linux).
  """
  try:
    with open(cpuinfo, encoding="utf-8", errors="replace") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "flags":
          return frozenset(value.split())
  except OSError:
    pass
  return frozenset()


def bf16_units(flags: Optional[FrozenSet[str]] = None) -> Tuple[str, ...]:
  """The bf16 flags among ``flags`` (default: this CPU's), e.g.
  ``("amx_bf16", "avx512_bf16")``; empty: no native bf16 compute."""
  flags = cpu_flags() if flags is None else flags
  return tuple(f for f in BF16_FLAGS if f in flags)


def resolve_dtype(dtype: str, device: str = "cpu",
                  flags: Optional[FrozenSet[str]] = None) -> Tuple[str, str]:
  """The Keras policy name for ``dtype`` and why.

  Args:
    dtype: one of :data:`DTYPES`.
    device: ``"cpu"``, ``"gpu"`` or ``"tpu"`` (what the strategy runs on).
    flags: CPU flags (default: this machine's ``/proc/cpuinfo``).

  Returns:
    ``(policy, reason)``: ``policy`` is never ``"auto"``; ``reason`` is a
    short phrase for the log ("" unless ``dtype`` is ``auto``).

  Raises:
    ValueError: ``dtype`` is not one of :data:`DTYPES`.
  """
  if dtype not in DTYPES:
    raise ValueError("unknown dtype %r (%s)" % (dtype, ", ".join(DTYPES)))
  if dtype != "auto":
    return dtype, ""
  if device == "tpu":
    return "mixed_bfloat16", "a TPU computes bfloat16 natively"
  if device == "gpu":
    return "float32", "on a GPU auto keeps float32; choose mixed_float16 or mixed_bfloat16"
  units = bf16_units(flags)
  if units:
    return "mixed_bfloat16", "this CPU has %s" % " and ".join(units)
  return "float32", "this CPU has no bf16 units (avx512_bf16, amx_bf16)"


def slow_dtype_warning(policy: str, device: str = "cpu",
                       flags: Optional[FrozenSet[str]] = None) -> Optional[str]:
  """One line when ``policy`` will be slower than float32 here, else None.

  Only ``mixed_bfloat16`` on a CPU without bf16 units (emulated: measured
  0.2-0.3x float32). Not an error: the numbers are still right.
  """
  if policy != "mixed_bfloat16" or device != "cpu" or bf16_units(flags):
    return None
  return ("--dtype=mixed_bfloat16 on a CPU without bf16 units (no avx512_bf16 or "
          "amx_bf16 in /proc/cpuinfo): bfloat16 is emulated and runs at about "
          "0.2-0.3x float32's speed here; use --dtype=float32 (or --dtype=auto)")
