"""The original's own tokenizer tests, run on ``bert_tf.tokenization``.

PyPI ``bert-tensorflow==1.0.4`` ships ``bert/tokenization_test.py``. It is read
from the installed package at test time (never vendored), edited in exactly
two places, written to a temporary directory and run in a process of its own:

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

import pytest

from conftest import ROOT, run_tool

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


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
  """Both files (edited, and edited without the preserve edit) run by one
  pytest in one process of their own (``tests/original_pytest.py``, forked
  from the warm interpreter of ``conftest.run_tool``: no TensorFlow import).

  Returns ``{file stem: (output, {test name: outcome})}`` for the files' own
  tests; TensorFlow's inherited ``TestCase.test_session`` (skipped, "Not a
  test.") is deselected.
  """
  tmp_path = tmp_path_factory.mktemp("tokenization_suite")
  edited = _edited_source()
  files = {"tokenization_test": edited,
           "unedited_preserve_test": edited.replace(FLAGSAVER_NEW, FLAGSAVER_OLD)}
  for stem, code in files.items():
    (tmp_path / (stem + ".py")).write_text(code, encoding="utf-8")
  # ``python -m pytest`` forked from the warm interpreter (TensorFlow already
  # imported; bert_tf from the installed package, as the tools import it).
  proc = run_tool([os.path.join(ROOT, "tests", "original_pytest.py"), "-q", "-rA",
                   "-p", "no:cacheprovider", "-o", "addopts=", "-k", "not test_session"]
                  + [stem + ".py" for stem in files], cwd=str(tmp_path), check=False)
  out = proc.stdout + proc.stderr
  got = {stem: {} for stem in files}
  for m in re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED)\S* (\w+)\.py::TokenizationTest::(\w+)",
                       out, re.M):
    got[m.group(2)][m.group(3)] = m.group(1)
  return out, got


def test_original_tokenization_test_passes_on_ours(outcomes):
  out, got = outcomes
  names = re.findall(r"^  def (test_\w+)\(self\):", _edited_source(), re.M)
  assert len(names) == NUM_TESTS
  assert got["tokenization_test"] == {n: "PASSED" for n in names}, out[-3000:]
  # The other file's one failure: NUM_TESTS + NUM_TESTS - 1 passed in all.
  assert re.search(r"\b1 failed, %d passed, 2 deselected" % (2 * NUM_TESTS - 1), out), \
      out[-2000:]


def test_unedited_preserve_test_needs_the_option(outcomes):
  """Without the second edit the preserve test fails on ours (the library
  defines no ``--preserve_unused_tokens`` flag): the edit is what passes it."""
  out, got = outcomes
  got = got["unedited_preserve_test"]
  assert len(got) == NUM_TESTS, out[-3000:]
  failed = sorted(n for n, o in got.items() if o != "PASSED")
  assert failed == ["test_full_tokenizer_preserve_unused"], out[-3000:]
