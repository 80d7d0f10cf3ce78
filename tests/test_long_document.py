"""Long documents (issue 69): the packing, the model on windows, the tool and
its exports, against independent references.

* :func:`bert_tf.modeling.long_document.pack` against a pure-Python
  reference: the original ``run_squad.py`` doc-stride loop (as written in
  ``convert_examples_to_features``), ``tail``, ``head_tail`` (Sun et al.
  2019), a pair's shorter text kept in every window (its first
  ``(S - 3) // 2`` tokens), the evenly spread window cap; on random lengths
  (0 included) and pairs, on the real newsgroups posts of
  ``data/newsgroups20`` (the reference on ``FullTokenizer``'s ids), and
  against the ORIGINAL ``run_squad.py`` itself (``tests/original_squad.py``)
  on question / post pairs;
* ``BertClassifier`` on windows [B, K, S] = the model on each valid window
  alone, pooled (mean, max; pooled outputs and logits);
* ``tools/run_classifier.py --long_document=windows`` (and ``head_tail``) on
  the slice: the length line, the SavedModel and the ``.tflite`` against the
  run's own model on ``DocumentPacker`` features (and the tool's own
  ``eval_loss``), mixed batches, the empty and the 100,000-token document;
* bad flags: one line before any work.
"""

import json
import math
import os
import random
import re
import types
from fractions import Fraction

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf import tokenization
from bert_tf.export import client
from bert_tf.export import fine_tuned
from bert_tf.modeling import long_document as ld
from bert_tf.modeling import models
from conftest import DATA, ROOT, VOCAB, run_tool

NEWS_DIR = os.path.join(DATA, "newsgroups20")
ORIGINAL_SQUAD = os.path.join(ROOT, "tests", "original_squad.py")
CLS, SEP = 101, 102  # the uncased vocab's (and the stand-in preprocessor's) ids
SEQ = 32             # the tool runs' window: dev posts take up to ~84 windows


# ------------------------------------------------------------ the reference


def squad_doc_spans(doc_len: int, max_tokens_for_doc: int, doc_stride: int) -> list:
  """The original ``run_squad.py``'s doc-stride loop (``convert_examples_to_features``),
  as written there: ``(start, length)`` of each window."""
  doc_spans = []
  start_offset = 0
  while start_offset < doc_len:
    length = doc_len - start_offset
    if length > max_tokens_for_doc:
      length = max_tokens_for_doc
    doc_spans.append((start_offset, length))
    if start_offset + length == doc_len:
      break
    start_offset += min(length, doc_stride)
  return doc_spans


def spread(n: int, cap: int) -> list:
  """Windows read of ``n``: all when ``n <= cap``; else ``cap`` of them evenly
  from the first to the last (window ``k (n - 1) / (cap - 1)`` rounded, halves
  up); a cap of 1: the first."""
  if n <= cap:
    return list(range(n))
  if cap == 1:
    return [0]
  return [math.floor(Fraction(k * (n - 1), cap - 1) + Fraction(1, 2)) for k in range(cap)]


def _pieces(doc: list, budget: int, settings: ld.LongDocument) -> tuple:
  """``(the document's pieces, one per window, cut)``: what each method reads
  of ``doc`` (token list) in windows of ``budget`` tokens."""
  n = len(doc)
  if settings.method == "windows":  # an empty document: one empty window
    return [doc[s:s + l] for s, l in squad_doc_spans(n, budget, settings.doc_stride)] or [[]], False
  if settings.method == "tail":
    return [doc[max(0, n - budget):]], n > budget
  if settings.method == "head_tail":
    head = min(settings.head_tokens, budget)
    return [doc if n <= budget else doc[:head] + doc[n - (budget - head):]], n > budget
  return [doc[:budget]], n > budget  # head (single texts)


def reference_windows(a: list, b, settings: ld.LongDocument, seq: int, training: bool) -> tuple:
  """``([(input_ids, segment_ids) of each window read], truncated)`` of token
  lists ``a`` (and ``b``: a pair) under resolved ``settings``, unpadded."""
  cap = settings.max_windows if training else settings.max_eval_windows
  if b is None:
    doc, kept, kept_first, kept_cut, budget = a, [], None, False, seq - 2
  else:  # the shorter text (a on a tie) is kept in every window, as SQuAD's question
    kept_first = len(a) <= len(b)
    short, doc = (a, b) if kept_first else (b, a)
    kept = short[:(seq - 3) // 2]
    kept_cut, budget = len(short) > len(kept), seq - 3 - len(kept)
  pieces, cut = _pieces(doc, budget, settings)
  out = []
  for piece in [pieces[i] for i in spread(len(pieces), cap)]:
    if b is None:
      ids = [CLS] + piece + [SEP]
      segments = [0] * len(ids)
    else:
      first, second = (kept, piece) if kept_first else (piece, kept)
      ids = [CLS] + first + [SEP] + second + [SEP]
      segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
    out.append((ids, segments))
  return out, len(pieces) > cap or kept_cut or cut


def unpack(features: dict) -> list:
  """Per document, the windows of packed features as ``(ids, segment_ids)``
  lists (masked positions), checking the layout: masks are a prefix, every
  other position and every missing window is all zero, the read windows
  come first."""
  ids, mask, seg = (np.asarray(features[k]) for k in ld.FEATURES)
  if ids.ndim == 2:
    ids, mask, seg = ids[:, None], mask[:, None], seg[:, None]
  docs = []
  for i in range(ids.shape[0]):
    windows = []
    for k in range(ids.shape[1]):
      n = int(mask[i, k].sum())
      assert (mask[i, k, :n] == 1).all(), (i, k)
      assert not ids[i, k, n:].any() and not seg[i, k, n:].any(), (i, k)
      if n:
        assert len(windows) == k, "a window after a missing one: %d, %d" % (i, k)
        windows.append((ids[i, k, :n].tolist(), seg[i, k, :n].tolist()))
    docs.append(windows)
  return docs


def assert_packs_as_reference(features: dict, a: list, b, settings, seq, training) -> None:
  """``features`` (from :func:`ld.pack` or a ``DocumentPacker``) of documents
  ``a`` (and ``b``) equal :func:`reference_windows`, flags too."""
  docs = unpack(features)
  nums = np.asarray(features["num_windows"])
  cuts = np.asarray(features["truncated"])
  for i, got in enumerate(docs):
    want, cut = reference_windows(a[i], None if b is None else b[i], settings, seq, training)
    assert got == want, (settings, training, i, len(a[i]), None if b is None else len(b[i]))
    assert (int(nums[i]), bool(cuts[i])) == (len(want), cut), (settings, training, i)


def _ragged(rows: list) -> tf.RaggedTensor:
  return tf.RaggedTensor.from_row_lengths(tf.constant(sum(rows, []), tf.int32),
                                          [len(r) for r in rows])


# ------------------------------------------------------------ pack


GRID = {  # method -> [(seq, LongDocument keyword arguments)]
    "windows": [(12, dict(doc_stride=4, max_windows=2, max_eval_windows=3)),
                (12, dict(doc_stride=1, max_windows=1, max_eval_windows=64)),
                (9, dict(doc_stride=6, max_windows=3, max_eval_windows=5)),
                (17, dict(doc_stride=14, max_windows=4, max_eval_windows=2))],
    "tail": [(12, {}), (8, {})],
    "head_tail": [(12, dict(head_tokens=3)), (12, dict(head_tokens=0)),
                  (10, dict(head_tokens=8)), (9, {})],
}


@pytest.mark.parametrize("method", sorted(GRID))
def test_pack_equals_the_run_squad_loop_and_the_methods(method):
  """Random lengths (0, the window's edges, up to several windows), single
  texts and pairs (either text the shorter, ties), training and evaluation
  caps; tokens random so that a position read wrong shows."""
  rng = random.Random(69)
  for seq, kwargs in GRID[method]:
    settings = ld.LongDocument(method, **kwargs).resolved(seq)
    pre = types.SimpleNamespace(max_seq_length=seq, cls_id=CLS, sep_id=SEP, pad_id=0)
    edges = [0, 1, seq - 4, seq - 3, seq - 2, seq - 1, 3 * seq]
    lengths_a = edges + [rng.randint(0, 6 * seq) for _ in range(9)]
    lengths_b = [rng.choice(edges + [rng.randint(0, 4 * seq)]) for _ in lengths_a]
    lengths_b[:3] = lengths_a[:3]  # ties: the first text is kept
    a = [[rng.randint(1000, 29999) for _ in range(n)] for n in lengths_a]
    b = [[rng.randint(1000, 29999) for _ in range(n)] for n in lengths_b]
    for training in (False, True):
      assert_packs_as_reference(ld.pack([_ragged(a)], settings, pre, training),
                                a, None, settings, seq, training)
      assert_packs_as_reference(ld.pack([_ragged(a), _ragged(b)], settings, pre, training),
                                a, b, settings, seq, training)


def test_spread_cap_keeps_first_and_last_evenly():
  """The reference's cap itself: first and last window, increasing, gaps
  differ by at most one."""
  for n in range(2, 40):
    for cap in range(2, n):
      kept = spread(n, cap)
      gaps = np.diff(kept)
      assert kept[0] == 0 and kept[-1] == n - 1 and (gaps > 0).all(), (n, cap)
      assert gaps.max() - gaps.min() <= 1, (n, cap, kept)


@pytest.fixture(scope="module")
def full_tokenizer():
  return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


def _rows(split: str) -> list:
  with open(os.path.join(NEWS_DIR, split + ".tsv"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert lines[0] == "sentence\tlabel"
  return [tuple(l.split("\t")) for l in lines[1:]]


@pytest.fixture(scope="module")
def dev(full_tokenizer):
  """The slice's dev posts: ``(texts, labels, FullTokenizer ids)``."""
  tok = full_tokenizer
  rows = _rows("dev")
  texts = [r[0] for r in rows]
  return texts, [r[1] for r in rows], [tok.convert_tokens_to_ids(tok.tokenize(t)) for t in texts]


def test_real_posts_pack_as_the_reference_on_full_tokenizer_ids(dev):
  """``DocumentPacker`` on the raw dev posts (in-graph tokenizer) equals the
  reference on the original tokenizer's ids, every method; the two
  tokenizers agree on every post of this slice (lower-cased, no
  punctuation), so every post is compared."""
  texts, _, ref_ids = dev
  pre = preprocessing.BertPreprocessor(VOCAB, True, SEQ)
  assert pre.tokenize(tf.constant(texts)).to_list() == ref_ids
  assert sum(len(t) > 8 * SEQ for t in ref_ids) >= 10  # the cap binds below
  for settings in (ld.LongDocument("head"), ld.LongDocument("tail"),
                   ld.LongDocument("head_tail", head_tokens=10),
                   ld.LongDocument("windows", max_windows=3, max_eval_windows=8),
                   ld.LongDocument("windows", doc_stride=29)):
    for training in (False, True):
      packer = ld.DocumentPacker(pre, settings, training=training)
      assert_packs_as_reference(packer(tf.constant(texts)), ref_ids, None,
                                packer.settings, SEQ, training)


def test_head_length_line_names_the_remedy_when_it_cut(dev):
  """The original's truncation (the default): the line counts the posts cut
  (the reference tokenizer's count) and names ``--long_document``; a split
  that fits says so without the remedy (under head_tail too)."""
  texts, _, ref_ids = dev
  pre = preprocessing.BertPreprocessor(VOCAB, True, SEQ)
  line = ld.length_report(pre, ld.LongDocument(), texts, split="dev").line()
  cut = sum(len(t) > SEQ - 2 for t in ref_ids)
  assert cut > 0
  assert line.startswith("dev: %d of 60 examples (%.1f%%) longer than --max_seq_length=%d "
                         "tokens were cut (--long_document=windows reads them whole, "
                         "head_tail keeps their end" % (cut, 100 * cut / 60, SEQ)), line
  short = ld.length_report(pre, ld.LongDocument(), ["a short post"], split="dev").line()
  assert short.startswith("dev: 0 of 1 examples (0.0%) longer than --max_seq_length=32 "
                          "tokens were cut (length p50"), short
  head_tail = ld.LongDocument("head_tail").resolved(SEQ)
  short = ld.length_report(pre, head_tail, ["a short post"], split="dev").line()
  assert short.startswith("dev: 0 of 1 examples (0.0%) longer than --max_seq_length=32 "
                          "tokens were cut to their first 7 tokens and their last (length p50"), short


def test_pairs_pack_as_the_original_run_squad(dev, full_tokenizer, tmp_path):
  """A pair (a short question, a newsgroups post) packs as the ORIGINAL
  ``run_squad.py`` (bert-tensorflow 1.0.4, ``tests/original_squad.py``) cuts
  a SQuAD context: ``[CLS] question [SEP] window [SEP]``, the question cut
  to ``max_query_length = (S - 3) // 2``, windows ``doc_stride`` apart (no
  cap: ``max_eval_windows`` above the longest post's windows)."""
  texts, _, ref_ids = dev
  seq, stride = 48, 13
  questions = [" ".join(texts[(i + 7) % len(texts)].split()[:4 + (i * 5) % 37])
               for i in range(len(texts))]
  pairs = [(q, c, i) for i, (q, c) in enumerate(zip(questions, texts))
           if len(full_tokenizer.tokenize(q)) <= len(ref_ids[i])]  # the question kept
  assert len(pairs) >= 50 and max(len(full_tokenizer.tokenize(q)) for q, _, _ in pairs) > 22
  squad = {"version": "1.1", "data": [{"title": "post %d" % i, "paragraphs": [
      {"context": c, "qas": [{"id": str(i), "question": q, "answers": []}]}]}
                                      for q, c, i in pairs]}
  (tmp_path / "news.json").write_text(json.dumps(squad), encoding="utf-8")
  jobs = [{"kind": "features", "input_file": str(tmp_path / "news.json"), "vocab_file": VOCAB,
           "do_lower_case": True, "is_training": False, "version_2_with_negative": False,
           "max_seq_length": seq, "doc_stride": stride, "max_query_length": (seq - 3) // 2,
           "output": str(tmp_path / "features.json")}]
  (tmp_path / "jobs.json").write_text(json.dumps(jobs), encoding="utf-8")
  run_tool([ORIGINAL_SQUAD, str(tmp_path), str(tmp_path / "jobs.json")])
  original = json.loads((tmp_path / "features.json").read_text(encoding="utf-8"))["features"]
  want = [[] for _ in pairs]
  for f in original:
    n = sum(f["input_mask"])
    want[f["example_index"]].append((f["input_ids"][:n], f["segment_ids"][:n]))
  settings = ld.LongDocument("windows", doc_stride=stride, max_eval_windows=1000)
  packer = ld.DocumentPacker(preprocessing.BertPreprocessor(VOCAB, True, seq), settings)
  features = packer(tf.constant([q for q, _, _ in pairs]), tf.constant([c for _, c, _ in pairs]))
  assert unpack(features) == want
  assert features["num_windows"].numpy().tolist() == [len(w) for w in want]
  assert max(len(w) for w in want) > 20


# ------------------------------------------------------------ the model on windows


def test_classifier_on_windows_is_each_window_alone_pooled(dev, cropped_minilm_dir):
  """``BertClassifier`` on [B, K, S] windows (documents of 1 to 6 windows in
  one batch) = the model on each valid window alone [1, S], pooled over the
  document's windows with numpy: mean / max of the pooled outputs then the
  head, or of the logits (``pool_logits``). The encoder is the cropped
  MiniLM (trained weights: its windows' outputs differ, so the poolings'
  answers are 30x the tolerance apart)."""
  texts, _, ref_ids = dev
  order = np.argsort([len(t) for t in ref_ids])
  short = " ".join(texts[order[0]].split()[:12])  # one window
  picked = [texts[order[0]], short, texts[order[8]], texts[order[-1]], texts[order[30]]]
  pre = preprocessing.BertPreprocessor(VOCAB, True, SEQ)
  packer = ld.DocumentPacker(pre, ld.LongDocument("windows", max_eval_windows=6))
  feats = packer(tf.constant(picked))
  nums = feats["num_windows"].numpy()
  assert nums.min() == 1 and nums.max() == 6 and len(set(nums)) >= 4, nums
  assert feats["truncated"].numpy().any()
  windows = {k: feats[k] for k in ld.FEATURES}
  tf.keras.utils.set_random_seed(3)
  base = models.BertClassifier.from_preset(cropped_minilm_dir, num_labels=5)
  # A head 20x its initial scale: logits of a trained head's size (~1).
  base.classifier.set_weights([20 * w for w in base.classifier.get_weights()])
  pooled, logits = [], []  # per document: [n, H], [n, L] of its windows alone
  for i, n in enumerate(nums):
    alone = [{k: v[i, j:j + 1] for k, v in windows.items()} for j in range(n)]
    pooled.append(np.concatenate([base.encoder(w)["pooled_output"].numpy() for w in alone]))
    logits.append(np.concatenate([base(w).numpy() for w in alone]))
  answers = {}
  for pooling in ld.POOLINGS:
    reduce = np.mean if pooling == "mean" else np.max
    for pool_logits in (False, True):
      model = models.build_classifier(base.config, 5, window_pooling=pooling,
                                      pool_logits=pool_logits)
      model.set_weights(base.get_weights())
      if pool_logits:
        want = np.stack([reduce(l, axis=0) for l in logits])
      else:
        want = base.classifier(np.stack([reduce(p, axis=0) for p in pooled])).numpy()
      answers[pooling, pool_logits] = model(windows).numpy()
      np.testing.assert_allclose(answers[pooling, pool_logits], want, atol=1e-5, rtol=0,
                                 err_msg="%s pool_logits=%s" % (pooling, pool_logits))
  # The mean of the pooled outputs through the (linear) head is the mean of
  # the logits (at inference); every other two differ on every document of
  # several windows.
  several, keys = nums > 1, sorted(answers)
  for i, a in enumerate(keys):
    for b in keys[i + 1:]:
      if a[0] != "mean" or b[0] != "mean":
        assert np.abs(answers[a] - answers[b])[several].max(axis=1).min() > 3e-4, (a, b)


# ------------------------------------------------------------ the tool and its exports


def _run_classifier(out, init_checkpoint, method_flags, export_dir):
  """``tools/run_classifier.py`` on the slice, windows of ``SEQ`` tokens, one
  epoch from ``init_checkpoint`` (the cropped MiniLM: a trained encoder, so
  that its answers depend on the text read; a random tiny BERT answers
  every post alike); returns the tool's stdout."""
  return run_tool([
      "tools/run_classifier.py", "--task_name=tsv", "--text_a_column=sentence",
      "--label_column=label", "--data_dir=" + NEWS_DIR, "--init_checkpoint=" + init_checkpoint,
      "--max_seq_length=%d" % SEQ, "--do_train", "--do_eval", "--train_batch_size=8",
      "--learning_rate=1e-3", "--num_train_epochs=1", "--seed=1", "--output_dir=" + str(out),
      "--export_dir=" + str(export_dir), *method_flags]).stdout


class Run:
  """A finished tool run: its stdout, settings, exports and the run's own
  model (rebuilt here from the recorded settings, not by the exporters'
  code), the reference every export is held to."""

  def __init__(self, out, stdout, saved_model, tflite=None):
    self.out, self.stdout = str(out), stdout
    run = fine_tuned.load_run(self.out)
    self.settings = ld.LongDocument.from_dict(run.run_config["long_document"])
    self.labels = run.run_config["labels"]
    self.reloaded_pooling = run.model.window_pooling
    self.model = self.restored(run.config, run.checkpoint, self.settings.window_pooling)
    self.packer = ld.DocumentPacker(fine_tuned.run_preprocessor(run), self.settings)
    self.config, self.checkpoint = run.config, run.checkpoint
    self.serve = tf.saved_model.load(saved_model).signatures["serving_default"]
    self.lite = tflite and client.LiteRTSignature(tflite, num_threads=1)

  def restored(self, config, checkpoint, pooling):
    model = models.build_classifier(config, len(self.labels), window_pooling=pooling)
    tf.train.Checkpoint(model=model).read(checkpoint).expect_partial()
    return model

  def reference(self, texts, model=None, first_window_only=False) -> dict:
    """The run's model on ``DocumentPacker`` features: logits, probabilities
    and flags."""
    feats = self.packer(tf.constant(texts))
    x = {k: feats[k] for k in ld.FEATURES}
    if first_window_only:
      x = {k: v[:, :1] if self.settings.windowed else v for k, v in x.items()}
    logits = (model or self.model)(x)
    return {"logits": logits.numpy(), "probabilities": tf.nn.softmax(logits, -1).numpy(),
            "num_windows": feats["num_windows"].numpy(), "truncated": feats["truncated"].numpy()}

  def served(self, texts, lite=False) -> dict:
    if lite:
      return self.lite(text=np.array([t.encode() for t in texts], dtype=object))
    return {k: v.numpy() for k, v in self.serve(text=tf.constant(texts)).items()}


ATOL = 1e-5


def assert_same_answers(got: dict, want: dict, what: str) -> None:
  for key in ("logits", "probabilities"):
    np.testing.assert_allclose(got[key], want[key], atol=ATOL, rtol=0, err_msg=what + " " + key)
  for key in ("num_windows", "truncated"):
    np.testing.assert_array_equal(got[key], want[key], err_msg="%s %s" % (what, key))


@pytest.fixture(scope="module")
def windows_run(tmp_path_factory, cropped_minilm_dir):
  """``--long_document=windows --window_pooling=max --max_windows=3``;
  exported by the tool (SavedModel) and by ``export_saved_model.py
  --format=litert``."""
  tmp = tmp_path_factory.mktemp("windows")
  stdout = _run_classifier(tmp / "out", cropped_minilm_dir, [
      "--long_document=windows", "--window_pooling=max", "--max_windows=3"], tmp / "export")
  run_tool(["tools/export_saved_model.py", "--output_dir=" + str(tmp / "out"),
            "--export_dir=" + str(tmp / "lite"), "--format=litert"])
  return Run(tmp / "out", stdout, str(tmp / "export" / "1"),
             str(tmp / "lite" / "1" / "model.tflite"))


@pytest.mark.slow  # a tool run beside windows_run's (issue 41's rule)
def test_hf_conversion_of_a_windows_run_keeps_its_settings(windows_run, dev, tmp_path):
  """convert_checkpoint --output_format=hf of the windows run: one warning
  line, the run's settings in config.json, from_preset of the directory
  predicting long posts as from_preset of the run."""
  out = str(tmp_path / "hf")
  proc = run_tool(["tools/convert_checkpoint.py", "--input=" + windows_run.out,
                   "--output=" + out, "--output_format=hf"])
  assert proc.stdout.startswith("wrote BertForSequenceClassification ("), proc.stdout
  notes = [l for l in proc.stderr.splitlines() if l.startswith("warning: ")]
  assert len(notes) == 1 and "transformers will read one window" in notes[0], proc.stderr
  with open(os.path.join(windows_run.out, "classifier_config.json"), encoding="utf-8") as f:
    recorded = json.load(f)["long_document"]
  with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["bert_tf_long_document"] == recorded
  from_run = models.BertClassifier.from_preset(windows_run.out, preprocessor=True)
  from_hf = models.BertClassifier.from_preset(out, preprocessor=True)
  assert from_run.long_document.to_dict() == recorded == from_hf.long_document.to_dict()
  assert from_run.window_pooling == from_hf.window_pooling == "max"
  texts = dev[0][:6] + [""]
  np.testing.assert_allclose(from_hf.predict(texts, verbose=0),
                             from_run.predict(texts, verbose=0), atol=1e-5)


def _needed_windows(ids: list, seq: int, stride: int) -> int:
  return len(squad_doc_spans(len(ids), seq - 2, stride)) or 1


@pytest.mark.slow  # the tool runs of windows_run (issue 41's rule)
def test_windows_run_reports_records_and_evaluates_the_windows(windows_run, dev):
  """The length line counts the dev posts past the cap (the reference's
  count) and names the flag; the settings file keeps the method; the
  reference model's dev loss is the tool's own ``eval_loss`` (it is the
  model the run trained and evaluated); its answers depend on the windows
  read (so the exports' comparisons below can fail); the run rebuilt by the
  exporters' code keeps its pooling."""
  texts, labels, ref_ids = dev
  s = windows_run.settings
  assert (s.method, s.window_pooling, s.max_windows, s.doc_stride) == ("windows", "max", 3, 15)
  over = sum(_needed_windows(t, SEQ, s.doc_stride) > s.max_eval_windows for t in ref_ids)
  assert over > 0
  assert re.search(r"^dev: %d of 60 examples \([\d.]+%%\) take more than --max_eval_windows=64 "
                   r"windows of 32 tokens \(--doc_stride=15\)" % over, windows_run.stdout,
                   re.M), windows_run.stdout
  want = windows_run.reference(texts)
  gold = [windows_run.labels.index(l) for l in labels]
  loss = -np.mean(np.log(want["probabilities"][np.arange(len(gold)), gold]))
  with open(os.path.join(os.path.dirname(windows_run.checkpoint), "eval_results.txt"),
            encoding="utf-8") as f:
    results = dict(l.split(" = ") for l in f.read().splitlines())
  assert abs(loss - float(results["eval_loss"])) < 1e-5, (loss, results)
  mean = windows_run.restored(windows_run.config, windows_run.checkpoint, "mean")
  for other in (windows_run.reference(texts, mean),
                windows_run.reference(texts, first_window_only=True)):
    assert np.abs(other["logits"] - want["logits"]).max(axis=1).min() > 30 * ATOL
  assert windows_run.reloaded_pooling == "max"


@pytest.mark.slow  # the tool runs of windows_run (issue 41's rule)
@pytest.mark.parametrize("lite", [False, True], ids=["saved_model", "litert"])
def test_export_answers_every_dev_post_as_the_run(windows_run, dev, full_tokenizer, lite):
  """The SavedModel and the ``.tflite``: logits and probabilities within
  1e-5, ``num_windows`` and ``truncated`` equal, on all 60 dev posts in one
  batch (2 to 64 windows each); and a batch of a 10-token and a 5,000-token
  document answers each as it does alone."""
  texts, _, _ = dev
  want = windows_run.reference(texts)
  assert want["num_windows"].min() == 2 and want["num_windows"].max() == 64
  assert_same_answers(windows_run.served(texts, lite), want, "dev posts")
  tok = full_tokenizer
  short = " ".join([w for w in texts[0].split() if len(tok.tokenize(w)) == 1][:10])
  long = " ".join((" ".join(texts)).split()[:4000])
  long += " the" * (5000 - len(tok.tokenize(long)))
  assert (len(tok.tokenize(short)), len(tok.tokenize(long))) == (10, 5000)
  mixed = windows_run.served([short, long], lite)
  assert_same_answers(mixed, windows_run.reference([short, long]), "mixed")
  assert mixed["num_windows"].tolist() == [1, 64] and mixed["truncated"].tolist() == [False, True]
  for i, text in enumerate((short, long)):
    alone = windows_run.served([text], lite)
    assert_same_answers(alone, {k: v[i:i + 1] for k, v in mixed.items()}, "alone %d" % i)


@pytest.mark.slow  # the tool runs of windows_run (issue 41's rule)
@pytest.mark.parametrize("lite", [False, True], ids=["saved_model", "litert"])
def test_empty_and_100000_token_documents(windows_run, lite):
  """An empty document, alone in its batch, is one window of ``[CLS] [SEP]``
  (the model on those ids built by hand); a 100,000-token one is read in the
  cap's 64 windows and says truncated."""
  ids = np.zeros([1, 1, SEQ], np.int32)
  ids[0, 0, :2] = [CLS, SEP]
  logits = windows_run.model({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                              "segment_ids": np.zeros_like(ids)})
  assert_same_answers(windows_run.served([""], lite), {
      "logits": logits.numpy(), "probabilities": tf.nn.softmax(logits, -1).numpy(),
      "num_windows": [1], "truncated": [False]}, "empty")
  huge = " ".join((["news", "about", "space"] * 33334)[:100000])
  got = windows_run.served([huge], lite)
  assert_same_answers(got, windows_run.reference([huge]), "100,000 tokens")
  assert got["num_windows"].tolist() == [64] and got["truncated"].tolist() == [True]


def test_a_batch_of_empty_documents_packs_one_window_each():
  """Every text of the batch empty (no token to gather from): one window of
  ``[CLS] [SEP]`` each (a pair: ``[CLS] [SEP] [SEP]``), every method."""
  pre = types.SimpleNamespace(max_seq_length=8, cls_id=CLS, sep_id=SEP, pad_id=0)
  for method in ("windows", "tail", "head_tail"):
    settings = ld.LongDocument(method).resolved(8)
    single = ld.pack([_ragged([[], []])], settings, pre)
    assert unpack(single) == [[([CLS, SEP], [0, 0])]] * 2, method
    pair = ld.pack([_ragged([[], []]), _ragged([[], []])], settings, pre)
    assert unpack(pair) == [[([CLS, SEP, SEP], [0, 0, 1])]] * 2, method
    assert pair["num_windows"].numpy().tolist() == [1, 1] and not pair["truncated"].numpy().any()


@pytest.fixture(scope="module")
def head_tail_run(tmp_path_factory, cropped_minilm_dir):
  """``--long_document=head_tail --head_tokens=7``, SavedModel."""
  tmp = tmp_path_factory.mktemp("head_tail")
  stdout = _run_classifier(tmp / "out", cropped_minilm_dir, [
      "--long_document=head_tail", "--head_tokens=7"], tmp / "export")
  return Run(tmp / "out", stdout, str(tmp / "export" / "1"))


@pytest.mark.slow
def test_head_tail_run_reports_the_remedy_and_serves_as_the_run(head_tail_run, dev):
  """The length line counts the posts cut (the reference tokenizer's) and
  names the remedy; the SavedModel equals the run's model on the dev posts,
  each one window, truncated exactly where the post is longer than S - 2;
  the answers depend on the tail read (head alone differs)."""
  texts, _, ref_ids = dev
  cut = [len(t) > SEQ - 2 for t in ref_ids]
  assert re.search(r"^dev: %d of 60 examples \([\d.]+%%\) longer than --max_seq_length=32 "
                   r"tokens were cut to their first 7 tokens and their last "
                   r"\(--long_document=windows reads them whole\)" % sum(cut),
                   head_tail_run.stdout, re.M), head_tail_run.stdout
  want = head_tail_run.reference(texts)
  assert want["truncated"].tolist() == cut and want["num_windows"].tolist() == [1] * 60
  assert_same_answers(head_tail_run.served(texts), want, "head_tail dev posts")
  head = head_tail_run.model(head_tail_run.packer.preprocessor(tf.constant(texts))).numpy()
  assert np.abs(head - want["logits"]).max(axis=1).min() > 30 * ATOL


# ------------------------------------------------------------ bad input


ABSL_HINT = "Pass --helpshort or --helpfull to see help on flags."


def _lines(text):
  """Non-blank lines, without TensorFlow's C++ log lines."""
  return [l for l in text.splitlines()
          if l.strip() and not re.match(r"[IWE]\d{4} \d\d:\d\d:\d\d", l)]


@pytest.mark.parametrize("flags,message", [
    (["--long_document=windows", "--doc_stride=30"],
     "--doc_stride=30: must be at least 1 and below the window's text length "
     "(max_seq_length - 2 = 30 tokens)"),
    (["--long_document=windows", "--max_windows=0"], "--max_windows=0: must be at least 1"),
    (["--long_document=head_tail", "--head_tokens=31"],
     "--head_tokens=31: must be in [0, 30] (max_seq_length - 2"),
    # An absl enum: absl's own line (and its fixed hint to --helpshort).
    (["--long_document=middle"], "FATAL Flags parsing error: flag --long_document=middle: "
     "value should be one of <head|tail|head_tail|windows>"),
], ids=["doc_stride", "max_windows", "head_tokens", "method"])
def test_bad_long_document_flags_are_one_line_before_any_work(tmp_path, flags, message):
  """Refused before a file is read (the data, config and vocab paths do not
  exist) and before anything is written."""
  out = tmp_path / "out"
  p = run_tool(["tools/run_classifier.py", "--task_name=tsv", "--text_a_column=sentence",
                "--label_column=label", "--data_dir=" + str(tmp_path / "no_data"),
                "--bert_config_file=" + str(tmp_path / "no_config.json"),
                "--vocab_file=" + str(tmp_path / "no_vocab.txt"), "--max_seq_length=%d" % SEQ,
                "--do_train", "--do_eval", "--output_dir=" + str(out),
                "--export_dir=" + str(tmp_path / "export"), *flags], check=False)
  assert p.returncode != 0
  (line,) = [l for l in _lines(p.stderr) if l != ABSL_HINT]
  assert line.startswith(message if message.startswith("FATAL") else
                         "run_classifier: error: " + message), line
  assert not _lines(p.stdout), p.stdout
  assert os.listdir(tmp_path) == []  # no output or export folder
