"""Every export through the generic tools (issue 21 item 5).

Tiny real runs (the tiny config, the real uncased vocab, a step or two on
data written here or bundled under ``data/``; never ``../shared``) of every
training job: ``run_classifier`` (single sentence, pair, regression),
``run_squad`` (v2.0; v1.1 by the same run's config), ``run_ner``,
``run_swag`` and ``run_pretraining``. Each is re-exported from its directory by
``tools/export_saved_model.py`` (a subprocess for the new kinds, the same
code in-process for the rest), and each export answers a request through
``tools/predict_saved_model.py`` (a subprocess that imports no model code);
the printed JSON lines must equal the signature called in this process.
The re-exports must also hold the run checkpoint's trained weights bit for
bit, or equal the model read straight from the checkpoint.

Then the bad input of both tools: one ``error:`` line, a non-zero exit, no
traceback, nothing written.
"""

import csv
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

from bert_tf import config as config_lib
from bert_tf import jobs
from bert_tf import preprocessing
from bert_tf.data.pretraining import faithful
from bert_tf.export import fine_tuned
from bert_tf.export import multiple_choice as multiple_choice_export
from bert_tf.export import saved_model
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import models
from bert_tf.modeling import multiple_choice as multiple_choice_model
from bert_tf.tasks import classification
from bert_tf.tasks import pretraining
from bert_tf.tasks import squad
from bert_tf.tasks import swag
from bert_tf.tasks import tagging
from conftest import DATA, MOVIE_DIR, ROOT, SAMPLE_TEXT, TINY_CONFIG, VOCAB, copy_slice, run_tool

PREDICT = "tools/predict_saved_model.py"
EXPORT = "tools/export_saved_model.py"
STRATEGY = tf.distribute.OneDeviceStrategy("/cpu:0")


def quiet(_):
  pass


def tiny_config():
  return config_lib.BertConfig.from_json_file(TINY_CONFIG)


# ------------------------------------------------------------------ helpers


def predict_tool(args, check=True):
  """Runs the predict tool; returns (process, parsed JSON lines)."""
  proc = run_tool([PREDICT] + list(args), check=check)
  rows = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
  return proc, rows


def export_tool(run_dir, export_dir, *flags):
  proc = run_tool([EXPORT, "--output_dir=" + str(run_dir),
                   "--export_dir=" + str(export_dir)] + list(flags))
  line = proc.stdout.strip().splitlines()[-1]
  assert line.startswith("exported ") and " to " in line, proc.stdout
  return line.split(" to ")[1].split(";")[0]


_LOADED = {}


def load(path):
  """``tf.saved_model.load`` once per path."""
  if path not in _LOADED:
    _LOADED[path] = tf.saved_model.load(path)
  return _LOADED[path]


def call_signature(path, inputs, signature="serving_default"):
  """The signature called in this process: {output: numpy array}."""
  fn = load(path).signatures[signature]
  args = {}
  for name, values in inputs.items():
    dtype = fn.structured_input_signature[1][name].dtype
    args[name] = tf.constant(values, dtype)
  return {k: v.numpy() for k, v in fn(**args).items()}


def assert_rows_equal(rows, outputs):
  """The tool's JSON rows == the signature's outputs, row by row: strings,
  integers and booleans exactly, floats exactly once rounded to the 6
  significant digits the tool prints."""
  batch = len(next(iter(outputs.values())))
  assert len(rows) == batch
  for i, row in enumerate(rows):
    assert sorted(row) == sorted(outputs), (sorted(row), sorted(outputs))
    for name, value in outputs.items():
      want, got = value[i], row[name]
      if value.dtype.kind in "SO":
        flat = np.array(got, dtype=object).ravel().tolist()
        assert flat == [b.decode("utf-8") for b in np.ravel(want)], name
      elif value.dtype.kind == "f":  # the tool's default --precision=6
        got = np.array(got, dtype=np.float64)
        assert got.shape == want.shape, name
        rounded = np.vectorize(lambda x: float("%.6g" % x), otypes=[np.float64])(
            np.asarray(want, np.float64))
        np.testing.assert_array_equal(got, rounded, err_msg=name)
      else:
        assert np.array_equal(np.array(got), want), name
        if np.size(got):  # an empty JSON list ([] entities) has no element type
          assert np.array(got).dtype.kind == ("b" if value.dtype.kind == "b" else "i")


def assert_weights_from_checkpoint(path, run_dir):
  """Every variable of the export holds a trained value of the run's
  checkpoint (best/ when kept, else the latest), bit for bit."""
  ckpt = (tf.train.latest_checkpoint(os.path.join(str(run_dir), "best")) or
          tf.train.latest_checkpoint(str(run_dir)))
  reader = tf.train.load_checkpoint(ckpt)
  stored = {(tuple(reader.get_tensor(k).shape), reader.get_tensor(k).tobytes())
            for k in reader.get_variable_to_shape_map()
            # the model's variables (some first reached through the optimizer's
            # list of trainable variables), not the optimizer's slots
            if k.endswith("/.ATTRIBUTES/VARIABLE_VALUE") and "OPTIMIZER_SLOT" not in k
            and not k.startswith(("optimizer/_variables/", "optimizer/_iterations",
                                  "rng/", "iterator", "save_counter"))}
  loaded = load(path)
  weights = [w for w in loaded.weights if w.dtype.is_floating]  # not RNG states
  assert len(weights) >= 18, len(weights)  # embeddings, 2 blocks, pooler, head
  for w in weights:
    v = w.numpy()
    assert (v.shape, v.tobytes()) in stored, (w.name, v.shape)
  # The query/key/value weights are saved once, concatenated (layers.FusedQKV):
  # each third is one of the checkpoint's query, key and value tensors.
  fused = [w.numpy() for w in loaded.fused_qkv]
  assert len(fused) >= 4 and len(fused) % 2 == 0, len(fused)
  for v in fused:
    for part in np.split(v, 3, axis=-1):
      part = np.ascontiguousarray(part)
      assert (part.shape, part.tobytes()) in stored, v.shape


def write_jsonl(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    for r in rows:
      f.write(json.dumps(r) + "\n")
  return str(path)


def assert_one_error_line(proc, *parts):
  """Exit != 0, no traceback, exactly one ``predict_saved_model: error:``
  (or ``export_saved_model``) line holding ``parts``, nothing on stdout."""
  assert proc.returncode != 0
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  errors = [l for l in proc.stderr.splitlines() if ": error: " in l]
  assert len(errors) == 1, proc.stderr[-3000:]
  for p in parts:
    assert p in errors[0], (p, errors[0])
  assert proc.stdout.strip() == "", proc.stdout[-2000:]
  return errors[0]


# --------------------------------------------------------------- tiny runs


def _classifier_run(tmp, task_name, data_dir, **kw):
  out = tmp / "run"
  params = classification.ClassifierParams(
      task_name=task_name, data_dir=str(data_dir), output_dir=str(out),
      vocab_file=VOCAB, bert_config_file=TINY_CONFIG, max_seq_length=32,
      train_batch_size=8, num_train_epochs=1, learning_rate=1e-3, **kw)
  jobs.run_classifier(params, STRATEGY, do_train=True, do_eval=False, print_fn=quiet)
  return out


def _reference_classifier(run_dir, num_labels):
  """The model read straight from the checkpoint (not through fine_tuned)."""
  model = models.build_classifier(tiny_config(), num_labels)
  tf.train.Checkpoint(model=model).read(tf.train.latest_checkpoint(str(run_dir))
                                        ).expect_partial().assert_existing_objects_matched()
  return model


@pytest.fixture(scope="module")
def classifier_runs(tmp_path_factory):
  """sst-2 (single), pairs (pair), sts-b (regression) runs, one step each."""
  tmp = tmp_path_factory.mktemp("classifiers")
  single = tmp / "single"
  copy_slice(os.path.join(MOVIE_DIR, "train.tsv"), str(single / "data" / "train.tsv"),
             every=600)
  pair = tmp / "pair"
  copy_slice(os.path.join(DATA, "dialog_reply_pairs", "train.tsv"),
             str(pair / "data" / "train.tsv"), every=300)
  reg = tmp / "reg"
  (reg / "data").mkdir(parents=True)
  lines = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
           "sentence2\tscore"]
  sents = [("A man is playing a flute.", "A man plays the flute.", 4.8),
           ("A cat sleeps.", "The stock market fell.", 0.2),
           ("Two dogs run on grass.", "Dogs are running outside.", 3.9),
           ("A woman slices onions.", "Someone is cutting vegetables.", 3.1)] * 2
  for i, (a, b, s) in enumerate(sents):
    lines.append("%d\tmain\tx\t2012\t%d\tnone\tnone\t%s\t%s\t%.1f" % (i, i, a, b, s))
  (reg / "data" / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  return {"single": _classifier_run(single, "sst-2", single / "data"),
          "pair": _classifier_run(pair, "pairs", pair / "data"),
          "reg": _classifier_run(reg, "sts-b", reg / "data")}


SQUAD_PARAGRAPHS = [
    ("Super Bowl 50 was an American football game. The Denver Broncos defeated "
     "the Carolina Panthers 24-10 to earn their third Super Bowl title.",
     [("Which team won Super Bowl 50?", "Denver Broncos"),
      ("Who lost the game?", "Carolina Panthers"),
      ("What is the capital of Mars?", None)]),
    ("The Caf\u00e9 de Flore is a coffee house in Paris, on the corner of the "
     "Boulevard Saint-Germain and the Rue Saint-Beno\u00eet.",
     [("Where is the Caf\u00e9 de Flore?", "Paris"),
      ("Which boulevard is it on?", "Boulevard Saint-Germain"),
      ("Who owns the moon?", None)]),
]


def write_squad(path, v2):
  paragraphs, n = [], 0
  for context, qas in SQUAD_PARAGRAPHS:
    entries = []
    for question, answer in qas:
      if answer is None and not v2:
        continue
      n += 1
      entry = {"id": "q%d" % n, "question": question,
               "answers": [] if answer is None else [
                   {"text": answer, "answer_start": context.index(answer)}]}
      if v2:
        entry["is_impossible"] = answer is None
      entries.append(entry)
    paragraphs.append({"context": context, "qas": entries})
  path.write_text(json.dumps({"version": "2.0" if v2 else "1.1", "data": [
      {"title": "tiny", "paragraphs": paragraphs}]}), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory):
  """run_squad, SQuAD 2.0 (answerable and impossible questions), 3 steps."""
  return _squad_run(tmp_path_factory.mktemp("squad"), v2=True)


def _squad_run(tmp, v2):
  out = tmp / "run"
  params = squad.SquadParams(
      output_dir=str(out), train_file=write_squad(tmp / "train.json", v2),
      vocab_file=VOCAB, bert_config_file=TINY_CONFIG, do_train=True,
      max_seq_length=48, doc_stride=16, max_query_length=12, train_batch_size=4,
      num_train_epochs=2, learning_rate=1e-3, iterations_per_loop=10,
      version_2_with_negative=v2, null_score_diff_threshold=0.5)
  jobs.run_squad(params, STRATEGY, print_fn=quiet)
  return out


CONLL = """John\tB-PER
lives\tO
in\tO
New\tB-LOC
York\tI-LOC
.\tO

Mary\tB-PER
Smith\tI-PER
visited\tO
Paris\tB-LOC

the\tO
caf\u00e9\tO
in\tO
Berlin\tB-LOC
is\tO
closed\tO
"""


@pytest.fixture(scope="module")
def ner_run(tmp_path_factory):
  """run_ner: 3 sentences x 2 epochs, seq 8 (long sentences: windows)."""
  tmp = tmp_path_factory.mktemp("ner")
  (tmp / "data").mkdir()
  (tmp / "data" / "train.txt").write_text(CONLL * 2, encoding="utf-8")
  out = tmp / "run"
  params = tagging.NerParams(
      output_dir=str(out), data_dir=str(tmp / "data"), vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, do_train=True, max_seq_length=8, doc_stride=3,
      train_batch_size=4, num_train_epochs=1, learning_rate=1e-3)
  jobs.run_ner(params, STRATEGY, print_fn=quiet)
  return out


SWAG_HEADER = ("video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
               "ending0,ending1,ending2,ending3,label")
SWAG_ROWS = [
    ("He opens the door.", "He", "walks in.", "eats the door.", "flies away.", "sings a car.", 0),
    ("She picks up the phone.", "She", "drinks it.", "says hello.", "paints it.", "runs up it.", 1),
    ("The dough has risen.", "The baker", "sleeps on it.", "sells the oven.",
     "shapes the loaves.", "reads it.", 2),
    ("It starts to rain.", "People", "sunbathe.", "freeze solid.", "eat stones.",
     "open their umbrellas.", 3),
]


@pytest.fixture(scope="module")
def swag_run(tmp_path_factory):
  """run_swag: 8 rows of 4 choices, 2 steps."""
  tmp = tmp_path_factory.mktemp("swag")
  (tmp / "data").mkdir()
  with open(tmp / "data" / "train.csv", "w", encoding="utf-8", newline="") as f:
    f.write(SWAG_HEADER + "\n")
    w = csv.writer(f, lineterminator="\n")
    for i, (s1, s2, e0, e1, e2, e3, label) in enumerate(SWAG_ROWS * 2):
      w.writerow(["v%d" % i, i, s1 + " " + s2, s1, s2, "gold", e0, e1, e2, e3, label])
  out = tmp / "run"
  params = swag.SwagParams(
      output_dir=str(out), data_dir=str(tmp / "data"), vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, do_train=True, max_seq_length=24,
      train_batch_size=4, num_train_epochs=1, learning_rate=1e-3)
  jobs.run_swag(params, STRATEGY, print_fn=quiet)
  return out


@pytest.fixture(scope="module")
def pretraining_run(tmp_path_factory):
  """run_pretraining: 1 step on records of the original's sample text."""
  tmp = tmp_path_factory.mktemp("pretraining")
  records = str(tmp / "pt.tfrecord")
  faithful.create_pretraining_data(SAMPLE_TEXT, records, VOCAB, max_seq_length=32,
                                   max_predictions_per_seq=5, dupe_factor=1,
                                   random_seed=7)
  out = tmp / "run"
  jobs.run_pretraining(
      tiny_config(), pretraining.PretrainingParams(
          input_file=records, output_dir=str(out), max_seq_length=32,
          max_predictions_per_seq=5, train_batch_size=8, num_train_steps=1,
          iterations_per_loop=1, num_warmup_steps=0, learning_rate=1e-3),
      STRATEGY, print_fn=quiet)
  return out


# ---------------------------------------------------- every export, end to end


@pytest.mark.slow
def test_classifier_exports_single_pair_regression(classifier_runs, tmp_path):
  """The three classifier shapes, re-exported from their run directories,
  equal the checkpoint's model and answer through the predict tool:
  command-line strings (one per row / text_a text_b per row) and JSON lines."""
  texts = ["A gorgeous, witty, seductive movie.", "dull", "", "caf\u00e9 \u535a na\u00efve"]
  pre = preprocessing.BertPreprocessor(VOCAB, True, 32)
  # single sentence: the export tool itself; the export dir without version.
  path = export_tool(classifier_runs["single"], tmp_path / "single")
  assert path == str(tmp_path / "single" / "1")
  _, rows = predict_tool([str(tmp_path / "single")] + texts)
  out = call_signature(path, {"text": texts})
  assert_rows_equal(rows, out)
  assert [r["labels"] for r in rows] == [["0", "1"][i] for i in out["label_ids"]]
  model = _reference_classifier(classifier_runs["single"], 2)
  feats = preprocessing.trim_to_longest(pre(tf.constant(texts)))
  np.testing.assert_allclose(out["logits"], model(feats, training=False).numpy(),
                             atol=1e-5)

  # pair: in-process export_run (the tool's code path), --input_file rows.
  run = fine_tuned.load_run(str(classifier_runs["pair"]))
  assert (run.kind, run.task_name, run.run_config["is_pair"]) == ("classifier", "pairs", True)
  path = fine_tuned.export_run(run, None, str(tmp_path / "pair"))
  a, b = ["you looked beautiful last night.", "hi", ""], ["yes, captain?", "", "ok"]
  req = write_jsonl(tmp_path / "pair.jsonl",
                    [{"text_a": x, "text_b": y} for x, y in zip(a, b)])
  _, rows = predict_tool(["--input_file=" + req, path])
  out = call_signature(path, {"text_a": a, "text_b": b})
  assert_rows_equal(rows, out)
  model = _reference_classifier(classifier_runs["pair"], 2)
  feats = preprocessing.trim_to_longest(pre(tf.constant(a), tf.constant(b)))
  np.testing.assert_allclose(out["logits"], model(feats, training=False).numpy(),
                             atol=1e-5)

  # regression (STS-B, a pair task): one float per row.
  run = fine_tuned.load_run(str(classifier_runs["reg"]))
  path = fine_tuned.export_run(run, "classifier", str(tmp_path / "reg"))
  args = ["A man is playing a flute.", "A man plays the flute.", "A cat.", "Stocks fell."]
  _, rows = predict_tool([path] + args)
  out = call_signature(path, {"text_a": args[0::2], "text_b": args[1::2]})
  # every classifier export says how it read each row (issue 69).
  assert sorted(out) == ["num_windows", "predictions", "truncated"]
  np.testing.assert_array_equal(out["num_windows"], [1, 1])
  np.testing.assert_array_equal(out["truncated"], [False, False])
  assert_rows_equal(rows, out)
  model = _reference_classifier(classifier_runs["reg"], 1)
  feats = preprocessing.trim_to_longest(pre(tf.constant(args[0::2]),
                                            tf.constant(args[1::2])))
  np.testing.assert_allclose(out["predictions"],
                             model(feats, training=False).numpy()[:, 0], atol=1e-5)


SQUAD_QUESTIONS = ["Which team won Super Bowl 50?", "Where is the Caf\u00e9 de Flore?",
                   "Who owns the moon?"]
SQUAD_CONTEXTS = [SQUAD_PARAGRAPHS[0][0], SQUAD_PARAGRAPHS[1][0], SQUAD_PARAGRAPHS[0][0]]


@pytest.mark.slow
def test_squad_v2_run_reexported_by_the_tool(squad_run, tmp_path):
  """``--output_dir=<a run_squad run>`` (it used to say "missing
  classifier_config.json"): the tool's export holds the run's trained
  weights and settings, and the predict tool reads question/context JSON
  lines."""
  run_dir = squad_run
  assert fine_tuned.run_kind(str(run_dir)) == "squad"
  path = export_tool(run_dir, tmp_path / "export")
  meta = saved_model.read_metadata(path)
  assert meta["export"] == "squad" and meta["version_2_with_negative"]
  assert (meta["max_seq_length"], meta["doc_stride"], meta["max_query_length"],
          meta["null_score_diff_threshold"]) == (48, 16, 12, 0.5)
  req = write_jsonl(tmp_path / "q.jsonl", [{"question": q, "context": c} for q, c in
                                           zip(SQUAD_QUESTIONS, SQUAD_CONTEXTS)])
  _, rows = predict_tool(["--input_file=" + req, str(tmp_path / "export")])
  inputs = {"question": SQUAD_QUESTIONS, "context": SQUAD_CONTEXTS}
  out = call_signature(path, inputs)
  assert {"no_answer", "null_score_diff", "answer", "start_char"} <= set(out)
  assert_rows_equal(rows, out)
  assert_weights_from_checkpoint(path, run_dir)
  for row, context in zip(rows, SQUAD_CONTEXTS):  # offsets into the context
    if row["score"] != float("-inf"):
      assert context[row["start_char"]:row["end_char"]] == row["answer"]


@pytest.mark.slow
def test_squad_v1_run_and_run_kind_errors(squad_run, tmp_path):
  """A SQuAD v1.1 run (the v2 run's directory with its squad_config.json
  saying version_2_with_negative false: the run config alone decides),
  exported by export_run in-process; command-line question/context pairs.
  --what that does not fit the run is one error naming the choices."""
  run_dir = tmp_path / "run"
  shutil.copytree(squad_run, run_dir)
  config = json.loads((run_dir / "squad_config.json").read_text(encoding="utf-8"))
  assert config["version_2_with_negative"] is True
  config["version_2_with_negative"] = False
  (run_dir / "squad_config.json").write_text(json.dumps(config), encoding="utf-8")
  run = fine_tuned.load_run(str(run_dir))
  assert run.kind == "squad" and run.max_seq_length == 48
  path = fine_tuned.export_run(run, None, str(tmp_path / "export"))
  args = [x for qc in zip(SQUAD_QUESTIONS, SQUAD_CONTEXTS) for x in qc]
  _, rows = predict_tool([path] + args)
  out = call_signature(path, {"question": SQUAD_QUESTIONS, "context": SQUAD_CONTEXTS})
  assert sorted(out) == ["answer", "end_char", "score", "start_char"]
  assert_rows_equal(rows, out)
  with pytest.raises(fine_tuned.FineTunedDirError, match="--what=classifier: .* "
                     "run_squad.py run; it exports as squad, preprocessor"):
    fine_tuned.export_run(run, "classifier", str(tmp_path / "no"))
  with pytest.raises(fine_tuned.FineTunedDirError, match="--vocab_file is for "
                     "run_pretraining.py runs"):
    fine_tuned.load_run(str(run_dir), vocab_file=VOCAB)
  assert not os.path.exists(tmp_path / "no")


@pytest.mark.slow
def test_ner_run_reexported_by_the_tool(ner_run, tmp_path):
  """run_ner's directory -> the tagger export (sentence in, tags out) with
  the run's weights and doc_stride; sentences from the command line."""
  path = export_tool(ner_run, tmp_path / "export")
  assert saved_model.read_metadata(path)["doc_stride"] == 3
  sentences = ["John Smith lives in New York .", "caf\u00e9 in Berlin", ""]
  _, rows = predict_tool([path] + sentences)
  out = call_signature(path, {"sentence": sentences})
  assert "tags" in out and "entity_text" in out
  assert_rows_equal(rows, out)
  assert_weights_from_checkpoint(path, ner_run)
  assert rows[0]["words"][:rows[0]["num_words"]] == sentences[0].split()


@pytest.mark.slow
def test_swag_run_reexported_by_the_tool(swag_run, tmp_path):
  """run_swag's directory -> the multiple-choice export with the run's
  weights; the command line gives context + num_choices endings per row. The predict
  tool imports no bert_tf model, task or export code."""
  path = export_tool(swag_run, tmp_path / "export")
  assert saved_model.read_metadata(path)["num_choices"] == 4
  contexts = ["He opens the door.", "It starts to rain."]
  endings = [["He walks in.", "He eats the door.", "He flies away.", ""],
             ["People sunbathe.", "People freeze.", "People eat stones.",
              "People open their umbrellas."]]
  args = [x for c, e in zip(contexts, endings) for x in [c] + e]
  probe = os.path.join(str(tmp_path), "modules.json")
  code = ("import atexit, json, runpy, sys\n"
          "atexit.register(lambda: json.dump(sorted(sys.modules), open(%r, 'w')))\n"
          "sys.argv = %r\n"
          "runpy.run_path(%r, run_name='__main__')\n" % (probe, [PREDICT, path] + args,
                                                         PREDICT))
  proc = run_tool(["-c", code])
  rows = [json.loads(l) for l in proc.stdout.splitlines()]
  with open(probe, encoding="utf-8") as f:
    modules = json.load(f)
  # Only the package's standard-library plumbing (bert_tf._lazy, _quiet, ...),
  # the start-up module and the TF-only client (whose imports
  # test_architecture.py holds to TensorFlow, tensorflow-text, numpy and the
  # standard library): no model, task, preprocessing or export-writing code.
  ours = [m for m in modules if m.split(".")[0] in ("bert_tf", "export", "tools")]
  assert [m for m in ours if m not in ("bert_tf", "bert_tf.tools", "bert_tf.tools._startup",
                                       "bert_tf.export", "bert_tf.export.client",
                                       "bert_tf.io_utils")
          and not re.fullmatch(r"bert_tf\._[a-z_]+", m)] == [], ours
  assert "tensorflow_text" in modules
  out = call_signature(path, {"context": contexts, "endings": endings})
  assert out["probabilities"].shape == (2, 4)
  assert_rows_equal(rows, out)
  assert_weights_from_checkpoint(path, swag_run)


@pytest.mark.slow
def test_pretraining_run_encoder_and_features(pretraining_run, tmp_path):
  """A pretraining run (only bert_config.json + checkpoints): --what=features
  with --vocab_file through the tool, the id-level encoder in-process; the
  export directory given without a version serves its highest version."""
  assert fine_tuned.run_kind(str(pretraining_run)) == "pretraining"
  base = tmp_path / "export"
  features = export_tool(pretraining_run, base, "--what=features",
                         "--vocab_file=" + VOCAB, "--max_seq_length=16")
  assert features == str(base / "1")
  # The default (the id-level encoder) says so, and how to get text in.
  proc = run_tool([EXPORT, "--output_dir=%s" % pretraining_run, "--max_seq_length=16",
                   "--export_dir=%s" % (tmp_path / "ids")])
  assert "it takes token ids" in proc.stdout and "--what=features" in proc.stdout, proc.stdout
  run = fine_tuned.load_run(str(pretraining_run), max_seq_length=16)
  encoder_path = fine_tuned.export_run(run, None, str(base))   # version 2
  assert encoder_path == str(base / "2")
  os.makedirs(base / "10")          # no saved_model.pb: not a version
  with pytest.raises(fine_tuned.FineTunedDirError, match="--vocab_file is required"):
    fine_tuned.export_run(run, "features", str(tmp_path / "none"))

  # The encoder export (highest version): int id rows from JSON lines.
  ids = [[101, 7592, 2088, 102, 0], [101, 2023, 102, 0, 0]]
  inputs = {"input_word_ids": ids, "input_mask": [[int(i > 0) for i in r] for r in ids],
            "input_type_ids": [[0] * 5, [0] * 5]}
  req = write_jsonl(tmp_path / "ids.jsonl", [{k: v[i] for k, v in inputs.items()}
                                             for i in range(2)])
  _, rows = predict_tool(["--input_file=" + req, str(base)])
  out = call_signature(encoder_path, inputs)
  assert_rows_equal(rows, out)
  reference = encoder_lib.BertEncoder(tiny_config(), name="bert")
  tf.train.Checkpoint(encoder=reference).read(tf.train.latest_checkpoint(
      str(pretraining_run))).expect_partial().assert_existing_objects_matched()
  ref = reference({"input_ids": tf.constant(ids), "input_mask": tf.constant(
      inputs["input_mask"]), "segment_ids": tf.constant(inputs["input_type_ids"])},
                  training=False)
  np.testing.assert_allclose(out["sequence_output"], ref["sequence_output"].numpy(),
                             atol=1e-5)

  # The features export, its pair signature (--pair), strings in.
  args = ["the man went to the store", "he bought milk", "hello", ""]
  _, rows = predict_tool(["--pair", features] + args)
  out = call_signature(features, {"text_a": args[0::2], "text_b": args[1::2]}, "pair")
  assert out["encoder_outputs"].shape[:2] == (2, 2)
  assert_rows_equal(rows, out)
  assert rows[0]["tokens"][:3] == ["[CLS]", "the", "man"]


# -------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def small_exports(tmp_path_factory):
  """Untrained exports for the bad-input cases (weights do not matter):
  multiple choice (num_choices 3) and the id-level encoder."""
  tmp = tmp_path_factory.mktemp("small")
  cfg = tiny_config()
  pre = preprocessing.BertPreprocessor(VOCAB, True, 16)
  mc = multiple_choice_export.export_multiple_choice(
      multiple_choice_model.build_multiple_choice(cfg), pre, str(tmp / "mc"), 3)
  enc = saved_model.export_encoder(models.build_classifier(cfg, 2).encoder,
                                   str(tmp / "enc"), max_seq_length=8)
  return {"tmp": tmp, "mc": mc, "enc": enc}


def _bad_case(name, small, tmp):
  """``(args, parts of the error line)`` of one bad request."""
  mc, enc = small["mc"], small["enc"]
  good = {"context": "He opens the door.", "endings": ["a", "b", "c"]}
  if name == "not_json":
    path = tmp / "rows.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + '{"context": "x", "endings": [\n',
                    encoding="utf-8")
    return (["--input_file=%s" % path, mc],
            ["%s:3: not JSON" % path])
  if name == "lacks_input":
    path = write_jsonl(tmp / "rows.jsonl", [good, {"context": "no endings"}])
    return (["--input_file=" + path, mc],
            ["%s:2: no 'endings'" % path, "takes context, endings ([3] strings)"])
  if name == "mixed_widths":
    rows = [{"input_word_ids": [101, 102], "input_mask": [1, 1], "input_type_ids": [0, 0]},
            {"input_word_ids": [101, 7, 102], "input_mask": [1, 1, 1],
             "input_type_ids": [0, 0, 0]}]
    path = write_jsonl(tmp / "rows.jsonl", rows)
    return (["--input_file=" + path, enc],
            ["%s:2: 'input_word_ids' has shape [3] but %s:1's has [2]" % (path, path),
             "same width"])
  if name == "strings_do_not_fit":
    return ([mc, "ctx", "a", "b", "c", "ctx2"],
            ["serving_default takes context, endings ([3] strings): 4 arguments "
             "per row, got 5"])
  if name == "no_version_folder":
    (tmp / "empty" / "v1").mkdir(parents=True)
    return ([str(tmp / "empty"), "x"],
            ["%s holds no saved_model.pb and no numeric version folder" % (tmp / "empty")])
  raise AssertionError(name)


BAD_CASES = ["not_json", "lacks_input", "mixed_widths", "strings_do_not_fit",
             "no_version_folder"]


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
@pytest.mark.parametrize("case", BAD_CASES)
def test_predict_tool_bad_input_is_one_line(small_exports, tmp_path, case):
  args, parts = _bad_case(case, small_exports, tmp_path)
  out = tmp_path / "out.jsonl"
  proc, rows = predict_tool(["--output_file=%s" % out] + args, check=False)
  line = assert_one_error_line(proc, *parts)
  assert line.startswith("predict_saved_model: error: "), line
  assert rows == [] and not out.exists()
  assert not [f for f in os.listdir(tmp_path) if f.startswith(".out.jsonl")]


CHECKS = r"""
import json, sys
sys.argv = ["predict_saved_model"]
from bert_tf.tools import predict_saved_model as p
mc, enc, tmp = json.loads(sys.stdin.read())

def inputs(path):
  path = p.resolve_export(path)
  return p.signature_inputs(p.read_signatures(path)["serving_default"],
                            p.read_metadata(path), "serving_default")

def error(fn, *args):
  try:
    fn(*args)
  except p.PredictError as e:
    return str(e)
  return None

def jsonl(name, text, path):
  f = "%s/%s.jsonl" % (tmp, name)
  open(f, "w", encoding="utf-8").write(text)
  return error(lambda: p.check_rows(p.rows_from_jsonl(f, inputs(path)), inputs(path)))

good = json.dumps({"context": "c", "endings": ["a", "b", "c"]})
out = {
  "order": [i.describe() for i in inputs(enc)],
  "unknown": jsonl("unknown", good[:-1] + ', "label": 1}\n', mc),
  "not_object": jsonl("list", '["c", ["a", "b", "c"]]\n', mc),
  "not_string": jsonl("num", '{"context": 3, "endings": ["a", "b", "c"]}\n', mc),
  "choices": jsonl("choices", good + "\n" + '{"context": "c", "endings": ["a"]}\n', mc),
  "nested": jsonl("nested", '{"input_word_ids": [[1], [2, 3]], "input_mask": [1], '
                  '"input_type_ids": [0]}\n', enc),
  "range": jsonl("range", '{"input_word_ids": [4294967296], "input_mask": [1], '
                 '"input_type_ids": [0]}\n', enc),
  "float_id": jsonl("float", '{"input_word_ids": [1.5], "input_mask": [1], '
                    '"input_type_ids": [0]}\n', enc),
  "b64": jsonl("b64", '{"context": {"b64": "%%%"}, "endings": ["a", "b", "c"]}\n', mc),
  "empty": jsonl("empty", "\n\n", mc),
  "missing_dir": error(p.resolve_export, tmp + "/missing"),
  "args": error(p.rows_from_args, ["[1, 2]", "[1, 1]"], inputs(enc)),
  "decoded": p.decode_outputs({"f": p.tf.constant([[1.23456789, float("-inf")]]),
                               "s": p.tf.constant([b"caf\xc3\xa9"]),
                               "b": p.tf.constant([True]), "scalar": p.tf.constant(7)}, 1),
}
print(json.dumps(out))
"""


def test_predict_tool_request_checks(small_exports):
  """The request checks behind the one-line errors, in one process of the
  tool's module: unknown inputs, wrong types, widths, ranges, base64, an
  empty file, the input order from the export's metadata, the decoding."""
  proc = subprocess.run([sys.executable, "-c", CHECKS], cwd=ROOT, capture_output=True,
                        text=True, input=json.dumps([small_exports["mc"], small_exports["enc"],
                                                     str(small_exports["tmp"])]))
  assert proc.returncode == 0, proc.stderr[-3000:]
  got = json.loads(proc.stdout.strip().splitlines()[-1])
  assert got["order"] == ["input_word_ids (int32 [N])", "input_mask (int32 [N])",
                          "input_type_ids (int32 [N])"]
  assert got["unknown"].endswith("unknown.jsonl:1: unknown input 'label' (serving_default "
                                 "takes context, endings ([3] strings))")
  assert "list.jsonl:1: not a JSON object of the inputs" in got["not_object"]
  assert "num.jsonl:1: 'context' must be a string, got 3" in got["not_string"]
  assert "choices.jsonl:2: 'endings' has 1 strings; this export takes 3" in got["choices"]
  assert "nested.jsonl:1: 'input_word_ids' must hold int32 numbers, got [1]" in got["nested"]
  assert "range.jsonl:1: 'input_word_ids': 4294967296 is out of int32's range" in got["range"]
  assert "float.jsonl:1: 'input_word_ids' must hold int32 numbers, got 1.5" in got["float_id"]
  assert "b64.jsonl:1: 'context': bad base64" in got["b64"]
  assert got["empty"].endswith("empty.jsonl holds no request row")
  assert got["missing_dir"].endswith("missing: no such directory")
  assert got["args"].startswith("serving_default takes input_word_ids (int32 [N]), "
                                "input_mask (int32 [N]), input_type_ids (int32 [N]): "
                                "3 arguments per row, got 2")
  assert got["decoded"] == [{"b": True, "f": [1.23457, float("-inf")], "s": "caf\u00e9",
                             "scalar": 7}]


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_predict_tool_good_request_with_output_file(small_exports, tmp_path):
  """The same tool on a good request: --output_file holds the JSON lines,
  --with_inputs echoes the row, b64 strings are read (TF Serving's form)."""
  out = tmp_path / "out.jsonl"
  rows = [{"context": "He opens the door.", "endings": ["walks in", "b", "c"]},
          {"context": {"b64": "SXQgcmFpbnMu"}, "endings": ["x", "", "z"]}]
  req = write_jsonl(tmp_path / "rows.jsonl", rows)
  proc, printed = predict_tool(["--input_file=" + req, "--output_file=%s" % out,
                                "--with_inputs", small_exports["mc"]])
  assert printed == []
  got = [json.loads(l) for l in out.read_text(encoding="utf-8").splitlines()]
  assert [g.pop("inputs") for g in got] == [
      rows[0], {"context": "It rains.", "endings": ["x", "", "z"]}]
  want = call_signature(small_exports["mc"], {
      "context": ["He opens the door.", "It rains."],
      "endings": [r["endings"] for r in rows]})
  assert_rows_equal(got, want)


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_export_tool_bad_run_dirs(tmp_path):
  """Not a run directory, or a run without checkpoint: one line, nothing written."""
  export_dir = tmp_path / "export"
  proc = run_tool([EXPORT, "--output_dir=%s" % tmp_path,
                   "--export_dir=%s" % export_dir], check=False)
  assert_one_error_line(proc, "export_saved_model: error:", "missing bert_config.json",
                        "run_squad.py")
  run = tmp_path / "squad_run"
  run.mkdir()
  for name in ("bert_config.json", "vocab.txt"):
    src = TINY_CONFIG if name == "bert_config.json" else VOCAB
    (run / name).write_bytes(open(src, "rb").read())
  (run / "squad_config.json").write_text('{"task": "squad", "max_seq_length": 32}')
  proc = run_tool([EXPORT, "--output_dir=%s" % run, "--export_dir=%s" % export_dir],
                  check=False)
  assert_one_error_line(proc, "no checkpoint (ckpt-N.index) found")
  assert not export_dir.exists()
  # An export directory holding anything but versions: refused before the
  # model is read, what it holds untouched.
  export_dir.mkdir()
  (export_dir / "notes.txt").write_text("mine")
  proc = run_tool([EXPORT, "--output_dir=%s" % run, "--export_dir=%s" % export_dir],
                  check=False)
  assert_one_error_line(proc, "--export_dir", "holds notes.txt besides model versions")
  assert os.listdir(export_dir) == ["notes.txt"]
  # A refused format comes first and alone (issue 70): no model is read.
  proc = run_tool([EXPORT, "--from_preset=%s" % (tmp_path / "no_such_model"), "--task=squad",
                   "--format=litert", "--export_dir=%s" % (tmp_path / "sq")], check=False)
  assert_one_error_line(proc, "--format", "not convertible")
  assert "random" not in proc.stderr
