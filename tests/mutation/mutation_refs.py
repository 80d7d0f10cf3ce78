"""TF-free references for the mutation tests (tests/mutation/).

Every test in this folder runs without TensorFlow: ``mutmut`` reruns them for
each mutant (``bench/results/mutation/README.md``), so they must be fast.

* The original google-research/bert ``tokenization.py`` (PyPI
  ``bert-tensorflow==1.0.4``) imports TensorFlow only for ``tf.gfile.GFile``
  in ``load_vocab`` and absl only for its ``--preserve_unused_tokens`` flag.
  :func:`original_tokenization` executes the installed file's own source
  (read at test time, never vendored) with exactly those three lines edited:
  ``tf.gfile.GFile`` becomes ``open(..., encoding="utf-8")`` and the flag a
  plain attribute ``FLAGS.preserve_unused_tokens``. Each edit must apply
  exactly once, so a change upstream fails loudly.
* The official SQuAD v1.1 / v2.0 evaluation as shipped by PyPI
  ``tf-models-official==2.20.0`` (``official/nlp/tools/squad_evaluate_v1_1.py``
  and ``squad_evaluate_v2_0.py``): standard library plus absl logging, loaded
  from their files (the ``official`` package's ``__init__`` is not run).
"""

import functools
import importlib.util
import os
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "data")
VOCAB = os.path.join(DATA, "vocab", "uncased_vocab.txt")

_TF_IMPORT = "import tensorflow.compat.v1 as tf\n"
_FLAGS_IMPORT = "from absl import flags\n"
_FLAGS_DEFINE = """\
FLAGS = flags.FLAGS

flags.DEFINE_bool(
    "preserve_unused_tokens", False,
    "If True, Wordpiece tokenization will not be applied to words in the vocab."
)
"""


def _package_file(package, *parts):
  spec = importlib.util.find_spec(package)
  assert spec is not None and spec.submodule_search_locations, (
      "%s is not installed: tools/setup.sh --test installs it" % package)
  path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
  assert os.path.isfile(path), "missing %s" % path
  return path


class _GFile:
  """``tf.gfile.GFile(path, "r")`` for a local UTF-8 file."""

  def __init__(self, path, mode):
    assert mode == "r", mode
    self._f = open(path, encoding="utf-8")

  def __enter__(self):
    return self._f

  def __exit__(self, *exc):
    self._f.close()


@functools.lru_cache(maxsize=None)
def original_tokenization():
  """The installed original ``bert/tokenization.py``, run without TensorFlow.

  Returns a module; ``module.FLAGS.preserve_unused_tokens`` is its flag
  (default False; a test that sets it must reset it).
  """
  path = _package_file("bert", "tokenization.py")
  with open(path, encoding="utf-8") as f:
    code = f.read()
  for old in (_TF_IMPORT, _FLAGS_IMPORT, _FLAGS_DEFINE):
    assert code.count(old) == 1, "edit target not found exactly once in %s:\n%s" % (
        path, old)
    code = code.replace(old, "")
  assert "tf." in code and "import tensorflow" not in code and "flags." not in code
  module = types.ModuleType("original_bert_tokenization_tf_free")
  module.__file__ = path
  module.tf = types.SimpleNamespace(gfile=types.SimpleNamespace(GFile=_GFile))
  module.FLAGS = types.SimpleNamespace(preserve_unused_tokens=False)
  exec(compile(code, path, "exec"), module.__dict__)  # pylint: disable=exec-used
  return module


def _load(name, path):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@functools.lru_cache(maxsize=None)
def official_squad_v1():
  """``official/nlp/tools/squad_evaluate_v1_1.py`` of tf-models-official."""
  return _load("official_squad_evaluate_v1_1",
               _package_file("official", "nlp", "tools", "squad_evaluate_v1_1.py"))


@functools.lru_cache(maxsize=None)
def official_squad_v2():
  """``official/nlp/tools/squad_evaluate_v2_0.py`` of tf-models-official."""
  return _load("official_squad_evaluate_v2_0",
               _package_file("official", "nlp", "tools", "squad_evaluate_v2_0.py"))
