"""The search space of a hyperparameter search: named grids, JSON files, ranges.

Imports neither Optuna nor TensorFlow (``tools/tune.py`` defines its flags
from :class:`SearchParams`; a space is checked before anything heavy loads).

Source: BERT (Devlin et al., 2018) Appendix A.3 (:data:`PAPER`) and section
4.1 (:data:`GLUE`).

Example::

  from bert_tf.tuning import space
  s = space.load_search_space("paper", ClassifierParams)
  s.is_grid, s.grid_size()   # (True, 18)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Optional, Tuple

from bert_tf import errors
from bert_tf.params import field

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
# Fields of the task params a search sets itself (never in a search space).
NOT_SEARCHED = frozenset({"output_dir", "export_dir", "seed", "do_train",
                          "do_eval", "do_predict", "init_checkpoint",
                          "bert_config_file", "vocab_file", "data_dir"})
# Fields that change the tokenized, featurized data (read once per search):
# one search per value.
DATA_FIELDS = frozenset({"max_seq_length", "do_lower_case", "preserve_unused_tokens",
                         "doc_stride", "max_query_length", "version_2_with_negative",
                         "task_name", "labels", "label_list", "xnli_language"})
# The classifier's long-document flags (run_classifier --long_document ...):
# a search space may take the method as a dimension ({"long_document":
# ["head", "windows"]}); the other tasks read their windows their own way.
LONG_DOCUMENT_FLAGS = ("long_document", "head_tokens", "max_windows", "max_eval_windows",
                       "window_pooling")


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


def field_types(params_cls) -> dict:
  """``{field name: int/float/bool/str}`` of a params dataclass."""
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


def load_search_space(spec: str, params_cls,
                      run_settings: frozenset = frozenset()) -> SearchSpace:
  """The search space ``spec`` names, checked against the task's flags.

  Args:
    spec: ``paper``, ``glue`` or a JSON file path.
    params_cls: the task's params dataclass (its fields are the names a
      space may use).
    run_settings: fields that do not change what training computes (the
      runner's ``NOT_RECIPE``), never searched.

  A field of :data:`DATA_FIELDS` is searchable when ``params_cls`` lists it
  in a ``featurized_per_trial`` class attribute (a frozenset: its task's
  ``with_params`` featurizes the data anew for each trial).

  Returns:
    a :class:`SearchSpace` with values converted to the flags' types.

  Raises:
    errors.ParamsError (argument ``search_space``): an unreadable file,
      an unknown hyperparameter name (listing the allowed ones), an empty
      list, an invalid range (``low >= high``, log with ``low <= 0``), a
      value of the wrong type; a classifier's long-document flag
      (:data:`LONG_DOCUMENT_FLAGS`) for another task, saying whose it is.
  """
  raw, where = _read_spec(spec)
  # A params class may featurize some data fields anew for each trial
  # (FineTuningTask.with_params): those are searchable.
  types = field_types(params_cls)
  choices_of = {f.name: (f.metadata or {}).get("choices")
                for f in dataclasses.fields(params_cls)}
  per_trial = frozenset(getattr(params_cls, "featurized_per_trial", ()))
  allowed = sorted(n for n in types if n not in NOT_SEARCHED and
                   (n not in DATA_FIELDS or n in per_trial) and n not in run_settings)
  out = {}
  for name, value in raw.items():
    _check_name(name, allowed, where, params_cls.__name__)
    tp = types[name]
    if isinstance(value, list):
      out[name] = _grid_values(name, value, tp, choices_of.get(name), where)
    elif isinstance(value, dict):
      out[name] = _range(name, value, tp, where)
    else:
      raise errors.ParamsError(
          "search space %s: %s must be a list (a grid) or a range object, got %s"
          % (where, name, json.dumps(value)), argument="search_space")
  return SearchSpace(spec if spec in SEARCH_SPACES else os.path.abspath(spec), out)


def _read_spec(spec: str) -> Tuple[dict, str]:
  """``(raw, where)``: the named space's dict, or the JSON file's object, and
  the name to quote in errors.

  Raises:
    errors.ParamsError: no such name or file, not JSON, not a non-empty object.
  """
  if spec in SEARCH_SPACES:
    return SEARCH_SPACES[spec], spec
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
  return raw, spec


def _check_name(name: str, allowed: list, where: str, params_name: str = "") -> None:
  """Refuses ``seed``, a field that changes the featurized data, a
  long-document flag of a task without it, and a name that is not one of
  ``allowed`` (listed).

  Raises:
    errors.ParamsError: argument ``search_space``.
  """
  if name == "seed":
    raise errors.ParamsError("search space %s: seed is set by --num_restarts "
                             "(seed, seed+1, ...), not searched" % where,
                             argument="search_space")
  if name in LONG_DOCUMENT_FLAGS and name not in allowed:
    raise errors.ParamsError(
        "search space %s: %s is not a flag of this task (%s): it is --task=classifier's "
        "(how a text longer than one window is read); question answering, NER and "
        "multiple choice pick which window already, their own way" % (
            where, name, params_name or "its params"), argument="search_space")
  if name in DATA_FIELDS and name not in allowed:
    raise errors.ParamsError(
        "search space %s: %s changes the featurized data, which a search prepares "
        "once: run one search per value" % (where, name), argument="search_space")
  if name not in allowed:
    raise errors.ParamsError(
        "search space %s: unknown hyperparameter %r (the task's flags: %s)" % (
            where, name, ", ".join(allowed)), argument="search_space")


def _grid_values(name: str, value: list, tp: type, choices, where: str) -> list:
  """A grid's values as the flag's type, each among the flag's ``choices``.

  Raises:
    errors.ParamsError: an empty list, a value of another type or not a choice.
  """
  if not value:
    raise errors.ParamsError("search space %s: %s has no values" % (where, name),
                             argument="search_space")
  out = [_convert(name, v, tp, where) for v in value]
  if choices and any(v not in choices for v in out):
    raise errors.ParamsError("search space %s: %s values must be among %s, got %s"
                             % (where, name, ", ".join(choices), out),
                             argument="search_space")
  return out


def _range(name: str, value: dict, tp: type, where: str) -> Range:
  """A ``{"low", "high", "log", "step"}`` object of a number flag as a
  :class:`Range`.

  Raises:
    errors.ParamsError: other keys, a missing bound, a flag that is not a
      number, an empty range, a log range with ``low <= 0``, a step <= 0.
  """
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
  return r


def direction(metric: str) -> str:
  """``minimize`` for a loss, else ``maximize`` (Optuna's direction names)."""
  return "minimize" if metric.endswith("loss") else "maximize"
