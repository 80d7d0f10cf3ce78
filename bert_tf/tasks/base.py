"""The Task interface: what a training job supplies to :class:`bert_tf.runner.Runner`.

A task owns its model, inputs, loss, metrics, evaluation and output files;
the runner owns the loop, distribution, resume, checkpoint cadence,
TensorBoard, ``eval_results.txt``, the best model and the export hook. A new
task family (question answering, token tagging, multiple choice) is a new
:class:`Task` subclass and needs no change in the runner
(``tests/test_runner.py`` trains a small token-tagging task to show it).

Source: the split follows the TF Model Garden's ``official/core/base_task.py``
(``build_model`` / ``build_inputs`` / ``build_losses`` / ``build_metrics`` /
``initialize``); the loss conventions are those of google-research/bert
``run_pretraining.py`` / ``run_classifier.py``.

Example (a sketch; see ``tests/test_runner.py`` for a complete task)::

  class MyTask(Task):
    name = "my_task"
    def build_model(self): ...
    def train_dataset(self, batch_size, input_context): ...
    def compute_loss(self, model, features, totals=None): ...

  Runner(RunnerParams(output_dir="out")).run(MyTask(), strategy)
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Optional, Sequence

import keras
import tensorflow as tf

from bert_tf import errors


def require_positive(name: str, value, argument: Optional[str] = None) -> None:
  """ParamsError ``"<name> must be positive, got <value>"`` when ``value``
  is not above 0 (NaN included), naming ``argument`` (default ``name``): a
  flag the original runs with anyway (0 epochs, a negative learning rate).

  Raises:
    bert_tf.errors.ParamsError: as above.
  """
  if not value > 0:
    raise errors.ParamsError("%s must be positive, got %g" % (name, value),
                             argument=argument or name)


def check_positive(params, names: Sequence[str]) -> None:
  """:func:`require_positive` of each of ``names`` on ``params`` (None
  passes: an optional limit left unset); the first bad one is raised."""
  for name in names:
    value = getattr(params, name)
    if value is not None:
      require_positive(name, value)


@dataclasses.dataclass
class OptimizerSpec:
  """What the runner needs to build the optimizer.

  Attributes:
    learning_rate: peak learning rate (after warm-up).
    num_train_steps: total optimizer steps (the decay reaches 0 there).
    num_warmup_steps: linear warm-up steps.
    name: ``adamw_original`` (the original AdamWeightDecay), ``adamw``,
      ``lamb`` (see :func:`bert_tf.optimization.create_optimizer`).
  """
  learning_rate: float
  num_train_steps: int
  num_warmup_steps: int
  name: str = "adamw_original"


class Task:
  """Base class of every training task (override what the task needs).

  Class attributes:
    name: the task's name (logs, file names).
    best_metric: key of :meth:`evaluate`'s results that picks the best model
      (higher is better), or None for no best model.
    best_is_lowest: True when a lower ``best_metric`` is better (a loss).
    example_unit: the unit of the throughput in log lines (``examples``,
      ``seq``).
    throughput_name: the TensorBoard tag of the throughput.
    resumable_input: True when :meth:`train_dataset` can be checkpointed
      (its iterator position is then saved and restored: exact resume;
      every task of this package: pretraining, the classifier, SQuAD, NER,
      SWAG). The runner then feeds a plain ``tf.data`` iterator, split over
      the replicas inside the step. Keep the state small: a
      ``Dataset.shuffle`` buffer is saved element by element (about 190
      bytes per element, 82 MB and 7 s per checkpoint for MNLI's 393k
      rows); batches of row indices from a per-epoch permutation
      (:func:`bert_tf.data.classifier_data.index_batches`) save one int64
      per row in one tensor. tf.data must be able to save every dataset of
      the pipeline and the map functions may hold no external state
      (tensorflow-text ops and lookup tables hold none).
    autotune_input: False turns tf.data autotuning off for the training
      dataset (``AUTOTUNE`` parallelism then means one call per core). Its
      optimizer thread sleeps up to 60 s between rounds, and deleting the
      iterator at the end of a run waits for it (measured: 0-60 s idle at
      the end of every fine-tuning run); fine-tuning inputs are light.
    normalized_loss: True when the loss is divided by global counters from
      :meth:`loss_normalizers` (then :meth:`compute_loss` gets ``totals``).
    run_files: files of the output directory that a model directory needs
      beside its checkpoint (copied into ``best/``), written by
      :meth:`write_run_files`.
  """

  name: str = "task"
  best_metric: Optional[str] = None
  best_is_lowest: bool = False
  example_unit: str = "examples"
  throughput_name: str = "examples_per_second"
  resumable_input: bool = False
  autotune_input: bool = True
  normalized_loss: bool = False
  run_files: tuple = ()

  # --- set-up ------------------------------------------------------------

  def check_inputs(self) -> None:
    """Raises a :mod:`bert_tf.errors` error for bad inputs before any step."""

  def optimizer_spec(self) -> OptimizerSpec:
    """The optimizer schedule (requires the task to know its step count)."""
    raise NotImplementedError

  def warmup_warning(self) -> Optional[str]:
    """One line the runner prints before training when the optimizer
    settings risk a known failure (None: nothing to say)."""
    return None

  def build_model(self) -> keras.Model:
    """The model, built (variables created); called in ``strategy.scope()``."""
    raise NotImplementedError

  def checkpoint_objects(self, model: keras.Model) -> dict:
    """Trackables saved with every checkpoint (the optimizer is added by the
    runner). Default: the model and, when it has one, its ``encoder``."""
    objects = {"model": model}
    if getattr(model, "encoder", None) is not None:
      objects["encoder"] = model.encoder
    return objects

  def initialize(self, model: keras.Model) -> Optional[str]:
    """Loads initial weights when no checkpoint is resumed; returns what was
    loaded (for the log), or None."""
    return None

  def write_run_files(self, output_dir: str) -> None:
    """Writes :attr:`run_files` (config, vocab, ...) into ``output_dir``."""

  # --- training ----------------------------------------------------------

  def train_dataset(self, batch_size: int,
                    input_context: Optional[tf.distribute.InputContext]
                    ) -> tf.data.Dataset:
    """This worker's training batches of ``batch_size`` examples (repeated)."""
    raise NotImplementedError

  def loss_normalizers(self, features) -> Optional[Mapping[str, tf.Tensor]]:
    """With :attr:`normalized_loss`: float32 scalar counters the loss is divided
    by, from the inputs alone; the runner sums them over replicas and
    micro-batches first (see :class:`bert_tf.training.Trainer`). Without it,
    :meth:`compute_loss` gets no ``totals`` and returns a loss scaled by the
    global batch size."""
    return None

  def compute_loss(self, model: keras.Model, features, totals=None):
    """One replica's forward pass: ``(loss, sums)``.

    Returns:
      ``loss`` float32 scalar scaled so that its SUM over replicas (and
      micro-batches) is the global loss; ``sums`` dict of float32 scalar
      counters, summed over replicas and steps for :meth:`train_metrics`.
    """
    raise NotImplementedError

  def train_metrics(self, sums: Mapping[str, float]) -> dict:
    """Named metrics (floats) from the counter sums of a loop of steps."""
    return {}

  def explain_data_error(self, error: Exception) -> None:
    """Called with a tf.data parse error; may raise a clearer error naming the
    file and record. Returning re-raises ``error``."""

  # --- evaluation, prediction --------------------------------------------

  def evaluate(self, model: keras.Model, print_fn: Callable[[str], None]) -> dict:
    """Scores the dev data: ``{metric name: float}`` (written to
    ``eval_results.txt`` with ``global_step``)."""
    return {}

  def predict(self, model: keras.Model, output_dir: str,
              print_fn: Callable[[str], None]) -> list:
    """Writes the test predictions; returns the files written."""
    return []
