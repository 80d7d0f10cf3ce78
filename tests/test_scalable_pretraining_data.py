"""Scalable pretraining data (--num_workers >= 1): statistics, invariants,
determinism, sharding and atomic output, on real text (the Austen slice)."""

import os

import numpy as np
import pytest

from bert_tf import tokenization
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import sharded as scalable
from bert_tf.data.pretraining import tokens
from conftest import AUSTEN_SLICE, SAMPLE_TEXT, VOCAB, run_tool

SEQ, PRED = 128, 20  # 15% of 128 is 19: the cap of 20 never binds
FLAGS = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=40,
             random_seed=1, window_tokens=60000)


def parse(files):
  """All records of ``files`` as a dict of numpy arrays ``[records, ...]``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = {name: tf.io.FixedLenFeature([SEQ], tf.int64)
          for name in ("input_ids", "input_mask", "segment_ids")}
  spec.update({name: tf.io.FixedLenFeature([PRED], tf.int64)
               for name in ("masked_lm_positions", "masked_lm_ids")})
  spec["masked_lm_weights"] = tf.io.FixedLenFeature([PRED], tf.float32)
  spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
  ds = tf.data.TFRecordDataset(files).batch(8192).map(
      lambda x: tf.io.parse_example(x, spec))
  parts = list(ds.as_numpy_iterator())
  return {k: np.concatenate([p[k] for p in parts]) for k in spec}


@pytest.fixture(scope="module")
def run2(tmp_path_factory):
  """Two workers, two shards, 40 passes over the Austen slice (~45k instances)."""
  d = tmp_path_factory.mktemp("scalable")
  stats = scalable.create_sharded([AUSTEN_SLICE], str(d / "out"), VOCAB, num_workers=2,
                                  num_shards=2, **FLAGS)
  return d, stats, parse(stats["files"])


def test_shards_and_counts(run2):
  d, stats, r = run2
  assert stats["files"] == [str(d / "out-00000-of-00002"), str(d / "out-00001-of-00002")]
  assert sorted(os.listdir(d)) == ["out-00000-of-00002", "out-00001-of-00002"]
  assert len(r["input_ids"]) == stats["num_instances"] == sum(stats["counts"]) >= 40000
  assert min(stats["counts"]) > 0.3 * stats["num_instances"]
  assert len(stats["worker_peak_rss_mb"]) == 2


def test_masking_and_nsp_statistics(run2):
  _, _, r = run2
  ids, labels = r["input_ids"], r["masked_lm_ids"]
  n = r["input_mask"].sum(1)
  m = r["masked_lm_weights"].sum(1).astype(np.int64)
  # Per instance exactly the original's count: 15% of the length with the
  # specials, rounded half to even, at least 1, capped (never binding here).
  np.testing.assert_array_equal(m, np.minimum(PRED, np.maximum(1, np.rint(0.15 * n))))
  assert (m < PRED).all()
  assert abs(m.sum() / n.sum() - 0.15) < 0.01
  assert abs(m.sum() / (n - 3).sum() - 0.15) < 0.01  # of the non-special tokens
  valid = np.arange(PRED)[None, :] < m[:, None]
  pos = r["masked_lm_positions"]
  # Every non-special position is equally likely: the selection rate in A and
  # in B agree within a point.
  seg = r["segment_ids"]
  len_b = seg.sum(1) - 1
  len_a = n - len_b - 3
  in_b = pos >= (len_a + 2)[:, None]
  rate_a = (valid & ~in_b).sum() / len_a.sum()
  rate_b = (valid & in_b).sum() / len_b.sum()
  assert abs(rate_a - rate_b) < 0.01, (rate_a, rate_b)
  tok = tokenization.FullTokenizer(VOCAB)
  mask_id = tok.vocab["[MASK]"]
  shown = np.take_along_axis(ids, pos, axis=1)[valid]
  lab = labels[valid]
  total = valid.sum()
  assert total > 600000
  masked = (shown == mask_id).mean()
  kept = (shown == lab).mean()
  rand = 1.0 - masked - kept
  assert abs(masked - 0.8) < 0.01 and abs(kept - 0.1) < 0.01 and abs(rand - 0.1) < 0.01
  is_random = r["next_sentence_labels"][:, 0].mean()
  assert abs(is_random - 0.5) < 0.01, is_random


def test_random_subsets_are_uniform():
  """Every m-subset of range(c) is equally likely (C(6,3) = 20 subsets), for
  rows with different c and m in one call; a rate off by 5% fails (the
  expected counts are 10,000 and 50,000, standard deviations 1% and 0.4%)."""
  rng = np.random.default_rng(7)
  rows = 400_000
  c = np.where(np.arange(rows) % 2 == 0, 6, 4).astype(np.int64)
  m = np.where(c == 6, 3, 1).astype(np.int64)
  got = scalable.random_subsets(rng, c, m, 4, fill=99)
  assert (got[m == 1][:, 1:] == 99).all() and (got[:, 3] == 99).all()
  for size, k, n_subsets in ((6, 3, 20), (4, 1, 4)):
    sub = np.sort(got[c == size][:, :k], axis=1)
    assert ((sub >= 0) & (sub < size)).all()
    assert (np.diff(sub, axis=1) > 0).all()  # distinct
    _, counts = np.unique(sub, axis=0, return_counts=True)
    assert len(counts) == n_subsets
    expected = (rows // 2) / n_subsets
    assert np.abs(counts / expected - 1).max() < 0.05, counts


def test_invariants(run2):
  _, _, r = run2
  tok = tokenization.FullTokenizer(VOCAB)
  cls_id, sep_id = tok.vocab["[CLS]"], tok.vocab["[SEP]"]
  ids, mask, seg = r["input_ids"], r["input_mask"], r["segment_ids"]
  n = mask.sum(1)
  m = r["masked_lm_weights"].sum(1).astype(np.int64)
  j = np.arange(SEQ)[None, :]
  np.testing.assert_array_equal(mask, (j < n[:, None]).astype(np.int64))
  assert (ids[j >= n[:, None]] == 0).all() and (seg[j >= n[:, None]] == 0).all()
  len_b = seg.sum(1) - 1
  len_a = n - len_b - 3
  assert (len_a >= 1).all() and (len_b >= 1).all() and (n <= SEQ).all()
  np.testing.assert_array_equal(seg, ((j >= (len_a + 2)[:, None]) &
                                      (j < n[:, None])).astype(np.int64))
  rows = np.arange(len(n))
  assert (ids[:, 0] == cls_id).all()
  assert (ids[rows, len_a + 1] == sep_id).all() and (ids[rows, n - 1] == sep_id).all()
  pos = r["masked_lm_positions"]
  valid = np.arange(PRED)[None, :] < m[:, None]
  w = r["masked_lm_weights"]
  np.testing.assert_array_equal(w, valid.astype(np.float32))
  assert (pos[~valid] == 0).all() and (r["masked_lm_ids"][~valid] == 0).all()
  # Positions strictly increasing, never a special token.
  diffs = np.diff(np.where(valid, pos, SEQ + np.arange(PRED)), axis=1)
  assert (diffs > 0).all()
  p = np.where(valid, pos, 1)
  assert (p >= 1).all() and (p < (n - 1)[:, None]).all() and (p != (len_a + 1)[:, None]).all()
  assert not np.isin(r["masked_lm_ids"][valid], [cls_id, sep_id]).any()


def test_labels_recover_the_text(run2):
  """Putting the labels back gives spans of the real tokenized corpus; an
  IsNext pair that was not truncated is one contiguous span (B follows A)."""
  _, _, r = run2
  memo = tokens.MemoTokenizer(tokenization.FullTokenizer(VOCAB))
  stream = []
  for line in documents.read_lines(AUSTEN_SLICE):
    stream.extend(memo.tokenize_to_ids(line) if line else [-1])
  corpus = np.array(stream, np.int32).tobytes()

  def occurs(span):
    b = np.asarray(span, np.int32).tobytes()
    at = corpus.find(b)
    while at >= 0 and at % 4:
      at = corpus.find(b, at + 1)
    return at >= 0

  ids = r["input_ids"].copy()
  n = r["input_mask"].sum(1)
  m = r["masked_lm_weights"].sum(1).astype(np.int64)
  len_b = r["segment_ids"].sum(1) - 1
  len_a = n - len_b - 3
  checked_next = 0
  for i in np.random.default_rng(0).choice(len(n), 300, replace=False):
    ids[i, r["masked_lm_positions"][i, :m[i]]] = r["masked_lm_ids"][i, :m[i]]
    a = ids[i, 1:len_a[i] + 1]
    b = ids[i, len_a[i] + 2:n[i] - 1]
    assert occurs(a) and occurs(b), i
    if r["next_sentence_labels"][i, 0] == 0 and n[i] < SEQ:
      assert occurs(np.concatenate([a, b])), i
      checked_next += 1
  assert checked_next > 10


def test_deterministic_and_independent_of_worker_count(run2, tmp_path):
  d, stats, _ = run2
  one = scalable.create_sharded([AUSTEN_SLICE], str(tmp_path / "one"), VOCAB,
                                num_workers=1, num_shards=2, **FLAGS)
  for a, b in zip(stats["files"], one["files"]):
    with open(a, "rb") as fa, open(b, "rb") as fb:
      assert fa.read() == fb.read()
  other = scalable.create_sharded([SAMPLE_TEXT], str(tmp_path / "s2"), VOCAB,
                                  num_workers=1, **dict(FLAGS, random_seed=2))
  again = scalable.create_sharded([SAMPLE_TEXT], str(tmp_path / "s1"), VOCAB,
                                  num_workers=1, **FLAGS)
  again2 = scalable.create_sharded([SAMPLE_TEXT], str(tmp_path / "s1b"), VOCAB,
                                   num_workers=1, **FLAGS)
  read = lambda p: open(p, "rb").read()  # pylint: disable=unnecessary-lambda-assignment
  assert read(again["files"][0]) == read(again2["files"][0])
  assert read(again["files"][0]) != read(other["files"][0])


def test_failure_leaves_no_output(tmp_path):
  out = tmp_path / "out"
  (tmp_path / "adir").mkdir()
  with pytest.raises(scalable.InputError, match="adir"):
    scalable.create_sharded([AUSTEN_SLICE, str(tmp_path / "adir")], str(out), VOCAB,
                            num_workers=2, dupe_factor=1, window_tokens=20000)
  assert os.listdir(tmp_path) == ["adir"]
  with pytest.raises(scalable.InputError, match="--num_workers"):
    scalable.create_sharded([SAMPLE_TEXT], str(out), VOCAB, num_workers=0)


def test_cli_scalable(tmp_path):
  out = tmp_path / "data"
  p = run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
                "--output_file=%s" % out, "--vocab_file=" + VOCAB, "--num_workers=2",
                "--num_shards=3", "--dupe_factor=2"])
  assert sorted(os.listdir(tmp_path)) == ["data-%05d-of-00003" % i for i in range(3)]
  assert "to 3 shards" in p.stdout and "it/s" not in p.stderr
  p = run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
                "--output_file=%s" % (tmp_path / "w"), "--vocab_file=" + VOCAB,
                "--num_workers=2", "--do_whole_word_mask"], check=False)
  assert p.returncode != 0 and "faithful mode" in p.stderr
