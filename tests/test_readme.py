"""The README is a tested contract.

* Its layout: the project's name, one paragraph, then one fenced block with
  exactly the two commands (main job; tests), the second being what
  ``.ci/run`` runs.
* Every ``sh`` and ``python`` block runs as written, top to bottom, in a
  fresh copy of the project whose parent folder has no ``shared/`` (as a
  user's clone), with the project's ``.venv``. The harness changes only
  what sets the run's size (:func:`shorten`): epoch and step counts, and
  the all-MiniLM-L6-v2 directory, which becomes a smaller BERT in the same
  Hugging Face layout (``conftest.cropped_minilm_dir``: MiniLM's first four
  layers cropped to H=128, its vocab and tokenizer files), so every fine-tuning
  block runs the same code on ~1/20 of the arithmetic. The real MiniLM
  directory goes through the same tools in the tests that check its numbers
  (``test_lockstep_parity``, ``test_end_to_end``, ``test_run_squad``). A
  block marked ``no-run`` must be a TF Serving client or server command (no
  server can run here).
"""

import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from conftest import ROOT

README = os.path.join(ROOT, "README.md")
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```\s*$", re.M | re.S)
# Output lines of TensorFlow's C++ logger (must not reach a user by default),
# e.g. "E0000 00:00:1795704126.152545   21895 cuda_platform.cc:52] ...".
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.]+\.cc:\d+\]", re.M)
LARGE_DATA = ("data/movie_review_sentences", "data/dialog_reply_pairs")


def blocks():
  """``[(info, code)]`` of every fenced block of the README, in order."""
  with open(README, encoding="utf-8") as f:
    text = f.read()
  return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


# What the README's blocks write to find the MiniLM weights (sh; python).
MINILM_SH = "$(.venv/bin/python tools/minilm_dir.py)"
MINILM_PY = "minilm_dir()"


def shorten(info, code, tiny_dir=None):
  """The block as the harness runs it: only what sets the run's size changes.

  ``--num_train_epochs=X``: 0.02 on the two large sets (9,531 and ~2,000
  training rows), 0.25 elsewhere (the task slices); ``--num_train_steps``:
  6; ``--num_warmup_steps``: 2; Keras ``fit(..., epochs=N)``: 1; with
  ``tiny_dir``, the MiniLM directory the block finds (``MINILM_SH``,
  ``MINILM_PY``) is ``tiny_dir`` (``conftest.cropped_minilm_dir``).
  """
  if info.startswith("python"):
    if tiny_dir:
      code = code.replace(MINILM_PY, repr(tiny_dir))
    return re.sub(r"\bepochs=\d+", "epochs=1", code)
  if tiny_dir:
    code = code.replace(MINILM_SH, shlex.quote(tiny_dir))
  commands = re.split(r"(?<!\\)\n", code)
  out = []
  for cmd in commands:
    epochs = "0.02" if any(d in cmd for d in LARGE_DATA) else "0.25"
    cmd = re.sub(r"--num_train_epochs=[0-9.]+", "--num_train_epochs=" + epochs, cmd)
    cmd = re.sub(r"--num_train_steps=\d+", "--num_train_steps=6", cmd)
    cmd = re.sub(r"--num_warmup_steps=\d+", "--num_warmup_steps=2", cmd)
    out.append(cmd)
  return "\n".join(out)


def test_readme_opens_with_name_paragraph_and_the_two_commands():
  with open(README, encoding="utf-8") as f:
    text = f.read()
  parts = text.split("\n\n")
  assert parts[0] == "# bert_tf"
  paragraph = parts[1]
  assert paragraph and not paragraph.startswith(("#", "```", "|", "-")), paragraph
  first = blocks()[0]
  assert text.index("```") > text.index(paragraph) and parts[2].startswith("```")
  assert first[0] == ""
  lines = first[1].strip("\n").split("\n")
  assert lines == ["bash tools/setup.sh && bash tools/main_job.sh",
                   "bash tools/setup.sh --test && .venv/bin/python -m pytest -q"]
  with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
    ci = f.read()
  assert lines[1] in ci.splitlines(), ".ci/run must run the README's test command"


def test_every_block_is_run_or_a_tf_serving_command():
  seen = {"sh": 0, "python": 0}
  for info, code in blocks()[1:]:
    words = info.split()
    lang = words[0] if words else ""
    if "no-run" in words:
      assert ("tensorflow/serving" in code or "localhost:85" in code
              or "--storage=postgresql://" in code or "com.google.mediapipe" in code), (
          "a no-run block must be a TF Serving (or multi-machine search) command or "
          "Android code:\n" + code)
      continue
    assert lang in ("sh", "python"), "a block the harness does not run: %r" % info
    seen[lang] += 1
  assert seen["sh"] >= 10 and seen["python"] >= 3, seen


def _children_cpu():
  """CPU seconds of this process's finished child processes (with -s, the
  harness prints each block's wall and CPU seconds). Tool runs forked by
  the warm server (:func:`warm_python`) are the server's children and are
  not counted: read the wall seconds."""
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  return r.ru_utime + r.ru_stime


def _fresh_copy(dest, python=None):
  """The project's tracked and untracked-but-not-ignored files (a clone of
  the working tree) in ``dest``, with the project's ``.venv``: a link to it,
  or with ``python``, a folder of links to its entries whose
  ``bin/python*`` are ``python`` (the warm server's stand-in)."""
  files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], cwd=ROOT, capture_output=True,
                         check=True).stdout.decode().split("\0")
  for rel in filter(None, files):
    src = os.path.join(ROOT, rel)
    if not os.path.isfile(src):
      continue
    os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
    shutil.copy2(src, os.path.join(dest, rel))
  venv = os.path.join(ROOT, ".venv")
  if python is None:
    os.symlink(venv, os.path.join(dest, ".venv"))
    return
  os.makedirs(os.path.join(dest, ".venv", "bin"))
  for name in os.listdir(venv):
    if name != "bin":
      os.symlink(os.path.join(venv, name), os.path.join(dest, ".venv", name))
      continue
    for tool in os.listdir(os.path.join(venv, "bin")):
      dst = os.path.join(dest, ".venv", "bin", tool)
      if re.fullmatch(r"python[0-9.]*", tool):
        shutil.copy(python, dst)
      else:
        os.symlink(os.path.join(venv, "bin", tool), dst)


def _user_env():
  """The environment the blocks run in: a user's shell (no test settings)."""
  return {k: v for k, v in os.environ.items()
          if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND", "PYTHONPATH")}


@pytest.fixture
def warm_python(tmp_path):
  """A ``python`` stand-in whose ``tools/*.py`` runs and ``-c`` code (the
  python blocks) are forked from a warm server (``tests/tool_server.py
  --socket``): the README's ~30 runs skip TensorFlow's import (~4 CPU s
  each); everything else, and every run with ``BERT_TF_TESTS_FRESH_TOOLS=1``,
  is the real interpreter. The quiet start of a real process is the
  first-hour and packaging tests' subject."""
  import tool_server  # pylint: disable=g-import-not-at-top
  sock = str(tmp_path / "tools.sock")
  server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "tool_server.py"),
                             "--socket=" + sock], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=_user_env())
  try:
    assert server.stdout.readline().strip() == '{"ready": true}'
    python = str(tmp_path / "python_stand_in")
    tool_server.write_python_stand_in(python, sock, os.path.join(ROOT, ".venv", "bin", "python"))
    yield python
  finally:
    server.kill()
    server.wait()


@pytest.mark.slow  # every README command, shortened (~10 minutes)
def test_every_readme_block_runs_as_written_in_a_clone_without_shared(tmp_path, warm_python,
                                                                     cropped_minilm_dir):
  clone = str(tmp_path / "clone" / "bert_tf")
  _fresh_copy(clone, warm_python)
  tiny = cropped_minilm_dir
  assert not os.path.exists(os.path.join(os.path.dirname(clone), "shared"))
  env = _user_env()
  ran = tiny_runs = 0
  for info, code in blocks()[1:]:
    words = info.split()
    if not words or "no-run" in words:
      continue
    script = shorten(info, code, tiny)
    tiny_runs += tiny in script
    if words[0] == "sh":
      cmd = ["bash", "-euo", "pipefail", "-c", script]
    else:
      cmd = [os.path.join(clone, ".venv", "bin", "python"), "-c", script]
    start, cpu = time.time(), _children_cpu()
    p = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True,
                       timeout=1500)
    print("README block %d (%s): %.0f s, %.0f CPU s"
          % (ran + 1, info, time.time() - start, _children_cpu() - cpu))
    where = "README block %d (%s):\n%s\n--- stdout\n%s\n--- stderr\n%s" % (
        ran + 1, info, script, p.stdout[-3000:], p.stderr[-3000:])
    assert p.returncode == 0, where
    assert "Traceback" not in p.stderr, where
    if "bert_tf" in script or "tools/" in script:  # ours: no TensorFlow banner
      assert not TF_LOG_LINE.search(p.stderr), where
    ran += 1
  runs = os.path.join(clone, "runs", "readme")
  for rel in ("sst2/eval_results.txt", "sst2_export/1/saved_model.pb",
              "pairs/eval_results.txt", "squad/predictions.json",
              "swag/predictions.csv", "ner/test_predictions.txt", "features.jsonl",
              "sst2_reexport/1/saved_model.pb", "pretrain_encoder/1/saved_model.pb",
              "pretrain/eval_results.txt",
              "sst2.keras"):
    assert os.path.exists(os.path.join(runs, rel)), rel
  assert ran >= 13
  assert tiny_runs >= 6, "the README no longer finds MiniLM as MINILM_SH / MINILM_PY say"
