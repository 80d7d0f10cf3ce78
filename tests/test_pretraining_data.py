"""Faithful pretraining data: record-for-record identical to the original script."""

import os

import numpy as np
import pytest

from bert_tf.data import pretraining_data
from conftest import AUSTEN_SLICE, SAMPLE_TEXT, VOCAB, read_records, run_tool


def run_original(tmp_path, input_file, seed, **flags):
  out = str(tmp_path / ("orig_%d.tfrecord" % seed))
  args = ["-m", "bert.create_pretraining_data", "--input_file=" + input_file,
          "--output_file=" + out, "--vocab_file=" + VOCAB, "--random_seed=%d" % seed]
  args += ["--%s=%s" % kv for kv in flags.items()]
  run_tool(args, cwd=str(tmp_path))
  return read_records(out)


def run_ours(tmp_path, input_file, seed, **flags):
  out = str(tmp_path / ("ours_%d.tfrecord" % seed))
  args = ["tools/create_pretraining_data.py", "--input_file=" + input_file,
          "--output_file=" + out, "--vocab_file=" + VOCAB, "--random_seed=%d" % seed]
  args += ["--%s=%s" % kv for kv in flags.items()]
  run_tool(args)
  return read_records(out)


def assert_same(a, b):
  assert len(a) == len(b) > 0
  for i, (x, y) in enumerate(zip(a, b)):
    assert sorted(x) == sorted(y) == sorted(pretraining_data.FEATURE_NAMES)
    for k in x:
      assert x[k].dtype.kind == y[k].dtype.kind, (i, k)
      np.testing.assert_array_equal(x[k], y[k], err_msg="record %d %s" % (i, k))


@pytest.mark.parametrize("seed,flags", [
    (12345, {"dupe_factor": 2}),
    (7, {"dupe_factor": 3, "short_seq_prob": 0.5, "max_seq_length": 64,
         "max_predictions_per_seq": 10}),
])
def test_identical_to_original_sample_text(original_bert, tmp_path, seed, flags):
  assert_same(run_original(tmp_path, SAMPLE_TEXT, seed, **flags),
              run_ours(tmp_path, SAMPLE_TEXT, seed, **flags))


def test_identical_to_original_two_files_and_real_corpus(original_bert, tmp_path):
  # Two input files: documents continue across files, as in the original.
  with open(AUSTEN_SLICE, encoding="utf-8") as f:
    text = f.read()[:60000]
  a, b = tmp_path / "a.txt", tmp_path / "b.txt"
  a.write_text(text[:30000], encoding="utf-8")
  b.write_text(text[30000:], encoding="utf-8")
  files = "%s,%s" % (a, b)
  assert_same(run_original(tmp_path, files, 3, dupe_factor=1),
              run_ours(tmp_path, files, 3, dupe_factor=1))


def test_masking_statistics_on_real_text():
  import random  # pylint: disable=g-import-not-at-top
  from bert_tf import tokenization  # pylint: disable=g-import-not-at-top
  tok = tokenization.FullTokenizer(VOCAB)
  docs = pretraining_data.read_documents([AUSTEN_SLICE], tok)
  insts = pretraining_data.create_training_instances(
      docs, list(tok.vocab.keys()), random.Random(1), dupe_factor=1)
  assert len(insts) > 1000
  masked = kept = rand = total_pred = 0
  for inst in insts:
    # 15% of the sequence (specials included), rounded half-even, capped at 20.
    assert len(inst.masked_lm_positions) == min(20, max(1, round(len(inst.tokens) * 0.15)))
    assert inst.masked_lm_positions == sorted(set(inst.masked_lm_positions))
    for pos, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
      total_pred += 1
      t = inst.tokens[pos]
      assert label not in ("[CLS]", "[SEP]")  # specials are never masked
      masked += t == "[MASK]"
      kept += t == label
  rand = total_pred - masked - kept
  assert abs(masked / total_pred - 0.8) < 0.02
  assert abs(kept / total_pred - 0.1) < 0.02
  assert abs(rand / total_pred - 0.1) < 0.02
  # The original makes B random whenever a chunk holds one segment (long
  # sentences), so faithful mode has a little more than 50% random next.
  nsp = np.mean([i.is_random_next for i in insts])
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
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_non_utf8_bytes_are_dropped(original_bert, tmp_path):
  """Invalid UTF-8 is dropped, as the original's convert_to_unicode("ignore")
  intends (the original script itself now raises UnicodeDecodeError in
  GFile's strict text mode): our records equal the original's on the same
  text with the bad bytes removed."""
  with open(SAMPLE_TEXT, "rb") as f:
    clean = f.read()
  dirty = clean.replace(b"the ", b"th\xffe\x80 ", 5).replace(b"\n\n", b"\xfe\n\n", 1)
  assert dirty.decode("utf-8", "ignore").encode("utf-8") == clean
  (tmp_path / "dirty.txt").write_bytes(dirty)
  (tmp_path / "clean.txt").write_bytes(clean)
  assert_same(run_original(tmp_path, str(tmp_path / "clean.txt"), 5, dupe_factor=2),
              run_ours(tmp_path, str(tmp_path / "dirty.txt"), 5, dupe_factor=2))


def test_cased_vocab_with_lower_case_warns(tmp_path, caplog):
  from bert_tf import tokenization  # pylint: disable=g-import-not-at-top
  with open(VOCAB, encoding="utf-8") as f:
    words = f.read().splitlines()
  cased = tmp_path / "cased_vocab.txt"
  cased.write_text("\n".join(words + [w.capitalize() for w in words[2000:2200]]) + "\n",
                   encoding="utf-8")
  vocab = tokenization.load_vocab(str(cased))
  with caplog.at_level("WARNING"):
    tokenization.warn_if_case_mismatch(vocab, True, str(cased))
  assert "looks cased but --do_lower_case=True" in caplog.text and str(cased) in caplog.text
  caplog.clear()
  with caplog.at_level("WARNING"):
    tokenization.warn_if_case_mismatch(tokenization.load_vocab(VOCAB), True, VOCAB)
  assert not caplog.text
