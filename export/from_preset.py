"""A preset as an export's run: serve a fine-tuned model without retraining.

:func:`load_preset` reads any ``from_preset`` source (a Hugging Face
directory or ``hf://ORG/NAME[@REVISION]`` in the local cache, an original
``bert_model.ckpt`` / fine-tuned ``model.ckpt-N``, one of our run
directories, a ``.keras`` file) into the :class:`bert_tf.export.fine_tuned.RunDir`
that :func:`bert_tf.export.fine_tuned.export_run` writes, so the export of
a Hub model is the same export as that of a model fine-tuned here: the
tokenizer inside, labels by name.

The task comes from the preset: a Hugging Face ``config.json``'s
``architectures`` (``BertForSequenceClassification`` -> ``classifier``,
``BertForTokenClassification`` -> ``ner``, ``BertForQuestionAnswering`` ->
``squad``, ``BertForMultipleChoice`` -> ``swag``, ``BertModel`` /
``BertForPreTraining`` / ``BertForMaskedLM`` -> the encoder), a ``.keras``
file's model class, a run's own settings file; else ``task`` names it.
"""

import os
from typing import Optional

from bert_tf import convert
from bert_tf import errors
from bert_tf import huggingface
from bert_tf import task_kinds
from bert_tf.export import fine_tuned
from bert_tf.export import spec as spec_lib
from bert_tf.modeling import presets

# --task names -> the run kinds of bert_tf.export.fine_tuned: every
# fine-tuning kind, and the encoder (a pretraining run's export).
TASKS = dict({k.name: k.name for k in task_kinds.fine_tuning_kinds()},
             encoder=fine_tuned.PRETRAINING)
# The original run_squad.py's --max_seq_length default.
SQUAD_SEQ = 384


def _error(message: str, argument: str = "from_preset") -> errors.FineTunedDirError:
  return errors.FineTunedDirError(message, argument=argument)


def preset_kind(loader: presets.PresetLoader) -> Optional[str]:
  """The run kind of a preset, or None (cannot be told): the task of
  :func:`bert_tf.convert.preset_task`, an encoder or pretraining model
  served as the encoder (``fine_tuned.PRETRAINING``)."""
  task = convert.preset_task(loader)[0]
  return fine_tuned.PRETRAINING if task in ("encoder", "pretraining") else task


def _vocab_file(pre) -> str:
  """A file path of a preprocessor's vocab (an in-memory one written out)."""
  if pre.vocab_file:
    return pre.vocab_file
  return huggingface.vocab_file(huggingface.Tokenizer(
      tuple(pre.vocab_lines()), None, pre.do_lower_case, None, "<model>"))


def load_preset(preset: str, task: Optional[str] = None,
                max_seq_length: Optional[int] = None, is_pair: bool = False,
                num_choices: Optional[int] = None) -> fine_tuned.RunDir:
  """A preset's model and tokenizer as a :class:`~bert_tf.export.fine_tuned.RunDir`.

  Args:
    preset: any ``from_preset`` source (str).
    task: one of :data:`TASKS`, or None for the preset's own (see the
      module docstring).
    max_seq_length: tokens per input (3 .. ``max_position_embeddings``);
      default the preset's (128, or 384 for SQuAD, capped at the model's).
    is_pair: a classifier's export takes ``text_a``, ``text_b`` pairs.
    num_choices: a multiple-choice export's choices per example (default
      :attr:`defaults` of the kind's serving module).

  Returns:
    the run, model and encoder loaded (``checkpoint`` is the preset), with
    the :class:`ServingSpec` of its own export from the model (labels,
    problem type) and the preprocessor (length, casing).

  Raises:
    FineTunedDirError: the task cannot be told (pass ``--task``), an
      unknown task, a token classifier without tag names.
    CheckpointError, ConfigError, ParamsError: the preset's own (one line).
  """
  if task is not None and task not in TASKS:
    raise _error("--task=%s: one of %s" % (task, ", ".join(TASKS)), argument="task")
  try:
    return _load_preset(preset, task, max_seq_length, is_pair, num_choices)
  except errors.BertTfError as e:
    if getattr(e, "argument", None) != "preset":
      raise
    raise type(e)(str(e), argument="from_preset") from None


def _load_preset(preset, task, max_seq_length, is_pair, num_choices):
  loader = presets.get_preset_loader(preset)
  kind = TASKS[task] if task else preset_kind(loader)
  if kind is None:
    raise _error("%s: cannot tell its task (no architectures in config.json, no run "
                 "settings file); pass --task=%s" % (preset, "|".join(TASKS)), argument="task")
  config = loader.config()
  if kind == fine_tuned.PRETRAINING:
    encoder = task_kinds.get("encoder").attribute("model_class").from_preset(preset)
    vocab = loader.vocab_file()
    seq = max_seq_length or loader.max_seq_length()
    loader.check_max_seq_length(seq)
    return fine_tuned.RunDir(preset, kind, config, {}, None, encoder,
                             vocab if vocab and os.path.exists(vocab) else None,
                             loader.do_lower_case(), loader.preserve_unused_tokens(), seq, preset)
  if kind == "squad" and max_seq_length is None:
    max_seq_length = min(SQUAD_SEQ, config.max_position_embeddings)
  cls = task_kinds.get(kind).attribute("model_class")
  model = cls.from_preset(preset, preprocessor=True, max_seq_length=max_seq_length)
  pre = model.preprocessor.bert_preprocessor
  name = preset.rstrip("/").rsplit("/", 1)[-1]
  try:
    spec = spec_lib.ServingSpec.from_model(kind, model, pre, task_name=name,
                                           is_pair=is_pair, num_choices=num_choices)
  except spec_lib.SpecError as e:
    raise _error("%s: %s" % (preset, e)) from None
  run_config = {"task_name": name, "max_seq_length": pre.max_seq_length,
                "do_lower_case": pre.do_lower_case}
  return fine_tuned.RunDir(preset, kind, config, run_config, model, model.encoder,
                           _vocab_file(pre), pre.do_lower_case, pre.preserve_unused_tokens,
                           pre.max_seq_length, preset, spec)
