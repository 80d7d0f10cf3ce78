"""The reference tokenizer against the original ``tokenization.py``; tf-text against both."""

import os

import pytest

from bert_tf import tokenization
from conftest import AUSTEN_SLICE, VOCAB, shared_file


@pytest.fixture(scope="module")
def ours():
  return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def original(original_bert):
  from bert import tokenization as orig  # pylint: disable=g-import-not-at-top
  return orig.FullTokenizer(VOCAB, do_lower_case=True)


def test_same_tokens_as_original_on_every_austen_line(ours, original):
  path = shared_file("corpus", "austen.txt")
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert len(lines) > 30000
  mismatches = [l for l in lines if ours.tokenize(l) != original.tokenize(l)]
  assert not mismatches, mismatches[:5]


# The original's own tokenizer_test.py cases, plus edge cases of DESIGN.md §2.
CASES = [
    ("  \tHeLLo!how  \n Are yoU?  ", True),
    ("  \tHeLLo!how  \n Are yoU?  ", False),
    ("H\u00e9llo caf\u00e9 na\u00efve", True),
    ("H\u00e9llo caf\u00e9 na\u00efve", False),
    ("ah\u535a\u63a8zz \u4e2d\u6587", True),
    ("a\x00b\ufffdc\u200bd\x07e", True),
    ("Stra\u00dfe \ufb01ne \uff21\uff22", True),
    ("unaffable runing wanted,wa [UNK]", True),
    ("x" * 201 + " " + "y" * 199, True),
    ("\u00a0non\u00a0breaking\u2003spaces", False),
    ("punct: \u00bfqu\u00e9? \u2014 \u201cquoted\u201d \u3002 $5 ^_^ `~", True),
]


@pytest.mark.parametrize("text,lower", CASES)
def test_edge_cases_match_original(original_bert, text, lower):
  from bert import tokenization as orig  # pylint: disable=g-import-not-at-top
  ours = tokenization.FullTokenizer(VOCAB, do_lower_case=lower)
  ref = orig.FullTokenizer(VOCAB, do_lower_case=lower)
  assert ours.tokenize(text) == ref.tokenize(text)


def test_known_outputs(ours):
  # Fixed expectations, independent of the reference code.
  assert ours.tokenize("UNwant\u00e9d,running") == ["unwanted", ",", "running"]
  assert ours.tokenize("x" * 201) == ["[UNK]"]
  assert ours.tokenize("a\x00\ufffdb") == ["ab"]
  assert tokenization.BasicTokenizer().tokenize("ah\u535a\u63a8zz") == [
      "ah", "\u535a", "\u63a8", "zz"]


def test_vocab_errors(tmp_path):
  with pytest.raises(tokenization.VocabError, match="cannot read vocab file"):
    tokenization.FullTokenizer(str(tmp_path / "missing.txt"))
  bad = tmp_path / "vocab.txt"
  bad.write_text("[PAD]\n[UNK]\nhello\n")
  with pytest.raises(tokenization.VocabError, match=r"lacks .*\[CLS\].*\[SEP\].*\[MASK\]"):
    tokenization.FullTokenizer(str(bad))


def test_vocab_lines_are_stripped_as_original(tmp_path, original_bert):
  from bert import tokenization as orig  # pylint: disable=g-import-not-at-top
  v = tmp_path / "vocab.txt"
  v.write_text("[PAD]\n [UNK] \n[CLS]\t\n[SEP]\n[MASK]\nhello \n##s\n")
  assert tokenization.load_vocab(str(v)) == orig.load_vocab(str(v))
  # Duplicates: id = line number (embedding row), unlike 1.0.4 (BUILD_NOTES.md).
  v.write_text("[PAD]\nhello\nhello\nworld\n")
  assert tokenization.load_vocab(str(v)) == {"[PAD]": 0, "hello": 2, "world": 3}
  assert orig.load_vocab(str(v))["world"] == 2


def test_tf_text_agreement_on_austen_slice(ours):
  """In-graph (tensorflow-text) vs reference on real text: agreement pinned."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.preprocessing import BertPreprocessor  # pylint: disable=g-import-not-at-top
  with open(AUSTEN_SLICE, encoding="utf-8") as f:
    lines = [l for l in f.read().splitlines() if l.strip()]
  pre = BertPreprocessor(VOCAB, True, 512)
  ids = pre.tokenize(tf.constant(lines)).to_list()
  agree = sum(ours.convert_tokens_to_ids(ours.tokenize(l)) == i
              for l, i in zip(lines, ids))
  rate = agree / len(lines)
  # Measured: 1.0 on this slice (see BUILD_NOTES.md).
  assert rate >= 0.999, rate
  assert os.path.getsize(AUSTEN_SLICE) > 100000
