"""Faithful pretraining data: record-for-record identical to the original script.

The original is PyPI bert-tensorflow 1.0.4's ``create_pretraining_data.py``
with google-research/bert master's whole-word masking patched in
(``tests/original_create_data.py``); every case below runs it once, in one
subprocess, and compares our records with its records, parsed, feature by
feature. The masking statistics are those of our records of the Austen
slice, first shown identical to the original's.
"""

import json
import os
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bert_tf import errors
from bert_tf import tokenization
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import faithful
from bert_tf.data.pretraining import records as records_lib
from bert_tf.data.pretraining import tokens
from conftest import AUSTEN_SLICE, SAMPLE_TEXT, VOCAB, read_records, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (input spec, flags). Input specs are built by _make_inputs.
CASES = {
    "sample_seed12345": ("sample", {"random_seed": 12345, "dupe_factor": 2}),
    "sample_seed7_short05_seq64": ("sample", {
        "random_seed": 7, "dupe_factor": 3, "short_seq_prob": 0.5,
        "max_seq_length": 64, "max_predictions_per_seq": 10}),
    "sample_short1_seq32": ("sample", {
        "random_seed": 99, "dupe_factor": 2, "short_seq_prob": 1.0,
        "max_seq_length": 32, "max_predictions_per_seq": 5}),
    "sample_short0_two_outputs": ("sample", {
        "random_seed": 4, "dupe_factor": 2, "short_seq_prob": 0.0}),
    "sample_cased": ("sample", {"random_seed": 8, "dupe_factor": 1,
                                "do_lower_case": False}),
    "austen_two_files_seed3": ("austen2", {"random_seed": 3, "dupe_factor": 1}),
    "one_document": ("onedoc", {"random_seed": 5, "dupe_factor": 3}),
    "one_sentence": ("onesent", {"random_seed": 6, "dupe_factor": 4}),
    "non_utf8": ("dirty", {"random_seed": 5, "dupe_factor": 2}),
    "wwm_sample_seed1": ("sample", {"random_seed": 1, "dupe_factor": 3,
                                    "do_whole_word_mask": True}),
    "wwm_sample_seed2_short03_cap6": ("sample", {
        "random_seed": 2, "dupe_factor": 3, "short_seq_prob": 0.3,
        "max_seq_length": 48, "max_predictions_per_seq": 6,
        "do_whole_word_mask": True}),
    "wwm_austen_three_files_seed11": ("austen3", {
        "random_seed": 11, "dupe_factor": 1, "max_predictions_per_seq": 12,
        "do_whole_word_mask": True}),
    "wwm_one_document": ("onedoc", {"random_seed": 9, "dupe_factor": 2,
                                    "do_whole_word_mask": True}),
    # The whole Austen slice (1,145 records): test_masking_statistics_on_real_text.
    "austen_seed1": ("austen", {"random_seed": 1, "dupe_factor": 1}),
}
TWO_OUTPUTS = {"sample_short0_two_outputs"}


def _make_inputs(d):
  """Writes the test corpora; returns ``{spec: (ours, original's)}`` input_file flags."""
  with open(AUSTEN_SLICE, encoding="utf-8") as f:
    austen = f.read()
  with open(SAMPLE_TEXT, "rb") as f:
    sample = f.read()
  out = {"sample": (SAMPLE_TEXT, SAMPLE_TEXT), "austen": (AUSTEN_SLICE, AUSTEN_SLICE)}
  # Two / three files cut inside a document: documents continue across files.
  text = austen[:60000]
  paths = []
  for i, (a, b) in enumerate([(0, 30000), (30000, 60000)]):
    p = os.path.join(d, "austen2_%d.txt" % i)
    with open(p, "w", encoding="utf-8") as f:
      f.write(text[a:b])
    paths.append(p)
  out["austen2"] = (",".join(paths),) * 2
  text = austen[60000:100000]
  paths = []
  for i, (a, b) in enumerate([(0, 13000), (13000, 26000), (26000, 40000)]):
    p = os.path.join(d, "austen3_%d.txt" % i)
    with open(p, "w", encoding="utf-8") as f:
      f.write(text[a:b])
    paths.append(p)
  out["austen3"] = (os.path.join(d, "austen3_*.txt"),) * 2
  # One document (no blank line) of real text, and a one-sentence corpus.
  lines = [l for l in austen.splitlines() if l.strip()]
  p = os.path.join(d, "onedoc.txt")
  with open(p, "w", encoding="utf-8") as f:
    f.write("\n".join(lines[:60]) + "\n")
  out["onedoc"] = (p, p)
  p = os.path.join(d, "onesent.txt")
  with open(p, "w", encoding="utf-8") as f:
    f.write(lines[3] + "\n")
  out["onesent"] = (p, p)
  # Invalid UTF-8 is dropped, as the original's convert_to_unicode("ignore")
  # intends (the original script itself raises UnicodeDecodeError in GFile's
  # strict text mode): ours reads the dirty file, the original the clean one.
  dirty = sample.replace(b"the ", b"th\xffe\x80 ", 5).replace(b"\n\n", b"\xfe\n\n", 1)
  assert dirty != sample and dirty.decode("utf-8", "ignore").encode("utf-8") == sample
  p = os.path.join(d, "dirty.txt")
  with open(p, "wb") as f:
    f.write(dirty)
  out["dirty"] = (p, SAMPLE_TEXT)
  return out


def _outputs(d, name, who):
  if name in TWO_OUTPUTS:
    return [os.path.join(d, "%s_%s_%d.tfrecord" % (who, name, i)) for i in range(2)]
  return [os.path.join(d, "%s_%s.tfrecord" % (who, name))]


@pytest.fixture(scope="module")
def original_runs(original_bert, tmp_path_factory):
  """Runs every case through the original once; returns (workdir, inputs)."""
  del original_bert
  d = str(tmp_path_factory.mktemp("original_create_data"))
  inputs = _make_inputs(d)
  jobs = []
  for name, (spec, flags) in CASES.items():
    job = dict(flags, input_file=inputs[spec][1], vocab_file=VOCAB,
               output_file=",".join(_outputs(d, name, "orig")))
    jobs.append(job)
  with open(os.path.join(d, "jobs.json"), "w") as f:
    json.dump(jobs, f)
  run_tool([os.path.join(HERE, "original_create_data.py"), d, os.path.join(d, "jobs.json")],
           cwd=d)
  return d, inputs


def assert_same(a, b):
  assert len(a) == len(b) > 0
  for i, (x, y) in enumerate(zip(a, b)):
    assert sorted(x) == sorted(y) == sorted(records_lib.FEATURE_NAMES)
    for k in x:
      assert x[k].dtype.kind == y[k].dtype.kind, (i, k)
      np.testing.assert_array_equal(x[k], y[k], err_msg="record %d %s" % (i, k))


_OURS = {}


def _ours(d, inputs, name):
  """Our records (faithful mode) of case ``name``, made once; the output paths."""
  if (d, name) not in _OURS:
    spec, flags = CASES[name]
    outs = [p.replace("/orig_", "/fast_") for p in _outputs(d, name, "orig")]
    faithful.create_pretraining_data(inputs[spec][0], ",".join(outs), VOCAB, **flags)
    _OURS[(d, name)] = outs
  return _OURS[(d, name)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_identical_to_original(original_runs, name):
  d, inputs = original_runs
  ours = _ours(d, inputs, name)
  for mine, orig in zip(ours, _outputs(d, name, "orig")):
    assert_same(read_records(orig), read_records(mine))


def test_glob_order_is_the_originals(original_runs):
  """A glob's files are read in the order the original's tf.gfile.Glob lists
  them (directory order, not sorted): it decides every record."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  d, _ = original_runs
  pattern = os.path.join(d, "austen3_*.txt")
  assert (documents.expand_input_files(pattern, directory_order=True) ==
          tf.io.gfile.glob(pattern))
  assert documents.expand_input_files(pattern) == sorted(tf.io.gfile.glob(pattern))


def test_whole_word_masking_masks_whole_words(original_runs):
  """With --do_whole_word_mask every masked "##" piece has its word's previous
  piece masked too (or follows the middle [SEP]: the original joins a "##"
  piece opening segment B to the last word of A), and the flag changes the
  output."""
  d, _ = original_runs
  tok = tokenization.FullTokenizer(VOCAB)
  recs = read_records(_outputs(d, "wwm_austen_three_files_seed11", "orig")[0])
  pieces = 0
  for r in recs:
    n = int(r["input_mask"].sum())
    m = int(r["masked_lm_weights"].sum())
    pos = set(r["masked_lm_positions"][:m].tolist())
    labels = dict(zip(r["masked_lm_positions"][:m].tolist(),
                      tok.convert_ids_to_tokens(r["masked_lm_ids"][:m].tolist())))
    sep = n - 1 - int(r["segment_ids"][:n].sum())  # the middle [SEP]
    for p, label in labels.items():
      if label.startswith("##"):
        pieces += 1
        assert p - 1 in pos or p - 1 == sep, (p, label)
  assert pieces > 20
  a = read_records(_outputs(d, "wwm_sample_seed1", "orig")[0])
  plain = faithful.create_pretraining_data(
      SAMPLE_TEXT, os.path.join(d, "plain_seed1.tfrecord"), VOCAB, random_seed=1,
      dupe_factor=3)
  b = read_records(plain[2][0])
  # Whole-word masking draws different random numbers, so everything after
  # the first masked word differs.
  assert len(a) != len(b) or any(
      not np.array_equal(x["masked_lm_positions"], y["masked_lm_positions"])
      for x, y in zip(a, b))


def test_cli_identical_to_original(original_runs):
  """The tool's flags reach the library: whole-word masking, globs over three
  files, non-default seed and caps."""
  d, _ = original_runs
  spec, flags = CASES["wwm_austen_three_files_seed11"]
  out = os.path.join(d, "cli_wwm.tfrecord")
  p = run_tool(["tools/create_pretraining_data.py",
                "--input_file=" + os.path.join(d, "austen3_*.txt"), "--output_file=" + out,
                "--vocab_file=" + VOCAB] + ["--%s=%s" % kv for kv in flags.items()])
  assert "wrote" in p.stdout and "peak RSS" in p.stdout
  assert "it/s" not in p.stderr  # no progress bar when stderr is not a terminal
  assert_same(read_records(_outputs(d, "wwm_austen_three_files_seed11", "orig")[0]),
              read_records(out))


def test_memo_tokenizer_equals_reference_on_real_text():
  ref = tokenization.FullTokenizer(VOCAB)
  memo = tokens.MemoTokenizer(tokenization.FullTokenizer(VOCAB))
  lines = 0
  for line in documents.read_lines(AUSTEN_SLICE):
    assert memo.tokenize(line) == ref.tokenize(line), line
    assert memo.tokenize_to_ids(line) == ref.convert_tokens_to_ids(ref.tokenize(line))
    lines += 1
  assert lines > 3000
  cased_ref = tokenization.FullTokenizer(VOCAB, do_lower_case=False)
  cased = tokens.MemoTokenizer(tokenization.FullTokenizer(VOCAB, do_lower_case=False))
  with open(SAMPLE_TEXT, encoding="utf-8") as f:
    for line in f:
      assert cased.tokenize(line) == cased_ref.tokenize(line)


@pytest.mark.parametrize("lower", [True, False])
def test_memo_tokenizer_prefilled_ids_equal_reference(lower):
  """The id cache seeded from the vocab (before any text) holds exactly the
  reference's ids for each seeded word, capitalized forms included."""
  ref = tokenization.FullTokenizer(VOCAB, do_lower_case=lower)
  memo = tokens.MemoTokenizer(tokenization.FullTokenizer(VOCAB, do_lower_case=lower))
  seeded = dict(memo._ids)  # pylint: disable=protected-access
  assert len(seeded) > (40000 if lower else 20000)
  assert ("The" in seeded) == lower and "the" in seeded
  for word, ids in seeded.items():
    assert list(ids) == ref.convert_tokens_to_ids(ref.tokenize(word)), word


def test_read_lines_across_blocks(tmp_path):
  """Lines end at "\\n" only (GFile.readline), bad UTF-8 bytes are dropped per
  line, and block boundaries (here every 7 bytes) change nothing."""
  data = ("a b\r\n\u00e9t\u00e9 \u4e2d\n\n  x\x0b y \x85\n\u2028z\r\n" * 5).encode()
  data = data.replace(b"b", b"b\xff", 2) + b"last \xe2\x82 line"
  p = tmp_path / "t.txt"
  p.write_bytes(data)
  want = [l.decode("utf-8", "ignore").strip() for l in data.split(b"\n")]
  assert list(documents.read_lines(str(p), block_size=7)) == want
  assert list(documents.read_lines(str(p))) == want


ADVERSARIAL = [
    "Straße ﬁne ＡＢＣ naïve Ångström résumé", "\u4e2d\u6587字符 mixed中文text",
    "tab\there\x00nul\ufffdrepl\u200bzw\u00adsoft", "a\x0bb\x0cc\x1cd\x85e\u2028f\u3000g",
    "don't-stop!!! (really?) [CLS] [SEP] ##ing", "x" * 205 + " " + "y" * 199,
    "\u0301\u0301 e\u0301 \U0001F600 emoji\U0001F600x", "١٢٣ مرحبا שלום Привет",
]


@pytest.mark.parametrize("lower", [True, False])
def test_memo_tokenizer_equals_reference_on_adversarial_strings(lower):
  ref = tokenization.FullTokenizer(VOCAB, do_lower_case=lower)
  memo = tokens.MemoTokenizer(tokenization.FullTokenizer(VOCAB, do_lower_case=lower))
  for s in ADVERSARIAL:
    assert memo.tokenize(s) == ref.tokenize(s), s
    assert memo.tokenize(s) == ref.tokenize(s), s  # from the cache


_REF = tokenization.FullTokenizer(VOCAB)
_MEMO = tokens.MemoTokenizer(tokenization.FullTokenizer(VOCAB))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=40) |
       st.text(alphabet="abcdeéß中 \t\n\x00\x0b\u3000.,!?-'#[]\ufffd\u200b", max_size=40))
def test_memo_tokenizer_equals_reference_on_generated_text(text):
  assert _MEMO.tokenize(text) == _REF.tokenize(text)


def test_inlined_random_equals_stdlib():
  assert faithful.inlined_rng_ok()
  a, b = random.Random(3), random.Random(3)
  for n in range(1, 300):
    x, y = list(range(n)), list(range(n))
    a.shuffle(x)
    faithful._shuffle(y, b.getrandbits)  # pylint: disable=protected-access
    assert x == y
    assert a.randint(0, n) == faithful._randbelow(b.getrandbits, n + 1)  # pylint: disable=protected-access


def test_tfrecord_writer_bytes_equal_tensorflow_writer(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records = [b"", b"x", os.urandom(300), os.urandom(70000)]
  w = records_lib.TFRecordWriter(str(tmp_path / "ours.tfrecord"))
  for r in records:
    w.write(r)
  w.commit()
  with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as tw:
    for r in records:
      tw.write(r)
  assert (tmp_path / "ours.tfrecord").read_bytes() == (tmp_path / "tf.tfrecord").read_bytes()
  assert [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "ours.tfrecord"))] == records
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_masking_statistics_on_real_text(original_runs):
  """Our records of the Austen slice (1,145, dupe_factor 1) equal the
  original's, and hold the paper's masking: the count, 80/10/10, NSP."""
  d, inputs = original_runs
  ours = read_records(_ours(d, inputs, "austen_seed1")[0])
  assert_same(read_records(_outputs(d, "austen_seed1", "orig")[0]), ours)
  assert len(ours) > 1000
  vocab = tokenization.load_vocab(VOCAB)
  cls, sep, mask = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
  masked = kept = total_pred = 0
  for r in ours:
    n = int(r["input_mask"].sum())
    k = int(r["masked_lm_weights"].sum())
    # 15% of the sequence (specials included), rounded half-even, capped at 20.
    assert k == min(20, max(1, round(n * 0.15))), (n, k)
    pos, labels = r["masked_lm_positions"][:k], r["masked_lm_ids"][:k]
    assert (np.diff(pos) > 0).all() and 0 < pos.min() and pos.max() < n - 1
    assert not np.isin(labels, [cls, sep]).any()  # specials are never masked
    shown = r["input_ids"][pos]
    total_pred += k
    masked += int((shown == mask).sum())
    kept += int((shown == labels).sum())
  rand = total_pred - masked - kept
  assert total_pred > 20000
  assert abs(masked / total_pred - 0.8) < 0.02
  assert abs(kept / total_pred - 0.1) < 0.02
  assert abs(rand / total_pred - 0.1) < 0.02
  # The original makes B random whenever a chunk holds one segment (long
  # sentences), so faithful mode has a little more than 50% random next.
  nsp = np.mean([int(r["next_sentence_labels"][0]) for r in ours])
  assert 0.5 <= nsp < 0.6, nsp


def test_bad_inputs(tmp_path):
  out = tmp_path / "out.tfrecord"
  p = run_tool(["tools/create_pretraining_data.py", "--input_file=/nonexistent/*.txt",
                "--output_file=%s" % out, "--vocab_file=" + VOCAB], check=False)
  assert p.returncode != 0 and "/nonexistent/*.txt" in p.stderr
  assert not out.exists()
  bad_vocab = tmp_path / "vocab.txt"
  bad_vocab.write_text("[PAD]\nhello\n")
  p = run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
                "--output_file=%s" % out, "--vocab_file=%s" % bad_vocab], check=False)
  assert p.returncode != 0 and str(bad_vocab) in p.stderr and "[CLS]" in p.stderr
  assert not out.exists()
  with pytest.raises(errors.InputError, match="--dupe_factor"):
    faithful.create_pretraining_data(SAMPLE_TEXT, str(out), VOCAB, dupe_factor=0)
  with pytest.raises(errors.InputError, match="--max_seq_length"):
    faithful.create_pretraining_data(SAMPLE_TEXT, str(out), VOCAB, max_seq_length=4)
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n  \n")
  with pytest.raises(errors.InputError, match="no text"):
    faithful.create_pretraining_data(str(empty), str(out), VOCAB)
  assert not out.exists()
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_cased_vocab_with_lower_case_warns(tmp_path, caplog):
  with open(VOCAB, encoding="utf-8") as f:
    words = f.read().splitlines()
  cased = tmp_path / "cased_vocab.txt"
  upper = [w.capitalize() for w in words[2000:2200]]  # (a duplicate line is refused)
  cased.write_text("\n".join(words + [w for w in upper if w not in words]) + "\n",
                   encoding="utf-8")
  vocab = tokenization.load_vocab(str(cased))
  with caplog.at_level("WARNING"):
    tokenization.warn_if_case_mismatch(vocab, True, str(cased))
  assert "looks cased but --do_lower_case=True" in caplog.text and str(cased) in caplog.text
  caplog.clear()
  with caplog.at_level("WARNING"):
    tokenization.warn_if_case_mismatch(tokenization.load_vocab(VOCAB), True, VOCAB)
  assert not caplog.text


# --- a corpus of one document (issue 63 item 6) ------------------------------


def test_a_corpus_without_blank_lines_is_warned_about_by_every_data_tool(tmp_path):
  """The format wants a blank line between documents; a corpus without one
  is ONE document, every random-next segment then comes from it. Each data
  tool (faithful, scalable, documents) says so in one warning line naming
  the file and the fix, exits 0 and writes its output whole; the sample
  corpus (blank lines between its documents) gets no such line."""
  with open(SAMPLE_TEXT, encoding="utf-8") as f:
    lines = [l for l in f.read().splitlines() if l.strip()][:40]
  corpus = tmp_path / "no_blank_lines.txt"
  corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
  want = ("warning: --input_file %s holds a single document (no blank line between "
          "documents): every random-next segment would come from that same document. "
          "Put a blank line between documents (one sentence per line), as "
          "create_pretraining_data.py's format wants" % corpus)
  common = ["--vocab_file=" + VOCAB, "--max_seq_length=64", "--max_predictions_per_seq=10"]
  cases = {
      "faithful": (["tools/create_pretraining_data.py", "--dupe_factor=1"] + common,
                   "faithful.tfrecord"),
      "scalable": (["tools/create_pretraining_data.py", "--dupe_factor=1", "--num_workers=1"]
                   + common, "scalable"),
      "documents": (["tools/create_pretraining_documents.py", "--vocab_file=" + VOCAB],
                    "docs.tfrecord"),
  }
  for name, (command, output) in cases.items():
    out = str(tmp_path / output)
    p = run_tool(command + ["--input_file=" + str(corpus), "--output_file=" + out],
                 check=False)
    assert p.returncode == 0, (name, p.stderr[-2000:])
    assert [l for l in p.stderr.splitlines() if l.strip()] == [want], (name, p.stderr)
    written = sorted(f for f in os.listdir(tmp_path) if f.startswith(output))
    assert written == ([output] if name != "scalable" else [output + "-00000-of-00001"]), (
        name, written)  # no temporary file left
    assert read_records(str(tmp_path / written[0])), name
  assert documents.count_documents([SAMPLE_TEXT]) == 2
  assert documents.few_documents_warning(SAMPLE_TEXT) is None
  assert documents.count_documents([str(corpus)], at_most=5) == 1
