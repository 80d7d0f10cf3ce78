"""preprocessing.length_report: untruncated lengths, counted as the original would."""

import csv

import numpy as np
import pytest

from bert_tf import preprocessing
from bert_tf import tokenization

VOCAB = "data/vocab/uncased_vocab.txt"


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.mark.parametrize("pair", [False, True])
def test_lengths_match_reference_tokenizer(pair):
  rows = _rows("data/dialog_reply_pairs/dev.tsv")
  rows = rows[1:]  # header: sentence1, sentence2, label
  a = [r[0] for r in rows]
  b = [r[1] for r in rows]
  ref = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
  lengths = np.array([len(ref.tokenize(x)) + (len(ref.tokenize(y)) + 3 if pair else 2)
                      for x, y in zip(a, b)])
  max_len = int(np.median(lengths))  # some cut, some not
  pre = preprocessing.BertPreprocessor(VOCAB, do_lower_case=True, max_seq_length=max_len)
  report = preprocessing.length_report(pre, a, b if pair else None, split="dev",
                                       batch_size=7)
  assert report.examples == len(rows)
  assert report.truncated == int((lengths > max_len).sum()) > 0
  assert report.max == lengths.max()
  assert report.p50 == int(np.percentile(lengths, 50, method="higher"))
  assert report.p90 == int(np.percentile(lengths, 90, method="higher"))
  line = report.line()
  assert line.startswith("dev: %d of %d examples (" % (report.truncated, len(rows)))
  assert "--max_seq_length=%d" % max_len in line
  assert report.to_dict()["share"] == pytest.approx(report.truncated / len(rows), abs=1e-6)


def test_empty_split_and_mismatched_pairs():
  pre = preprocessing.BertPreprocessor(VOCAB, max_seq_length=16)
  assert preprocessing.length_report(pre, []).line().startswith("train: 0 of 0 examples (0.0%)")
  with pytest.raises(ValueError, match="2 first and 1 second"):
    preprocessing.length_report(pre, ["a", "b"], ["c"])
