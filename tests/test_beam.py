"""``--runner=beam`` (issue 62): the scalable data modes on Apache Beam's
DirectRunner (its Python engine, multi-processing, 2 workers; no network),
shard for shard the bytes of the local worker pool; safe to retry and to
rerun after a SIGKILL; a manifest that the record readers take; bad input
refused in one line before any work.

One shared pipeline run per tool and seed (module fixtures); the tiny
corpus is the first 400 lines of the Austen slice.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from bert_tf.data.pretraining import beam_runner
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import records
from bert_tf.data.pretraining import sharded
from conftest import AUSTEN_SLICE, ROOT, VOCAB, require, run_tool

require("apache_beam", "tools/setup.sh --test installs it (requirements-test.txt)")

BEAM = "--beam_pipeline_options=" + ",".join(
    ["runner=DirectRunner", "direct_num_workers=2", "direct_running_mode=multi_processing"])
SHARDS = 3
FLAGS = dict(dupe_factor=2, max_seq_length=64, max_predictions_per_seq=10,
             window_tokens=4000)
DATA_TOOL = "tools/create_pretraining_data.py"
DOCS_TOOL = "tools/create_pretraining_documents.py"


def digest(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """Two files (a glob), documents continuing across them."""
  d = tmp_path_factory.mktemp("corpus")
  with open(AUSTEN_SLICE, encoding="utf-8") as f:
    lines = f.readlines()[:400]
  for i, part in enumerate((lines[:200], lines[200:])):
    with open(d / ("part%d.txt" % i), "w", encoding="utf-8") as f:
      f.writelines(part)
  return d


def beam_cli(tool, corpus_glob, out, *extra, check=True):
  return run_tool([tool, "--input_file=" + corpus_glob, "--output_file=%s" % out,
                   "--vocab_file=" + VOCAB, "--num_workers=2",
                   "--num_shards=%d" % SHARDS, "--runner=beam", BEAM, "--noprogress"]
                  + list(extra), check=check)


def instance_flags(seed):
  return ["--random_seed=%d" % seed] + ["--%s=%s" % kv for kv in FLAGS.items()]


# The default seed in the fast run; a second seed (another pipeline run,
# ~6-10 s) in the full suite.
@pytest.fixture(scope="module", params=[12345, pytest.param(7, marks=pytest.mark.slow)])
def instances(request, corpus, tmp_path_factory):
  """(local stats, beam stats line, beam output prefix) for one seed."""
  seed = request.param
  d = tmp_path_factory.mktemp("inst%d" % seed)
  files = documents.expand_input_files(str(corpus / "part*.txt"))
  local = sharded.create_sharded(files, str(d / "local" / "out"), VOCAB, num_workers=2,
                                 num_shards=SHARDS, random_seed=seed, **FLAGS)
  p = beam_cli(DATA_TOOL, str(corpus / "part*.txt"), d / "beam" / "out",
               *instance_flags(seed))
  return local, p, d / "beam" / "out"


def test_instances_shards_equal_the_local_pool_byte_for_byte(instances):
  local, p, out = instances
  paths = sharded.shard_paths(str(out), SHARDS)
  assert [digest(a) for a in paths] == [digest(b) for b in local["files"]]
  assert "on Beam" in p.stdout and "%d instances" % local["num_instances"] in p.stdout
  # Only whole shards and the manifest: no temporary or bookkeeping file.
  assert sorted(os.listdir(out.parent)) == sorted(
      [os.path.basename(x) for x in paths] + ["out.json"])


def test_manifest_lists_shards_counts_flags_seeds_and_reads_as_input(instances):
  local, _, out = instances
  m = json.load(open(str(out) + ".json", encoding="utf-8"))
  assert m["format"] == documents.MANIFEST_FORMAT and m["kind"] == "instances"
  assert m["counts"] == local["counts"] and m["num_records"] == local["num_instances"]
  assert m["flags"]["dupe_factor"] == 2 and m["flags"]["max_seq_length"] == 64
  assert m["seeds"]["random_seed"] == m["flags"]["random_seed"]
  assert len(m["seeds"]["shard_python_seeds"]) == SHARDS
  # run_pretraining.py --input_file=<output>.json: the reader expands it.
  assert documents.expand_input_files(str(out) + ".json") == sharded.shard_paths(
      str(out), SHARDS)
  from bert_tf.data.pretraining import input as input_lib  # pylint: disable=g-import-not-at-top
  ds = input_lib.pretraining_dataset(str(out) + ".json", 16, 64, 10, is_training=False)
  assert sum(int(b["input_ids"].shape[0]) for b in ds) == m["num_records"]


@pytest.fixture(scope="module")
def docs(corpus, tmp_path_factory):
  """The documents tool: default mode, local shards, Beam shards (file:// URL
  input: globbed and read through tf.io.gfile)."""
  d = tmp_path_factory.mktemp("docs")
  run_tool([DOCS_TOOL, "--input_file=%s" % (corpus / "part*.txt"),
            "--output_file=%s" % (d / "one.tfrecord"), "--vocab_file=" + VOCAB])
  local = run_tool([DOCS_TOOL, "--input_file=%s" % (corpus / "part*.txt"),
                    "--output_file=%s" % (d / "local" / "docs"), "--vocab_file=" + VOCAB,
                    "--num_workers=2", "--num_shards=%d" % SHARDS])
  beam = beam_cli(DOCS_TOOL, "file://%s" % (corpus / "part*.txt"), d / "beam" / "docs")
  return d, local, beam


def test_documents_shards_equal_the_local_pool_and_the_default_mode(docs):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  d, local, beam = docs
  loc = sharded.shard_paths(str(d / "local" / "docs"), SHARDS)
  bm = sharded.shard_paths(str(d / "beam" / "docs"), SHARDS)
  assert [digest(a) for a in bm] == [digest(b) for b in loc]
  assert "to 3 shards" in local.stdout and "on Beam" in beam.stdout
  # Shard s holds documents s, s + S, ...: the default mode's records, regrouped.
  one = [r.numpy() for r in tf.data.TFRecordDataset(str(d / "one.tfrecord"))]
  shards = [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in bm]
  assert [r for s in range(SHARDS) for r in one[s::SHARDS]] == [r for s in shards for r in s]
  m = json.load(open(str(d / "beam" / "docs") + ".json", encoding="utf-8"))
  assert m["kind"] == "documents" and m["num_records"] == len(one) and m["seeds"] is None


def test_a_retried_or_twin_bundle_leaves_one_whole_shard(corpus, tmp_path):
  files = documents.expand_input_files(str(corpus / "part*.txt"))
  out = str(tmp_path / "out")
  paths = sharded.shard_paths(out, SHARDS)
  job = dict(input_files=files, paths=paths, num_shards=SHARDS,
             params=sharded.shard_params("instances", random_seed=3, **FLAGS),
             vocab=dict(vocab_file=VOCAB, max_seq_length=64, max_predictions_per_seq=10))
  first = beam_runner.make_shard(1, job)
  again = beam_runner.make_shard(1, job)  # Beam retried the bundle
  assert not first["skipped"] and again["skipped"] and first["count"] == again["count"]
  os.remove(paths[1])
  twin = beam_runner.make_shard(1, job)  # a twin attempt renames the same bytes
  assert twin["count"] == first["count"] == records.count_tfrecords(paths[1])
  assert os.listdir(tmp_path) == [os.path.basename(paths[1])]


def test_sigkilled_pipeline_rerun_finishes_byte_identical(corpus, tmp_path):
  """SIGKILL the tool and its Beam workers (a process group) once a shard is
  whole; the same command again skips whole shards and says so."""
  files = documents.expand_input_files(str(corpus / "part*.txt"))
  shards = 8
  flags = dict(FLAGS, dupe_factor=20)
  ref = sharded.create_sharded(files, str(tmp_path / "ref" / "out"), VOCAB, num_workers=2,
                               num_shards=shards, random_seed=5, **flags)
  out = tmp_path / "beam" / "out"
  cmd = [sys.executable, os.path.join(ROOT, DATA_TOOL),
         "--input_file=%s" % (corpus / "part*.txt"), "--output_file=%s" % out,
         "--vocab_file=" + VOCAB, "--num_workers=2", "--num_shards=%d" % shards,
         "--runner=beam", BEAM.replace("direct_num_workers=2", "direct_num_workers=1"),
         "--noprogress", "--random_seed=5"] + ["--%s=%s" % kv for kv in flags.items()]
  paths = sharded.shard_paths(str(out), shards)
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
  deadline = time.time() + 300
  while not any(os.path.exists(p) for p in paths) and time.time() < deadline:
    time.sleep(0.02)
  os.killpg(proc.pid, signal.SIGKILL)
  proc.wait()
  whole = [p for p in paths if os.path.exists(p)]
  assert 0 < len(whole) < shards, "the kill came too late to test a rerun"
  assert not os.path.exists(str(out) + ".json")  # nothing looks complete
  for p in whole:
    assert digest(p) == digest(ref["files"][paths.index(p)])
  p = run_tool(cmd[1:])
  assert "already whole, skipped" in p.stdout + p.stderr
  assert [digest(x) for x in paths] == [digest(x) for x in ref["files"]]
  assert sorted(os.listdir(out.parent)) == sorted(
      [os.path.basename(x) for x in paths] + ["out.json"])


def _refused(p, *needles):
  """Non-zero exit, one stderr line naming the problem."""
  lines = p.stderr.strip().splitlines()
  assert p.returncode != 0 and len(lines) == 1, p.stderr
  for n in needles:
    assert n in lines[0], lines[0]
  return lines[0]


@pytest.mark.parametrize("options,needle", [
    ("runner=DirectRunner,direct_num_workers=two", "direct_num_workers"),
    ("runner=DirectRunner,no such option", "is not name=value"),
    ("runner=DirectRunner,direct_numworkers=2", "knows no option 'direct_numworkers'"),
    ("runner=NoSuchRunner", "unknown runner 'NoSuchRunner'"),
])
def test_bad_pipeline_options_fail_in_one_line_before_any_work(corpus, tmp_path, options,
                                                              needle):
  p = run_tool([DATA_TOOL, "--input_file=%s" % (corpus / "part*.txt"),
                "--output_file=%s" % (tmp_path / "o" / "out"), "--vocab_file=" + VOCAB,
                "--num_workers=2", "--runner=beam", "--beam_pipeline_options=" + options],
               check=False)
  _refused(p, "--beam_pipeline_options", needle)
  assert not os.path.exists(tmp_path / "o")


def test_faithful_mode_glob_and_output_refused_in_one_line(corpus, tmp_path):
  out = str(tmp_path / "o" / "out")
  base = ["--vocab_file=" + VOCAB, "--runner=beam", BEAM]
  p = run_tool([DATA_TOOL, "--input_file=%s" % (corpus / "part*.txt"),
                "--output_file=" + out] + base, check=False)
  _refused(p, "one random stream", "--num_workers=N", "--num_shards")
  p = run_tool([DOCS_TOOL, "--input_file=%s" % (corpus / "part*.txt"),
                "--output_file=" + out] + base, check=False)
  _refused(p, "--runner=beam needs the scalable mode")
  p = run_tool([DATA_TOOL, "--input_file=%s" % (tmp_path / "nothing*.txt"),
                "--output_file=" + out, "--num_workers=2"] + base, check=False)
  _refused(p, "matches no file")
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  for tool in (DATA_TOOL, DOCS_TOOL):
    p = run_tool([tool, "--input_file=%s" % (corpus / "part*.txt"),
                  "--output_file=%s" % (blocker / "out"), "--num_workers=2"] + base,
                 check=False)
    _refused(p, "--output_file: cannot write to")
  assert sorted(os.listdir(tmp_path)) == ["a_file"]
  # An unfinished run with other flags owns that output: refused, left as it was.
  (tmp_path / "o").mkdir()
  (tmp_path / "o" / "out.json.partial").write_text('{"flags": "other"}\n')
  p = run_tool([DATA_TOOL, "--input_file=%s" % (corpus / "part*.txt"),
                "--output_file=" + out, "--num_workers=2"] + base, check=False)
  _refused(p, "an unfinished run with other flags")
  assert os.listdir(tmp_path / "o") == ["out.json.partial"]


def test_without_beam_one_line_names_the_install_command(corpus, tmp_path):
  fake = tmp_path / "nobeam" / "apache_beam"
  fake.mkdir(parents=True)
  (fake / "__init__.py").write_text("raise ImportError('No module named apache_beam')\n")
  p = run_tool([DATA_TOOL, "--input_file=%s" % (corpus / "part*.txt"),
                "--output_file=%s" % (tmp_path / "o" / "out"), "--vocab_file=" + VOCAB,
                "--num_workers=2", "--runner=beam"], check=False,
               env=dict(PYTHONPATH=str(tmp_path / "nobeam")))
  _refused(p, "needs Apache Beam", 'pip install "bert_tf[beam]"', "apache-beam==")
  assert not os.path.exists(tmp_path / "o")


def test_beam_module_stays_tf_free_and_bert_tf_loads_without_beam():
  from test_architecture import TF_MODULES, imports_of, module_files  # pylint: disable=g-import-not-at-top
  modules = module_files()
  name = "bert_tf.data.pretraining.beam_runner"
  # apache_beam is imported inside functions only (checked at run time below).
  assert not [d for d, _ in imports_of(name, modules[name], modules)
              if d.split(".")[0] in TF_MODULES]
  code = ("import sys, bert_tf, bert_tf.data.pretraining.beam_runner; "
          "print(sorted(m for m in sys.modules if m.split('.')[0] in "
          "('tensorflow', 'keras', 'apache_beam')))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True).stdout
  assert out.strip() == "[]", out
