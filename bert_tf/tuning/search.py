"""The search loop: trials as runs of the task's job, resumable and parallel.

:class:`Search` checks its settings, builds the task once (data read,
tokenized, featurized), then runs trials until the study has the planned
number: each trial is the task's job (:mod:`bert_tf.jobs`) in
``OUTPUT_DIR/trials/<n>/`` on a copy of the task with the trial's flags,
keeping ``best/`` by the search's metric, so that the trial's score, its dev
report and its export are one checkpoint. The study (Optuna) is
:mod:`bert_tf.tuning.study`; the space :mod:`bert_tf.tuning.space`; the
files :mod:`bert_tf.tuning.results`. What differs between tasks (the metric
to select on, the metrics reported, a hold-out, how the task is built) is
asked of the task (:class:`bert_tf.tasks.fine_tuning.FineTuningTask`).

Example::

  from bert_tf.tuning import search
  best = search.Search("ner", NerParams(...), SearchParams(search_space="glue")).run()
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import math
import os
import socket
import time
import traceback
from typing import Any, Callable, Optional

from bert_tf import checkpoints
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import runner
from bert_tf import task_kinds
from bert_tf import training
from bert_tf.tasks import fine_tuning
from bert_tf.tuning import results as results_lib
from bert_tf.tuning import space as space_lib
from bert_tf.tuning import study as study_lib

TRIALS_DIR = "trials"
EXPORT_DIR = "export"
DB_FILE = "search.db"

# A task kind as the search sees it: the registry's record
# (:class:`bert_tf.task_kinds.TaskKind`; its ``params_class``, ``task_class``
# and ``job`` are what a search runs).
TaskKind = task_kinds.TaskKind


class _SearchableKinds(collections.abc.Mapping):
  """``{name: TaskKind}`` of the kinds a search runs, read from the registry
  on each use (a kind registered later is searchable at once)."""

  def __getitem__(self, name: str) -> TaskKind:
    kind = task_kinds.KINDS[name]
    if not kind.searchable:
      raise KeyError(name)
    return kind

  def __iter__(self):
    return iter(k.name for k in task_kinds.searchable_kinds())

  def __len__(self) -> int:
    return len(task_kinds.searchable_kinds())


# The searchable kinds (``classifier``, ``squad``, ``ner``, ``swag``):
# :func:`bert_tf.task_kinds.searchable_kinds` by name.
TASKS = _SearchableKinds()


def load_search_space(spec: str, params_cls) -> space_lib.SearchSpace:
  """:func:`bert_tf.tuning.space.load_search_space` with the runner's run
  settings (:data:`bert_tf.runner.NOT_RECIPE`) never searchable.

  Raises:
    errors.ParamsError: see :func:`bert_tf.tuning.space.load_search_space`.
  """
  return space_lib.load_search_space(spec, params_cls, runner.NOT_RECIPE)


def _error_line(error: BaseException) -> str:
  """One line saying what went wrong: the message's first line, or its last
  one for TensorFlow's ``in user code:`` tracebacks."""
  lines = [l.strip() for l in str(error).splitlines() if l.strip()]
  if not lines:
    return type(error).__name__
  return lines[-1] if lines[0].rstrip(":") == "in user code" else lines[0]


class Search:
  """A resumable, parallel hyperparameter search over one task (package doc).

  Args:
    task: ``classifier``, ``squad``, ``ner``, ``swag`` or another
      searchable kind of :mod:`bert_tf.task_kinds` (:data:`TASKS`).
    params: the task's params (its tool's flags; ``output_dir`` is the
      search's directory); the searched fields and ``seed`` are set per trial.
    search: :class:`bert_tf.tuning.space.SearchParams`.
    strategy: a ``tf.distribute`` strategy (default one device).
    exporter: ``exporter(model, run_dir, export_dir) -> path``: writes the
      best trial's kept model (``best/``, rebuilt from the task) of the run
      in ``run_dir`` under ``export_dir`` (the tool passes
      ``bert_tf.export.export_model``); None: no export.
    do_predict: trials also write the task's test predictions.
    print_fn: progress lines (one per trial) go here.

  Raises:
    errors.ParamsError: an unknown or unsearchable ``task`` (argument
      ``task``), bad search flags, names or ranges, a metric the task
      does not report, a batch size above the training rows, a search on
      ``output_dir`` / the storage with other settings (each difference
      listed) -- all before any training.

  Example::

    Search("ner", NerParams(data_dir="data/ner_wnut16", output_dir="/tmp/t",
                            init_checkpoint=HF_DIR),
           SearchParams(search_space="glue")).run()
  """

  def __init__(self, task: str, params, search: space_lib.SearchParams, strategy=None,
               exporter: Optional[Callable[[Any, str, str], str]] = None,
               do_predict: bool = False,
               print_fn: Callable[[str], None] = print):
    if task not in TASKS:
      raise errors.ParamsError("task: unknown %r (%s)" % (task, ", ".join(TASKS)),
                               argument="task")
    self.kind = TASKS[task]
    self.params_cls = self.kind.attribute("params_class")
    self.task_cls = self.kind.attribute("task_class")
    self.job = self.kind.attribute("job")
    self.base = params
    self.sp = search
    self.strategy = strategy
    self.exporter = exporter
    self.do_predict = do_predict
    self.print_fn = print_fn
    self.output_dir = os.path.abspath(params.output_dir)
    self._check_search_params()
    self.space = load_search_space(search.search_space, self.params_cls)
    self.seeds = [params.seed + i for i in range(search.num_restarts)]
    self.task = self._build_task()  # reads, tokenizes and featurizes the data once
    self.metric = search.metric or self.task.selection_metric
    known = self.task.reported_metrics
    if self.metric not in known:
      raise errors.ParamsError("metric: the %s task does not report %r (it reports %s)"
                               % (task, self.metric, ", ".join(known)), argument="metric")
    self._check_batch_sizes()
    self.total = (self.space.grid_size() * len(self.seeds) if self.space.is_grid
                  else search.num_trials * len(self.seeds))
    self.study = None
    self.storage = None
    self._done_here = 0
    self._started = None

  # --- checks and data -----------------------------------------------------

  def _check_search_params(self):
    sp = self.sp
    if sp.num_restarts < 1:
      raise errors.ParamsError("num_restarts must be >= 1, got %d" % sp.num_restarts,
                               argument="num_restarts")
    if not 0.0 <= sp.holdout_fraction < 1.0:
      raise errors.ParamsError("holdout_fraction must be in [0, 1), got %g"
                               % sp.holdout_fraction, argument="holdout_fraction")
    if sp.holdout_fraction and not self.task_cls.can_hold_out:
      raise errors.ParamsError(
          "holdout_fraction: only %s sets a slice of train aside; select on the dev "
          "set (0)" % ", ".join("--task=" + k.name for k in TASKS.values()
                                if k.attribute("task_class").can_hold_out),
          argument="holdout_fraction")
    if sp.sampler not in space_lib.SAMPLERS:
      raise errors.ParamsError("sampler: unknown %r (%s)" % (
          sp.sampler, ", ".join(space_lib.SAMPLERS)), argument="sampler")
    if sp.num_trials < 1:
      raise errors.ParamsError("num_trials must be >= 1", argument="num_trials")
    if sp.heartbeat_seconds < 1:
      raise errors.ParamsError("heartbeat_seconds must be >= 1", argument="heartbeat_seconds")

  def _trial_params(self, hparams: dict, seed: int, run_dir: str):
    extra = {}
    names = {f.name for f in dataclasses.fields(self.base)}
    for flag in ("do_train", "do_eval"):
      if flag in names:
        extra[flag] = True
    if "do_predict" in names:
      extra["do_predict"] = self._predicts()
    return dataclasses.replace(self.base, output_dir=run_dir, seed=seed,
                               export_dir=None, **extra, **hparams)

  def _predicts(self) -> bool:
    """Whether trials predict: the task evaluates by predicting (SQuAD), or
    the search was asked to."""
    return bool(self.task_cls.evaluates_by_predicting or self.do_predict)

  def _build_task(self):
    p = self._trial_params({}, self.base.seed, self.output_dir)
    task = self.task_cls.for_search(p, self.do_predict)
    if self.sp.holdout_fraction:
      task.hold_out(self.sp.holdout_fraction, self.base.seed)
    task.check_selectable()
    return task

  def _check_batch_sizes(self):
    rows = self.task.train_rows or len(getattr(self.task, "train", []) or [])
    values = self.space.params.get("train_batch_size", [self.base.train_batch_size])
    largest = max(values) if isinstance(values, list) else values.high
    fine_tuning.check_train_batch_size(
        largest, rows, "training rows the search trains on", argument="train_batch_size"
        if "train_batch_size" not in self.space.params else "search_space")

  # --- the study ------------------------------------------------------------

  def settings(self) -> dict:
    """What a rerun must share with this search (recorded in the study)."""
    recipe = {k: v for k, v in (runner.training_recipe(self.task) or {}).items()
              if k not in self.space.params and k != "seed"}
    return json.loads(json.dumps({
        "task": self.kind.name, "search_space": self.space.to_json(),
        "num_restarts": self.sp.num_restarts, "holdout_fraction": self.sp.holdout_fraction,
        "metric": self.metric, "num_trials": None if self.space.is_grid else self.sp.num_trials,
        "sampler": self.sp.sampler, "seed": self.base.seed, "task_flags": recipe,
        "do_predict": self.do_predict}, default=str))

  def storage_url(self) -> str:
    """``--storage``, else ``sqlite:///OUTPUT_DIR/search.db``."""
    return self.sp.storage or "sqlite:///" + os.path.join(self.output_dir, DB_FILE)

  def open_study(self):
    """Creates or loads the study (``optuna.Study``) in :meth:`storage_url`.

    Raises:
      errors.ParamsError: the study holds a search with other
        :meth:`settings` (each difference listed, e.g.
        ``--warmup_proportion=0.1 (the search) vs 0.2 (now)``).
    """
    os.makedirs(self.output_dir, exist_ok=True)
    sp, url = self.sp, self.storage_url()
    self.storage = study_lib.open_storage(url, sp.heartbeat_seconds, sp.max_retries)
    self.study = study_lib.open_study(
        self.storage, url, sp.study_name, self.space, self.seeds, self.base.seed,
        sp.sampler, self.metric, self.settings())
    return self.study

  # --- trials ---------------------------------------------------------------

  def _run_index(self, trial) -> int:
    index = trial.user_attrs.get("run_index")
    if index is None:
      index = trial.system_attrs.get("grid_id", trial.number)
    return int(index)

  def run_dir(self, index: int) -> str:
    """``OUTPUT_DIR/trials/<index>``: the run directory of grid point (or
    sampled configuration) ``index``, the same for every retry."""
    return os.path.join(self.output_dir, TRIALS_DIR, str(index))

  def _duplicate(self, trial, index) -> bool:
    """Another live or finished trial already owns this run directory (two
    workers that asked for the last grid point at once)."""
    if "failed_trial" in trial.system_attrs:
      return False
    for t in self.study.get_trials(deepcopy=False):
      if (t.number < trial.number and self._run_index(t) == index and
          t.state.name in ("RUNNING", "COMPLETE")):
        return True
    return False

  def objective(self, trial) -> float:
    """One trial: the task's job in ``trials/<n>/``; returns the metric of
    the model the run keeps (``best/``, kept by this metric).

    Raises:
      optuna.TrialPruned: a duplicate of a grid point another worker runs.
      study.TrialInterrupted: Ctrl-C / SIGTERM (the trial is re-queued).
      Exception: the trial's error (recorded as the trial's ``error``).
    """
    started = time.monotonic()
    try:
      return self._objective(trial, started)
    except (training.Interrupted, KeyboardInterrupt) as e:  # the search stops here
      trial.set_user_attr("error", "interrupted; resumed by the next run of the search")
      raise study_lib.TrialInterrupted(trial.number, e) from e
    except Exception as e:  # recorded; the search goes on
      if study_lib.is_pruned(e):
        raise
      message = "%s: %s" % (type(e).__name__, _error_line(e))
      trial.set_user_attr("error", message)
      trial.set_user_attr("wall_seconds", round(time.monotonic() - started, 1))
      run_dir = trial.user_attrs.get("run_dir")
      if run_dir:
        with open(os.path.join(run_dir, "log.txt"), "a", encoding="utf-8") as log:
          log.write("error: %s\n%s" % (message, traceback.format_exc()))
      raise

  def _objective(self, trial, started) -> float:
    stored = study_lib.stored_trial(self.study, trial)
    hparams = study_lib.suggest(trial, self.space, self.params_cls)
    if self.space.is_grid:
      seed = int(trial.suggest_categorical("seed", self.seeds))
    else:
      seed = int(stored.user_attrs.get("seed", self.seeds[0]))
      trial.set_user_attr("seed", seed)
    index = self._run_index(stored)
    trial.set_user_attr("run_index", index)
    trial.set_user_attr("worker", {"host": socket.gethostname(), "pid": os.getpid()})
    if self._duplicate(stored, index):
      trial.set_user_attr("duplicate", True)
      study_lib.prune("grid point %d runs in another trial" % index)
    if not self.space.is_grid and "fixed_params" not in stored.system_attrs:
      for s in self.seeds[1:]:  # the restarts of a sampled configuration
        self.study.enqueue_trial(hparams, user_attrs={"seed": s})
    run_dir = self.run_dir(index)
    os.makedirs(run_dir, exist_ok=True)
    trial.set_user_attr("run_dir", run_dir)
    self.print_fn("trial %d started: %s -> %s" % (
        index, results_lib.format_hparams(dict(hparams, seed=seed)), run_dir))
    with open(os.path.join(run_dir, "log.txt"), "a", encoding="utf-8") as log:
      value, results = self._train(hparams, seed, run_dir, log)
    trial.set_user_attr("wall_seconds", round(time.monotonic() - started, 1))
    trial.set_user_attr("steps", int(results.get("global_step", 0)))
    if "dev_metric" in results:
      trial.set_user_attr("dev_metric", results["dev_metric"])
    return value

  def trial_task(self, params):
    """The task one trial trains: this search's task with the trial's
    ``params``, keeping ``best/`` by the search's metric (its score)."""
    return self.task.with_params(params).select_by(
        self.metric, lowest=space_lib.direction(self.metric) == "minimize")

  def _train(self, hparams, seed, run_dir, log):
    params = self._trial_params(hparams, seed, run_dir)
    task = self.trial_task(params)

    def print_fn(line):
      log.write(line + "\n")
      log.flush()

    results = self.job(params, self._strategy(), do_train=True, do_eval=True,
                       do_predict=self._predicts(), print_fn=print_fn, task=task)
    value = self._kept_value(run_dir, results)
    if value is None or not math.isfinite(value):
      raise FloatingPointError("%s is %s (the loss diverged?)" % (self.metric, value))
    if task.dev_report_task() is not None:
      results["dev_metric"] = self._report_on_dev(task, run_dir, print_fn)
    return value, results

  def _strategy(self):
    """The strategy given, else one device (made on first use: a rerun whose
    trials all finished builds no TensorFlow runtime before the export)."""
    if self.strategy is None:
      from bert_tf import distribute  # pylint: disable=g-import-not-at-top
      self.strategy = distribute.get_strategy("one_device")
    return self.strategy

  def _reports_dev(self) -> bool:
    return self.task.dev_report_task() is not None

  def _kept_value(self, run_dir, results) -> Optional[float]:
    """The metric of the model the run keeps and exports: ``best/`` (kept
    by this metric), else the final evaluation (no ``best/`` kept)."""
    best = runner.read_best_state(run_dir)
    if best is not None and best["metric"] == runner.best_metric_name(self.metric):
      return float(best["value"])
    return None if self.metric not in results else float(results[self.metric])

  def kept_model(self, task, run_dir: str):
    """The model a trial keeps, rebuilt from ``task`` and restored from
    ``run_dir`` (``best/``, else the newest checkpoint:
    :func:`bert_tf.run_dir.model_checkpoint`), in the search's strategy.
    The restore is strict: every variable of the rebuilt model must be in
    the checkpoint, with its shape.

    Returns:
      the Keras model.

    Raises:
      errors.CheckpointError: ``run_dir`` holds no checkpoint, or its
        checkpoint does not fit the rebuilt model (one line naming it).
      errors.CorruptCheckpointError: its files are truncated or unreadable.
    """
    with self._strategy().scope():
      model = task.build_model()
    checkpoints.restore_object_checkpoint(
        run_dir, "trial %s" % run_dir, hint="the trial's directory holds another model; "
        "use a new --output_dir", **task.checkpoint_objects(model))
    return model

  def _best_model(self, best: dict):
    """The model the best trial kept (:meth:`kept_model` of its
    :meth:`trial_task`), for the export hook."""
    hparams = {k: best[k] for k in self.space.params}
    task = self.trial_task(self._trial_params(hparams, int(best["seed"]), best["run_dir"]))
    return self.kept_model(task, best["run_dir"])

  def _report_on_dev(self, task, run_dir, print_fn) -> float:
    """The kept model's metric on the untouched dev set (holdout searches)."""
    report = task.dev_report_task()
    model = self.kept_model(report, run_dir)
    print_fn("reporting the kept model on the dev set:")
    out = report.evaluate(model, print_fn)
    return float(out[self.metric])

  # --- the loop -------------------------------------------------------------

  def _originals(self, trials) -> int:
    """Trials the sampler created (not retries, not queued restarts)."""
    return sum(1 for t in trials if "failed_trial" not in t.system_attrs
               and "fixed_params" not in t.system_attrs and not t.user_attrs.get("duplicate"))

  def run(self, poll_seconds: float = 2.0) -> dict:
    """Runs (or resumes, or joins) the search to its end; writes the results
    and exports the best trial.

    Returns:
      the best trial (:func:`bert_tf.tuning.results.best_trial` of
      :meth:`rows`).

    Raises:
      errors.SearchError: every trial failed (the errors listed).
      errors.ParamsError: see the class.
    """
    if self.study is None:
      self.open_study()
    self._started = time.monotonic()
    planned = self.space.grid_size() * len(self.seeds) if self.space.is_grid \
        else self.sp.num_trials
    while True:
      study_lib.fail_dead_local_trials(self.study, self.storage, self.sp.max_retries,
                                       self._run_index, self.print_fn)
      study_lib.fail_stale(self.study)
      trials = self.study.get_trials(deepcopy=False)
      waiting = any(t.state.name == "WAITING" for t in trials)
      if not waiting and self._originals(trials) >= planned:
        if any(t.state.name == "RUNNING" for t in trials):
          time.sleep(poll_seconds)  # others' trials: wait (and retry them if they die)
          continue
        break
      try:
        study_lib.optimize_one(self.study, self.objective, self._progress)
      except study_lib.TrialInterrupted as e:
        # Optuna failed the trial: queue it again (same parameters and run
        # directory, so the next run resumes it from its newest checkpoint),
        # then stop as a single run does (training.Interrupted / Ctrl-C).
        study_lib.requeue(self.study, e.number)
        raise e.error from None
    rows = self.rows()
    self.write_results(rows)
    best = results_lib.best_trial(rows, self.metric)
    if best is None:
      raise errors.SearchError("every trial failed: " + "; ".join(
          "trial %d: %s" % (r["trial"], r["error"]) for r in rows[:5]))
    return self._finish(best)

  def _progress(self, study, frozen):
    del study
    if frozen.user_attrs.get("duplicate"):
      return
    self._done_here += 1
    rows = self.rows()
    finished = sum(1 for r in rows if r["status"] in ("COMPLETE", "FAIL"))
    elapsed = time.monotonic() - self._started
    eta = elapsed / self._done_here * max(self.total - finished, 0)
    seed = frozen.params.get("seed", frozen.user_attrs.get("seed"))
    hp = {k: v for k, v in frozen.params.items() if k != "seed"}
    if frozen.state.name == "COMPLETE":
      what = "%s=%.4f (%d steps, %s)" % (
          self.metric, frozen.value, frozen.user_attrs.get("steps", 0),
          runner.format_duration(frozen.user_attrs.get("wall_seconds", 0)))
      if "dev_metric" in frozen.user_attrs:
        what += " dev %s=%.4f" % (self.metric, frozen.user_attrs["dev_metric"])
    else:
      what = "FAILED: %s" % frozen.user_attrs.get("error", "unknown error")
    self.print_fn("[%d/%d] trial %d %s: %s; elapsed %s, eta %s" % (
        finished, self.total, self._run_index(frozen),
        results_lib.format_hparams(dict(hp, seed=seed)), what,
        runner.format_duration(elapsed), runner.format_duration(eta)))
    self.write_results(rows, plot=False)

  # --- results ---------------------------------------------------------------

  def rows(self) -> list:
    """One row per run directory: its newest finished (or running) trial.

    Returns:
      list of dicts: ``trial``, the hyperparameters by flag name, ``seed``,
      ``metric``, ``steps``, ``wall_seconds``, ``status``, (``dev_metric``),
      ``error``, ``run_dir``.
    """
    by_index = {}
    for t in self.study.get_trials(deepcopy=False):
      if t.user_attrs.get("duplicate") or t.state.name == "WAITING":
        continue
      index = self._run_index(t)
      old = by_index.get(index)
      rank = lambda x: (x.state.name == "COMPLETE", x.number)  # pylint: disable=unnecessary-lambda-assignment
      if old is None or rank(t) > rank(old):
        by_index[index] = t
    rows = []
    names = sorted(self.space.params)
    reports_dev = self._reports_dev()
    for index in sorted(by_index):
      t = by_index[index]
      row = {"trial": index}
      row.update({n: t.params.get(n) for n in names})
      row["seed"] = t.params.get("seed", t.user_attrs.get("seed"))
      row["metric"] = t.value if t.state.name == "COMPLETE" else None
      row["steps"] = t.user_attrs.get("steps")
      row["wall_seconds"] = t.user_attrs.get("wall_seconds")
      row["status"] = t.state.name
      if reports_dev:
        row["dev_metric"] = t.user_attrs.get("dev_metric")
      row["error"] = t.user_attrs.get("error") or study_lib.dead_process_error(t) or ""
      row["run_dir"] = t.user_attrs.get("run_dir", self.run_dir(index))
      rows.append(row)
    return rows

  def write_results(self, rows: list, plot: bool = True) -> None:
    """``search_results.csv``, ``.md`` (and ``.png``), atomically."""
    results_lib.write_results(rows, self.output_dir, self.metric, plot=plot)

  def _finish(self, best: dict) -> dict:
    """``best_trial.json`` and the export (once, whichever worker gets here)."""
    import fcntl  # pylint: disable=g-import-not-at-top
    path = os.path.join(self.output_dir, results_lib.BEST_FILE)
    with open(os.path.join(self.output_dir, ".finish.lock"), "w", encoding="utf-8") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      old = {}
      if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
          old = json.load(f)
      out = {k: v for k, v in best.items() if k not in ("status", "error")}
      out["metric_name"] = self.metric
      out["export_path"] = None
      if (old.get("run_dir") == best["run_dir"] and old.get("export_path") and
          os.path.exists(old["export_path"])):
        out["export_path"] = old["export_path"]
      elif self.exporter is not None and self.sp.export:
        out["export_path"] = self.exporter(self._best_model(best), best["run_dir"],
                                           os.path.join(self.output_dir, EXPORT_DIR))
      io_utils.atomic_write_text(path, json.dumps(out, indent=2, default=str) + "\n")
    self.print_fn("best: trial %d %s %s=%.4f (%s)%s" % (
        best["trial"], results_lib.format_hparams(
            {k: best[k] for k in sorted(self.space.params)} | {"seed": best["seed"]}),
        self.metric, best["metric"], best["run_dir"],
        "; exported to %s" % out["export_path"] if out["export_path"] else ""))
    return out


def search(task: str, params, search_params: Optional[space_lib.SearchParams] = None,
           **kwargs: Any) -> dict:
  """Runs a :class:`Search` to its end; returns the best trial.

  Args:
    task: ``classifier``, ``squad``, ``ner`` or ``swag``.
    params: the task's params (``output_dir`` = the search's directory).
    search_params: :class:`bert_tf.tuning.space.SearchParams` (default: the
      paper's grid).
    **kwargs: :class:`Search`'s other arguments (``exporter``, ...).

  Returns:
    dict: the best trial's hyperparameters (flag names), ``seed``,
    ``metric``, ``metric_name``, ``run_dir``, ``export_path``.

  Raises:
    errors.ParamsError / errors.SearchError: see :class:`Search`.
  """
  return Search(task, params, search_params or space_lib.SearchParams(), **kwargs).run()
