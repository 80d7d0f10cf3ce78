"""Run-parameter dataclass fields that double as command-line flags.

Each field of a params dataclass (``PretrainingParams``, ``ClassifierParams``,
:class:`bert_tf.runner.RunnerParams`) carries its flag's help text (and its
choices) in the field metadata; ``tools/_common.py`` defines the absl flags
from the dataclass and builds the dataclass from the parsed flags, so names
and defaults live in one place.

Example:
  >>> import dataclasses
  >>> from bert_tf import params
  >>> @dataclasses.dataclass
  ... class P:
  ...   max_seq_length: int = params.field(128, "Maximum length in tokens.")
  >>> dataclasses.fields(P)[0].metadata["help"]
  'Maximum length in tokens.'
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence


def field(default: Any = dataclasses.MISSING, help: str = "",  # pylint: disable=redefined-builtin
          choices: Optional[Sequence[str]] = None, flag: bool = True) -> Any:
  """A dataclass field with flag metadata.

  Args:
    default: the default (also the flag's default); omit for a required field.
    help: the flag's help text.
    choices: allowed string values (an enum flag).
    flag: False for a field that is not a command-line flag.

  Returns:
    a ``dataclasses.field``.
  """
  meta = {"help": help, "choices": tuple(choices) if choices else None,
          "flag": flag}
  if default is dataclasses.MISSING:
    return dataclasses.field(metadata=meta)
  return dataclasses.field(default=default, metadata=meta)
