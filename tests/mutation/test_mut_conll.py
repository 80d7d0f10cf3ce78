"""bert_tf.data.conll against seqeval 1.2.2 and hand-made files (TF-free).

Chunk rules compared with seqeval's ``end_of_chunk`` / ``start_of_chunk`` on
every tag/type pair and its ``get_entities`` on every tag sequence of up to
three tags (plus seeded random longer ones); scores with seqeval's
precision / recall / F1 / accuracy / ``classification_report``; the reader,
writer and report on small files whose expected content is written out here,
errors word for word.
"""

import itertools
import os
import random
import warnings

import pytest
from seqeval import metrics as sq
from seqeval.metrics import sequence_labeling as sl

from bert_tf import errors
from bert_tf.data import conll

ALPHABET = ["O", "B-A", "I-A", "E-A", "S-A", "B-B", "I-B", "E-B", "S-B", ".", "B",
            "I-A-x"]


def test_chunk_rules_equal_seqeval_on_every_pair():
  tags = ["O", "B", "I", "E", "S", ".", "X"]
  for prev_tag, tag, prev_type, type_ in itertools.product(tags, tags, "AB", "AB"):
    args = (prev_tag, tag, prev_type, type_)
    assert conll._end_of_chunk(*args) == sl.end_of_chunk(*args), args  # pylint: disable=protected-access
    assert conll._start_of_chunk(*args) == sl.start_of_chunk(*args), args  # pylint: disable=protected-access


def test_get_entities_equal_seqeval():
  warnings.simplefilter("ignore")  # seqeval warns on "." and "B"
  seqs = [list(s) for n in range(4) for s in itertools.product(ALPHABET, repeat=n)]
  rng = random.Random(5)
  seqs += [[rng.choice(ALPHABET) for _ in range(rng.randint(4, 12))] for _ in range(1500)]
  for s in seqs:
    assert conll.get_entities(s) == sl.get_entities(s), s
  assert conll.get_entities(("B-PER", "I-PER")) == [("PER", 0, 1)]  # any sequence


def test_split_and_valid_tag():
  assert conll.split_tag("B-geo-loc") == ("B", "geo-loc")
  assert conll.split_tag("O") == ("O", "_")
  assert conll.split_tag("I-PER") == ("I", "PER")
  assert conll.split_tag("S") == ("S", "_")
  assert conll.split_tag("") == ("", "_")
  for tag in ("O", "B-X", "I-PER", "E-geo-loc", "S-x"):
    assert conll.valid_tag(tag), tag
  for tag in ("", "o", "B-", "B", "X-PER", "BXPER", "B_PER", "-B-X", "OO"):
    assert not conll.valid_tag(tag), tag


def test_detect_scheme():
  assert conll.detect_scheme([]) == "IOB2"
  assert conll.detect_scheme(["O", "B-A", "I-A", "O", "B-B"]) == "IOB2"
  assert conll.detect_scheme(["B-A", "I-A", "I-A", "B-A", "I-A"]) == "IOB2"
  assert conll.detect_scheme(["I-A"]) == "IOB1"  # at the start
  assert conll.detect_scheme(["B-A", "O", "I-A"]) == "IOB1"  # after O
  assert conll.detect_scheme(["B-A", "I-B"]) == "IOB1"  # after another type
  assert conll.detect_scheme(["B-A", "I-A", "I-B"]) == "IOB1"
  assert conll.detect_scheme(["O", "O", "B-A", "S-A"]) == "IOBES"
  assert conll.detect_scheme(["B-A", "E-A"]) == "IOBES"
  assert conll.detect_scheme(["I-A", "E-A"]) == "IOBES"  # E/S wins over IOB1


def _random_tags(rng, n, prefixes):
  return [rng.choice(["O", "O"] + ["%s-%s" % (p, t) for p in prefixes
                                   for t in ("PER", "LOC", "geo-loc")])
          for _ in range(n)]


@pytest.mark.parametrize("prefixes", ["BI", "BIES"])
def test_entity_scores_equal_seqeval(prefixes):
  warnings.simplefilter("ignore")  # seqeval warns on 0/0
  rng = random.Random(len(prefixes))
  for _ in range(60):
    true = [_random_tags(rng, rng.randint(1, 9), prefixes) for _ in range(rng.randint(1, 6))]
    pred = [[t if rng.random() < 0.7 else rng.choice(_random_tags(rng, 1, prefixes))
             for t in s] for s in true]
    got = conll.entity_scores(true, pred)
    assert got["precision"] == sq.precision_score(true, pred)
    assert got["recall"] == sq.recall_score(true, pred)
    assert got["f1"] == sq.f1_score(true, pred)
    assert got["accuracy"] == sq.accuracy_score(true, pred)
    t_ents = {(k,) + e for k, s in enumerate(true) for e in sl.get_entities(s)}
    p_ents = {(k,) + e for k, s in enumerate(pred) for e in sl.get_entities(s)}
    assert (got["true"], got["predicted"], got["correct"]) == (
        len(t_ents), len(p_ents), len(t_ents & p_ents))
    report = sq.classification_report(true, pred, output_dict=True)
    types = sorted({e[1] for e in t_ents | p_ents})
    assert list(got["per_type"]) == types
    for ty, s in got["per_type"].items():
      r = report[ty]
      assert (s["precision"], s["recall"], s["f1"], s["support"]) == (
          r["precision"], r["recall"], r["f1-score"], r["support"]), ty
      assert s["predicted"] == sum(e[1] == ty for e in p_ents)
      assert s["correct"] == sum(e[1] == ty for e in t_ents & p_ents)


def test_entity_scores_hand_counts_and_zeros():
  true = [["B-PER", "I-PER", "O", "B-LOC"], ["S-ORG"]]
  pred = [["B-PER", "I-PER", "O", "O"], ["B-LOC"]]
  got = conll.entity_scores(true, pred)
  assert got == {
      "precision": 0.5, "recall": 1 / 3, "f1": pytest.approx(0.4), "true": 3,
      "predicted": 2, "correct": 1, "accuracy": 0.6,
      "per_type": {
          "LOC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1,
                  "predicted": 1, "correct": 0},
          "ORG": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1,
                  "predicted": 0, "correct": 0},
          "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1,
                  "predicted": 1, "correct": 1}}}
  # Only O predicted: precision 0 (0/0), recall 0, F1 0.
  none = conll.entity_scores([["B-A", "O"]], [["O", "O"]])
  assert (none["precision"], none["recall"], none["f1"], none["accuracy"]) == (
      0.0, 0.0, 0.0, 0.5)
  # Nothing true: recall 0/0 = 0.
  extra = conll.entity_scores([["O"]], [["S-A"]])
  assert (extra["precision"], extra["recall"], extra["f1"]) == (0.0, 0.0, 0.0)
  empty = conll.entity_scores([], [])
  assert empty == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "true": 0,
                   "predicted": 0, "correct": 0, "accuracy": 0.0, "per_type": {}}
  assert conll.entity_scores([[]], [[]])["accuracy"] == 0.0
  # Same spans in different sentences are different entities.
  two = conll.entity_scores([["S-A"], ["O"]], [["O"], ["S-A"]])
  assert (two["true"], two["predicted"], two["correct"]) == (1, 1, 0)
  with pytest.raises(ValueError) as e:
    conll.entity_scores([["O"]], [["O"], ["O"]])
  assert str(e.value) == "1 true sentences, 2 predicted"
  with pytest.raises(ValueError) as e:
    conll.entity_scores([["O"], ["O", "O"]], [["O"], ["O"]])
  assert str(e.value) == "sentence 1: 2 true tags, 1 predicted"


def test_format_report():
  scores = conll.entity_scores([["B-PER", "I-PER", "O", "B-LOC"], ["S-ORG"]],
                               [["B-PER", "I-PER", "O", "O"], ["B-LOC"]])
  assert conll.format_report(scores) == (
      "accuracy:  60.00%; precision:  50.00%; recall:  33.33%; FB1:  40.00  "
      "(3 true, 2 found, 1 correct entities)\n"
      "type  precision  recall     FB1  support  found\n"
      " LOC      0.00%    0.00%    0.00        1      1\n"
      " ORG      0.00%    0.00%    0.00        1      0\n"
      " PER    100.00%  100.00%  100.00        1      1\n")
  wide = conll.format_report(conll.entity_scores([["S-geo-loc"]], [["S-geo-loc"]]))
  assert wide.splitlines()[1:] == [
      "   type  precision  recall     FB1  support  found",
      "geo-loc    100.00%  100.00%  100.00        1      1"]


def write(path, text, encoding="utf-8"):
  with open(path, "w", encoding=encoding, newline="") as f:
    f.write(text)
  return str(path)


def test_read_two_columns(tmp_path):
  path = write(tmp_path / "a.txt",
               "-DOCSTART-\tO\n\nEmpire\tB-fac\n State \t I-fac\r\nis\tO\n\n\n"
               "-DOCSTART-\tO\nParis\tS-loc\n\nok\tO")
  got = conll.read_conll(path)
  assert [(s.words, s.tags, s.lines) for s in got] == [
      (["Empire", "State", "is"], ["B-fac", "I-fac", "O"], [3, 4, 5]),
      (["Paris"], ["S-loc"], [9]),
      (["ok"], ["O"], [11])]
  assert [s.line for s in got] == [3, 9, 11]
  assert got[0].text == "Empire State is"
  assert conll.Sentence([], None, []).line == 0
  assert conll.read_conll(path, labels=["O", "B-fac", "I-fac", "S-loc"]) == got
  assert conll.read_conll(path, limit=2) == got[:2]
  assert conll.read_conll(path, limit=1) == got[:1]
  assert conll.read_conll(path, limit=3) == got
  assert conll.read_conll(path, with_tags=False) == got  # tags still read
  assert conll.read_conll(write(tmp_path / "e.txt", "\n\n-DOCSTART- -X- O O\n\n")) == []


def test_read_four_columns_and_tokens_only(tmp_path):
  path = write(tmp_path / "b.txt", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
               "Peter NNP B-NP B-PER\n")
  got = conll.read_conll(path, limit=5)
  assert [(s.words, s.tags, s.lines) for s in got] == [
      (["EU", "rejects"], ["B-ORG", "O"], [1, 2]), (["Peter"], ["B-PER"], [4])]
  path = write(tmp_path / "c.txt", "Paris\nis\n\n\nnice\n")
  got = conll.read_conll(path, with_tags=False)
  assert [(s.words, s.tags, s.lines) for s in got] == [
      (["Paris", "is"], None, [1, 2]), (["nice"], None, [5])]
  # limit stops reading: a bad line after the limit is never seen.
  path = write(tmp_path / "d.txt", "a\tO\n\nb\tO\n\nc\tbad\n")
  assert [s.words for s in conll.read_conll(path, limit=2)] == [["a"], ["b"]]


def _error(path, **kwargs):
  with pytest.raises(errors.InputError) as e:
    conll.read_conll(path, argument="dev_file", **kwargs)
  assert e.value.argument == "dev_file"
  return str(e.value)


def test_read_errors_name_file_and_line(tmp_path):
  missing = str(tmp_path / "none.txt")
  assert _error(missing) == "%r does not exist" % missing
  assert _error(str(tmp_path)) == "%r does not exist" % str(tmp_path)
  p = write(tmp_path / "three.txt", "\na\tB-X\tO\n")
  assert _error(p) == ("%s:2: 3 columns; expected token<TAB>tag (2) or the CoNLL-2003 "
                       "layout word POS chunk NER (4)" % p)
  assert _error(p, with_tags=False) == (
      "%s:2: 3 columns; expected token<TAB>tag (2) or the CoNLL-2003 layout word POS "
      "chunk NER (4), or tokens only (1)" % p)
  p = write(tmp_path / "one.txt", "Paris\n")
  assert _error(p) == ("%s:1: 1 columns; expected token<TAB>tag (2) or the CoNLL-2003 "
                       "layout word POS chunk NER (4)" % p)
  p = write(tmp_path / "change.txt", "a\tO\n\nb x y z\n")
  assert _error(p) == "%s:3: 4 columns, the file's first token line (line 1) has 2" % p
  p = write(tmp_path / "space.txt", "a\tO\nNew York\tB-LOC\n")
  assert _error(p) == ("%s:2: token 'New York' is empty or holds whitespace (one word "
                       "per line)" % p)
  p = write(tmp_path / "empty.txt", "a\tO\n\tO\n")
  assert _error(p) == "%s:2: token '' is empty or holds whitespace (one word per line)" % p
  p = write(tmp_path / "tag.txt", "a\tO\nb\tPER\n")
  assert _error(p) == ("%s:2: tag 'PER' is not O or B-/I-/E-/S-TYPE (IOB1, IOB2, "
                       "IOBES)" % p)
  p = write(tmp_path / "labels.txt", "a\tO\nb\tB-LOC\n")
  assert _error(p, labels=["O", "B-PER", "I-PER"]) == (
      "%s:2: tag 'B-LOC' is not one of the 3 labels (B-PER I-PER O)" % p)
  p = tmp_path / "latin1.txt"
  p.write_bytes(b"a\tO\nb\tO\ncaf\xe9\tO\n")
  msg = _error(str(p))
  assert msg.startswith("%s:" % p) and ": not UTF-8: " in msg, msg
  assert isinstance(_exc(str(p)).__cause__, UnicodeDecodeError)


def _exc(path):
  with pytest.raises(errors.InputError) as e:
    conll.read_conll(path)
  return e.value


def test_labels():
  sents = [conll.Sentence(["a", "b"], ["B-X", "I-X"], [1, 2]),
           conll.Sentence(["c"], None, [4]), conll.Sentence(["d"], ["S-A"], [6])]
  assert conll.label_list_from(sents) == ["B-X", "I-X", "O", "S-A"]
  assert conll.label_list_from([]) == ["O"]
  assert conll.check_label_list((" O", "B-PER ", "I-PER")) == ["O", "B-PER", "I-PER"]
  for labels, msg in ((["O", "PER"], "label 'PER' is not O or B-/I-/E-/S-TYPE"),
                      (["O", "B-PER", "O"], "repeated labels in O,B-PER,O"),
                      (["B-PER"], "the labels need 'O'")):
    with pytest.raises(errors.InputError) as e:
      conll.check_label_list(labels, argument="label_list")
    assert str(e.value) == msg and e.value.argument == "label_list"


def test_write_conll(tmp_path):
  src = conll.read_conll(write(tmp_path / "d.txt", "a\tB-PER\nb\tO\n\nc\tO\n"))
  out = str(tmp_path / "sub" / "p.txt")
  assert conll.write_conll(out, src, [["B-PER", "I-PER"], ["S-X"]]) == out
  with open(out, encoding="utf-8") as f:
    assert f.read() == "a\tB-PER\tB-PER\nb\tO\tI-PER\n\nc\tO\tS-X\n\n"
  bare = [conll.Sentence(s.words, None, s.lines) for s in src]
  out2 = conll.write_conll(str(tmp_path / "q.txt"), bare, [["B-PER", "O"], ["O"]])
  with open(out2, encoding="utf-8") as f:
    assert f.read() == "a\tB-PER\nb\tO\n\nc\tO\n\n"
  again = conll.read_conll(out2)
  assert [(s.words, s.tags) for s in again] == [(["a", "b"], ["B-PER", "O"]), (["c"], ["O"])]
  with pytest.raises(ValueError) as e:
    conll.write_conll(str(tmp_path / "r.txt"), src, [["O"], ["O"]])
  assert str(e.value) == "sentence 0: 2 words, 1 predicted tags"
  assert not os.path.exists(tmp_path / "r.txt")


def test_read_edge_layouts(tmp_path):
  # A tag ending in X (or a word ending in \r-like letters) is read whole.
  p = write(tmp_path / "x.txt", "FOX\tB-TAX\r\nNEXT\tI-TAX\n")
  (s,) = conll.read_conll(p)
  assert (s.words, s.tags) == (["FOX", "NEXT"], ["B-TAX", "I-TAX"])
  # Four columns are read without with_tags too (tags kept).
  p = write(tmp_path / "four.txt", "EU NNP B-NP B-ORG\n")
  (s,) = conll.read_conll(p, with_tags=False)
  assert (s.words, s.tags) == (["EU"], ["B-ORG"])
  # A line holding a TAB is split on TABs: a trailing TAB is an empty column.
  p = write(tmp_path / "tab.txt", "a\tB-X\t\n")
  assert _error(p) == ("%s:1: 3 columns; expected token<TAB>tag (2) or the CoNLL-2003 "
                       "layout word POS chunk NER (4)" % p)
  # limit counts sentences ended by -DOCSTART- lines too.
  p = write(tmp_path / "doc.txt", "a\tO\n-DOCSTART-\tO\nb\tO\n-DOCSTART-\tO\nc\tO\n\nd\tO\n")
  assert [s.words for s in conll.read_conll(p)] == [["a"], ["b"], ["c"], ["d"]]
  assert [s.words for s in conll.read_conll(p, limit=1)] == [["a"]]
  assert [s.words for s in conll.read_conll(p, limit=2)] == [["a"], ["b"]]


def test_bad_utf8_names_its_own_line_and_line_ends_count(tmp_path):
  """Line 3 of a small file (text mode decoded 8 KB at once and said line
  1); lone CR, CRLF and LF ends count lines alike."""
  p = tmp_path / "latin1.txt"
  p.write_bytes(b"a\tO\nb\tO\ncaf\xe9\tO\n")
  assert _error(str(p)).startswith("%s:3: not UTF-8: " % p)
  p.write_bytes(b"a\tO\r\nb\tO\rc\tO\n\nd\tX\n")
  assert _error(str(p)) == ("%s:5: tag 'X' is not O or B-/I-/E-/S-TYPE (IOB1, "
                            "IOB2, IOBES)" % p)
  p.write_bytes(b"a\tO\r\nb\tO\rc\tO\n\nd\tO")
  got = conll.read_conll(str(p))
  assert [(s.words, s.lines) for s in got] == [(["a", "b", "c"], [1, 2, 3]), (["d"], [5])]


def test_bad_utf8_on_the_first_line(tmp_path):
  p = tmp_path / "latin1.txt"
  p.write_bytes(b"caf\xe9\tO\n")
  msg = _error(str(p))
  assert msg.startswith("%s:1: not UTF-8: " % p), msg


def test_unreadable_file(tmp_path, monkeypatch):
  p = write(tmp_path / "a.txt", "a\tO\n")

  def broken_open(*args, **kwargs):
    del args, kwargs
    raise OSError(5, "Input/output error")

  monkeypatch.setattr(conll, "open", broken_open, raising=False)
  with pytest.raises(errors.InputError) as e:
    conll.read_conll(p, argument="train_file")
  assert str(e.value) == "cannot read %r: [Errno 5] Input/output error" % p
  assert e.value.argument == "train_file" and isinstance(e.value.__cause__, OSError)
