"""Task kinds: one record per kind, every other table a lookup.

A *task kind* is what a run directory, a preset, an export or a search is
about: ``classifier`` (sentence and pair classification, regression,
multi-label), ``squad``, ``ner``, ``swag`` (multiple choice), and the
encoder-level kinds ``pretraining``, ``encoder``, ``features`` (every
layer's output from raw text) and ``preprocessor`` (ids from raw text).
Each kind is one :class:`TaskKind` record in :data:`KINDS`: its settings
file, tool, Hugging Face architectures, Keras model class and head spec,
task and params classes, job, serving module, outputs, export formats,
metrics. The run directory reader (:mod:`bert_tf.run_dir`), the preset
loaders, the converter, the exports and the search look the kind up here;
adding a kind is one :func:`register` call (``tests/test_task_kinds.py``
registers a stand-in kind and runs it through all of them).

transformers' shape (``models/auto/modeling_auto.py``: one mapping per task
kind), with the classes named by import path (``"module:attribute"``, read
by :func:`resolve`) so that this module imports no TensorFlow: the data
workers and the TF-only serving client may read it.

Example::

  from bert_tf import task_kinds
  kind = task_kinds.get("ner")
  kind.settings_file                 # 'ner_config.json'
  task_kinds.by_architecture("BertForTokenClassification").name   # 'ner'
  model_cls = task_kinds.resolve(kind.model_class)   # BertTokenClassifier
"""

import contextlib
import dataclasses
import importlib
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from bert_tf import errors

SAVED_MODEL = "saved_model"
LITERT = "litert"
MEDIAPIPE = "mediapipe"

# Run-kind settings files (google-research/bert has none; one per tool).
CLASSIFIER_CONFIG = "classifier_config.json"
SQUAD_CONFIG = "squad_config.json"
NER_CONFIG = "ner_config.json"
SWAG_CONFIG = "swag_config.json"
PRETRAINING_CONFIG = "pretraining_config.json"

# What any run can export beside its own head (TF Hub's split).
ENCODER_EXPORTS = ("preprocessor", "encoder", "features")


@dataclasses.dataclass(frozen=True)
class TaskKind:
  """One task kind, declared once.

  Attributes:
    name: the kind's one name (``classifier``, ``squad``, ``ner``, ``swag``,
      ``pretraining``, ``encoder``, ``features``, ``preprocessor``): the
      value of ``--task`` / ``--what`` and of a run's kind.
    description: a few words for messages and ``--help``.
    settings_file: the file a run directory of this kind holds
      (``classifier_config.json``); None for kinds that are only exports.
    tool: the tool that trains it (``run_classifier.py``), or None.
    fine_tuning: a fine-tuning kind: its settings file marks a run of this
      kind (:func:`bert_tf.run_dir.run_kinds`) and its head is its default
      export. A pretraining run is told by the absence of every such file.
    hf_architectures: the transformers classes read as this kind
      (``config.json``'s ``architectures``); the first is the one written
      (``convert_checkpoint.py --output_format=hf``).
    model_class: the Keras model class, ``"module:Class"`` (:func:`resolve`).
    head: the model's head spec (:class:`bert_tf.modeling.presets.Task`),
      ``"module:NAME"``.
    params_class, task_class, job: the tool's params dataclass, its
      :class:`bert_tf.tasks.fine_tuning.FineTuningTask` and its
      :mod:`bert_tf.jobs` function (``"module:name"``); None where the kind
      is not trained by a fine-tuning tool (no search).
    serving: the serving module class that every export format consumes
      (``"module:Class"``, in :mod:`bert_tf.export`).
    serves: what that module serves: ``"model"`` (the run's task model),
      ``"encoder"`` (its encoder) or ``"text"`` (no weights: ids from text).
    exports: the kinds a run (or preset) of this kind exports, its own
      default first (``--what``).
    formats: export format -> None (written) or the one-line reason it is
      refused (``{"saved_model": None, "litert": "..."}``); a format not
      listed is refused with :data:`NOT_WRITTEN`.
    outputs: the ``serving_default`` outputs of the export, for docs and
      checks (the serving module is the truth).
    metadata_name: the ``export`` value of an export's metadata file (kept
      as clients read it: ``tagging`` for ``ner``, ...); default ``name``.
    selection_metric: the dev metric a search selects on by default; a
      task may refine it by its data (GLUE's MCC, SQuAD v2.0's ``best_f1``).
    reported_metrics: the dev metrics the task reports (the same caveat).
  """
  name: str
  description: str
  settings_file: Optional[str] = None
  tool: Optional[str] = None
  fine_tuning: bool = False
  hf_architectures: Tuple[str, ...] = ()
  model_class: Optional[str] = None
  head: Optional[str] = None
  params_class: Optional[str] = None
  task_class: Optional[str] = None
  job: Optional[str] = None
  serving: Optional[str] = None
  serves: str = "model"
  exports: Tuple[str, ...] = ()
  formats: Mapping[str, Optional[str]] = dataclasses.field(
      default_factory=lambda: {SAVED_MODEL: None})
  outputs: Tuple[str, ...] = ()
  metadata_name: Optional[str] = None
  selection_metric: Optional[str] = None
  reported_metrics: Tuple[str, ...] = ()

  @property
  def export_name(self) -> str:
    """The ``export`` value of the metadata file (``metadata_name`` or ``name``)."""
    return self.metadata_name or self.name

  @property
  def searchable(self) -> bool:
    """A search can run trials of this kind (it has params, task and job)."""
    return bool(self.params_class and self.task_class and self.job)

  def refusal(self, format: str) -> Optional[str]:  # pylint: disable=redefined-builtin
    """Why ``format`` is not written for this kind, or None when it is."""
    if format not in self.formats:
      return NOT_WRITTEN % (format, self.name, ", ".join(
          k.name for k in KINDS.values() if k.formats.get(format, "") is None))
    return self.formats[format]

  def attribute(self, field: str) -> Any:
    """The object a ``"module:name"`` field names (:func:`resolve`).

    Raises:
      ParamsError: the field is empty for this kind.
    """
    path = getattr(self, field)
    if not path:
      raise errors.ParamsError("the %s kind has no %s" % (self.name, field),
                               argument="task")
    return resolve(path)


NOT_WRITTEN = "--format=%s does not write the %s kind (it writes %s)"

_CLASSIFIER_OUTPUTS = ("probabilities", "logits", "label_ids", "labels", "num_windows",
                       "truncated")

KINDS: Dict[str, TaskKind] = {}


def register(kind: TaskKind) -> TaskKind:
  """Adds ``kind`` to :data:`KINDS` (replacing one of the same name).

  Returns:
    ``kind``.

  Raises:
    ParamsError: a kind whose settings file or architectures another kind
      already claims.
  """
  for other in KINDS.values():
    if other.name == kind.name:
      continue
    if kind.settings_file and other.settings_file == kind.settings_file:
      raise errors.ParamsError("task kind %s: settings file %s is the %s kind's" % (
          kind.name, kind.settings_file, other.name), argument="task")
    shared = set(kind.hf_architectures) & set(other.hf_architectures)
    if shared:
      raise errors.ParamsError("task kind %s: architecture %s is the %s kind's" % (
          kind.name, sorted(shared)[0], other.name), argument="task")
  KINDS[kind.name] = kind
  return kind


def unregister(name: str) -> None:
  """Removes the kind ``name`` (a no-op when absent)."""
  KINDS.pop(name, None)


@contextlib.contextmanager
def registered(kind: TaskKind) -> Iterator[TaskKind]:
  """``with registered(kind):`` the kind is in :data:`KINDS`, then gone
  (any kind it replaced comes back)."""
  old = KINDS.get(kind.name)
  register(kind)
  try:
    yield kind
  finally:
    unregister(kind.name)
    if old is not None:
      KINDS[old.name] = old


def names(predicate=None) -> List[str]:
  """The kinds' names in registration order (those ``predicate(kind)`` keeps)."""
  return [k.name for k in KINDS.values() if predicate is None or predicate(k)]


def get(name: str, argument: str = "task") -> TaskKind:
  """The kind ``name``.

  Raises:
    ParamsError: no such kind (the message lists them; ``argument`` names
      the flag).
  """
  try:
    return KINDS[name]
  except KeyError:
    raise errors.ParamsError("%s is not a task kind: one of %s" % (
        name, ", ".join(KINDS)), argument=argument) from None


def fine_tuning_kinds() -> List[TaskKind]:
  """The kinds whose settings file marks a run directory (``fine_tuning``)."""
  return [k for k in KINDS.values() if k.fine_tuning]


def searchable_kinds() -> List[TaskKind]:
  """The kinds a hyperparameter search runs (:attr:`TaskKind.searchable`)."""
  return [k for k in KINDS.values() if k.searchable]


def settings_files() -> Tuple[str, ...]:
  """Every settings file a run directory may hold, fine-tuning kinds first."""
  kinds = fine_tuning_kinds() + [k for k in KINDS.values() if not k.fine_tuning]
  return tuple(k.settings_file for k in kinds if k.settings_file)


def by_settings_file(filename: str) -> Optional[TaskKind]:
  """The kind whose settings file is ``filename``, or None."""
  return next((k for k in KINDS.values() if k.settings_file == filename), None)


def by_architecture(architecture: str) -> Optional[TaskKind]:
  """The kind that reads transformers' ``architecture``, or None."""
  return next((k for k in KINDS.values() if architecture in k.hf_architectures), None)


def by_model_class(class_name: str) -> Optional[TaskKind]:
  """The kind whose Keras model class is named ``class_name``, or None."""
  return next((k for k in KINDS.values()
               if k.model_class and k.model_class.rsplit(":", 1)[-1] == class_name), None)


def resolve(path: str) -> Any:
  """The object named ``"package.module:attribute"`` (imported on use).

  Raises:
    ParamsError: a path without ``:``.
    ImportError / AttributeError: no such module or attribute.
  """
  module, sep, attribute = path.partition(":")
  if not sep:
    raise errors.ParamsError("%r: expected 'module:attribute'" % path, argument="task")
  obj = importlib.import_module(module)
  for part in attribute.split("."):
    obj = getattr(obj, part)
  return obj


_M = "bert_tf.modeling."
_T = "bert_tf.tasks."
_X = "bert_tf.export."

register(TaskKind(
    "classifier", "sentence or sentence-pair classification, regression, multi-label",
    settings_file=CLASSIFIER_CONFIG, tool="run_classifier.py", fine_tuning=True,
    hf_architectures=("BertForSequenceClassification",),
    model_class=_M + "models:BertClassifier", head=_M + "models:CLASSIFIER_TASK",
    params_class=_T + "classification:ClassifierParams",
    task_class=_T + "classification:ClassificationTask", job="bert_tf.jobs:run_classifier",
    serving=_X + "saved_model:ClassifierServing",
    exports=("classifier",) + ENCODER_EXPORTS,
    formats={SAVED_MODEL: None, LITERT: None, MEDIAPIPE: None},
    outputs=_CLASSIFIER_OUTPUTS,
    selection_metric="eval_accuracy", reported_metrics=("eval_accuracy", "eval_loss")))
register(TaskKind(
    "squad", "extractive question answering (SQuAD v1.1 / v2.0)",
    settings_file=SQUAD_CONFIG, tool="run_squad.py", fine_tuning=True,
    hf_architectures=("BertForQuestionAnswering",),
    model_class=_M + "models:BertQuestionAnswerer", head=_M + "models:QUESTION_ANSWERER_TASK",
    params_class=_T + "squad:SquadParams", task_class=_T + "squad:QuestionAnsweringTask",
    job="bert_tf.jobs:run_squad", serving=_X + "squad:SquadServing",
    exports=("squad",) + ENCODER_EXPORTS,
    formats={SAVED_MODEL: None,
             LITERT: "SQuAD's doc-stride windows, offsets and best-span choice are "
                     "ragged string ops without LiteRT kernels; export --what=encoder "
                     "and run the windows in the app"},
    outputs=("answer", "start_char", "end_char", "score"),
    selection_metric="f1", reported_metrics=("exact_match", "f1")))
register(TaskKind(
    "ner", "token tagging (named entities, CoNLL)",
    settings_file=NER_CONFIG, tool="run_ner.py", fine_tuning=True,
    hf_architectures=("BertForTokenClassification",),
    model_class=_M + "tagging:BertTokenClassifier", head=_M + "tagging:TAGGING_TASK",
    params_class=_T + "tagging:NerParams", task_class=_T + "tagging:TokenTaggingTask",
    job="bert_tf.jobs:run_ner", serving=_X + "tagging:TaggingServing",
    exports=("ner",) + ENCODER_EXPORTS,
    formats={SAVED_MODEL: None, LITERT: None},
    outputs=("words", "word_start_char", "word_end_char", "tags", "num_words",
             "truncated", "entity_type", "entity_text", "entity_start_char",
             "entity_end_char", "num_entities"),
    metadata_name="tagging",
    selection_metric="eval_f1",
    reported_metrics=("eval_f1", "eval_precision", "eval_recall", "eval_accuracy",
                      "eval_loss")))
register(TaskKind(
    "swag", "multiple choice (SWAG layout)",
    settings_file=SWAG_CONFIG, tool="run_swag.py", fine_tuning=True,
    hf_architectures=("BertForMultipleChoice",),
    model_class=_M + "multiple_choice:BertMultipleChoice",
    head=_M + "multiple_choice:MULTIPLE_CHOICE_TASK",
    params_class=_T + "swag:SwagParams", task_class=_T + "swag:MultipleChoiceTask",
    job="bert_tf.jobs:run_swag", serving=_X + "multiple_choice:MultipleChoiceServing",
    exports=("swag",) + ENCODER_EXPORTS,
    formats={SAVED_MODEL: None, LITERT: None},
    outputs=("probabilities", "logits", "label_id"),
    metadata_name="multiple_choice",
    selection_metric="eval_accuracy", reported_metrics=("eval_accuracy", "eval_loss")))
register(TaskKind(
    "pretraining", "masked-LM and next-sentence pretraining",
    settings_file=PRETRAINING_CONFIG, tool="run_pretraining.py",
    hf_architectures=("BertForPreTraining", "BertForMaskedLM"),
    model_class=_M + "models:BertPretrainer", head=_M + "models:PRETRAINER_TASK",
    exports=("encoder", "features", "preprocessor")))
register(TaskKind(
    "encoder", "the encoder on token ids (TF Hub's BERT encoder)",
    hf_architectures=("BertModel",),
    model_class=_M + "encoder:BertEncoder", head=_M + "presets:ENCODER",
    serving=_X + "saved_model:EncoderServing", serves="encoder",
    exports=("encoder", "features", "preprocessor"),
    formats={SAVED_MODEL: None, LITERT: None},
    outputs=("sequence_output", "pooled_output", "encoder_outputs")))
register(TaskKind(
    "features", "every layer's output from raw text (extract_features.py)",
    serving=_X + "features:FeaturesServing", serves="encoder",
    formats={SAVED_MODEL: None, LITERT: None, MEDIAPIPE: None},
    outputs=("encoder_outputs", "sequence_output", "pooled_output", "input_mask",
             "input_ids", "segment_ids"),
    metadata_name="encoder_all_layers"))
register(TaskKind(
    "preprocessor", "token ids from raw text (TF Hub's BERT preprocessor)",
    serving=_X + "saved_model:PreprocessorServing", serves="text",
    formats={SAVED_MODEL: None, LITERT: None},
    outputs=("input_word_ids", "input_mask", "input_type_ids")))
