"""Puts the project root on ``sys.path`` so ``tools/*.py`` run from a checkout."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

# Quiet TensorFlow's INFO lines (checkpoint sharding, asset writing, ...):
# the tools print their own progress. TF logs through absl, so default absl's
# --verbosity to WARNING (-1); --verbosity=0 brings INFO back.
from absl import flags as _flags  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import logging as _absl_logging  # pylint: disable=g-import-not-at-top,wrong-import-position

_flags.FLAGS.set_default("verbosity", -1)
_absl_logging.set_verbosity(_absl_logging.WARNING)
