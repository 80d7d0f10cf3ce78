"""The SQuAD SavedModel (``bert_tf.export.squad``) against the ORIGINAL run_squad.py.

* windows: every feature of the in-graph doc-stride windowing (input_ids,
  input_mask, segment_ids, token_is_max_context) equals the original
  ``convert_examples_to_features`` on real SQuAD-format contexts
  (``data/squad_v1/dev.json``, SQuAD-Shifts), with short windows so that a context
  has many;
* best span: given the same logits, the in-graph choice equals the original
  ``write_predictions`` (n-best, max context, max_answer_length; v1 and v2,
  with real-valued and heavily tied logits), text, score and null score
  difference;
* offsets: non-ASCII and accented contexts, ``answer ==
  context[start_char:end_char]`` and every word piece maps to its surface
  form;
* hostile inputs through the exported signature;
* a fresh process with only TensorFlow + tensorflow-text, and the C loader.

The original runs in its own process (``tests/original_squad.py``).
"""

import json
import os

import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops: the exports load in process)

from bert_tf import config as config_lib
from bert_tf import preprocessing
from bert_tf import tokenization
from bert_tf.data import squad as squad_data
from bert_tf.export import base
from bert_tf.export import saved_model
from bert_tf.export import serving_ops
from bert_tf.export import squad
from bert_tf.modeling.models import BertQuestionAnswerer
from conftest import ROOT, SQUAD_V1_DIR, TINY_CONFIG, VOCAB, compile_c_loader, require, run_tool
from fuzz_util import AWKWARD, SLOW_MAX_CHARS, fuzz_settings, slow_fuzz, unicode_strings

HERE = os.path.dirname(os.path.abspath(__file__))
ORIGINAL = os.path.join(HERE, "original_squad.py")
# (max_seq_length, doc_stride, max_query_length): many windows per context;
# the second has windows shorter than the stride for long questions
# (step = min(window length, doc_stride)).
CONFIGS = [(64, 16, 16), (48, 32, 32)]
MAX_ANSWER = 30
CLS = 101  # uncased_vocab.txt


def _examples(n_paragraphs=30, per_paragraph=2):
  """A slice of dev.json: (path of the slice, [(qas_id, question, context)])."""
  with open(os.path.join(SQUAD_V1_DIR, "dev.json"), encoding="utf-8") as f:
    data = json.load(f)
  paragraphs, rows = [], []
  for article in data["data"]:
    for p in article["paragraphs"]:
      if len(paragraphs) >= n_paragraphs:
        break
      qas = p["qas"][:per_paragraph]
      paragraphs.append(dict(p, qas=qas))
      rows += [(qa["id"], qa["question"], p["context"]) for qa in qas]
  assert len(paragraphs) == n_paragraphs and len(rows) == n_paragraphs * per_paragraph
  return {"version": "1.1", "data": [{"title": "slice", "paragraphs": paragraphs}]}, rows


class TableModel:
  """A deterministic stand-in QA model: logit = table[input_id] + table[position].

  The same float32 additions in TensorFlow and in numpy, so the original
  gets bit-identical logits for its features. ``ties``: small integers, so
  that top-k ranks and span scores tie everywhere.
  """

  def __init__(self, seed, seq, ties=False):
    rng = np.random.default_rng(seed)
    draw = ((lambda *s: rng.integers(-3, 4, size=s).astype(np.float32)) if ties
            else (lambda *s: rng.standard_normal(s).astype(np.float32)))
    self.tok = draw(2, 30522)
    self.pos = draw(2, seq)

  def numpy(self, input_ids):
    ids = np.asarray(input_ids)
    return [self.tok[i][ids] + self.pos[i][None, :ids.shape[1]] for i in (0, 1)]

  def __call__(self, features, training=False):
    ids = features["input_ids"]
    width = tf.shape(ids)[1]
    out = [tf.gather(tf.constant(self.tok[i]), ids) + tf.constant(self.pos[i])[None, :width]
           for i in (0, 1)]
    return {"start_logits": out[0], "end_logits": out[1]}


def _module(model, seq, stride, query, v2=False, track=False):
  pre = preprocessing.BertPreprocessor(VOCAB, True, seq)
  return squad.SquadServingModule(model, pre, doc_stride=stride,
                                  max_query_length=query,
                                  max_answer_length=MAX_ANSWER,
                                  version_2_with_negative=v2, track_model=track)


def _graph_windows(module, questions, contexts):
  q = module.preprocessor.tokenize(tf.constant(questions))[:, :module.max_query_length]
  ids, _, _ = module.tokenize_context(module.sanitize_utf8(tf.constant(contexts)))
  return {k: v.numpy() for k, v in module.windows(q, ids).items()}


@pytest.fixture(scope="module")
def original(tmp_path_factory):
  """Original features and predictions (v1, v2; real and tied logits) per config."""
  tmp = tmp_path_factory.mktemp("squad_orig")
  data, rows = _examples()
  path = str(tmp / "slice.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(data, f)
  questions = [r[1] for r in rows]
  contexts = [r[2] for r in rows]
  jobs, mine, models = [], {}, {}
  for seq, stride, query in CONFIGS:
    tag = "%d_%d_%d" % (seq, stride, query)
    common = {"input_file": path, "vocab_file": VOCAB, "do_lower_case": True,
              "max_seq_length": seq, "doc_stride": stride, "max_query_length": query}
    jobs.append(dict(common, kind="features", is_training=False,
                     output=str(tmp / ("features_%s.json" % tag))))
    win = _graph_windows(_module(None, seq, stride, query), questions, contexts)
    mine[tag] = win
    for ties in (False, True):
      model = TableModel(seq + stride + ties, seq, ties)
      # [CLS] logits that put the null score at the median best span score,
      # so that v2 predicts both answers and no-answers.
      scores = _answers(_module(model, seq, stride, query), model, questions,
                        contexts)["score"]
      target = np.float32(np.median(scores))
      model.tok[0][CLS] = np.round(target / 2) - model.pos[0][0]
      model.tok[1][CLS] = target - np.round(target / 2) - model.pos[1][0]
      models[(tag, ties)] = model
      start, end = model.numpy(win["input_ids"])
      npz = str(tmp / ("logits_%s_%d.npz" % (tag, ties)))
      np.savez(npz, unique_ids=1000000000 + np.arange(len(start)),
               start_logits=start, end_logits=end)
      for v2 in (False, True):
        jobs.append(dict(common, kind="predictions", logits=npz, n_best_size=20,
                         max_answer_length=MAX_ANSWER, version_2_with_negative=v2,
                         null_score_diff_threshold=0.0,
                         output_dir=str(tmp / ("pred_%s_%d_%d" % (tag, ties, v2)))))
  # The accented contexts: features, and one prediction per surface case.
  acc_path = str(tmp / "accented.json")
  with open(acc_path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": [{"title": "accented", "paragraphs": [
        {"context": c, "qas": [{"id": "accented-%d" % i, "question": q, "answers": []}]}
        for i, (q, c) in enumerate(ACCENTED)]}]}, f)
  common = {"input_file": acc_path, "vocab_file": VOCAB, "do_lower_case": True,
            "max_seq_length": 64, "doc_stride": 16, "max_query_length": 16}
  jobs.append(dict(common, kind="features", is_training=False,
                   output=str(tmp / "features_accented.json")))
  acc = _graph_windows(_module(None, 64, 16, 16), [q for q, _ in ACCENTED],
                       [c for _, c in ACCENTED])
  vocab = tokenization.load_vocab(VOCAB)
  for case, (_, first, last, _) in enumerate(SURFACE_CASES):
    peak = PeakModel(vocab[first], vocab[last])
    start, end = peak.numpy(acc["input_ids"], acc["segment_ids"])
    npz = str(tmp / ("logits_surface_%d.npz" % case))
    np.savez(npz, unique_ids=1000000000 + np.arange(len(start)),
             start_logits=start, end_logits=end)
    jobs.append(dict(common, kind="predictions", logits=npz, n_best_size=20,
                     max_answer_length=MAX_ANSWER, version_2_with_negative=False,
                     output_dir=str(tmp / ("pred_surface_%d" % case))))
  jobs_json = str(tmp / "jobs.json")
  with open(jobs_json, "w", encoding="utf-8") as f:
    json.dump(jobs, f)
  run_tool([ORIGINAL, str(tmp), jobs_json], cwd=HERE)
  return {"tmp": tmp, "rows": rows, "questions": questions, "contexts": contexts,
          "mine": mine, "models": models, "accented": acc}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "S%d_stride%d_q%d" % c)
def test_windows_equal_original_features(original, config):
  seq, stride, query = config
  tag = "%d_%d_%d" % config
  with open(os.path.join(original["tmp"], "features_%s.json" % tag), encoding="utf-8") as f:
    feats = json.load(f)["features"]
  win = original["mine"][tag]
  assert len(feats) == len(win["example"]) > 3 * len(original["rows"])
  per_example = np.bincount(win["example"])
  assert per_example.max() >= 8  # many windows per context
  same = win["example"][1:] == win["example"][:-1]
  steps = set(np.diff(win["start"])[same].tolist())
  assert max(steps) == stride and (min(steps) < stride) == (seq - query - 3 < stride)
  for i, f in enumerate(feats):
    assert win["example"][i] == f["example_index"], i
    np.testing.assert_array_equal(win["input_ids"][i], f["input_ids"], err_msg=str(i))
    np.testing.assert_array_equal(win["input_mask"][i], f["input_mask"])
    np.testing.assert_array_equal(win["segment_ids"][i], f["segment_ids"])
    want = sorted(p for p, is_max in f["token_is_max_context"] if is_max)
    assert np.flatnonzero(win["token_is_max_context"][i]).tolist() == want, i
    context_positions = sorted(p for p, _ in f["token_to_orig_map"])
    assert np.flatnonzero(win["token_index"][i] >= 0).tolist() == context_positions


def _answers(module, model, questions, contexts):
  module._layer = base.Untracked(model)  # pylint: disable=protected-access
  out = module.answer(tf.constant(questions), tf.constant(contexts))
  return {k: v.numpy() for k, v in out.items()}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "S%d_stride%d_q%d" % c)
@pytest.mark.parametrize("ties", [False, True], ids=["real_logits", "tied_logits"])
@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_best_span_equals_original_predictions(original, config, ties, v2):
  seq, stride, query = config
  tag = "%d_%d_%d" % config
  out_dir = os.path.join(original["tmp"], "pred_%s_%d_%d" % (tag, ties, v2))
  with open(os.path.join(out_dir, "predictions.json"), encoding="utf-8") as f:
    preds = json.load(f)
  with open(os.path.join(out_dir, "nbest_predictions.json"), encoding="utf-8") as f:
    nbest = json.load(f)
  model = original["models"][(tag, ties)]
  module = _module(model, seq, stride, query, v2=v2)
  got = _answers(module, model, original["questions"], original["contexts"])
  no_answers = 0
  for i, (qid, _, context) in enumerate(original["rows"]):
    best = next(e for e in nbest[qid] if e["text"])  # best non-null entry
    want_score = best["start_logit"] + best["end_logit"]
    assert got["score"][i] == np.float32(want_score), (qid, got["score"][i], want_score)
    text = got["answer"][i].decode("utf-8")
    assert text == context[got["start_char"][i]:got["end_char"][i]]
    if v2:
      with open(os.path.join(out_dir, "null_odds.json"), encoding="utf-8") as f:
        diff = json.load(f)[qid]
      assert got["null_score_diff"][i] == np.float32(diff), qid
      assert got["no_answer"][i] == (preds[qid] == "")
      no_answers += int(got["no_answer"][i])
      if got["no_answer"][i]:
        assert text == "" and got["start_char"][i] == got["end_char"][i] == 0
        continue
    # The original re-joins the span's words with one space.
    assert " ".join(text.split()) == preds[qid], (qid, text, preds[qid])
  if v2:
    assert 0 < no_answers < len(original["rows"])


# ----------------------------------------------------------------- offsets

ACCENTED = [
    ("Where is the café?", "Das Café Müller, eine naïve Façade — in Zürich."
     " \u6771\u4eac\u00a0and\u3000Ōsaka; emoji \U0001F600 ok.\x00\u200b"),
    ("who?", "  \tÉLODIE   Über-Größe\u0301s \ufffd straße résumé, ANDRÉ's CAFÉ."),
    ("x", "Ἀθῆναι Ελλάδα Москва ǅemal İstanbul ﬁnance Ⅻ ½"),
]


# (context index, first piece, last piece, the expected answer).
SURFACE_CASES = [
    (0, "cafe", "cafe", "Caf\u00e9"),
    (0, "naive", "facade", "na\u00efve Fa\u00e7ade"),
    (0, "muller", "muller", "M\u00fcller"),
    (0, "zurich", "zurich", "Z\u00fcrich"),
    (0, "osaka", "osaka", "\u014csaka"),
    (0, "\u6771", "\u4eac", "\u6771\u4eac"),
    (0, "em", "##i", "emoji"),
    (0, "ok", ".", "ok."),
    (1, "el", "##ie", "\u00c9LODIE"),
    (1, "gr", "##s", "Gr\u00f6\u00dfe\u0301s"),
    (1, "andre", "s", "ANDR\u00c9's"),
    (2, "\u03b1", "##\u03b9", "\u1f08\u03b8\u1fc6\u03bd\u03b1\u03b9"),
    (2, "\ufb01", "##ce", "\ufb01nance")]


# Where the original's get_final_text cannot align the normalized span with
# its whitespace-split word (a length change: NBSP and U+3000 do not split
# its doc_tokens, deleted control characters, a dropped combining mark) it
# returns the whole word; this export returns the span itself.
ORIGINAL_FALLBACK = {
    "\u014csaka": "\u6771\u4eac\u00a0and\u3000\u014csaka;",
    "\u6771\u4eac": "\u6771\u4eac\u00a0and\u3000\u014csaka;",
    "ok.": "ok.\x00\u200b",
    "Gr\u00f6\u00dfe\u0301s": "\u00dcber-Gr\u00f6\u00dfe\u0301s",
}


def _pieces(module, contexts):
  ids, s, e = module.tokenize_context(module.sanitize_utf8(tf.constant(contexts)))
  return ids.to_list(), s.to_list(), e.to_list()


def test_offsets_map_word_pieces_to_surface_text():
  module = _module(None, 64, 16, 16)
  vocab = tokenization.load_vocab(VOCAB)
  inv = {v: k for k, v in vocab.items()}
  ref = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
  contexts = [c for _, c in ACCENTED]
  ids, starts, ends = _pieces(module, contexts)
  for context, row, s_row, e_row in zip(contexts, ids, starts, ends):
    assert row and len(row) == len(s_row) == len(e_row)
    for tok, s, e in zip(row, s_row, e_row):
      piece = inv[tok]
      surface = context[s:e]
      assert 0 <= s < e <= len(context)
      if piece == "[UNK]":
        continue
      # The surface text normalizes (reference tokenizer) to this piece.
      assert "".join(t.replace("##", "") for t in ref.tokenize(surface)) == \
          piece.replace("##", ""), (piece, surface)
    # Pieces are in order and do not overlap.
    assert all(e <= s for e, s in zip(e_row, s_row[1:]))


def test_offsets_cased():
  """Without lower-casing a piece is its surface text (accents kept)."""
  pre = preprocessing.BertPreprocessor(VOCAB, False, 64)
  module = squad.SquadServingModule(None, pre, doc_stride=16, max_query_length=16,
                                    track_model=False)
  inv = {v: k for k, v in tokenization.load_vocab(VOCAB).items()}
  contexts = [c for _, c in ACCENTED] + ["Caf\u00e9 in a\u200bb the cafe"]
  ids, starts, ends = _pieces(module, contexts)
  known = 0
  for context, row, s_row, e_row in zip(contexts, ids, starts, ends):
    for tok, s, e in zip(row, s_row, e_row):
      surface = "".join(ch for ch in context[s:e] if ch not in "\x00\u200b\ufffd")
      if inv[tok] != "[UNK]":
        known += 1
        assert surface == inv[tok].replace("##", ""), (inv[tok], context[s:e])
  assert known > 20
  row = [inv[t] for t in ids[-1]]
  assert row[-1] == "cafe" and contexts[-1][starts[-1][-1]:ends[-1][-1]] == "cafe"
  i = row.index("ab")  # a U+200B b: the deleted character stays inside the span
  assert contexts[-1][starts[-1][i]:ends[-1][i]] == "a\u200bb"


class PeakModel:
  """Start logit 10 at the pieces ``start_id``, end logit 10 at ``end_id``."""

  def __init__(self, start_id, end_id):
    self.start_id, self.end_id = start_id, end_id

  def numpy(self, input_ids, segment_ids):
    seg = np.asarray(segment_ids, np.float32)
    ids = np.asarray(input_ids)
    return [np.where(ids == i, 10.0, 0.0).astype(np.float32) * seg
            for i in (self.start_id, self.end_id)]

  def __call__(self, features, training=False):
    ids = features["input_ids"]
    seg = tf.cast(features["segment_ids"], tf.float32)
    start = tf.where(ids == self.start_id, 10.0, 0.0) * seg
    end = tf.where(ids == self.end_id, 10.0, 0.0) * seg
    return {"start_logits": start, "end_logits": end}


class ZeroModel:
  """Every logit 0: the n-best starts and ends are the first ``n_best_size``
  positions (ties go to the lower index, in the original as in the graph)."""

  def __call__(self, features, training=False):
    zeros = tf.zeros(tf.shape(features["input_ids"]), tf.float32)
    return {"start_logits": zeros, "end_logits": zeros}


def test_no_valid_span_answers_as_the_original(tmp_path):
  """Windows whose n-best has no valid span get the original's nonce answer.

  With all logits 0 the 20 best starts and ends are positions 0-19; a
  question of 18+ pieces fills them with [CLS] + question + [SEP], so no
  candidate lies in the context: the original writes "empty". Every other
  question gets a real span. v1 against the ORIGINAL write_predictions; v2
  against ours (the original raises AttributeError there, see
  ``bert_tf.data.squad``)."""
  seq, stride, query = 64, 16, 32
  data, _ = _examples(n_paragraphs=6, per_paragraph=2)
  rows = []
  for p in data["data"][0]["paragraphs"]:
    for qa in p["qas"]:
      if len(rows) % 2:
        qa["question"] = "please tell me, if you would be so kind, " * 3 + qa["question"]
      rows.append((qa["id"], qa["question"], p["context"]))
  path = str(tmp_path / "slice.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(data, f)
  questions, contexts = [r[1] for r in rows], [r[2] for r in rows]
  win = _graph_windows(_module(None, seq, stride, query), questions, contexts)
  zeros = np.zeros(win["input_ids"].shape, np.float32)
  npz = str(tmp_path / "zero_logits.npz")
  np.savez(npz, unique_ids=1000000000 + np.arange(len(zeros)), start_logits=zeros,
           end_logits=zeros)
  jobs = [{"kind": "predictions", "input_file": path, "vocab_file": VOCAB,
           "do_lower_case": True, "max_seq_length": seq, "doc_stride": stride,
           "max_query_length": query, "logits": npz, "n_best_size": 20,
           "max_answer_length": MAX_ANSWER, "version_2_with_negative": False,
           "null_score_diff_threshold": 0.0, "output_dir": str(tmp_path / "pred")}]
  with open(str(tmp_path / "jobs.json"), "w", encoding="utf-8") as f:
    json.dump(jobs, f)
  run_tool([ORIGINAL, str(tmp_path), str(tmp_path / "jobs.json")], cwd=HERE)
  with open(str(tmp_path / "pred" / "predictions.json"), encoding="utf-8") as f:
    original_v1 = json.load(f)
  examples = squad_data.read_squad_examples(path, is_training=False)
  features = squad_data.convert_examples_to_features(
      examples, tokenization.FullTokenizer(VOCAB, do_lower_case=True), seq, stride, query,
      is_training=False)
  results = [squad_data.RawResult(f.unique_id, zeros[0], zeros[0]) for f in features]
  ours_v2, _, odds_v2 = squad_data.compute_predictions(
      examples, features, results, 20, MAX_ANSWER, True, version_2_with_negative=True)
  model = ZeroModel()
  v1 = _answers(_module(model, seq, stride, query), model, questions, contexts)
  v2 = _answers(_module(model, seq, stride, query, v2=True), model, questions, contexts)
  nonce = 0
  for i, (qid, _, context) in enumerate(rows):
    for got, want in ((v1, original_v1[qid]), (v2, ours_v2[qid])):
      text = got["answer"][i].decode("utf-8")
      assert " ".join(text.split()) == want, (qid, text, want)
      if want == squad_data.NO_SPAN_TEXT:
        assert got["score"][i] == -np.inf
        assert got["start_char"][i] == got["end_char"][i] == 0
      else:
        assert text == context[got["start_char"][i]:got["end_char"][i]]
    assert v2["null_score_diff"][i] == np.float32(odds_v2[qid]) and not v2["no_answer"][i]
    nonce += original_v1[qid] == squad_data.NO_SPAN_TEXT
  assert 0 < nonce < len(rows)


@pytest.mark.parametrize("index,first,last,want", SURFACE_CASES)
def test_answer_is_the_original_surface_form(original, index, first, last, want):
  """A model peaked at two pieces: the answer is the context's own text, and
  the original (features + write_predictions + get_final_text, given the
  same logits) answers the same."""
  vocab = tokenization.load_vocab(VOCAB)
  question, context = ACCENTED[index]
  model = PeakModel(vocab[first], vocab[last])
  module = _module(model, 64, 16, 16)
  got = _answers(module, model, [question], [context])
  text = got["answer"][0].decode("utf-8")
  assert text == want
  assert context[got["start_char"][0]:got["end_char"][0]] == want
  assert got["score"][0] == 20.0
  case = SURFACE_CASES.index((index, first, last, want))
  with open(os.path.join(original["tmp"], "pred_surface_%d" % case, "predictions.json"),
            encoding="utf-8") as f:
    assert json.load(f)["accented-%d" % index] == ORIGINAL_FALLBACK.get(want, want)


def test_windows_equal_original_features_accented(original):
  """The non-ASCII contexts window (and tokenize) as in the original."""
  with open(os.path.join(original["tmp"], "features_accented.json"), encoding="utf-8") as f:
    feats = json.load(f)["features"]
  win = original["accented"]
  assert len(feats) == len(win["input_ids"]) >= len(ACCENTED)
  for i, f in enumerate(feats):
    np.testing.assert_array_equal(win["input_ids"][i], f["input_ids"])
    np.testing.assert_array_equal(win["segment_ids"][i], f["segment_ids"])
    want = sorted(p for p, is_max in f["token_is_max_context"] if is_max)
    assert np.flatnonzero(win["token_is_max_context"][i]).tolist() == want


# ------------------------------------------------------- the real export


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """A tiny real BertQuestionAnswerer exported as v1 and v2 (S=64)."""
  tmp = tmp_path_factory.mktemp("squad_export")
  tf.keras.utils.set_random_seed(1)
  model = BertQuestionAnswerer(config_lib.BertConfig.from_json_file(TINY_CONFIG))
  kw = dict(max_seq_length=64, doc_stride=16, max_query_length=16)
  v1 = squad.export_squad(model, VOCAB, True, str(tmp / "v1"), **kw)
  v2 = squad.export_squad(model, VOCAB, True, str(tmp / "v2"),
                          version_2_with_negative=True, null_score_diff_threshold=0.5,
                          **kw)
  return {"tmp": tmp, "model": model, "v1": v1, "v2": v2, "kw": kw}


@pytest.fixture(scope="module")
def served(exports):
  return {n: tf.saved_model.load(exports[n]).signatures["serving_default"]
          for n in ("v1", "v2")}


def _serve(fn, questions, contexts):
  out = fn(question=tf.constant(questions, tf.string),
           context=tf.constant(contexts, tf.string))
  return {k: v.numpy() for k, v in out.items()}


def _check(out, contexts):
  n = len(contexts)
  for k in ("answer", "start_char", "end_char", "score"):
    assert out[k].shape == (n,), k
  for i, c in enumerate(contexts):
    c = c if isinstance(c, bytes) else c.encode("utf-8")
    text = c.decode("utf-8", errors="replace")  # == unicode_transcode's replacement
    s, e = int(out["start_char"][i]), int(out["end_char"][i])
    assert 0 <= s <= e <= len(text)
    if out["score"][i] == -np.inf and out["answer"][i] == squad_data.NO_SPAN_TEXT.encode():
      assert s == e == 0  # windows without a valid span: the original's nonce
    else:
      assert out["answer"][i].decode("utf-8") == text[s:e]


def test_metadata_and_signature(exports):
  meta = saved_model.read_metadata(exports["v2"])
  assert meta["export"] == "squad" and meta["version_2_with_negative"] is True
  assert meta["signatures"]["serving_default"]["inputs"] == ["context", "question"]
  assert meta["signatures"]["serving_default"]["outputs"] == [
      "answer", "end_char", "no_answer", "null_score_diff", "score", "start_char"]
  assert saved_model.read_metadata(exports["v1"])["signatures"]["serving_default"][
      "outputs"] == ["answer", "end_char", "score", "start_char"]
  ops = {o["op"] for o in meta["custom_ops"]}
  assert ops == set(serving_ops.graph_ops(exports["v2"])) & set(
      serving_ops.tf_text_op_libraries())
  assert "WordpieceTokenizeWithOffsets" in ops
  # combine_segments, not the round-robin trimmer: servable from TF Serving 2.2.
  assert not any(o.startswith("TFText>RoundRobin") for o in ops)
  assert meta["min_tf_serving_version"] == "2.2"
  assert meta["min_tf_serving_version"] == max(
      (o["min_tf_serving"] for o in meta["custom_ops"]), key=serving_ops.version_key)
  assert meta["warmup_requests"] == 1
  assert os.path.exists(os.path.join(exports["v2"], "assets", "uncased_vocab.txt"))


def test_warmup_request_parses_and_runs(exports, served):
  apis = require("tensorflow_serving.apis.prediction_log_pb2",
                 "tensorflow-serving-api, requirements-test.txt")
  from bert_tf.export import warmup  # pylint: disable=g-import-not-at-top
  for name in ("v1", "v2"):
    records = list(tf.data.TFRecordDataset(
        os.path.join(exports[name], "assets.extra", warmup.WARMUP_FILE)))
    assert len(records) == 1
    req = apis.PredictionLog.FromString(records[0].numpy()).predict_log.request
    assert req.model_spec.signature_name == "serving_default"
    assert sorted(req.inputs) == ["context", "question"]
    args = {k: tf.constant(tf.make_ndarray(v)) for k, v in req.inputs.items()}
    out = served[name](**args)
    assert out["answer"].shape == (len(squad.WARMUP_QUESTIONS),)


@pytest.fixture(scope="module")
def in_process(exports):
  """The in-process reference: the same model and settings as the exports,
  the module's ``answer`` run eagerly (not the SavedModel)."""
  out = {}
  for name, v2, threshold in (("v1", False, 0.0), ("v2", True, 0.5),
                              ("v2_never_null", True, float("inf"))):
    module = _module(exports["model"], v2=v2, track=True,
                     **{"seq": 64, "stride": 16, "query": 16})
    module.null_score_diff_threshold = threshold
    out[name] = module
  # The 200-example fuzz test's reference: the never-null module's ``answer``
  # traced once (``[None]`` strings, as the export traces it) instead of run
  # eagerly, ~7x a served call (66 s of that test, 2026-11-29). The eager
  # module stays the reference of the 12 real rows and the 10-example test.
  spec = tf.TensorSpec([None], tf.string)
  out["v2_never_null_graph"] = tf.function(out["v2_never_null"].answer,
                                           input_signature=[spec, spec])
  return out


def _in_process_answers(in_process, questions, contexts, one_call=False):
  """``{"v1": outputs, "v2": outputs}`` of the in-process modules.

  ``one_call``: a single run (of the v2 module with an infinite threshold,
  which never answers "no answer", traced once) instead of two eager ones: its answer,
  offsets and score are v1's (``SquadServingModule.answer`` overrides them
  only where it answers "no answer"), and v2's follow from the documented
  rule: "no answer" where ``null_score_diff > 0.5``, then answer "" at
  offsets 0, 0.
  """
  run = lambda answer: {k: v.numpy() for k, v in answer(
      tf.constant(questions, tf.string), tf.constant(contexts, tf.string)).items()}
  if not one_call:
    return {"v1": run(in_process["v1"].answer), "v2": run(in_process["v2"].answer)}
  both = run(in_process["v2_never_null_graph"])
  assert not both["no_answer"].any()
  v1 = {k: both[k] for k in ("answer", "start_char", "end_char", "score")}
  no_answer = both["null_score_diff"] > 0.5
  v2 = dict(v1, no_answer=no_answer, null_score_diff=both["null_score_diff"],
            answer=np.where(no_answer, b"", v1["answer"]).astype(object),
            start_char=np.where(no_answer, 0, v1["start_char"]),
            end_char=np.where(no_answer, 0, v1["end_char"]))
  return {"v1": v1, "v2": v2}


def served_equals_in_process(served, in_process, questions, contexts, one_call=False):
  """Every output of the v1 and v2 signatures equals the in-process module's:
  answer text and character offsets exactly, no-answer decisions exactly,
  scores and null score differences within 1e-5."""
  reference = _in_process_answers(in_process, questions, contexts, one_call)
  for name in ("v1", "v2"):
    got = _serve(served[name], questions, contexts)
    want = reference[name]
    assert set(got) == set(want) == (
        {"answer", "start_char", "end_char", "score"} |
        ({"no_answer", "null_score_diff"} if name == "v2" else set()))
    assert got["answer"].tolist() == want["answer"].tolist(), name
    np.testing.assert_array_equal(got["start_char"], want["start_char"])
    np.testing.assert_array_equal(got["end_char"], want["end_char"])
    np.testing.assert_allclose(got["score"], want["score"], atol=1e-5, rtol=0)
    if name == "v2":
      np.testing.assert_array_equal(got["no_answer"], want["no_answer"])
      np.testing.assert_allclose(got["null_score_diff"], want["null_score_diff"],
                                 atol=1e-5, rtol=0)
    _check(got, contexts)


def test_export_matches_in_process_module(served, in_process):
  questions, contexts = [r[1] for r in _rows()], [r[2] for r in _rows()]
  served_equals_in_process(served, in_process, questions, contexts)
  got = _serve(served["v2"], questions, contexts)
  # The batch answers as each question alone.
  alone = _serve(served["v2"], questions[:1], contexts[:1])
  assert alone["answer"][0] == got["answer"][0]


def _rows():
  """12 real (id, question, context) rows of dev.json."""
  return _examples(n_paragraphs=6, per_paragraph=2)[1]


MB = 1 << 20
HOSTILE = [
    ("", ""), ("", "   \t\n "), ("what?", ""), ("", "Some context here."),
    ("\xff\xfe?".encode("latin-1"), b"\xff\xfe bad \xc3 bytes \x80 here"),
    (b"who", b"\xc3\x28\xa0\xa1 caf\xc3\xa9 \xed\xa0\x80 end"),
    ("x" * 5000, "short context"),
    ("what is it?", "word " * (MB // 5)),        # 1 MB, > 100 windows
    ("what is it?", "a" * MB),                    # one 1 MB word: [UNK]
    ("\x00\u200b", "\x00\x01\u200b\ufffd \ufffd"),
    ("why " * (MB // 4), "A 1 MB question, truncated to 16 pieces."),
]


def test_hostile_inputs_through_signature(exports, served):
  questions = [q if isinstance(q, bytes) else q.encode() for q, _ in HOSTILE]
  contexts = [c if isinstance(c, bytes) else c.encode() for _, c in HOSTILE]
  for name in ("v1", "v2"):
    out = _serve(served[name], questions, contexts)
    _check(out, contexts)
    for i in (0, 1, 2, 9):  # no context piece: the defined empty answer
      assert out["answer"][i] == b"" and out["start_char"][i] == out["end_char"][i] == 0
      assert out["score"][i] == -np.inf
      if name == "v2":
        assert out["no_answer"][i] and out["null_score_diff"][i] == np.inf
    # > 100 windows: the answer lies in the first 100 windows (the query
    # takes 5 pieces: windows of 64 - 5 - 3 = 56, step 16).
    limit = (99 * 16 + 56) * 5
    assert out["end_char"][7] <= limit and np.isfinite(out["score"][7])
    # One [UNK] piece: the span, or the nonce when it misses the n-best
    # (v2: or no answer).
    assert out["answer"][8] in (b"", squad_data.NO_SPAN_TEXT.encode(), b"a" * MB)
  # Empty batch, a batch without any window, mismatched batch sizes, other ranks.
  out = _serve(served["v2"], [], [])
  assert out["answer"].shape == (0,) and out["no_answer"].shape == (0,)
  out = _serve(served["v2"], ["", "a"], ["", " \t"])
  assert out["answer"].tolist() == [b"", b""] and out["no_answer"].all()
  with pytest.raises(tf.errors.InvalidArgumentError, match="same number of strings"):
    _serve(served["v1"], ["a", "b"], ["c"])
  questions, contexts = [r[1] for r in _rows()[:4]], [r[2] for r in _rows()[:4]]
  flat = _serve(served["v1"], questions, contexts)
  assert np.isfinite(flat["score"]).all()
  two = _serve(served["v1"], [[q] for q in questions], [[c] for c in contexts])
  for k in flat:
    np.testing.assert_array_equal(two[k], flat[k])
  one = _serve(served["v1"], questions[0], contexts[0])  # scalars: a batch of 1
  assert one["answer"].tolist() == flat["answer"][:1].tolist()


def test_export_rejects_inconsistent_lengths(exports, tmp_path):
  with pytest.raises(ValueError, match="max_query_length"):
    squad.export_squad(exports["model"], VOCAB, True, str(tmp_path / "x"),
                       max_seq_length=64, max_query_length=61)
  with pytest.raises(ValueError, match="doc_stride"):
    squad.export_squad(exports["model"], VOCAB, True, str(tmp_path / "x"),
                       max_seq_length=64, doc_stride=0, max_query_length=16)
  with pytest.raises(FileExistsError):
    squad.export_squad(exports["model"], VOCAB, True, os.path.dirname(exports["v1"]),
                       version=1, **exports["kw"])
  assert not os.path.exists(str(tmp_path / "x"))


# Hypothesis: (question, context) pairs of text from every Unicode category
# but Cs (lone surrogates cannot be UTF-8 encoded), the rare categories drawn
# on purpose (``fuzz_util.unicode_strings``; ``AWKWARD``: one string of each
# kind as an explicit example), or raw bytes; every served output against the
# in-process module. The exports are loaded once per module.


@fuzz_settings(10)
@hypothesis.given(pairs=st.lists(st.tuples(unicode_strings(80), unicode_strings(400)),
                                 min_size=1, max_size=4))
@hypothesis.example(pairs=[(AWKWARD[i - 1], c) for i, c in enumerate(AWKWARD)])
def test_random_unicode_and_bytes_property(served, in_process, pairs):
  served_equals_in_process(served, in_process, [q for q, _ in pairs], [c for _, c in pairs])


@slow_fuzz
@hypothesis.given(pairs=st.lists(st.tuples(unicode_strings(200),
                                           unicode_strings(SLOW_MAX_CHARS)),
                                 min_size=1, max_size=3))
def test_random_unicode_and_bytes_property_200(served, in_process, pairs):
  """200 examples through both signatures (v1, v2); contexts up to 2,000
  characters. One traced reference run per example for both (see
  ``_in_process_answers``): eager runs cost ~7 times a served call."""
  served_equals_in_process(served, in_process, [q for q, _ in pairs],
                           [c for _, c in pairs], one_call=True)


# ------------------------------------------------- outside this process

QUESTIONS = [b"Where is the cafe?", b"", b"\xff who \xc3?", b"What won?"]
CONTEXTS = ["Das Café Müller, eine naïve Façade — in Zürich. ".encode() * 12,
            b"Short one.", b"\xffbad\xc3 bytes", b"  "]


@pytest.mark.slow
def test_fresh_process_and_c_loader(exports, served, tmp_path):
  from test_export import FRESH_PROCESS, _c_op_libraries, _c_serve, _decode, _string_input  # pylint: disable=g-import-not-at-top
  want = {n: _serve(served[n], QUESTIONS, CONTEXTS) for n in ("v1", "v2")}
  jobs = [{"path": exports[n], "signature": "serving_default",
           "inputs": {"question": _string_input(QUESTIONS),
                      "context": _string_input(CONTEXTS)}} for n in ("v1", "v2")]
  spec, out = str(tmp_path / "jobs.json"), str(tmp_path / "fresh.json")
  with open(spec, "w") as f:
    json.dump(jobs, f)
  run_tool(["-c", FRESH_PROCESS, spec, out])
  with open(out) as f:
    fresh = [_decode(r) for r in json.load(f)]
  for got, name in zip(fresh, ("v1", "v2")):
    np.testing.assert_array_equal(got["answer"], want[name]["answer"])
    np.testing.assert_array_equal(got["start_char"], want[name]["start_char"])
    np.testing.assert_allclose(got["score"], want[name]["score"], atol=1e-5)
  assert got["no_answer"].tolist() == want["v2"]["no_answer"].tolist()
  # The C loader (no Python; TF Serving's session loader) on both exports,
  # v2's bool no_answer included.
  exe = compile_c_loader(str(tmp_path))
  for name in ("v1", "v2"):
    got = _c_serve(exe, exports[name], {"question": QUESTIONS, "context": CONTEXTS},
                   _c_op_libraries(exports[name]), str(tmp_path))
    assert set(got) == set(want[name]), name
    np.testing.assert_array_equal(got["answer"], want[name]["answer"])
    np.testing.assert_array_equal(got["start_char"], want[name]["start_char"])
    np.testing.assert_allclose(got["score"], want[name]["score"], atol=1e-5)
    if name == "v2":
      assert set(want["v2"]["no_answer"].tolist()) == {True, False}  # both decisions
      assert got["no_answer"].astype(bool).tolist() == want["v2"]["no_answer"].tolist()
      np.testing.assert_allclose(got["null_score_diff"], want["v2"]["null_score_diff"],
                                 atol=1e-5)
