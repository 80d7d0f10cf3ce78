"""Every error bert_tf raises on bad input: one module, at the bottom layer.

All are ``ValueError`` subclasses (so ``except ValueError`` keeps working)
and derive from :class:`BertTfError`. A library error says what is wrong
with which file (and line or record) or which argument; it may carry the
argument's name in ``argument`` so that a command-line tool can word it as
the flag (``--max_seq_length``), see :func:`bert_tf.cli.fail`.

Example:
  >>> from bert_tf import errors
  >>> try:
  ...   raise errors.InputError("no text in corpus.txt", argument="input_file")
  ... except errors.BertTfError as e:
  ...   print(e.argument, "|", e)
  input_file | no text in corpus.txt
"""

from __future__ import annotations


class BertTfError(ValueError):
  """Base class: bad input to bert_tf (a file, a line, an argument).

  Args:
    message: what is wrong, naming the file / line / argument.
    argument: optional name of the argument (= the tool's flag, without
      ``--``) the error is about; tools print it as ``--argument``.
  """

  def __init__(self, message: str = "", *args, argument: str | None = None):
    super().__init__(message, *args)
    self.argument = argument


class ConfigError(BertTfError):
  """A ``bert_config.json`` (or HF ``config.json``) is missing, unreadable or
  inconsistent."""


class VocabError(BertTfError):
  """A vocab file is missing, unreadable or lacks a required token."""


class CheckpointError(BertTfError):
  """A checkpoint is missing, unreadable, or does not fit the model."""


class CorruptCheckpointError(CheckpointError):
  """A checkpoint's files are truncated or unreadable (not a model mismatch).

  ``path`` is the checkpoint prefix, so a resume can skip to an older one.
  """

  def __init__(self, message: str, path: str = "", **kwargs):
    super().__init__(message, **kwargs)
    self.path = path


class InputError(BertTfError):
  """Bad input files or arguments for data creation or reading."""


class RecordError(InputError):
  """A pretraining TFRecord that does not parse, or does not fit the flags."""


class TaskError(BertTfError):
  """Unknown task, or a data file that does not fit the task's layout."""


class VocabBuildError(BertTfError):
  """Bad arguments or input for vocabulary learning."""


class FineTunedDirError(BertTfError):
  """A fine-tuned run directory that is missing a file or a checkpoint."""


class ParamsError(BertTfError):
  """Inconsistent run parameters (batch sizes, steps, lengths, dtypes)."""


class SearchError(BertTfError):
  """A hyperparameter search that produced no result (every trial failed)."""


def first_line(error: BaseException, default: str = "") -> str:
  """The first non-blank line of ``str(error)`` (a library's multi-line
  message kept to one line), else ``default`` (the error's class name when
  empty)."""
  for line in str(error).splitlines():
    if line.strip():
      return line
  return default or type(error).__name__
