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
  objective is the task's standard dev metric (:func:`default_metric`), of
  the model the run keeps (``best/``, else its final weights).
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
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import logging as py_logging
import math
import os
import random
import socket
import time
import traceback
from typing import Any, Callable, Optional, Sequence

from bert_tf import errors
from bert_tf import io_utils
from bert_tf import jobs
from bert_tf import runner
from bert_tf import training
from bert_tf.params import field
from bert_tf.tasks import classification
from bert_tf.tasks import squad
from bert_tf.tasks import swag
from bert_tf.tasks import tagging

# Appendix A.3: "batch size 16, 32; learning rate (Adam) 5e-5, 3e-5, 2e-5;
# number of epochs 2, 3, 4".
PAPER = {"learning_rate": [5e-5, 3e-5, 2e-5], "train_batch_size": [16, 32],
         "num_train_epochs": [2, 3, 4]}
# Section 4.1: batch 32, 3 epochs, the best learning rate of 5e-5, 4e-5,
# 3e-5, 2e-5 on dev.
GLUE = {"learning_rate": [5e-5, 4e-5, 3e-5, 2e-5], "train_batch_size": [32],
        "num_train_epochs": [3]}
SEARCH_SPACES = {"paper": PAPER, "glue": GLUE}
SAMPLERS = ("auto", "tpe", "random")
RESULTS_CSV = "search_results.csv"
RESULTS_MD = "search_results.md"
RESULTS_PNG = "search_results.png"
BEST_FILE = "best_trial.json"
TRIALS_DIR = "trials"
EXPORT_DIR = "export"
DB_FILE = "search.db"
# Fields of the task params a search sets itself (never in a search space).
NOT_SEARCHED = frozenset({"output_dir", "export_dir", "seed", "do_train",
                          "do_eval", "do_predict", "init_checkpoint",
                          "bert_config_file", "vocab_file", "data_dir"})
# Fields that change the tokenized, featurized data (read once per search):
# one search per value.
DATA_FIELDS = frozenset({"max_seq_length", "do_lower_case", "preserve_unused_tokens",
                         "doc_stride", "max_query_length", "version_2_with_negative",
                         "task_name", "labels", "label_list", "xnli_language"})


@dataclasses.dataclass(frozen=True)
class TaskKind:
  """One fine-tuning task as a search sees it.

  Attributes:
    name: ``--task`` value.
    params_cls: its params dataclass (the task tool's flags).
    tool: the task's tool (``run_classifier``, ...), for messages.
  """
  name: str
  params_cls: type
  tool: str


TASKS = {
    "classifier": TaskKind("classifier", classification.ClassifierParams, "run_classifier"),
    "squad": TaskKind("squad", squad.SquadParams, "run_squad"),
    "ner": TaskKind("ner", tagging.NerParams, "run_ner"),
    "swag": TaskKind("swag", swag.SwagParams, "run_swag"),
}


@dataclasses.dataclass
class SearchParams:
  """How the search runs; the fields are ``bert-tune``'s search flags (see
  their help).

  Example::

    SearchParams(search_space="glue", num_restarts=5)
  """
  search_space: str = field("paper", "paper (Appendix A.3: batch 16, 32 x learning rate 5e-5, 3e-5, 2e-5 x epochs 2, 3, 4), glue (section 4.1: learning rate 5e-5, 4e-5, 3e-5, 2e-5, batch 32, 3 epochs) or a JSON file {flag: [values] (a grid) or {\"low\": 1e-5, \"high\": 1e-4, \"log\": true} (a range)}; keys are the task tool's flag names.")
  num_restarts: int = field(1, "Runs of each configuration, with seeds --seed, --seed+1, ... (other data shuffling and head initialization, paper section 4.1).")
  holdout_fraction: float = field(0.0, "0: select on the dev set (the paper's way); e.g. 0.1: select on that fraction of the training set set aside (--task=classifier), the dev set reported beside.")
  metric: Optional[str] = field(None, "The objective, a dev metric the task reports (default: accuracy, or MCC/F1/Spearman where GLUE uses them; SQuAD F1, v2.0 best_f1; NER entity eval_f1; SWAG eval_accuracy).")
  num_trials: int = field(20, "Configurations a range search samples (a grid runs all of its own).")
  sampler: str = field("auto", "auto: Optuna's GridSampler for lists, TPE for ranges; tpe; random.", choices=SAMPLERS)
  storage: Optional[str] = field(None, "The study's database, an SQLAlchemy URL (e.g. postgresql://user:pw@host/db: every machine of a search points here). Default: sqlite:///OUTPUT_DIR/search.db.")
  study_name: str = field("bert_tune", "The study's name in --storage.")
  heartbeat_seconds: int = field(60, "A running trial's heartbeat period; a trial on another machine is retried after 2 periods without one (a dead process on this machine at once).")
  max_retries: int = field(3, "Re-runs of a trial whose process died.")
  export: bool = field(True, "Export the best trial's model with the task's own SavedModel export under OUTPUT_DIR/export/.")


# --- the search space --------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Range:
  """A continuous (or stepped) range of one hyperparameter.

  Attributes:
    low, high: bounds (``low < high``; ``low > 0`` with ``log``).
    log: sample on a log scale.
    step: a step for integer/discrete ranges (None: continuous).
  """
  low: float
  high: float
  log: bool = False
  step: Optional[float] = None


@dataclasses.dataclass
class SearchSpace:
  """Hyperparameters (flag name -> values list or :class:`Range`).

  Example::

    space = load_search_space("paper", ClassifierParams)
    space.is_grid, space.grid_size()   # (True, 18)
  """
  name: str
  params: dict

  @property
  def is_grid(self) -> bool:
    """True when every hyperparameter is a list (Optuna's GridSampler)."""
    return all(isinstance(v, list) for v in self.params.values())

  def grid_size(self) -> int:
    """Configurations of a grid (restarts not counted); 0 for ranges."""
    return math.prod(len(v) for v in self.params.values()) if self.is_grid else 0

  def to_json(self) -> dict:
    """The space as JSON values (recorded in the study, compared on rerun)."""
    return {k: (v if isinstance(v, list) else dataclasses.asdict(v))
            for k, v in sorted(self.params.items())}


def _field_types(params_cls) -> dict:
  return {f.name: _flag_type(f.type) for f in dataclasses.fields(params_cls)}


def _flag_type(tp) -> type:
  """``int``/``float``/``bool``/``str`` of a params field annotation."""
  text = tp if isinstance(tp, str) else getattr(tp, "__name__", str(tp))
  for name, t in (("bool", bool), ("int", int), ("float", float)):
    if name in str(text):
      return t
  return str


def _convert(name: str, value, tp, where: str):
  bad = errors.ParamsError(
      "search space %s: %s value %r is not a%s %s" % (
          where, name, value, "n" if tp is int else "", tp.__name__),
      argument="search_space")
  if tp is bool:
    if not isinstance(value, bool):
      raise bad
    return value
  if tp in (int, float):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      raise bad
    if tp is int and float(value) != int(value):
      raise bad
    return tp(value)
  return str(value)


def load_search_space(spec: str, params_cls) -> SearchSpace:
  """The search space ``spec`` names, checked against the task's flags.

  Args:
    spec: ``paper``, ``glue`` or a JSON file path.
    params_cls: the task's params dataclass (its fields are the names a
      space may use).

  Returns:
    a :class:`SearchSpace` with values converted to the flags' types.

  Raises:
    errors.ParamsError (argument ``search_space``): an unreadable file,
      an unknown hyperparameter name (listing the allowed ones), an empty
      list, an invalid range (``low >= high``, log with ``low <= 0``), a
      value of the wrong type.
  """
  if spec in SEARCH_SPACES:
    raw, where = SEARCH_SPACES[spec], spec
  else:
    where = spec
    try:
      with open(spec, encoding="utf-8") as f:
        raw = json.load(f)
    except FileNotFoundError as e:
      raise errors.ParamsError("%r is neither paper, glue nor a file" % spec,
                               argument="search_space") from e
    except json.JSONDecodeError as e:
      raise errors.ParamsError("%s line %d: not JSON (%s)" % (spec, e.lineno, e.msg),
                               argument="search_space") from e
    if not isinstance(raw, dict) or not raw:
      raise errors.ParamsError("%s: want a non-empty JSON object {flag: values}" % spec,
                               argument="search_space")
  types = _field_types(params_cls)
  choices_of = {f.name: (f.metadata or {}).get("choices")
                for f in dataclasses.fields(params_cls)}
  allowed = sorted(n for n in types if n not in NOT_SEARCHED and
                   n not in DATA_FIELDS and n not in runner.NOT_RECIPE)
  out = {}
  for name, value in raw.items():
    if name == "seed":
      raise errors.ParamsError("search space %s: seed is set by --num_restarts "
                               "(seed, seed+1, ...), not searched" % where,
                               argument="search_space")
    if name in DATA_FIELDS:
      raise errors.ParamsError(
          "search space %s: %s changes the featurized data, which a search prepares "
          "once: run one search per value" % (where, name), argument="search_space")
    if name not in allowed:
      raise errors.ParamsError(
          "search space %s: unknown hyperparameter %r (the task's flags: %s)" % (
              where, name, ", ".join(allowed)), argument="search_space")
    tp = types[name]
    if isinstance(value, list):
      if not value:
        raise errors.ParamsError("search space %s: %s has no values" % (where, name),
                                 argument="search_space")
      out[name] = [_convert(name, v, tp, where) for v in value]
      choices = choices_of.get(name)
      if choices and any(v not in choices for v in out[name]):
        raise errors.ParamsError("search space %s: %s values must be among %s, got %s"
                                 % (where, name, ", ".join(choices), out[name]),
                                 argument="search_space")
    elif isinstance(value, dict):
      unknown = set(value) - {"low", "high", "log", "step"}
      if unknown or not {"low", "high"} <= set(value) or tp not in (int, float):
        raise errors.ParamsError(
            "search space %s: %s range %s: want {\"low\": ..., \"high\": ..., "
            "\"log\": bool, \"step\": ...} of a number flag" % (where, name,
                                                             json.dumps(value)),
            argument="search_space")
      r = Range(_convert(name, value["low"], float, where),
                _convert(name, value["high"], float, where), bool(value.get("log")),
                value.get("step"))
      if not r.low < r.high:
        raise errors.ParamsError("search space %s: %s range is empty (low %g >= high %g)"
                                 % (where, name, r.low, r.high), argument="search_space")
      if r.log and r.low <= 0:
        raise errors.ParamsError("search space %s: %s log range needs low > 0, got %g"
                                 % (where, name, r.low), argument="search_space")
      if r.step is not None and (isinstance(r.step, bool) or not r.step > 0):
        raise errors.ParamsError("search space %s: %s step must be > 0" % (where, name),
                                 argument="search_space")
      out[name] = r
    else:
      raise errors.ParamsError(
          "search space %s: %s must be a list (a grid) or a range object, got %s"
          % (where, name, json.dumps(value)), argument="search_space")
  return SearchSpace(spec if spec in SEARCH_SPACES else os.path.abspath(spec), out)


# --- metrics -----------------------------------------------------------------


def default_metric(kind: str, task) -> str:
  """The task's standard dev metric (paper / GLUE).

  classifier: ``eval_accuracy``, or ``eval_mcc`` (CoLA), ``eval_f1`` (MRPC,
  QQP), ``eval_spearmanr`` (STS-B) where GLUE uses them; squad: ``f1``
  (v1.1) or ``best_f1`` (v2.0: F1 at the best no-answer threshold); ner:
  entity ``eval_f1``; swag: ``eval_accuracy``.
  """
  if kind == "classifier":
    return "eval_" + {"mcc": "mcc", "acc_and_f1": "f1",
                      "pearson_and_spearman": "spearmanr"}.get(
                          task.data_task.metrics, "accuracy")
  if kind == "squad":
    return "best_f1" if task.params.version_2_with_negative else "f1"
  return "eval_f1" if kind == "ner" else "eval_accuracy"


def reported_metrics(kind: str, task) -> list:
  """The dev metrics the task reports (what ``--metric`` may name)."""
  if kind == "classifier":
    extra = {"mcc": ["mcc"], "acc_and_f1": ["f1", "acc_and_f1"],
             "pearson_and_spearman": ["pearson", "spearmanr", "corr"]}.get(
                 task.data_task.metrics, [])
    return ["eval_" + m for m in ["accuracy", "loss"] + extra
            if not (task.data_task.is_regression and m == "accuracy")]
  if kind == "squad":
    if task.params.version_2_with_negative:
      return ["exact", "f1", "best_exact", "best_f1", "HasAns_exact", "HasAns_f1",
              "NoAns_exact", "NoAns_f1"]
    return ["exact_match", "f1"]
  if kind == "ner":
    return ["eval_f1", "eval_precision", "eval_recall", "eval_accuracy", "eval_loss"]
  return ["eval_accuracy", "eval_loss"]


def _direction(metric: str) -> str:
  return "minimize" if metric.endswith("loss") else "maximize"


# --- the search --------------------------------------------------------------


def _retry_callback(max_retry: int):
  """Optuna's ``RetryHeartbeatStaleTrialCallback`` re-queueing a dead
  worker's trial (same parameters, same ``run_index`` and so the same run
  directory), without the dead worker's ``worker``/``error`` attributes."""
  import optuna  # pylint: disable=g-import-not-at-top

  class Retry(optuna.storages.RetryHeartbeatStaleTrialCallback):

    def __call__(self, study, trial):
      trial = copy.deepcopy(trial)
      trial.user_attrs = {k: v for k, v in trial.user_attrs.items()
                          if k not in ("worker", "error", "wall_seconds", "steps")}
      super().__call__(study, trial)

  return Retry(max_retry=max_retry)


class _TrialInterrupted(KeyboardInterrupt):
  """Carries a trial's Ctrl-C / SIGTERM through Optuna (which fails the
  trial and re-raises a ``KeyboardInterrupt`` rather than going on with the
  next trial) to :meth:`Search.run`, which re-queues the trial."""

  def __init__(self, trial_id: int, error: BaseException):
    super().__init__(str(error))
    self.trial_id, self.error = trial_id, error


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


class Search:
  """A resumable, parallel hyperparameter search over one task (module doc).

  Args:
    task: ``classifier``, ``squad``, ``ner`` or ``swag`` (:data:`TASKS`).
    params: the task's params (its tool's flags; ``output_dir`` is the
      search's directory); the searched fields and ``seed`` are set per trial.
    search: :class:`SearchParams`.
    strategy: a ``tf.distribute`` strategy (default one device).
    exporter: ``exporter(run_dir, export_dir) -> path``: writes the best
      trial's SavedModel (the tool passes the task's own exporter through
      ``bert_tf.export.fine_tuned``); None: no export.
    do_predict: trials also write the task's test predictions.
    print_fn: progress lines (one per trial) go here.

  Raises:
    errors.ParamsError: bad search flags, names or ranges, a metric the task
      does not report, a batch size above the training rows, a search on
      ``output_dir`` / the storage with other settings (each difference
      listed) -- all before any training.

  Example::

    Search("ner", NerParams(data_dir="data/ner_wnut16", output_dir="/tmp/t",
                            init_checkpoint=HF_DIR),
           SearchParams(search_space="glue")).run()
  """

  def __init__(self, task: str, params, search: SearchParams, strategy=None,
               exporter: Optional[Callable[[str, str], str]] = None,
               do_predict: bool = False,
               print_fn: Callable[[str], None] = print):
    if task not in TASKS:
      raise errors.ParamsError("task: unknown %r (%s)" % (task, ", ".join(TASKS)),
                               argument="task")
    self.kind = TASKS[task]
    self.base = params
    self.sp = search
    self.strategy = strategy
    self.exporter = exporter
    self.do_predict = do_predict
    self.print_fn = print_fn
    self.output_dir = os.path.abspath(params.output_dir)
    self._check_search_params()
    self.space = load_search_space(search.search_space, self.kind.params_cls)
    self.seeds = [params.seed + i for i in range(search.num_restarts)]
    self.task = self._build_task()  # reads, tokenizes and featurizes the data once
    self.metric = search.metric or default_metric(task, self.task)
    known = reported_metrics(task, self.task)
    if self.metric not in known:
      raise errors.ParamsError("metric: the %s task does not report %r (it reports %s)"
                               % (task, self.metric, ", ".join(known)), argument="metric")
    self._check_batch_sizes()
    self.total = (self.space.grid_size() * len(self.seeds) if self.space.is_grid
                  else search.num_trials * len(self.seeds))
    self.study = None
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
    if sp.holdout_fraction and self.kind.name != "classifier":
      raise errors.ParamsError("holdout_fraction: only --task=classifier sets a slice "
                               "of train aside; select on the dev set (0)",
                               argument="holdout_fraction")
    if sp.sampler not in SAMPLERS:
      raise errors.ParamsError("sampler: unknown %r (%s)" % (sp.sampler, ", ".join(SAMPLERS)),
                               argument="sampler")
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
      extra["do_predict"] = self.kind.name == "squad" or self.do_predict
    return dataclasses.replace(self.base, output_dir=run_dir, seed=seed,
                               export_dir=None, **extra, **hparams)

  def _build_task(self):
    p = self._trial_params({}, self.base.seed, self.output_dir)
    if self.kind.name == "classifier":
      task = classification.ClassificationTask(p, do_train=True, do_eval=True,
                                               do_predict=self.do_predict)
      self.report_devs = None
      if self.sp.holdout_fraction:
        self._hold_out(task)
      if not task.devs:
        raise errors.ParamsError("the task has no dev set to select on: use "
                                 "--holdout_fraction", argument="data_dir")
      return task
    if self.kind.name == "squad":
      task = squad.QuestionAnsweringTask(p, do_train=True, do_predict=True)
      if not task.has_answers:
        raise errors.ParamsError("%s has no answers to select on: a search needs "
                                 "a dev file with answers" % p.predict_file,
                                 argument="predict_file")
      return task
    task = (tagging.TokenTaggingTask if self.kind.name == "ner"
            else swag.MultipleChoiceTask)(p)
    if not task.dev:
      raise errors.ParamsError("a search needs --dev_file (the dev set to select on)",
                               argument="dev_file")
    return task

  def _hold_out(self, task):
    """Sets ``holdout_fraction`` of train aside as the selection set; the dev
    set is kept for reporting (``dev_metric``)."""
    train = task.train
    n = len(train)
    k = int(round(n * self.sp.holdout_fraction))
    if k < 1 or k >= n:
      raise errors.ParamsError("holdout_fraction %g of %d training examples leaves "
                               "%d held out" % (self.sp.holdout_fraction, n, k),
                               argument="holdout_fraction")
    order = list(range(n))
    random.Random(self.base.seed).shuffle(order)
    held, kept = sorted(order[:k]), sorted(order[k:])

    def subset(idx, path):
      pick = lambda xs: None if xs is None else [xs[i] for i in idx]  # pylint: disable=unnecessary-lambda-assignment
      return dataclasses.replace(train, texts_a=pick(train.texts_a),
                                 texts_b=pick(train.texts_b), labels=pick(train.labels),
                                 ids=pick(train.ids), path=path)

    self.report_devs = (task.devs, task.dev_datasets)
    held_out = subset(held, train.path + " (held out %d)" % k)
    task.train = subset(kept, train.path)
    split = task.devs[0][0] if task.devs else task.data_task.dev[0]
    task.devs = [(split, held_out)]
    task.dev_datasets = [classification.eval_dataset(
        task.preprocessor, task.data_task, held_out, task.params.eval_batch_size)]
    task._plan_steps(len(task.train))  # pylint: disable=protected-access

  def _check_batch_sizes(self):
    rows = self.task.train_rows or len(getattr(self.task, "train", []) or [])
    values = self.space.params.get("train_batch_size", [self.base.train_batch_size])
    largest = max(values) if isinstance(values, list) else values.high
    if rows and largest > rows:
      raise errors.ParamsError(
          "train_batch_size %d is above the %d training rows the search trains on"
          % (largest, rows), argument="train_batch_size"
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
    import optuna  # pylint: disable=g-import-not-at-top
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    py_logging.getLogger("optuna").setLevel(py_logging.ERROR)
    import warnings  # pylint: disable=g-import-not-at-top
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    os.makedirs(self.output_dir, exist_ok=True)
    url = self.storage_url()
    kwargs = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
    hb = self.sp.heartbeat_seconds
    import sqlalchemy.exc  # pylint: disable=g-import-not-at-top
    for attempt in range(10):
      try:  # workers started together race to create the schema: retry
        storage = optuna.storages.RDBStorage(
            url, engine_kwargs=kwargs, heartbeat_interval=hb, grace_period=2 * hb,
            heartbeat_stale_trial_callback=_retry_callback(self.sp.max_retries))
        break
      except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.OperationalError):
        if attempt == 9:
          raise
        time.sleep(0.5 + random.random())
    if self.space.is_grid and self.sp.sampler == "auto":
      grid = dict(self.space.params, seed=self.seeds)
      sampler = optuna.samplers.GridSampler(grid, seed=self.base.seed)
    elif self.sp.sampler == "random":
      sampler = optuna.samplers.RandomSampler(seed=self.base.seed)
    else:
      sampler = optuna.samplers.TPESampler(seed=self.base.seed)
    study = optuna.create_study(storage=storage, study_name=self.sp.study_name,
                                sampler=sampler, direction=_direction(self.metric),
                                load_if_exists=True)
    mine = self.settings()
    old = study.user_attrs.get("settings")
    if old is None:
      study.set_user_attr("settings", mine)
    elif old != mine:
      raise errors.ParamsError(
          "%s holds a search with other settings: %s. Rerun with the search's flags "
          "to resume it, or use a new --output_dir (or --study_name)" % (
              url, "; ".join(_differences(old, mine))),
          argument=_differences(old, mine, names_only=True)[0])
    self.study = study
    return study

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

  def _suggest(self, trial) -> dict:
    out = {}
    for name, v in sorted(self.space.params.items()):
      if isinstance(v, list):
        out[name] = trial.suggest_categorical(name, v)
      elif _field_types(self.kind.params_cls)[name] is int:
        out[name] = trial.suggest_int(name, int(v.low), int(v.high), log=v.log,
                                      step=int(v.step or 1))
      else:
        out[name] = trial.suggest_float(name, v.low, v.high, log=v.log,
                                        step=None if v.log else v.step)
    return out

  def _duplicate(self, trial, index) -> bool:
    """Another live or finished trial already owns this run directory (two
    workers that asked for the last grid point at once)."""
    import optuna  # pylint: disable=g-import-not-at-top
    if "failed_trial" in trial.system_attrs:
      return False
    for t in self.study.get_trials(deepcopy=False):
      if (t.number < trial.number and self._run_index(t) == index and
          t.state in (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.COMPLETE)):
        return True
    return False

  def objective(self, trial) -> float:
    """One trial: the task's job in ``trials/<n>/``; returns the metric.

    Raises:
      optuna.TrialPruned: a duplicate of a grid point another worker runs.
      Exception: the trial's error (recorded as the trial's ``error``).
    """
    import optuna  # pylint: disable=g-import-not-at-top
    started = time.monotonic()
    try:
      return self._objective(trial, started)
    except optuna.TrialPruned:
      raise
    except (training.Interrupted, KeyboardInterrupt) as e:  # the search stops here
      trial.set_user_attr("error", "interrupted; resumed by the next run of the search")
      raise _TrialInterrupted(trial._trial_id, e) from e  # pylint: disable=protected-access
    except Exception as e:  # recorded; the search goes on
      message = "%s: %s" % (type(e).__name__, _error_line(e))
      trial.set_user_attr("error", message)
      trial.set_user_attr("wall_seconds", round(time.monotonic() - started, 1))
      run_dir = trial.user_attrs.get("run_dir")
      if run_dir:
        with open(os.path.join(run_dir, "log.txt"), "a", encoding="utf-8") as log:
          log.write("error: %s\n%s" % (message, traceback.format_exc()))
      raise

  def _objective(self, trial, started) -> float:
    import optuna  # pylint: disable=g-import-not-at-top
    frozen = self.study._storage.get_trial(trial._trial_id)  # pylint: disable=protected-access
    hparams = self._suggest(trial)
    if self.space.is_grid:
      seed = int(trial.suggest_categorical("seed", self.seeds))
    else:
      seed = int(frozen.user_attrs.get("seed", self.seeds[0]))
      trial.set_user_attr("seed", seed)
    index = self._run_index(frozen)
    trial.set_user_attr("run_index", index)
    trial.set_user_attr("worker", {"host": socket.gethostname(), "pid": os.getpid()})
    if self._duplicate(frozen, index):
      trial.set_user_attr("duplicate", True)
      raise optuna.TrialPruned("grid point %d runs in another trial" % index)
    if not self.space.is_grid and "fixed_params" not in frozen.system_attrs:
      for s in self.seeds[1:]:  # the restarts of a sampled configuration
        self.study.enqueue_trial(hparams, user_attrs={"seed": s})
    run_dir = self.run_dir(index)
    os.makedirs(run_dir, exist_ok=True)
    trial.set_user_attr("run_dir", run_dir)
    self.print_fn("trial %d started: %s -> %s" % (
        index, _format_hparams(dict(hparams, seed=seed)), run_dir))
    with open(os.path.join(run_dir, "log.txt"), "a", encoding="utf-8") as log:
      value, results = self._train(hparams, seed, run_dir, log)
    trial.set_user_attr("wall_seconds", round(time.monotonic() - started, 1))
    trial.set_user_attr("steps", int(results.get("global_step", 0)))
    if "dev_metric" in results:
      trial.set_user_attr("dev_metric", results["dev_metric"])
    return value

  def _train(self, hparams, seed, run_dir, log):
    params = self._trial_params(hparams, seed, run_dir)
    task = self.task.with_params(params)

    def print_fn(line):
      log.write(line + "\n")
      log.flush()

    strategy = self.strategy
    if strategy is None:
      from bert_tf import distribute  # pylint: disable=g-import-not-at-top
      strategy = self.strategy = distribute.get_strategy("one_device")
    name = self.kind.name
    if name == "classifier":
      results = jobs.run_classifier(params, strategy, do_train=True, do_eval=True,
                                    do_predict=self.do_predict, print_fn=print_fn,
                                    task=task)
    else:
      job = {"squad": jobs.run_squad, "ner": jobs.run_ner, "swag": jobs.run_swag}[name]
      results = job(params, strategy, print_fn=print_fn, task=task)
    value = self._kept_value(run_dir, task, results)
    if value is None or not math.isfinite(value):
      raise FloatingPointError("%s is %s (the loss diverged?)" % (self.metric, value))
    if self._reports_dev(name):
      results["dev_metric"] = self._report_on_dev(task, run_dir, print_fn)
    return value, results

  def _reports_dev(self, name) -> bool:
    return name == "classifier" and getattr(self, "report_devs", None) is not None

  def _kept_value(self, run_dir, task, results):
    """The metric of the model the run keeps: ``best/`` when kept by this
    metric, else the final evaluation."""
    best = runner.read_best_state(run_dir)
    if best is not None and task.best_metric == self.metric:
      return float(best["value"])
    return None if self.metric not in results else float(results[self.metric])

  def _report_on_dev(self, task, run_dir, print_fn) -> float:
    """The kept model's metric on the untouched dev set (holdout searches)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    devs, datasets = self.report_devs
    report = task.with_params(task.params)
    report.devs, report.dev_datasets = devs, datasets
    with self.strategy.scope():
      model = report.build_model()
    objects = report.checkpoint_objects(model)
    if runner.restore_best(objects, run_dir) is None:
      tf.train.Checkpoint(**objects).read(tf.train.latest_checkpoint(run_dir)).expect_partial()
    print_fn("reporting the kept model on the dev set:")
    out = report.evaluate(model, print_fn)
    return float(out[self.metric])

  # --- the loop -------------------------------------------------------------

  def _fail_dead_local_trials(self):
    """Fails (and re-queues) RUNNING trials of dead processes on this host."""
    import optuna  # pylint: disable=g-import-not-at-top
    host = socket.gethostname()
    storage = self.study._storage  # pylint: disable=protected-access
    for t in self.study.get_trials(deepcopy=False,
                                   states=(optuna.trial.TrialState.RUNNING,)):
      w = t.user_attrs.get("worker")
      if not w or w.get("host") != host or w.get("pid") == os.getpid() \
          or _pid_alive(int(w["pid"])):
        continue
      try:
        storage.set_trial_user_attr(t._trial_id, "error",  # pylint: disable=protected-access
                                    "its process (pid %s) died; retried" % w["pid"])
        if not storage.set_trial_state_values(t._trial_id,  # pylint: disable=protected-access
                                              state=optuna.trial.TrialState.FAIL):
          continue
      except optuna.exceptions.UpdateFinishedTrialError:
        continue
      self.print_fn("trial %d: its process (pid %s) died; resuming it" % (
          self._run_index(t), w["pid"]))
      _retry_callback(self.sp.max_retries)(
          self.study, storage.get_trial(t._trial_id))  # pylint: disable=protected-access

  def _originals(self, trials) -> int:
    """Trials the sampler created (not retries, not queued restarts)."""
    return sum(1 for t in trials if "failed_trial" not in t.system_attrs
               and "fixed_params" not in t.system_attrs and not t.user_attrs.get("duplicate"))

  def run(self, poll_seconds: float = 2.0) -> dict:
    """Runs (or resumes, or joins) the search to its end; writes the results
    and exports the best trial.

    Returns:
      the best trial (:func:`best_trial` of :meth:`rows`).

    Raises:
      errors.SearchError: every trial failed (the errors listed).
      errors.ParamsError: see the class.
    """
    import optuna  # pylint: disable=g-import-not-at-top
    if self.study is None:
      self.open_study()
    self._started = time.monotonic()
    planned = self.space.grid_size() * len(self.seeds) if self.space.is_grid \
        else self.sp.num_trials
    while True:
      self._fail_dead_local_trials()
      optuna.storages.fail_stale_trials(self.study)
      trials = self.study.get_trials(deepcopy=False)
      waiting = any(t.state == optuna.trial.TrialState.WAITING for t in trials)
      if not waiting and self._originals(trials) >= planned:
        if any(t.state == optuna.trial.TrialState.RUNNING for t in trials):
          time.sleep(poll_seconds)  # others' trials: wait (and retry them if they die)
          continue
        break
      try:
        self.study.optimize(self.objective, n_trials=1, catch=(Exception,),
                            callbacks=[self._progress], gc_after_trial=True)
      except _TrialInterrupted as e:
        # Optuna failed the trial: queue it again (same parameters and run
        # directory, so the next run resumes it from its newest checkpoint),
        # then stop as a single run does (training.Interrupted / Ctrl-C).
        storage = self.study._storage  # pylint: disable=protected-access
        _retry_callback(None)(self.study, storage.get_trial(e.trial_id))
        raise e.error from None
    rows = self.rows()
    self.write_results(rows)
    best = best_trial(rows, self.metric)
    if best is None:
      raise errors.SearchError("every trial failed: " + "; ".join(
          "trial %d: %s" % (r["trial"], r["error"]) for r in rows[:5]))
    return self._finish(best)

  def _progress(self, study, frozen):
    import optuna  # pylint: disable=g-import-not-at-top
    if frozen.user_attrs.get("duplicate"):
      return
    self._done_here += 1
    rows = self.rows()
    finished = sum(1 for r in rows if r["status"] in ("COMPLETE", "FAIL"))
    elapsed = time.monotonic() - self._started
    eta = elapsed / self._done_here * max(self.total - finished, 0)
    seed = frozen.params.get("seed", frozen.user_attrs.get("seed"))
    hp = {k: v for k, v in frozen.params.items() if k != "seed"}
    if frozen.state == optuna.trial.TrialState.COMPLETE:
      what = "%s=%.4f (%d steps, %s)" % (
          self.metric, frozen.value, frozen.user_attrs.get("steps", 0),
          runner.format_duration(frozen.user_attrs.get("wall_seconds", 0)))
      if "dev_metric" in frozen.user_attrs:
        what += " dev %s=%.4f" % (self.metric, frozen.user_attrs["dev_metric"])
    else:
      what = "FAILED: %s" % frozen.user_attrs.get("error", "unknown error")
    self.print_fn("[%d/%d] trial %d %s: %s; elapsed %s, eta %s" % (
        finished, self.total, self._run_index(frozen), _format_hparams(dict(hp, seed=seed)),
        what, runner.format_duration(elapsed), runner.format_duration(eta)))
    self.write_results(rows, plot=False)

  # --- results ---------------------------------------------------------------

  def rows(self) -> list:
    """One row per run directory: its newest finished (or running) trial.

    Returns:
      list of dicts: ``trial``, the hyperparameters by flag name, ``seed``,
      ``metric``, ``steps``, ``wall_seconds``, ``status``, (``dev_metric``),
      ``error``, ``run_dir``.
    """
    import optuna  # pylint: disable=g-import-not-at-top
    by_index = {}
    for t in self.study.get_trials(deepcopy=False):
      if t.user_attrs.get("duplicate") or t.state == optuna.trial.TrialState.WAITING:
        continue
      index = self._run_index(t)
      old = by_index.get(index)
      rank = lambda x: (x.state == optuna.trial.TrialState.COMPLETE, x.number)  # pylint: disable=unnecessary-lambda-assignment
      if old is None or rank(t) > rank(old):
        by_index[index] = t
    rows = []
    names = sorted(self.space.params)
    for index in sorted(by_index):
      t = by_index[index]
      row = {"trial": index}
      row.update({n: t.params.get(n) for n in names})
      row["seed"] = t.params.get("seed", t.user_attrs.get("seed"))
      row["metric"] = t.value if t.state == optuna.trial.TrialState.COMPLETE else None
      row["steps"] = t.user_attrs.get("steps")
      row["wall_seconds"] = t.user_attrs.get("wall_seconds")
      row["status"] = t.state.name
      if self._reports_dev(self.kind.name):
        row["dev_metric"] = t.user_attrs.get("dev_metric")
      row["error"] = t.user_attrs.get("error", "")
      row["run_dir"] = t.user_attrs.get("run_dir", self.run_dir(index))
      rows.append(row)
    return rows

  def write_results(self, rows: list, plot: bool = True) -> None:
    """``search_results.csv``, ``.md`` (and ``.png``), atomically."""
    write_results(rows, self.output_dir, self.metric, plot=plot)

  def _finish(self, best: dict) -> dict:
    """``best_trial.json`` and the export (once, whichever worker gets here)."""
    import fcntl  # pylint: disable=g-import-not-at-top
    path = os.path.join(self.output_dir, BEST_FILE)
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
        out["export_path"] = self.exporter(best["run_dir"],
                                           os.path.join(self.output_dir, EXPORT_DIR))
      io_utils.atomic_write_text(path, json.dumps(out, indent=2, default=str) + "\n")
    self.print_fn("best: trial %d %s %s=%.4f (%s)%s" % (
        best["trial"], _format_hparams({k: best[k] for k in sorted(self.space.params)}
                                           | {"seed": best["seed"]}),
        self.metric, best["metric"], best["run_dir"],
        "; exported to %s" % out["export_path"] if out["export_path"] else ""))
    return out


def _error_line(error: BaseException) -> str:
  """One line saying what went wrong: the message's first line, or its last
  one for TensorFlow's ``in user code:`` tracebacks."""
  lines = [l.strip() for l in str(error).splitlines() if l.strip()]
  if not lines:
    return type(error).__name__
  return lines[-1] if lines[0].rstrip(":") == "in user code" else lines[0]


def _format_hparams(hp: dict) -> str:
  return " ".join("%s=%s" % (k, ("%g" % v) if isinstance(v, float) else v)
                  for k, v in hp.items())


def _flatten(settings: dict) -> dict:
  """``{"--flag": value}`` of a search's settings (task flags and search
  flags), ``search_space.<name>`` for each hyperparameter."""
  out = {}
  for k, v in settings.items():
    if k == "task_flags":
      out.update({"--" + f: x for f, x in v.items()})
    elif k == "search_space":
      out.update({"search_space." + f: x for f, x in v.items()})
    else:
      out["--" + k] = v
  return out


def _differences(old: dict, new: dict, names_only: bool = False) -> list:
  """``name=recorded (the search) vs now`` for each differing setting (or
  the flag names, with ``names_only``)."""
  a, b = _flatten(old), _flatten(new)
  keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
  if names_only:
    return [k.lstrip("-").split(".")[0] for k in keys] or ["search_space"]
  return ["%s=%s (the search) vs %s (now)" % (k, json.dumps(a.get(k)), json.dumps(b.get(k)))
          for k in keys]


def best_trial(rows: Sequence[dict], metric: str) -> Optional[dict]:
  """The completed row with the best metric (lowest for a loss; ties: the
  first trial), or None when none completed."""
  done = [r for r in rows if r["status"] == "COMPLETE" and r["metric"] is not None]
  if not done:
    return None
  sign = -1.0 if _direction(metric) == "minimize" else 1.0
  return max(done, key=lambda r: (sign * r["metric"], -r["trial"]))


def _columns(rows) -> list:
  first = rows[0] if rows else {}
  return [k for k in first if k not in ("run_dir",)]


def write_results(rows: Sequence[dict], output_dir: str, metric: str,
                  plot: bool = True) -> None:
  """Writes ``search_results.csv`` and ``search_results.md`` (one row per
  trial; columns: ``trial``, the flags, ``seed``, ``metric``, ``steps``,
  ``wall_seconds``, ``status``, (``dev_metric``), ``error``) and, with
  ``plot``, ``search_results.png`` (:func:`plot_results`), atomically."""
  cols = _columns(rows)
  buf = io.StringIO()
  w = csv.writer(buf, lineterminator="\n")
  w.writerow(cols)
  for r in rows:
    w.writerow(["" if r[c] is None else r[c] for c in cols])
  io_utils.atomic_write_text(os.path.join(output_dir, RESULTS_CSV), buf.getvalue())
  best = best_trial(rows, metric)

  def cell(c, v):
    if v is None:
      return ""
    if c in ("metric", "dev_metric"):
      return "%.4f" % v
    return ("%g" % v) if isinstance(v, float) else str(v).replace("|", "/")

  lines = ["# Hyperparameter search (metric: %s)" % metric, ""]
  if best is not None:
    lines += ["Best: trial %d, %s = %.4f (`%s`)." % (best["trial"], metric,
                                                     best["metric"], best["run_dir"]), ""]
  lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
  lines += ["| " + " | ".join(cell(c, r[c]) for c in cols) + " |" for r in rows]
  io_utils.atomic_write_text(os.path.join(output_dir, RESULTS_MD), "\n".join(lines) + "\n")
  if plot:
    plot_results(rows, os.path.join(output_dir, RESULTS_PNG), metric)


def plot_results(rows: Sequence[dict], path: str, metric: str) -> Optional[str]:
  """The metric over learning rate (log x axis), one line per batch size,
  one panel per epoch count; restarts as spread (mean with a min-max bar).

  Returns:
    ``path``, or None when no trial completed or the rows have no
    ``learning_rate``.
  """
  done = [r for r in rows if r["status"] == "COMPLETE" and r.get("learning_rate")]
  if not done:
    return None
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  epochs = sorted({r.get("num_train_epochs") for r in done}, key=lambda x: (x is None, x))
  fig, axes = plt.subplots(1, len(epochs), figsize=(4.5 * len(epochs), 3.6),
                           squeeze=False, sharey=True)
  for ax, ep in zip(axes[0], epochs):
    sel = [r for r in done if r.get("num_train_epochs") == ep]
    for bs in sorted({r.get("train_batch_size") for r in sel}, key=lambda x: (x is None, x)):
      pts = {}
      for r in sel:
        if r.get("train_batch_size") == bs:
          pts.setdefault(r["learning_rate"], []).append(r["metric"])
      xs = sorted(pts)
      mean = [sum(pts[x]) / len(pts[x]) for x in xs]
      lo = [m - min(pts[x]) for m, x in zip(mean, xs)]
      hi = [max(pts[x]) - m for m, x in zip(mean, xs)]
      ax.errorbar(xs, mean, yerr=[lo, hi], marker="o", capsize=3,
                  label="batch %s" % bs if bs is not None else "default batch")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_title("%s epochs" % ep if ep is not None else "default epochs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  axes[0][0].set_ylabel(metric)
  fig.tight_layout()
  with io_utils.atomic_output(path) as tmp:
    fig.savefig(tmp, format="png", dpi=100)
  plt.close(fig)
  return path


def search(task: str, params, search_params: Optional[SearchParams] = None,
           **kwargs: Any) -> dict:
  """Runs a :class:`Search` to its end; returns the best trial.

  Args:
    task: ``classifier``, ``squad``, ``ner`` or ``swag``.
    params: the task's params (``output_dir`` = the search's directory).
    search_params: :class:`SearchParams` (default: the paper's grid).
    **kwargs: :class:`Search`'s other arguments (``exporter``, ...).

  Returns:
    dict: the best trial's hyperparameters (flag names), ``seed``,
    ``metric``, ``metric_name``, ``run_dir``, ``export_path``.

  Raises:
    errors.ParamsError / errors.SearchError: see :class:`Search`.
  """
  return Search(task, params, search_params or SearchParams(), **kwargs).run()
