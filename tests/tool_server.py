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
real process for anything but a ``tools/*.py`` script or pip's ``bert-X``
console script of the same tool and the scripts that run the original
BERT code (``REFERENCE_SCRIPTS``) (``-c`` code that checks what a fresh
process imports, the other helper scripts), for a ``--deterministic`` or
``--verbosity`` run (they set ``TF_ENABLE_ONEDNN_OPTS`` /
``TF_CPP_MIN_LOG_LEVEL`` before the import), for any extra environment, and
when a test asks for ``fresh=True`` (start-up output); the README's tool
runs come through the socket mode below.

Protocol (one JSON object per line): request ``{"argv", "cwd", "env",
"stdout", "stderr"}`` on stdin; replies ``{"pid"}`` when the child starts and
``{"rc"}`` when it ends.

With ``--socket=PATH`` it serves shell commands instead (the README
contract, ``tests/test_readme.py``): a ``python`` stand-in
(:func:`write_python_stand_in`) sends its argv, working directory and
environment with its own stdin, stdout and stderr (``SCM_RIGHTS``) over a
``SOCK_SEQPACKET`` socket; the child runs on those descriptors, so pipes and
``$(...)`` work as with a real process, and the stand-in exits with the
child's status. The stand-in also sends ``python -c CODE`` (the README's
python blocks: user code, run as ``-c`` runs it, with ``sys.path[0] == ""``);
what :func:`needs_fresh_process` names runs as a real interpreter (the
stand-in ``exec``s it).
"""

import json
import os
import socket
import sys

# Tools whose real start imports no TensorFlow (they fork workers when it is
# absent): always a real process.
NO_TENSORFLOW_TOOLS = ("create_pretraining_data.py",)
# pip's console scripts (``pyproject.toml``): ``bert-run-classifier`` runs
# ``tools/run_classifier.py``'s ``run``.
CONSOLE_SCRIPT_PREFIX = "bert-"
# The tests' scripts that run the original google-research/bert code (TF1
# graphs through tensorflow.compat.v1, tf-keras layers): nothing they check
# happens while TensorFlow loads (TF_USE_LEGACY_KERAS, which they set, is
# read when tf.compat.v1.layers is first used), so they are served too.
_TESTS = os.path.dirname(os.path.abspath(__file__))
REFERENCE_SCRIPTS = tuple(os.path.join(_TESTS, name) for name in (
    "original_graph.py", "original_optimizer.py", "original_squad.py",
    "original_extract_features.py", "original_create_data.py", "original_subprocess.py",
    "original_pytest.py", "lockstep_util.py"))
# Environment that acts while TensorFlow loads: a request whose values differ
# from the server's runs as a real process.
START_ENV_PREFIXES = ("TF_", "KERAS_", "CUDA_", "OMP_", "MKL_", "BERT_TF_", "PYTHON")


def needs_fresh_process(argv, code=False):
  """True when ``python argv...`` must start a real interpreter: anything but
  a ``tools/*.py`` script (``-c`` code often checks what a fresh process
  imports; with ``code``, ``-c CODE`` is served too: the README's blocks),
  flags that act before TensorFlow loads, a tool that runs without
  TensorFlow, or ``BERT_TF_TESTS_FRESH_TOOLS=1``."""
  if os.environ.get("BERT_TF_TESTS_FRESH_TOOLS") == "1":
    return True
  if code and len(argv) >= 2 and str(argv[0]) == "-c":
    return False
  script = str(argv[0]) if argv else ""
  if script in REFERENCE_SCRIPTS:
    return False
  tool = console_script_tool(script)
  if tool is None:
    if os.path.basename(os.path.dirname(script)) != "tools" or not script.endswith(".py"):
      return True
    tool = os.path.basename(script)
  if tool in NO_TENSORFLOW_TOOLS:
    return True
  from bert_tf.tools import _startup  # pylint: disable=g-import-not-at-top
  argv = [str(a) for a in argv]  # what the tool's start reads before TensorFlow loads
  return _startup.verbosity_requested(argv) or _startup.determinism_requested(argv)


def console_script_tool(path):
  """``X.py`` for pip's ``bert-X`` console script in this interpreter's
  ``bin`` (a Python file: the server runs it as ``__main__``, as its
  ``#!`` line's interpreter would), else None."""
  name = os.path.basename(path)
  if (not name.startswith(CONSOLE_SCRIPT_PREFIX) or os.path.dirname(os.path.abspath(path))
      != os.path.dirname(os.path.abspath(sys.executable))):
    return None
  return name[len(CONSOLE_SCRIPT_PREFIX):].replace("-", "_") + ".py"


def start_env(env=None):
  """The part of ``env`` (default ``os.environ``) that acts at start-up."""
  env = os.environ if env is None else env
  return {k: v for k, v in env.items() if k.startswith(START_ENV_PREFIXES)}


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


def _child(req, reply_fd, fds=None):
  """Runs one request in the forked child; never returns. ``fds``: its
  stdin, stdout and stderr (default: /dev/null and the request's files)."""
  import builtins  # pylint: disable=g-import-not-at-top
  import importlib.machinery  # pylint: disable=g-import-not-at-top
  import types  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  import traceback  # pylint: disable=g-import-not-at-top
  os.close(reply_fd)
  os.setpgid(0, 0)
  if fds is None:
    fds = (os.open(os.devnull, os.O_RDONLY),
           os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
           os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
  for i, fd in enumerate(fds):
    os.dup2(fd, i)
  for fd in set(fds):
    if fd > 2:
      os.close(fd)
  os.chdir(req["cwd"])
  os.environ.clear()
  os.environ.update(req["env"])
  argv = req["argv"]
  code = 0
  try:
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    if argv[0] == "-c":  # python -c CODE ARGS: as the interpreter runs it
      script, source = "<string>", argv[1]
      sys.argv = ["-c"] + list(argv[2:])
      sys.path[0] = ""
    else:
      script = os.path.abspath(argv[0])
      sys.argv = list(argv)
      sys.path[0] = os.path.dirname(script)
      main.__file__ = script  # absolute, as Python >= 3.9 sets it
      main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
      with open(script, "rb") as f:
        source = f.read()
    sys.modules["__main__"] = main
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


STAND_IN = """#!{python}
# The README contract's python (tests/tool_server.py): a tools/*.py run or
# -c code goes to the warm server at {socket!r}; anything else is the real
# interpreter.
import json, os, socket, sys
sys.path[0:0] = [{tests!r}, {root!r}]
import tool_server
argv = sys.argv[1:]
with open({socket!r} + ".env") as f:
  same_env = json.load(f) == tool_server.start_env()
if not same_env or tool_server.needs_fresh_process(argv, code=True):
  os.execv({python!r}, [{python!r}] + argv)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect({socket!r})
req = json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(s, [req], [0, 1, 2])
reply = s.recv(4096)
sys.exit(json.loads(reply)["rc"] if reply else 1)
"""


def write_python_stand_in(path, socket_path, python=sys.executable):
  """Writes the ``python`` stand-in for a server on ``socket_path`` to
  ``path`` (executable); it runs ``python`` for what the server does not."""
  tests = os.path.dirname(os.path.abspath(__file__))
  with open(path, "w", encoding="utf-8") as f:
    f.write(STAND_IN.format(python=python, socket=socket_path, tests=tests,
                            root=os.path.dirname(tests)))
  os.chmod(path, 0o755)


def serve_socket(path):
  """Serves stand-in requests on ``path``, one at a time (see the module doc)."""
  env = start_env()  # as the server was started (the warm-up sets some)
  _warm_up()
  with open(path + ".env", "w") as f:
    json.dump(env, f)
  srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
  srv.bind(path)
  srv.listen(8)
  print(json.dumps({"ready": True}), flush=True)
  while True:
    conn, _ = srv.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    req = json.loads(msg)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
      conn.close()
      _child(req, srv.fileno(), fds)
    for fd in fds:
      os.close(fd)
    _, status = os.waitpid(pid, 0)
    conn.send(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode())
    conn.close()


def main():
  if len(sys.argv) > 1 and sys.argv[1].startswith("--socket="):
    serve_socket(sys.argv[1][len("--socket="):])
    return
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
