"""TensorFlow's C++ start-up banner kept from the user (standard library only).

While it loads, TensorFlow prints lines that are not about the user's job,
whatever ``TF_CPP_MIN_LOG_LEVEL`` says (they come before its logger is set
up): ``WARNING: All log messages before absl::InitializeLog() ...``, the
oneDNN note, ``Could not find cuda drivers``, the CPU feature note, and, at
the first device probe on a machine without a GPU, ``E0000 ... failed call
to cuInit``. :func:`filtered_stderr` sends file descriptor 2 to a temporary
file and writes back every line that is not one of those (a real warning or
error still shows); :func:`install` (called by ``import bert_tf``) runs the
import of ``tensorflow`` and ``tensorflow_text`` and TensorFlow's device probe
inside it, in any process that imported ``bert_tf`` first. The tools use
the same code (``tools/_startup.py``).

Set ``TF_CPP_MIN_LOG_LEVEL=0`` (or 1) before ``import bert_tf`` to see
everything, as with plain TensorFlow; otherwise ``import bert_tf`` defaults
it to 3 (C++ errors that matter reach Python as exceptions; the ones left
are notes such as oneDNN's ``DT_INT64 only on platforms with AVX-512``).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Iterator

from bert_tf import _import_hooks

# C++ start-up lines TensorFlow prints on every CPU machine.
NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IWE]\d{4} [\d:. ]+\d+ (cudart_stub|cuda_platform|cuda_executor|"
    r"cpu_feature_guard|cuda_dnn|cuda_fft|cuda_blas|port|mkl_util|onednn_env)\.cc:\d+\]"
    r"|To enable the following instructions:"
    r"|Could not find cuda drivers"
    r"|.*failed call to cuInit)")

QUIET_LEVEL = "3"


def is_quiet() -> bool:
  """False when the user asked TensorFlow for INFO or WARNING lines
  (``TF_CPP_MIN_LOG_LEVEL`` 0 or 1)."""
  return os.environ.get("TF_CPP_MIN_LOG_LEVEL", QUIET_LEVEL) not in ("0", "1")


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
  """File descriptor 2 goes to a temporary file inside the block; on leaving,
  every captured line that does not match :data:`NOISE` is written back."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile(mode="w+b") as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      text = captured.read().decode("utf-8", "replace")
      kept = [l for l in text.splitlines() if l.strip() and not NOISE.match(l)]
      if kept:
        sys.stderr.write("\n".join(kept) + "\n")
        sys.stderr.flush()


@contextlib.contextmanager
def _quiet_tensorflow(module) -> Iterator[None]:
  if not is_quiet():  # asked for since install() (a tool's --verbosity=0)
    yield
    return
  with filtered_stderr():
    yield  # tensorflow/__init__.py runs here
    module.config.list_physical_devices()  # the CUDA probe (cuInit) runs here


@contextlib.contextmanager
def _quiet_import(module) -> Iterator[None]:  # pylint: disable=unused-argument
  if not is_quiet():
    yield
    return
  with filtered_stderr():
    yield


def install() -> None:
  """Defaults ``TF_CPP_MIN_LOG_LEVEL`` to 3 and, unless the user asked for
  TensorFlow's lines, runs the later import of ``tensorflow`` (with its device
  probe) and ``tensorflow_text`` with the banner filtered. Imports neither."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", QUIET_LEVEL)
  if not is_quiet():
    return
  _import_hooks.around_import("tensorflow", _quiet_tensorflow)
  _import_hooks.around_import("tensorflow_text", _quiet_import)
