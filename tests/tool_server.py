"""A warm interpreter that runs the tools for the tests (``conftest.run_tool``).

Each tool run as ``python tools/X.py`` spends ~3-4.5 CPU s importing
TensorFlow, Keras and ``bert_tf`` before it reads a flag (Zen 5,
2026-11-28), and the suite starts ~200 of them. This server imports them
once, the way a tool's quiet start does (``bert_tf.tools._startup``), then
serves each request in a fresh ``fork()``: the child has the request's
working directory, environment, ``sys.argv`` and ``sys.path[0]``, its stdout
and stderr go to the request's files, and it runs the script as
``__main__`` (as ``python X.py`` does) with a real process's exit status (``SystemExit``
code; 1 and the traceback for an uncaught exception). Nothing ran in the
server but imports, so the child's TensorFlow starts its runtime (thread
pools, devices, op determinism, oneDNN) as a new process's does.

Not for what happens while TensorFlow loads: ``conftest.run_tool`` starts a
real process for anything but a ``tools/*.py`` script (``-c`` code that
checks what a fresh process imports, the tests' helper scripts), for a
``--deterministic`` or ``--verbosity`` run (they set ``TF_ENABLE_ONEDNN_OPTS``
/ ``TF_CPP_MIN_LOG_LEVEL`` before the import), for any extra environment, and
when a test asks for ``fresh=True`` (start-up output); the README and the
console scripts run as real processes too.

Protocol (one JSON object per line): request ``{"argv", "cwd", "env",
"stdout", "stderr"}`` on stdin; replies ``{"pid"}`` when the child starts and
``{"rc"}`` when it ends.
"""

import json
import os
import sys


def _warm_up():
  """The imports a tool's quiet start makes (no op runs: safe to fork)."""
  sys.argv = ["tool_server"]
  from bert_tf.tools import _startup  # pylint: disable=g-import-not-at-top
  from bert_tf import _quiet  # pylint: disable=g-import-not-at-top
  _startup.configure([])
  with _quiet.filtered_stderr(), _startup.without_optional_imports():
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
    import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
    import keras  # pylint: disable=g-import-not-at-top,unused-import
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.WARNING)
  import bert_tf.jobs  # pylint: disable=g-import-not-at-top,unused-import
  import bert_tf.export.saved_model  # pylint: disable=g-import-not-at-top,unused-import
  import bert_tf.tasks  # pylint: disable=g-import-not-at-top,unused-import


def _child(req, reply_fd):
  """Runs one request in the forked child; never returns."""
  import builtins  # pylint: disable=g-import-not-at-top
  import importlib.machinery  # pylint: disable=g-import-not-at-top
  import types  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  import traceback  # pylint: disable=g-import-not-at-top
  os.close(reply_fd)
  os.setpgid(0, 0)
  null = os.open(os.devnull, os.O_RDONLY)
  out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
  err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
  os.dup2(null, 0)
  os.dup2(out, 1)
  os.dup2(err, 2)
  for fd in (null, out, err):
    os.close(fd)
  os.chdir(req["cwd"])
  os.environ.clear()
  os.environ.update(req["env"])
  argv = req["argv"]
  code = 0
  try:
    script = os.path.abspath(argv[0])
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(script)
    main = types.ModuleType("__main__")
    main.__file__ = script  # absolute, as Python >= 3.9 sets it
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    with open(script, "rb") as f:
      source = f.read()
    exec(compile(source, script, "exec"), main.__dict__)  # pylint: disable=exec-used
  except SystemExit as e:
    if e.code is None:
      code = 0
    elif isinstance(e.code, int):
      code = e.code
    else:
      print(e.code, file=sys.stderr)
      code = 1
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  try:
    threading._shutdown()  # pylint: disable=protected-access
    import atexit  # pylint: disable=g-import-not-at-top
    atexit._run_exitfuncs()  # pylint: disable=protected-access
    sys.stdout.flush()
    sys.stderr.flush()
  finally:
    os._exit(code)  # pylint: disable=protected-access


def main():
  reply = os.fdopen(os.dup(1), "w")
  null = os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 1)
  os.close(null)
  _warm_up()
  reply.write(json.dumps({"ready": True}) + "\n")
  reply.flush()
  for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
      _child(req, reply.fileno())
    reply.write(json.dumps({"pid": pid}) + "\n")
    reply.flush()
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    reply.write(json.dumps({"rc": rc}) + "\n")
    reply.flush()


if __name__ == "__main__":
  main()
