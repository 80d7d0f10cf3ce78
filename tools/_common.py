"""Flags and set-up shared by the command-line tools.

Flags are defined from the params dataclasses (:mod:`bert_tf.params`): the
name, default, help and choices of each flag are those of the dataclass
field, and :func:`params_from_flags` builds the dataclass from the parsed
flags, so nothing is copied field by field. Library errors
(:class:`bert_tf.errors.BertTfError`) become one ``tool: error: ...`` line
(:func:`fail`).
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import typing

from absl import flags

from bert_tf import distribute
from bert_tf import errors
from bert_tf import runner
from bert_tf import training
from bert_tf.tools import _startup

FLAGS = flags.FLAGS

# Errors a tool reports as one line (everything bert_tf raises on bad input,
# plus the OS's own file errors).
REPORTED = (errors.BertTfError, ValueError, FileExistsError, FileNotFoundError)
fail = _startup.fail


def _base_type(tp):
  """``Optional[int]`` -> int; ``"Optional[int]"`` (postponed annotations) too."""
  if isinstance(tp, str):
    tp = eval(tp, {"Optional": typing.Optional, "tuple": tuple})  # pylint: disable=eval-used
  args = [a for a in typing.get_args(tp) if a is not type(None)]
  return args[0] if typing.get_origin(tp) is typing.Union and args else tp


def define_flags(cls, skip=(), required=()) -> list:
  """Defines one absl flag per field of the dataclass ``cls``.

  Args:
    cls: a params dataclass whose fields carry :func:`bert_tf.params.field`
      metadata (help, choices).
    skip: field names not to define (the tool sets them itself).
    required: flags to mark as required.

  Returns:
    the names of the defined flags.
  """
  names = []
  for f in dataclasses.fields(cls):
    meta = f.metadata or {}
    if f.name in skip or not meta.get("flag", True) or f.name in FLAGS:
      continue
    default = None if f.default is dataclasses.MISSING else f.default
    help_text = meta.get("help") or f.name
    tp = _base_type(f.type)
    if meta.get("choices"):
      flags.DEFINE_enum(f.name, default, list(meta["choices"]), help_text)
    elif tp is bool:
      flags.DEFINE_bool(f.name, default, help_text)
    elif tp is int:
      flags.DEFINE_integer(f.name, default, help_text)
    elif tp is float:
      flags.DEFINE_float(f.name, default, help_text)
    elif tp is tuple:
      flags.DEFINE_list(f.name, default, help_text)
    else:
      flags.DEFINE_string(f.name, default, help_text)
    names.append(f.name)
  if required:
    flags.mark_flags_as_required(list(required))
  return names


def params_from_flags(cls, **overrides):
  """The dataclass ``cls`` from the parsed flags of the same names."""
  values = {f.name: FLAGS[f.name].value for f in dataclasses.fields(cls)
            if f.name in FLAGS}
  values.update(overrides)
  return cls(**values)


def define_training_flags():
  """Strategy and TPU flags (original names kept)."""
  flags.DEFINE_enum("distribution_strategy", "one_device", list(distribute.STRATEGIES),
                    "tf.distribute strategy.")
  flags.DEFINE_integer("num_cpu_devices", None,
                       "With --distribution_strategy=mirrored on CPU: logical CPU devices.")
  flags.DEFINE_bool("use_tpu", False, "Use a TPU (same as --distribution_strategy=tpu).")
  flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.")


def define_task_flags(params_cls, tool_module: str,
                      required: typing.Sequence[str] = ("output_dir",)) -> None:
  """A fine-tuning tool's flags: the strategy/TPU flags, one flag per field of
  ``params_cls``, all of them key flags of the tool (``--helpshort``).

  Args:
    params_cls: the task's params dataclass.
    tool_module: the tool's ``__name__``.
    required: flags to mark as required.
  """
  define_training_flags()  # --distribution_strategy defined once, here
  define_flags(params_cls, required=required)
  _startup.register_key_flags(__name__, tool_module)


def _flag(name):
  """A flag's value, or None when this tool does not define it."""
  return FLAGS[name].value if name in FLAGS else None


def strategy_from_flags():
  """The ``tf.distribute`` strategy the flags ask for.

  ``--tpu_zone``, ``--gcp_project`` and ``--master`` (when the tool defines
  them, as ``run_pretraining.py`` does) go to the TPUClusterResolver.
  """
  return distribute.get_strategy(
      "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy,
      tpu_name=FLAGS.tpu_name or _flag("master"),
      num_cpu_devices=FLAGS.num_cpu_devices, tpu_zone=_flag("tpu_zone"),
      gcp_project=_flag("gcp_project"))


def _one_of(names) -> str:
  flags_ = ["--" + n for n in names]
  return ", ".join(flags_[:-1]) + " or " + flags_[-1] if len(flags_) > 1 else flags_[0]


def task_main(tool: str, params_cls, job: typing.Callable,
              actions: typing.Sequence[str],
              exporter: typing.Optional[typing.Callable] = None,
              prepare: typing.Optional[typing.Callable[[], dict]] = None,
              job_flags: typing.Sequence[str] = ()) -> typing.Callable:
  """The ``main(argv)`` of a training tool, the same for every task.

  Refuses a command line that asks for none of ``actions``; runs
  ``prepare()`` (tool-specific checks; returns params overrides); turns on
  determinism before the strategy starts TensorFlow's runtime; builds the
  strategy and ``params_cls`` from the flags; calls
  ``job(params, strategy, **{flag: value for job_flags}, exporter=...)``.
  Every reported error (:data:`REPORTED`) becomes one ``tool: error:`` line.

  Args:
    tool: the tool's name, for messages.
    params_cls: the task's params dataclass.
    job: e.g. ``bert_tf.jobs.run_ner``.
    actions: flags of which at least one must be set (``do_train``, ...).
    exporter: the export hook ``(model, output_dir, export_dir) -> path``
      (:func:`export_model`), passed as ``exporter=`` when ``--export_dir``
      is set (None otherwise); when None, no ``exporter`` argument is passed.
    prepare: tool-specific checks run first; returns params overrides.
    job_flags: flags passed to ``job`` as keyword arguments.
  """

  def run_job():
    overrides = prepare() if prepare is not None else {}
    if "deterministic" in FLAGS and FLAGS.deterministic:
      runner.enable_determinism_for_run(FLAGS.output_dir, FLAGS.seed)
    strategy = strategy_from_flags()
    params = params_from_flags(params_cls, **overrides)
    kwargs = {f: FLAGS[f].value for f in job_flags}
    if exporter is not None:
      kwargs["exporter"] = exporter if FLAGS.export_dir else None
    job(params, strategy, **kwargs)

  def main(argv):
    del argv
    if not any(FLAGS[a].value for a in actions):
      sys.exit("%s: error: at least one of %s must be set" % (tool, _one_of(actions)))
    reporting_errors(tool, run_job)

  return main


def export_model(model, output_dir: str, export_dir: str) -> str:
  """The training tools' export hook: :func:`bert_tf.export.export_model`
  (the run's default SavedModel under ``export_dir/<version>/``; returns the
  path), imported when called, so a run without ``--export_dir`` loads no
  export code."""
  from bert_tf import export  # pylint: disable=g-import-not-at-top
  return export.export_model(model, output_dir, export_dir)


def reporting_errors(tool: str, fn: typing.Callable[[], typing.Any]) -> None:
  """Runs ``fn()``; every reported error (:data:`REPORTED`) becomes one
  ``tool: error:`` line (exit 1), SIGINT/SIGTERM during training (checkpointed
  at the step: :class:`bert_tf.training.Interrupted`) or Ctrl-C elsewhere one
  ``interrupted ...`` line (exit 130 / 143), never a traceback."""
  try:
    fn()
  except REPORTED as e:
    fail(tool, e)
  except training.Interrupted as e:  # SIGINT/SIGTERM: checkpointed at e.step
    interrupted(str(e), e.signum)
  except KeyboardInterrupt:  # Ctrl-C outside the training loop
    interrupted("interrupted before the end; rerun the same command to resume "
                "(from the last checkpoint in --output_dir, if any)", signal.SIGINT)


def interrupted(message: str, signum: int) -> typing.NoReturn:
  """Exits with ``message`` on one stderr line and the shell's status for
  the signal (128 + ``signum``: 130 for Ctrl-C, 143 for SIGTERM)."""
  print(message, file=sys.stderr, flush=True)
  sys.exit(128 + int(signum))


def fine_tuning_tool(tool: str, tool_module: str, params_cls, job: typing.Callable,
                     exporter: typing.Callable = export_model) -> tuple:
  """Flags (:func:`define_task_flags`), ``main`` (:func:`task_main`) and the
  console-script entry ``run`` of a tool that trains, evaluates, predicts and
  exports one task (``run_ner``, ``run_swag``): at least one of
  ``--do_train``, ``--do_eval``, ``--do_predict``, ``--export_dir``.

  Returns:
    ``(main, run)``.
  """
  define_task_flags(params_cls, tool_module)
  main = task_main(tool, params_cls, job,
                   ("do_train", "do_eval", "do_predict", "export_dir"), exporter=exporter)
  return main, lambda: _startup.run_app(main, tool_module)
