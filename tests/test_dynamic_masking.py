"""Dynamic pretraining pipeline: documents tool, on-the-fly pairs and masks.

Real text (the Austen slice) through ``tools/create_pretraining_documents.py``;
statistics on >= 10,000 examples; invariants checked against the original
rules. The documents and the truncation lengths are compared with the
original code itself (bert-tensorflow 1.0.4's ``create_pretraining_data``,
run in a subprocess by ``tests/original_subprocess.py``).
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf import errors
from bert_tf.data.pretraining import dynamic as dm
from bert_tf.data.pretraining import faithful
from bert_tf.data.pretraining import input as pretraining_input
import original_subprocess
from conftest import AUSTEN_SLICE, SAMPLE_TEXT, VOCAB, run_tool

S, P = 128, 20
PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103
NUM_EXAMPLES = 10016  # 313 batches of 32


@pytest.fixture(scope="module")
def vocab_words():
  return list(tokenization.load_vocab(VOCAB).keys())


# The truncation grid: lengths 1..39 of A and B, four budgets.
TRUNCATE_CASES = [[a, b, m] for m in (2, 7, 30, 31) for a in range(1, 40)
                  for b in range(1, 40)]


# Two files of edge cases for the document reader: blank and whitespace-only
# lines (document ends), lines that tokenize to nothing (dropped, no document
# end), one-token lines, \r\n, a BOM, Unicode line separators inside a line,
# no final newline, and a document that continues into the next file.
EDGE_FILES = (
    "\ufeff\n\n  \nOne\n\x00\x07\n\u200b\nTwo words.\r\nthree\n \t \n\nA\n"
    "B C\n\n\n\n\u00c9t\u00e9 x\u2028y\x85z\x0bw\nsame document",
    "continues here\nand\n\nlast\x1c line\n  \n\t")


@pytest.fixture(scope="module")
def original(original_bert, tmp_path_factory):
  """The original's documents (as its ``create_training_instances`` reads
  them, before its shuffle) of the Austen slice, the sample text and
  :data:`EDGE_FILES`, and its ``truncate_seq_pair`` lengths on
  :data:`TRUNCATE_CASES`: one subprocess."""
  del original_bert
  d = tmp_path_factory.mktemp("edge")
  edge = []
  for i, text in enumerate(EDGE_FILES):
    edge.append(str(d / ("edge%d.txt" % i)))
    with open(edge[-1], "w", encoding="utf-8", newline="") as f:
      f.write(text)
  austen, sample, edge_docs, lengths = original_subprocess.call([
      ("read_documents", {"input_files": [AUSTEN_SLICE], "vocab_file": VOCAB}),
      ("read_documents", {"input_files": [SAMPLE_TEXT], "vocab_file": VOCAB}),
      ("read_documents", {"input_files": edge, "vocab_file": VOCAB}),
      ("truncate_seq_pair", {"cases": TRUNCATE_CASES})])
  return {"austen": austen, "sample": sample, "edge_files": edge,
          "edge": edge_docs, "truncated": lengths}


@pytest.fixture(scope="module")
def austen_docs(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("docs") / "austen.tfrecord")
  run_tool(["tools/create_pretraining_documents.py", "--input_file=" + AUSTEN_SLICE,
            "--output_file=" + out, "--vocab_file=" + VOCAB])
  return out


def read_doc_records(path):
  docs = []
  for r in tf.data.TFRecordDataset(path):
    ex = tf.train.Example.FromString(r.numpy())
    ids = list(ex.features.feature["token_ids"].int64_list.value)
    lens = list(ex.features.feature["sentence_lengths"].int64_list.value)
    sents, o = [], 0
    for n in lens:
      sents.append(ids[o:o + n])
      o += n
    assert o == len(ids)
    docs.append(sents)
  return docs


def take(ds, n_batches):
  out = {}
  for b in ds.take(n_batches):
    for k, v in b.items():
      out.setdefault(k, []).append(v.numpy())
  return {k: np.concatenate(v) for k, v in out.items()}


def unmasked(ex):
  """input_ids with the labels put back at the predicted positions."""
  ids = ex["input_ids"].copy()
  rows, cols = np.nonzero(ex["masked_lm_weights"])
  ids[rows, ex["masked_lm_positions"][rows, cols]] = ex["masked_lm_ids"][rows, cols]
  return ids


def check_invariants(ex, max_pred, whole_word=False, vocab_words=None, seq_length=S):
  """Every structural rule of an original pretraining example, per row."""
  n = len(ex["input_ids"])
  assert ex["input_ids"].dtype == np.int32 and ex["masked_lm_weights"].dtype == np.float32
  lengths = ex["input_mask"].sum(1)
  ar = np.arange(seq_length)[None, :]
  # input_mask is a prefix of ones; ids and segment ids are 0 beyond it.
  np.testing.assert_array_equal(ex["input_mask"], (ar < lengths[:, None]).astype(np.int32))
  assert not ex["input_ids"][ar >= lengths[:, None]].any()
  assert not ex["segment_ids"][ar >= lengths[:, None]].any()
  orig = unmasked(ex)
  assert (orig[:, 0] == CLS).all()
  w = ex["masked_lm_weights"]
  assert set(np.unique(w)) <= {0.0, 1.0}
  npred = w.sum(1).astype(int)
  assert (npred >= 1).all() and (npred <= max_pred).all()  # the cap holds
  for i in range(n):
    L = lengths[i]
    row = orig[i, :L]
    seps = np.nonzero(row == SEP)[0]
    assert len(seps) == 2 and seps[1] == L - 1, row
    a_len, b_len = seps[0] - 1, L - 2 - seps[0]
    assert a_len >= 1 and b_len >= 1
    # [CLS] A [SEP] -> segment 0; B [SEP] -> segment 1.
    np.testing.assert_array_equal(ex["segment_ids"][i, :L],
                                  [0] * (seps[0] + 1) + [1] * (L - seps[0] - 1))
    k = npred[i]
    pos = ex["masked_lm_positions"][i]
    # real predictions first, weights 1.0; zero padding after.
    assert (w[i, :k] == 1.0).all() and not w[i, k:].any()
    assert not pos[k:].any() and not ex["masked_lm_ids"][i, k:].any()
    p = pos[:k]
    assert (np.diff(p) > 0).all()                     # unique, ascending
    assert p.min() > 0 and p.max() < L - 1
    assert not np.isin(p, seps).any()                 # specials never masked
    assert not np.isin(ex["masked_lm_ids"][i, :k], [CLS, SEP, PAD]).any()
    if not whole_word:
      assert k == min(max_pred, max(1, round(L * 0.15))), (k, L)
    else:
      # the original's candidate groups: a ## piece joins the previous one.
      chosen = set(p.tolist())
      groups = []
      for j in range(L):
        if row[j] in (CLS, SEP):
          continue
        if groups and vocab_words[row[j]].startswith("##"):
          groups[-1].append(j)
        else:
          groups.append([j])
      for g in groups:
        hit = [j in chosen for j in g]
        assert all(hit) or not any(hit), (g, [vocab_words[row[j]] for j in g])
      assert k <= min(max_pred, max(1, round(L * 0.15)))
  return orig, lengths


def doc_bytes(docs):
  """Each document's ids as one int32 byte string, for contiguity checks."""
  return [np.array([t for s in d for t in s], np.int32).tobytes() for d in docs]


def split_ab(orig_row, length):
  row = orig_row[:length]
  sep = int(np.nonzero(row == SEP)[0][0])
  return row[1:sep].astype(np.int32), row[sep + 1:length - 1].astype(np.int32)


def locate(blobs, seq):
  """{document: np.ndarray of token offsets} of the aligned occurrences of seq."""
  b = seq.tobytes()
  hits = {}
  for d, blob in enumerate(blobs):
    found = []
    start = blob.find(b)
    while start >= 0:
      if start % 4 == 0:
        found.append(start // 4)
      start = blob.find(b, start + 1)
    if found:
      hits[d] = np.array(found)
  return hits


def gap_after(blobs, a, b):
  """Smallest token gap from the end of A to the start of B in one document
  (None when B never follows A in the same document)."""
  at, bt = locate(blobs, a), locate(blobs, b)
  best = None
  for d in set(at) & set(bt):
    ends = np.sort(at[d] + len(a))
    for pb in bt[d]:
      k = np.searchsorted(ends, pb, side="right")
      if k:
        gap = pb - ends[k - 1]
        best = gap if best is None else min(best, gap)
  return best


def test_tool_writes_the_original_documents(austen_docs, original, tmp_path):
  # Same documents, sentences and ids as the original's reader (before its shuffle).
  got = read_doc_records(austen_docs)
  assert len(got) == len(original["austen"]) == 40
  assert sum(len(d) for d in got) > 3000
  for i, (g, r) in enumerate(zip(got, original["austen"])):
    assert g == r, i
  # Atomic output: no temporary sibling left behind.
  assert os.listdir(os.path.dirname(austen_docs)) == ["austen.tfrecord"]
  # Two shards: round-robin, the same documents.
  a, b = str(tmp_path / "s0.tfrecord"), str(tmp_path / "s1.tfrecord")
  num_docs, _, _ = dm.write_documents(SAMPLE_TEXT, "%s,%s" % (a, b), VOCAB)
  ref = original["sample"]
  assert num_docs == len(ref) == 3
  assert read_doc_records(a) + read_doc_records(b) == ref[0::2] + ref[1::2]
  # The edge cases, two files read as one stream.
  edge = str(tmp_path / "edge.tfrecord")
  num_docs, _, _ = dm.write_documents(",".join(original["edge_files"]), edge, VOCAB)
  assert num_docs == len(original["edge"]) == 4
  assert [len(d) for d in original["edge"]] == [3, 2, 4, 1]
  assert read_doc_records(edge) == original["edge"]
  # Empty glob: a clear error naming it, and no output.
  with pytest.raises(errors.InputError, match="nothing"):
    dm.write_documents(str(tmp_path / "nothing*.txt"), str(tmp_path / "x.tfrecord"),
                       VOCAB)
  assert not glob.glob(str(tmp_path / "*x.tfrecord*"))


def test_truncated_lengths_match_original(original):
  cases = np.array(TRUNCATE_CASES)
  want = np.array(original["truncated"])
  assert want.shape == (len(cases), 2)
  for max_num in (2, 7, 30, 31):
    rows = cases[:, 2] == max_num
    na, nb = dm.truncated_lengths(tf.constant(cases[rows, 0]),
                                  tf.constant(cases[rows, 1]), max_num)
    got = np.stack([na.numpy(), nb.numpy()], 1)
    bad = np.nonzero((got != want[rows]).any(1))[0]
    assert not len(bad), [(cases[rows][i].tolist(), got[i].tolist(), want[rows][i].tolist())
                          for i in bad[:5]]
  # The grid truncates (the original cuts each pair to the budget).
  assert (want.sum(1) == np.minimum(cases[:, :2].sum(1), cases[:, 2])).all()


@pytest.mark.slow
def test_statistics_and_invariants_on_austen(austen_docs, monkeypatch):
  monkeypatch.setattr(dm, "INSTANCE_SHUFFLE_BUFFER", 2000)
  ds = dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 32, S, P, seed=7)
  # The same element structure as the static pipeline's.
  static = pretraining_input.pretraining_dataset(austen_docs, 32, S, P)
  assert ds.element_spec == static.element_spec
  ex = take(ds, NUM_EXAMPLES // 32)
  assert len(ex["input_ids"]) == NUM_EXAMPLES
  orig, lengths = check_invariants(ex, P)

  # Selection: 15% of the non-special tokens (the original's count is 15%
  # of the length with the specials, so 15.2% at full length).
  w = ex["masked_lm_weights"] > 0
  sel_rate = w.sum() / (lengths - 3).sum()
  assert abs(sel_rate - 0.15) < 0.01, sel_rate
  # 80% [MASK], 10% random, 10% unchanged.
  rows, cols = np.nonzero(w)
  shown = ex["input_ids"][rows, ex["masked_lm_positions"][rows, cols]]
  label = ex["masked_lm_ids"][rows, cols]
  f_mask = np.mean(shown == MASK)
  f_keep = np.mean((shown == label) & (label != MASK))
  f_rand = 1 - f_mask - f_keep
  assert abs(f_mask - 0.8) < 0.01 and abs(f_keep - 0.1) < 0.01, (f_mask, f_keep)
  assert abs(f_rand - 0.1) < 0.01, f_rand
  print("selection %.4f mask %.4f random %.4f keep %.4f over %d predictions" %
        (sel_rate, f_mask, f_rand, f_keep, len(label)))

  # Labels recover real text: A and B are contiguous runs of one document.
  # IsNext: B follows A in the same document (right after it when nothing
  # was truncated, i.e. shorter than S); random next: B almost never does.
  blobs = doc_bytes(read_doc_records(austen_docs))
  labels = ex["next_sentence_labels"][:, 0]
  adjacent_random = n_random = 0
  for i in range(0, NUM_EXAMPLES, 5):
    a, b = split_ab(orig[i], lengths[i])
    assert locate(blobs, a) and locate(blobs, b), i
    gap = gap_after(blobs, a, b)
    if labels[i] == 0:
      assert gap is not None, i
      assert lengths[i] == S or gap == 0, (i, gap)
    else:
      n_random += 1
      adjacent_random += gap == 0
  assert adjacent_random / n_random < 0.02

  # Fresh masks each epoch (~11 epochs here): the same unmasked example seen
  # again is masked differently.
  seen = {}
  for i in np.nonzero(lengths >= 64)[0]:
    key = orig[i, :lengths[i]].tobytes()
    seen.setdefault(key, []).append(ex["masked_lm_positions"][i].tobytes())
  repeats = [v for v in seen.values() if len(v) > 1]
  assert len(repeats) > 100
  same = np.mean([len(set(v)) < len(v) for v in repeats])
  assert same < 0.05, same


def relined(docs, max_piece):
  """The same documents with every sentence cut into pieces of <= max_piece ids."""
  return [[s[i:i + max_piece] for s in d for i in range(0, len(s), max_piece)]
          for d in docs]


@pytest.mark.slow
def test_next_sentence_coin(austen_docs, tmp_path, monkeypatch):
  # Pieces of <= 4 ids and one target length: almost every chunk has >= 2
  # segments, so the label is the original's 50/50 coin (a one-segment
  # chunk, ~0.5% here, is always random next, as in the original).
  monkeypatch.setattr(dm, "INSTANCE_SHUFFLE_BUFFER", 2000)
  path = str(tmp_path / "short_lines.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    for d in relined(read_doc_records(austen_docs), 4):
      w.write(dm.document_to_example(d))
  ds = dm.dynamic_pretraining_dataset(path, VOCAB, 500, 32, 5, short_seq_prob=0.0,
                                      seed=3)
  ex = take(ds, 80)
  assert len(ex["input_ids"]) == 40000
  is_next = np.mean(ex["next_sentence_labels"] == 0)
  assert abs(is_next - 0.5) < 0.01, is_next
  print("IsNext %.4f over %d examples" % (is_next, len(ex["input_ids"])))
  check_invariants({k: v[:2000] for k, v in ex.items()}, 5, seq_length=32)


def test_whole_word_masking_and_cap(austen_docs, vocab_words, monkeypatch):
  monkeypatch.setattr(dm, "INSTANCE_SHUFFLE_BUFFER", 1000)
  cap = 10
  ds = dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 32, S, cap,
                                      do_whole_word_mask=True, seed=3)
  ex = take(ds, 60)
  # Whole words: every piece of a candidate group is masked, or none.
  check_invariants(ex, cap, whole_word=True, vocab_words=vocab_words)
  # The cap binds (round(128 * 0.15) = 19 > 10) and is reached.
  npred = ex["masked_lm_weights"].sum(1)
  assert np.mean(npred == cap) > 0.8
  # ## pieces are predicted (with their words).
  labels = ex["masked_lm_ids"][ex["masked_lm_weights"] > 0]
  assert np.mean([vocab_words[t].startswith("##") for t in labels]) > 0.02


@pytest.mark.slow  # five pipelines built and started
def test_determinism_seed_and_eval_pass(austen_docs, monkeypatch):
  monkeypatch.setattr(dm, "INSTANCE_SHUFFLE_BUFFER", 1000)
  def first(seed, n):
    return take(dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 32, S, P, seed=seed),
                n)
  a, b, c = first(5, 3), first(5, 3), first(6, 1)
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])
  assert not np.array_equal(a["input_ids"][:32], c["input_ids"])
  # Evaluation: one ordered, repeatable pass (seed 0 by default).
  ev1 = take(dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 64, S, P,
                                            is_training=False), -1)
  ev2 = take(dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 64, S, P,
                                            is_training=False, seed=0), 2)
  for k in ev1:
    np.testing.assert_array_equal(ev1[k][:128], ev2[k])
  n = len(ev1["input_ids"])
  assert 800 < n < 1600  # ~115k tokens / ~120 per example, plus put-backs
  check_invariants(ev1, P)


def test_no_nsp_takes_the_real_continuation(austen_docs, monkeypatch):
  monkeypatch.setattr(dm, "INSTANCE_SHUFFLE_BUFFER", 1000)
  ex = take(dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 32, S, P, nsp=False,
                                           seed=2), 20)
  assert not ex["next_sentence_labels"].any()
  orig, lengths = check_invariants(ex, P)
  blobs = doc_bytes(read_doc_records(austen_docs))
  for i in range(len(orig)):
    a, b = split_ab(orig[i], lengths[i])
    gap = gap_after(blobs, a, b)
    assert gap is not None and (lengths[i] == S or gap == 0), i


def test_iterator_checkpoint_resumes_exactly(austen_docs, tmp_path, monkeypatch):
  monkeypatch.setattr(dm, "INSTANCE_SHUFFLE_BUFFER", 500)
  ds = dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 16, S, P, seed=9)
  it = iter(ds)
  for _ in range(5):
    next(it)
  ckpt = tf.train.Checkpoint(iterator=it)
  path = ckpt.write(str(tmp_path / "it"))
  expect = [next(it) for _ in range(4)]
  it2 = iter(ds)
  tf.train.Checkpoint(iterator=it2).read(path).assert_consumed()
  for e in expect:
    g = next(it2)
    for k in e:
      np.testing.assert_array_equal(e[k].numpy(), g[k].numpy())


def test_bad_input_errors(austen_docs, tmp_path):
  with pytest.raises(errors.InputError, match="nothing_here"):
    dm.dynamic_pretraining_dataset(str(tmp_path / "nothing_here*"), VOCAB, 8, S, P)
  # A static (original-format) record file is not a document file.
  static = str(tmp_path / "static.tfrecord")
  faithful.create_pretraining_data(SAMPLE_TEXT, static, VOCAB, dupe_factor=1)
  with pytest.raises(errors.InputError, match="static.tfrecord"):
    dm.dynamic_pretraining_dataset(static, VOCAB, 8, S, P)
  # Documents tokenized with a larger vocab than the one given.
  small = tmp_path / "small_vocab.txt"
  small.write_text("\n".join(open(VOCAB, encoding="utf-8").read().split("\n")[:2000]),
                   encoding="utf-8")
  with pytest.raises(errors.InputError, match="austen.tfrecord.*another vocab"):
    dm.dynamic_pretraining_dataset(austen_docs, str(small), 8, S, P)
  with pytest.raises(errors.InputError, match="max_seq_length"):
    dm.dynamic_pretraining_dataset(austen_docs, VOCAB, 8, 4, P)


@pytest.mark.slow  # 9-16 s (process start-ups / a reference run): full suite only, keeps the fast loop < 5 min
def test_run_pretraining_dynamic_trains_and_evaluates(austen_docs, tmp_path):
  """``run_pretraining(dynamic=True)`` (``tools/run_pretraining.py --dynamic``)
  trains the tiny model on the document records and writes eval_results.txt."""
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf import jobs  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  from conftest import TINY_CONFIG  # pylint: disable=g-import-not-at-top
  out = tmp_path / "out"
  params = pretraining.PretrainingParams(
      input_file=austen_docs, output_dir=str(out), vocab_file=VOCAB,
      max_seq_length=64, max_predictions_per_seq=10, train_batch_size=8,
      eval_batch_size=8, num_train_steps=3, num_warmup_steps=1,
      iterations_per_loop=3, max_eval_steps=2, learning_rate=1e-3, dynamic=True)
  lines = []
  results = jobs.run_pretraining(
      config_lib.BertConfig.from_json_file(TINY_CONFIG), params,
      tf.distribute.OneDeviceStrategy("/cpu:0"), do_train=True, do_eval=True,
      print_fn=lines.append)
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-3"), lines
  with open(out / "eval_results.txt", encoding="utf-8") as f:
    text = f.read()
  for key in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
              "next_sentence_loss", "global_step = 3"):
    assert key in text, text
  # A random-init model over a 30522-word vocab: loss near ln(30522) = 10.3.
  assert 8.0 < results["masked_lm_loss"] < 11.5, results
