"""The layout of a run directory: its file names and the one checkpoint rule.

Every tool that trains writes a run directory (``--output_dir``); presets,
exports, the search and the tools read it. This module is the one place that
knows its layout, and it imports no TensorFlow (the checkpoint state file
``checkpoint`` is a one-field text proto, read here as
``tf.train.latest_checkpoint`` reads it), so the TF-only serving client and
the data workers may use it too.

Layout (google-research/bert's names where it has one)::

  OUTPUT_DIR/
    bert_config.json         the encoder's sizes (modeling.BertConfig)
    vocab.txt                the WordPiece vocabulary the run used
    <kind>_config.json       a fine-tuning run's settings (the kind's
                             settings_file, bert_tf.task_kinds)
    pretraining_config.json  a pretraining run's tokenizer settings (the
                             casing of its vocab.txt; PRETRAINING_CONFIG)
    train_flags.json         the training recipe a resume must match
    determinism.json         the intra-op pool a resume must reuse
    checkpoint, ckpt-N.*     the newest object checkpoints
    eval_results.txt         the last evaluation ("key = value" lines)
    best/                    the best dev model: ckpt-1.*, run files,
                             eval_results.txt, best.json

Example::

  from bert_tf import run_dir
  ckpt = run_dir.model_checkpoint("runs/mrpc")  # best/ckpt-1, else newest
"""

import json
import os
import re
from typing import List, Optional

from bert_tf import task_kinds

BERT_CONFIG = "bert_config.json"
VOCAB = "vocab.txt"
BEST_DIR = "best"
BEST_STATE = "best.json"
EVAL_RESULTS = "eval_results.txt"
RECIPE_FILE = "train_flags.json"
DETERMINISM_FILE = "determinism.json"
DATA_DIR_PREFIX = "data-worker-"
CHECKPOINT_STATE = "checkpoint"

# The settings files of the task kinds (bert_tf.task_kinds, one record per
# kind): a fine-tuning kind's marks a run of that kind; a run directory with
# none is a pretraining run.
CLASSIFIER_CONFIG = task_kinds.CLASSIFIER_CONFIG
SQUAD_CONFIG = task_kinds.SQUAD_CONFIG
NER_CONFIG = task_kinds.NER_CONFIG
SWAG_CONFIG = task_kinds.SWAG_CONFIG
PRETRAINING = "pretraining"
PRETRAINING_CONFIG = task_kinds.PRETRAINING_CONFIG
TOKENIZER_KEYS = ("do_lower_case", "max_seq_length", "preserve_unused_tokens")

_STATE_LINE = re.compile(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"\s*$')
_ANY_STATE_LINE = re.compile(
    r'^(model_checkpoint_path|all_model_checkpoint_paths):\s*"((?:[^"\\]|\\.)*)"\s*$')


def latest_checkpoint(directory: str) -> Optional[str]:
  """The newest checkpoint prefix of ``directory``, or None.

  The same answer as ``tf.train.latest_checkpoint(directory)`` for local
  directories: the ``model_checkpoint_path`` of its ``checkpoint`` state
  file (relative paths are taken relative to ``directory``), provided its
  ``.index`` file exists.

  Args:
    directory: a directory path (str).

  Returns:
    The checkpoint prefix (``DIR/ckpt-N``) or None where there is no state
    file, it names nothing, or the named checkpoint's index is missing.
  """
  try:
    with open(os.path.join(directory, CHECKPOINT_STATE), encoding="utf-8") as f:
      lines = f.read().splitlines()
  except (OSError, UnicodeDecodeError):
    return None
  for line in lines:
    m = _STATE_LINE.match(line.strip())
    if m:
      # Text-proto escapes of a path: only \" and \\ occur in file names;
      # unicode_escape would mangle non-ASCII ones.
      path = re.sub(r"\\(.)", r"\1", m.group(1))
      if not os.path.isabs(path):
        path = os.path.join(directory, path)
      return path if os.path.exists(path + ".index") else None
  return None


def listed_checkpoints(directory: str) -> List[str]:
  """Every checkpoint prefix the ``checkpoint`` state file of ``directory``
  lists (``all_model_checkpoint_paths`` and ``model_checkpoint_path``),
  newest first, whether or not its files exist.

  A resume walks this list to the newest checkpoint whose files read whole
  (:func:`bert_tf.training.restore_latest`); a run directory with any entry
  is a run to resume, even when its newest files were deleted by hand.

  Args:
    directory: a directory path (str).

  Returns:
    list of prefixes (``DIR/ckpt-N``; relative entries joined to
    ``directory``), the state file's order reversed with its
    ``model_checkpoint_path`` first; [] without a readable state file.
  """
  try:
    with open(os.path.join(directory, CHECKPOINT_STATE), encoding="utf-8") as f:
      lines = f.read().splitlines()
  except (OSError, UnicodeDecodeError):
    return []
  latest, listed = None, []
  for line in lines:
    m = _ANY_STATE_LINE.match(line.strip())
    if not m:
      continue
    path = re.sub(r"\\(.)", r"\1", m.group(2))
    if not os.path.isabs(path):
      path = os.path.join(directory, path)
    if m.group(1) == "model_checkpoint_path":
      latest = path
    else:
      listed.append(path)
  out = ([latest] if latest else []) + listed[::-1]
  return list(dict.fromkeys(out))


def best_checkpoint(output_dir: str) -> Optional[str]:
  """``output_dir/best/``'s checkpoint prefix, or None when no best is kept."""
  best = os.path.join(output_dir, BEST_DIR)
  return latest_checkpoint(best) if os.path.isdir(best) else None


def model_checkpoint(output_dir: str) -> Optional[str]:
  """The checkpoint that holds a run's model: the best kept, else the newest.

  The one best-or-latest rule: ``from_preset``, the exports, the search and
  the tools all read a run's model through it (the original's
  ``run_classifier.py`` keeps no best model, so its readers take the newest
  ``model.ckpt-N``; ours keeps ``best/`` by the task's ``best_metric``).

  Args:
    output_dir: a run directory (str).

  Returns:
    ``output_dir/best/ckpt-1`` when ``best/`` holds a checkpoint, else the
    newest checkpoint of ``output_dir``, else None.
  """
  return best_checkpoint(output_dir) or latest_checkpoint(output_dir)


def run_dir_of(prefix: str) -> str:
  """The run directory of a checkpoint prefix (``best/``'s parent for a best one).

  Args:
    prefix: a checkpoint prefix such as ``RUN/ckpt-7`` or ``RUN/best/ckpt-1``.

  Returns:
    The directory that holds the run's ``bert_config.json``.
  """
  d = os.path.dirname(os.path.abspath(prefix))
  if (not os.path.exists(os.path.join(d, BERT_CONFIG)) and
      os.path.basename(d) == BEST_DIR):
    d = os.path.dirname(d)
  return d


def run_kinds(output_dir: str) -> list:
  """The fine-tuning kinds (:func:`bert_tf.task_kinds.fine_tuning_kinds`)
  whose settings file is in ``output_dir``: names, in registration order."""
  return [k.name for k in task_kinds.fine_tuning_kinds()
          if os.path.exists(os.path.join(output_dir, k.settings_file))]


def read_results(path: str) -> Optional[dict]:
  """An ``eval_results.txt`` as ``{key: value string}`` (None: no file)."""
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return dict(l.rstrip("\n").split(" = ", 1) for l in f if " = " in l)


def recorded_settings(directory: str) -> dict:
  """The tokenizer settings (:data:`TOKENIZER_KEYS`) the settings files of
  a run directory record (:func:`bert_tf.task_kinds.settings_files`, in
  that order; {} when none does)."""
  out = {}
  for name in task_kinds.settings_files():
    try:
      with open(os.path.join(directory, name), encoding="utf-8") as f:
        recorded = json.load(f)
    except (OSError, ValueError):
      continue
    if isinstance(recorded, dict):
      out.update({k: recorded[k] for k in TOKENIZER_KEYS if recorded.get(k) is not None})
  return out
