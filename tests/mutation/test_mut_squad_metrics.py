"""bert_tf.squad_metrics against the official SQuAD evaluation (TF-free).

Reference: ``official/nlp/tools/squad_evaluate_v1_1.py`` and
``squad_evaluate_v2_0.py`` of PyPI tf-models-official 2.20.0 (loaded from
their files by ``mutation_refs``), on the bundled real dev slices
(``data/squad_v1``, ``data/squad_v2_disfl``) with seeded predictions of
every kind (gold, gold re-cased / re-punctuated / with articles, partial,
wrong, empty, missing) and seeded no-answer scores; the function-level
formulas on generated answer strings; every input error word for word.
"""

import collections
import json
import os
import random

import pytest

from bert_tf import errors
from bert_tf import squad_metrics as sm
import mutation_refs

V1_DEV = os.path.join(mutation_refs.DATA, "squad_v1", "dev.json")
V2_DEV = os.path.join(mutation_refs.DATA, "squad_v2_disfl", "dev.json")

WORDS = ["the", "The", "a", "An", "an", "cat", "Cat.", "dog,", "x", "théâtre", "(a)",
         "the-end", "THE", "apple's", "u.s.", "¿qué?", "1,000", "\u00a0", "an\tapple",
         "them", "ant", "–", "...", "A.", "b", "b"]


def _strings(rng, n):
  out = ["", " ", "...", "the", "a an the", "Cat", "cat the", "b b", "b"]
  for _ in range(n):
    out.append(rng.choice([" ", "  ", "\t"]).join(
        rng.choice(WORDS) for _ in range(rng.randint(0, 6))))
  return out


def _dataset(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _variant(rng, answers, context):
  """A prediction for a question with gold ``answers``."""
  kind = rng.randrange(8)
  gold = rng.choice(answers) if answers else ""
  if kind == 0:
    return gold
  if kind == 1:
    return "The " + gold.upper() + "!"
  if kind == 2:
    w = gold.split()
    return " ".join(w[:max(1, len(w) // 2)])
  if kind == 3:
    w = context.split()
    i = rng.randrange(len(w))
    return " ".join(w[i:i + rng.randint(1, 5)])
  if kind == 4:
    return ""
  if kind == 5:
    return gold + " " + rng.choice(context.split())
  if kind == 6:
    return "a " + gold.lower().replace(",", "") + " ."
  return rng.choice(context.split())


def _predictions(dataset, seed, missing=0.0):
  rng = random.Random(seed)
  preds = {}
  for article in dataset["data"]:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        if rng.random() < missing:
          continue
        preds[qa["id"]] = _variant(rng, [a["text"] for a in qa["answers"]], p["context"])
  return preds


@pytest.mark.parametrize("seed,missing", [(1, 0.0), (2, 0.0), (3, 0.1)])
def test_v1_equals_official_on_real_dev(seed, missing, caplog):
  ref = mutation_refs.official_squad_v1()
  data = _dataset(V1_DEV)
  preds = _predictions(data, seed, missing)
  with caplog.at_level("WARNING", logger="bert_tf.squad_metrics"):
    got = sm.evaluate_v1(data, preds)
  unanswered = [r.getMessage() for r in caplog.records]
  want = ref.evaluate(data["data"], preds)
  assert set(got) == {"exact_match", "f1"}
  assert got["exact_match"] == pytest.approx(100.0 * want["exact_match"], abs=1e-9)
  assert got["f1"] == pytest.approx(100.0 * want["final_f1"], abs=1e-9)
  assert 5 < got["exact_match"] < got["f1"] < 95
  assert sm.evaluate_v1(data["data"], preds) == got  # the data list alone
  missing_ids = [qa["id"] for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]
                 if qa["id"] not in preds]
  assert unanswered == ["Unanswered question %s will receive score 0." % q
                        for q in missing_ids]


def _v2_probs(data, preds, seed):
  rng = random.Random(seed)
  # Below, at and above the default threshold 1.0, with ties.
  return {q: rng.choice([-2.5, 0.0, 0.3, 0.3, 1.0, 1.5, 4.0, rng.uniform(-3, 3)])
          for q in preds}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_v2_equals_official_on_real_dev(seed):
  ref = mutation_refs.official_squad_v2()
  data = _dataset(V2_DEV)
  preds = _predictions(data, seed)
  na = _v2_probs(data, preds, seed)
  got = sm.evaluate_v2(data, preds, na)
  want = ref.evaluate(data["data"], preds, na)
  keys = ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
          "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh",
          "best_f1", "best_f1_thresh"]
  assert list(got) == keys
  for k in keys:
    w = want[k.replace("best_", "final_")]
    assert got[k] == pytest.approx(w, abs=1e-9), k
  assert got["total"] == 151 and got["NoAns_total"] == 43
  # Without na_probs: 0.0 each, no best-threshold search.
  got = sm.evaluate_v2(data["data"], preds)
  want = ref.evaluate(data["data"], preds)
  assert list(got) == keys[:9]
  for k in keys[:9]:
    assert got[k] == pytest.approx(want[k], abs=1e-9), k


def test_v2_thresholds_and_best_threshold_equal_official():
  ref = mutation_refs.official_squad_v2()
  data = _dataset(V2_DEV)
  preds = _predictions(data, 9)
  na = _v2_probs(data, preds, 9)
  has_ans = sm.make_qid_to_has_ans(data)
  assert has_ans == ref._make_qid_to_has_ans(data["data"])  # pylint: disable=protected-access
  exact, f1 = sm.get_raw_scores(data, preds)
  assert (exact, f1) == ref._get_raw_scores(data["data"], preds)  # pylint: disable=protected-access
  for thresh in (-1.0, 0.0, 0.3, 1.0, 2.0):
    for raw in (exact, f1):
      assert sm.apply_no_ans_threshold(raw, na, has_ans, thresh) == (
          ref._apply_no_ans_threshold(raw, na, has_ans, thresh))  # pylint: disable=protected-access
  got = sm.evaluate_v2(data, preds, na, na_prob_thresh=0.3)
  e = sm.apply_no_ans_threshold(exact, na, has_ans, 0.3)
  assert got["exact"] == pytest.approx(100.0 * sum(e.values()) / len(e))
  for raw in (exact, f1):
    assert sm.find_best_thresh(preds, raw, na, has_ans) == pytest.approx(
        ref._find_best_thresh(preds, raw, na, has_ans))  # pylint: disable=protected-access
    ordered = ref._make_eval_dict(raw, raw)  # pylint: disable=protected-access
    assert sm.make_eval_dict(raw, raw) == ordered
    subset = sorted(raw)[:17]
    assert sm.make_eval_dict(raw, raw, subset) == ref._make_eval_dict(raw, raw, subset)  # pylint: disable=protected-access
  # Hand-made: the threshold search in order of na_probs.
  preds = {"a": "x", "b": "", "c": "y", "d": "z"}
  has = {"a": True, "b": False, "c": False, "d": True}
  scores = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 0.5}
  probs = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.9}
  # 2 no-answers; a +1 (3) best at 0.1; b +0; c -1 (2); d +0.5 (2.5).
  assert sm.find_best_thresh(preds, scores, probs, has) == (75.0, 0.1)
  assert ref._find_best_thresh(preds, scores, probs, has) == (75.0, 0.1)  # pylint: disable=protected-access
  assert sm.find_best_thresh(preds, {"b": 1.0}, {"b": 0.5}, has) == (100.0, 0.0)
  # A question with a score but no prediction in na_probs order is skipped.
  assert sm.find_best_thresh({"a": "x"}, {"a": 0.5}, {"z": 0.0, "a": 0.2},
                             {"a": True}) == (50.0, 0.2)


def test_answer_functions_equal_official():
  v1, v2 = mutation_refs.official_squad_v1(), mutation_refs.official_squad_v2()
  rng = random.Random(4)
  strings = _strings(rng, 120)
  for s in strings:
    assert sm.normalize_answer(s) == v1._normalize_answer(s) == v2._normalize_answer(s)  # pylint: disable=protected-access
    assert sm.get_tokens(s) == v2._get_tokens(s)  # pylint: disable=protected-access
  for _ in range(1500):
    a, b = rng.choice(strings), rng.choice(strings)
    assert sm.exact_match_score(a, b) == v1._exact_match_score(a, b)  # pylint: disable=protected-access
    assert sm.f1_score(a, b) == pytest.approx(v1._f1_score(a, b), abs=1e-15)  # pylint: disable=protected-access
    assert sm.compute_exact(a, b) == v2._compute_exact(a, b)  # pylint: disable=protected-access
    assert sm.compute_f1(a, b) == pytest.approx(v2._compute_f1(a, b), abs=1e-15)  # pylint: disable=protected-access
    golds = [rng.choice(strings) for _ in range(rng.randint(1, 3))]
    for fn, ref in ((sm.f1_score, v1._f1_score), (sm.exact_match_score, v1._exact_match_score)):  # pylint: disable=protected-access
      assert sm.metric_max_over_ground_truths(fn, a, golds) == pytest.approx(
          v1._metric_max_over_ground_truths(ref, a, golds))  # pylint: disable=protected-access


def test_answer_functions_by_hand():
  assert sm.normalize_answer("  The Cat's (a) theatre, AN apple!") == "cats theatre apple"
  assert sm.normalize_answer("them ant\u00a0x") == "them ant x"
  assert sm.normalize_answer("a\tb\n c") == "b c"
  assert sm.exact_match_score("The cat.", "cat") is True
  assert sm.exact_match_score("cat", "dog") is False
  # v1.1 F1: bag of tokens (counts), 0 when either side is empty.
  assert sm.f1_score("b b c", "b c c d") == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
  assert sm.f1_score("b c", "c d e") == pytest.approx(0.4)
  assert sm.f1_score("c d e", "b c") == pytest.approx(0.4)
  assert sm.f1_score("", "") == 0 and sm.f1_score("the", "a") == 0
  assert sm.f1_score("x", "y") == 0
  # v2.0: both empty -> 1, one empty -> 0.
  assert sm.compute_f1("", "") == 1 and sm.compute_f1("the", "") == 1
  assert sm.compute_f1("", "x") == 0 and sm.compute_f1("x", "") == 0
  assert sm.compute_f1("b c", "c d e") == pytest.approx(0.4)
  assert sm.compute_f1("b c d e", "b") == pytest.approx(0.4)
  assert sm.compute_f1("x", "y") == 0
  assert sm.compute_exact("The  X!", "x") == 1 and sm.compute_exact("x", "y") == 0
  assert sm.get_tokens("") == [] and sm.get_tokens("A b, c") == ["b", "c"]
  assert sm.metric_max_over_ground_truths(sm.f1_score, "b c", ["x", "b", "b c"]) == 1.0
  with pytest.raises(ValueError):
    sm.metric_max_over_ground_truths(sm.f1_score, "b", [])
  main = {"exact": 1.0}
  sm.merge_eval(main, collections.OrderedDict([("exact", 2.0), ("total", 3)]), "HasAns")
  assert main == {"exact": 1.0, "HasAns_exact": 2.0, "HasAns_total": 3}


def _data(qas):
  return {"data": [{"paragraphs": [{"context": "c", "qas": qas}]}]}


def test_v1_v2_small_cases(caplog):
  qas = [{"id": "q1", "answers": [{"text": "Paris"}, {"text": "the city of Paris"}]},
         {"id": 7, "answers": [{"text": "x y"}]},
         {"id": "q3", "answers": []}]
  assert list(sm.iter_questions(_data(qas))) == [
      ("q1", ["Paris", "the city of Paris"]), ("7", ["x y"]), ("q3", [])]
  got = sm.evaluate_v1(_data(qas[:2]), {"q1": "city of paris", "7": "x"})
  assert got == {"exact_match": 50.0, "f1": pytest.approx((100 + 100 * 2 / 3) / 2)}
  assert sm.evaluate_v1(_data(qas[:2]), {"q1": "Paris", "7": "x y"}) == {
      "exact_match": 100.0, "f1": 100.0}
  with pytest.raises(errors.InputError) as e:
    sm.evaluate_v1(_data(qas), {"q3": "x"}, _where="dev.json")
  assert str(e.value) == ("dev.json: question 'q3' has no gold answer (SQuAD v1.1 "
                          "needs at least one)")
  assert sm.evaluate_v1(_data(qas), {"q1": "Paris", "7": "x y"}) == {
      "exact_match": pytest.approx(200 / 3), "f1": pytest.approx(200 / 3)}
  with pytest.raises(errors.InputError) as e:
    sm.evaluate_v1(_data([]), {}, _where="dev.json")
  assert str(e.value) == "dev.json: no questions to evaluate"
  # v2: a gold answer normalizing to nothing is dropped; only "" is right then.
  qas2 = [{"id": "a", "answers": [{"text": "the"}, {"text": "x"}]},
          {"id": "b", "answers": [{"text": "a"}]},
          {"id": "c", "answers": []}]
  assert sm.get_raw_scores(_data(qas2), {"a": "the", "b": "", "c": "y"}) == (
      {"a": 0, "b": 1, "c": 0}, {"a": 0, "b": 1, "c": 0})
  caplog.clear()
  with caplog.at_level("WARNING", logger="bert_tf.squad_metrics"):
    got = sm.evaluate_v2(_data(qas2), {"a": "x", "c": ""})
  assert [r.getMessage() for r in caplog.records] == ["Missing prediction for b"]
  assert dict(got) == {"exact": pytest.approx(200 / 3), "f1": pytest.approx(200 / 3),
                       "total": 3, "HasAns_exact": 50.0, "HasAns_f1": 50.0,
                       "HasAns_total": 2, "NoAns_exact": 100.0, "NoAns_f1": 100.0,
                       "NoAns_total": 1}
  only_has = sm.evaluate_v2(_data(qas2[:1]), {"a": "x"})
  assert list(only_has) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                            "HasAns_total"]
  only_no = sm.evaluate_v2(_data(qas2[2:]), {"c": "y"}, {"c": 2.0})
  assert dict(only_no) == {"exact": 100.0, "f1": 100.0, "total": 1, "NoAns_exact": 100.0,
                           "NoAns_f1": 100.0, "NoAns_total": 1, "best_exact": 100.0,
                           "best_exact_thresh": 0.0, "best_f1": 100.0,
                           "best_f1_thresh": 0.0}
  # na_probs without any scored question: no threshold search.
  assert "best_exact" not in sm.evaluate_v2(_data(qas2[2:]), {}, {})
  # Integer scores are numbers; the threshold is strict (> thresh).
  assert sm.evaluate_v2(_data(qas2[2:]), {"c": "y"}, {"c": 1})["exact"] == 0.0
  assert sm.evaluate_v2(_data(qas2[2:]), {"c": "y"}, {"c": 1},
                        na_prob_thresh=0.5)["exact"] == 100.0
  assert sm.make_eval_dict({"a": 1}, {"a": 0.5}, ["a", "z"]) == collections.OrderedDict(
      [("exact", 50.0), ("f1", 25.0), ("total", 2)])


def _input_error(fn, *args, **kwargs):
  with pytest.raises(errors.InputError) as e:
    fn(*args, **kwargs)
  return e.value


def test_malformed_inputs_name_the_json_path():
  def err(dataset):
    return str(_input_error(lambda: list(sm.iter_questions(dataset, "d.json"))))
  assert err({"version": 1}) == "d.json: missing key 'data' at the top level"
  assert err({"data": {}}) == "d.json: data is a dict, expected a list of articles"
  assert err("x") == "d.json: data is a str, expected a list of articles"
  assert err([[]]) == "d.json: data[0] is a list, expected a JSON object"
  assert err([{}]) == "d.json: missing key 'paragraphs' at data[0]"
  assert err([{"paragraphs": {}}]) == (
      "d.json: data[0].paragraphs is a dict, expected list")
  assert err([{"paragraphs": [{"qas": []}, {}]}]) == (
      "d.json: missing key 'qas' at data[0].paragraphs[1]")
  assert err([{"paragraphs": [{"qas": [{"answers": []}]}]}]) == (
      "d.json: missing key 'id' at data[0].paragraphs[0].qas[0]")
  assert err([{"paragraphs": [{"qas": [{"id": 1.5, "answers": []}]}]}]) == (
      "d.json: data[0].paragraphs[0].qas[0].id is a float, expected str/int")
  assert err([{"paragraphs": [{"qas": [{"id": "q"}]}]}]) == (
      "d.json: missing key 'answers' at data[0].paragraphs[0].qas[0]")
  assert err([{"paragraphs": [{"qas": [{"id": "q", "answers": [{"text": "a"}, {}]}]}]}]) == (
      "d.json: missing key 'text' at data[0].paragraphs[0].qas[0].answers[1]")
  assert err([{"paragraphs": [{"qas": [{"id": "q", "answers": [{"text": 3}]}]}]}]) == (
      "d.json: data[0].paragraphs[0].qas[0].answers[0].text is a int, expected str")
  data = _data([{"id": "q", "answers": [{"text": "a"}]}])
  for fn in (sm.evaluate_v1, sm.evaluate_v2):
    assert str(_input_error(fn, data, ["a"], _pred_where="p.json")) == (
        "p.json: predictions are a list, expected a JSON object {question id: answer text}")
    assert str(_input_error(fn, data, {"q": 1}, _pred_where="p.json")) == (
        "p.json: the prediction for 'q' is a int, expected a string")
  assert str(_input_error(sm.evaluate_v2, _data([]), {}, _where="d.json")) == (
      "d.json: no questions to evaluate")
  assert str(_input_error(sm.evaluate_v2, data, {"q": "a"}, [0.5], _na_where="n.json")) == (
      "n.json: expected a JSON object {question id: number}, got a list")
  assert str(_input_error(sm.evaluate_v2, data, {"q": "a"}, {}, _na_where="n.json")) == (
      "n.json: no no-answer score for question 'q'")
  for bad, name in ((True, "bool"), ("0.5", "str"), (None, "NoneType")):
    assert str(_input_error(sm.evaluate_v2, data, {"q": "a"}, {"q": 0.5, "z": bad},
                            _na_where="n.json")) == (
        "n.json: the value for 'z' is a %s, expected a number" % name)
  # A question without prediction needs no score.
  assert sm.evaluate_v2(data, {}, {})["exact"] == 0.0


def test_evaluate_file(tmp_path):
  data = _data([{"id": "q", "answers": [{"text": "Paris"}]},
                {"id": "r", "answers": []}])
  d = tmp_path / "dev.json"
  d.write_bytes(b"\xef\xbb\xbf" + json.dumps(data).encode("utf-8"))  # with a BOM
  p = tmp_path / "predictions.json"
  p.write_text(json.dumps({"q": "paris", "r": "x"}))
  n = tmp_path / "null_odds.json"
  n.write_text(json.dumps({"q": -1.0, "r": 3.0}))
  v1 = _data([{"id": "q", "answers": [{"text": "Paris"}]}])
  d1 = tmp_path / "dev1.json"
  d1.write_text(json.dumps(v1))
  assert sm.evaluate_file(d1, p) == {"exact_match": 100.0, "f1": 100.0}
  assert sm.evaluate_file(str(d1), str(p), str(n)) == {"exact_match": 100.0, "f1": 100.0}
  got = sm.evaluate_file(d, p, version_2_with_negative=True)
  assert (got["exact"], got["HasAns_exact"], got["NoAns_exact"]) == (50.0, 100.0, 0.0)
  assert "best_exact" not in got
  got = sm.evaluate_file(d, p, n, version_2_with_negative=True)
  assert (got["exact"], got["NoAns_exact"], got["best_exact"], got["best_exact_thresh"]) == (
      100.0, 100.0, 100.0, -1.0)
  got = sm.evaluate_file(d, p, n, version_2_with_negative=True, na_prob_thresh=5.0)
  assert got["exact"] == 50.0
  n.write_text(json.dumps({"q": -1.0, "r": 1.5}))  # above the default 1.0
  got = sm.evaluate_file(d, p, n, version_2_with_negative=True)
  assert (got["exact"], got["NoAns_exact"]) == (100.0, 100.0)
  # Errors name the file (and carry the flag).
  e = _input_error(sm.evaluate_file, tmp_path / "none.json", p)
  assert str(e).startswith("cannot read %s: " % (tmp_path / "none.json"))
  assert e.argument == "data_file"
  e = _input_error(sm.evaluate_file, d, tmp_path / "none.json")
  assert e.argument == "prediction_file"
  e = _input_error(sm.evaluate_file, d, p, tmp_path / "none.json", True)
  assert e.argument == "null_odds_file"
  bad = tmp_path / "bad.json"
  bad.write_bytes(b'{"a": "caf\xe9"}')
  e = _input_error(sm.evaluate_file, bad, p)
  assert str(e) == "%s is not valid UTF-8 (byte offset 10: invalid continuation byte)" % bad
  assert e.argument == "data_file" and isinstance(e.__cause__, UnicodeDecodeError)
  bad.write_text('{"data": [\n  1,\n  }')
  e = _input_error(sm.evaluate_file, d, bad)
  assert str(e) == "%s is not valid JSON: Expecting value (line 3, column 3)" % bad
  assert e.argument == "prediction_file" and isinstance(e.__cause__, json.JSONDecodeError)
  bad.write_text(json.dumps({"r": "yes"}))
  e = _input_error(sm.evaluate_file, d, p, bad, True)
  assert str(e) == "%s: no no-answer score for question 'q'" % bad
  e = _input_error(sm.evaluate_v2, data, {"q": "a"}, {})
  assert str(e) == "<na_probs>: no no-answer score for question 'q'"
  e = _input_error(sm.evaluate_file, bad, p)
  assert str(e) == "%s: missing key 'data' at the top level" % bad
  e = _input_error(sm.evaluate_file, bad, p, version_2_with_negative=True)
  assert str(e) == "%s: missing key 'data' at the top level" % bad
  p.write_text("[1]")
  e = _input_error(sm.evaluate_file, d1, p)
  assert str(e) == ("%s: predictions are a list, expected a JSON object {question id: "
                    "answer text}" % p)
  e = _input_error(sm.evaluate_file, d, p, version_2_with_negative=True)
  assert str(e).startswith("%s: predictions are a list" % p)


def test_default_names_in_messages():
  bad = {"data": [{"paragraphs": [{}]}]}
  msg = "<dataset>: missing key 'qas' at data[0].paragraphs[0]"
  for fn in (lambda: list(sm.iter_questions(bad)), lambda: sm.get_raw_scores(bad, {}),
             lambda: sm.make_qid_to_has_ans(bad), lambda: sm.evaluate_v1(bad, {}),
             lambda: sm.evaluate_v2(bad, {})):
    assert str(_input_error(fn)) == msg
  assert str(_input_error(sm.get_raw_scores, bad, {}, "x.json")) == (
      "x.json: missing key 'qas' at data[0].paragraphs[0]")
  assert str(_input_error(sm.make_qid_to_has_ans, bad, "x.json")).startswith("x.json: ")
  assert str(_input_error(sm.evaluate_v1, _data([]), {})) == (
      "<dataset>: no questions to evaluate")
  assert str(_input_error(sm.evaluate_v2, _data([]), {})) == (
      "<dataset>: no questions to evaluate")
  data = _data([{"id": "q", "answers": [{"text": "a"}]}])
  for fn in (sm.evaluate_v1, sm.evaluate_v2):
    assert str(_input_error(fn, data, [])) == (
        "<predictions>: predictions are a list, expected a JSON object {question id: "
        "answer text}")
  assert str(_input_error(sm.evaluate_v2, data, {"q": "a"}, [])) == (
      "<na_probs>: expected a JSON object {question id: number}, got a list")


def test_v2_without_na_probs_reads_zero_scores():
  # na_probs None = 0.0 for every question: answered at any threshold >= 0.
  data = _data([{"id": "q", "answers": [{"text": "Paris"}]},
                {"id": "r", "answers": []}])
  got = sm.evaluate_v2(data, {"q": "Paris", "r": "x"}, None, na_prob_thresh=0.5)
  assert (got["exact"], got["HasAns_exact"], got["NoAns_exact"]) == (50.0, 100.0, 0.0)
  got = sm.evaluate_v2(data, {"q": "Paris", "r": "x"}, None, na_prob_thresh=-0.5)
  assert (got["exact"], got["HasAns_exact"], got["NoAns_exact"]) == (50.0, 0.0, 100.0)
