"""GLUE / XNLI / generic task readers, GLUE metrics, predictions and truncation.

Every task's files are written here in the real GLUE (or XNLI) layout from
real sentences (the bundled movie-review sentences and dialog reply pairs),
then read back: against the ORIGINAL ``run_classifier.py`` processors where
the original has one (CoLA, MRPC, MNLI, XNLI), and against the rows written
for the rest. Metrics are checked against scikit-learn / scipy and against
hand-computed values. Tiny fine-tuning runs (random BERT-Tiny, a few steps)
check eval_results.txt, the best dev model, test_results.tsv and the GLUE
submission files.
"""

import csv
import importlib
import json
import os
import sys
import types

import numpy as np
import pytest

import conftest
import tensorflow as tf

from bert_tf import jobs
from bert_tf.tasks import classification as classifier
from bert_tf import config as config_lib
from bert_tf import distribute
from bert_tf import metrics
from bert_tf import preprocessing
from bert_tf.data import classifier_data as cd
from conftest import DATA, MOVIE_DIR, TINY_CONFIG, VOCAB, run_tool

PAIRS_DIR = os.path.join(DATA, "dialog_reply_pairs")


def _rows(path, every, limit):
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  return rows[::every][:limit]


# Real sentences: (sentence, "0"/"1") and (sentence1, sentence2, "0"/"1").
SINGLES = _rows(os.path.join(MOVIE_DIR, "dev.tsv"), 7, 60)
PAIRS = _rows(os.path.join(PAIRS_DIR, "dev.tsv"), 3, 60)
NLI = ("contradiction", "entailment", "neutral")


def _write(path, lines):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("".join("\t".join(l) + "\n" for l in lines))


def _nli_label(i, row):
  return "entailment" if row[2] == "1" else ("contradiction" if i % 2 else "neutral")


def _score(i, row):
  return "%.3f" % (4.0 * int(row[2]) + (i % 5) * 0.2)


# Each writer puts one task's files under d and returns what the reader must
# give: {split name: (texts_a, texts_b or None, label strings or None, ids)}.
def write_cola(d):
  tr, dv, te = SINGLES[:24], SINGLES[24:36], SINGLES[36:44]
  for name, part in (("train", tr), ("dev", dv)):
    _write(d + "/%s.tsv" % name, [("gj04", l, "" if l == "1" else "*", s)
                                  for s, l in part])
  _write(d + "/test.tsv", [("index", "sentence")] +
         [(str(i), s) for i, (s, _) in enumerate(te)])
  return {"train": ([s for s, _ in tr], None, [l for _, l in tr], None),
          "dev": ([s for s, _ in dv], None, [l for _, l in dv], None),
          "test": ([s for s, _ in te], None, None, [str(i) for i in range(len(te))])}


def write_sst2(d):
  tr, dv, te = SINGLES[:24], SINGLES[24:36], SINGLES[36:44]
  for name, part in (("train", tr), ("dev", dv)):
    _write(d + "/%s.tsv" % name, [("sentence", "label")] + [tuple(r) for r in part])
  _write(d + "/test.tsv", [("index", "sentence")] +
         [(str(100 + i), s) for i, (s, _) in enumerate(te)])
  return {"train": ([s for s, _ in tr], None, [l for _, l in tr], None),
          "dev": ([s for s, _ in dv], None, [l for _, l in dv], None),
          "test": ([s for s, _ in te], None, None,
                   [str(100 + i) for i in range(len(te))])}


def _pair_expect(part, labels=None):
  return ([r[0] for r in part], [r[1] for r in part],
          labels if labels is not None else [r[2] for r in part], None)


def write_mrpc(d):
  tr, dv, te = PAIRS[:24], PAIRS[24:36], PAIRS[36:44]
  head = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")
  for name, part in (("train", tr), ("dev", dv)):
    _write(d + "/%s.tsv" % name, [head] + [(l, str(7 * i), str(7 * i + 1), a, b)
                                          for i, (a, b, l) in enumerate(part)])
  _write(d + "/test.tsv", [("index",) + head[1:]] +
         [(str(i), "1", "2", a, b) for i, (a, b, _) in enumerate(te)])
  return {"train": _pair_expect(tr), "dev": _pair_expect(dv),
          "test": _pair_expect(te, None)[:2] + (None, [str(i) for i in range(8)])}


def write_stsb(d):
  tr, dv, te = PAIRS[:24], PAIRS[24:36], PAIRS[36:44]
  head = ("index", "genre", "filename", "year", "old_index", "source1", "source2",
          "sentence1", "sentence2")
  for name, part in (("train", tr), ("dev", dv)):
    _write(d + "/%s.tsv" % name, [head + ("score",)] + [
        (str(i), "main-captions", "MSRvid", "2012test", "%04d" % i, "none", "none",
         a, b, _score(i, (a, b, l))) for i, (a, b, l) in enumerate(part)])
  _write(d + "/test.tsv", [head] + [
      (str(i), "main-forums", "answers-forums", "2015", "0", "none", "none", a, b)
      for i, (a, b, _) in enumerate(te)])
  return {"train": _pair_expect(tr, [_score(i, r) for i, r in enumerate(tr)]),
          "dev": _pair_expect(dv, [_score(i, r) for i, r in enumerate(dv)]),
          "test": _pair_expect(te)[:2] + (None, [str(i) for i in range(8)])}


def write_qqp(d):
  tr, dv, te = PAIRS[:24], PAIRS[24:36], PAIRS[36:44]
  for name, part in (("train", tr), ("dev", dv)):
    _write(d + "/%s.tsv" % name,
           [("id", "qid1", "qid2", "question1", "question2", "is_duplicate")] +
           [(str(i), str(2 * i), str(2 * i + 1), a, b, l)
            for i, (a, b, l) in enumerate(part)])
  _write(d + "/test.tsv", [("id", "question1", "question2")] +
         [(str(9 + i), a, b) for i, (a, b, _) in enumerate(te)])
  return {"train": _pair_expect(tr), "dev": _pair_expect(dv),
          "test": _pair_expect(te)[:2] + (None, [str(9 + i) for i in range(8)])}


MNLI_HEAD = ("index", "promptID", "pairID", "genre", "sentence1_binary_parse",
             "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
             "sentence1", "sentence2")


def write_mnli(d):
  parts = {"train": PAIRS[:24], "dev": PAIRS[24:32], "dev_mismatched": PAIRS[32:40]}
  out = {}
  for name, part in parts.items():
    labels = [_nli_label(i, r) for i, r in enumerate(part)]
    if name == "train":
      head, extra = MNLI_HEAD + ("label1", "gold_label"), lambda l: (l, l)
    else:
      head = MNLI_HEAD + ("label1", "label2", "label3", "label4", "label5",
                          "gold_label")
      extra = lambda l: (l, "neutral", l, l, "contradiction", l)  # noqa: E731
    fname = {"train": "train", "dev": "dev_matched",
             "dev_mismatched": "dev_mismatched"}[name]
    _write(d + "/%s.tsv" % fname, [head] + [
        (str(i), "31193", "31193n", "government", "( ( a ) b )", "( c )",
         "(ROOT (S a))", "(ROOT (S c))", a, b) + extra(l)
        for i, ((a, b, _), l) in enumerate(zip(part, labels))])
    out[name] = _pair_expect(part, labels)
  for name, part, fname in (("test", PAIRS[40:46], "test_matched"),
                            ("test_mismatched", PAIRS[46:52], "test_mismatched")):
    _write(d + "/%s.tsv" % fname, [MNLI_HEAD] + [
        (str(i), "1", "1n", "slate", "x", "y", "x", "y", a, b)
        for i, (a, b, _) in enumerate(part)])
    out[name] = _pair_expect(part)[:2] + (None, [str(i) for i in range(len(part))])
  return out


def _write_index_pairs(d, labels_of):
  tr, dv, te = PAIRS[:24], PAIRS[24:36], PAIRS[36:44]
  out = {}
  for name, part in (("train", tr), ("dev", dv)):
    labels = [labels_of(r) for r in part]
    _write(d + "/%s.tsv" % name, [("index", "sentence1", "sentence2", "label")] +
           [(str(i), a, b, l) for i, ((a, b, _), l) in enumerate(zip(part, labels))])
    out[name] = _pair_expect(part, labels)
  _write(d + "/test.tsv", [("index", "sentence1", "sentence2")] +
         [(str(i), a, b) for i, (a, b, _) in enumerate(te)])
  out["test"] = _pair_expect(te)[:2] + (None, [str(i) for i in range(8)])
  return out


def write_qnli(d):
  return _write_index_pairs(
      d, lambda r: "entailment" if r[2] == "1" else "not_entailment")


write_rte = write_qnli


def write_wnli(d):
  return _write_index_pairs(d, lambda r: r[2])


XNLI_HEAD = ("language", "gold_label", "sentence1_binary_parse",
             "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
             "sentence1", "sentence2", "promptID", "pairID", "genre")


def write_xnli(d):
  tr = PAIRS[:24]
  raw = ["contradictory" if _nli_label(i, r) == "contradiction" else _nli_label(i, r)
         for i, r in enumerate(tr)]
  _write(d + "/multinli/multinli.train.en.tsv", [("premise", "hypo", "label")] +
         [(a, b, l) for (a, b, _), l in zip(tr, raw)])
  out = {"train": _pair_expect(tr, [l.replace("contradictory", "contradiction")
                                    for l in raw])}
  for name, part in (("dev", PAIRS[24:40]), ("test", PAIRS[40:52])):
    rows, exp = [], ([], [], [], [])
    for i, r in enumerate(part):
      lang = "en" if i % 3 else "de"  # other languages' rows are skipped
      label = _nli_label(i, r)
      rows.append((lang, label, "x", "y", "x", "y", r[0], r[1], str(i), str(i), "fiction"))
      if lang == "en":
        exp[0].append(r[0])
        exp[1].append(r[1])
        exp[2].append(label)
        exp[3].append(str(len(exp[3])))
    _write(d + "/xnli.%s.tsv" % name, [XNLI_HEAD] + rows)
    out[name] = (exp[0], exp[1], exp[2] if name == "dev" else None, exp[3])
  return out


def write_pairs(d):
  tr, dv, te = PAIRS[:24], PAIRS[24:36], PAIRS[36:44]
  out = {}
  for name, part in (("train", tr), ("dev", dv)):
    _write(d + "/%s.tsv" % name, [("sentence1", "sentence2", "label")] +
           [tuple(r) for r in part])
    out[name] = _pair_expect(part)
  _write(d + "/test.tsv", [("index", "sentence1", "sentence2")] +
         [(str(i), a, b) for i, (a, b, _) in enumerate(te)])
  out["test"] = _pair_expect(te)[:2] + (None, [str(i) for i in range(8)])
  return out


def write_csv(d):
  """Generic CSV (quoted fields with commas and quotes); named columns."""
  tr, dv, te = PAIRS[:24], PAIRS[24:36], PAIRS[36:44]
  name = {"0": "random", "1": "reply"}
  os.makedirs(d, exist_ok=True)
  out = {}
  for split, part in (("train", tr), ("dev", dv), ("test", te)):
    with open(d + "/%s.csv" % split, "w", encoding="utf-8", newline="") as f:
      w = csv.writer(f)
      w.writerow(["id", "verdict", "reply", "statement"])
      for i, (a, b, l) in enumerate(part):
        w.writerow(["r%d" % i, name[l], b + ' "quoted", too', a])
    texts_b = [b + ' "quoted", too' for _, b, _ in part]
    out[split] = ([a for a, _, _ in part], texts_b,
                  None if split == "test" else [name[l] for _, _, l in part],
                  ["r%d" % i for i in range(len(part))] if split == "test" else None)
  return out


WRITERS = {"cola": write_cola, "sst-2": write_sst2, "mrpc": write_mrpc,
           "sts-b": write_stsb, "qqp": write_qqp, "mnli": write_mnli,
           "qnli": write_qnli, "rte": write_rte, "wnli": write_wnli,
           "xnli": write_xnli, "pairs": write_pairs}


def _check(task, d, expect):
  splits = (task.train,) + task.dev + task.test
  assert {s.name for s in splits} == set(expect)
  for split in splits:
    ex = cd.read_split(task, cd.split_path(task, d, split), split)
    texts_a, texts_b, labels, ids = expect[split.name]
    assert ex.texts_a == texts_a, split.name
    assert ex.texts_b == texts_b, split.name
    if labels is None:
      assert ex.labels is None
    elif task.is_regression:
      np.testing.assert_allclose(ex.labels, [float(l) for l in labels])
    else:
      assert [task.labels[i] for i in ex.labels] == labels, split.name
    if ids is not None:
      assert ex.ids == ids


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_glue_layouts_read(name, tmp_path):
  task = cd.get_task(name.upper())  # case-insensitive
  assert task.name == name
  _check(task, str(tmp_path), WRITERS[name](str(tmp_path)))


def test_generic_csv_and_tsv(tmp_path):
  d = str(tmp_path)
  expect = write_csv(d)
  task = cd.get_task("CSV", text_a_column="statement", text_b_column="reply",
                     label_column="verdict")
  train = cd.read_split(task, d + "/train.csv", task.train)
  assert train.labels == expect["train"][2]  # raw strings until resolved
  task, train = cd.resolve_labels(task, train)
  assert task.labels == ("random", "reply")  # sorted train labels
  _check(task, d, expect)
  given = cd.get_task("csv", text_a_column="statement", text_b_column="reply",
                      label_column="verdict", labels=["reply", "random"])
  ex = cd.read_split(given, d + "/dev.csv", given.dev[0])
  assert [given.labels[i] for i in ex.labels] == expect["dev"][2]
  # Single-sentence TSV by column names; a label outside --labels names the line.
  _write(d + "/train.tsv", [("label", "text")] + [(l, s) for s, l in SINGLES[:5]])
  tsv = cd.get_task("tsv", text_a_column="text", label_column="label", labels=["0"])
  assert not tsv.is_pair
  with pytest.raises(cd.TaskError, match=r"train.tsv line \d+: label '1'"):
    cd.read_split(tsv, d + "/train.tsv", tsv.train)
  # --labels=0:ham,1:spam names the data's values (issue 70): ids in the
  # pairs' order, the names the task's labels.
  names, aliases = cd.parse_labels("1:spam,0:ham")
  named = cd.get_task("tsv", text_a_column="text", label_column="label", labels=names,
                      label_aliases=aliases)
  ex = cd.read_split(named, d + "/train.tsv", named.train)
  assert named.labels == ("spam", "ham")
  assert [named.labels[i] for i in ex.labels] == [
      {"0": "ham", "1": "spam"}[l] for _, l in SINGLES[:5]]
  sst = cd.get_task("sst-2", label_aliases=cd.parse_labels(["0:negative", "1:positive"])[1])
  assert sst.labels == ("negative", "positive")
  for flag, match in (("0:ham,spam", "is not VALUE:NAME"), ("0:ham,0:spam", "repeated value"),
                      ("0:ham,1:ham", "repeated name"), ("0:", "is not VALUE:NAME")):
    with pytest.raises(cd.TaskError, match=match):
      cd.parse_labels(flag)
  with pytest.raises(cd.TaskError, match="sst-2's labels are 0,1"):
    cd.get_task("sst-2", label_aliases=(("0", "neg"),))
  # The names are the run's labels (classifier_config.json -> id2label, exports).
  _write(d + "/dev.tsv", [("label", "text")] + [(l, s) for s, l in SINGLES[5:9]])
  task = classifier.ClassificationTask(classifier.ClassifierParams(
      task_name="tsv", data_dir=d, output_dir=d + "/run", text_a_column="text",
      label_column="label", labels=("0:ham", "1:spam"), bert_config_file=TINY_CONFIG,
      vocab_file=VOCAB, max_seq_length=16), do_train=True, do_eval=True)
  assert task.run_config()["labels"] == ["ham", "spam"]
  bad = cd.get_task("tsv", text_a_column="sentence", label_column="label")
  with pytest.raises(cd.TaskError, match="line 1: no column 'sentence'"):
    cd.read_split(bad, d + "/train.tsv", bad.train)
  with pytest.raises(cd.TaskError, match="--text_a_column"):
    cd.get_task("tsv", label_column="label")


def test_bad_rows_name_file_and_line(tmp_path):
  d = str(tmp_path)
  write_stsb(d)
  with open(d + "/dev.tsv", "a", encoding="utf-8") as f:
    f.write("\t".join(["99"] + ["x"] * 8 + ["high"]) + "\n")
  task = cd.get_task("sts-b")
  with pytest.raises(cd.TaskError, match=r"dev.tsv line 14: score 'high'"):
    cd.read_split(task, d + "/dev.tsv", task.dev[0])
  write_mnli(d)
  with open(d + "/train.tsv", "a", encoding="utf-8") as f:
    f.write("1\t2\t3\n")
  mnli = cd.get_task("mnli")
  with pytest.raises(cd.TaskError, match=r"train.tsv line 26: expected at least 11"):
    cd.read_split(mnli, d + "/train.tsv", mnli.train)
  # A stray tab in a generic TSV's text: one line naming file and line, not
  # a new label class made of the text's second half.
  _write(d + "/generic.tsv", [("sentence", "label"), ("fine", "1"), ("a\tstray tab", "0")])
  generic = cd.get_task("tsv", text_a_column="sentence", label_column="label")
  with pytest.raises(cd.TaskError, match=r"generic.tsv line 3: 3 tab-separated fields, "
                     r"the header has 2 \(a stray tab"):
    cd.read_split(generic, d + "/generic.tsv", generic.train)
  xnli = cd.get_task("xnli", xnli_language="fr")
  with pytest.raises(cd.TaskError, match="no examples for language 'fr'"):
    write_xnli(d)
    cd.read_split(xnli, d + "/xnli.dev.tsv", xnli.dev[0])
  with pytest.raises(cd.TaskError, match="unknown task 'glue'"):
    cd.get_task("glue")


@pytest.fixture(scope="module")
def original_rc(original_bert):
  """The original ``bert/run_classifier.py`` module.

  Its ``modeling`` / ``optimization`` imports need ``tf.contrib`` (gone in
  TF 2); the processors and ``convert_single_example`` use neither, so they
  are stubbed for the import only and removed again.
  """
  del original_bert
  import bert  # pylint: disable=g-import-not-at-top
  names = ("modeling", "optimization")
  saved = {n: (sys.modules.get("bert." + n), getattr(bert, n, None)) for n in names}
  for n in names:
    sys.modules["bert." + n] = types.ModuleType("bert." + n)
  try:
    rc = importlib.import_module("bert.run_classifier")
  finally:
    for n, (mod, attr) in saved.items():
      if mod is None:
        sys.modules.pop("bert." + n, None)
      else:
        sys.modules["bert." + n] = mod
      if attr is None:
        if hasattr(bert, n):
          delattr(bert, n)
      else:
        setattr(bert, n, attr)
  return rc


@pytest.mark.parametrize("name", ["cola", "mrpc", "mnli", "xnli"])
def test_same_examples_as_original_processors(name, original_rc, tmp_path):
  d = str(tmp_path)
  WRITERS[name](d)
  proc = {"cola": original_rc.ColaProcessor, "mrpc": original_rc.MrpcProcessor,
          "mnli": original_rc.MnliProcessor, "xnli": original_rc.XnliProcessor}[name]()
  proc.language = "en"  # XnliProcessor hard-codes "zh"
  task = cd.get_task(name)
  assert list(task.labels) == proc.get_labels()
  gets = {"train": proc.get_train_examples, "dev": proc.get_dev_examples}
  if name != "xnli":  # the original has no XNLI test reader
    gets["test"] = proc.get_test_examples
  splits = {s.name: s for s in (task.train,) + task.dev + task.test}
  for split_name, get in gets.items():
    want = get(d)
    split = splits[split_name]
    got = cd.read_split(task, cd.split_path(task, d, split), split)
    assert got.texts_a == [e.text_a for e in want]
    assert got.texts_b == (None if name == "cola" else [e.text_b for e in want])
    if split_name != "test":  # the original fills test labels with a dummy
      assert [task.labels[i] for i in got.labels] == [e.label for e in want]


def test_metrics_against_references():
  # Hand-computed: TP=2 FP=1 FN=1 TN=2.
  p, y = [1, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0]
  assert metrics.accuracy(p, y) == pytest.approx(4 / 6)
  assert metrics.f1(p, y) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
  assert metrics.matthews_corrcoef(p, y) == pytest.approx((2 * 2 - 1 * 1) / 9)
  assert metrics.matthews_corrcoef([1, 1, 1], [0, 1, 1]) == 0.0  # undefined -> 0
  assert metrics.f1([0, 0], [0, 0]) == 0.0
  x, z = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
  assert metrics.pearson(x, z) == pytest.approx(0.8)
  assert metrics.spearman(x, z) == pytest.approx(0.8)
  np.testing.assert_allclose(metrics.rankdata([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
  assert metrics.spearman([1, 2, 3], [1, 4, 9]) == pytest.approx(1.0)
  assert np.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))
  got = metrics.compute("acc_and_f1", p, y)
  assert got["acc_and_f1"] == pytest.approx((4 / 6 + 4 / 6) / 2)
  assert set(metrics.compute("pearson_and_spearman", x, z)) == {
      "pearson", "spearmanr", "corr"}
  with pytest.raises(ValueError, match="same length"):
    metrics.accuracy([1, 0], [1])

  sk = conftest.require("sklearn.metrics")
  stats = conftest.require("scipy.stats")
  rng = np.random.RandomState(7)
  for n in (3, 40, 500):
    y2, p2 = rng.randint(0, 2, n), rng.randint(0, 2, n)
    y3, p3 = rng.randint(0, 3, n), rng.randint(0, 3, n)
    assert metrics.f1(p2, y2) == pytest.approx(sk.f1_score(y2, p2, zero_division=0))
    assert metrics.matthews_corrcoef(p2, y2) == pytest.approx(
        sk.matthews_corrcoef(y2, p2), abs=1e-12)
    assert metrics.matthews_corrcoef(p3, y3) == pytest.approx(
        sk.matthews_corrcoef(y3, p3), abs=1e-12)
    assert metrics.accuracy(p3, y3) == pytest.approx(sk.accuracy_score(y3, p3))
    s = np.round(rng.uniform(0, 5, n), 1)  # ties, as STS-B scores have
    t = np.round(s + rng.normal(0, 1, n))
    assert metrics.pearson(t, s) == pytest.approx(stats.pearsonr(t, s)[0], abs=1e-12)
    assert metrics.spearman(t, s) == pytest.approx(stats.spearmanr(t, s)[0], abs=1e-12)


def test_truncation_and_packing_match_original(original_rc):
  """BertPreprocessor == original convert_single_example (truncation binds)."""
  from bert import tokenization as orig_tok  # pylint: disable=g-import-not-at-top
  tok = orig_tok.FullTokenizer(VOCAB, do_lower_case=True)
  pairs = _rows(os.path.join(PAIRS_DIR, "train.tsv"), 11, 150)
  lens = [(len(tok.tokenize(a)), len(tok.tokenize(b))) for a, b, _ in pairs]
  pairs = [r for r, (la, lb) in zip(pairs, lens) if la and lb]
  lens = [l for l in lens if l[0] and l[1]]
  trimmed = ties = 0
  for msl in (9, 16):
    pre = preprocessing.BertPreprocessor(VOCAB, True, msl)
    cases = [([r[0] for r in pairs], [r[1] for r in pairs])]
    if msl == 9:
      cases.append(([s for s, _ in SINGLES], None))
    for a, b in cases:
      got = {k: v.numpy() for k, v in pre(
          tf.constant(a), None if b is None else tf.constant(b)).items()}
      for i in range(len(a)):
        ex = original_rc.InputExample("x", a[i], None if b is None else b[i], "0")
        f = original_rc.convert_single_example(10, ex, ["0"], msl, tok)
        for key in ("input_ids", "input_mask", "segment_ids"):
          assert list(got[key][i]) == getattr(f, key), (msl, a[i], key)
    # Pairs over the budget; and of those, ones that reach a tie while
    # trimming (both longer than half the budget), where b must lose first.
    budget = msl - 3
    trimmed += sum(la + lb > budget for la, lb in lens)
    ties += sum(min(la, lb) >= budget // 2 + 1 for la, lb in lens)
  assert trimmed > 100 and ties > 40, (trimmed, ties)  # truncation really binds
  # Fine-tuning batches are this preprocessor's output (trimmed to the longest).
  pre = preprocessing.BertPreprocessor(VOCAB, True, 24)
  a, b = [r[0] for r in pairs[:8]], [r[1] for r in pairs[:8]]
  feats = next(iter(cd.examples_dataset(pre, a, b, None, 8)))
  want = preprocessing.trim_to_longest(pre(tf.constant(a), tf.constant(b)))
  for key in want:
    np.testing.assert_array_equal(feats[key].numpy(), want[key].numpy())


def STRATEGY():  # pylint: disable=invalid-name
  return distribute.get_strategy("one_device")


def _params(task_name, d, out, **kw):
  base = dict(task_name=task_name, data_dir=d, output_dir=out,
              vocab_file=VOCAB, bert_config_file=TINY_CONFIG, max_seq_length=32,
              train_batch_size=8, eval_batch_size=16, predict_batch_size=16,
              learning_rate=1e-3, num_train_epochs=2, iterations_per_loop=3,
              bucket_by_length=False)
  base.update(kw)
  return classifier.ClassifierParams(**base)


def _eval_results(out):
  with open(os.path.join(out, "eval_results.txt")) as f:
    return dict(l.split(" = ") for l in f.read().splitlines())


def _tsv(path):
  with open(path, encoding="utf-8") as f:
    return [l.split("\t") for l in f.read().splitlines()]


def _dev_rows_as_test(src, dst, num_columns):
  """Writes the first ``num_columns`` columns of a dev TSV (header and rows)
  as the test file: the test predictions are then of the dev rows, whose
  gold labels the test knows."""
  _write(dst, [row[:num_columns] for row in _tsv(src)])


def _recompute_eval(out, results, gold, results_file="test_results.tsv",
                    submission=None, prefix="eval_"):
  """Every ``<prefix>*`` value of ``results`` recomputed by scikit-learn /
  scipy from the prediction files the run wrote for the same rows.

  Args:
    out: the run's output directory (its classifier_config.json gives the
      label order of the probability columns).
    results: an eval_results.txt as a dict (the one of the model that
      predicted: best/eval_results.txt).
    gold: the rows' gold label strings (or scores), as the test wrote them.
    results_file: the probabilities (or scores) file, one line per row.
    submission: the GLUE submission file of the same rows (label names).
    prefix: ``eval_`` or ``eval_mismatched_``.
  """
  sk = conftest.require("sklearn.metrics")
  stats = conftest.require("scipy.stats")
  run = json.load(open(os.path.join(out, classifier.RUN_CONFIG)))
  # float32 values printed shortest-repr: read back as float32 they are exact.
  rows = np.array(_tsv(os.path.join(out, results_file)), np.float32).astype(np.float64)
  assert len(rows) == len(gold)
  if run["is_regression"]:
    pred, y = rows[:, 0], np.array(gold, np.float64)
    want = {"loss": sk.mean_squared_error(y, pred),
            "pearson": stats.pearsonr(pred, y)[0],
            "spearmanr": stats.spearmanr(pred, y)[0]}
    want["corr"] = (want["pearson"] + want["spearmanr"]) / 2
    if submission:
      sub = _tsv(os.path.join(out, submission))[1:]
      np.testing.assert_allclose([float(r[1]) for r in sub], pred, atol=5e-4)
  else:
    labels = run["labels"]
    names = [labels[i] for i in rows.argmax(1)]
    if submission:
      assert [r[1] for r in _tsv(os.path.join(out, submission))[1:]] == names
    probs = rows / rows.sum(1, keepdims=True)  # float32 text: sums 1 +- 1e-7
    want = {"loss": sk.log_loss([labels.index(g) for g in gold], probs,
                                labels=list(range(len(labels)))),
            "accuracy": sk.accuracy_score(gold, names)}
    if prefix + "f1" in results:  # MRPC, QQP: F1 of the positive class "1"
      want["f1"] = sk.f1_score(gold, names, pos_label=labels[1], zero_division=0)
      want["acc_and_f1"] = (want["accuracy"] + want["f1"]) / 2
    if prefix + "mcc" in results:
      want["mcc"] = sk.matthews_corrcoef(gold, names)
  other = "eval_mismatched_" if prefix == "eval_" else None
  reported = {k[len(prefix):] for k in results
              if k.startswith(prefix) and not (other and k.startswith(other))}
  assert reported == set(want), (reported, sorted(want))  # every value checked
  for k, v in want.items():
    assert float(results[prefix + k]) == pytest.approx(v, rel=1e-5, abs=1e-6), k
  return want


def _reload(out, sub=""):
  """The fine-tuned model rebuilt from a checkpoint dir (latest or best/)."""
  d = os.path.join(out, sub)
  run = json.load(open(os.path.join(d, classifier.RUN_CONFIG)))
  cfg = config_lib.BertConfig.from_json_file(os.path.join(d, "bert_config.json"))
  model = classifier.build_classifier(cfg, 1 if run["is_regression"] else
                                      len(run["labels"]))
  tf.train.Checkpoint(model=model).read(tf.train.latest_checkpoint(d)).expect_partial()
  pre = preprocessing.BertPreprocessor(os.path.join(d, "vocab.txt"),
                                       run["do_lower_case"], run["max_seq_length"])
  return model, pre, run


@pytest.mark.slow
def test_pair_task_train_eval_predict_best(tmp_path):
  """MRPC: 2 epochs with dev eval after each, best/ kept, predictions from it."""
  d, out = str(tmp_path / "mrpc"), str(tmp_path / "out")
  expect = write_mrpc(d)
  lines = []
  res = jobs.run_classifier(_params("MRPC", d, out), STRATEGY(),
                                  do_train=True, do_eval=True, do_predict=True,
                                  print_fn=lines.append)
  ev = _eval_results(out)
  best = json.load(open(os.path.join(out, "best", "best.json")))
  assert best["metric"] == "acc_and_f1" and best["step"] in (3, 6)
  # (A line points at best/ when the best model is step 3's.)
  assert set(ev) == {"eval_accuracy", "eval_f1", "eval_acc_and_f1", "eval_loss",
                     "global_step"} | ({"best_model"} if best["step"] == 3 else set())
  assert ev["global_step"] == "6"  # 24 examples / 8 * 2 epochs
  assert sum("dev (12 examples)" in l for l in lines) == 2  # after each epoch
  assert res["best_step"] == best["step"]
  assert any("using the best dev model" in l for l in lines)
  # test_results.tsv: one line of 2 probabilities per test row, no header.
  probs = np.array(_tsv(os.path.join(out, "test_results.tsv")), np.float64)
  assert probs.shape == (8, 2)
  np.testing.assert_allclose(probs.sum(1), 1, atol=1e-5)
  # ... from the best model (rebuilt from best/ alone).
  model, pre, run = _reload(out, "best")
  assert run["labels"] == ["0", "1"] and run["is_regression"] is False
  # The length report: printed once per split, recorded in the settings file.
  (train_line,) = [l for l in lines if l.startswith("train: ")]
  (dev_line,) = [l for l in lines if l.startswith("dev: ")]
  assert " of 24 examples (" in train_line and " of 12 examples (" in dev_line
  assert "--max_seq_length=%d" % run["max_seq_length"] in train_line
  assert run["lengths"]["train"]["examples"] == 24
  assert train_line.startswith("train: %d of 24" % run["lengths"]["train"]["truncated"])
  assert run["lengths"]["dev"]["max"] >= run["lengths"]["dev"]["p90"] >= run["lengths"]["dev"]["p50"] > 3
  texts_a, texts_b = expect["test"][:2]
  want = tf.nn.softmax(model(preprocessing.trim_to_longest(
      pre(tf.constant(texts_a), tf.constant(texts_b))))).numpy()
  np.testing.assert_allclose(probs, want, atol=1e-5)
  sub = _tsv(os.path.join(out, "MRPC.tsv"))
  assert sub[0] == ["index", "prediction"]
  assert [r[0] for r in sub[1:]] == [str(i) for i in range(8)]
  assert [r[1] for r in sub[1:]] == [str(i) for i in probs.argmax(1)]
  assert not [f for f in os.listdir(out) if f.endswith(".tmp") or f.endswith(".old")]


@pytest.mark.slow
def test_stsb_regression(tmp_path):
  """STS-B: the reported dev numbers are those of the model's predictions
  (test.tsv holds the dev rows: scipy / scikit-learn recompute them from
  test_results.tsv), and those predictions are the saved model's."""
  d, out = str(tmp_path / "stsb"), str(tmp_path / "out")
  expect = write_stsb(d)
  _dev_rows_as_test(d + "/dev.tsv", d + "/test.tsv", 9)  # all but "score"
  jobs.run_classifier(_params("sts-b", d, out, num_train_epochs=1),
                            STRATEGY(), do_train=True,
                            do_eval=True, do_predict=True, print_fn=lambda s: None)
  ev = _eval_results(out)
  assert set(ev) == {"eval_pearson", "eval_spearmanr", "eval_corr", "eval_loss",
                     "global_step"}
  assert _eval_results(os.path.join(out, "best")) == ev  # one eval: best = last
  scores = expect["dev"][2]
  _recompute_eval(out, ev, [float(s) for s in scores], submission="STS-B.tsv")
  # The file's scores are the model's: recompute from the checkpoint.
  model, pre, run = _reload(out)
  assert run["is_regression"] is True and run["labels"] == []
  task = cd.get_task("sts-b")
  dev = cd.read_split(task, d + "/dev.tsv", task.dev[0])
  pred = classifier.predict_logits(model, classifier.eval_dataset(pre, task, dev, 16))
  assert pred.shape == (12, 1)
  test = _tsv(os.path.join(out, "test_results.tsv"))
  assert len(test) == 12 and all(len(r) == 1 for r in test)
  np.testing.assert_allclose([float(r[0]) for r in test], pred[:, 0], atol=1e-5)
  sub = _tsv(os.path.join(out, "STS-B.tsv"))
  assert sub[0] == ["index", "prediction"] and len(sub) == 13


@pytest.mark.slow
def test_generic_csv_end_to_end(tmp_path):
  d, out = str(tmp_path / "csv"), str(tmp_path / "out")
  expect = write_csv(d)
  # test.csv = the dev rows (ids r0..r11): its predictions are of dev rows.
  with open(d + "/dev.csv", "rb") as f:
    open(d + "/test.csv", "wb").write(f.read())
  params = _params("csv", d, out, num_train_epochs=1, text_a_column="statement",
                   text_b_column="reply", label_column="verdict")
  jobs.run_classifier(params, STRATEGY(), do_train=True,
                            do_eval=True, do_predict=True, print_fn=lambda s: None)
  ev = _eval_results(out)
  assert set(ev) == {"eval_accuracy", "eval_loss", "global_step"}
  assert _eval_results(os.path.join(out, "best")) == ev  # one eval: best = last
  run = json.load(open(os.path.join(out, classifier.RUN_CONFIG)))
  assert run["labels"] == ["random", "reply"] and run["is_pair"] is True
  assert np.array(_tsv(os.path.join(out, "test_results.tsv")), float).shape == (12, 2)
  _recompute_eval(out, ev, expect["dev"][2], submission="csv.tsv")
  sub = _tsv(os.path.join(out, "csv.tsv"))
  assert [r[0] for r in sub[1:]] == ["r%d" % i for i in range(12)]
  # Predict-only later: labels come from the run's classifier_config.json.
  params.labels = None
  res = jobs.run_classifier(params, STRATEGY(),
                                  do_train=False, do_eval=False, do_predict=True,
                                  print_fn=lambda s: None)
  assert res["best_step"] == 3


@pytest.mark.slow
def test_mnli_cli(tmp_path):
  """The CLI: MNLI matched + mismatched dev and test, submission files."""
  d, out = str(tmp_path / "mnli"), str(tmp_path / "out")
  expect = write_mnli(d)
  # The test files hold the dev rows (MNLI's 10 test columns): scikit-learn
  # recomputes both dev results from the written predictions.
  for dev, test in (("dev_matched", "test_matched"), ("dev_mismatched", "test_mismatched")):
    _dev_rows_as_test("%s/%s.tsv" % (d, dev), "%s/%s.tsv" % (d, test), len(MNLI_HEAD))
  p = run_tool(["tools/run_classifier.py", "--task_name=MNLI", "--do_train",
                "--do_eval", "--do_predict", "--data_dir=" + d, "--vocab_file=" + VOCAB,
                "--bert_config_file=" + TINY_CONFIG, "--max_seq_length=32",
                "--train_batch_size=8", "--num_train_epochs=1",
                "--output_dir=" + out])
  assert "using the best dev model" in p.stdout
  ev = _eval_results(out)
  assert set(ev) == {"eval_accuracy", "eval_loss", "eval_mismatched_accuracy",
                     "eval_mismatched_loss", "global_step"}
  assert _eval_results(os.path.join(out, "best")) == ev  # one eval: best = last
  for results, sub, dev, prefix in (
      ("test_results.tsv", "MNLI-m.tsv", "dev", "eval_"),
      ("test_results_mismatched.tsv", "MNLI-mm.tsv", "dev_mismatched", "eval_mismatched_")):
    assert np.array(_tsv(os.path.join(out, results)), float).shape == (8, 3)
    rows = _tsv(os.path.join(out, sub))
    assert rows[0] == ["index", "prediction"] and len(rows) == 9
    assert {r[1] for r in rows[1:]} <= set(NLI)
    _recompute_eval(out, ev, expect[dev][2], results, sub, prefix)


def test_tfds_glue_on_disk(tmp_path, monkeypatch):
  """glue/sst2 prepared from local GLUE files (no network), read with no download."""
  tfds = conftest.require("tensorflow_datasets")
  task = cd.get_task("sst-2")
  with pytest.raises(cd.TaskError, match="not prepared in --tfds_data_dir=%s" %
                     str(tmp_path / "empty")):
    cd.read_tfds_split(task, "glue/sst2", str(tmp_path / "empty"), task.train)
  glue = tmp_path / "glue_zip"
  expect = write_sst2(str(glue / "SST-2"))
  monkeypatch.setattr(tfds.download.DownloadManager, "download_and_extract",
                      lambda self, url: str(glue))
  data_dir = str(tmp_path / "tfds")
  builder = tfds.builder("glue/sst2", data_dir=data_dir)
  # No registered checksums to look up (finding them needs importlib_resources,
  # which the runtime requirements lack; reading does not need it).
  base = tfds.core.DatasetBuilder
  code_path = base.__dict__["code_path"]
  base.code_path = None
  try:
    builder.download_and_prepare(download_dir=str(tmp_path / "dl"))
  finally:
    base.code_path = code_path
    monkeypatch.undo()
  for split in (task.train,) + task.dev + task.test:
    got = cd.read_tfds_split(task, "glue/sst2", data_dir, split)
    texts_a, _, labels, _ = expect[split.name]
    order = np.argsort([int(i) for i in got.ids])  # tfds idx = row number
    assert [got.texts_a[i] for i in order] == texts_a
    if labels is None:
      assert got.labels is None
    else:
      assert [task.labels[got.labels[i]] for i in order] == labels
