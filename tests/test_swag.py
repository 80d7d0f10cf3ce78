"""Multiple choice (SWAG layout, paper section 4.4): reader, model, task, tool, export.

Real data: ``data/mc_wikihow`` (a slice of wikiHow step inference in the SWAG
CSV layout, 4 endings); real weights: all-MiniLM-L6-v2 as a Hugging Face
``BertForMultipleChoice`` with a seeded head.
"""

import base64
import csv
import json
import os

import hypothesis
from hypothesis import strategies as st
import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import errors
from bert_tf import preprocessing
from bert_tf.data import swag as swag_data
from bert_tf.export import multiple_choice as mc_export
from bert_tf.export import saved_model
from bert_tf.modeling import multiple_choice
from bert_tf.modeling import presets
from bert_tf.modeling.multiple_choice import BertMultipleChoice
from bert_tf.tasks import fine_tuning
from bert_tf.tasks import swag
from conftest import MC_DIR, TINY_CONFIG, VOCAB, compile_c_loader, graph_preprocessor
from conftest import require, run_tool
from fuzz_util import AWKWARD, SLOW_MAX_CHARS, fuzz_settings, slow_fuzz, unicode_strings

MC_DEV = os.path.join(MC_DIR, "dev.csv")
HEADER = ("video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
          "ending0,ending1,ending2,ending3,label")


def tiny_config():
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.BertConfig.from_json_file(TINY_CONFIG)


def write_csv(path, rows, header=HEADER):
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(header + "\n")
    for row in rows:
      if isinstance(row, str):
        f.write(row + "\n")
      else:
        csv.writer(f, lineterminator="\n").writerow(row)
  return str(path)


def pack(preprocessor, examples):
  """[E, N, S] int32 features of examples, by the task's own pipeline."""
  a, b, _ = swag_data.choice_arrays(examples)
  batches = list(swag.choices_dataset(preprocessor, a, b, None, len(examples)))
  assert len(batches) == 1
  return {k: v.numpy() for k, v in batches[0].items()}


# ------------------------------------------------------------------ reader


def test_reads_real_mc_wikihow():
  examples = swag_data.read_swag_examples(MC_DEV)
  assert len(examples) == 60
  # The README's label counts of the dev slice.
  assert np.bincount([e.label for e in examples]).tolist() == [16, 19, 12, 13]
  assert examples[-1].example_id == "wikihow-step-1859-1859" and examples[-1].line == 61
  train = swag_data.read_swag_examples(os.path.join(MC_DIR, "train.csv"))
  assert np.bincount([e.label for e in train]).tolist() == [32, 32, 51, 35]
  ex = examples[0]
  assert ex.example_id == "wikihow-step-1800-1800" and ex.line == 2
  assert ex.context == "The most reasonable step of 'Get Invited to Parties' is"
  assert ex.start_ending == "" and len(ex.endings) == 4
  contexts, endings = ex.choice_texts
  assert contexts == [ex.context] * 4
  assert endings[1] == "Be friendly to everyone"  # empty sent2: the ending alone


def test_choice_texts_follow_hugging_face_run_swag(tmp_path):
  """sent1 is segment A; segment B is f"{sent2} {ending}" (HF run_swag.py)."""
  path = write_csv(tmp_path / "t.csv", [
      ["v1", "3", "A man sits. He", "A man sits.", "He", "gold",
       "stands up.", "eats, \"loudly\".", "multi\nline", "runs", "2"]])
  (ex,) = swag_data.read_swag_examples(path)
  hf_first = [ex.context] * 4
  hf_second = ["%s %s" % (ex.start_ending, e) for e in ex.endings]
  a, b = ex.choice_texts
  assert a == hf_first and b == hf_second
  assert b[1] == 'He eats, "loudly".' and b[2] == "He multi\nline"
  assert ex.label == 2 and ex.example_id == "v1-3"


BAD_ROWS = [
    # (rows, header, with_labels, message pattern)
    (["v,1,s,a,b,g,e0,,e2,e3,0"], HEADER, True, r"t.csv:2: ending1 is empty"),
    (["v,1,s,a,b,g,e0,e1,e2,e3,0", "v,2,s,a,b,g,e0,e1,e2,   ,0"], HEADER, True,
     r"t.csv:3: ending3 is empty"),
    (["v,1,s,a,b,g,e0,e1,e2,e3,4"], HEADER, True, r"t.csv:2: label '4' is not a choice index in 0..3"),
    (["v,1,s,a,b,g,e0,e1,e2,e3,-1"], HEADER, True, r"label '-1'"),
    # A row whose quoted field spans lines is named by its first line.
    (['v,1,s,"multi\nline",b,g,e0,e1,e2,e3,9'], HEADER, True, r"t.csv:2: label '9'"),
    (["v,1,s,a,b,g,e0,e1,e2,e3,x"], HEADER, True, r"label 'x'"),
    (["v,1,s,a,b,g,e0,e1,e2,e3,"], HEADER, True, r"t.csv:2: label ''"),
    (['v,1,s,"two\nlines",b,g,e0,e1,e2,e3,0', "v,1,s,a,b,g,e0,e1,e2,e3"], HEADER, True,
     r"t.csv:4: 10 fields, the header has 11"),
    (["v,1,s,a,b,g,e0,e1,e2,e3,0,extra"], HEADER, True, r"t.csv:2: 12 fields"),
    (["v,1,s,b,g,e0,e1,e2,e3,0"], HEADER.replace("sent1,", ""), True,
     r"t.csv:1: the header has no column sent1"),
    (["v,1,s,a,b,g,e0,e1,e2,e3"], HEADER.replace(",label", ""), True,
     r"the header has no column label"),
    (["v,1,s,a,b,g,e0,e1,e3,0"], HEADER.replace("ending2,", ""), True,
     r"t.csv:1: the header needs columns ending0"),
]


@pytest.mark.parametrize("rows,header,with_labels,pattern", BAD_ROWS)
def test_bad_rows_name_file_and_line(tmp_path, rows, header, with_labels, pattern):
  path = write_csv(tmp_path / "t.csv", rows, header)
  with pytest.raises(errors.InputError, match=pattern) as e:
    swag_data.read_swag_examples(path, with_labels=with_labels, argument="dev_file")
  assert e.value.argument == "dev_file"


def test_unlabeled_test_file_and_choice_count(tmp_path):
  path = write_csv(tmp_path / "t.csv", ["v,1,s,a,b,g,e0,e1,e2,e3"],
                   HEADER.replace(",label", ""))
  (ex,) = swag_data.read_swag_examples(path, with_labels=False)
  assert ex.label is None
  with pytest.raises(errors.InputError, match="4 endings per example, expected 5"):
    swag_data.read_swag_examples(path, with_labels=False, num_choices=5)
  with pytest.raises(errors.InputError, match="does not exist"):
    swag_data.read_swag_examples(str(tmp_path / "nope.csv"))


# ------------------------------------------------------------------- model


@pytest.fixture(scope="module")
def hf_mc(minilm_dir, tmp_path_factory):
  """Hugging Face's ``BertForMultipleChoice``: the real MiniLM encoder and a
  seeded head that is not the default init (weight and bias), and its
  ``save_pretrained`` directory with MiniLM's vocab: ``(ref, hf_dir)``. Read
  only, shared by the parity and the tool test (one save of ~90 MB)."""
  torch = require("torch")
  transformers = require("transformers")
  torch.manual_seed(0)
  ref = transformers.BertForMultipleChoice.from_pretrained(minilm_dir).eval()
  with torch.no_grad():  # a head that is not the default init
    ref.classifier.weight.normal_(0.0, 0.5)
    ref.classifier.bias.uniform_(-1.0, 1.0)
  hf_dir = str(tmp_path_factory.mktemp("hf_mc") / "hf_mc")
  ref.save_pretrained(hf_dir)
  with open(os.path.join(minilm_dir, "vocab.txt"), "rb") as f:
    open(os.path.join(hf_dir, "vocab.txt"), "wb").write(f.read())
  return ref, hf_dir


# ~10-19 s (real MiniLM, its save and three loads): full suite only. The fast
# run keeps Hugging Face's multiple-choice parity on the cropped MiniLM
# (test_hf_heads.test_question_answerer_and_multiple_choice).
@pytest.mark.slow
def test_hf_bert_for_multiple_choice_parity(minilm_dir, hf_mc, tmp_path):
  """Real MiniLM encoder + seeded head, via save_pretrained -> from_preset;
  the inputs are those of HF's tokenizer on the same texts."""
  torch = require("torch")
  transformers = require("transformers")
  ref, hf_dir = hf_mc

  model = BertMultipleChoice.from_preset(hf_dir)
  np.testing.assert_array_equal(model.classifier.output_weights.numpy(),
                                ref.classifier.weight.detach().numpy())
  examples = swag_data.read_swag_examples(MC_DEV, limit=6)
  pre = preprocessing.BertPreprocessor(os.path.join(hf_dir, "vocab.txt"), True, 48)
  x = pack(pre, examples)
  # Our packing == HF run_swag's tokenizer call on (sent1, f"{sent2} {ending}")
  # with its default dynamic padding (to the batch's longest choice): the
  # batch is trimmed to its longest row, here below the 48 of max_seq_length.
  tok = transformers.BertTokenizerFast.from_pretrained(hf_dir)
  first = [e.context for e in examples for _ in range(4)]
  second = ["%s %s" % (e.start_ending, end) for e in examples for end in e.endings]
  enc = tok(first, second, truncation=True, max_length=48, padding="longest")
  width = len(enc["input_ids"][0])
  assert x["input_ids"].shape == (6, 4, width) and 20 < width < 48, x["input_ids"].shape
  np.testing.assert_array_equal(x["input_ids"].reshape(24, width), enc["input_ids"])
  np.testing.assert_array_equal(x["segment_ids"].reshape(24, width), enc["token_type_ids"])
  np.testing.assert_array_equal(x["input_mask"].reshape(24, width), enc["attention_mask"])

  ours = model(x).numpy()
  with torch.no_grad():
    want = ref(input_ids=torch.tensor(x["input_ids"]).long(),
               attention_mask=torch.tensor(x["input_mask"]).long(),
               token_type_ids=torch.tensor(x["segment_ids"]).long()).logits.numpy()
  assert ours.dtype == np.float32 and ours.shape == (6, 4)
  assert np.abs(ours - want).max() <= 1e-5, np.abs(ours - want).max()
  assert np.abs(ours - ours.mean(1, keepdims=True)).max() > 0.01  # choices differ

  # The task's --init_checkpoint path: same loader, same logits.
  again = multiple_choice.build_multiple_choice(model.config)
  assert "multiple-choice head" in presets.load_weights(
      again, hf_dir, multiple_choice.MULTIPLE_CHOICE_TASK)
  np.testing.assert_array_equal(again(x).numpy(), ours)
  # Half a head is an error naming the file.
  from safetensors.numpy import load_file, save_file  # pylint: disable=g-import-not-at-top
  half = tmp_path / "half"
  half.mkdir()
  tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
  del tensors["classifier.bias"]
  save_file(tensors, str(half / "model.safetensors"))
  (half / "config.json").write_bytes(open(os.path.join(hf_dir, "config.json"), "rb").read())
  with pytest.raises(errors.CheckpointError, match="only part of the multiple-choice head"):
    BertMultipleChoice.from_preset(str(half))
  # A plain BertModel directory: encoder (with pooler) loaded, head initialized.
  plain = BertMultipleChoice.from_preset(minilm_dir)
  np.testing.assert_array_equal(plain.classifier.output_bias.numpy(), [0.0])
  np.testing.assert_array_equal(plain.encoder.weights[0].numpy(),
                                model.encoder.weights[0].numpy())


def test_keras_round_trip_and_our_checkpoints(tmp_path):
  model = multiple_choice.build_multiple_choice(tiny_config())
  for i, v in enumerate(model.weights):
    v.assign(tf.random.stateless_normal(v.shape, [7, i], stddev=0.05))
  x = {k: tf.random.stateless_uniform([2, 3, 12], [1, j], 0, 50, tf.int32)
       for j, k in enumerate(multiple_choice.FEATURE_NAMES)}
  x["input_mask"] = tf.ones([2, 3, 12], tf.int32)
  x["segment_ids"] = tf.zeros([2, 3, 12], tf.int32)
  want = model(x).numpy()
  path = str(tmp_path / "mc.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  assert type(loaded) is BertMultipleChoice
  np.testing.assert_array_equal(loaded(x).numpy(), want)
  np.testing.assert_array_equal(BertMultipleChoice.from_preset(path)(x).numpy(), want)
  # Our object checkpoint (a run directory).
  run = tmp_path / "run"
  tf.train.Checkpoint(model=model, encoder=model.encoder).save(str(run / "ckpt"))
  model.config.to_json_file(str(run / "bert_config.json"))
  np.testing.assert_array_equal(BertMultipleChoice.from_preset(str(run))(x).numpy(), want)
  # An original TF1 bert_model.ckpt: the encoder (pooler too), head initialized.
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  orig = tmp_path / "orig"
  checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(model.encoder),
                                  str(orig / "bert_model.ckpt"))
  model.config.to_json_file(str(orig / "bert_config.json"))
  fresh = multiple_choice.build_multiple_choice(model.config)
  assert "original TF1" in presets.load_weights(
      fresh, str(orig / "bert_model.ckpt"), multiple_choice.MULTIPLE_CHOICE_TASK)
  for fresh in (BertMultipleChoice.from_preset(str(orig)), fresh):
    for a, b in zip(fresh.encoder.weights, model.encoder.weights):
      np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(fresh.classifier.output_bias.numpy(), [0.0])
  with pytest.raises(errors.CheckpointError, match="does not exist"):
    presets.load_weights(fresh, str(tmp_path / "nope"), multiple_choice.MULTIPLE_CHOICE_TASK)
  # Training mode: dropout on the pooled output changes the scores.
  assert np.abs(model(x, training=True).numpy() - want).max() > 0
  # Mixed precision: float32 logits.
  mixed = BertMultipleChoice(tiny_config(), dtype="mixed_bfloat16")
  assert mixed(x).dtype == tf.float32
  # Loss: softmax cross-entropy over the choices.
  loss = multiple_choice.choice_loss(want, [0, 2]).numpy()
  logp = want - np.log(np.exp(want).sum(1, keepdims=True))
  np.testing.assert_allclose(loss, [-logp[0, 0], -logp[1, 2]], rtol=1e-5)


# -------------------------------------------------------------------- tool


def _slice(tmp_path, n_train=48, n_dev=24):
  data = tmp_path / "data"
  data.mkdir()
  for name, n in (("train.csv", n_train), ("dev.csv", n_dev)):
    with open(os.path.join(MC_DIR, name), encoding="utf-8") as f:
      lines = f.read().splitlines()
    (data / name).write_text("\n".join(lines[:n + 1]) + "\n", encoding="utf-8")
  return data


def test_tool_bad_input_is_a_flag_error_without_output(tmp_path):
  data = _slice(tmp_path, 8, 4)
  with open(data / "dev.csv", "a", encoding="utf-8") as f:
    f.write("v,9,s,a,,gold,e0,e1,e2,e3,7\n")
  out = tmp_path / "out"
  proc = run_tool(["tools/run_swag.py", "--data_dir=%s" % data,
                   "--bert_config_file=%s" % TINY_CONFIG, "--vocab_file=%s" % VOCAB,
                   "--output_dir=%s" % out, "--do_train", "--do_eval"], check=False)
  assert proc.returncode != 0
  assert ("run_swag: error: --dev_file: %s:6: label '7' is not a choice index in 0..3"
          % (data / "dev.csv")) in proc.stderr, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  assert not out.exists() or not os.listdir(out)


@pytest.mark.slow
def test_tool_end_to_end_and_export_in_a_fresh_process(tmp_path):
  """Train + eval + predict + export on real mc_wikihow rows (tiny config);
  the model learns its training rows, scikit-learn recomputes the reported
  accuracy and loss from predictions.csv; the SavedModel, in a process with
  only TensorFlow + tensorflow-text, gives the probabilities of
  predictions.csv on the same rows."""
  sk = require("sklearn.metrics")
  data = _slice(tmp_path, 24, 24)
  # dev = the 24 training rows, then 24 unseen dev rows: a model that learned
  # its training rows scores well above chance (0.25) on the first half.
  train_lines = (data / "train.csv").read_text(encoding="utf-8").splitlines()
  dev_lines = (data / "dev.csv").read_text(encoding="utf-8").splitlines()
  (data / "dev.csv").write_text("\n".join(train_lines + dev_lines[1:]) + "\n",
                                encoding="utf-8")
  (data / "test.csv").write_bytes((data / "dev.csv").read_bytes())
  out, exp = tmp_path / "out", tmp_path / "exp"
  proc = run_tool(["tools/run_swag.py", "--data_dir=%s" % data,
                   "--bert_config_file=%s" % TINY_CONFIG, "--vocab_file=%s" % VOCAB,
                   "--output_dir=%s" % out, "--export_dir=%s" % exp, "--do_train",
                   "--do_eval", "--do_predict", "--train_batch_size=8",
                   "--num_train_epochs=8", "--max_seq_length=48",
                   "--iterations_per_loop=3", "--learning_rate=1e-3"])
  assert "fine-tuning on" in proc.stdout and "24 steps" in proc.stdout
  with open(out / "eval_results.txt", encoding="utf-8") as f:
    res = dict(l.split(" = ") for l in f.read().splitlines())
  # predictions.csv is the best dev model's: its record is best/eval_results.txt.
  with open(out / "best" / "eval_results.txt", encoding="utf-8") as f:
    best = dict(l.split(" = ") for l in f.read().splitlines())
  # (eval_results.txt points at it when it is an earlier step's.)
  assert sorted(res) == sorted(["eval_accuracy", "eval_loss", "global_step"] + (
      ["best_model"] if best["global_step"] != "24" else []))
  assert res["global_step"] == "24"
  for f in ("bert_config.json", "vocab.txt", "swag_config.json", "predictions.csv"):
    assert (out / f).exists(), f
  with open(out / "predictions.csv", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  with open(data / "test.csv", encoding="utf-8", newline="") as f:
    gold = [(r["video-id"] + "-" + r["fold-ind"], int(r["label"]))
            for r in csv.DictReader(f)]
  assert len(rows) == len(gold) == 48
  assert [r["id"] for r in rows] == [g[0] for g in gold]
  assert [int(r["label"]) for r in rows] == [g[1] for g in gold]
  y = np.array([g[1] for g in gold])
  probs = np.array([[float(r["probability_%d" % i]) for i in range(4)] for r in rows])
  np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
  pred = np.array([int(r["prediction"]) for r in rows])
  assert pred.tolist() == probs.argmax(1).tolist()
  # The reported numbers, recomputed by scikit-learn from the written rows.
  assert float(best["eval_accuracy"]) == pytest.approx(sk.accuracy_score(y, pred),
                                                       abs=1e-9)
  assert float(best["eval_loss"]) == pytest.approx(
      sk.log_loss(y, probs / probs.sum(1, keepdims=True), labels=[0, 1, 2, 3]),
      rel=1e-5)
  # It learned: on its 24 training rows >= 0.75 (chance 0.25: a model that
  # learned nothing reaches 0.75 with probability 4e-7; measured 0.92-1.0
  # over seeds 0-3 of this recipe).
  assert sk.accuracy_score(y[:24], pred[:24]) >= 0.75, pred[:24]
  assert not [p for p in os.listdir(out) if ".tmp" in p]
  examples = swag_data.read_swag_examples(str(data / "test.csv"))
  assert [e.example_id for e in examples] == [g[0] for g in gold]

  (version,) = os.listdir(exp)
  meta = saved_model.read_metadata(str(exp / version))
  assert meta["export"] == "multiple_choice" and meta["num_choices"] == 4
  assert meta["max_seq_length"] == 48 and meta["warmup_requests"] == 1
  contexts = [e.choice_texts[0][0].encode() for e in examples]
  endings = [[t.encode() for t in e.choice_texts[1]] for e in examples]
  spec = {"path": str(exp / version),
          "context": [base64.b64encode(c).decode() for c in contexts],
          "endings": [[base64.b64encode(t).decode() for t in row] for row in endings]}
  (tmp_path / "job.json").write_text(json.dumps(spec))
  run_tool(["-c", FRESH_PROCESS, str(tmp_path / "job.json"), str(tmp_path / "res.json")])
  got = json.loads((tmp_path / "res.json").read_text())
  np.testing.assert_allclose(np.array(got["probabilities"]), probs, atol=1e-5)
  assert got["label_id"] == probs.argmax(1).tolist()
  assert got["dtypes"] == {"label_id": "int32", "logits": "float32",
                           "probabilities": "float32"}
  # TF Serving's loader path with no Python (tests/c_loader/serve.c takes
  # 1-D string inputs: the endings go flat [B*N], which the signature allows).
  from test_export import _c_op_libraries, _c_serve  # pylint: disable=g-import-not-at-top
  exe = compile_c_loader(str(tmp_path))
  c_out = _c_serve(exe, str(exp / version),
                   {"context": contexts, "endings": [t for row in endings for t in row]},
                   _c_op_libraries(str(exp / version)), str(tmp_path))
  np.testing.assert_allclose(c_out["probabilities"], probs, atol=1e-5)
  assert c_out["label_id"].tolist() == probs.argmax(1).tolist()

  # The run directory is a preset (best/ preferred): the same probabilities.
  pre = preprocessing.BertPreprocessor(str(out / "vocab.txt"), True, 48)
  model = BertMultipleChoice.from_preset(str(out))
  np.testing.assert_allclose(tf.nn.softmax(model(pack(pre, examples))).numpy(), probs,
                             atol=1e-5)
  # Export only, from the finished run: config, vocab, num_choices and the
  # tokenizer settings (max_seq_length 48, not the flag's default 128) come
  # from its files, which the export leaves as they were.
  proc = run_tool(["tools/run_swag.py", "--output_dir=%s" % out,
                   "--export_dir=%s" % exp])
  assert "using the best dev model" in proc.stdout
  assert json.loads((out / "swag_config.json").read_text())["max_seq_length"] == 48
  assert saved_model.read_metadata(str(exp / "2"))["max_seq_length"] == 48
  fn = tf.saved_model.load(str(exp / "2")).signatures["serving_default"]
  np.testing.assert_allclose(_serve(fn, [e.context for e in examples],
                                    [e.choice_texts[1] for e in examples])["probabilities"],
                             probs, atol=1e-5)


FRESH_PROCESS = r"""
import base64, json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
assert not any(m.split('.')[0] in ('bert_tf', 'export') for m in sys.modules), 'project code'
job = json.load(open(sys.argv[1]))
fn = tf.saved_model.load(job['path']).signatures['serving_default']
out = fn(context=tf.constant([base64.b64decode(s) for s in job['context']]),
         endings=tf.constant([[base64.b64decode(s) for s in r] for r in job['endings']]))
res = {k: v.numpy().tolist() for k, v in out.items()}
res['dtypes'] = {k: v.dtype.name for k, v in out.items()}
json.dump(res, open(sys.argv[2], 'w'))
"""


# ------------------------------------------------------------------ export


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """A tiny random model exported once, loaded back (module, path, model)."""
  model = multiple_choice.build_multiple_choice(tiny_config())
  for i, v in enumerate(model.weights):
    v.assign(tf.random.stateless_normal(v.shape, [3, i], stddev=0.1))
  pre = preprocessing.BertPreprocessor(VOCAB, True, 32)
  path = mc_export.export_multiple_choice(
      model, pre, str(tmp_path_factory.mktemp("mc_export")), num_choices=4)
  return {"fn": tf.saved_model.load(path).signatures["serving_default"],
          "path": path, "model": model, "pre": pre,
          "graph_pre": graph_preprocessor(pre)}


def _serve(fn, contexts, endings):
  out = fn(context=tf.constant(contexts, tf.string),
           endings=tf.reshape(tf.constant(endings, tf.string), [len(contexts), -1]))
  return {k: v.numpy() for k, v in out.items()}


def _check(out, batch):
  p = out["probabilities"]
  assert p.shape == (batch, 4) and p.dtype == np.float32
  assert np.isfinite(p).all()
  np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
  assert out["label_id"].dtype == np.int32
  # The argmax of the logits, as documented: two logits a few ulps apart can
  # round to the same float32 probability (hypothesis found such a row), so
  # the probabilities' argmax is only required to agree up to such ties.
  assert out["label_id"].tolist() == out["logits"].argmax(1).tolist()
  rows = np.arange(batch)
  np.testing.assert_array_equal(p[rows, out["label_id"]], p.max(1))


def test_export_equals_model_on_real_rows(exported):
  examples = swag_data.read_swag_examples(MC_DEV, limit=8)
  want = tf.nn.softmax(exported["model"](pack(exported["pre"], examples))).numpy()
  out = _serve(exported["fn"], [e.context for e in examples],
               [e.choice_texts[1] for e in examples])
  _check(out, 8)
  np.testing.assert_allclose(out["probabilities"], want, atol=1e-5)
  # Flat endings [B*N] mean the same; a wrong count is INVALID_ARGUMENT.
  flat = exported["fn"](context=tf.constant([e.context for e in examples]),
                        endings=tf.constant([[t for e in examples
                                              for t in e.choice_texts[1]]]))
  np.testing.assert_array_equal(flat["probabilities"].numpy(), out["probabilities"])
  with pytest.raises(tf.errors.InvalidArgumentError, match="num_choices=4"):
    exported["fn"](context=tf.constant(["a", "b"]), endings=tf.constant([["x"] * 4]))
  meta = saved_model.read_metadata(exported["path"])
  assert meta["inputs"] == ["context", "endings"] and meta["num_choices"] == 4
  assert sorted(meta["signatures"]["serving_default"]["outputs"]) == [
      "label_id", "logits", "probabilities"]


def test_export_edge_strings(exported):
  big = ("word " * 200000).encode()  # 1 MB
  contexts = [b"", b"   \t\n", big, b"\xff\xfe bad \xc3 utf8", "Café naïve".encode()]
  endings = [[b"", b" ", b"x", b"\x00\x01"], [b"a", b"", b"\n", b"b"],
             [big, b"", b"short", big], [b"\xc3\x28", b"\xe2\x82", b"ok", b""],
             ["Zürich".encode(), b"\xf0\x9f\x98\x80", b"y", b"z"]]
  out = _serve(exported["fn"], contexts, endings)
  _check(out, 5)
  # Invalid UTF-8 is replaced then deleted, as the preprocessor does.
  clean = _serve(exported["fn"], [b" bad  utf8"], [[b"(", b"", b"ok", b""]])
  np.testing.assert_allclose(clean["probabilities"][0], out["probabilities"][3], atol=1e-6)
  empty = _serve(exported["fn"], [], np.zeros([0, 4], object).tolist())
  assert empty["probabilities"].shape == (0, 4)


def _dec(t):
  """A served string as Python reads it (invalid UTF-8 -> U+FFFD)."""
  return t.decode("utf-8", "replace") if isinstance(t, bytes) else t


def _enc(t):
  """A drawn string as the bytes sent (text as UTF-8)."""
  return t.encode("utf-8") if isinstance(t, str) else t


def _reference_logits(exported, contexts, endings):
  """The in-process model on the same strings: the task's packing
  (:func:`swag.choices_dataset`'s encode: the BertPreprocessor on the
  flattened pairs, traced as the task's map traces it), then the Keras model."""
  n = len(contexts)
  a = tf.constant([_dec(c) for c in contexts for _ in range(4)], tf.string)
  b = tf.constant([_dec(e) for es in endings for e in es], tf.string)
  flat = exported["graph_pre"](a, b)
  # The model as the task's evaluation runs it (traced once for any shape).
  return fine_tuning.predict_step(exported["model"])(
      {k: tf.reshape(v, [n, 4, -1]) for k, v in flat.items()}).numpy()


def _serve_and_compare(exported, rows):
  """Serves ``rows`` [(context, [4 endings])] and compares every output with
  the in-process model: logits and probabilities within 1e-5, the label the
  reference's argmax (up to a near-tie of the reference logits)."""
  contexts = [_enc(c) for c, _ in rows]
  endings = [[_enc(e) for e in es] for _, es in rows]
  out = _serve(exported["fn"], contexts, endings if rows else np.zeros([0, 4], object).tolist())
  _check(out, len(rows))
  if not rows:
    assert out["logits"].shape == (0, 4)
    return out
  want = _reference_logits(exported, contexts, endings)
  np.testing.assert_allclose(out["logits"], want, rtol=0, atol=1e-5)
  np.testing.assert_allclose(out["probabilities"], tf.nn.softmax(want).numpy(),
                             rtol=0, atol=1e-5)
  top = np.sort(want, 1)
  clear = top[:, -1] - top[:, -2] > 1e-5
  np.testing.assert_array_equal(out["label_id"][clear], want.argmax(1)[clear])
  return out


def test_reference_comparison_fails_on_a_wrong_answer(exported):
  """The comparison the fuzz tests rely on catches a served answer that is
  not the model's (here: the context and an ending swapped)."""
  rows = [("Get Invited to Parties", ["Be friendly", "Perform a waste audit",
                                      "Find your loan", "Know the order"])]
  _serve_and_compare(exported, rows)
  swapped = dict(exported, fn=lambda context, endings: exported["fn"](
      context=endings[:, 0], endings=tf.concat(
          [tf.expand_dims(context, 1), endings[:, 1:]], 1)))
  with pytest.raises(AssertionError):
    _serve_and_compare(swapped, rows)


# Hypothesis: contexts and endings from ``fuzz_util.unicode_strings`` (UTF-8
# text of every Unicode category but Cs, the rare ones drawn on purpose, or
# invalid UTF-8); ``AWKWARD`` (one string of each kind) as an explicit example.


@fuzz_settings(15)
@hypothesis.given(rows=st.lists(st.tuples(
    unicode_strings(60), st.lists(unicode_strings(60), min_size=4, max_size=4)),
    max_size=3))
@hypothesis.example(rows=[(c, [AWKWARD[(i + k) % len(AWKWARD)] for k in range(1, 5)])
                          for i, c in enumerate(AWKWARD)])
def test_export_random_strings_equal_model(exported, rows):
  _serve_and_compare(exported, rows)


@slow_fuzz
@hypothesis.given(rows=st.lists(st.tuples(
    unicode_strings(SLOW_MAX_CHARS),
    st.lists(unicode_strings(SLOW_MAX_CHARS), min_size=4, max_size=4)),
    min_size=1, max_size=2))
def test_export_random_long_strings_equal_model(exported, rows):
  """200 batches of strings up to 2,000 characters of every category (Cs
  excluded, see ``fuzz_util``) and invalid UTF-8: every output == the model's."""
  _serve_and_compare(exported, rows)


def test_warmup_request_parses_and_runs(exported):
  apis = require("tensorflow_serving.apis.prediction_log_pb2",
                 "tensorflow-serving-api, requirements-test.txt")
  from bert_tf.export import warmup  # pylint: disable=g-import-not-at-top
  records = list(tf.data.TFRecordDataset(
      os.path.join(exported["path"], "assets.extra", warmup.WARMUP_FILE)))
  assert len(records) == 1
  req = apis.PredictionLog.FromString(records[0].numpy()).predict_log.request
  assert sorted(req.inputs) == ["context", "endings"]
  args = {k: tf.constant(tf.make_ndarray(v)) for k, v in req.inputs.items()}
  assert args["endings"].shape == (2, 4)
  _check({k: v.numpy() for k, v in exported["fn"](**args).items()}, 2)
  with pytest.raises(ValueError, match="num_choices"):
    mc_export.export_multiple_choice(exported["model"], exported["pre"], "x", num_choices=0)


@pytest.mark.slow
def test_tool_from_hf_bert_for_multiple_choice_matches_hf(hf_mc, tmp_path):
  """--init_checkpoint=a HF BertForMultipleChoice dir (config and vocab from
  it; :func:`hf_mc`'s seeded head), no training: eval accuracy,
  predictions.csv and the export give Hugging Face's own probabilities on
  real dev rows."""
  torch = require("torch")
  transformers = require("transformers")
  ref, hf_dir = hf_mc
  data = _slice(tmp_path, 4, 20)
  (data / "test.csv").write_bytes((data / "dev.csv").read_bytes())
  out, exp = tmp_path / "out", tmp_path / "exp"
  run_tool(["tools/run_swag.py", "--data_dir=%s" % data, "--init_checkpoint=%s" % hf_dir,
            "--output_dir=%s" % out, "--export_dir=%s" % exp, "--do_eval",
            "--do_predict", "--max_seq_length=64"])
  examples = swag_data.read_swag_examples(str(data / "dev.csv"))
  tok = transformers.BertTokenizerFast.from_pretrained(hf_dir)
  enc = tok([e.context for e in examples for _ in range(4)],
            ["%s %s" % (e.start_ending, t) for e in examples for t in e.endings],
            truncation=True, max_length=64, padding="max_length", return_tensors="pt")
  with torch.no_grad():
    logits = ref(**{k: v.view(len(examples), 4, 64) for k, v in enc.items()}).logits
  want = torch.softmax(logits, -1).numpy()
  with open(out / "predictions.csv", encoding="utf-8") as f:
    got = np.array([[float(r["probability_%d" % i]) for i in range(4)]
                    for r in csv.DictReader(f)])
  np.testing.assert_allclose(got, want, atol=1e-5)
  with open(out / "eval_results.txt", encoding="utf-8") as f:
    res = dict(l.split(" = ") for l in f.read().splitlines())
  y = np.array([e.label for e in examples])
  assert float(res["eval_accuracy"]) == pytest.approx((want.argmax(1) == y).mean())
  (version,) = os.listdir(exp)
  fn = tf.saved_model.load(str(exp / version)).signatures["serving_default"]
  served = _serve(fn, [e.context for e in examples], [e.choice_texts[1] for e in examples])
  np.testing.assert_allclose(served["probabilities"], want, atol=1e-5)
