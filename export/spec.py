"""What an export serves, typed: one :class:`ServingSpec` per export.

Every export (any task kind, any format) is a serving module
(:mod:`bert_tf.export.serving`) built from a model, a preprocessor and a
:class:`ServingSpec`: the task kind, labels and problem type, pair input,
lengths, windows. The spec is built once, from a run directory's settings
file (:meth:`ServingSpec.from_run_config`) or from an in-memory model
(:meth:`ServingSpec.from_model`), and every format's writer reads the same
spec. What is particular to a kind (its defaults, which settings-file keys
it reads, its checks) is its serving module class's (``defaults``,
``settings_from_run``, ``settings_from_model``, ``check_spec``), found by
the kind's :mod:`bert_tf.task_kinds` record: each default lives once, and
a new kind needs no edit here.

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


class SpecError(errors.ParamsError):
  """A serving spec that cannot be served (one line naming the setting)."""


def module_class(kind: str) -> type:
  """The serving module class of ``kind`` (its record's ``serving``).

  Raises:
    ParamsError: no such kind (``argument="what"``); SpecError: a kind
      without an export of its own (it lists the kind's exports).
  """
  record = task_kinds.get(kind, argument="what")
  if not record.serving:
    raise SpecError("the %s kind has no export of its own; export one of %s" % (
        kind, ", ".join(record.exports)), argument="what")
  return record.attribute("serving")


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
    doc_stride, max_windows: windows of a text longer than one (NER, SQuAD).
    settings: the kind's other settings (its module's ``extra_settings``:
      SQuAD's answer settings), a sorted tuple of ``(key, value)``.
    do_lower_case, preserve_unused_tokens: the tokenizer (recorded).
    warmup: rows of input strings for the warm-up requests (a run's own
      examples, its settings file's ``warmup_examples``); () for the
      module's own.
    long_document: a classifier's
      :class:`~bert_tf.modeling.long_document.LongDocument` (how a text
      longer than one window is read; None: ``head``, the original's).
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
  settings: Tuple[Tuple[str, object], ...] = ()
  do_lower_case: Optional[bool] = None
  preserve_unused_tokens: bool = False
  warmup: Tuple[Tuple[str, ...], ...] = ()
  long_document: Optional[object] = None

  @classmethod
  def create(cls, kind: str, max_seq_length: int, **settings) -> "ServingSpec":
    """A spec of ``kind`` with its module's ``defaults`` for the settings
    not given (None counts as not given).

    Args:
      kind: a task kind name; max_seq_length: tokens per window.
      **settings: any field of :class:`ServingSpec`, and the keys of the
        kind's module's ``extra_settings`` (collected into ``settings``).

    Raises:
      SpecError: a kind without an export, a setting below its minimum
        (``doc_stride``, ``max_windows``, ``num_choices`` >= 1), an unknown
        problem type, the kind's own checks (a classifier without labels,
        NER tags without ``O``).
    """
    module = module_class(kind)
    values = dict(module.defaults)
    values.update({k: v for k, v in settings.items() if v is not None})
    extra = tuple(sorted((k, values.pop(k)) for k in module.extra_settings if k in values))
    if values.get("labels") is not None:
      values["labels"] = tuple(str(l) for l in values["labels"])
    if values.get("warmup"):
      values["warmup"] = tuple(tuple(str(t) for t in row) for row in values["warmup"])
    spec = cls(kind=kind, max_seq_length=int(max_seq_length), settings=extra, **values)
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
    module_class(self.kind).check_spec(self)

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

  def setting(self, name: str):
    """One of the kind's ``settings`` (KeyError when absent)."""
    return dict(self.settings)[name]

  def replace(self, **changes) -> "ServingSpec":
    """A copy with ``changes`` (checked)."""
    spec = dataclasses.replace(self, **changes)
    spec.check()
    return spec

  @classmethod
  def from_run_config(cls, kind: str, run_config: Mapping, max_seq_length: int,
                      do_lower_case: Optional[bool] = None,
                      preserve_unused_tokens: bool = False) -> "ServingSpec":
    """The spec of a run's own export, from its settings file's dict (the
    kind's module reads its keys: ``settings_from_run``).

    Args:
      kind: the run's kind (its settings file's, :func:`bert_tf.run_dir.run_kinds`).
      run_config: the settings file as read (``classifier_config.json``:
        ``labels``, ``is_pair``, ``is_regression``, ``multi_label``; ...).
      max_seq_length: the export's length (the run's unless overridden).
      do_lower_case, preserve_unused_tokens: the run's tokenizer.

    Raises:
      SpecError: see :meth:`create`.
    """
    settings = {"task_name": run_config.get("task_name") or "",
                "do_lower_case": do_lower_case,
                "preserve_unused_tokens": bool(preserve_unused_tokens)}
    settings.update(module_class(kind).settings_from_run(run_config))
    return cls.create(kind, max_seq_length, **settings)

  @classmethod
  def from_model(cls, kind: str, model, preprocessor, *, task_name: str = "",
                 is_pair: bool = False, num_choices: Optional[int] = None,
                 **settings) -> "ServingSpec":
    """The spec of an in-memory model (a preset): labels and problem type
    from the model (the kind's module's ``settings_from_model``), lengths
    and casing from ``preprocessor``.

    Raises:
      SpecError: see :meth:`create` (a token classifier without tag names).
    """
    settings.update(module_class(kind).settings_from_model(
        model, is_pair=is_pair, num_choices=num_choices))
    return cls.create(kind, preprocessor.max_seq_length, task_name=task_name,
                      do_lower_case=preprocessor.do_lower_case,
                      preserve_unused_tokens=bool(preprocessor.preserve_unused_tokens),
                      **settings)

  def metadata(self) -> dict:
    """The part of an export's metadata file every kind has (``export``,
    ``task``, ``labels``, ``is_pair``, ``max_seq_length``, casing); the
    modules add their kind's keys."""
    return {"export": self.record.export_name, "task": None,
            "labels": None if self.labels is None else list(self.labels),
            "is_pair": None, "max_seq_length": int(self.max_seq_length),
            "do_lower_case": self.do_lower_case,
            "preserve_unused_tokens": bool(self.preserve_unused_tokens)}
