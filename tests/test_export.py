"""Exports are servable: fresh Python process, C loader, saved_model_cli, bad input.

One small fine-tuned run (tiny BERT, random init, 2 steps on a real
movie-review slice, through ``tools/run_classifier.py``) is exported four
ways: ``tools/export_saved_model.py --what=classifier`` (single sentence),
and in-process the pair classifier, the preprocessor and the encoder. The
reference outputs are computed in this process from the checkpoint and the
project's ``BertPreprocessor``, not through the SavedModel.
"""

import base64
import json
import os
import subprocess
import sys

import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest

import conftest
import tensorflow as tf
import tensorflow_text

from bert_tf.tasks import classification as classifier
from bert_tf.tasks import fine_tuning
from bert_tf import config as config_lib
from bert_tf import preprocessing
from conftest import MOVIE_DIR, TINY_CONFIG, VOCAB, copy_slice, run_tool
from fuzz_util import AWKWARD, SLOW_MAX_CHARS, fuzz_settings, slow_fuzz, unicode_strings
from bert_tf.export import c_api
from bert_tf.export import fine_tuned
from bert_tf.export import saved_model
from bert_tf.export import serving_ops
from bert_tf.export import warmup

SEQ = 32
LABELS = ["0", "1"]


def _dev_sentences(n):
  with open(os.path.join(MOVIE_DIR, "dev.tsv"), encoding="utf-8") as f:
    return [l.split("\t")[0] for l in f.read().splitlines()[1:n + 1]]


# Real sentences plus the awkward ones: empty, whitespace-only, invalid
# UTF-8, NUL/U+FFFD/control characters, CJK + accents, longer than SEQ.
TEXTS = [s.encode() for s in _dev_sentences(5)] + [
    b"", b" \t\n ", b"\xff\xfe good \xc3 movie \x80", "caf\u00e9 \u535a\u63a8 \x00\ufffd na\u00efve".encode(),
    ("It's not a masterpiece, but it is never boring. " * 20).encode()]
TEXTS_B = [b"yes.", b"", b"\xc3\x28", b"a reply " * 50] + [b"ok"] * (len(TEXTS) - 4)

FRESH_PROCESS = r"""
import base64, json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
assert not any(m.split('.')[0] in ('bert_tf', 'export', 'tensorflow_serving')
               for m in sys.modules), 'project code imported'
jobs = json.load(open(sys.argv[1]))
results = []
for job in jobs:
  fn = tf.saved_model.load(job['path']).signatures[job['signature']]
  args = {}
  for k, v in job['inputs'].items():
    if v['dtype'] == 'string':
      args[k] = tf.constant([base64.b64decode(s) for s in v['values']], tf.string)
    else:
      args[k] = tf.constant(v['values'], tf.int32)
  out = fn(**args)
  res = {}
  for k, t in out.items():
    a = t.numpy()
    if t.dtype == tf.string:
      res[k] = {'shape': list(a.shape), 'values': [base64.b64encode(x).decode() for x in a.ravel()]}
    else:
      res[k] = {'shape': list(a.shape), 'values': a.ravel().tolist()}
  results.append(res)
json.dump(results, open(sys.argv[2], 'w'))
"""


def _string_input(values):
  return {"dtype": "string", "values": [base64.b64encode(v).decode() for v in values]}


def _decode(res):
  out = {}
  for k, v in res.items():
    if v["values"] and isinstance(v["values"][0], str):
      out[k] = np.array([base64.b64decode(x) for x in v["values"]],
                        dtype=object).reshape(v["shape"])
    else:
      out[k] = np.array(v["values"]).reshape(v["shape"])
  return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """A fine-tuned run dir, its four exports, and in-process references."""
  tmp = tmp_path_factory.mktemp("export")
  data = str(tmp / "sst")
  copy_slice(MOVIE_DIR + "/train.tsv", data + "/train.tsv", every=300)
  ft = str(tmp / "ft")
  run_tool(["tools/run_classifier.py", "--task_name=sst-2", "--do_train",
            "--data_dir=" + data, "--vocab_file=" + VOCAB,
            "--bert_config_file=" + TINY_CONFIG, "--max_seq_length=%d" % SEQ,
            "--train_batch_size=16", "--num_train_epochs=1",
            "--learning_rate=1e-3", "--output_dir=" + ft])
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + ft,
                "--export_dir=" + str(tmp / "single"), "--what=classifier"])
  assert "TF Serving >= 2.20" in p.stdout, p.stdout
  # Reference model: read straight from the checkpoint (not export.fine_tuned).
  cfg = config_lib.BertConfig.from_json_file(os.path.join(ft, "bert_config.json"))
  model = classifier.build_classifier(cfg, len(LABELS))
  ckpt = (tf.train.latest_checkpoint(os.path.join(ft, "best")) or  # best dev model
          tf.train.latest_checkpoint(ft))
  tf.train.Checkpoint(model=model).read(ckpt).expect_partial().assert_existing_objects_matched()
  pre = preprocessing.BertPreprocessor(VOCAB, True, SEQ)
  restored = fine_tuned.load_fine_tuned(ft)
  assert (restored.labels, restored.is_pair, restored.is_regression) == (LABELS, False, False)
  paths = {
      "single": os.path.join(str(tmp / "single"), "1"),
      "pair": saved_model.export_classifier(restored.model, restored.preprocessor,
                                            LABELS, str(tmp / "pair"), "pairs", True),
      "preprocessor": saved_model.export_preprocessor(restored.preprocessor,
                                                      str(tmp / "pre")),
      "encoder": saved_model.export_encoder(restored.model.encoder, str(tmp / "enc"),
                                            max_seq_length=SEQ),
  }
  return {"ft": ft, "tmp": tmp, "data": data, "paths": paths, "model": model, "pre": pre,
          "graph_pre": conftest.graph_preprocessor(pre)}


def reference(run, texts_a, texts_b=None):
  """In-process probabilities/logits/label_ids/labels (the serving recipe)."""
  feats = preprocessing.trim_to_longest(run["graph_pre"](
      tf.constant(texts_a, tf.string),
      None if texts_b is None else tf.constant(texts_b, tf.string)))
  # The model as the task's evaluation runs it (traced once for any shape;
  # eager, each call re-dispatches every op).
  logits = fine_tuning.predict_step(run["model"])(feats).numpy()
  probs = tf.nn.softmax(logits).numpy()
  ids = logits.argmax(-1)  # the export takes the argmax of the logits
  # One window each, cut where the untruncated packing is longer than SEQ.
  lengths = preprocessing.token_lengths(run["pre"], texts_a, texts_b)
  return {"probabilities": probs, "logits": logits, "label_ids": ids,
          "labels": np.array([LABELS[i].encode() for i in ids], dtype=object),
          "num_windows": np.ones(len(ids), np.int32), "truncated": lengths > SEQ}


@pytest.fixture(scope="module")
def fresh(run):
  """Outputs of every export in a fresh process importing only TF + tf-text."""
  feats = run["pre"](tf.constant(TEXTS, tf.string))
  enc_in = {"input_word_ids": feats["input_ids"].numpy().tolist(),
            "input_mask": feats["input_mask"].numpy().tolist(),
            "input_type_ids": feats["segment_ids"].numpy().tolist()}
  jobs = [
      {"path": run["paths"]["single"], "signature": "serving_default",
       "inputs": {"text": _string_input(TEXTS)}},
      {"path": run["paths"]["pair"], "signature": "serving_default",
       "inputs": {"text_a": _string_input(TEXTS), "text_b": _string_input(TEXTS_B)}},
      {"path": run["paths"]["preprocessor"], "signature": "serving_default",
       "inputs": {"text": _string_input(TEXTS)}},
      {"path": run["paths"]["preprocessor"], "signature": "pair",
       "inputs": {"text_a": _string_input(TEXTS), "text_b": _string_input(TEXTS_B)}},
      {"path": run["paths"]["encoder"], "signature": "serving_default",
       "inputs": {k: {"dtype": "int32", "values": v} for k, v in enc_in.items()}},
  ]
  spec, out = str(run["tmp"] / "jobs.json"), str(run["tmp"] / "fresh.json")
  with open(spec, "w") as f:
    json.dump(jobs, f)
  run_tool(["-c", FRESH_PROCESS, spec, out])
  with open(out) as f:
    return [_decode(r) for r in json.load(f)]


@pytest.mark.slow
def test_fresh_process_matches_in_process(run, fresh):
  single, pair, pre_single, pre_pair, enc = fresh
  for got, want in ((single, reference(run, TEXTS)),
                    (pair, reference(run, TEXTS, TEXTS_B))):
    assert set(got) == {"probabilities", "logits", "label_ids", "labels", "num_windows",
                        "truncated"}
    # One window each; a text cut at max_seq_length says so.
    assert list(got["num_windows"]) == [1] * len(got["labels"])
    assert got["probabilities"].shape == (len(TEXTS), 2)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-6)
    np.testing.assert_allclose(got["logits"], want["logits"], atol=1e-6, rtol=1e-6)
    np.testing.assert_array_equal(got["label_ids"], want["label_ids"])
    np.testing.assert_array_equal(got["labels"], want["labels"])
  # The pair really uses text_b: different answers from the single model.
  assert np.abs(pair["logits"] - single["logits"]).max() > 1e-4
  for got, b in ((pre_single, None), (pre_pair, TEXTS_B)):
    want = run["pre"](tf.constant(TEXTS), None if b is None else tf.constant(b))
    assert got["input_word_ids"].shape == (len(TEXTS), SEQ)
    for hub, ours in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                      ("input_type_ids", "segment_ids")):
      np.testing.assert_array_equal(got[hub], want[ours].numpy())
      np.testing.assert_array_equal(got[ours], want[ours].numpy())
  assert pre_pair["input_type_ids"].max() == 1 and pre_single["input_type_ids"].max() == 0
  feats = run["pre"](tf.constant(TEXTS))
  want = run["model"].encoder(feats, training=False)
  # Hidden states are LayerNorm outputs of magnitude up to ~4, where a float32
  # ulp is ~5e-7: the SavedModel graph (grappler fusions) and the eager model
  # round differently by a few ulp (CI saw 1.5e-6 at a value of 1.99), so these
  # get a relative term too. A wrong weight or mask moves them by >1e-2.
  tol = dict(atol=1e-6, rtol=2e-6)
  np.testing.assert_allclose(enc["sequence_output"], want["sequence_output"], **tol)
  np.testing.assert_allclose(enc["pooled_output"], want["pooled_output"], **tol)
  layers = sorted(k for k in enc if k.startswith("encoder_outputs_"))
  assert len(layers) == len(want["encoder_outputs"]) == 2
  for i, w in enumerate(want["encoder_outputs"]):
    np.testing.assert_allclose(enc["encoder_outputs_%d" % i], w, **tol)


def _c_op_libraries(path, leave_out=()):
  """Paths of the tensorflow-text op libraries the export at ``path`` lists
  in its metadata (``op_libraries``), for the C loader; ``leave_out``: names
  to drop."""
  ops_dir = os.path.join(os.path.dirname(tensorflow_text.__file__), "python", "ops")
  return [os.path.join(ops_dir, l) for l in saved_model.read_metadata(path)["op_libraries"]
          if l not in leave_out]


def _c_serve(exe, path, inputs, libraries, work):
  """Runs the C loader on ``path``'s serving_default; returns {output: array}."""
  in_names, out_names = c_api.signature_tensors(path)
  lines = ["model " + path] + ["lib " + l for l in libraries]
  for key, values in inputs.items():
    fname = os.path.join(work, "in_%s.bin" % key)
    with open(fname, "wb") as f:
      for v in values:
        f.write(b"%d\n" % len(v) + v)
    op, idx = in_names[key].split(":")
    lines.append("input %s %s %s" % (op, idx, fname))
  for key, name in sorted(out_names.items()):
    op, idx = name.split(":")
    lines.append("output %s %s %s" % (key, op, idx))
  spec = os.path.join(work, "spec.txt")
  with open(spec, "w") as f:
    f.write("\n".join(lines) + "\n")
  p = subprocess.run([exe, spec], capture_output=True, timeout=600, env={})
  if p.returncode:
    raise AssertionError("serve failed (%d): %s" % (p.returncode, p.stderr.decode()[-3000:]))
  out = {}
  for line in p.stdout.decode().splitlines():
    head, _, values = line.partition(" : ")
    label, dtype, rank, *dims = head.split()
    assert int(rank) == len(dims)
    vals = values.split()
    if int(dtype) == 7:  # TF_STRING, hex
      arr = np.array([b"" if v == "-" else bytes.fromhex(v) for v in vals], dtype=object)
    else:
      arr = np.array([float(v) for v in vals])
    out[label] = arr.reshape([int(d) for d in dims])
  return out


@pytest.mark.slow
def test_c_loader_no_python_matches(run, fresh, tmp_path):
  """TF_LoadLibrary + TF_LoadSessionFromSavedModel + raw TF_STRING inputs, no Python."""
  exe = conftest.compile_c_loader(str(tmp_path))
  for name, inputs, want in (
      ("single", {"text": TEXTS}, fresh[0]),
      ("pair", {"text_a": TEXTS, "text_b": TEXTS_B}, fresh[1])):
    path = run["paths"][name]
    got = _c_serve(exe, path, inputs, _c_op_libraries(path), str(tmp_path))
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-6)
    np.testing.assert_allclose(got["logits"], want["logits"], atol=1e-6, rtol=1e-6)
    np.testing.assert_array_equal(got["label_ids"], want["label_ids"])
    np.testing.assert_array_equal(got["labels"], want["labels"])
  # Without the trimmer's library the graph cannot run: the list is needed.
  path = run["paths"]["single"]
  libs = _c_op_libraries(path, leave_out=("_trimmer_ops.so",))
  with pytest.raises(AssertionError, match="RoundRobinTrim"):
    _c_serve(exe, path, {"text": TEXTS[:2]}, libs, str(tmp_path))


SHOW_ALL_MARK = "=== saved_model_cli show --all\n"
# ``saved_model_cli show --dir D --all`` for each D of argv[2:], run as the
# wheel's console script (argv[1]) runs: its ``main`` (absl ``app.run``,
# which exits).
SHOW_ALL = r"""
import runpy, sys
cli, dirs = sys.argv[1], sys.argv[2:]
for d in dirs:
  sys.argv = [cli, "show", "--dir", d, "--all"]
  print("=== saved_model_cli show --all", flush=True)
  try:
    runpy.run_path(cli, run_name="__main__")
  except SystemExit as e:
    assert not e.code, (d, e.code)
  sys.stdout.flush()
"""


@pytest.mark.slow
def test_saved_model_cli_lists_signatures(run):
  """``saved_model_cli show --all`` (the wheel's CLI) on each export."""
  cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
  expect = {
      "single": ["signature_def['serving_default']", "inputs['text']",
                 "Method name is: tensorflow/serving/predict",
                 "outputs['probabilities']", "outputs['logits']",
                 "outputs['label_ids']", "outputs['labels']", "dtype: DT_STRING"],
      "pair": ["inputs['text_a']", "inputs['text_b']", "outputs['probabilities']"],
      "preprocessor": ["signature_def['serving_default']", "signature_def['pair']",
                       "inputs['text_b']", "outputs['input_word_ids']",
                       "outputs['input_type_ids']", "outputs['segment_ids']"],
      "encoder": ["inputs['input_word_ids']", "inputs['input_mask']",
                  "inputs['input_type_ids']", "outputs['sequence_output']",
                  "outputs['pooled_output']", "outputs['encoder_outputs_1']"],
  }
  # The CLI's own entry point, once per export, in one process (one
  # TensorFlow start-up instead of four).
  names = list(expect)
  proc = subprocess.run([sys.executable, "-c", SHOW_ALL, cli] + [run["paths"][n] for n in names],
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  outs = proc.stdout.split(SHOW_ALL_MARK)[1:]
  assert len(outs) == len(names), proc.stdout[-2000:]
  for name, out in zip(names, outs):
    for s in expect[name]:
      assert s in out, (name, s, out)


NON_CORE = r"""
import json, sys
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
assert 'tensorflow_text' not in sys.modules
ops = json.loads(sys.argv[1])
print(json.dumps(sorted(o for o in ops if op_def_registry.get(o) is None)))
"""


def test_metadata_lists_every_non_core_op(run):
  meta = saved_model.read_metadata(run["paths"]["single"])
  assert meta["task"] == "sst-2" and meta["labels"] == LABELS
  assert meta["max_seq_length"] == SEQ and meta["is_pair"] is False
  assert meta["signatures"]["serving_default"]["inputs"] == ["text"]
  assert saved_model.read_metadata(run["paths"]["pair"])["is_pair"] is True
  # Non-core = not registered in a TensorFlow process without tensorflow_text.
  all_ops = sorted(set().union(*(serving_ops.graph_ops(p) for p in run["paths"].values())))
  missing = json.loads(run_tool(["-c", NON_CORE, json.dumps(all_ops)]).stdout.splitlines()[-1])
  listed = set()
  for name, path in run["paths"].items():
    meta = saved_model.read_metadata(path)
    ops = {o["op"] for o in meta["custom_ops"]}
    assert ops == set(serving_ops.graph_ops(path)) & set(missing), name
    listed |= ops
    for o in meta["custom_ops"]:
      assert o["min_tf_serving"] and o["source"] and o["library"].endswith(".so")
  assert listed == set(missing)
  assert {"WordpieceTokenizeWithOffsets", "TFText>RoundRobinTrim"} <= listed
  assert saved_model.read_metadata(run["paths"]["single"])["min_tf_serving_version"] == "2.20"
  enc = saved_model.read_metadata(run["paths"]["encoder"])
  assert enc["custom_ops"] == [] and enc["min_tf_serving_version"] == "any"


def test_warmup_requests_parse_and_run(run):
  apis = conftest.require("tensorflow_serving.apis.prediction_log_pb2")
  for name, signatures in (("single", {"serving_default": ["text"]}),
                           ("pair", {"serving_default": ["text_a", "text_b"]}),
                           ("preprocessor", {"serving_default": ["text"],
                                             "pair": ["text_a", "text_b"]}),
                           ("encoder", {"serving_default": ["input_mask",
                                                            "input_type_ids",
                                                            "input_word_ids"]})):
    path = run["paths"][name]
    loaded = tf.saved_model.load(path)
    records = list(tf.data.TFRecordDataset(
        os.path.join(path, "assets.extra", warmup.WARMUP_FILE)))
    assert len(records) == len(signatures)
    for r in records:
      log = apis.PredictionLog.FromString(r.numpy())
      assert log.WhichOneof("log_type") == "predict_log"
      req = log.predict_log.request
      sig = req.model_spec.signature_name
      assert sorted(req.inputs) == signatures.pop(sig)
      args = {k: tf.constant(tf.make_ndarray(v)) for k, v in req.inputs.items()}
      out = loaded.signatures[sig](**args)  # the request really runs
      assert all(v.shape[0] == args[sorted(args)[0]].shape[0] for v in out.values())
    first = apis.PredictionLog.FromString(records[0].numpy()).predict_log.request.inputs
    texts = tf.make_ndarray(first["text" if name == "single" else "text_b"]).tolist() \
        if name in ("single", "pair") else None
    if name == "single":
      # The run's own examples (its first training rows) and an empty string.
      with open(os.path.join(run["data"], "train.tsv"), encoding="utf-8") as f:
        rows = [l.split("\t")[0] for l in f.read().splitlines()[1:4]]
      assert texts == [t.encode() for t in rows] + [b""]
    if name == "pair":  # an export given no data: the module's sentences
      assert texts[:2] == [s.encode() for s in saved_model.WARMUP_REPLIES[:2]]


@pytest.fixture(scope="module")
def serving(run):
  """The single and pair classifier signatures, loaded in this process."""
  return {n: tf.saved_model.load(run["paths"][n]).signatures["serving_default"]
          for n in ("single", "pair")}


def test_bad_input_through_signature(run, serving):
  single, pair = serving["single"], serving["pair"]
  probs = lambda texts: single(text=tf.constant(texts, tf.string))["probabilities"].numpy()
  model = run["model"]

  def from_ids(ids):
    ids = tf.constant([ids], tf.int32)
    feats = {"input_ids": ids, "input_mask": tf.ones_like(ids),
             "segment_ids": tf.zeros_like(ids)}
    return tf.nn.softmax(model(feats, training=False)).numpy()

  cls, sep, unk = 101, 102, 100  # uncased_vocab.txt
  # Empty and whitespace-only: [CLS] [SEP].
  got = probs([b"", b"   ", b"\t\n\r \xc2\xa0"])
  for row in got:
    np.testing.assert_allclose(row, from_ids([cls, sep])[0], atol=1e-6)
  # Invalid UTF-8 bytes are dropped (replaced by U+FFFD, then deleted).
  np.testing.assert_allclose(probs([b"\xff good \xc3 movie \x80"]), probs([b"good movie"]),
                             atol=1e-6)
  # 1 MB strings: many words are truncated to SEQ - 2 tokens; one 1 MB word
  # (over the 200-byte word limit) is [UNK].
  mb = 1 << 20
  np.testing.assert_allclose(probs([b"film " * (mb // 5)]), probs([b"film " * (SEQ - 2)]),
                             atol=1e-6)
  np.testing.assert_allclose(probs([b"a" * mb]), from_ids([cls, unk, sep]), atol=1e-6)
  # Batch of 0.
  out = single(text=tf.constant([], tf.string))
  assert out["probabilities"].shape == (0, 2) and out["labels"].shape == (0,)
  out = pair(text_a=tf.constant([], tf.string), text_b=tf.constant([], tf.string))
  assert out["probabilities"].shape == (0, 2)
  # Pair inputs of different lengths: a clear INVALID_ARGUMENT.
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="text_a and text_b must hold the same number of strings"):
    pair(text_a=tf.constant(["a", "b"]), text_b=tf.constant(["c"]))
  # Another rank (not enforced at run time by signatures or TF Serving) is
  # flattened: [2, 1] means the same two strings; a scalar is a batch of 1.
  np.testing.assert_allclose(probs([[b"good movie"], [b""]]), probs([b"good movie", b""]),
                             atol=1e-6)
  np.testing.assert_allclose(single(text=tf.constant(b"good movie"))["probabilities"],
                             probs([b"good movie"]), atol=1e-6)
  got = pair(text_a=tf.constant([["a"], ["b"]]), text_b=tf.constant(["c", "d"]))
  assert got["probabilities"].shape == (2, 2)


def test_encoder_rejects_bad_ids(run):
  fn = tf.saved_model.load(run["paths"]["encoder"]).signatures["serving_default"]
  ok = tf.zeros([2, 4], tf.int32)
  with pytest.raises(tf.errors.InvalidArgumentError, match="input_mask must have"):
    fn(input_word_ids=ok, input_mask=tf.zeros([2, 3], tf.int32), input_type_ids=ok)
  long = tf.zeros([1, 513], tf.int32)
  with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings"):
    fn(input_word_ids=long, input_mask=long, input_type_ids=long)
  with pytest.raises(tf.errors.InvalidArgumentError):
    fn(input_word_ids=tf.fill([2, 4], 10 ** 6), input_mask=ok, input_type_ids=ok)


@pytest.mark.slow
def test_regression_export_returns_predictions(run, tmp_path):
  """STS-B style: one output, ``predictions`` float32 [B], labels may be None."""
  cfg = config_lib.BertConfig.from_json_file(TINY_CONFIG)
  model = classifier.build_classifier(cfg, 1)
  path = saved_model.export_classifier(model, run["pre"], None, str(tmp_path / "r"),
                                       "sts-b", is_pair=True, is_regression=True)
  fn = tf.saved_model.load(path).signatures["serving_default"]
  a, b = [b"A man is playing a flute.", b"", b"\xff"], [b"A man plays a flute.", b"x", b""]
  out = fn(text_a=tf.constant(a), text_b=tf.constant(b))
  assert set(out) == {"predictions", "num_windows", "truncated"}
  assert out["predictions"].dtype == tf.float32
  feats = preprocessing.trim_to_longest(run["pre"](tf.constant(a), tf.constant(b)))
  np.testing.assert_allclose(out["predictions"].numpy(),
                             model(feats, training=False).numpy()[:, 0], atol=1e-6)
  meta = saved_model.read_metadata(path)
  assert meta["is_regression"] and meta["labels"] is None
  with pytest.raises(ValueError, match="labels are required"):
    saved_model.export_classifier(model, run["pre"], None, str(tmp_path / "r2"))


def test_export_tool_errors(run, tmp_path):
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + str(tmp_path / "none"),
                "--export_dir=" + str(tmp_path / "e")], check=False)
  assert p.returncode != 0 and "missing bert_config.json" in p.stderr
  assert not os.path.exists(str(tmp_path / "e"))
  with pytest.raises(FileExistsError):
    saved_model.export_preprocessor(run["pre"], os.path.dirname(run["paths"]["preprocessor"]),
                                    version=1)
  with pytest.raises(fine_tuned.FineTunedDirError, match="max_seq_length 600"):
    fine_tuned.load_fine_tuned(run["ft"], max_seq_length=600)


def _c_serve_texts(path, work):
  """The C loader's outputs for ``TEXTS`` from the classifier export at
  ``path``; the loader is built under ``work``."""
  exe = conftest.compile_c_loader(work)
  return _c_serve(exe, path, {"text": TEXTS}, _c_op_libraries(path), work)


@pytest.mark.slow
def test_xla_export_equals_plain_and_runs_without_python(run, tmp_path):
  """--xla: the XLA-compiled body on bucketed shapes gives the plain export's
  answers (logits within 1e-5, same labels) for batches of 0, 1, 3 (compiled)
  and 70 (over XLA_MAX_TOKENS: the plain graph) with awkward strings, in
  Python and through the C loader; the compiled function is in the graph."""
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + run["ft"],
                "--export_dir=" + str(tmp_path / "xla"), "--what=classifier", "--xla"])
  assert "exported classifier" in p.stdout, p.stdout
  path = str(tmp_path / "xla" / "1")
  meta = saved_model.read_metadata(path)
  assert meta["xla"] is True
  assert meta["xla_shapes"] == len(saved_model.xla_shapes(SEQ)) == 5 + 4  # 16, 32 tokens
  assert set(saved_model.xla_shapes(20)) == {(b, l) for b in (1, 2, 4, 8, 16)
                                             for l in (16, 20) if b * l <= 256}
  assert len(saved_model.xla_shapes(128)) == 23
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  sm = saved_model_pb2.SavedModel()
  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    sm.ParseFromString(f.read())
  compiled = [f for f in sm.meta_graphs[0].graph_def.library.function
              if f.attr["_XlaMustCompile"].b]
  assert compiled, "no jit_compile function in the --xla export"
  plain_meta = saved_model.read_metadata(run["paths"]["single"])
  assert plain_meta["xla"] is False
  plain = tf.saved_model.load(run["paths"]["single"]).signatures["serving_default"]
  xla = tf.saved_model.load(path).signatures["serving_default"]
  for n in (0, 1, 3, 70):
    texts = tf.constant((TEXTS * 10)[:n], tf.string)
    want, got = plain(text=texts), xla(text=texts)
    assert got["logits"].shape == (n, 2)
    np.testing.assert_allclose(got["logits"], want["logits"], atol=1e-5)
    np.testing.assert_array_equal(got["labels"], want["labels"])
  got = _c_serve_texts(path, str(tmp_path))
  want = plain(text=tf.constant(TEXTS, tf.string))
  np.testing.assert_allclose(got["logits"], want["logits"].numpy(), atol=1e-5)
  np.testing.assert_array_equal(got["labels"], want["labels"].numpy())
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + run["ft"],
                "--export_dir=" + str(tmp_path / "enc"), "--what=encoder", "--xla"],
               check=False)
  assert p.returncode != 0 and "--xla" in p.stderr and "classifier" in p.stderr, p.stderr
  assert not os.path.exists(str(tmp_path / "enc"))


@pytest.mark.slow
def test_bfloat16_export_close_to_float32_and_runs_without_python(run, tmp_path):
  """--serving_dtype=bfloat16: the blocks' weights are saved in bfloat16 (and
  nowhere in float32), logits stay within bfloat16 rounding of the float32
  export with the same labels wherever float32's margin is not a coin toss,
  outputs are float32, and the C loader gives Python's answers."""
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + run["ft"],
                "--export_dir=" + str(tmp_path / "bf16"), "--what=classifier",
                "--serving_dtype=bfloat16"])
  assert "exported classifier" in p.stdout, p.stdout
  path = str(tmp_path / "bf16" / "1")
  meta = saved_model.read_metadata(path)
  assert meta["dtype"] == "bfloat16"
  assert saved_model.read_metadata(run["paths"]["single"])["dtype"] == "float32"
  stored = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
  dtypes = stored.get_variable_to_dtype_map()
  cfg = config_lib.BertConfig.from_json_file(os.path.join(run["ft"], "bert_config.json"))
  h, inner = cfg.hidden_size, cfg.intermediate_size
  block_shapes = {(h, 3 * h), (3 * h,), (h, h), (h,), (h, inner), (inner,), (inner, h)}
  bf16 = [k for k, d in dtypes.items() if d == tf.bfloat16]
  assert len(bf16) == 8 * cfg.num_hidden_layers, sorted(dtypes)
  assert {tuple(stored.get_variable_to_shape_map()[k]) for k in bf16} <= block_shapes
  plain = tf.saved_model.load(run["paths"]["single"]).signatures["serving_default"]
  served = tf.saved_model.load(path).signatures["serving_default"]
  texts = tf.constant(TEXTS * 3, tf.string)
  want, got = plain(text=texts), served(text=texts)
  assert got["logits"].dtype == tf.float32 and got["probabilities"].dtype == tf.float32
  diff = np.abs(got["logits"].numpy() - want["logits"].numpy()).max()
  scale = np.abs(want["logits"].numpy()).max()
  assert 0 < diff <= 0.03 * scale + 0.01, (diff, scale)
  margin = np.abs(np.diff(want["logits"].numpy(), axis=-1))[:, 0]
  sure = margin > 0.1
  assert sure.sum() >= len(margin) // 2, margin
  np.testing.assert_array_equal(got["labels"].numpy()[sure], want["labels"].numpy()[sure])
  # With --xla too (the README says they combine): compiled, the same closeness.
  run_tool(["tools/export_saved_model.py", "--output_dir=" + run["ft"],
            "--export_dir=" + str(tmp_path / "bf16_xla"), "--what=classifier",
            "--serving_dtype=bfloat16", "--xla"])
  both = tf.saved_model.load(str(tmp_path / "bf16_xla" / "1")).signatures["serving_default"]
  for n in (1, 3, 70):  # compiled, compiled, the plain graph (over XLA_MAX_TOKENS)
    texts = tf.constant((TEXTS * 10)[:n], tf.string)
    want, got = plain(text=texts)["logits"].numpy(), both(text=texts)["logits"].numpy()
    assert 0 < np.abs(got - want).max() <= 0.03 * np.abs(want).max() + 0.01, n
  c_out = _c_serve_texts(path, str(tmp_path))
  py_out = served(text=tf.constant(TEXTS, tf.string))
  np.testing.assert_allclose(c_out["logits"], py_out["logits"].numpy(), atol=1e-5)
  np.testing.assert_array_equal(c_out["labels"], py_out["labels"].numpy())
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + run["ft"],
                "--export_dir=" + str(tmp_path / "enc"), "--what=encoder",
                "--serving_dtype=bfloat16"], check=False)
  assert p.returncode != 0 and "--serving_dtype" in p.stderr and "classifier" in p.stderr, \
      p.stderr
  assert not os.path.exists(str(tmp_path / "enc"))


# ------------------------------------------------------------ fuzzing
#
# Every served output against the in-process reference (``reference`` and
# the project's ``BertPreprocessor``): the same token ids, the same labels,
# logits within 1e-5, on strings from ``fuzz_util.unicode_strings`` (UTF-8
# text of every Unicode category but Cs, the rare ones drawn on purpose, or
# invalid UTF-8) and ``fuzz_util.AWKWARD`` (one string of each kind) as an
# explicit example. The exports are module-scoped fixtures: every example
# reuses the same loaded signatures.


def served_equals_reference(run, serving, data):
  """Every output of the four string signatures equals the in-process one."""
  rev = data[::-1]
  for got, want in (
      (serving["single"](text=tf.constant(data, tf.string)), reference(run, data)),
      (serving["pair"](text_a=tf.constant(data, tf.string), text_b=tf.constant(rev, tf.string)),
       reference(run, data, rev))):
    got = {k: v.numpy() for k, v in got.items()}
    assert set(got) == set(want)
    np.testing.assert_array_equal(got["num_windows"], want["num_windows"])
    np.testing.assert_array_equal(got["truncated"], want["truncated"])
    np.testing.assert_allclose(got["logits"], want["logits"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-5, rtol=0)
    # The same labels. Where the reference's two logits are within the
    # tolerance of each other, rounding may pick either: there the served
    # label only has to be the argmax of the served logits.
    decided = np.abs(want["logits"][:, 0] - want["logits"][:, 1]) > 2e-5
    np.testing.assert_array_equal(got["label_ids"][decided], want["label_ids"][decided])
    np.testing.assert_array_equal(got["label_ids"], got["logits"].argmax(-1))
    assert got["labels"].tolist() == [LABELS[i].encode() for i in got["label_ids"]]
  for got, b in ((serving["pre"](text=tf.constant(data, tf.string)), None),
                 (serving["pre_pair"](text_a=tf.constant(data, tf.string),
                                      text_b=tf.constant(rev, tf.string)), rev)):
    want = run["graph_pre"](tf.constant(data, tf.string),
                      None if b is None else tf.constant(b, tf.string))
    assert set(got) == {"input_word_ids", "input_mask", "input_type_ids", "input_ids",
                        "segment_ids"}
    for hub, ours in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                      ("input_type_ids", "segment_ids")):
      np.testing.assert_array_equal(got[hub].numpy(), want[ours].numpy())
      np.testing.assert_array_equal(got[ours].numpy(), want[ours].numpy())


@pytest.fixture(scope="module")
def fuzz_serving(run, serving):
  """The classifier signatures and the preprocessor's two, loaded once."""
  pre = tf.saved_model.load(run["paths"]["preprocessor"])
  return dict(serving, pre=pre.signatures["serving_default"], pre_pair=pre.signatures["pair"])


@fuzz_settings(10)
@hypothesis.given(data=st.lists(unicode_strings(300), min_size=1, max_size=6))
@hypothesis.example(data=AWKWARD)
def test_random_unicode_and_bytes_property(run, fuzz_serving, data):
  served_equals_reference(run, fuzz_serving, data)


@slow_fuzz
@hypothesis.given(data=st.lists(unicode_strings(SLOW_MAX_CHARS), min_size=1, max_size=4))
def test_random_unicode_and_bytes_property_200(run, fuzz_serving, data):
  """200 examples, each through all four string signatures; strings up to
  2,000 characters."""
  served_equals_reference(run, fuzz_serving, data)
