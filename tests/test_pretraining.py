"""Pretraining at scale: input pipeline, bad input, distribution, exact resume.

Real records from ``data/corpus/sample_text.txt`` (the original's sample),
the tiny config, the real uncased vocab. Distribution runs on CPU: 2 logical
CPU devices for MirroredStrategy, two worker processes on 127.0.0.1 for
MultiWorkerMirroredStrategy (both in subprocesses, see
``tests/distributed_worker.py``).
"""

import dataclasses
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import jobs
from bert_tf.tasks import pretraining
from bert_tf import errors
from bert_tf.data.pretraining import faithful
from bert_tf.data.pretraining import input as pretraining_input
from conftest import ROOT, SAMPLE_TEXT, TINY_CONFIG, VOCAB, free_ports, read_records, run_tool

SEQ, PREDS = 64, 10


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  """35 original-format records (seq 64, 10 predictions) of the sample text."""
  path = str(tmp_path_factory.mktemp("records") / "pt.tfrecord")
  faithful.create_pretraining_data(
      SAMPLE_TEXT, path, VOCAB, max_seq_length=SEQ, max_predictions_per_seq=PREDS,
      dupe_factor=2, random_seed=12345)
  return path


def tiny():
  return config_lib.BertConfig.from_json_file(TINY_CONFIG)


def params_for(data, out, **kw):
  return pretraining.PretrainingParams(
      input_file=data, output_dir=str(out), max_seq_length=SEQ,
      max_predictions_per_seq=PREDS, train_batch_size=8, **kw)


def as_numpy_batches(ds):
  return [{k: v.numpy() for k, v in b.items()} for b in ds]


def test_eval_pass_is_ordered_complete_and_training_pass_shuffles(records):
  want = read_records(records)
  assert len(want) == 35
  batches = as_numpy_batches(pretraining_input.pretraining_dataset(
      records, 8, SEQ, PREDS, is_training=False))
  assert [len(b["input_ids"]) for b in batches] == [8, 8, 8, 8, 3]  # last kept
  got = np.concatenate([b["input_ids"] for b in batches])
  np.testing.assert_array_equal(got, np.stack([r["input_ids"] for r in want]))
  np.testing.assert_array_equal(
      np.concatenate([b["masked_lm_weights"] for b in batches]),
      np.stack([r["masked_lm_weights"] for r in want]))
  assert batches[0]["input_ids"].dtype == np.int32
  assert batches[0]["masked_lm_weights"].dtype == np.float32
  assert batches[0]["next_sentence_labels"].shape == (8, 1)

  def train_batches(seed):
    return as_numpy_batches(pretraining_input.pretraining_dataset(
        records, 8, SEQ, PREDS, is_training=True, seed=seed).take(9))
  a, b = train_batches(1), train_batches(1)
  assert all(len(x["input_ids"]) == 8 for x in a)  # drop_remainder, repeats
  for x, y in zip(a, b):  # deterministic under a seed
    np.testing.assert_array_equal(x["input_ids"], y["input_ids"])
  assert not np.array_equal(a[0]["input_ids"], batches[0]["input_ids"])  # shuffled
  # Two workers by record (one file < two pipelines): disjoint halves.
  halves = [np.concatenate([b["input_ids"] for b in as_numpy_batches(
      pretraining_input.pretraining_dataset(
          records, 4, SEQ, PREDS, is_training=False,
          input_context=tf.distribute.InputContext(2, i, 2)))]) for i in (0, 1)]
  assert len(halves[0]) + len(halves[1]) == 35
  np.testing.assert_array_equal(halves[1][0], want[1]["input_ids"])


def test_corrupt_shard_and_wrong_widths_are_named(records, tmp_path):
  good = str(tmp_path / "a.tfrecord")
  bad = str(tmp_path / "b.tfrecord")
  shutil.copy(records, good)
  raw = open(records, "rb").read()
  open(bad, "wb").write(raw[:-40])  # truncated inside the last record
  glob = str(tmp_path / "*.tfrecord")
  with pytest.raises(tf.errors.DataLossError):
    list(pretraining_input.pretraining_dataset(glob, 8, SEQ, PREDS, is_training=False))
  where = pretraining_input.find_bad_record([good, bad], SEQ, PREDS)
  assert where.startswith(bad + ": record 34:"), where
  assert pretraining_input.find_bad_record([good], SEQ, PREDS) is None

  # The first record does not read: caught up front, naming the file.
  junk = str(tmp_path / "junk.tfrecord")
  open(junk, "wb").write(b"\x07" * 100)
  with pytest.raises(pretraining_input.RecordError, match=re.escape(junk)):
    pretraining_input.inspect_records([good, junk], SEQ, PREDS)
  # Records of other widths.
  narrow = str(tmp_path / "narrow.tfrecord")
  faithful.create_pretraining_data(
      SAMPLE_TEXT, narrow, VOCAB, max_seq_length=32, max_predictions_per_seq=5,
      dupe_factor=1)
  with pytest.raises(pretraining_input.RecordError,
                     match=re.escape(narrow) + ".*length 32.*--max_seq_length=64"):
    pretraining_input.inspect_records([good, narrow], SEQ, PREDS)
  # A record whose masked_lm_ids width differs from masked_lm_positions.
  odd = str(tmp_path / "odd.tfrecord")
  ex = tf.train.Example.FromString(raw_first_record(records))
  del ex.features.feature["masked_lm_ids"].int64_list.value[-1]
  with tf.io.TFRecordWriter(odd) as w:
    w.write(ex.SerializeToString())
  with pytest.raises(pretraining_input.RecordError,
                     match=re.escape(odd) + ": record 0: masked_lm_ids has 9 values"):
    pretraining_input.inspect_records([odd], SEQ, PREDS)


def raw_first_record(path):
  return next(iter(tf.data.TFRecordDataset(path))).numpy()


def test_bad_input_is_refused_before_any_step(records, tmp_path):
  cfg = tiny()
  out = tmp_path / "out"
  # A vocab bigger than the config's vocab_size (the original trains on NaNs).
  small = dataclasses.replace(cfg, vocab_size=30000)
  with pytest.raises(ValueError, match=re.escape(VOCAB) + ".*30522 tokens.*vocab_size is 30000"):
    pretraining.check_inputs(small, params_for(records, out, vocab_file=VOCAB))
  # A token id in the first batch >= vocab_size (no vocab file given).
  first = read_records(records)[:8]
  top = int(max(max(r["input_ids"].max(), r["masked_lm_ids"].max()) for r in first))
  pretraining.check_inputs(dataclasses.replace(cfg, vocab_size=top + 1),
                           params_for(records, out))
  with pytest.raises(pretraining_input.RecordError,
                     match=re.escape(records) + ".*token id %d >= .*vocab_size %d" % (top, top)):
    pretraining.check_inputs(dataclasses.replace(cfg, vocab_size=top),
                             params_for(records, out))
  # max_seq_length above max_position_embeddings.
  with pytest.raises(ValueError, match="--max_seq_length 64 exceeds max_position_embeddings 32"):
    pretraining.check_inputs(dataclasses.replace(cfg, max_position_embeddings=32),
                             params_for(records, out))
  # --max_predictions_per_seq smaller than the records hold.
  p = dataclasses.replace(params_for(records, out), max_predictions_per_seq=5)
  with pytest.raises(pretraining_input.RecordError,
                     match=re.escape(records) + ".*hold 10 masked-LM predictions.*"
                     "--max_predictions_per_seq=5"):
    pretraining.check_inputs(cfg, p)
  # An empty glob.
  with pytest.raises(errors.InputError, match="nothing-here"):
    pretraining.check_inputs(cfg, params_for(str(tmp_path / "nothing-here*"), out))
  # A mismatched --init_checkpoint (hidden 64 vs 128): named, before any step.
  other = pretraining.build_pretrainer(dataclasses.replace(
      cfg, hidden_size=64, intermediate_size=256))
  prefix = tf.train.Checkpoint(encoder=other.encoder).write(str(tmp_path / "other" / "ckpt"))
  with pytest.raises(checkpoints.CheckpointError,
                     match=r"--init_checkpoint: checkpoint .*other/ckpt.* shape "
                     r"\(64,\) .* shape \(128,\) and name \S+"):
    jobs.run_pretraining(cfg, params_for(records, out, init_checkpoint=prefix,
                                                num_train_steps=2), tf.distribute.OneDeviceStrategy("/cpu:0"))
  assert tf.train.latest_checkpoint(str(out)) is None


def test_corrupt_record_mid_run_names_the_file(records, tmp_path):
  bad = str(tmp_path / "bad.tfrecord")
  open(bad, "wb").write(open(records, "rb").read()[:-40])
  out = tmp_path / "out"
  with pytest.raises(pretraining_input.RecordError,
                     match="--input_file: " + re.escape(bad) + ": record 34"):
    jobs.run_pretraining(
        tiny(), params_for(bad, out, num_train_steps=3, iterations_per_loop=3),
        tf.distribute.OneDeviceStrategy("/cpu:0"))
  assert tf.train.latest_checkpoint(str(out)) is None


def test_tool_keeps_the_original_flags():
  p = run_tool(["tools/run_pretraining.py", "--helpfull"], check=False)
  assert "run_pretraining.py:" in p.stdout, p.stderr[-2000:]  # absl's help exits 1
  flags = set(re.findall(r"--\[?(?:no)?\]?(\w+)", p.stdout))
  original = {"input_file", "output_dir", "bert_config_file", "init_checkpoint",
              "max_seq_length", "max_predictions_per_seq", "do_train", "do_eval",
              "train_batch_size", "eval_batch_size", "learning_rate",
              "num_train_steps", "num_warmup_steps", "save_checkpoints_steps",
              "iterations_per_loop", "max_eval_steps", "use_tpu", "tpu_name",
              "tpu_zone", "gcp_project", "master", "num_tpu_cores"}
  added = {"distribution_strategy", "optimizer", "num_accumulation_steps", "dtype",
           "jit_compile", "nsp", "dynamic", "vocab_file", "deterministic"}
  assert original | added <= flags, (original | added) - flags
  for enum in ("one_device|mirrored|multi_worker_mirrored|tpu",
               "adamw_original|adamw|lamb", "float32|mixed_bfloat16|mixed_float16|auto"):
    assert "<%s>" % enum in p.stdout


@pytest.mark.slow
def test_mirrored_and_accumulated_steps_equal_one_device_step(records):
  """2 replicas, or 2 micro-batches, take the one-device step (clipping binds),
  with the original optimizer and with ``adamw`` (both fused updates)."""
  p = run_tool(["tests/distributed_worker.py", "steps", records])
  r = json.loads(p.stdout.strip().splitlines()[-1])
  assert r["init_diff"] == 0.0
  assert r["grad_norm"] > 1.5  # global-norm clipping at 1.0 is active
  assert r["moved"] > 5e-3  # 3 steps at lr 2e-3 moved the weights
  assert r["mirrored_vs_one"] < 1e-5, r
  assert r["accumulated_vs_big_batch"] < 1e-5, r
  assert r["adamw_mirrored_vs_one"] < 1e-5 < r["adamw_vs_original"], r
  # Negative control: clipping per replica before the all-reduce (Keras'
  # own apply_gradients under Mirrored) takes a different step.
  assert r["keras_per_replica_clip_vs_one"] > 1e-4, r


def run_workers(records, out, npz_prefix, stop_at_step=0, traces=None):
  """Two MultiWorkerMirroredStrategy workers (127.0.0.1, ``TF_CONFIG``) of
  ``tests/distributed_worker.py`` pretraining the tiny BERT to step 4
  (stopped at ``stop_at_step`` when given), deterministic (no oneDNN
  kernels, as ``training.enable_determinism`` says: the tools set this
  themselves for ``--deterministic``), metrics logged after every step;
  worker i's final weights go to ``<npz_prefix><i>.npz`` and, with
  ``traces``, what it read and logged to ``traces[i]``. Returns the logs."""
  ports = free_ports(2)
  cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
  procs = []
  for i in range(2):
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": i}}))
    procs.append(subprocess.Popen(
        [sys.executable, "tests/distributed_worker.py", "worker", records, out,
         "%s%d.npz" % (npz_prefix, i), str(stop_at_step), "1", "1"]
        + ([traces[i]] if traces else []), cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  logs = [p.communicate(timeout=900)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], "\n".join(l[-3000:] for l in logs)
  return logs


@pytest.fixture(scope="module")
def multi_worker_run(records, tmp_path_factory):
  """One uninterrupted two-worker job (:func:`run_workers`, traced): the
  subject of the one-device comparison and the reference of the resume
  test; returns ``(folder, traces, logs)``."""
  root = tmp_path_factory.mktemp("multi_worker")
  traces = [str(root / ("trace%d.npz" % i)) for i in range(2)]
  logs = run_workers(records, str(root / "out"), str(root / "w"), traces=traces)
  return root, traces, logs


@pytest.mark.slow
def test_multi_worker_mirrored_equals_one_device(multi_worker_run, records, tmp_path):
  """Two MultiWorkerMirrored workers (127.0.0.1, ``TF_CONFIG``) through
  :func:`bert_tf.jobs.run_pretraining` take the one-device step: the
  weights after 4 steps and every step's logged losses equal a one-device
  run (the Mirrored test's reference, ``distributed_worker.train``) from
  the same initial weights on the same global batches (both workers'
  batches of each step, records of the file that differ between the
  workers)."""
  root, traces, logs = multi_worker_run
  out = str(root / "out")
  assert "step 4/4" in logs[0] and "step 4/4" in logs[1]
  w0, w1 = (np.load(str(root / ("w%d.npz" % i))) for i in range(2))
  assert int(w0["step"]) == int(w1["step"]) == 4
  assert len(w0.files) == 1 + len(
      pretraining.build_pretrainer(tiny()).trainable_variables)
  for k in w0.files:
    np.testing.assert_array_equal(w0[k], w1[k], err_msg=k)

  # The global batches: 4 records of the file per worker and step; the
  # workers read different records (one file, two pipelines: sharded by
  # record), not the same seeded stream twice.
  t0, t1 = (np.load(t) for t in traces)
  want = read_records(records)
  rows = {r["input_ids"].astype(np.int32).tobytes(): n for n, r in enumerate(want)}
  assert len(rows) == len(want) == 35
  for t in (t0, t1):
    assert t["batch/input_ids"].shape == (4, 4, SEQ)
    got = [rows[x.tobytes()] for x in t["batch/input_ids"].reshape(-1, SEQ)]
    for name in want[0]:
      np.testing.assert_array_equal(
          t["batch/" + name].reshape((16, -1)),
          np.stack([want[n][name] for n in got]).reshape((16, -1)), err_msg=name)
  for s in range(4):
    assert not np.array_equal(t0["batch/input_ids"][s], t1["batch/input_ids"][s]), s
  # Both workers started from the same weights and logged the same metrics.
  for k in t0.files:
    if not k.startswith("batch/"):
      np.testing.assert_array_equal(t0[k], t1[k], err_msg=k)
  np.testing.assert_array_equal(t0["metric/step"], [1, 2, 3, 4])

  # The one-device reference on the global batches. Step 1's losses, before
  # any update, also show that the traced batches are the ones the job read.
  ref_path = str(tmp_path / "reference.npz")
  run_tool(["tests/distributed_worker.py", "reference", traces[0], traces[1], ref_path],
           env={"TF_ENABLE_ONEDNN_OPTS": "0"})  # as the workers
  ref = np.load(ref_path)
  names = sorted(k for k in w0.files if k != "step")
  assert sorted(k for k in ref.files if not k.startswith("metric/")) == names
  init = {k: t0["init/" + k] for k in names}
  moved = max(float(np.abs(w0[k] - init[k]).max()) for k in names)
  assert moved > 1e-3, moved  # 4 steps at lr 1e-3 moved the weights
  diff = {k: float(np.abs(w0[k] - ref[k]).max()) for k in names}
  assert max(diff.values()) < 1e-5, sorted(diff.items(), key=lambda kv: -kv[1])[:5]
  for name in ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
               "next_sentence_accuracy", "learning_rate"):
    np.testing.assert_allclose(t0["metric/" + name], ref["metric/" + name],
                               rtol=1e-5, atol=1e-6, err_msg=name)
  assert t0["metric/masked_lm_loss"][0] > 9  # random init: ~ln(30522)

  # The chief alone wrote checkpoints (every listed one complete, the last
  # at step 4); the other worker's temp dir is gone; every worker saved its
  # own data position (test_multi_worker_stop_and_resume_is_bit_identical).
  state = tf.train.get_checkpoint_state(out)
  assert state.model_checkpoint_path.endswith("ckpt-4")
  ckpts = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
  for name in ckpts:
    assert checkpoint_values(os.path.join(out, name))
  assert sorted(os.listdir(out)) == sorted(
      ["bert_config.json", "checkpoint", "train", "data-worker-0", "data-worker-1",
       "train_flags.json", "determinism.json"] + [n + s for n in ckpts
                              for s in (".data-00000-of-00001", ".index")])
  reader = tf.train.load_checkpoint(os.path.join(out, "ckpt-4"))
  key = [k for k in reader.get_variable_to_shape_map()
         if k.startswith("encoder/") and "word_embeddings" in k and "OPTIMIZER" not in k]
  assert key, "no word embeddings in the chief's checkpoint"
  emb = [k for k in w0.files if k.endswith("word_embeddings")][0]
  np.testing.assert_array_equal(reader.get_tensor(key[0]), w0[emb])


@pytest.mark.slow
def test_multi_worker_stop_and_resume_is_bit_identical(multi_worker_run, records, tmp_path):
  """A multi-worker job stopped and restarted resumes every worker's data
  position: the job of :func:`multi_worker_run` stopped at step 2 and
  started again with the same command. Every worker saves its own
  ``tf.data`` iterator beside the chief's checkpoint
  (``data-worker-<i>/``), so the restarted job reads the batches the
  uninterrupted one read and ends with bit-identical weights. (Before, only
  the chief's position could be saved and a restarted job re-read its data
  from the start: different batches, different weights.)"""
  root, _, _ = multi_worker_run
  resumed = str(tmp_path / "resumed")
  logs = run_workers(records, resumed, str(tmp_path / "first"), stop_at_step=2)
  assert all("step 2/4" in l for l in logs)
  assert all("step 3/4" not in l for l in logs)
  assert {"data-worker-0", "data-worker-1"} <= set(os.listdir(resumed))
  logs = run_workers(records, resumed, str(tmp_path / "resumed"))
  for i, log in enumerate(logs):
    assert "worker %d: restored its data position at step 2" % i in log, log[-3000:]
    assert "step 4/4" in log
  for i in range(2):
    a = np.load(str(root / ("w%d.npz" % i)))
    b = np.load(str(tmp_path / ("resumed%d.npz" % i)))
    assert int(a["step"]) == int(b["step"]) == 4
    differ = [k for k in a.files if a[k].tobytes() != b[k].tobytes()]
    assert not differ, "worker %d: %d of %d tensors differ: %s" % (
        i, len(differ), len(a.files), differ[:5])


def checkpoint_values(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k != "_CHECKPOINTABLE_OBJECT_GRAPH" and not k.startswith("iterator")
          and not k.startswith("save_counter")}


@pytest.mark.slow
def test_sigkill_at_a_random_step_then_resume_is_bit_identical(records, tmp_path):
  steps = 10
  common = ["tools/run_pretraining.py", "--input_file=" + records,
            "--bert_config_file=" + TINY_CONFIG, "--do_train", "--train_batch_size=8",
            "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % PREDS,
            "--learning_rate=2e-3", "--num_warmup_steps=2",
            "--num_train_steps=%d" % steps, "--iterations_per_loop=1",
            "--save_checkpoints_steps=3", "--deterministic", "--seed=7"]
  # No environment override: --deterministic itself turns oneDNN off before
  # TensorFlow loads (tools/_startup.py; with oneDNN, one run in five once
  # differed by one ulp in one optimizer slot on a loaded machine).
  det_env = {"TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1")}
  whole = str(tmp_path / "whole")
  first = run_tool(common + ["--output_dir=" + whole, "--do_eval", "--max_eval_steps=2"],
                   env=det_env)
  assert "step %d/%d" % (steps, steps) in first.stdout

  killed = str(tmp_path / "killed")
  kill_at = random.randint(4, 8)
  proc = subprocess.Popen(
      [sys.executable] + common + ["--output_dir=" + killed], cwd=ROOT,
      env=dict(os.environ, PYTHONUNBUFFERED="1", **det_env),
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  seen = []
  for line in proc.stdout:
    seen.append(line)
    m = re.match(r"step (\d+)/", line)
    if m and int(m.group(1)) >= kill_at:
      proc.send_signal(signal.SIGKILL)
      break
  proc.wait(timeout=60)
  assert proc.returncode == -signal.SIGKILL, "".join(seen)
  listed = tf.train.get_checkpoint_state(killed).all_model_checkpoint_paths
  assert listed, "no checkpoint before the kill at step %d" % kill_at
  for path in listed:  # every listed checkpoint is complete
    assert checkpoint_values(path)
  resumed_from = int(listed[-1].rsplit("-", 1)[1])
  assert resumed_from < steps
  second = run_tool(common + ["--output_dir=" + killed], env=det_env)
  assert "at step %d" % resumed_from in second.stdout, second.stdout
  a = checkpoint_values(os.path.join(whole, "ckpt-%d" % steps))
  b = checkpoint_values(os.path.join(killed, "ckpt-%d" % steps))
  assert sorted(a) == sorted(b) and len(a) > 100
  assert any("seed_generator" in k or k.startswith("rng/") for k in a)
  differ = ["%s (max diff %g)" % (k, np.abs(a[k].astype(np.float64) - b[k]).max())
            for k in sorted(a) if a[k].tobytes() != b[k].tobytes()]
  assert not differ, "killed at step %d, resumed from %d: %d of %d differ: %s" % (
      kill_at, resumed_from, len(differ), len(a), differ[:10])

  # The uninterrupted run's outputs: eval_results.txt and TensorBoard scalars.
  results = dict(l.split(" = ") for l in
                 open(os.path.join(whole, "eval_results.txt")).read().splitlines())
  assert set(results) == {"global_step", "masked_lm_accuracy", "masked_lm_loss",
                          "next_sentence_accuracy", "next_sentence_loss"}
  assert results["global_step"] == str(steps)
  tags = {}
  for sub in ("train", "eval"):
    for f in os.listdir(os.path.join(whole, sub)):
      for e in tf.compat.v1.train.summary_iterator(os.path.join(whole, sub, f)):
        for v in e.summary.value:
          tags.setdefault(sub, set()).add(v.tag)
  assert {"masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
          "learning_rate", "sequences_per_second"} <= tags["train"]
  assert {"masked_lm_loss", "next_sentence_accuracy"} <= tags["eval"]


@pytest.mark.slow
def test_mixed_float16_accumulation_no_nsp_trains(records, tmp_path):
  """--dtype=mixed_float16 (dynamic loss scaling),
  --num_accumulation_steps=2, --nsp=false: a finite step, checkpointed."""
  import keras  # pylint: disable=g-import-not-at-top
  seen = {}

  def grab(model, optimizer):
    seen.update(policy=model.dtype_policy.name, optimizer=optimizer,
                weights=[v.numpy() for v in model.trainable_variables])
  out = tmp_path / "out"
  try:
    results = jobs.run_pretraining(
        tiny(), params_for(records, out, num_train_steps=2, iterations_per_loop=2,
                           num_warmup_steps=1, learning_rate=1e-3,
                           dtype="mixed_float16", nsp=False,
                           num_accumulation_steps=2),
        tf.distribute.OneDeviceStrategy("/cpu:0"), on_finish=grab, print_fn=lambda s: None)
  finally:
    keras.config.set_dtype_policy("float32")
  assert seen["policy"] == "mixed_float16"
  assert isinstance(seen["optimizer"], keras.optimizers.LossScaleOptimizer)
  assert int(seen["optimizer"].iterations.numpy()) == 2  # no step skipped
  assert all(np.isfinite(w).all() for w in seen["weights"])
  assert np.isfinite(results["train_masked_lm_loss"]) and results["train_masked_lm_loss"] > 5
  assert not any("next_sentence" in k for k in results)
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-2")


def test_accumulated_gradient_is_the_big_batch_gradient(records):
  """k micro-batches (k = 2, 4) give the one-big-batch gradient, not 1/k of it.

  The Mirrored/accumulation test above cannot see a gradient off by a
  constant factor: clipping binds there and Adam is invariant to the
  gradient's scale. Here the optimizer is plain SGD at learning rate 1
  without clipping, so each update IS minus the gradient the Trainer
  applies (summed over micro-batches, before any clipping); its global norm
  and every tensor must equal the big batch's gradient from one
  ``GradientTape`` (the loss of :func:`pretraining.pretraining_metrics`).
  Both Trainer paths: with the loss normalizers (pretraining) and without
  (a per-example mean loss, here the next-sentence cross-entropy, divided
  by k inside the Trainer)."""
  import keras  # pylint: disable=g-import-not-at-top
  from bert_tf import training  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import models  # pylint: disable=g-import-not-at-top
  batch = next(iter(pretraining_input.pretraining_dataset(
      records, 8, SEQ, PREDS, is_training=False)))
  cfg = tiny()
  cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
  one = tf.distribute.OneDeviceStrategy("/cpu:0")
  keras.utils.set_random_seed(7)
  with one.scope():
    model = pretraining.build_pretrainer(cfg)
  model(batch, training=False)
  variables = model.trainable_variables
  init = [v.numpy() for v in variables]

  def nsp_mean(features):
    logits = tf.cast(model(features, training=True)["next_sentence_logits"], tf.float32)
    labels = tf.reshape(features["next_sentence_labels"], [-1])
    n = tf.cast(tf.shape(logits)[0], tf.float32)
    return models.next_sentence_loss(logits, labels) / n, {"examples": n}

  def full_loss(features, totals=None):
    return pretraining.pretraining_metrics(model(features, training=True), features,
                                           True, totals)

  def reset():
    for v, w in zip(variables, init):
      v.assign(w)

  def reference(loss_fn):
    reset()
    with tf.GradientTape() as tape:
      loss, _ = loss_fn(batch)
    return [np.zeros_like(w) if g is None else tf.convert_to_tensor(g).numpy()
            for g, w in zip(tape.gradient(loss, variables), init)]

  def applied(loss_fn, k, normalizers):
    reset()
    with one.scope():
      opt = keras.optimizers.SGD(learning_rate=1.0)
      opt.build(variables)
    trainer = training.Trainer(
        one, model, opt, loss_fn, num_accumulation_steps=k,
        normalizer_fn=pretraining.loss_normalizers if normalizers else None)
    trainer.train(iter(tf.data.Dataset.from_tensors(batch)), 1, steps_per_loop=1)
    assert int(opt.iterations.numpy()) == 1
    return [w - v.numpy() for v, w in zip(variables, init)]

  def norm(gs):
    return float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in gs)))

  for loss_fn, normalizers, ks in ((full_loss, True, (2, 4)), (nsp_mean, False, (2,))):
    want = reference(loss_fn)
    assert norm(want) > 0.1, norm(want)
    for k in ks:
      got = applied(loss_fn, k, normalizers)
      rel = abs(norm(got) - norm(want)) / norm(want)
      assert rel < 1e-4, (loss_fn.__name__, k, norm(got), norm(want))
      for g, w, v, w0 in zip(got, want, variables, init):
        # float32 rounding of ``w0 - g`` itself (2 ulps of the weight), and
        # of a gradient that is 0 up to noise (the attention key biases).
        atol = (1e-5 * np.abs(w).max() + 2.5e-7 * np.abs(w0).max()
                + 1e-7 * norm(want))
        np.testing.assert_allclose(g, w, rtol=0, atol=atol,
                                   err_msg="%s k=%d %s" % (loss_fn.__name__, k, v.path))
