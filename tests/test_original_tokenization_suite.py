"""The original's own tokenizer tests, run on ``bert_tf.tokenization``.

PyPI ``bert-tensorflow==1.0.4`` ships ``bert/tokenization_test.py``. It is read
from the installed package at test time (never vendored), edited in exactly
two places, written to a temporary directory and run in a fresh process:

1. ``from bert import tokenization`` -> ``from bert_tf import tokenization``;
2. the ``flagsaver.flagsaver(preserve_unused_tokens=True)`` block (the
   original's tokenizer reads a global flag that its module defines on
   import) -> the same call with ``preserve_unused_tokens=True`` passed to
   ``FullTokenizer`` (a library defines no global flags; the tools do).

Each edit must apply exactly once, so a change upstream fails loudly here.
"""

import importlib.util
import os
import re
import subprocess
import sys

from conftest import ROOT

IMPORT_OLD = "from bert import tokenization\n"
IMPORT_NEW = "from bert_tf import tokenization\n"

FLAGSAVER_OLD = """\
    with flagsaver.flagsaver(preserve_unused_tokens=True):
      tokens, ids = self.tokenize_with_full_tokenizer()
"""
# The helper builds the tokenizer as ``tokenization.FullTokenizer(vocab_file)``;
# for the duration of the call it gets preserve_unused_tokens=True instead.
FLAGSAVER_NEW = """\
    full_tokenizer = tokenization.FullTokenizer
    tokenization.FullTokenizer = lambda vocab_file: full_tokenizer(
        vocab_file, preserve_unused_tokens=True)
    try:
      tokens, ids = self.tokenize_with_full_tokenizer()
    finally:
      tokenization.FullTokenizer = full_tokenizer
"""

NUM_TESTS = 10


def _edited_source():
  spec = importlib.util.find_spec("bert")
  assert spec is not None, "run tools/setup.sh --test (installs bert-tensorflow)"
  path = os.path.join(os.path.dirname(spec.origin), "tokenization_test.py")
  with open(path, encoding="utf-8") as f:
    code = f.read()
  for old, new in ((IMPORT_OLD, IMPORT_NEW), (FLAGSAVER_OLD, FLAGSAVER_NEW)):
    assert code.count(old) == 1, "edit target not found exactly once in %s:\n%s" % (
        path, old)
    code = code.replace(old, new)
  assert "from bert import" not in code and "flagsaver.flagsaver(" not in code
  return code


def _run(tmp_path, code):
  """Runs the file with pytest in a fresh process.

  Returns ``(returncode, output, {test name: outcome})`` for the file's own
  tests; TensorFlow's inherited ``TestCase.test_session`` (skipped, "Not a
  test.") is deselected.
  """
  test_file = tmp_path / "tokenization_test.py"
  test_file.write_text(code, encoding="utf-8")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
  proc = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
       "-o", "addopts=", "-k", "not test_session", str(test_file)],
      cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
  out = proc.stdout + proc.stderr
  outcomes = {m.group(2): m.group(1) for m in re.finditer(
      r"^(PASSED|FAILED|ERROR|SKIPPED)\S* \S*::TokenizationTest::(\w+)", out, re.M)}
  return proc.returncode, out, outcomes


def test_original_tokenization_test_passes_on_ours(tmp_path):
  code = _edited_source()
  names = re.findall(r"^  def (test_\w+)\(self\):", code, re.M)
  assert len(names) == NUM_TESTS
  returncode, out, outcomes = _run(tmp_path, code)
  assert returncode == 0, out[-4000:]
  assert outcomes == {n: "PASSED" for n in names}, out[-3000:]
  assert re.search(r"\b%d passed, 1 deselected" % NUM_TESTS, out), out[-2000:]


def test_unedited_preserve_test_needs_the_option(tmp_path):
  """Without the second edit the preserve test fails on ours (the library
  defines no ``--preserve_unused_tokens`` flag): the edit is what passes it."""
  code = _edited_source().replace(FLAGSAVER_NEW, FLAGSAVER_OLD)
  returncode, out, outcomes = _run(tmp_path, code)
  assert returncode != 0
  assert len(outcomes) == NUM_TESTS, out[-3000:]
  failed = sorted(n for n, o in outcomes.items() if o != "PASSED")
  assert failed == ["test_full_tokenizer_preserve_unused"], out[-3000:]
