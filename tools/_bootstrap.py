"""Puts the project root on ``sys.path`` so ``tools/*.py`` run from a checkout."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

# Quiet TensorFlow's own INFO lines (checkpoint sharding etc.); the tools
# print their progress themselves. --verbosity still controls absl logging.
import logging as _logging  # pylint: disable=g-import-not-at-top,wrong-import-position

_logging.getLogger("tensorflow").setLevel(_logging.WARNING)
