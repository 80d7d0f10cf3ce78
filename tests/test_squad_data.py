"""SQuAD data processing, prediction post-processing and the official metrics.

Parity: ``bert_tf.data.squad`` against the ORIGINAL google-research/bert
``run_squad.py`` (PyPI bert-tensorflow 1.0.4, run by
``tests/original_squad.py`` in its own process, one process per test module
run), on real SQuAD-format data bundled in ``data/`` (slices of SQuAD-Shifts
as v1.1, ``data/squad_v1``, and Disfl-QA as v2.0, ``data/squad_v2_disfl``):
examples, every field of every feature, the "Could not find answer" count,
and the three prediction files from seeded random logits. Where
``../shared/data`` holds the full sets, the slow whole-file test also runs on
them (an additional, larger check).

The official evaluation (``bert_tf.squad_metrics``) is checked on hand-made
cases whose scores are worked out in the comments, with negative controls,
and against the official SQuAD v1.1 / v2.0 evaluation as shipped in PyPI
``tf-models-official`` (``official/nlp/tools/squad_evaluate_v1_1.py``,
``squad_evaluate_v2_0.py``; installed with ``--no-deps`` by ``tools/setup.sh
--test``) on prediction files written for the bundled dev slices.
"""

import importlib.util
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from bert_tf import errors
from bert_tf import squad_metrics
from bert_tf import tokenization
from bert_tf.data import squad
from conftest import ROOT, SQUAD_V1_DIR, SQUAD_V2_DIR, VOCAB, require, run_tool, shared_extra

HERE = os.path.dirname(os.path.abspath(__file__))
ORIGINAL = os.path.join(HERE, "original_squad.py")


# ----------------------------------------------------------------- helpers


def _slice_squad(src, dst, start=0, limit=None):
  """Writes questions [start, start+limit) of a SQuAD file (same layout)."""
  with open(src, encoding="utf-8") as f:
    data = json.load(f)
  articles, n = [], 0
  for article in data["data"]:
    paragraphs = []
    for p in article["paragraphs"]:
      qas = []
      for qa in p["qas"]:
        if n >= start and (limit is None or n < start + limit):
          qas.append(qa)
        n += 1
      if qas:
        paragraphs.append(dict(p, qas=qas))
    if paragraphs:
      articles.append(dict(article, paragraphs=paragraphs))
  with open(dst, "w", encoding="utf-8") as f:
    json.dump({"version": data.get("version", ""), "data": articles}, f)
  return dst


@pytest.fixture(scope="module")
def tokenizer():
  assert os.path.exists(VOCAB), VOCAB
  return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


def _require_original():
  assert importlib.util.find_spec("bert") is not None, (
      "run tools/setup.sh --test (installs bert-tensorflow)")


def _run_original(workdir, jobs):
  _require_original()
  jobs_json = os.path.join(workdir, "jobs.json")
  with open(jobs_json, "w", encoding="utf-8") as f:
    json.dump(jobs, f)
  run_tool([ORIGINAL, str(workdir), jobs_json], cwd=HERE)


def _feature_job(input_file, output, is_training, v2, seq, stride, query=64):
  return {"kind": "features", "input_file": input_file, "vocab_file": VOCAB,
          "do_lower_case": True, "is_training": is_training,
          "version_2_with_negative": v2, "max_seq_length": seq,
          "doc_stride": stride, "max_query_length": query, "output": output}


def _as_lists(d):
  return [[k, v] for k, v in sorted(d.items())]


def _assert_same_examples(ours, theirs):
  assert len(ours) == len(theirs)
  for i, (a, b) in enumerate(zip(ours, theirs)):
    for key, value in b.items():
      assert getattr(a, key) == value, "example %d (%s) field %s" % (i, a.qas_id, key)


FEATURE_FIELDS = ("unique_id", "example_index", "doc_span_index", "tokens",
                  "token_to_orig_map", "token_is_max_context", "input_ids",
                  "input_mask", "segment_ids", "start_position", "end_position",
                  "is_impossible")


def _assert_same_features(ours, theirs):
  assert len(ours) == len(theirs), (len(ours), len(theirs))
  for i, (a, b) in enumerate(zip(ours, theirs)):
    assert set(b) == set(FEATURE_FIELDS)
    for key in FEATURE_FIELDS:
      mine = getattr(a, key)
      if isinstance(mine, dict):
        mine = _as_lists(mine)
      assert mine == b[key], "feature %d (unique_id %d) field %s" % (i, a.unique_id, key)


def _check_case(path, orig_json, tokenizer, is_training, v2, seq, stride, query=64):
  """Ours vs the original's output for one file; returns our features."""
  with open(orig_json, encoding="utf-8") as f:
    orig = json.load(f)
  examples = squad.read_squad_examples(path, is_training, version_2_with_negative=v2)
  assert examples.num_skipped == orig["could_not_find"]
  _assert_same_examples(examples, orig["examples"])
  features = squad.convert_examples_to_features(examples, tokenizer, seq, stride,
                                                query, is_training)
  _assert_same_features(features, orig["features"])
  return examples, features


def _fake_logits(features, seq, seed, null_bias=0.0):
  """Seeded logits; with ``null_bias`` position 0 wins on some features."""
  rng = np.random.RandomState(seed)
  start = rng.normal(0.0, 2.0, size=(len(features), seq)).astype(np.float32)
  end = rng.normal(0.0, 2.0, size=(len(features), seq)).astype(np.float32)
  # Like a trained model, favour document positions: with uniform noise some
  # short-window examples get no valid span, where the original crashes
  # (test_only_null_candidates_do_not_crash).
  for i, f in enumerate(features):
    off = np.array([j not in f.token_to_orig_map for j in range(seq)])
    off[0] = False
    start[i, off] -= 4.0
    end[i, off] -= 4.0
  if null_bias:
    bump = rng.uniform(-null_bias, null_bias, size=len(features)).astype(np.float32)
    start[:, 0] += bump
    end[:, 0] += bump
  uids = np.array([f.unique_id for f in features], dtype=np.int64)
  return uids, start, end


# --------------------------------------------------- one original process

FAST_SEQ = ((384, 128), (128, 32))
CRAFTED = {
    "version": "1.1",
    "data": [{"title": "t", "paragraphs": [{
        "context": "Paris is the capital of France. The Eiffel Tower (1889) is there.",
        "qas": [
            {"id": "ok", "question": "What is the capital of France?",
             "answers": [{"text": "Paris", "answer_start": 0}]},
            # The text is not at answer_start: skipped with a warning.
            {"id": "moved", "question": "Which city?",
             "answers": [{"text": "Berlin", "answer_start": 0}]},
            {"id": "year", "question": "When was it built?",
             "answers": [{"text": "1889", "answer_start": 50}]},
        ]}]}],
}


@pytest.fixture(scope="module")
def fast_cases(tmp_path_factory, tokenizer):
  """Slices of the real data, our features, and the original's outputs."""
  work = tmp_path_factory.mktemp("squad_fast")
  v1_train = os.path.join(SQUAD_V1_DIR, "train.json")
  v1_dev = os.path.join(SQUAD_V1_DIR, "dev.json")
  v2_train = os.path.join(SQUAD_V2_DIR, "train.json")
  v2_dev = os.path.join(SQUAD_V2_DIR, "dev.json")
  files = {
      "v1_train": _slice_squad(v1_train, str(work / "v1_train.json"), 0, 300),
      "v2_train": _slice_squad(v2_train, str(work / "v2_train.json"), 0, 300),
      "v1_dev": _slice_squad(v1_dev, str(work / "v1_dev.json"), 0, 120),
      "v2_dev": _slice_squad(v2_dev, str(work / "v2_dev.json"), 0, 150),
  }
  crafted = str(work / "crafted.json")
  with open(crafted, "w", encoding="utf-8") as f:
    json.dump(CRAFTED, f)
  files["crafted"] = crafted

  jobs, cases = [], []
  for name, v2 in (("v1_train", False), ("v2_train", True)):
    for seq, stride in FAST_SEQ:
      out = str(work / ("orig_%s_%d.json" % (name, seq)))
      jobs.append(_feature_job(files[name], out, True, v2, seq, stride))
      cases.append((name, files[name], out, True, v2, seq, stride))
  out = str(work / "orig_crafted.json")
  jobs.append(_feature_job(crafted, out, True, False, 384, 128))
  cases.append(("crafted", crafted, out, True, False, 384, 128))

  # Prediction jobs: dev slices in predict mode, seeded logits.
  predictions = {}
  for name, v2, seq, stride, threshold, bias in (
      ("v1_dev", False, 384, 128, 0.0, 0.0),
      ("v1_dev", False, 128, 32, 0.0, 0.0),
      ("v2_dev", True, 384, 128, 0.0, 6.0),
      ("v2_dev", True, 128, 32, 1.5, 12.0)):
    key = "%s_%d" % (name, seq)
    examples = squad.read_squad_examples(files[name], False, version_2_with_negative=v2)
    features = squad.convert_examples_to_features(examples, tokenizer, seq, stride,
                                                  64, False)
    uids, start, end = _fake_logits(features, seq, seed=len(predictions) + 1,
                                    null_bias=bias)
    logits = str(work / ("logits_%s.npz" % key))
    np.savez(logits, unique_ids=uids, start_logits=start, end_logits=end)
    feat_out = str(work / ("orig_%s_features.json" % key))
    jobs.append(_feature_job(files[name], feat_out, False, v2, seq, stride))
    cases.append((key, files[name], feat_out, False, v2, seq, stride))
    out_dir = str(work / ("orig_pred_" + key))
    jobs.append(dict(_feature_job(files[name], None, False, v2, seq, stride),
                     kind="predictions", logits=logits, n_best_size=20,
                     max_answer_length=30, null_score_diff_threshold=threshold,
                     output_dir=out_dir))
    predictions[key] = dict(file=files[name], v2=v2, examples=examples,
                            features=features, uids=uids, start=start, end=end,
                            threshold=threshold, orig_dir=out_dir)
  _run_original(str(work), jobs)
  return {"work": work, "cases": cases, "predictions": predictions, "files": files}


# ------------------------------------------------------ 1. feature parity


@pytest.mark.parametrize("name,seq", [("v1_train", 384), ("v1_train", 128),
                                      ("v2_train", 384), ("v2_train", 128)])
def test_training_features_match_original(fast_cases, tokenizer, name, seq):
  """First 300 training questions: examples and every feature field equal the
  original's; the short window gives many multi-window examples."""
  case = [c for c in fast_cases["cases"] if c[0] == name and c[5] == seq][0]
  _, path, orig, is_training, v2, seq, stride = case
  examples, features = _check_case(path, orig, tokenizer, is_training, v2, seq, stride)
  assert len(examples) == 300
  spans = [f.doc_span_index for f in features]
  outside = [f for f in features if f.start_position == 0 and not f.is_impossible]
  if seq == 128:
    assert max(spans) >= 2, "the short window must split examples"
    assert outside, "some windows must miss the answer (positions 0/0)"
  inside = [f for f in features if f.start_position > 0]
  assert inside
  for f in inside[:50]:  # the positions point at document tokens
    assert f.segment_ids[f.start_position] == 1 and f.start_position <= f.end_position
  if v2:
    impossible = [f for f in features if f.is_impossible]
    assert impossible and all(f.start_position == 0 == f.end_position for f in impossible)


@pytest.mark.parametrize("key", ["v1_dev_384", "v1_dev_128", "v2_dev_384", "v2_dev_128"])
def test_predict_features_match_original(fast_cases, tokenizer, key):
  case = [c for c in fast_cases["cases"] if c[0] == key][0]
  _, path, orig, is_training, v2, seq, stride = case
  examples, features = _check_case(path, orig, tokenizer, is_training, v2, seq, stride)
  assert all(f.start_position is None for f in features)
  assert all(e.is_impossible is False for e in examples)  # predict mode never reads it


def test_could_not_find_answer_is_skipped_and_counted(fast_cases, tokenizer, caplog):
  """An answer text that is not at its answer_start: skipped, counted, warned
  about with the original's text; the original skips the same one."""
  case = [c for c in fast_cases["cases"] if c[0] == "crafted"][0]
  _, path, orig, is_training, v2, seq, stride = case
  with caplog.at_level(logging.WARNING, logger="bert_tf.data.squad"):
    examples, features = _check_case(path, orig, tokenizer, is_training, v2, seq, stride)
  assert examples.skipped_ids == ["moved"] and examples.num_skipped == 1
  assert [e.qas_id for e in examples] == ["ok", "year"]
  assert "Could not find answer: 'Paris' vs. 'Berlin'" in caplog.text
  # "(1889)" is one whitespace word; _improve_answer_span narrows to "1889".
  year = features[1]
  assert year.tokens[year.start_position:year.end_position + 1] == ["1889"]


# ------------------------------------------------ 2. write_predictions parity


@pytest.mark.parametrize("key", ["v1_dev_384", "v1_dev_128", "v2_dev_384", "v2_dev_128"])
def test_write_predictions_match_original(fast_cases, tmp_path, key):
  p = fast_cases["predictions"][key]
  results = [squad.RawResult(int(u), s, e) for u, s, e in zip(p["uids"], p["start"], p["end"])]
  names = ["predictions.json", "nbest_predictions.json", "null_odds.json"]
  ours = [str(tmp_path / n) for n in names]
  predictions, nbest, null_odds = squad.write_predictions(
      p["examples"], p["features"], results, 20, 30, True, *ours,
      version_2_with_negative=p["v2"], null_score_diff_threshold=p["threshold"])
  written = names if p["v2"] else names[:2]
  assert sorted(os.listdir(tmp_path)) == sorted(written)  # no temporaries left
  for name in written:
    with open(os.path.join(p["orig_dir"], name), encoding="utf-8") as f:
      theirs_text = f.read()
    with open(str(tmp_path / name), encoding="utf-8") as f:
      ours_text = f.read()
    theirs, mine = json.loads(theirs_text), json.loads(ours_text)
    assert list(mine) == list(theirs)  # same keys, same order
    assert ours_text == theirs_text, name  # byte-identical (floats included)
  # Non-trivial: v2 predicts some empty and some non-empty answers.
  texts = list(predictions.values())
  assert len(texts) == len(p["examples"])
  assert sum(1 for t in texts if t) > 10
  if p["v2"]:
    assert sum(1 for t in texts if not t) > 10
    assert all((t == "") == (null_odds[q] > p["threshold"]) for q, t in predictions.items())
  assert all(len(v) >= 1 for v in nbest.values())


def test_compute_predictions_accepts_numpy_and_python_floats(fast_cases):
  """float32 arrays and lists of Python floats give the same answers (the
  original's main converts with float())."""
  p = fast_cases["predictions"]["v2_dev_128"]
  as_np = [squad.RawResult(u, s, e) for u, s, e in zip(p["uids"], p["start"], p["end"])]
  as_py = [squad.RawResult(int(u), [float(x) for x in s], [float(x) for x in e])
           for u, s, e in zip(p["uids"], p["start"], p["end"])]
  a = squad.compute_predictions(p["examples"], p["features"], as_np, 20, 30, True,
                                version_2_with_negative=True)
  b = squad.compute_predictions(p["examples"], p["features"], as_py, 20, 30, True,
                                version_2_with_negative=True)
  assert a == b


# ------------------------------------------------- helpers of the original


def test_get_final_text_and_softmax():
  assert squad.get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
  assert squad.get_final_text("1895", "(1895-1943).", True) == "1895"
  # Not found: the whole original text.
  assert squad.get_final_text("nowhere", "Steve Smith's", True) == "Steve Smith's"
  assert squad._get_best_indexes([1.0, 3.0, 3.0, 2.0], 3) == [1, 2, 3]
  probs = squad._compute_softmax([1.0, 2.0, 3.0])
  assert abs(sum(probs) - 1.0) < 1e-12 and probs[2] > probs[1] > probs[0]
  assert squad._compute_softmax([]) == []


def test_check_is_max_context_prefers_centered_span():
  spans = [squad._DocSpan(0, 5), squad._DocSpan(3, 5), squad._DocSpan(6, 5)]
  # token 4: span 0 -> min(4, 0)=0, span 1 -> min(1, 3)=1: span 1 wins.
  assert squad._check_is_max_context(spans, 1, 4)
  assert not squad._check_is_max_context(spans, 0, 4)


# ------------------------------------------------ 3. the official evaluation


def test_normalize_answer_rules():
  assert squad_metrics.normalize_answer("The  Quick, brown FOX!") == "quick brown fox"
  assert squad_metrics.normalize_answer("an apple a day") == "apple day"
  assert squad_metrics.normalize_answer("Theater") == "theater"  # word boundaries
  assert squad_metrics.normalize_answer("\tU.S.A.\n") == "usa"
  assert squad_metrics.exact_match_score("the Eiffel Tower.", "Eiffel tower")
  assert not squad_metrics.exact_match_score("Eiffel", "Eiffel tower")


def test_f1_scores_by_hand():
  # pred {quick, brown} vs gold {quick, brown, fox}: P=1, R=2/3, F1=0.8.
  assert abs(squad_metrics.f1_score("quick brown", "the quick brown fox") - 0.8) < 1e-12
  assert squad_metrics.f1_score("cat", "dog") == 0
  # v1.1: empty vs empty is 0; v2.0: empty vs empty is 1 (no-answer agreement).
  assert squad_metrics.f1_score("", "") == 0
  assert squad_metrics.compute_f1("", "") == 1
  assert squad_metrics.compute_f1("the", "") == 1  # "the" normalizes to nothing
  assert squad_metrics.compute_f1("", "Paris") == 0
  # Repeated tokens count once per occurrence: pred {a1: x x}, gold {x}: P=1/2, R=1.
  assert abs(squad_metrics.compute_f1("x", "x x") - 2 / 3) < 1e-12


V1_DATA = {"data": [{"paragraphs": [{"context": "...", "qas": [
    {"id": "q1", "answers": [{"text": "Denver Broncos"}, {"text": "Broncos"}]},
    {"id": "q2", "answers": [{"text": "the quick brown fox"}]},
    {"id": "q3", "answers": [{"text": "1895"}]},
]}]}]}


def test_evaluate_v1_by_hand():
  preds = {"q1": "broncos", "q2": "quick brown", "q3": "1895."}
  # q1: EM 1 (max over golds, second gold), q2: EM 0 / F1 0.8, q3: EM 1.
  r = squad_metrics.evaluate_v1(V1_DATA, preds)
  assert r["exact_match"] == pytest.approx(200 / 3)
  assert r["f1"] == pytest.approx(100 * (1 + 0.8 + 1) / 3)
  # Negative controls: a wrong answer lowers EM and F1; a missing one scores 0.
  worse = squad_metrics.evaluate_v1(V1_DATA, dict(preds, q3="1896"))
  assert worse["exact_match"] == pytest.approx(100 / 3)
  assert worse["f1"] < r["f1"]
  missing = squad_metrics.evaluate_v1(V1_DATA, {"q1": "Denver Broncos"})
  assert missing == pytest.approx({"exact_match": 100 / 3, "f1": 100 / 3})
  # The data list alone (the official evaluate(dataset['data'], ...)) works too.
  assert squad_metrics.evaluate_v1(V1_DATA["data"], preds) == r


V2_DATA = {"data": [{"paragraphs": [{"context": "...", "qas": [
    {"id": "q1", "answers": [{"text": "Denver Broncos"}], "is_impossible": False},
    {"id": "q2", "answers": [{"text": "Carolina Panthers"}], "is_impossible": False},
    {"id": "q3", "answers": [], "is_impossible": True},
    {"id": "q4", "answers": [], "is_impossible": True},
]}]}]}
V2_PREDS = {"q1": "Denver Broncos", "q2": "Panthers", "q3": "", "q4": "Santa Clara"}
V2_NA = {"q1": 0.1, "q2": 0.5, "q3": 0.9, "q4": 0.3}


def test_evaluate_v2_by_hand():
  # Per question (exact, f1): q1 (1, 1), q2 (0, 2/3), q3 (1, 1), q4 (0, 0).
  r = squad_metrics.evaluate_v2(V2_DATA, V2_PREDS, V2_NA)
  assert r["exact"] == pytest.approx(50.0)
  assert r["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 4)
  assert r["total"] == 4 and r["HasAns_total"] == 2 and r["NoAns_total"] == 2
  assert r["HasAns_exact"] == pytest.approx(50.0)
  assert r["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
  assert r["NoAns_exact"] == pytest.approx(50.0) and r["NoAns_f1"] == pytest.approx(50.0)
  # Sweep in na order, starting from 2 (both no-answer right): q1 +1 -> 3 (best,
  # thresh 0.1), q4 -1 -> 2, q2 +0 / +2/3, q3 +0. Best 3/4.
  assert r["best_exact"] == pytest.approx(75.0) and r["best_exact_thresh"] == 0.1
  assert r["best_f1"] == pytest.approx(75.0) and r["best_f1_thresh"] == 0.1
  assert list(r) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                     "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total",
                     "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
  # na_prob_thresh 0.4: q2 (0.5) and q3 (0.9) count as "no answer":
  # q2 -> 0 (it has one), q3 -> 1. Exact (1+0+1+0)/4, F1 (1+0+1+0)/4.
  t = squad_metrics.evaluate_v2(V2_DATA, V2_PREDS, V2_NA, na_prob_thresh=0.4)
  assert t["exact"] == pytest.approx(50.0) and t["f1"] == pytest.approx(50.0)
  assert t["HasAns_f1"] == pytest.approx(50.0)
  # Without na_probs: no threshold search.
  n = squad_metrics.evaluate_v2(V2_DATA, V2_PREDS)
  assert "best_f1" not in n and n["exact"] == r["exact"]
  # Negative control: answering the impossible q3 lowers both scores.
  worse = squad_metrics.evaluate_v2(V2_DATA, dict(V2_PREDS, q3="Denver"), V2_NA)
  assert worse["exact"] == pytest.approx(25.0) and worse["NoAns_exact"] == 0.0


def test_evaluate_file_on_real_dev(fast_cases, tmp_path):
  """Gold answers score 100; padded answers lower EM; on run_squad's v2
  output the threshold is consistent with null_odds.json."""
  dev = fast_cases["files"]["v1_dev"]
  gold = {qid: answers[0] for qid, answers in squad_metrics.iter_questions(
      json.load(open(dev, encoding="utf-8")))}
  pred_file = str(tmp_path / "gold.json")
  with open(pred_file, "w", encoding="utf-8") as f:
    json.dump(gold, f)
  assert squad_metrics.evaluate_file(dev, pred_file) == {"exact_match": 100.0, "f1": 100.0}
  with open(pred_file, "w", encoding="utf-8") as f:
    json.dump({q: a + " and so on" for q, a in gold.items()}, f)
  padded = squad_metrics.evaluate_file(dev, pred_file)
  assert padded["exact_match"] < 5 and 20 < padded["f1"] < 100

  p = fast_cases["predictions"]["v2_dev_384"]
  pred_file = os.path.join(p["orig_dir"], "predictions.json")
  odds_file = os.path.join(p["orig_dir"], "null_odds.json")
  r = squad_metrics.evaluate_file(p["file"], pred_file, odds_file, True)
  n_questions = len(list(squad_metrics.iter_questions(json.load(open(p["file"])))))
  assert r["total"] == n_questions == r["HasAns_total"] + r["NoAns_total"]
  assert r["best_exact"] >= r["exact"] and r["best_f1"] >= r["f1"]
  # predictions.json holds "" exactly where null_odds > 0, so thresholding the
  # odds at 0 changes nothing.
  at0 = squad_metrics.evaluate_file(p["file"], pred_file, odds_file, True, na_prob_thresh=0.0)
  plain = squad_metrics.evaluate_file(p["file"], pred_file, None, True)
  for k in ("exact", "f1", "HasAns_exact", "NoAns_exact"):
    assert at0[k] == pytest.approx(plain[k])
  assert 0 < plain["NoAns_exact"] < 100


OFFICIAL_WHY = "tools/setup.sh --test installs tf-models-official==2.20.0 --no-deps"


def official_evaluation(data_file, prediction_file, null_odds_file=None, v2=False):
  """The official SQuAD evaluation (tf-models-official's copies of
  ``evaluate-v1.1.py`` / ``evaluate-v2.0.py``) of a predictions file, under
  ``bert_tf.squad_metrics``' key names.

  v1.1: ``exact_match``, ``f1`` (the official module returns fractions and
  calls F1 ``final_f1``; here in percent, as the official command line
  prints them). v2.0, with ``null_odds_file`` as the na-prob file and the
  official threshold 1.0: ``exact``, ``f1``, ``total``, ``HasAns_*``,
  ``NoAns_*``, and ``best_exact``, ``best_exact_thresh``, ``best_f1``,
  ``best_f1_thresh`` (tf-models calls them ``final_*``); its precision-recall
  figures (``pr_*``, written by the official script only with
  ``--out-image-dir``) are left out.
  """
  with open(data_file, encoding="utf-8") as f:
    dataset = json.load(f)["data"]
  with open(prediction_file, encoding="utf-8") as f:
    predictions = json.load(f)
  if not v2:
    official = require("official.nlp.tools.squad_evaluate_v1_1", OFFICIAL_WHY)
    r = official.evaluate(dataset, predictions)
    return {"exact_match": 100.0 * r["exact_match"], "f1": 100.0 * r["final_f1"]}
  official = require("official.nlp.tools.squad_evaluate_v2_0", OFFICIAL_WHY)
  na_probs = None
  if null_odds_file is not None:
    with open(null_odds_file, encoding="utf-8") as f:
      na_probs = json.load(f)
  r = official.evaluate(dataset, predictions, na_probs)
  out = {k.replace("final_", "best_"): v for k, v in r.items() if not k.startswith("pr_")}
  if na_probs is None:  # the official script searches thresholds only with na-probs
    out = {k: v for k, v in out.items() if not k.startswith("best_")}
  return out


def assert_same_metrics(ours, official):
  """Same keys, same values (floats to 1e-9, counts exactly)."""
  assert sorted(ours) == sorted(official)
  for k, v in official.items():
    assert ours[k] == pytest.approx(v, rel=0, abs=1e-9), (k, ours[k], v)


def _varied_predictions(data_file, seed):
  """Predictions for every question of a SQuAD file that score anywhere from
  0 to 1: the gold answer as is, changed in case / punctuation / articles /
  whitespace (still exact), cut or padded (partial F1), another question's
  answer, a wrong word, empty or blank (v2: no answer); v2 na-probs with
  ties (rounded)."""
  with open(data_file, encoding="utf-8") as f:
    data = json.load(f)
  rng = np.random.RandomState(seed)
  golds = [(qa["id"], [a["text"] for a in qa["answers"]])
           for article in data["data"] for p in article["paragraphs"] for qa in p["qas"]]
  all_texts = [t for _, texts in golds for t in texts]
  preds, na_probs = {}, {}
  for qid, texts in golds:
    gold = texts[rng.randint(len(texts))] if texts else rng.choice(all_texts)
    words = gold.split()
    kind = rng.randint(10)
    preds[qid] = [
        gold,
        "The " + gold.upper() + "!",
        "  " + "  ".join(words) + " .",
        " ".join(words[:max(1, len(words) // 2)]),
        gold + " and some other words",
        rng.choice(all_texts),
        "zebra",
        "",
        " \t",
        "an " + " ".join(words[1:]) if len(words) > 1 else "a",
    ][kind]
    na_probs[qid] = float(np.round(rng.normal(0.0, 2.0), 1))
  return preds, na_probs


def test_metrics_equal_official_evaluation(fast_cases, tmp_path):
  """``squad_metrics.evaluate_file`` on written prediction files equals the
  official evaluation (tf-models-official), every figure: the files that
  ``write_predictions`` writes from seeded logits (v1.1 and v2.0 with
  null_odds.json, each at two window sizes), and varied predictions for
  every question of the bundled dev slices (v2.0 with and without na-probs,
  and at another threshold)."""
  checked = []
  for key, p in sorted(fast_cases["predictions"].items()):
    results = [squad.RawResult(int(u), s, e) for u, s, e in zip(p["uids"], p["start"], p["end"])]
    out = tmp_path / key
    out.mkdir()
    files = [str(out / n) for n in ("predictions.json", "nbest_predictions.json",
                                    "null_odds.json")]
    squad.write_predictions(p["examples"], p["features"], results, 20, 30, True, *files,
                            version_2_with_negative=p["v2"],
                            null_score_diff_threshold=p["threshold"])
    odds = files[2] if p["v2"] else None
    ours = squad_metrics.evaluate_file(p["file"], files[0], odds, p["v2"])
    assert_same_metrics(ours, official_evaluation(p["file"], files[0], odds, p["v2"]))
    checked.append(ours)
  assert any(r.get("f1", 0) > 5 for r in checked)  # not all zero
  for data_file, v2, seed in ((os.path.join(SQUAD_V1_DIR, "dev.json"), False, 1),
                              (os.path.join(SQUAD_V2_DIR, "dev.json"), True, 2)):
    preds, na_probs = _varied_predictions(data_file, seed)
    pred_file, na_file = str(tmp_path / "varied.json"), str(tmp_path / "varied_na.json")
    with open(pred_file, "w", encoding="utf-8") as f:
      json.dump(preds, f)
    with open(na_file, "w", encoding="utf-8") as f:
      json.dump(na_probs, f)
    for odds in ((None, na_file) if v2 else (None,)):
      ours = squad_metrics.evaluate_file(data_file, pred_file, odds, v2)
      assert_same_metrics(ours, official_evaluation(data_file, pred_file, odds, v2))
      em = ours["exact" if v2 else "exact_match"]
      assert 20 < em < 80 and em < ours["f1"] < 90, ours  # every kind of score
      if odds:
        assert ours["best_f1"] > ours["f1"] and ours["best_f1_thresh"] != 0.0, ours
        assert 0 < ours["NoAns_exact"] < 100 and 0 < ours["HasAns_exact"] < 100
    if v2:
      # Another --na-prob-thresh: the official module has no parameter for it;
      # its _apply_no_ans_threshold takes one (the official script's flag).
      official = require("official.nlp.tools.squad_evaluate_v2_0", OFFICIAL_WHY)
      with open(data_file, encoding="utf-8") as f:
        dataset = json.load(f)["data"]
      # pylint: disable=protected-access
      has_ans = official._make_qid_to_has_ans(dataset)
      exact_raw, f1_raw = official._get_raw_scores(dataset, preds)
      want = official._make_eval_dict(
          official._apply_no_ans_threshold(exact_raw, na_probs, has_ans, -0.5),
          official._apply_no_ans_threshold(f1_raw, na_probs, has_ans, -0.5))
      # pylint: enable=protected-access
      got = squad_metrics.evaluate_file(data_file, pred_file, na_file, True, na_prob_thresh=-0.5)
      assert_same_metrics({k: got[k] for k in want}, want)
      assert got["exact"] != ours["exact"]  # the threshold matters here


# ------------------------------------------------------------ 4. bad input


def _write(path, text):
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return str(path)


def test_malformed_json_names_the_file(tmp_path):
  bad = _write(tmp_path / "broken.json", '{"data": [{"paragraphs": [')
  with pytest.raises(errors.InputError, match=r"broken\.json.*not valid JSON.*line 1"):
    squad.read_squad_examples(bad, True)
  good = _write(tmp_path / "preds.json", "{}")
  with pytest.raises(errors.InputError, match=r"broken\.json"):
    squad_metrics.evaluate_file(bad, good)
  with pytest.raises(errors.InputError, match=r"broken\.json"):
    squad_metrics.evaluate_file(_write(tmp_path / "d.json", json.dumps(V1_DATA)), bad)


def test_missing_key_names_the_json_path(tmp_path):
  data = json.loads(json.dumps(CRAFTED))
  del data["data"][0]["paragraphs"][0]["qas"][2]["answers"]
  path = _write(tmp_path / "nokey.json", json.dumps(data))
  with pytest.raises(errors.InputError) as e:
    squad.read_squad_examples(path, True)
  assert "nokey.json" in str(e.value)
  assert "data[0].paragraphs[0].qas[2]" in str(e.value) and "'answers'" in str(e.value)
  assert not isinstance(e.value, KeyError)
  # Predict mode does not read answers (the original's behaviour): fine.
  assert len(squad.read_squad_examples(path, False)) == 3
  del data["data"][0]["paragraphs"][0]["context"]
  path = _write(tmp_path / "nocontext.json", json.dumps(data))
  with pytest.raises(errors.InputError, match=r"'context' at data\[0\]\.paragraphs\[0\]"):
    squad.read_squad_examples(path, False)
  with pytest.raises(errors.InputError, match=r"'data'"):
    squad.read_squad_examples(_write(tmp_path / "empty.json", "{}"), False)
  v2 = json.loads(json.dumps(CRAFTED))  # v2 training needs is_impossible
  with pytest.raises(errors.InputError, match=r"'is_impossible' at data\[0\]\.paragraphs\[0\]\.qas\[0\]"):
    squad.read_squad_examples(_write(tmp_path / "v2.json", json.dumps(v2)), True, True)
  # Metrics: a missing answers list names the path too.
  bad = json.loads(json.dumps(V1_DATA))
  del bad["data"][0]["paragraphs"][0]["qas"][1]["answers"]
  with pytest.raises(errors.InputError, match=r"'answers' at data\[0\]\.paragraphs\[0\]\.qas\[1\]"):
    squad_metrics.evaluate_v1(bad, {})


def test_training_needs_one_answer_and_offsets_inside(tmp_path):
  data = json.loads(json.dumps(CRAFTED))
  qa = data["data"][0]["paragraphs"][0]["qas"][0]
  qa["answers"].append({"text": "Paris", "answer_start": 0})
  with pytest.raises(errors.InputError, match=r"qas\[0\]\.answers has 2 answers"):
    squad.read_squad_examples(_write(tmp_path / "two.json", json.dumps(data)), True)
  qa["answers"] = [{"text": "Paris", "answer_start": 500}]
  with pytest.raises(errors.InputError, match=r"answer_start=500.*outside"):
    squad.read_squad_examples(_write(tmp_path / "far.json", json.dumps(data)), True)


def test_invalid_utf8_names_the_file(tmp_path):
  path = tmp_path / "latin1.json"
  path.write_bytes(json.dumps(CRAFTED).replace("Paris", "Par\u00eds").encode("latin-1"))
  with pytest.raises(errors.InputError, match=r"latin1\.json is not valid UTF-8"):
    squad.read_squad_examples(str(path), True)
  with pytest.raises(errors.InputError, match=r"latin1\.json is not valid UTF-8"):
    squad_metrics.evaluate_file(str(path), str(path))


def test_bad_arguments_and_missing_results(tmp_path, tokenizer):
  path = _write(tmp_path / "c.json", json.dumps(CRAFTED))
  examples = squad.read_squad_examples(path, False)
  with pytest.raises(errors.InputError) as e:
    squad.convert_examples_to_features(examples, tokenizer, 128, 0, 64, False)
  assert e.value.argument == "doc_stride"
  with pytest.raises(errors.InputError) as e:
    squad.convert_examples_to_features(examples, tokenizer, 64, 32, 64, False)
  assert e.value.argument == "max_seq_length"
  features = squad.convert_examples_to_features(examples, tokenizer, 64, 16, 16, False)
  results = [squad.RawResult(f.unique_id, [0.0] * 64, [0.0] * 64) for f in features[1:]]
  outs = [str(tmp_path / n) for n in ("p.json", "n.json", "o.json")]
  with pytest.raises(errors.InputError, match="no RawResult for feature unique_id=1000000000"):
    squad.write_predictions(examples, features, results, 20, 30, True, *outs)
  assert not any(os.path.exists(o) for o in outs)  # nothing half-written
  assert sorted(os.listdir(tmp_path)) == ["c.json"]


def test_only_null_candidates_do_not_crash(tmp_path, tokenizer):
  """SQuAD 2.0 with no valid span (all logits favour the question): the
  original raises AttributeError; we add Hugging Face's nonce "empty"."""
  path = _write(tmp_path / "c.json", json.dumps(CRAFTED))
  examples = squad.read_squad_examples(path, False)
  features = squad.convert_examples_to_features(examples, tokenizer, 64, 16, 16, False)
  results = []
  for f in features:
    logits = [-100.0] * 64
    for i in range(len(f.tokens)):
      if i not in f.token_to_orig_map:
        logits[i] = 10.0  # only [CLS]/question/[SEP] positions score
    results.append(squad.RawResult(f.unique_id, logits, logits))
  preds, nbest, odds = squad.compute_predictions(examples, features, results, 2, 30, True,
                                                 version_2_with_negative=True)
  assert all(t == "" for t in preds.values())
  assert all(v[0]["text"] == "empty" for v in nbest.values() if len(v) == 2)


def test_modules_load_without_tensorflow():
  code = ("import sys; import bert_tf.data.squad, bert_tf.squad_metrics; "
          "bad = [m for m in sys.modules if m.split('.')[0] in "
          "('tensorflow', 'keras', 'tensorflow_text')]; assert not bad, bad")
  run_tool(["-c", code])


# ------------------------------------------------------- slow: whole files


@pytest.mark.slow
def test_whole_files_match_original(tmp_path, tokenizer):
  """The whole bundled files: both dev slices in predict mode (v1 also with
  short windows), the v2 dev slice in training mode, the v2 train slice, and
  the v1 train slice with short windows, whose 2 questions with U+2009 thin
  spaces in their answers (data/squad_v1/README.md) are "Could not find
  answer" for both. Additional, larger check where ../shared/data has the
  full sets: the whole dev sets, the whole v2 train set, and 3000 v1 training
  questions (the same 2 thin-space questions among them)."""
  v1_train_file = os.path.join(SQUAD_V1_DIR, "train.json")
  cases = [("v1_dev", os.path.join(SQUAD_V1_DIR, "dev.json"), False, False, 384, 128),
           ("v1_dev_short", os.path.join(SQUAD_V1_DIR, "dev.json"), False, False, 128, 32),
           ("v1_train", v1_train_file, True, False, 128, 32),
           ("v2_train", os.path.join(SQUAD_V2_DIR, "train.json"), True, True, 384, 128),
           ("v2_dev_train_mode", os.path.join(SQUAD_V2_DIR, "dev.json"), True, True, 128, 32)]
  full = {n: shared_extra(*n.split("/")) for n in (
      "squad_v1/dev.json", "squad_v1/train.json", "squad_v2_disfl/train.json",
      "squad_v2_disfl/dev.json")}
  if all(full.values()):
    full_v1_train = _slice_squad(full["squad_v1/train.json"],
                                 str(tmp_path / "full_v1_train.json"), 3000, 3000)
    cases += [("full_v1_dev", full["squad_v1/dev.json"], False, False, 384, 128),
              ("full_v1_dev_short", full["squad_v1/dev.json"], False, False, 128, 32),
              ("full_v1_train", full_v1_train, True, False, 128, 32),
              ("full_v2_train", full["squad_v2_disfl/train.json"], True, True, 384, 128),
              ("full_v2_dev_train_mode", full["squad_v2_disfl/dev.json"], True, True, 128, 32)]
  jobs = [_feature_job(path, str(tmp_path / ("orig_" + name + ".json")), t, v2, seq, stride)
          for name, path, t, v2, seq, stride in cases]
  _run_original(str(tmp_path), jobs)
  thin_space = {}
  for (name, path, t, v2, seq, stride), job in zip(cases, jobs):
    examples, _ = _check_case(path, job["output"], tokenizer, t, v2, seq, stride)
    if name.endswith("v1_train"):  # the two answers with U+2009 thin spaces
      assert examples.num_skipped == 2, examples.skipped_ids
      thin_space[name] = examples.skipped_ids
    elif not t:
      assert examples.num_skipped == 0
    os.remove(job["output"])
  assert thin_space["v1_train"] == ["5d66bd232b22cd4dfcfbe490", "5d66be882b22cd4dfcfbe498"]
  if "full_v1_train" in thin_space:
    assert thin_space["full_v1_train"] == thin_space["v1_train"]
