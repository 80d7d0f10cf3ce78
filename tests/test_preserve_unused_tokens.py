"""``--preserve_unused_tokens``: vocab entries ``[unusedN]`` kept whole.

The reference is the original's own: PyPI ``bert-tensorflow==1.0.4``'s
``tokenization.py`` has the flag (``preserve_token``: a whitespace-separated
word, after cleaning and CJK spacing and before lower-casing, that matches
``^\\[unused\\d+\\]$`` and is in the vocab is neither lower-cased,
punctuation-split nor WordPiece-split; set here with ``flagsaver``). Checked
against it: the reference tokenizer and the memoized one, the in-graph
``BertPreprocessor`` and the SQuAD export's offsets tokenizer (ids), an
exported preprocessor SavedModel, the pretraining records of
``tools/create_pretraining_data.py`` (the original script run with the flag),
the documents of ``tools/create_pretraining_documents.py``, and the SQuAD
features (the original ``run_squad.py`` functions run with the flag). The
tools' flags and the tasks' params carry the option; the pretraining-data
path still refuses a vocab without ``[MASK]`` (the tokenizer accepts it, as
the original's does).
"""

import json
import os
import random

import numpy as np
import pytest
from absl.testing import flagsaver

from bert_tf import errors
from bert_tf import tokenization
from bert_tf.data.pretraining import faithful
from bert_tf.data.pretraining import tokens as tokens_lib
from conftest import MOVIE_DIR, SAMPLE_TEXT, TINY_CONFIG, VOCAB, read_records, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))

# Words around the rule: kept ([unused0] [unused1] [unused993] are in the
# uncased vocab), and not kept (not in the vocab, other case, inside a word,
# malformed, non-ASCII digits that Python's \d matches).
FRAGMENTS = [
    "[unused0]", "[unused1]", "[unused993]", "[unused994]", "[unused007]",
    "[UNUSED2]", "[Unused3]", "[unused]", "[unused-1]", "unused4", "[", "]", "[[",
    " ", "  ", "\t", "\n", "\u3000", "\u2028", "\u4e2d", "\u200b", "\x00", "\ufffd",
    "\u0301", "\u00e9", "x", "The", "running", ",", ".", "##", "[CLS]", "[MASK]",
    "[unused\u0663]", "[unused\uff11]", "[unu\u200bsed1]", "\u00c9t\u00e9",
]
HAND_CASES = [
    "UNwant\u00e9d,running [unused0] [CLS] [unused55]",
    "x[unused1] [UNUSED2] [unused3]\u4e2d \u4e2d[unused4] [unused5]x",
    "[unused99999] [unu\u200bsed5]  [unused6]\t[unused7]\n",
    "[[unused7]] ([unused8]) [unused9]. [unused10],",
    "", "   ", "[unused0]", "\u00c9COLE [unused11] caf\u00e9",
]
UNUSED0_ID = 1  # line 2 of the uncased vocab


def _strings(seed=0, n=300):
  rng = random.Random(seed)
  out = []
  for _ in range(n):
    parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12))]
    out.append("".join(p + rng.choice(["", " ", " "]) for p in parts))
  return HAND_CASES + out


STRINGS = _strings()


@pytest.fixture(scope="module")
def orig_tok(original_bert):
  """The original's FullTokenizer; call ``ids(text, lower, preserve)``."""
  del original_bert
  from bert import tokenization as orig  # pylint: disable=g-import-not-at-top
  toks = {lower: orig.FullTokenizer(VOCAB, do_lower_case=lower) for lower in (True, False)}

  def tokenize(text, lower=True, preserve=True):
    with flagsaver.flagsaver(preserve_unused_tokens=preserve):
      return toks[lower].tokenize(text)
  return tokenize


def _orig_ids(orig_tok, texts, lower=True, preserve=True):
  vocab = tokenization.load_vocab(VOCAB)
  return [[vocab[t] for t in orig_tok(s, lower, preserve)] for s in texts]


# ------------------------------------------------------- Python tokenizers


@pytest.mark.parametrize("lower", [True, False])
def test_reference_and_memo_tokenizer_equal_original(orig_tok, lower):
  ours = tokenization.FullTokenizer(VOCAB, lower, preserve_unused_tokens=True)
  memo = tokens_lib.MemoTokenizer(tokenization.FullTokenizer(
      VOCAB, lower, preserve_unused_tokens=True))
  plain = tokenization.FullTokenizer(VOCAB, lower)
  changed = 0
  for s in STRINGS:
    want = orig_tok(s, lower, True)
    assert ours.tokenize(s) == want, s
    assert memo.tokenize(s) == want, s
    assert memo.tokenize_to_ids(s) == ours.convert_tokens_to_ids(want), s
    assert plain.tokenize(s) == orig_tok(s, lower, False), s
    changed += want != plain.tokenize(s)
  assert changed > 100  # the option matters on these strings
  if lower:
    assert ours.tokenize(HAND_CASES[0]) == [
        "unwanted", ",", "running", "[unused0]", "[", "cl", "##s", "]", "[unused55]"]


def test_preserve_token_rule():
  vocab = {"[unused1]": 0, "[unused\u0663]": 1, "[UNUSED2]": 2, "x[unused3]": 3}
  assert tokenization.preserve_token("[unused1]", vocab, True)
  assert not tokenization.preserve_token("[unused1]", vocab, False)
  assert tokenization.preserve_token("[unused\u0663]", vocab, True)  # Python's \d
  assert not tokenization.preserve_token("[unused5]", vocab, True)  # not in vocab
  assert not tokenization.preserve_token("[UNUSED2]", vocab, True)
  assert not tokenization.preserve_token("x[unused3]", vocab, True)
  basic = tokenization.BasicTokenizer(vocab=vocab, preserve_unused_tokens=True)
  assert basic.tokenize("A [unused1] [unused5]") == [
      "a", "[unused1]", "[", "unused5", "]"]
  assert tokenization.BasicTokenizer(vocab=vocab).tokenize("[unused1]") == [
      "[", "unused1", "]"]


def test_full_tokenizer_accepts_vocab_without_mask_as_the_original(tmp_path, original_bert):
  del original_bert
  from bert import tokenization as orig  # pylint: disable=g-import-not-at-top
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[UNK]\n[CLS]\n[SEP]\nwant\n##ed\n[unused0]\n", encoding="utf-8")
  ours = tokenization.FullTokenizer(str(vocab), preserve_unused_tokens=True)
  with flagsaver.flagsaver(preserve_unused_tokens=True):
    want = orig.FullTokenizer(str(vocab)).tokenize("wanted [unused0] x")
  assert ours.tokenize("wanted [unused0] x") == want == ["want", "##ed", "[unused0]", "[UNK]"]
  assert tokenization.convert_tokens_to_ids(ours.vocab, want) == [3, 4, 5, 0]
  assert tokenization.convert_ids_to_tokens(ours.inv_vocab, [3, 4, 5, 0]) == want


# ------------------------------------------------------------- in graph


@pytest.fixture(scope="module")
def preprocessors():
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  return {(lower, preserve): preprocessing.BertPreprocessor(
      VOCAB, lower, 64, preserve_unused_tokens=preserve)
          for lower in (True, False) for preserve in (True, False)}


@pytest.mark.parametrize("lower", [True, False])
def test_in_graph_ids_equal_original(orig_tok, preprocessors, lower):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for preserve in (True, False):
    got = preprocessors[lower, preserve].tokenize(tf.constant(STRINGS)).to_list()
    want = _orig_ids(orig_tok, STRINGS, lower, preserve)
    bad = [(s, g, w) for s, g, w in zip(STRINGS, got, want) if g != w]
    assert not bad, bad[:3]
  # Packed inputs: [CLS] ids [SEP], the [unused0] id in place.
  out = preprocessors[lower, True](tf.constant(["[unused0] the"]))
  assert out["input_ids"].numpy()[0, :4].tolist() == [101, UNUSED0_ID, 1996, 102]


def test_in_graph_deviation_non_ascii_digits(tmp_path, orig_tok):
  """Documented deviation (bert_tf.preprocessing): a vocab entry [unusedN]
  with non-ASCII digits is kept by the original (Python's \\d) but not in
  graph (tensorflow-text's regex matches [0-9])."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  del orig_tok
  with open(VOCAB, encoding="utf-8") as f:
    words = f.read().splitlines()
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(words + ["[unused\u0663]"]) + "\n", encoding="utf-8")
  ref = tokenization.FullTokenizer(str(vocab), preserve_unused_tokens=True)
  assert ref.tokenize("[unused\u0663]") == ["[unused\u0663]"]
  pre = preprocessing.BertPreprocessor(str(vocab), True, 16, preserve_unused_tokens=True)
  got = pre.tokenize(tf.constant(["[unused\u0663] [unused1]"])).to_list()[0]
  assert got[0] == ref.vocab["["] and got[-1] == ref.vocab["[unused1]"]


def test_squad_export_tokenizer_ids_and_offsets(orig_tok, preprocessors):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import squad  # pylint: disable=g-import-not-at-top
  module = squad.SquadServingModule(None, preprocessors[True, True], doc_stride=16,
                                    max_query_length=16, track_model=False)
  ids, starts, ends = module.tokenize_context(module.sanitize_utf8(tf.constant(STRINGS)))
  want = _orig_ids(orig_tok, STRINGS)
  got = ids.to_list()
  bad = [(s, g, w) for s, g, w in zip(STRINGS, got, want) if g != w]
  assert not bad, bad[:3]
  inv = {v: k for k, v in tokenization.load_vocab(VOCAB).items()}
  kept = 0
  for s, row, s_row, e_row in zip(STRINGS, got, starts.to_list(), ends.to_list()):
    for tok, a, b in zip(row, s_row, e_row):
      if inv[tok].startswith("[unused"):
        surface = "".join(c for c in s[a:b] if c not in "\u200b\x00\ufffd")
        assert surface == inv[tok], (s, s[a:b])
        kept += 1
  assert kept > 50
  # Without the option the same module splits them (the default path).
  plain = squad.SquadServingModule(None, preprocessors[True, False], doc_stride=16,
                                   max_query_length=16, track_model=False)
  got = plain.tokenize_context(tf.constant(HAND_CASES[:3]))[0].to_list()
  assert got == _orig_ids(orig_tok, HAND_CASES[:3], preserve=False)


def test_exported_preprocessor_honours_it(tmp_path, orig_tok, preprocessors):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import saved_model  # pylint: disable=g-import-not-at-top
  path = saved_model.export_preprocessor(preprocessors[True, True], str(tmp_path / "pre"))
  assert saved_model.read_metadata(path)["preserve_unused_tokens"] is True
  served = tf.saved_model.load(path).signatures["serving_default"]
  texts = HAND_CASES[:4]
  out = served(text=tf.constant(texts))
  for row, mask, want in zip(out["input_word_ids"].numpy(), out["input_mask"].numpy(),
                             _orig_ids(orig_tok, texts)):
    assert row[:mask.sum()].tolist() == [101] + want + [102]


# ------------------------------------------------------ tools and tasks


def _corpus(path):
  """sample_text.txt with [unusedN] words (kept and not) on every third line."""
  with open(SAMPLE_TEXT, encoding="utf-8") as f:
    lines = f.read().splitlines()
  extra = " [unused0] [unused7]\u4e2d x[unused1] [UNUSED2] [unused999999] ([unused3])"
  out = [l + extra if l.strip() and i % 3 == 0 else l for i, l in enumerate(lines)]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(out) + "\n")
  return out


@pytest.fixture(scope="module")
def original_records(original_bert, tmp_path_factory):
  """The original create_pretraining_data.py, run with --preserve_unused_tokens."""
  del original_bert
  d = str(tmp_path_factory.mktemp("original_preserve"))
  corpus = os.path.join(d, "corpus.txt")
  _corpus(corpus)
  flags = {"random_seed": 3, "dupe_factor": 2, "max_seq_length": 64,
           "max_predictions_per_seq": 10}
  job = dict(flags, input_file=corpus, vocab_file=VOCAB, preserve_unused_tokens=True,
             output_file=os.path.join(d, "orig.tfrecord"))
  with open(os.path.join(d, "jobs.json"), "w") as f:
    json.dump([job], f)
  run_tool([os.path.join(HERE, "original_create_data.py"), d,
            os.path.join(d, "jobs.json")], cwd=d)
  return d, corpus, flags


def test_create_pretraining_data_tool_records_equal_original(original_records):
  d, corpus, flags = original_records
  orig = read_records(os.path.join(d, "orig.tfrecord"))
  args = ["tools/create_pretraining_data.py", "--input_file=" + corpus,
          "--vocab_file=" + VOCAB] + ["--%s=%s" % kv for kv in flags.items()]
  run_tool(args + ["--output_file=" + os.path.join(d, "ours.tfrecord"),
                   "--preserve_unused_tokens=True"])
  ours = read_records(os.path.join(d, "ours.tfrecord"))
  assert len(ours) == len(orig) > 0
  for i, (x, y) in enumerate(zip(ours, orig)):
    assert sorted(x) == sorted(y)
    for k in x:
      np.testing.assert_array_equal(x[k], y[k], err_msg="record %d %s" % (i, k))
  assert any(UNUSED0_ID in r["input_ids"] for r in ours)
  # Off (the default): other records, [unused0] never a token.
  off = os.path.join(d, "off.tfrecord")
  faithful.create_pretraining_data(corpus, off, VOCAB, **flags)
  assert not any(UNUSED0_ID in r["input_ids"] for r in read_records(off))


def test_scalable_mode_and_documents_tool_keep_them(original_records, orig_tok, tmp_path):
  _, corpus, _ = original_records
  base = ["--input_file=" + corpus, "--vocab_file=" + VOCAB,
          "--preserve_unused_tokens=True"]
  run_tool(["tools/create_pretraining_data.py", "--num_workers=1", "--dupe_factor=1",
            "--output_file=" + str(tmp_path / "sharded")] + base)
  (shard,) = [p for p in os.listdir(tmp_path) if p.startswith("sharded-")]
  records = read_records(str(tmp_path / shard))
  assert any(UNUSED0_ID in r["input_ids"] for r in records)
  # Documents: every line's ids, in order, are the original's.
  out = tmp_path / "docs.tfrecord"
  run_tool(["tools/create_pretraining_documents.py", "--output_file=" + str(out)] + base)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  got = []
  for raw in tf.data.TFRecordDataset(str(out)):
    ex = tf.train.Example.FromString(raw.numpy())
    got += list(ex.features.feature["token_ids"].int64_list.value)
  with open(corpus, encoding="utf-8") as f:
    lines = f.read().splitlines()
  want = [i for ids in _orig_ids(orig_tok, lines) for i in ids]
  assert got == want and UNUSED0_ID in got


def test_pretraining_data_refuses_vocab_without_mask(tmp_path):
  with open(VOCAB, encoding="utf-8") as f:
    words = [w for w in f.read().splitlines() if w != "[MASK]"]
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(words) + "\n", encoding="utf-8")
  tokenization.FullTokenizer(str(vocab))  # the tokenizer accepts it
  out = tmp_path / "out.tfrecord"
  with pytest.raises(errors.VocabError, match=r"lacks the required token\(s\) \[MASK\]"):
    faithful.create_pretraining_data(SAMPLE_TEXT, str(out), str(vocab))
  p = run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
                "--output_file=" + str(out), "--vocab_file=" + str(vocab),
                "--preserve_unused_tokens=True"], check=False)
  assert p.returncode != 0 and "[MASK]" in p.stderr and str(vocab) in p.stderr
  assert not out.exists()
  from bert_tf.data.pretraining import dynamic, sharded  # pylint: disable=g-import-not-at-top
  with pytest.raises(errors.VocabError, match=r"\[MASK\]"):
    sharded.create_sharded([SAMPLE_TEXT], str(out), str(vocab))
  with pytest.raises(errors.VocabError, match=r"\[MASK\]"):
    dynamic.write_documents(SAMPLE_TEXT, str(out), str(vocab))
  assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]


SQUAD_CONTEXT = ("The gene [unused5] binds [unused6]. Its twin [UNUSED7] x[unused8] "
                 "does not; [unused9999] is unknown, and \u00e9t\u00e9 [unused10]\u4e2d "
                 "ends it.")


def _qa(qid, question, answer):
  return {"id": qid, "question": question,
          "answers": [{"text": answer, "answer_start": SQUAD_CONTEXT.index(answer)}]}


SQUAD_JSON = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
    "context": SQUAD_CONTEXT,
    "qas": [_qa("q1", "What binds [unused6]?", "[unused5]"),
            _qa("q2", "Which twin?", "[UNUSED7]"),
            _qa("q3", "What ends it?", "[unused10]\u4e2d")]}]}]}


# Run with tests/ on PYTHONPATH: the original's run_squad.py functions
# (tests/original_squad.py) with the original's flag set.
DRIVER = """
import original_squad
original_squad.patched_package({workdir!r})
from bert import tokenization
tokenization.FLAGS.preserve_unused_tokens = True
original_squad.main({workdir!r}, {jobs!r})
"""


def test_squad_features_equal_original(tmp_path):
  from bert_tf.data import squad as squad_data  # pylint: disable=g-import-not-at-top
  path = tmp_path / "train.json"
  path.write_text(json.dumps(SQUAD_JSON), encoding="utf-8")
  jobs = tmp_path / "jobs.json"
  jobs.write_text(json.dumps([{
      "kind": "features", "input_file": str(path), "vocab_file": VOCAB,
      "do_lower_case": True, "is_training": True, "version_2_with_negative": False,
      "max_seq_length": 32, "doc_stride": 8, "max_query_length": 8,
      "output": str(tmp_path / "orig.json")}]))
  driver = tmp_path / "driver.py"
  driver.write_text(DRIVER.format(workdir=str(tmp_path), jobs=str(jobs)))
  run_tool([str(driver)], cwd=HERE, env={"PYTHONPATH": HERE})
  with open(tmp_path / "orig.json", encoding="utf-8") as f:
    orig = json.load(f)
  examples = squad_data.read_squad_examples(str(path), True)
  tok = tokenization.FullTokenizer(VOCAB, True, preserve_unused_tokens=True)
  feats = squad_data.convert_examples_to_features(examples, tok, 32, 8, 8, True)
  assert len(feats) == len(orig["features"]) > len(examples)
  for a, b in zip(feats, orig["features"]):
    for key, want in b.items():
      mine = getattr(a, key)
      if isinstance(mine, dict):
        mine = [[k, v] for k, v in sorted(mine.items())]
      assert mine == want, (a.unique_id, key)
  # The kept answer is one token: start == end on its window.
  first = [f for f in feats if f.example_index == 0 and f.start_position > 0]
  assert first and all(f.tokens[f.start_position] == "[unused5]" and
                       f.start_position == f.end_position for f in first)


@pytest.mark.parametrize("tool", ["run_classifier", "run_squad", "run_ner", "run_swag",
                                  "extract_features", "create_pretraining_documents"])
@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_tools_define_the_flag(tool):
  p = run_tool(["tools/%s.py" % tool, "--helpfull"], check=False)
  assert "--[no]preserve_unused_tokens" in p.stdout + p.stderr, (p.stdout + p.stderr)[-2000:]


def test_tasks_pass_the_option(tmp_path):
  from bert_tf.tasks import classification, squad, swag, tagging  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  common = dict(output_dir=str(tmp_path), vocab_file=VOCAB, bert_config_file=TINY_CONFIG,
                max_seq_length=32, preserve_unused_tokens=True)
  tasks = [
      classification.ClassificationTask(
          classification.ClassifierParams(task_name="sst-2", data_dir=MOVIE_DIR, **common),
          do_train=False, do_eval=False),
      swag.MultipleChoiceTask(swag.SwagParams(**common)),
      tagging.TokenTaggingTask(tagging.NerParams(label_list=("O", "B-x"), **common)),
  ]
  pre_vocab = tokenization.load_vocab(VOCAB)
  for task in tasks:
    pre = task.preprocessor
    assert pre.preserve_unused_tokens is True
    assert pre.tokenize(tf.constant(["[unused0] x"])).to_list() == [
        [UNUSED0_ID, pre_vocab["x"]]]
  sq = squad.QuestionAnsweringTask(squad.SquadParams(**common), do_train=False,
                                   do_predict=False)
  assert sq.tokenizer.tokenize("[unused0]") == ["[unused0]"]
  assert sq.serving_info()["preserve_unused_tokens"] is True
  # The run files record it (for re-export).
  tasks[1].write_run_files(str(tmp_path))
  sq.write_run_files(str(tmp_path))
  for name in ("swag_config.json", "squad_config.json"):
    with open(tmp_path / name) as f:
      assert json.load(f)["preserve_unused_tokens"] is True
