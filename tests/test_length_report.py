"""Truncation told: untruncated lengths, counted as the original would, per
task (classifier pairs, SQuAD windows, NER windows, SWAG choices) against
the original BERT's tokenizer, and the Keras models' one warning per call
(issue 63 item 1)."""

import csv
import json
import os

import numpy as np
import pytest

from conftest import MC_DIR, NER_DIR, SQUAD_V1_DIR, TINY_CONFIG
from bert_tf import preprocessing
from bert_tf import tokenization

VOCAB = "data/vocab/uncased_vocab.txt"


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture(scope="module")
def reference(original_bert):
  """The original ``bert.tokenization.FullTokenizer`` (bert-tensorflow 1.0.4)."""
  del original_bert
  import bert.tokenization  # pylint: disable=g-import-not-at-top
  return bert.tokenization.FullTokenizer(VOCAB, do_lower_case=True)


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


def _percentiles(lengths):
  return [int(np.percentile(lengths, q, method="higher")) for q in (50, 90)] + [
      int(max(lengths))]


def test_squad_cut_means_more_than_one_window_or_a_cut_question(reference, tmp_path):
  """SQuAD: a question counts as cut when its context took more than one
  window or its question was cut at --max_query_length; the lengths are the
  original tokenizer's untruncated [CLS] question [SEP] context [SEP]."""
  from bert_tf.tasks import squad  # pylint: disable=g-import-not-at-top
  seq, stride, mql = 128, 64, 12
  task = squad.QuestionAnsweringTask(squad.SquadParams(
      output_dir=str(tmp_path / "out"), predict_file=os.path.join(SQUAD_V1_DIR, "dev.json"),
      vocab_file=VOCAB, bert_config_file=TINY_CONFIG, max_seq_length=seq,
      doc_stride=stride, max_query_length=mql), do_train=False, do_predict=True)
  (report,) = task.length_reports()
  lengths, cut = [], []
  for ex in task.predict_examples:  # the original's arithmetic, its tokenizer
    q = len(reference.tokenize(ex.question_text))
    d = sum(len(reference.tokenize(w)) for w in ex.doc_tokens)
    lengths.append(q + d + 3)
    cut.append(d > seq - min(q, mql) - 3 or q > mql)
  assert report.examples == len(task.predict_examples) == 139
  assert 0 < report.truncated == sum(cut) < report.examples
  assert [report.p50, report.p90, report.max] == _percentiles(lengths)
  windows = np.bincount([f.example_index for f in task.predict_features])
  assert report.truncated == int(((windows > 1) | np.array(
      [len(reference.tokenize(ex.question_text)) > mql for ex in task.predict_examples])).sum())
  line = task.untold_data_lines()[-1]
  assert line.startswith("predict: %d of 139 questions (" % report.truncated), line
  assert ("--max_seq_length=128: the context took more than one window (--doc_stride=64) "
          "or the question more than --max_query_length=12 tokens") in line
  assert task.untold_data_lines() == []  # once


def test_ner_and_swag_lengths(reference, tmp_path):
  """NER: [CLS] pieces [SEP] per sentence (a word without pieces is one
  [UNK]), cut = more than one window; SWAG: each example's longest choice,
  cut = a choice longer than --max_seq_length; both written to the
  settings file the runs keep."""
  from bert_tf.tasks import swag, tagging  # pylint: disable=g-import-not-at-top
  ner = tagging.TokenTaggingTask(tagging.NerParams(
      output_dir=str(tmp_path / "ner"), data_dir=NER_DIR, vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, do_train=True, max_examples=60, max_seq_length=24,
      doc_stride=8))
  (report,) = ner.length_reports()
  lengths = [sum(max(1, len(reference.tokenize(w))) for w in s.words) + 2 for s in ner.train]
  assert report.examples == 60 and report.unit == "sentences"
  assert 0 < report.truncated == sum(n > 24 for n in lengths) < 60
  assert [report.p50, report.p90, report.max] == _percentiles(lengths)
  assert "were split into windows --doc_stride=8 pieces apart (no word is cut)" in report.line()
  mc = swag.MultipleChoiceTask(swag.SwagParams(
      output_dir=str(tmp_path / "swag"), data_dir=MC_DIR, vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, do_train=True, do_eval=True, max_examples=40,
      max_seq_length=40))
  train, dev = mc.length_reports()
  for report, examples in ((train, mc.train), (dev, mc.dev)):
    longest = [max(len(reference.tokenize(a)) + len(reference.tokenize(b)) + 3
                   for a, b in zip(*ex.choice_texts)) for ex in examples]
    assert report.examples == len(examples) == 40
    assert report.truncated == sum(n > 40 for n in longest)
    assert [report.p50, report.p90, report.max] == _percentiles(longest)
  assert 0 < train.truncated < 40
  mc.write_run_files(str(tmp_path))
  written = json.load(open(tmp_path / "swag_config.json", encoding="utf-8"))["lengths"]
  assert written["dev"] == dev.to_dict() and written["train"]["truncated"] == train.truncated


def test_keras_models_warn_once_per_call_that_cuts(caplog):
  """fit / evaluate / predict on text: one warning naming the share cut and
  max_seq_length= when the preprocessor cut something, none otherwise."""
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import models  # pylint: disable=g-import-not-at-top
  pre = preprocessing.BertPreprocessor(VOCAB, True, 8)
  # The warnings count the preprocessor's cuts: any encoder shows them, and
  # one 32-wide layer traces in less time than the tiny config's two.
  config = config_lib.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=64,
                                 max_position_embeddings=64, type_vocab_size=2)
  model = models.BertClassifier(config, 2, preprocessor=pre)
  texts = ["one two three four five six seven", "short", "a b c d e f g", "tiny"]

  def warnings(call):
    caplog.clear()
    with caplog.at_level("WARNING"):
      call()
    return [r.getMessage() for r in caplog.records if "max_seq_length=" in r.getMessage()]

  (line,) = warnings(lambda: model.predict(texts, batch_size=3, verbose=0))
  assert line.startswith("BertClassifier.predict: 2 (50.0%) of the 4 texts preprocessed "
                         "were longer than max_seq_length=8 tokens and were cut"), line
  assert warnings(lambda: model.predict(["short", "tiny"] * 3, batch_size=2, verbose=0)) == []
  model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  (line,) = warnings(lambda: model.fit(texts, [0, 1, 0, 1], epochs=2, batch_size=2,
                                       verbose=0))
  assert line.startswith("BertClassifier.fit: 4 (50.0%) of the 8 texts"), line
  (line,) = warnings(lambda: model.evaluate(texts[:2], [0, 1], verbose=0))
  assert line.startswith("BertClassifier.evaluate: 1 (50.0%) of the 2 texts"), line
  assert pre._cut_tally is None  # pylint: disable=protected-access
  from bert_tf.modeling import multiple_choice  # pylint: disable=g-import-not-at-top
  mc = multiple_choice.BertMultipleChoice(model.config, preprocessor=pre)
  (line,) = warnings(lambda: mc.predict((["he opens", "she"], [["the door", "a b c d e f g"],
                                                              ["sings", "runs"]]), verbose=0))
  assert line.startswith("BertMultipleChoice.predict: 1 (25.0%) of the 4 choice sequences"), line
