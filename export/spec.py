"""What an export serves, typed: one :class:`ServingSpec` per export.

Every export (any task kind, any format) is a serving module
(:mod:`bert_tf.export.serving`) built from a model, a preprocessor and a
:class:`ServingSpec`: the task kind, labels and problem type, pair input,
lengths, windows. The spec is built once, from a run directory's settings
file (:meth:`ServingSpec.from_run_config`) or from an in-memory model
(:meth:`ServingSpec.from_model`), and every format's writer reads the same
spec, so each default lives here and nowhere else.

Model Garden's shape (``official/core/export_base.py``: one ``ExportModule``
per task, its params a config dataclass).

Example::

  from bert_tf.export import spec as spec_lib
  spec = spec_lib.ServingSpec.create("classifier", max_seq_length=128,
                                     labels=("neg", "pos"), is_pair=False)
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence, Tuple

from bert_tf import errors
from bert_tf import task_kinds

SINGLE_LABEL = "single_label_classification"
MULTI_LABEL = "multi_label_classification"
REGRESSION = "regression"
PROBLEM_TYPES = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)

# Each kind's serving defaults, the one place they are written. NER: the
# training default stride and the serving cap on windows per sentence
# (export_tagger); SQuAD: the original run_squad.py's flags and the windows
# searched per context; multiple choice: SWAG's four endings.
DEFAULTS: Mapping[str, Mapping[str, object]] = {
    "ner": {"doc_stride": 64, "max_windows": 256},
    "squad": {"doc_stride": 128, "max_windows": 100, "max_query_length": 64,
              "max_answer_length": 30, "n_best_size": 20,
              "version_2_with_negative": False, "null_score_diff_threshold": 0.0},
    "swag": {"num_choices": 4},
}
# squad_config.json's keys that the SQuAD export takes as they are.
SQUAD_SETTINGS = ("doc_stride", "max_query_length", "max_answer_length",
                  "version_2_with_negative", "null_score_diff_threshold", "n_best_size")


class SpecError(errors.ParamsError):
  """A serving spec that cannot be served (one line naming the setting)."""


@dataclasses.dataclass(frozen=True)
class ServingSpec:
  """What one export serves.

  Attributes:
    kind: a :mod:`bert_tf.task_kinds` name (``classifier``, ``squad``,
      ``ner``, ``swag``, ``encoder``, ``features``, ``preprocessor``).
    max_seq_length: tokens per window (int, 3 .. ``max_position_embeddings``).
    task_name: the run's task name (``sst-2``), recorded in the metadata.
    labels: label names in id order (classifier, ner); None for regression
      and the label-less kinds.
    problem_type: a classifier's head: :data:`SINGLE_LABEL` (softmax),
      :data:`MULTI_LABEL` (a sigmoid per label), :data:`REGRESSION`.
    is_pair: a classifier takes ``text_a`` + ``text_b``.
    num_choices: endings per context (swag).
    doc_stride, max_windows: NER's and SQuAD's windows.
    squad: SQuAD's answer settings (:data:`SQUAD_SETTINGS` but
      ``doc_stride``), a sorted tuple of ``(key, value)``.
    do_lower_case, preserve_unused_tokens: the tokenizer (recorded).
  """
  kind: str
  max_seq_length: int
  task_name: str = ""
  labels: Optional[Tuple[str, ...]] = None
  problem_type: str = SINGLE_LABEL
  is_pair: bool = False
  num_choices: Optional[int] = None
  doc_stride: Optional[int] = None
  max_windows: Optional[int] = None
  squad: Tuple[Tuple[str, object], ...] = ()
  do_lower_case: Optional[bool] = None
  preserve_unused_tokens: bool = False

  @classmethod
  def create(cls, kind: str, max_seq_length: int, **settings) -> "ServingSpec":
    """A spec of ``kind`` with :data:`DEFAULTS` for the settings not given.

    Args:
      kind: a task kind name; max_seq_length: tokens per window.
      **settings: any field of :class:`ServingSpec`, and for ``squad`` the
        keys of :data:`SQUAD_SETTINGS` (collected into ``squad``).

    Raises:
      SpecError: a kind without a serving module, a setting below its
        minimum (``doc_stride``, ``max_windows``, ``num_choices`` >= 1), an
        unknown problem type, a classifier without labels (but regression),
        NER labels without ``O``.
    """
    record = task_kinds.get(kind, argument="what")
    if not record.serving:
      raise SpecError("the %s kind has no export; export one of %s" % (
          kind, ", ".join(record.exports)), argument="what")
    values = dict(DEFAULTS.get(kind, {}))
    values.update({k: v for k, v in settings.items() if v is not None})
    squad = tuple(sorted((k, values.pop(k)) for k in SQUAD_SETTINGS
                         if k != "doc_stride" and k in values))
    if values.get("labels") is not None:
      values["labels"] = tuple(str(l) for l in values["labels"])
    spec = cls(kind=kind, max_seq_length=int(max_seq_length), squad=squad, **values)
    spec.check()
    return spec

  def check(self) -> None:
    """Raises :class:`SpecError` for settings that cannot be served."""
    for name in ("doc_stride", "max_windows", "num_choices"):
      value = getattr(self, name)
      if value is not None and int(value) < 1:
        raise SpecError("%s %s: must be at least 1" % (name, value), argument=name)
    if self.problem_type not in PROBLEM_TYPES:
      raise SpecError("problem_type %r: one of %s" % (
          self.problem_type, ", ".join(PROBLEM_TYPES)), argument="problem_type")
    if self.kind == "classifier" and not self.is_regression and not self.labels:
      raise SpecError("a classifier export: labels are required unless is_regression",
                      argument="labels")
    if self.kind == "ner" and "O" not in (self.labels or ()):
      raise SpecError("the NER export needs BIO tag names with an 'O' tag (the "
                      "labels are %s)" % (list(self.labels or ()),), argument="labels")

  @property
  def record(self) -> task_kinds.TaskKind:
    """The kind's :class:`bert_tf.task_kinds.TaskKind`."""
    return task_kinds.get(self.kind)

  @property
  def is_regression(self) -> bool:
    return self.problem_type == REGRESSION

  @property
  def multi_label(self) -> bool:
    return self.problem_type == MULTI_LABEL

  @property
  def squad_settings(self) -> dict:
    """SQuAD's answer settings and ``doc_stride`` / ``max_windows`` as a dict."""
    return dict(self.squad, doc_stride=self.doc_stride, max_windows=self.max_windows)

  def replace(self, **changes) -> "ServingSpec":
    """A copy with ``changes`` (checked)."""
    spec = dataclasses.replace(self, **changes)
    spec.check()
    return spec

  @classmethod
  def from_run_config(cls, kind: str, run_config: Mapping, max_seq_length: int,
                      do_lower_case: Optional[bool] = None,
                      preserve_unused_tokens: bool = False) -> "ServingSpec":
    """The spec of a run's own export, from its settings file's dict.

    Args:
      kind: the run's kind (its settings file's, :func:`bert_tf.run_dir.run_kinds`).
      run_config: the settings file as read (``classifier_config.json``:
        ``labels``, ``is_pair``, ``is_regression``, ``multi_label``;
        ``ner_config.json``: ``labels``, ``doc_stride``; ``swag_config.json``:
        ``num_choices``; ``squad_config.json``: :data:`SQUAD_SETTINGS`).
      max_seq_length: the export's length (the run's unless overridden).
      do_lower_case, preserve_unused_tokens: the run's tokenizer.

    Raises:
      SpecError: see :meth:`create`.
    """
    settings = {"task_name": run_config.get("task_name") or "",
                "do_lower_case": do_lower_case,
                "preserve_unused_tokens": bool(preserve_unused_tokens)}
    if kind == "classifier":
      regression = bool(run_config.get("is_regression"))
      settings.update(
          is_pair=bool(run_config.get("is_pair")),
          labels=None if regression else run_config.get("labels"),
          problem_type=REGRESSION if regression else (
              MULTI_LABEL if run_config.get("multi_label") else SINGLE_LABEL))
    elif kind == "ner":
      settings.update(labels=run_config.get("labels"),
                      doc_stride=run_config.get("doc_stride"))
    elif kind == "swag":
      settings["num_choices"] = run_config.get("num_choices")
    elif kind == "squad":
      settings.update({k: run_config[k] for k in SQUAD_SETTINGS if k in run_config})
    return cls.create(kind, max_seq_length, **settings)

  @classmethod
  def from_model(cls, kind: str, model, preprocessor, *, task_name: str = "",
                 is_pair: bool = False, num_choices: Optional[int] = None,
                 **settings) -> "ServingSpec":
    """The spec of an in-memory model (a preset): labels and problem type
    from the model (``label_names``, ``problem_type``, ``num_labels``),
    lengths and casing from ``preprocessor``.

    Raises:
      SpecError: see :meth:`create` (a token classifier without tag names).
    """
    if kind == "classifier":
      problem = getattr(model, "problem_type", None) or SINGLE_LABEL
      settings.update(is_pair=bool(is_pair), problem_type=problem,
                      labels=None if problem == REGRESSION else (
                          getattr(model, "label_names", None)
                          or [str(i) for i in range(model.num_labels)]))
    elif kind == "ner":
      settings["labels"] = getattr(model, "label_names", None)
      if not settings["labels"]:
        raise SpecError("the token classifier names no tags (id2label); the tagger "
                        "export needs BIO tag names", argument="from_preset")
    elif kind == "swag":
      settings["num_choices"] = num_choices
    return cls.create(kind, preprocessor.max_seq_length, task_name=task_name,
                      do_lower_case=preprocessor.do_lower_case,
                      preserve_unused_tokens=bool(preprocessor.preserve_unused_tokens),
                      **settings)

  def metadata(self) -> dict:
    """The spec's part of every export's metadata file (the keys clients
    read: ``export``, ``task``, ``labels``, ``is_pair``, ``max_seq_length``,
    casing, and the kind's settings)."""
    out = {"export": self.record.export_name,
           "labels": None if self.labels is None else list(self.labels),
           "max_seq_length": int(self.max_seq_length),
           "do_lower_case": self.do_lower_case,
           "preserve_unused_tokens": bool(self.preserve_unused_tokens)}
    if self.kind == "classifier":
      out.update(task=self.task_name, task_name=self.task_name, is_pair=self.is_pair,
                 is_regression=self.is_regression, multi_label=self.multi_label)
    elif self.kind in ("ner", "squad"):
      out.update(task=self.kind, is_pair=self.kind == "squad",
                 doc_stride=int(self.doc_stride), max_windows=int(self.max_windows))
    elif self.kind == "swag":
      out.update(task=self.task_name or "swag", is_pair=True,
                 num_choices=int(self.num_choices))
    else:
      out.update(task=None, is_pair=None)
    return out


def label_names(labels: Optional[Sequence]) -> Optional[Tuple[str, ...]]:
  """``labels`` as a tuple of str (None stays None)."""
  return None if labels is None else tuple(str(l) for l in labels)
