"""The official SQuAD evaluation: v1.1 (EM/F1) and v2.0 (with no-answer).

Sources: the official scripts ``evaluate-v1.1.py`` (``normalize_answer``,
``f1_score``, ``exact_match_score``, ``metric_max_over_ground_truths``,
``evaluate``) and ``evaluate-v2.0.py`` (``get_raw_scores``,
``apply_no_ans_threshold``, ``make_eval_dict``, ``find_best_thresh``,
``find_all_best_thresh``) from https://rajpurkar.github.io/SQuAD-explorer/,
written here from their published formulas. Scores are percentages
(0-100).

Where the official scripts differ from each other, each keeps its own rule:
v1.1's F1 is 0 when either side is empty after normalization, v2.0's is 1
when both are empty (a no-answer agreeing with a no-answer), and v2.0 drops
gold answers that normalize to nothing (an impossible question's gold is
``[""]``).

Missing predictions: v1.1 scores them 0 and counts them (the official
script's rule, with its "Unanswered question ... will receive score 0."
warning). The official v2.0 script fails with ``KeyError`` when a question
has no prediction; here it is scored 0, counted in ``total`` and warned about
(``Missing prediction for ...``); with every prediction present the numbers
are the official ones.

TF-free: the standard library only (this module is at the bottom layer).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import string
from typing import Any, Callable, Iterator, Mapping, Sequence

from bert_tf import errors

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
  """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse
  whitespace (both official scripts' ``normalize_answer``)."""
  s = s.lower()
  s = "".join(ch for ch in s if ch not in _PUNCTUATION)
  s = _ARTICLES.sub(" ", s)
  return " ".join(s.split())


# ---------------------------------------------------------------- SQuAD 1.1


def exact_match_score(prediction: str, ground_truth: str) -> bool:
  """v1.1: normalized strings are equal."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction: str, ground_truth: str) -> float:
  """v1.1: token F1 of the normalized strings (bag of tokens); 0 without a
  common token (also when either is empty)."""
  prediction_tokens = normalize_answer(prediction).split()
  ground_truth_tokens = normalize_answer(ground_truth).split()
  common = collections.Counter(prediction_tokens) & collections.Counter(
      ground_truth_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(ground_truth_tokens)
  return (2 * precision * recall) / (precision + recall)


def metric_max_over_ground_truths(metric_fn: Callable[[str, str], float],
                                  prediction: str,
                                  ground_truths: Sequence[str]) -> float:
  """The best score of ``prediction`` against any gold answer.

  Raises:
    ValueError: ``ground_truths`` is empty (``max`` of nothing, as the
      official script).
  """
  return max(metric_fn(prediction, gt) for gt in ground_truths)


def _articles(dataset: Any, where: str) -> list:
  """``dataset`` as the official scripts' list of articles: accepts the whole
  file's JSON (``{"data": [...]}``) or its ``data`` list."""
  if isinstance(dataset, dict):
    if "data" not in dataset:
      raise errors.InputError("%s: missing key 'data' at the top level" % where)
    dataset = dataset["data"]
  if not isinstance(dataset, list):
    raise errors.InputError("%s: data is a %s, expected a list of articles"
                            % (where, type(dataset).__name__))
  return dataset


def _get(obj, key, path, where, kind):
  if not isinstance(obj, dict):
    raise errors.InputError("%s: %s is a %s, expected a JSON object"
                            % (where, path, type(obj).__name__))
  if key not in obj:
    raise errors.InputError("%s: missing key %r at %s" % (where, key, path))
  value = obj[key]
  if not isinstance(value, kind):
    names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
    raise errors.InputError("%s: %s.%s is a %s, expected %s"
                            % (where, path, key, type(value).__name__, names))
  return value


def iter_questions(dataset: Any, where: str = "<dataset>"
                   ) -> Iterator[tuple[str, list[str]]]:
  """Yields ``(question id, gold answer texts)`` of a SQuAD dataset in order.

  Args:
    dataset: the file's JSON or its ``data`` list.
    where: the file name for error messages.

  Raises:
    InputError: a missing key or wrong type, naming ``where`` and the JSON
      path (``data[0].paragraphs[2].qas[1].answers[0]``).
  """
  for ai, article in enumerate(_articles(dataset, where)):
    apath = "data[%d]" % ai
    for pi, paragraph in enumerate(_get(article, "paragraphs", apath, where, list)):
      ppath = "%s.paragraphs[%d]" % (apath, pi)
      for qi, qa in enumerate(_get(paragraph, "qas", ppath, where, list)):
        qpath = "%s.qas[%d]" % (ppath, qi)
        qid = _get(qa, "id", qpath, where, (str, int))
        answers = _get(qa, "answers", qpath, where, list)
        texts = [_get(a, "text", "%s.answers[%d]" % (qpath, i), where, str)
                 for i, a in enumerate(answers)]
        yield str(qid) if not isinstance(qid, str) else qid, texts


def _check_predictions(predictions: Any, where: str) -> Mapping[str, str]:
  if not isinstance(predictions, dict):
    raise errors.InputError("%s: predictions are a %s, expected a JSON object "
                            "{question id: answer text}"
                            % (where, type(predictions).__name__))
  for qid, text in predictions.items():
    if not isinstance(text, str):
      raise errors.InputError("%s: the prediction for %r is a %s, expected a string"
                              % (where, qid, type(text).__name__))
  return predictions


def evaluate_v1(dataset: Any, predictions: Mapping[str, str],
                *, _where: str = "<dataset>", _pred_where: str = "<predictions>"
                ) -> dict[str, float]:
  """SQuAD v1.1 exact match and F1 (official ``evaluate-v1.1.py: evaluate``).

  Every question counts; one without a prediction scores 0 (warned about).
  Each prediction takes its best score over the gold answers.

  Args:
    dataset: the dataset JSON (``{"data": [...]}``) or its ``data`` list.
    predictions: ``{question id: answer text}``.

  Returns:
    ``{"exact_match": float, "f1": float}`` in percent.

  Raises:
    InputError: malformed dataset or predictions (names the JSON path), a
      dataset without questions, or a question without gold answers.
  """
  _check_predictions(predictions, _pred_where)
  f1 = exact_match = total = 0
  for qid, ground_truths in iter_questions(dataset, _where):
    total += 1
    if qid not in predictions:
      logger.warning("Unanswered question %s will receive score 0.", qid)
      continue
    if not ground_truths:
      raise errors.InputError("%s: question %r has no gold answer (SQuAD v1.1 "
                              "needs at least one)" % (_where, qid))
    prediction = predictions[qid]
    exact_match += metric_max_over_ground_truths(exact_match_score, prediction,
                                                 ground_truths)
    f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
  if total == 0:
    raise errors.InputError("%s: no questions to evaluate" % _where)
  return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# ---------------------------------------------------------------- SQuAD 2.0


def get_tokens(s: str) -> list[str]:
  """v2.0: the normalized tokens of ``s`` (``[]`` for an empty string)."""
  if not s:
    return []
  return normalize_answer(s).split()


def compute_exact(a_gold: str, a_pred: str) -> int:
  """v2.0: 1 if the normalized strings are equal, else 0."""
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold: str, a_pred: str) -> float:
  """v2.0: token F1; if either side has no token, 1 when both have none."""
  gold_toks = get_tokens(a_gold)
  pred_toks = get_tokens(a_pred)
  common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
  num_same = sum(common.values())
  if len(gold_toks) == 0 or len(pred_toks) == 0:
    return int(gold_toks == pred_toks)
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_toks)
  recall = 1.0 * num_same / len(gold_toks)
  return (2 * precision * recall) / (precision + recall)


def make_qid_to_has_ans(dataset: Any, where: str = "<dataset>") -> dict[str, bool]:
  """``{question id: has at least one gold answer}`` (official v2.0)."""
  return {qid: bool(answers) for qid, answers in iter_questions(dataset, where)}


def get_raw_scores(dataset: Any, preds: Mapping[str, str],
                   where: str = "<dataset>"
                   ) -> tuple[dict[str, int], dict[str, float]]:
  """Per-question exact and F1, max over the gold answers (official v2.0).

  Gold answers that normalize to nothing are dropped; a question left with
  none has the gold ``[""]`` (only the empty prediction is right). Questions
  without a prediction are left out (warned about).

  Returns:
    ``(exact_scores, f1_scores)``: ``{qid: 0/1}``, ``{qid: float in [0, 1]}``.
  """
  exact_scores = {}
  f1_scores = {}
  for qid, answers in iter_questions(dataset, where):
    gold_answers = [a for a in answers if normalize_answer(a)]
    if not gold_answers:
      gold_answers = [""]
    if qid not in preds:
      logger.warning("Missing prediction for %s", qid)
      continue
    a_pred = preds[qid]
    exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
    f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
  return exact_scores, f1_scores


def apply_no_ans_threshold(scores: Mapping[str, float],
                           na_probs: Mapping[str, float],
                           qid_to_has_ans: Mapping[str, bool],
                           na_prob_thresh: float) -> dict[str, float]:
  """Questions with ``na_probs[qid] > na_prob_thresh`` count as answered
  "no answer": 1.0 if they have none, else 0.0 (official v2.0)."""
  new_scores = {}
  for qid, s in scores.items():
    pred_na = na_probs[qid] > na_prob_thresh
    if pred_na:
      new_scores[qid] = float(not qid_to_has_ans[qid])
    else:
      new_scores[qid] = s
  return new_scores


def make_eval_dict(exact_scores: Mapping[str, float],
                   f1_scores: Mapping[str, float],
                   qid_list: Sequence[str] | None = None
                   ) -> collections.OrderedDict:
  """``{"exact", "f1", "total"}`` over ``qid_list`` (default: every scored
  question), in percent (official v2.0). A qid without a score counts 0."""
  if not qid_list:
    total = len(exact_scores)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores.values()) / total),
        ("f1", 100.0 * sum(f1_scores.values()) / total),
        ("total", total),
    ])
  total = len(qid_list)
  return collections.OrderedDict([
      ("exact", 100.0 * sum(exact_scores.get(k, 0) for k in qid_list) / total),
      ("f1", 100.0 * sum(f1_scores.get(k, 0) for k in qid_list) / total),
      ("total", total),
  ])


def merge_eval(main_eval: dict, new_eval: Mapping, prefix: str) -> None:
  """Adds ``new_eval``'s entries to ``main_eval`` as ``prefix_key``."""
  for k in new_eval:
    main_eval["%s_%s" % (prefix, k)] = new_eval[k]


def find_best_thresh(preds: Mapping[str, str], scores: Mapping[str, float],
                     na_probs: Mapping[str, float],
                     qid_to_has_ans: Mapping[str, bool]) -> tuple[float, float]:
  """The no-answer threshold that maximizes the score (official v2.0).

  Starts with every question answered "no answer" (score = the number of
  no-answer questions) and lowers the bar question by question in order of
  ``na_probs``: an answerable question gains its score, an unanswerable one
  loses 1 if a non-empty answer is predicted.

  Returns:
    ``(best score in percent of len(scores), threshold)``.
  """
  num_no_ans = sum(1 for k in scores if not qid_to_has_ans[k])
  cur_score = num_no_ans
  best_score = cur_score
  best_thresh = 0.0
  qid_list = sorted(na_probs, key=lambda k: na_probs[k])
  for qid in qid_list:
    if qid not in scores:
      continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    else:
      diff = -1 if preds[qid] else 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  return 100.0 * best_score / len(scores), best_thresh


def find_all_best_thresh(main_eval: dict, preds: Mapping[str, str],
                         exact_raw: Mapping[str, float],
                         f1_raw: Mapping[str, float],
                         na_probs: Mapping[str, float],
                         qid_to_has_ans: Mapping[str, bool]) -> None:
  """Adds ``best_exact``, ``best_exact_thresh``, ``best_f1``,
  ``best_f1_thresh`` to ``main_eval`` (official v2.0)."""
  best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs,
                                              qid_to_has_ans)
  best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
  main_eval["best_exact"] = best_exact
  main_eval["best_exact_thresh"] = exact_thresh
  main_eval["best_f1"] = best_f1
  main_eval["best_f1_thresh"] = f1_thresh


def evaluate_v2(dataset: Any, predictions: Mapping[str, str],
                na_probs: Mapping[str, float] | None = None,
                na_prob_thresh: float = 1.0,
                *, _where: str = "<dataset>", _pred_where: str = "<predictions>",
                _na_where: str = "<na_probs>") -> collections.OrderedDict:
  """SQuAD v2.0 evaluation (official ``evaluate-v2.0.py: main``).

  Args:
    dataset: the dataset JSON (``{"data": [...]}``) or its ``data`` list;
      an unanswerable question has ``"answers": []``.
    predictions: ``{question id: answer text}``, ``""`` = no answer.
    na_probs: ``{question id: no-answer score}``, e.g. run_squad's
      ``null_odds.json`` (null minus best non-null logit sum); ``None``
      means 0.0 for every question and no best-threshold search.
    na_prob_thresh: a question with ``na_probs[qid] > na_prob_thresh`` is
      taken as answered "no answer" (official default 1.0).

  Returns:
    ``OrderedDict`` with ``exact``, ``f1``, ``total`` and, when the dataset
    has such questions, ``HasAns_exact``, ``HasAns_f1``, ``HasAns_total``,
    ``NoAns_exact``, ``NoAns_f1``, ``NoAns_total``; with ``na_probs`` also
    ``best_exact``, ``best_exact_thresh``, ``best_f1``, ``best_f1_thresh``.
    Scores in percent, totals are counts.

  Raises:
    InputError: malformed dataset, predictions or na_probs (a predicted
      question without a no-answer score), or no questions at all.
  """
  _check_predictions(predictions, _pred_where)
  qid_to_has_ans = make_qid_to_has_ans(dataset, _where)
  if not qid_to_has_ans:
    raise errors.InputError("%s: no questions to evaluate" % _where)
  given_na_probs = na_probs is not None
  if na_probs is None:
    na_probs = {k: 0.0 for k in predictions}
  else:
    if not isinstance(na_probs, dict):
      raise errors.InputError("%s: expected a JSON object {question id: number}, "
                              "got a %s" % (_na_where, type(na_probs).__name__))
    for qid in qid_to_has_ans:
      if qid in predictions and qid not in na_probs:
        raise errors.InputError("%s: no no-answer score for question %r"
                                % (_na_where, qid))
    for qid, v in na_probs.items():
      if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise errors.InputError("%s: the value for %r is a %s, expected a number"
                                % (_na_where, qid, type(v).__name__))
  has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
  no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
  exact_raw, f1_raw = get_raw_scores(dataset, predictions, _where)
  exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans,
                                        na_prob_thresh)
  f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans,
                                     na_prob_thresh)
  # Over every question (= the official's len(scores) when all are predicted).
  out_eval = make_eval_dict(exact_thresh, f1_thresh, qid_list=list(qid_to_has_ans))
  if has_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids),
               "HasAns")
  if no_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids),
               "NoAns")
  if given_na_probs and exact_raw:
    find_all_best_thresh(out_eval, predictions, exact_raw, f1_raw, na_probs,
                         qid_to_has_ans)
  return out_eval


def _load_json(path: str | os.PathLike, argument: str) -> Any:
  path = os.fspath(path)
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except OSError as e:
    raise errors.InputError("cannot read %s: %s" % (path, e), argument=argument) from e
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise errors.InputError("%s is not valid UTF-8 (byte offset %d: %s)"
                            % (path, e.start, e.reason), argument=argument) from e
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise errors.InputError("%s is not valid JSON: %s (line %d, column %d)"
                            % (path, e.msg, e.lineno, e.colno),
                            argument=argument) from e


def evaluate_file(data_file: str | os.PathLike,
                  prediction_file: str | os.PathLike,
                  null_odds_file: str | os.PathLike | None = None,
                  version_2_with_negative: bool = False,
                  na_prob_thresh: float = 1.0) -> dict[str, Any]:
  """Evaluates a ``predictions.json`` against a SQuAD dataset file.

  The command lines ``python evaluate-v1.1.py DATA PRED`` and ``python
  evaluate-v2.0.py DATA PRED --na-prob-file NULL_ODDS`` in one function.

  Args:
    data_file: the SQuAD JSON (``{"data": [...]}``).
    prediction_file: ``{question id: answer text}`` JSON (run_squad's
      ``predictions.json``).
    null_odds_file: SQuAD 2.0 only: run_squad's ``null_odds.json`` (the
      official script's ``--na-prob-file``); ignored for v1.1.
    version_2_with_negative: evaluate as SQuAD 2.0 (:func:`evaluate_v2`),
      else SQuAD 1.1 (:func:`evaluate_v1`).
    na_prob_thresh: SQuAD 2.0's ``--na-prob-thresh`` (default 1.0).

  Returns:
    The dict of :func:`evaluate_v1` or :func:`evaluate_v2`.

  Raises:
    InputError: a file is unreadable, not UTF-8, not JSON or malformed; the
      message names the file (and the JSON path).
  """
  dataset = _load_json(data_file, "data_file")
  predictions = _load_json(prediction_file, "prediction_file")
  if not version_2_with_negative:
    return evaluate_v1(dataset, predictions, _where=os.fspath(data_file),
                       _pred_where=os.fspath(prediction_file))
  na_probs = None
  if null_odds_file is not None:
    na_probs = _load_json(null_odds_file, "null_odds_file")
  return evaluate_v2(dataset, predictions, na_probs, na_prob_thresh,
                     _where=os.fspath(data_file),
                     _pred_where=os.fspath(prediction_file),
                     _na_where=os.fspath(null_odds_file) if null_odds_file else "<na_probs>")
