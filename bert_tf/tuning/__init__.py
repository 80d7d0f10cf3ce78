"""The paper's fine-tuning procedure: a hyperparameter search on Optuna.

BERT (Devlin et al., 2018) never fine-tunes with one setting. Appendix A.3:
batch size {16, 32}, learning rate {5e-5, 3e-5, 2e-5}, epochs {2, 3, 4}, the
best on the dev set (:data:`PAPER`, 18 configurations); section 4.1 (GLUE):
batch 32, 3 epochs, learning rate {5e-5, 4e-5, 3e-5, 2e-5} (:data:`GLUE`),
and for unstable small sets several random restarts (other fine-tuning data
shuffling and classifier initialization, same pre-trained checkpoint), the
best on dev.

:class:`Search` runs that procedure for any fine-tuning task
(:data:`TASKS`: ``classifier``, ``squad``, ``ner``, ``swag``):

* **Trials are runs.** Each trial is a real run of the task's job
  (:mod:`bert_tf.jobs`) through the runner in ``OUTPUT_DIR/trials/<n>/``, with
  its checkpoints, ``eval_results.txt``, ``best/`` and log (``log.txt``). The
  objective is the task's standard dev metric (its ``selection_metric``)
  or ``--metric``, of the model the run keeps and exports: each trial keeps
  ``best/`` by that metric (``FineTuningTask.select_by``), so its score,
  its dev report and its export are one checkpoint.
* **Optuna** does the search: ``GridSampler`` for grids (restarts are the
  ``seed`` axis of the grid), TPE (or random) for ranges; the study lives in
  an RDB storage: ``OUTPUT_DIR/search.db`` (SQLite) by default, any
  SQLAlchemy URL (PostgreSQL, ...) for several machines.
* **Resumable.** A rerun of the same search continues it: finished trials
  are kept; a trial whose process died (``kill -9``, a reboot) is failed and
  re-queued with the same hyperparameters and the same directory
  (Optuna's ``RetryHeartbeatStaleTrialCallback``), so it resumes from its own
  newest checkpoint as a single run does. A dead process on this machine is
  recognised at once (its pid); one on another machine when its heartbeat
  stops (``heartbeat_seconds``). A rerun with another search space, task or
  task flags is refused, listing the differences.
* **Parallel.** Several processes (or machines) on one storage share the
  search; a grid point is run once (Optuna's grid ids follow trial numbers).
* **Data once.** The task's data is read, tokenized and featurized once per
  process; every trial trains on a copy of the task with its own
  hyperparameters (:meth:`bert_tf.tasks.fine_tuning.FineTuningTask.with_params`).
* **Outputs.** ``search_results.csv`` and ``search_results.md`` (one row per
  trial), ``search_results.png`` (the metric over learning rate x batch size,
  one panel per epoch count, restarts as spread), ``best_trial.json`` and the
  best trial's model exported with the task's own exporter under
  ``OUTPUT_DIR/export/`` (an ``exporter`` hook: the library never imports
  :mod:`bert_tf.export`).

Example (a Python API beside ``bert-tune``)::

  from bert_tf import tuning
  from bert_tf.tasks.classification import ClassifierParams
  search = tuning.Search("classifier", ClassifierParams(
      task_name="sst-2", data_dir="data/movie_review_sentences",
      init_checkpoint=HF_DIR, max_seq_length=64, output_dir="/tmp/tune"),
      tuning.SearchParams(search_space="paper", holdout_fraction=0.1))
  best = search.run()          # {"learning_rate": ..., "metric": ..., ...}

Modules (split along the seams):

* :mod:`bert_tf.tuning.space` - the search space and the search flags
  (:class:`SearchParams`); imports neither Optuna nor TensorFlow.
* :mod:`bert_tf.tuning.study` - the Optuna study and its storage: the only
  code that touches Optuna.
* :mod:`bert_tf.tuning.results` - ``search_results.csv``/``.md``/``.png``.
* :mod:`bert_tf.tuning.search` - :class:`Search`, the loop (trials as jobs).
"""

from bert_tf import _lazy

# Public names, imported on first use: ``bert_tf.tuning.space`` (and
# ``results``) load without TensorFlow or Optuna, which an eager import of
# ``search`` here would pull in.
_MODULES = {
    "bert_tf.tuning.results": ("BEST_FILE", "RESULTS_CSV", "RESULTS_MD", "RESULTS_PNG",
                               "best_trial", "plot_results", "write_results"),
    "bert_tf.tuning.search": ("DB_FILE", "EXPORT_DIR", "Search", "TASKS", "TRIALS_DIR",
                              "TaskKind", "load_search_space", "search"),
    "bert_tf.tuning.space": ("DATA_FIELDS", "GLUE", "NOT_SEARCHED", "PAPER", "SAMPLERS",
                             "SEARCH_SPACES", "Range", "SearchParams", "SearchSpace"),
}
_API = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_API)

__getattr__ = _lazy.getattr_for(__name__, _API)
