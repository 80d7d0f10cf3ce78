"""The training jobs of the command-line tools: a task run by the runner.

``run_pretraining`` (google-research/bert ``run_pretraining.py``),
``run_classifier`` (``run_classifier.py``) and ``run_squad``
(``run_squad.py``) compose a task of
:mod:`bert_tf.tasks` with :class:`bert_tf.runner.Runner`. Export is a hook
(``exporter``) that the caller passes in, of one shape for every task
(:data:`Exporter`): the tools and the search pass
:func:`bert_tf.export.export_model`; the library never imports
:mod:`bert_tf.export`.

The fine-tuning jobs (``run_classifier``, ``run_squad``, ``run_ner``,
``run_swag``: each task kind's ``job`` in :mod:`bert_tf.task_kinds`) take
one set of keyword arguments, so a caller such as the search runs any of
them the same way: ``job(params, strategy, do_train=..., do_eval=...,
do_predict=..., print_fn=..., exporter=..., task=...)``. An action left
None is the params' field of that name (the SQuAD, NER and SWAG tools' flags).

Example::

  from bert_tf import distribute, jobs
  from bert_tf.tasks.classification import ClassifierParams
  jobs.run_classifier(ClassifierParams(task_name="sst-2", data_dir="data/sst2",
                                       output_dir="/tmp/sst2",
                                       init_checkpoint=HF_DIR),
                      distribute.get_strategy("one_device"), do_eval=True)
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Optional

from bert_tf import config as config_lib
from bert_tf import runner
from bert_tf.tasks import classification
from bert_tf.tasks import pretraining
from bert_tf.tasks import squad
from bert_tf.tasks import swag
from bert_tf.tasks import tagging

# The export hook: ``exporter(model, output_dir, export_dir) -> version path``,
# given the in-memory model (the best one when kept), the run directory (its
# ``<kind>_config.json``, ``bert_config.json`` and ``vocab.txt`` are written
# there before training: the exporter builds what it needs from them) and
# the export base directory.
Exporter = Callable[[Any, str, str], str]


def _with_actions(params: Any, **actions: Optional[bool]) -> Any:
  """``params`` with each action given (``do_train=True``, ...) that is one
  of its fields; None and the actions it has no field for change nothing
  (SQuAD has no ``do_eval``: it evaluates by predicting a file with answers)."""
  names = {f.name for f in dataclasses.fields(params)}
  given = {k: bool(v) for k, v in actions.items() if v is not None and k in names}
  return dataclasses.replace(params, **given) if given else params


def _export_fn(exporter: Optional[Exporter], params) -> Optional[Callable[[Any], str]]:
  """The runner's ``export_fn(model)``: ``exporter`` bound to ``params``'s run
  and export directories; None without an exporter or ``params.export_dir``."""
  if exporter is None or not params.export_dir:
    return None
  return lambda model: exporter(model, params.output_dir, params.export_dir)


def run_pretraining(config: config_lib.BertConfig,
                    params: pretraining.PretrainingParams, strategy,
                    do_train: bool = True, do_eval: bool = False,
                    print_fn: Callable[[str], None] = print,
                    on_finish: Optional[Callable] = None) -> dict:
  """Trains (resuming from ``output_dir``) and/or evaluates a BERT pretrainer.

  Files in ``output_dir``: ``bert_config.json``, checkpoints ``ckpt-N``
  (chief only; other workers of a multi-worker job write to a temporary
  directory that is removed; every worker keeps its data position in
  ``data-worker-<i>/``), ``eval_results.txt`` (``masked_lm_accuracy``,
  ``masked_lm_loss``, ``next_sentence_accuracy``, ``next_sentence_loss``,
  ``global_step``), TensorBoard event files in ``train/`` and ``eval/``.

  Args:
    config: :class:`bert_tf.config.BertConfig`.
    params: :class:`bert_tf.tasks.pretraining.PretrainingParams`.
    strategy: a ``tf.distribute.Strategy``.
    do_train: train to ``num_train_steps`` (or ``stop_at_step``).
    do_eval: evaluate after training.
    print_fn: progress lines go here (every ``iterations_per_loop`` steps and
      about every minute: :class:`bert_tf.training.ProgressCadence`).
    on_finish: optional ``on_finish(model, optimizer)`` called at the end.

  Returns:
    dict of final metrics (``train_*``, evaluation, ``global_step``).

  Raises:
    bert_tf.errors.BertTfError subclasses (ValueError) naming the flag or
    file, before any step where the flags and the first records show it.
  """
  task = pretraining.PretrainingTask(config, params)
  task.check_inputs()  # bad flags and records are named before the baseline reads them
  warning = pretraining.warmup_warning(params) if do_train else None
  if warning:
    print_fn(warning)
  if do_train or do_eval:
    token, accuracy = task.baseline()
    print_fn("masked-LM baseline: always predicting the commonest masked token "
             "(id %d) scores masked_lm_accuracy %.4f on this data "
             "(commonest_token_accuracy in the log and TensorBoard); a model "
             "at that number has learned only token frequencies" % (token, accuracy))
  return runner.Runner(runner.RunnerParams.from_params(params), print_fn).run(
      task, strategy, do_train=do_train, do_eval=do_eval, on_finish=on_finish)


def run_classifier(params: classification.ClassifierParams, strategy,
                   do_train: bool = True, do_eval: bool = True,
                   do_predict: bool = False,
                   print_fn: Callable[[str], None] = print,
                   exporter: Optional[Exporter] = None,
                   task: Optional[classification.ClassificationTask] = None) -> dict:
  """Fine-tunes, evaluates, predicts and exports, as asked.

  Files in ``output_dir``: checkpoints (``ckpt-N``), ``bert_config.json``,
  ``vocab.txt``, ``classifier_config.json``, ``eval_results.txt`` (the last
  evaluation: ``eval_loss``, the task's metrics with prefix ``eval_``, MNLI's
  mismatched set with ``eval_mismatched_``, ``global_step``), ``best/`` (the
  best dev model), ``test_results*.tsv`` and the GLUE submission files.
  Prediction and export use ``best/`` when it exists (logged), else the
  final weights.

  Args:
    params: :class:`bert_tf.tasks.classification.ClassifierParams`.
    strategy: a ``tf.distribute.Strategy``.
    do_train / do_eval / do_predict: what to run (dev evaluation after every
      epoch when training).
    print_fn: progress lines go here.
    exporter: optional :data:`Exporter`, called as ``exporter(model,
      params.output_dir, params.export_dir)`` with the final (best) model
      when ``params.export_dir`` is set (e.g.
      :func:`bert_tf.export.export_model`).
    task: an already built task to run (its data read once; e.g. one
      search trial's :meth:`bert_tf.tasks.fine_tuning.FineTuningTask.with_params`
      copy); default: built from ``params``.

  Returns:
    dict: ``eval_*`` results and ``global_step``, ``best_step`` /
    ``best_<metric>``, ``export_path``, ``test_files``, as they apply.

  Raises:
    bert_tf.errors.BertTfError subclasses naming the bad flag or file.
  """
  task = task or classification.ClassificationTask(
      params, do_train=do_train, do_eval=do_eval, do_predict=do_predict)
  task.check_inputs()  # batch sizes against the rows, before any line or file
  if do_train:
    print_fn("fine-tuning %s: %d examples, %d steps (batch %d, %.3g epochs)" % (
        task.name, len(task.train), task.num_train_steps, params.train_batch_size,
        params.num_train_epochs))
  for line in task.untold_data_lines():  # lengths cut per split, batches
    print_fn(line)
  export_fn = _export_fn(exporter, params)
  return runner.Runner(runner.RunnerParams.from_params(params), print_fn).run(
      task, strategy, do_train=do_train, do_eval=do_eval and bool(task.devs),
      do_predict=do_predict,
      eval_at_steps=task.eval_at_steps() if task.devs else (),
      export_fn=export_fn)


def run_squad(params: squad.SquadParams, strategy,
              print_fn: Callable[[str], None] = print,
              exporter: Optional[Exporter] = None,
              task: Optional[squad.QuestionAnsweringTask] = None, *,
              do_train: Optional[bool] = None, do_eval: Optional[bool] = None,
              do_predict: Optional[bool] = None) -> dict:
  """Fine-tunes on SQuAD and/or predicts, as ``params.do_train`` /
  ``params.do_predict`` ask (original ``run_squad.main``).

  Files in ``output_dir``: checkpoints (``ckpt-N``), ``bert_config.json``,
  ``vocab.txt``, ``squad_config.json``; with ``do_predict``:
  ``predictions.json``, ``nbest_predictions.json`` and (SQuAD 2.0)
  ``null_odds.json`` (the original's files), and when ``predict_file`` has
  answers ``eval_results.txt`` with the official metrics (v1.1:
  ``exact_match``, ``f1``; v2.0: ``exact``, ``f1``, ``HasAns_*``,
  ``NoAns_*``, ``best_exact``, ``best_f1`` and their thresholds) and
  ``global_step``. Prediction runs once, after training, with the final
  weights (the original's order); a run without ``do_train`` predicts with
  the newest checkpoint in ``output_dir``, else ``init_checkpoint``.

  Args:
    params: :class:`bert_tf.tasks.squad.SquadParams`.
    strategy: a ``tf.distribute.Strategy``.
    print_fn: progress lines go here.
    exporter: optional :data:`Exporter`, called as ``exporter(model,
      params.output_dir, params.export_dir)`` with the final model when
      ``params.export_dir`` is set (e.g. :func:`bert_tf.export.export_model`,
      which reads the windowing and answer settings from
      ``squad_config.json``).
    task: an already built task (see :func:`run_classifier`); default:
      built from ``params``.
    do_train / do_predict: what to run; None: ``params.do_train`` /
      ``params.do_predict``; a value given sets it.
    do_eval: ignored (SQuAD evaluates by predicting a file with answers);
      accepted so that every fine-tuning job takes the same arguments.

  Returns:
    dict: the metrics (when the predict file has answers), ``global_step``,
    ``train_loss``, ``test_files`` (prediction without answers),
    ``export_path``, as they apply.

  Raises:
    bert_tf.errors.BertTfError subclasses naming the bad flag or file,
    before any file is written.
  """
  params = _with_actions(params, do_train=do_train, do_eval=do_eval, do_predict=do_predict)
  task = task or squad.QuestionAnsweringTask(params, do_train=params.do_train,
                                             do_predict=params.do_predict)
  task.check_inputs()
  if params.do_train:
    print_fn("fine-tuning on %s: %d questions, %d features, %d steps (batch %d, "
             "%.3g epochs)" % (params.train_file, len(task.train_examples),
                               task.num_train_features, task.num_train_steps,
                               params.train_batch_size, params.num_train_epochs))
    print_fn(task.steps_summary)
  if params.do_predict:
    print_fn("predicting %s: %d questions, %d features%s" % (
        params.predict_file, len(task.predict_examples), len(task.predict_features),
        "" if task.has_answers else " (no answers: no metrics)"))
  for line in task.untold_data_lines():
    print_fn(line)
  export_fn = _export_fn(exporter, params)
  results = runner.Runner(runner.RunnerParams.from_params(params), print_fn).run(
      task, strategy, do_train=params.do_train,
      do_eval=params.do_predict and task.has_answers,
      do_predict=params.do_predict and not task.has_answers,
      export_fn=export_fn)
  if params.do_predict and task.has_answers:
    results["test_files"] = [os.path.join(params.output_dir, f) for f in (
        squad.PREDICTIONS_FILE, squad.NBEST_FILE) + (
            (squad.NULL_ODDS_FILE,) if params.version_2_with_negative else ())]
  return results


def run_swag(params: swag.SwagParams, strategy,
             print_fn: Callable[[str], None] = print,
             exporter: Optional[Exporter] = None,
             task: Optional[swag.MultipleChoiceTask] = None, *,
             do_train: Optional[bool] = None, do_eval: Optional[bool] = None,
             do_predict: Optional[bool] = None) -> dict:
  """Fine-tunes a multiple-choice model (SWAG layout, paper section 4.4),
  evaluates and predicts, as ``params.do_train`` / ``do_eval`` /
  ``do_predict`` ask.

  Files in ``output_dir``: checkpoints (``ckpt-N``), ``bert_config.json``,
  ``vocab.txt``, ``swag_config.json`` (``num_choices``, ``do_lower_case``,
  ``max_seq_length``), ``eval_results.txt`` (``eval_accuracy``,
  ``eval_loss``, ``global_step``; dev evaluation after every epoch when
  training), ``best/`` (the best dev model), ``predictions.csv`` (the test
  file: id, predicted choice, one probability per choice, label). Prediction
  and export use ``best/`` when it exists, else the final weights.

  Args:
    params: :class:`bert_tf.tasks.swag.SwagParams`.
    strategy: a ``tf.distribute.Strategy``.
    print_fn: progress lines go here.
    exporter: optional :data:`Exporter`, called as ``exporter(model,
      params.output_dir, params.export_dir)`` with the final (best) model
      when ``params.export_dir`` is set (e.g.
      :func:`bert_tf.export.export_model`: the multiple-choice export).
    task: an already built task (see :func:`run_classifier`); default:
      built from ``params``.
    do_train / do_eval / do_predict: what to run; None: the params'
      field of that name (the tool's flag); a value given sets it.

  Returns:
    dict: ``eval_*`` results and ``global_step``, ``best_step`` /
    ``best_eval_accuracy``, ``test_files``, ``export_path``, as they apply.

  Raises:
    bert_tf.errors.BertTfError subclasses naming the bad flag, file and
    line, before any file is written.
  """
  params = _with_actions(params, do_train=do_train, do_eval=do_eval, do_predict=do_predict)
  task = task or swag.MultipleChoiceTask(params)
  task.check_inputs()
  if params.do_train:
    print_fn("fine-tuning on %s: %d examples of %d choices, %d steps (batch %d, "
             "%.3g epochs)" % (swag.data_path(params, "train_file"), len(task.train),
                               task.num_choices, task.num_train_steps,
                               params.train_batch_size, params.num_train_epochs))
  return _run_file_task(task, params, strategy, print_fn, exporter)


def run_ner(params: tagging.NerParams, strategy,
            print_fn: Callable[[str], None] = print,
            exporter: Optional[Exporter] = None,
            task: Optional[tagging.TokenTaggingTask] = None, *,
            do_train: Optional[bool] = None, do_eval: Optional[bool] = None,
            do_predict: Optional[bool] = None) -> dict:
  """Fine-tunes a token tagger (NER, paper section 4.3) on CoNLL files,
  evaluates and predicts, as ``params.do_train`` / ``do_eval`` /
  ``do_predict`` ask.

  Files in ``output_dir``: checkpoints (``ckpt-N``), ``bert_config.json``,
  ``vocab.txt``, ``ner_config.json`` (``labels``, ``do_lower_case``,
  ``max_seq_length``, ``doc_stride``), ``eval_results.txt`` (entity-level
  ``eval_precision``, ``eval_recall``, ``eval_f1``, ``eval_accuracy``,
  ``eval_loss``, ``eval_<type>_{precision,recall,f1,support}``,
  ``global_step``; after every epoch when training), ``best/`` (the best
  dev model by ``eval_f1``), ``test_predictions.txt`` (CoNLL). Prediction
  and export use ``best/`` when it exists, else the final weights.

  Args:
    params: :class:`bert_tf.tasks.tagging.NerParams`.
    strategy: a ``tf.distribute.Strategy``.
    print_fn: progress lines go here.
    exporter: optional :data:`Exporter`, called as ``exporter(model,
      params.output_dir, params.export_dir)`` with the final (best) model
      when ``params.export_dir`` is set (e.g.
      :func:`bert_tf.export.export_model`: the tagger export).
    task: an already built task (see :func:`run_classifier`); default:
      built from ``params``.
    do_train / do_eval / do_predict: what to run; None: the params'
      field of that name (the tool's flag); a value given sets it.

  Returns:
    dict: ``eval_*`` results and ``global_step``, ``best_step`` /
    ``best_f1``, ``test_files``, ``export_path``, as they apply.

  Raises:
    bert_tf.errors.BertTfError subclasses naming the bad flag, file and
    line, before any file is written.
  """
  params = _with_actions(params, do_train=do_train, do_eval=do_eval, do_predict=do_predict)
  task = task or tagging.TokenTaggingTask(params)
  task.check_inputs()
  if params.do_train:
    print_fn("fine-tuning on %s: %d sentences, %d windows, %d labels, %d steps "
             "(batch %d, %.3g epochs)" % (
                 swag.data_path(params, "train_file"), len(task.train),
                 task.train_encoded.num_windows, len(task.labels),
                 task.num_train_steps, params.train_batch_size,
                 params.num_train_epochs))
  return _run_file_task(task, params, strategy, print_fn, exporter)


def _run_file_task(task, params, strategy, print_fn, exporter) -> dict:
  """The runner over a task with ``train``/``dev``/``test`` file splits
  (multiple choice, tagging): evaluates when a dev file was read, predicts
  when a test file was, exports through ``exporter`` (:func:`_export_fn`);
  first the task's data lines (lengths cut per file, batch sizes)."""
  for line in task.untold_data_lines():
    print_fn(line)
  export_fn = _export_fn(exporter, params)
  return runner.Runner(runner.RunnerParams.from_params(params), print_fn).run(
      task, strategy, do_train=params.do_train, do_eval=bool(task.dev),
      do_predict=bool(task.test), eval_at_steps=task.eval_at_steps() if task.dev else (),
      export_fn=export_fn)
