"""Export formats: each one the ops its graphs run and a writer.

A format (:class:`Format`) turns a task's serving module
(:mod:`bert_tf.export.serving`, one per task kind) into files under
``<export_dir>/<version>/``: it gives the module the ops it can run
(``ops``) and writes the result (``write``), with the options it honours.
:data:`FORMATS` holds them: ``saved_model`` (TF Serving;
:func:`bert_tf.export.base.write_module`), ``litert`` (a ``.tflite``
with the tokenizer inside; :mod:`bert_tf.export.litert`, imported on use)
and ``mediapipe`` (a ``.tflite`` that MediaPipe Tasks' TextClassifier /
TextEmbedder run, the tokenizer in its metadata;
:mod:`bert_tf.export.mediapipe`, imported on use).
Whether a task kind is written in a format is its
:class:`bert_tf.task_kinds.TaskKind` ``formats`` entry (its one-line
refusal otherwise). A new format is one :class:`Format` and one entry.

Example::

  from bert_tf.export import formats
  path = formats.write("litert", spec, model, preprocessor, "exports/sst2",
                       quantize="dynamic_int8")
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Tuple

from bert_tf import errors
from bert_tf import task_kinds
from bert_tf.export import base
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib


class FormatError(errors.FineTunedDirError):
  """An export format or option that cannot be honoured (one line)."""


@dataclasses.dataclass(frozen=True)
class Format:
  """One export format.

  Attributes:
    name: ``--format`` value.
    ops: ``(preprocessor, **options) -> ops`` for the serving module.
    write: ``(module, export_dir, version, **options) -> version path``.
    options: the options it honours beside the defaults (``xla``,
      ``dtype``; ``quantize``; ``embedding``, ``dynamic_length``), each
      ``(name, default)``.
    check: ``(kind, **options) -> None``, refusing before any work.
    ops_options: the options that go to ``ops`` (the rest go to ``write``).
    check_spec: ``(spec, vocab_lines) -> None``, refusing an export's
      settings (pairs, regression, casing, the vocab) before the model is
      traced; None where the kind's check is enough.
  """
  name: str
  ops: Callable
  write: Callable
  options: Tuple[Tuple[str, object], ...] = ()
  check: Optional[Callable] = None
  ops_options: Tuple[str, ...] = ()
  check_spec: Optional[Callable] = None


def _saved_model_ops(preprocessor, dtype: str = "float32", xla: bool = False):
  return serving.GraphOps(preprocessor, dtype=dtype, xla=xla)


def _saved_model_write(module, export_dir, version, **unused):
  del unused
  return base.write_module(module, export_dir, version)


def _saved_model_check(kind: str, dtype: str = "float32", xla: bool = False) -> None:
  if xla and kind != "classifier":
    raise FormatError("--xla: only the classifier export has an XLA-compiled "
                      "body (this is --what=%s)" % kind, argument="xla")
  if dtype not in serving.SERVING_DTYPES:
    raise FormatError("--serving_dtype=%s: one of %s" % (
        dtype, ", ".join(serving.SERVING_DTYPES)), argument="serving_dtype")
  if dtype != "float32" and kind != "classifier":
    raise FormatError("--serving_dtype=%s: only the classifier export serves in "
                      "another dtype (this is --what=%s)" % (dtype, kind),
                      argument="serving_dtype")


def _litert():
  # tf.lite and tensorflow-text's kernels: imported only for this format.
  from bert_tf.export import litert  # pylint: disable=g-import-not-at-top
  return litert


def _mediapipe():
  # tf.lite, and MediaPipe on use: imported only for this format.
  from bert_tf.export import mediapipe  # pylint: disable=g-import-not-at-top
  return mediapipe


FORMATS: Dict[str, Format] = {
    task_kinds.SAVED_MODEL: Format(
        task_kinds.SAVED_MODEL, _saved_model_ops, _saved_model_write,
        (("xla", False), ("dtype", "float32")), _saved_model_check,
        ops_options=("xla", "dtype")),
    task_kinds.LITERT: Format(
        task_kinds.LITERT, lambda pre: _litert().LiteOps(pre),
        lambda module, export_dir, version, quantize="none": _litert().write(
            module, export_dir, version, quantize),
        (("quantize", "none"),),
        lambda kind, quantize="none": _litert().check_options(kind, quantize)),
    task_kinds.MEDIAPIPE: Format(
        task_kinds.MEDIAPIPE,
        lambda pre, **options: _mediapipe().MediaPipeOps(pre, **options),
        lambda module, export_dir, version, quantize="none": _mediapipe().write(
            module, export_dir, version, quantize),
        (("quantize", "none"), ("embedding", "mean"), ("dynamic_length", False)),
        lambda kind, **options: _mediapipe().check_options(kind, **options),
        ops_options=("embedding", "dynamic_length"),
        check_spec=lambda spec, vocab_lines: _mediapipe().check_spec(spec, vocab_lines)),
}


def get(name: str) -> Format:
  """The format ``name``.

  Raises:
    FormatError: no such format (``argument="format"``).
  """
  if name not in FORMATS:
    raise FormatError("format %r: one of %s" % (name, ", ".join(sorted(FORMATS))),
                      argument="format")
  return FORMATS[name]


def check(name: str, kind: str, **options) -> Dict[str, object]:
  """Refuses, before any work, a kind the format does not write or an
  option it does not honour; returns the format's options (defaults filled).

  Args:
    name: a format of :data:`FORMATS`; kind: a task kind name.
    **options: ``xla``, ``dtype``, ``quantize``, ``embedding``,
      ``dynamic_length`` (those left at their defaults may be passed to any
      format).

  Raises:
    FormatError: unknown format, an option of another format set, the
      kind refused (its record's reason).
  """
  fmt = get(name)
  own = dict(fmt.options)
  defaults = {k: v for f in FORMATS.values() for k, v in f.options}
  for key, value in options.items():
    if key not in own and value != defaults.get(key):
      raise FormatError(_OTHER_FORMAT.get((name, key), "--%s is not an option of "
                                          "--format=%s" % (key, name)),
                        argument=_FLAG.get(key, key))
  own.update({k: v for k, v in options.items() if k in own})
  reason = task_kinds.get(kind, argument="what").refusal(name)
  if reason and fmt.check is None:
    raise FormatError("--format=%s --what=%s: %s" % (name, kind, reason), argument="format")
  if fmt.check is not None:
    fmt.check(kind, **own)
  return own


def check_spec(name: str, spec: spec_lib.ServingSpec, vocab_lines=None) -> None:
  """Refuses, before the model is traced (or, from a run directory's files,
  loaded), an export whose settings the format cannot serve: its
  ``check_spec`` hook (MediaPipe: sentence pairs, regression, a cased
  model, a vocab its tokenizer reads differently); nothing for the others.

  Args:
    name: a format of :data:`FORMATS`; spec: the export's :class:`ServingSpec`.
    vocab_lines: the vocab in id order (None: not checked).

  Raises:
    FormatError: unknown format; the hook's refusal (a BertTfError).
  """
  fmt = get(name)
  if fmt.check_spec is not None:
    fmt.check_spec(spec, vocab_lines)


_FLAG = {"dtype": "serving_dtype"}
_SAVED_MODEL_OPTIONS = ("--xla / --serving_dtype are SavedModel options; use "
                        "--quantize=dynamic_int8|float16")
_OTHER_FORMAT = {
    (task_kinds.SAVED_MODEL, "quantize"): "--quantize: only --format=litert quantizes "
                                          "(and --format=mediapipe)",
    (task_kinds.SAVED_MODEL, "embedding"): "--embedding is --format=mediapipe's "
                                           "(TextEmbedder's output)",
    (task_kinds.SAVED_MODEL, "dynamic_length"): "--dynamic_length is --format=mediapipe's",
    (task_kinds.LITERT, "embedding"): "--embedding is --format=mediapipe's "
                                      "(TextEmbedder's output)",
    (task_kinds.LITERT, "dynamic_length"): "--dynamic_length is --format=mediapipe's",
    (task_kinds.MEDIAPIPE, "xla"): "--format=mediapipe: " + _SAVED_MODEL_OPTIONS,
    (task_kinds.MEDIAPIPE, "dtype"): "--format=mediapipe: " + _SAVED_MODEL_OPTIONS,
    (task_kinds.LITERT, "xla"): "--format=litert: --xla / --serving_dtype are SavedModel "
                                "options; use --quantize=dynamic_int8|float16",
    (task_kinds.LITERT, "dtype"): "--format=litert: --xla / --serving_dtype are SavedModel "
                                  "options; use --quantize=dynamic_int8|float16",
}


def write(name: str, spec: spec_lib.ServingSpec, model, preprocessor, export_dir: str,
          version: Optional[int] = None, **options) -> str:
  """Writes ``spec``'s export in format ``name``; returns the version path.

  Args:
    name: a format of :data:`FORMATS`.
    spec: the :class:`ServingSpec`.
    model: what the kind serves (its record's ``serves``: the task model,
      the encoder, or None for ``preprocessor``).
    preprocessor: the :class:`BertPreprocessor` (None for ``encoder``).
    export_dir, version: ``export_dir/<version>/``; default the next free.
    **options: the format's (:func:`check`).

  Raises:
    FormatError: see :func:`check` and :func:`check_spec`; the writer's errors (SpecError,
      FileExistsError, ExportDirError, the converter's refusal).
  """
  own = check(name, spec.kind, **options)
  fmt = get(name)
  check_spec(name, spec, None if preprocessor is None else preprocessor.vocab_lines())
  ops_options = {k: v for k, v in own.items() if k in fmt.ops_options}
  ops = fmt.ops(preprocessor, **ops_options)
  module = serving.build(spec, model, preprocessor, ops)
  write_options = {k: v for k, v in own.items() if k not in ops_options}
  return fmt.write(module, export_dir, version, **write_options)
