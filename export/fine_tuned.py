"""Rebuilds a fine-tuned classifier from a ``run_classifier.py`` output dir.

``bert_tf.jobs.run_classifier`` writes, beside its checkpoints
(``ckpt-N``, a ``tf.train.Checkpoint(model=..., encoder=..., optimizer=...)``):
``bert_config.json``, ``vocab.txt`` and ``classifier_config.json``
(``task_name``, ``labels``, ``do_lower_case``, ``max_seq_length``,
``is_pair``, ``is_regression``; older runs lack the last two, then the task
table decides) and the best dev model in ``best/``. This module reads them back so
``tools/export_saved_model.py`` can export a finished run.
"""

import dataclasses
import json
import os

import tensorflow as tf

from bert_tf import runner
from bert_tf.tasks import classification as classifier
from bert_tf import config as config_lib
from bert_tf import preprocessing
from bert_tf import errors

RUN_CONFIG = classifier.RUN_CONFIG
BEST_DIR = runner.BEST_DIR


FineTunedDirError = errors.FineTunedDirError  # re-exported; defined in bert_tf.errors


@dataclasses.dataclass
class FineTuned:
  """A restored fine-tuned run.

  Attributes:
    model: :class:`bert_tf.modeling.BertClassifier` with the checkpoint's weights.
    preprocessor: :class:`bert_tf.preprocessing.BertPreprocessor` (the run's
      vocab, casing and ``max_seq_length`` unless overridden).
    labels: label names (None for regression).
    task_name, is_pair, is_regression, checkpoint: as recorded / restored.
  """
  model: object
  preprocessor: object
  labels: list
  task_name: str
  is_pair: bool
  is_regression: bool
  checkpoint: str


def _task_shape(run, path):
  """``(is_pair, is_regression)`` from the run config, else from the task table."""
  is_pair, is_regression = run.get("is_pair"), run.get("is_regression")
  if is_pair is None or is_regression is None:
    from bert_tf.data import classifier_data  # pylint: disable=g-import-not-at-top
    try:
      task = classifier_data.get_task(run["task_name"])
    except (classifier_data.TaskError, KeyError) as e:
      raise FineTunedDirError(
          "%s: cannot tell whether task %r takes pairs (%s); add \"is_pair\" "
          "and \"is_regression\" to it" % (path, run.get("task_name"), e)) from e
    if is_pair is None:
      is_pair = task.is_pair
    if is_regression is None:
      is_regression = bool(getattr(task, "is_regression", False))
  return bool(is_pair), bool(is_regression)


def load_fine_tuned(output_dir, checkpoint=None, max_seq_length=None):
  """Restores the classifier of a ``run_classifier.py --output_dir``.

  Args:
    output_dir: the run's output directory.
    checkpoint: a checkpoint prefix (``.../ckpt-N``); default the best dev
      model (``output_dir/best/``, kept by ``run_classifier``) when there is
      one, else the latest checkpoint in ``output_dir``.
    max_seq_length: overrides the run's ``max_seq_length`` (int, 3 ..
      ``max_position_embeddings``).

  Returns:
    :class:`FineTuned`.

  Raises:
    FineTunedDirError: a file or checkpoint is missing (message names it),
      or ``max_seq_length`` is out of range.
  """
  for name in ("bert_config.json", "vocab.txt", RUN_CONFIG):
    if not os.path.exists(os.path.join(output_dir, name)):
      raise FineTunedDirError("%s: missing %s (not a run_classifier.py "
                              "--output_dir?)" % (output_dir, name))
  run_path = os.path.join(output_dir, RUN_CONFIG)
  with open(run_path, encoding="utf-8") as f:
    run = json.load(f)
  config = config_lib.BertConfig.from_json_file(
      os.path.join(output_dir, "bert_config.json"))
  is_pair, is_regression = _task_shape(run, run_path)
  labels = None if is_regression else list(run["labels"])
  seq = int(max_seq_length or run["max_seq_length"])
  if not 3 <= seq <= config.max_position_embeddings:
    raise FineTunedDirError("--max_seq_length %d: must be in [3, %d]" %
                            (seq, config.max_position_embeddings))
  best = os.path.join(output_dir, BEST_DIR)
  ckpt = checkpoint or (os.path.isdir(best) and tf.train.latest_checkpoint(best)
                        ) or tf.train.latest_checkpoint(output_dir)
  if not ckpt:
    raise FineTunedDirError("%s: no checkpoint (ckpt-N.index) found" % output_dir)
  if not tf.io.gfile.exists(ckpt + ".index"):
    raise FineTunedDirError("--checkpoint %s: no such checkpoint (%s.index)" %
                            (ckpt, ckpt))
  model = classifier.build_classifier(config, 1 if is_regression else len(labels))
  tf.train.Checkpoint(model=model).read(ckpt).expect_partial(
      ).assert_existing_objects_matched()
  pre = preprocessing.BertPreprocessor(os.path.join(output_dir, "vocab.txt"),
                                       run.get("do_lower_case", True), seq)
  return FineTuned(model, pre, labels, run.get("task_name", ""), is_pair,
                   is_regression, ckpt)
