"""The study and its storage: the only module of the search that touches Optuna.

A search is an Optuna study in an RDB storage (SQLite ``OUTPUT_DIR/search.db``
by default, any SQLAlchemy URL for several machines). This module opens it
(samplers, heartbeats, the settings check), suggests a trial's values, fails
and re-queues the trials of dead processes, and reads a live trial's stored
record. Only Optuna's public API: a trial is named by its ``number``
(``study.get_trials``, ``study.tell``), never by its storage id. Optuna is
imported inside the functions: ``import bert_tf.tuning`` needs no Optuna.

Source: Optuna's ``RDBStorage``, ``GridSampler``, ``TPESampler``,
``RetryHeartbeatStaleTrialCallback``, ``fail_stale_trials``, ``Study.tell``.

Example::

  from bert_tf.tuning import study as study_lib
  storage = study_lib.open_storage("sqlite:////tmp/t/search.db",
                                   heartbeat_seconds=60, max_retries=3)
  study = study_lib.open_study(storage, "sqlite:////tmp/t/search.db", "bert_tune",
                               space, seeds=[1], seed=1, sampler="auto",
                               metric="eval_accuracy", settings={...})
"""

from __future__ import annotations

import copy
import json
import logging as py_logging
import os
import random
import socket
import time
from typing import Any, Callable, Optional

from bert_tf import errors
from bert_tf.tuning import space as space_lib


# A trial's attributes that belong to the process that ran it: its retry
# starts without them.
_RUN_ATTRS = ("worker", "error", "wall_seconds", "steps")


def retry_callback(max_retry: Optional[int]) -> Callable[[Any, Any], None]:
  """Optuna's ``RetryHeartbeatStaleTrialCallback`` re-queueing a dead
  worker's trial (same parameters, same ``run_index`` and so the same run
  directory), without the dead worker's ``worker``/``error`` attributes.

  Returns:
    ``callback(study, frozen_trial)``: queues a copy of the trial as
    ``WAITING`` (nothing once it was retried ``max_retry`` times; None: no
    limit).
  """
  import optuna  # pylint: disable=g-import-not-at-top

  class Retry(optuna.storages.RetryHeartbeatStaleTrialCallback):

    def __call__(self, study, trial):
      trial = copy.deepcopy(trial)
      trial.user_attrs = {k: v for k, v in trial.user_attrs.items()
                          if k not in _RUN_ATTRS}
      super().__call__(study, trial)

  return Retry(max_retry=max_retry)


class TrialInterrupted(KeyboardInterrupt):
  """Carries a trial's Ctrl-C / SIGTERM through Optuna (which fails the
  trial and re-raises a ``KeyboardInterrupt`` rather than going on with the
  next trial) to the search loop, which re-queues the trial
  (:func:`requeue`).

  Attributes:
    number: the trial's number in its study.
    error: the ``KeyboardInterrupt`` / ``bert_tf.training.Interrupted``.
  """

  def __init__(self, number: int, error: BaseException):
    super().__init__(str(error))
    self.number, self.error = number, error


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


def differences(old: dict, new: dict, names_only: bool = False) -> list:
  """``name=recorded (the search) vs now`` for each differing setting (or
  the flag names, with ``names_only``)."""
  a, b = _flatten(old), _flatten(new)
  keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
  if names_only:
    return [k.lstrip("-").split(".")[0] for k in keys] or ["search_space"]
  return ["%s=%s (the search) vs %s (now)" % (k, json.dumps(a.get(k)), json.dumps(b.get(k)))
          for k in keys]


def open_storage(url: str, heartbeat_seconds: int, max_retries: int):
  """The study's storage (an ``optuna.storages.RDBStorage``) at ``url``.

  A running trial records a heartbeat every ``heartbeat_seconds``; one
  without a heartbeat for two periods is failed by the next
  :func:`fail_stale` and re-queued (:func:`retry_callback`, at most
  ``max_retries`` times).

  Args:
    url: an SQLAlchemy URL (``sqlite:///...``: a 120 s lock timeout).
    heartbeat_seconds: a running trial's heartbeat period (stale after 2).
    max_retries: re-runs of a trial whose process died.

  Returns:
    the ``optuna.storages.RDBStorage``.

  Raises:
    sqlalchemy.exc.OperationalError / IntegrityError: the database cannot
      be opened (after 10 tries: workers started together race to create
      the schema).
  """
  import optuna  # pylint: disable=g-import-not-at-top
  import sqlalchemy.exc  # pylint: disable=g-import-not-at-top
  optuna.logging.set_verbosity(optuna.logging.WARNING)
  py_logging.getLogger("optuna").setLevel(py_logging.ERROR)
  import warnings  # pylint: disable=g-import-not-at-top
  warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
  kwargs = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
  hb = heartbeat_seconds

  def make():
    return optuna.storages.RDBStorage(
        url, engine_kwargs=kwargs, heartbeat_interval=hb, grace_period=2 * hb,
        heartbeat_stale_trial_callback=retry_callback(max_retries))
  for _ in range(9):
    try:
      return make()
    except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.OperationalError):
      time.sleep(0.5 + random.random())
  return make()


def _sampler(space: space_lib.SearchSpace, seeds: list, seed: int, sampler: str):
  """``GridSampler`` (restarts as the ``seed`` axis) for a grid with
  ``auto``, ``RandomSampler`` for ``random``, else ``TPESampler``."""
  import optuna  # pylint: disable=g-import-not-at-top
  if space.is_grid and sampler == "auto":
    return optuna.samplers.GridSampler(dict(space.params, seed=seeds), seed=seed)
  if sampler == "random":
    return optuna.samplers.RandomSampler(seed=seed)
  return optuna.samplers.TPESampler(seed=seed)


def open_study(storage, url: str, study_name: str, space: space_lib.SearchSpace,
               seeds: list, seed: int, sampler: str, metric: str, settings: dict):
  """Creates or loads the study (an ``optuna.Study``) in ``storage``.

  Args:
    storage: :func:`open_storage`'s storage.
    url: its URL, for messages.
    study_name: the study's name in the storage.
    space: the search space (a grid: ``GridSampler`` with ``seeds`` as the
      ``seed`` axis, when ``sampler`` is ``auto``).
    seeds: the restarts' seeds.
    seed: the sampler's seed.
    sampler: ``auto``, ``tpe`` or ``random``.
    metric: the objective (a loss is minimized).
    settings: what a rerun must share, recorded on first open.

  Returns:
    the ``optuna.Study``.

  Raises:
    errors.ParamsError: the study holds a search with other ``settings``
      (each difference listed, e.g. ``--warmup_proportion=0.1 (the search)
      vs 0.2 (now)``; argument: the first differing flag).
  """
  import optuna  # pylint: disable=g-import-not-at-top
  study = optuna.create_study(storage=storage, study_name=study_name,
                              sampler=_sampler(space, seeds, seed, sampler),
                              direction=space_lib.direction(metric), load_if_exists=True)
  old = study.user_attrs.get("settings")
  if old is None:
    study.set_user_attr("settings", settings)
  elif old != settings:
    raise errors.ParamsError(
        "%s holds a search with other settings: %s. Rerun with the search's flags "
        "to resume it, or use a new --output_dir (or --study_name)" % (
            url, "; ".join(differences(old, settings))),
        argument=differences(old, settings, names_only=True)[0])
  return study


def find_trial(study, number: int):
  """The stored record of trial ``number`` (an ``optuna.trial.FrozenTrial``,
  live or finished).

  Raises:
    KeyError: the study has no such trial.
  """
  for t in study.get_trials(deepcopy=False):
    if t.number == number:
      return t
  raise KeyError("the study has no trial %d" % number)


def stored_trial(study, trial):
  """A live trial's stored record (an ``optuna.trial.FrozenTrial``: its
  ``system_attrs`` say whether it is a retry, a queued restart or a grid
  point). Optuna's ``Trial`` shows no ``system_attrs``; its record is read
  by the trial's number.

  Raises:
    KeyError: ``trial`` is not a trial of ``study``.
  """
  return find_trial(study, trial.number)


def suggest(trial, space: space_lib.SearchSpace, params_cls) -> dict:
  """The trial's value of each hyperparameter (by flag name): a choice of a
  list, an int or float of a range (as the flag's type)."""
  types = space_lib.field_types(params_cls)
  out = {}
  for name, v in sorted(space.params.items()):
    if isinstance(v, list):
      out[name] = trial.suggest_categorical(name, v)
    elif types[name] is int:
      out[name] = trial.suggest_int(name, int(v.low), int(v.high), log=v.log,
                                    step=int(v.step or 1))
    else:
      out[name] = trial.suggest_float(name, v.low, v.high, log=v.log,
                                      step=None if v.log else v.step)
  return out


def prune(message: str) -> None:
  """Ends the running trial as pruned (not failed, not retried).

  Raises:
    optuna.TrialPruned: always.
  """
  import optuna  # pylint: disable=g-import-not-at-top
  raise optuna.TrialPruned(message)


def is_pruned(error: BaseException) -> bool:
  """Whether ``error`` is :func:`prune`'s."""
  import optuna  # pylint: disable=g-import-not-at-top
  return isinstance(error, optuna.TrialPruned)


def requeue(study, number: int) -> None:
  """Queues the failed trial ``number`` again (same parameters, same run
  directory: the next run resumes it from its newest checkpoint).

  Raises:
    KeyError: the study has no such trial.
  """
  retry_callback(None)(study, find_trial(study, number))


def optimize_one(study, objective: Callable, callback: Callable) -> None:
  """Runs one trial of ``objective`` (its errors recorded, not raised;
  ``KeyboardInterrupt`` raised), then ``callback(study, frozen_trial)``."""
  study.optimize(objective, n_trials=1, catch=(Exception,), callbacks=[callback],
                 gc_after_trial=True)


def fail_stale(study) -> None:
  """Fails (and, by the storage's callback, re-queues) the trials whose
  heartbeat stopped."""
  import optuna  # pylint: disable=g-import-not-at-top
  optuna.storages.fail_stale_trials(study)


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def dead_process_error(trial) -> Optional[str]:
  """Why ``trial`` (an ``optuna.trial.FrozenTrial``) failed when its process
  died (``its process (pid N) died; retried``), or None: a failed trial that
  recorded no error of its own but a ``worker`` was failed by another
  process (:func:`fail_dead_local_trials`, or its heartbeat stopped)."""
  worker = trial.user_attrs.get("worker")
  if trial.state.name != "FAIL" or "error" in trial.user_attrs or not worker:
    return None
  return "its process (pid %s) died; retried" % worker.get("pid")


def fail_dead_local_trials(study, storage, max_retries: int, run_index: Callable,
                           print_fn: Callable[[str], None]) -> None:
  """Fails and re-queues the RUNNING trials of dead processes on this host
  (their ``worker`` attribute names this host and a pid that is gone), at
  once rather than after two missed heartbeats.

  The trial is failed through ``Study.tell`` of a second study object on
  ``storage`` whose sampler is Optuna's ``RandomSampler``: the search's
  ``GridSampler`` ends ``optimize`` from its ``after_trial`` when the grid is
  used up, which ``tell`` outside ``optimize`` refuses.

  Args:
    study: the search's study.
    storage: its storage (:func:`open_storage`).
    max_retries: re-runs of a trial whose process died.
    run_index: ``run_index(frozen_trial) -> int`` (its run directory's), for
      the line printed.
    print_fn: one line per trial failed here.
  """
  import optuna  # pylint: disable=g-import-not-at-top
  host = socket.gethostname()
  teller = None
  for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
    w = t.user_attrs.get("worker")
    if not w or w.get("host") != host or w.get("pid") == os.getpid() \
        or _pid_alive(int(w["pid"])):
      continue
    if teller is None:
      teller = optuna.load_study(study_name=study.study_name, storage=storage,
                                 sampler=optuna.samplers.RandomSampler())
    try:
      failed = teller.tell(t.number, state=optuna.trial.TrialState.FAIL)
    except (ValueError, RuntimeError):  # another process failed it first
      continue
    print_fn("trial %d: its process (pid %s) died; resuming it" % (run_index(t), w["pid"]))
    retry_callback(max_retries)(study, failed)
