"""SQuAD fine-tuning and prediction: the task, the job and tools/run_squad.py.

Real data: slices of the bundled ``data/squad_v1`` (SQuAD-Shifts, v1.1 format)
and ``data/squad_v2_disfl`` (Disfl-QA, v2.0 format, unanswerable questions),
the tiny config and the uncased vocab; the fine-tune sanity test starts from
the real all-MiniLM-L6-v2 weights.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import errors
from bert_tf import jobs
from bert_tf.tasks import squad
from conftest import SQUAD_V1_DIR, SQUAD_V2_DIR, TINY_CONFIG, VOCAB, run_tool
from test_squad_data import assert_same_metrics, official_evaluation


V1_TRAIN = os.path.join(SQUAD_V1_DIR, "train.json")
V1_DEV = os.path.join(SQUAD_V1_DIR, "dev.json")
V2_TRAIN = os.path.join(SQUAD_V2_DIR, "train.json")
V2_DEV = os.path.join(SQUAD_V2_DIR, "dev.json")


def write_slice(src, dst, num_questions, skip=0, strip_answers=False):
  """The first ``num_questions`` questions of a SQuAD file (after skipping
  ``skip`` questions, whole paragraphs at a time), in the same JSON layout
  (the BIG-bench canary key kept). Returns the question ids."""
  with open(src, encoding="utf-8") as f:
    data = json.load(f)
  articles, ids, left = [], [], num_questions
  for article in data["data"]:
    paragraphs = []
    for para in article["paragraphs"]:
      if left <= 0:
        break
      if skip > 0:
        skip -= len(para["qas"])
        continue
      qas = para["qas"][:left]
      left -= len(qas)
      if strip_answers:
        qas = [{"id": q["id"], "question": q["question"]} for q in qas]
      ids.extend(q["id"] for q in qas)
      paragraphs.append(dict(para, qas=qas))
    if paragraphs:
      articles.append(dict(article, paragraphs=paragraphs))
    if left <= 0:
      break
  assert len(ids) == num_questions, (src, len(ids), num_questions)  # the file has them
  with open(dst, "w", encoding="utf-8") as f:
    json.dump(dict(data, data=articles), f)
  return ids


def tiny_params(tmp_path, **kw):
  """SquadParams for the tiny config on a 64/32-question v1.1 slice."""
  train = str(tmp_path / "train.json")
  dev = str(tmp_path / "dev.json")
  if not os.path.exists(train):
    write_slice(V1_TRAIN, train, 64)
    write_slice(V1_DEV, dev, 32)
  values = dict(output_dir=str(tmp_path / "out"), train_file=train, predict_file=dev,
                bert_config_file=TINY_CONFIG, vocab_file=VOCAB, do_train=True,
                do_predict=True, max_seq_length=128, doc_stride=64,
                train_batch_size=8, predict_batch_size=5, num_train_epochs=1.0,
                iterations_per_loop=4)
  values.update(kw)
  return squad.SquadParams(**values)


def read_results(path):
  with open(path, encoding="utf-8") as f:
    return dict(l.split(" = ") for l in f.read().splitlines())


def test_params_carry_the_original_flags():
  """Names and defaults of google-research/bert run_squad.py's flags."""
  p = squad.SquadParams(output_dir="o")
  want = dict(train_file=None, predict_file=None, vocab_file=None,
              bert_config_file=None, init_checkpoint=None, do_train=False,
              do_predict=False, do_lower_case=True, max_seq_length=384,
              doc_stride=128, max_query_length=64, train_batch_size=32,
              predict_batch_size=8, learning_rate=5e-5, num_train_epochs=3.0,
              warmup_proportion=0.1, save_checkpoints_steps=1000,
              iterations_per_loop=1000, n_best_size=20, max_answer_length=30,
              verbose_logging=False, version_2_with_negative=False,
              null_score_diff_threshold=0.0)
  assert {k: getattr(p, k) for k in want} == want


def test_task_inputs_steps_and_loss(tmp_path):
  """Features, the original's step count and example order, batches, loss."""
  import random  # pylint: disable=g-import-not-at-top
  from bert_tf import tokenization  # pylint: disable=g-import-not-at-top
  from bert_tf.data import squad as squad_data  # pylint: disable=g-import-not-at-top
  p = tiny_params(tmp_path, num_train_epochs=2.0)
  task = squad.QuestionAnsweringTask(p)
  assert not os.path.exists(p.output_dir)  # nothing written before the run
  examples = squad_data.read_squad_examples(p.train_file, True)
  random.Random(12345).shuffle(examples)  # run_squad.main's pre-shuffle
  assert [e.qas_id for e in task.train_examples] == [e.qas_id for e in examples]
  assert task.num_train_steps == int(64 / 8 * 2.0) == 16
  assert task.optimizer_spec().num_warmup_steps == 1
  features = squad_data.convert_examples_to_features(
      examples, tokenization.FullTokenizer(VOCAB, True), 128, 64, 64, True)
  assert task.num_train_features == len(features) > 64  # doc-stride windows
  np.testing.assert_array_equal(task.train_arrays["input_ids"],
                                [f.input_ids for f in features])
  np.testing.assert_array_equal(task.train_arrays["start_positions"],
                                [f.start_position for f in features])
  assert task.has_answers and len(task.predict_examples) == 32
  # Batches: every row is one feature with its own positions.
  x, y = next(iter(task.train_dataset(8, None)))
  assert x["input_ids"].shape == (8, 128) and x["input_ids"].dtype == tf.int32
  by_ids = {tuple(r): i for i, r in enumerate(task.train_arrays["input_ids"])}
  for row, s, e in zip(x["input_ids"].numpy(), y["start_positions"].numpy(),
                       y["end_positions"].numpy()):
    i = by_ids[tuple(row)]
    assert (s, e) == (task.train_arrays["start_positions"][i],
                      task.train_arrays["end_positions"][i])
  # Two workers: disjoint shares of the same shuffled order (one global batch).
  shares = [next(iter(task.train_dataset(4, tf.distribute.InputContext(2, i, 2))))[0]
            for i in range(2)]
  assert sorted(map(tuple, np.concatenate([b["input_ids"].numpy() for b in shares]))) == \
      sorted(map(tuple, x["input_ids"].numpy()))
  # The loss: the original's mean of start and end CE (here summed and divided
  # by the global batch); an untrained head scores ~ln(128) per position.
  model = task.build_model()
  loss, sums = task.compute_loss(model, (x, y))
  assert float(sums["examples"]) == 8
  assert float(loss) == pytest.approx(float(sums["loss_sum"]) / 8, rel=1e-6)
  assert float(loss) == pytest.approx(np.log(128), rel=0.2)


def test_fixed_shape_prediction_pads_the_last_batch(tmp_path):
  p = tiny_params(tmp_path, do_train=False)
  task = squad.QuestionAnsweringTask(p, do_train=False)
  model = task.build_model()
  arrays = {k: v[:13] for k, v in task.predict_arrays.items()}
  s5, e5 = squad.predict_logits(model, arrays, 5)  # batches 5, 5, 3 (+2 padding)
  s13, e13 = squad.predict_logits(model, arrays, 13)
  direct = model({k: tf.constant(v) for k, v in arrays.items()})
  assert s5.shape == (13, 128) and s5.dtype == np.float32
  np.testing.assert_allclose(s5, direct["start_logits"].numpy(), atol=1e-5)
  np.testing.assert_allclose(e5, e13, atol=1e-5)


def test_bad_params_name_the_flag_and_write_nothing(tmp_path):
  cases = [
      (dict(train_file=None), "train_file", "required with --do_train"),
      (dict(predict_file=str(tmp_path / "nope.json")), "predict_file", "does not exist"),
      (dict(max_seq_length=64, max_query_length=64), "max_seq_length",
       "must be greater than max_query_length"),
      (dict(doc_stride=0), "doc_stride", "positive"),
      (dict(max_seq_length=1024), "max_seq_length", "max_position_embeddings"),
      (dict(bert_config_file=None), "bert_config_file", "required"),
      (dict(predict_batch_size=0), "predict_batch_size", "positive"),
  ]
  for overrides, argument, text in cases:
    p = tiny_params(tmp_path, **overrides)
    with pytest.raises(errors.BertTfError, match=text) as e:
      jobs.run_squad(p, tf.distribute.OneDeviceStrategy("/cpu:0"), print_fn=lambda s: None)
    assert e.value.argument == argument, (overrides, e.value.argument)
    assert not os.path.exists(p.output_dir)
  bad = tmp_path / "bad.json"
  bad.write_text('{"data": [{"paragraphs": [{"context": "a b", "qas": '
                 '[{"id": "1", "question": "q"}]}]}]}')
  with pytest.raises(errors.InputError, match=r"answers.*data\[0\]") as e:
    squad.QuestionAnsweringTask(tiny_params(tmp_path, train_file=str(bad)))
  assert e.value.argument == "train_file"


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_tool_bad_flags_are_worded_as_flags(tmp_path):
  out = tmp_path / "out"
  base = ["tools/run_squad.py", "--output_dir=" + str(out),
          "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB]
  p = run_tool(base + ["--do_train"], check=False)
  assert p.returncode != 0
  assert "run_squad: error: --train_file is required with --do_train" in p.stderr
  p = run_tool(base + ["--do_predict", "--predict_file=" + str(tmp_path / "x.json")],
               check=False)
  assert p.returncode != 0
  assert "run_squad: error: --predict_file: " in p.stderr and "does not exist" in p.stderr
  assert "Traceback" not in p.stderr and not out.exists()


@pytest.mark.slow
def test_tool_v1_train_predict_metrics_then_a_test_file(tmp_path):
  train, dev, test = (str(tmp_path / n) for n in ("train.json", "dev.json", "test.json"))
  write_slice(V1_TRAIN, train, 64)
  dev_ids = write_slice(V1_DEV, dev, 32)
  test_ids = write_slice(V1_DEV, test, 12, skip=40, strip_answers=True)
  out = tmp_path / "out"
  common = ["tools/run_squad.py", "--output_dir=" + str(out),
            "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB,
            "--max_seq_length=128", "--doc_stride=64", "--predict_batch_size=5"]
  p = run_tool(common + ["--do_train", "--do_predict", "--train_file=" + train,
                         "--predict_file=" + dev, "--train_batch_size=8",
                         "--num_train_epochs=1", "--iterations_per_loop=4"])
  assert "fine-tuning on %s: 64 questions" % train in p.stdout
  assert "step 8/8 loss=" in p.stdout
  line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
  printed = json.loads(line)  # the official scripts' output line
  assert set(printed) == {"exact_match", "f1"}
  results = read_results(out / "eval_results.txt")
  assert set(results) == {"exact_match", "f1", "global_step"}
  assert results["global_step"] == "8"
  # The figures are the official v1.1 evaluation's of predictions.json.
  official = official_evaluation(dev, str(out / "predictions.json"))
  assert_same_metrics({k: float(results[k]) for k in official}, official)
  assert_same_metrics(printed, official)
  preds = json.loads((out / "predictions.json").read_text())
  assert sorted(preds) == sorted(dev_ids) and all(isinstance(v, str) for v in preds.values())
  nbest = json.loads((out / "nbest_predictions.json").read_text())
  for qid in dev_ids:
    entries = nbest[qid]
    assert 1 <= len(entries) <= 20
    assert sum(e["probability"] for e in entries) == pytest.approx(1.0, abs=1e-4)
    assert entries[0]["text"] == preds[qid]
  assert not (out / "null_odds.json").exists()
  cfg = json.loads((out / "squad_config.json").read_text())
  assert (cfg["max_seq_length"], cfg["doc_stride"], cfg["do_lower_case"]) == (128, 64, True)
  for name in ("bert_config.json", "vocab.txt"):
    assert (out / name).exists()

  # A test file (no answers): predictions from the trained run, no metrics;
  # and the SavedModel export (bert_tf.export.export_squad).
  export_dir = tmp_path / "export"
  p = run_tool(common + ["--do_predict", "--predict_file=" + test,
                         "--export_dir=" + str(export_dir)])
  assert "resumed from" in p.stdout and "at step 8" in p.stdout
  assert "no answers: no metrics" in p.stdout
  preds = json.loads((out / "predictions.json").read_text())
  assert sorted(preds) == sorted(test_ids)
  assert read_results(out / "eval_results.txt") == results  # untouched
  assert "exported SavedModel to %s" % (export_dir / "1") in p.stdout
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  serve = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"]
  with open(test, encoding="utf-8") as f:
    qas = [(q["id"], q["question"], para["context"]) for a in json.load(f)["data"]
           for para in a["paragraphs"] for q in para["qas"]]
  got = serve(question=tf.constant([q for _, q, _ in qas]),
              context=tf.constant([c for _, _, c in qas]))["answer"].numpy()
  # Every answer is predictions.json's (which re-joins the span's words with
  # one space, as the original).
  served = {qid: " ".join(a.decode("utf-8").split()) for (qid, _, _), a in zip(qas, got)}
  assert served == preds


@pytest.mark.slow
def test_tool_v2_writes_null_odds_and_v2_metrics(tmp_path):
  train, dev = str(tmp_path / "train.json"), str(tmp_path / "dev.json")
  write_slice(V2_TRAIN, train, 64)
  dev_ids = write_slice(V2_DEV, dev, 32)
  out = tmp_path / "out"
  export_dir = tmp_path / "export"
  p = run_tool(["tools/run_squad.py", "--output_dir=" + str(out),
                "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB,
                "--max_seq_length=128", "--doc_stride=64", "--do_train",
                "--do_predict", "--version_2_with_negative", "--train_file=" + train,
                "--predict_file=" + dev, "--train_batch_size=8",
                "--num_train_epochs=0.5", "--iterations_per_loop=2",
                "--null_score_diff_threshold=-0.6", "--export_dir=" + str(export_dir)])
  null_odds = json.loads((out / "null_odds.json").read_text())
  preds = json.loads((out / "predictions.json").read_text())
  assert sorted(null_odds) == sorted(preds) == sorted(dev_ids)
  # The threshold decides: "" exactly where null score - best non-null > -0.6
  # (measured: the 32 odds lie in [-0.85, -0.49], none within 5e-3 of -0.6;
  # at -1.5 every question was "no answer").
  for qid, odds in null_odds.items():
    assert (preds[qid] == "") == (odds > -0.6), (qid, odds, preds[qid])
  assert 0 < sum(1 for t in preds.values() if t == "") < len(preds)  # both decisions
  # eval_results.txt holds the official v2.0 evaluation of predictions.json
  # with null_odds.json as the na-prob file: every figure, the best
  # thresholds included.
  results = read_results(out / "eval_results.txt")
  assert results.pop("global_step") == "4"
  official = official_evaluation(dev, str(out / "predictions.json"),
                                 str(out / "null_odds.json"), v2=True)
  assert_same_metrics({k: float(v) for k, v in results.items()}, official)
  assert "HasAns_f1=" in p.stdout

  # The SavedModel (the final weights, the run's threshold) makes the same
  # no-answer decisions and gives the same answers as predictions.json.
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  serve = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"]
  with open(dev, encoding="utf-8") as f:
    qas = [(q["id"], q["question"], para["context"]) for a in json.load(f)["data"]
           for para in a["paragraphs"] for q in para["qas"]]
  got = serve(question=tf.constant([q for _, q, _ in qas]),
              context=tf.constant([c for _, _, c in qas]))
  no_answer = dict(zip([qid for qid, _, _ in qas], got["no_answer"].numpy().tolist()))
  assert no_answer == {qid: t == "" for qid, t in preds.items()}
  served = {qid: " ".join(a.decode("utf-8").split())
            for (qid, _, _), a in zip(qas, got["answer"].numpy())}
  assert served == preds
  np.testing.assert_allclose(got["null_score_diff"].numpy(),
                             [null_odds[qid] for qid, _, _ in qas], atol=1e-4)


@pytest.mark.slow
def test_fine_tuning_minilm_learns_spans(minilm_dir, tmp_path):
  """From the real MiniLM encoder: after fine-tuning on 16 training
  questions, F1 and exact match on those questions are far above the
  untrained head's. This checks that labels, loss, optimizer and span
  decoding line up end to end (a label or decoding shifted by one token
  leaves exact match near 0; a wrong loss or optimizer does not learn).

  Measured (2 shared CPU cores, max_seq_length 128, doc_stride 64, batch 8,
  16 epochs = 32 steps at 3e-4, seeded: deterministic): F1 16.1 / EM 0
  untrained -> F1 65.6 / EM 37.5 fine-tuned, ~55 CPU s. (It was 200
  questions at 192 tokens, 75 steps at 1e-4, F1 8.7 -> 27.3 / EM 0 -> 19 on
  100 of them, ~170 s: the same check at a third of the cost.)
  """
  train = str(tmp_path / "train.json")
  write_slice(V1_TRAIN, train, 16)
  p = squad.SquadParams(output_dir=str(tmp_path / "out"), train_file=train,
                        predict_file=train, init_checkpoint=minilm_dir,
                        do_train=False, do_predict=True, max_seq_length=128,
                        doc_stride=64, train_batch_size=8, predict_batch_size=32,
                        learning_rate=3e-4, num_train_epochs=16.0,
                        iterations_per_loop=16, save_checkpoints_steps=100000)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  untrained = jobs.run_squad(p, strategy, print_fn=lambda s: None)
  import shutil  # pylint: disable=g-import-not-at-top
  shutil.rmtree(p.output_dir)
  p.do_train = True
  lines = []
  trained = jobs.run_squad(p, strategy, print_fn=lines.append)
  assert trained["global_step"] == 32, lines
  assert untrained["f1"] < 30 and untrained["exact_match"] < 10, untrained
  assert trained["f1"] > 45 and trained["f1"] > untrained["f1"] + 25, (untrained, trained)
  assert trained["exact_match"] >= 20, (untrained, trained)


@pytest.mark.slow
def test_resume_is_exact(tmp_path):
  """Stopped at step 4 and resumed: every variable equals an uninterrupted
  run's (weights, optimizer, dropout RNG and the shuffled input position)."""
  from bert_tf import runner  # pylint: disable=g-import-not-at-top

  def run(out, **overrides):
    p = tiny_params(tmp_path, output_dir=str(tmp_path / out), do_predict=False,
                    iterations_per_loop=2, save_checkpoints_steps=2,
                    deterministic=True)
    got = {}
    runner.Runner(runner.RunnerParams.from_params(p, **overrides),
                  lambda s: None).run(
        squad.QuestionAnsweringTask(p, do_predict=False),
        tf.distribute.OneDeviceStrategy("/cpu:0"), do_train=True,
        on_finish=lambda m, o: got.update(
            {"%03d" % i: v.numpy() for i, v in enumerate(m.variables + o.variables)}))
    return got

  whole = run("whole")
  run("resumed", stop_at_step=4)
  resumed = run("resumed")
  assert sorted(whole) == sorted(resumed)
  differ = [k for k in whole if whole[k].tobytes() != resumed[k].tobytes()]
  assert not differ, differ
