"""``--dtype=auto`` and the slow-bf16 warning (``bert_tf.precision``, the runner).

``auto`` must pick ``mixed_bfloat16`` exactly where the CPU has bf16 units
(``avx512_bf16`` or ``amx_bf16`` in ``/proc/cpuinfo``) and ``float32``
elsewhere; ``mixed_bfloat16`` without them warns (one line) and still runs.
The tool test reads this machine's flags independently (``lscpu``-style
parse of ``/proc/cpuinfo`` in the test) and checks the line the tool prints.
"""

import os

import pytest

from bert_tf import precision
from conftest import DATA, MOVIE_DIR, TINY_CONFIG, VOCAB, copy_slice, run_tool

AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})
ZEN4 = frozenset({"avx2", "avx512f", "avx512_bf16", "avx512_vnni"})
AVX2 = frozenset({"avx2", "fma"})
SKX = frozenset({"avx2", "avx512f", "avx512bw", "avx512_vnni"})


@pytest.mark.parametrize("flags,policy", [(AMX, "mixed_bfloat16"),
                                          (ZEN4, "mixed_bfloat16"),
                                          (AVX2, "float32"), (SKX, "float32"),
                                          (frozenset(), "float32")])
def test_auto_follows_the_bf16_units(flags, policy):
  got, reason = precision.resolve_dtype("auto", "cpu", flags)
  assert got == policy
  assert ("bf16 units" in reason) == (policy == "float32")
  for name in ("float32", "mixed_bfloat16", "mixed_float16"):
    assert precision.resolve_dtype(name, "cpu", flags) == (name, "")


def test_auto_on_accelerators_and_unknown_names():
  assert precision.resolve_dtype("auto", "tpu", frozenset())[0] == "mixed_bfloat16"
  assert precision.resolve_dtype("auto", "gpu", AMX)[0] == "float32"
  with pytest.raises(ValueError, match="bfloat17"):
    precision.resolve_dtype("bfloat17")


def test_slow_warning_only_for_emulated_bf16():
  line = precision.slow_dtype_warning("mixed_bfloat16", "cpu", SKX)
  assert line is not None and "\n" not in line
  assert "0.2-0.3x" in line and "--dtype=float32" in line
  assert precision.slow_dtype_warning("mixed_bfloat16", "cpu", ZEN4) is None
  assert precision.slow_dtype_warning("mixed_bfloat16", "tpu", frozenset()) is None
  assert precision.slow_dtype_warning("float32", "cpu", SKX) is None
  assert precision.slow_dtype_warning("mixed_float16", "cpu", SKX) is None


def test_cpu_flags_reads_the_first_flags_line(tmp_path):
  info = tmp_path / "cpuinfo"
  info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx512_bf16 amx_bf16\n"
                  "\nprocessor\t: 1\nflags\t\t: fpu\n")
  assert precision.cpu_flags(str(info)) == {"fpu", "avx512_bf16", "amx_bf16"}
  assert precision.cpu_flags(str(tmp_path / "missing")) == frozenset()
  assert precision.bf16_units(frozenset({"amx_bf16", "avx512_bf16"})) == (
      "amx_bf16", "avx512_bf16")


def this_machine_has_bf16():
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    for line in f:
      if line.startswith("flags"):
        words = line.split(":", 1)[1].split()
        return "avx512_bf16" in words or "amx_bf16" in words
  return False


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_run_classifier_dtype_auto_says_what_it_chose(tmp_path):
  data = tmp_path / "data"
  copy_slice(os.path.join(MOVIE_DIR, "train.tsv"), str(data / "train.tsv"), limit=32)
  copy_slice(os.path.join(MOVIE_DIR, "dev.tsv"), str(data / "dev.tsv"), limit=16)
  proc = run_tool(["tools/run_classifier.py", "--task_name=sst-2", "--do_train",
                   "--data_dir=" + str(data), "--bert_config_file=" + TINY_CONFIG,
                   "--vocab_file=" + VOCAB, "--max_seq_length=32",
                   "--train_batch_size=8", "--num_train_epochs=0.25",
                   "--dtype=auto", "--output_dir=" + str(tmp_path / "out")])
  lines = [l for l in (proc.stdout + proc.stderr).splitlines() if "--dtype=auto" in l]
  want = "mixed_bfloat16" if this_machine_has_bf16() else "float32"
  assert lines == ["--dtype=auto: %s (%s)" % (
      want, precision.resolve_dtype("auto", "cpu")[1])], lines
  assert "0.2-0.3x" not in proc.stderr


def test_runner_warns_on_emulated_bf16_and_resolves_auto(monkeypatch, caplog):
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import runner  # pylint: disable=g-import-not-at-top
  printed = []
  try:
    monkeypatch.setattr(precision, "cpu_flags", lambda *a, **k: SKX)
    assert runner.set_dtype_policy("mixed_bfloat16", None, printed.append) == "mixed_bfloat16"
    assert keras.config.dtype_policy().name == "mixed_bfloat16"
    warned = [r.getMessage() for r in caplog.records if "0.2-0.3x" in r.getMessage()]
    assert len(warned) == 1 and printed == []
    assert runner.set_dtype_policy("auto", None, printed.append) == "float32"
    assert printed == ["--dtype=auto: float32 (this CPU has no bf16 units "
                       "(avx512_bf16, amx_bf16))"]
    monkeypatch.setattr(precision, "cpu_flags", lambda *a, **k: AMX)
    caplog.clear()
    assert runner.set_dtype_policy("auto", None, printed.append) == "mixed_bfloat16"
    assert not [r for r in caplog.records if "0.2-0.3x" in r.getMessage()]
  finally:
    keras.config.set_dtype_policy("float32")
