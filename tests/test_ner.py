"""Token tagging (NER, paper section 4.3): CoNLL reader, scores, model, windows,
task, tool, export.

Real data: ``data/ner_wnut16`` (a slice of WNUT-16 Twitter NER, IOB2); real
weights: all-MiniLM-L6-v2 as a Hugging Face ``BertForTokenClassification``
with a seeded head. Reference for the scores: ``seqeval`` 1.2.2 (default
mode = conlleval semantics).
"""

import json
import os
import random
import warnings

import hypothesis
from hypothesis import strategies as st
import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import errors
from bert_tf import preprocessing
from bert_tf.data import conll
from bert_tf.export import saved_model
from bert_tf.export import tagging as tagging_export
from bert_tf.modeling import tagging
from bert_tf.modeling.tagging import BertTokenClassifier
from bert_tf.tasks import tagging as tagging_task
from conftest import NER_DIR, TINY_CONFIG, VOCAB, require, run_tool
from fuzz_util import AWKWARD, SLOW_MAX_CHARS, fuzz_settings, slow_fuzz, unicode_strings

NER_DEV = os.path.join(NER_DIR, "dev.txt")
NER_TRAIN = os.path.join(NER_DIR, "train.txt")
LABELS = ["B-PER", "I-PER", "E-PER", "S-PER", "B-geo-loc", "I-geo-loc", "E-geo-loc",
          "S-geo-loc", "O"]


def tiny_config():
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.BertConfig.from_json_file(TINY_CONFIG)


def write(path, text):
  path.write_text(text, encoding="utf-8")
  return str(path)


# ------------------------------------------------------------------ reader


def test_reads_real_wnut16_dev():
  dev = conll.read_conll(NER_DEV)
  assert len(dev) == 60 and sum(len(s.words) for s in dev) == 1127
  assert sum(len(conll.get_entities(s.tags)) for s in dev) == 52  # the README's count
  train = conll.read_conll(NER_TRAIN)
  assert len(train) == 202 and sum(len(s.words) for s in train) == 3899
  labels = conll.label_list_from(train)
  assert len(labels) == 21 and "O" in labels and labels == sorted(labels)
  types = sorted({e[0] for s in train for e in conll.get_entities(s.tags)})
  assert types == ["company", "facility", "geo-loc", "movie", "musicartist", "other",
                   "person", "product", "sportsteam", "tvshow"]
  assert conll.detect_scheme([t for s in train for t in s.tags]) == "IOB2"
  assert dev[0].line == 1 and dev[1].line == len(dev[0].words) + 2


def test_conll2003_four_columns_and_docstart(tmp_path):
  path = write(tmp_path / "c.txt",
               "-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\nrejects VBZ B-VP O\n"
               "German JJ B-NP I-MISC\n\n\n-DOCSTART- -X- -X- O\nPeter NNP B-NP I-PER\n"
               "Blackburn NNP I-NP I-PER\n")
  s = conll.read_conll(path)
  assert [x.words for x in s] == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
  assert s[0].tags == ["I-ORG", "O", "I-MISC"] and s[1].lines == [9, 10]
  assert conll.detect_scheme(s[0].tags) == "IOB1"
  assert conll.get_entities(s[1].tags) == [("PER", 0, 1)]


BAD_FILES = [
    ("a\tO\nb\tB-X\textra\n", True, None, r"c.txt:2: 3 columns, the file's first token line \(line 1\) has 2"),
    ("a O\nb\n", True, None, r"c.txt:2: 1 columns"),
    ("a\tO\tx\n", True, None, r"c.txt:1: 3 columns; expected token<TAB>tag"),
    ("a\n", True, None, r"c.txt:1: 1 columns"),
    ("a\tO\n\nb\tB_X\n", True, None, r"c.txt:3: tag 'B_X' is not O or B-/I-/E-/S-TYPE"),
    ("a\tO\nb\tB-LOC\n", True, ["O", "B-PER"], r"c.txt:2: tag 'B-LOC' is not one of the 2 labels"),
    ("a b\tO\n", True, None, r"c.txt:1: token 'a b' is empty or holds whitespace"),
    ("\tO\n", True, None, r"c.txt:1: token '' is empty"),
]


@pytest.mark.parametrize("text,with_tags,labels,pattern", BAD_FILES)
def test_bad_files_name_file_and_line(tmp_path, text, with_tags, labels, pattern):
  path = write(tmp_path / "c.txt", text)
  with pytest.raises(errors.InputError, match=pattern) as e:
    conll.read_conll(path, with_tags=with_tags, labels=labels, argument="dev_file")
  assert e.value.argument == "dev_file"


def test_unlabeled_invalid_utf8_missing_and_labels(tmp_path):
  (s,) = conll.read_conll(write(tmp_path / "t.txt", "Paris\nis\n\n\n"), with_tags=False)
  assert s.words == ["Paris", "is"] and s.tags is None
  (tmp_path / "bad.txt").write_bytes(b"a\tO\n\xff\tO\n")
  with pytest.raises(errors.InputError, match="not UTF-8"):
    conll.read_conll(str(tmp_path / "bad.txt"))
  with pytest.raises(errors.InputError, match="does not exist"):
    conll.read_conll(str(tmp_path / "nope.txt"))
  assert conll.read_conll(write(tmp_path / "e.txt", "\n\n")) == []  # no empty sentence
  with pytest.raises(errors.InputError, match="need 'O'"):
    conll.check_label_list(["B-PER"])
  with pytest.raises(errors.InputError, match="repeated"):
    conll.check_label_list(["O", "O"])


# ------------------------------------------------------------------ scores


def _random_tags(rng, prefixes, n):
  tags = ["O"] * 3 + ["%s-%s" % (p, t) for p in prefixes for t in ("PER", "geo-loc", "ORG")]
  return [[rng.choice(tags) for _ in range(rng.randint(1, 9))] for _ in range(n)]


@pytest.mark.parametrize("scheme,prefixes", [("IOB1", "I" * 3 + "B"), ("IOB2", "BI"),
                                             ("IOBES", "BIES")])
def test_scores_equal_seqeval(scheme, prefixes):
  seqeval = require("seqeval.metrics")
  from seqeval.metrics.sequence_labeling import get_entities  # pylint: disable=g-import-not-at-top
  rng = random.Random(scheme)
  warnings.simplefilter("ignore")  # seqeval warns on 0/0
  for _ in range(60):
    true = _random_tags(rng, prefixes, rng.randint(1, 6))
    pred = [[t if rng.random() < 0.6 else rng.choice(sum(_random_tags(rng, prefixes, 1), []))
             for t in s] for s in true]
    got = conll.entity_scores(true, pred)
    assert got["precision"] == seqeval.precision_score(true, pred)
    assert got["recall"] == seqeval.recall_score(true, pred)
    assert got["f1"] == seqeval.f1_score(true, pred)
    report = seqeval.classification_report(true, pred, output_dict=True)
    for ty, s in got["per_type"].items():
      for k in ("precision", "recall", "f1"):
        key = "f1-score" if k == "f1" else k
        assert s[k] == pytest.approx(report[ty][key], abs=1e-12), (ty, k)
      assert s["support"] == report[ty]["support"]
    for s in true + pred:
      assert [tuple(e) for e in conll.get_entities(s)] == get_entities(s)


def test_in_graph_entities_equal_get_entities():
  prefix, type_ids, types = tagging.label_tables(LABELS)
  rng = random.Random(0)
  sents = [[rng.randrange(len(LABELS)) for _ in range(rng.randint(0, 9))]
           for _ in range(400)]
  out = tagging.entity_spans(tf.ragged.constant(sents, dtype=tf.int64, ragged_rank=1),
                             prefix, type_ids)
  got = {}
  for r, f, l, t in zip(*(out[k].numpy() for k in ("row", "first", "last", "type_id"))):
    got.setdefault(int(r), []).append((types[t], int(f), int(l)))
  for i, s in enumerate(sents):
    assert got.get(i, []) == conll.get_entities([LABELS[j] for j in s]), (i, s)


def test_conll_writer(tmp_path):
  s = conll.read_conll(write(tmp_path / "d.txt", "a\tB-PER\nb\tO\n\nc\tO\n"))
  path = conll.write_conll(str(tmp_path / "p.txt"), s, [["B-PER", "I-PER"], ["O"]])
  assert open(path).read() == "a\tB-PER\tB-PER\nb\tO\tI-PER\n\nc\tO\tO\n\n"
  with pytest.raises(ValueError, match="2 words, 1 predicted"):
    conll.write_conll(str(tmp_path / "q.txt"), s, [["O"], ["O"]])
  assert not (tmp_path / "q.txt").exists()


# ------------------------------------------------------------------ windows


def test_windows_cover_every_word_with_first_piece_labels():
  pre = preprocessing.BertPreprocessor(VOCAB, True, 8)
  tp = tagging.TaggingPreprocessor(pre, doc_stride=3)
  words = tf.ragged.constant([["hello", "\u200b", "unbelievably", "x"], [],
                              list("abcdefghi")])
  pieces = tp.word_pieces(words)
  assert pieces["num_pieces"].numpy().tolist() == [1, 1, 5, 1] + [1] * 9
  assert pieces["ids"].flat_values.numpy()[1] == tp.unk_id  # a word with no piece
  win = tp.windows(pieces["ids"])
  assert win["example"].numpy().tolist() == [0, 0, 2, 2]   # 8 pieces, 6 per window
  labels = tp.window_labels(win, pieces, tf.range(13))
  # Only first pieces carry labels; window 2 of sentence 0 starts mid-word.
  assert labels.numpy()[0].tolist() == [-1, 0, 1, 2, -1, -1, -1, -1]
  assert labels.numpy()[1].tolist() == [-1, -1, -1, -1, -1, 3, -1, -1]
  # Each piece is max-context in exactly one window; the words' logits come
  # from there: a one-hot of the label gives the label back for every word.
  pi, mx = win["piece_index"].numpy(), win["is_max_context"].numpy()
  assert sorted(pi[mx].tolist()) == list(range(17))
  logits = tf.one_hot(tf.maximum(labels, 0), 13) * tf.cast(labels >= 0, tf.float32)[..., None]
  wl, covered = tp.word_logits(win, pieces, logits)
  assert np.argmax(wl.numpy(), -1).tolist() == list(range(13)) and covered.numpy().all()
  assert tp.windows(tf.ragged.constant([[]], dtype=tf.int64))["input_ids"].shape == (0, 8)


def test_train_batches_trimmed_to_longest_window(tmp_path):
  """Training batches carry only the columns up to their longest window; the
  cut columns were padding (mask 0, label IGNORE), the kept ones are the
  full-width windows' own."""
  params = tagging_task.NerParams(
      data_dir=NER_DIR, output_dir=str(tmp_path), vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, do_train=True, max_seq_length=128,
      train_batch_size=16, max_examples=200, seed=3)
  task = tagging_task.TokenTaggingTask(params)
  full = task.train_encoded.features
  rows = {}  # a window's ids -> its indices (a few tweets repeat)
  for i, r in enumerate(full["input_ids"].tolist()):
    rows.setdefault(tuple(r), []).append(i)
  widths = []
  for x, y in task.train_dataset(16, None).take(8):
    x, y = {k: v.numpy() for k, v in x.items()}, y.numpy()
    width = x["input_ids"].shape[1]
    widths.append(width)
    assert y.shape == (16, width) and x["input_mask"][:, -1].any()  # the longest row ends there
    for b in range(16):
      same = [i for i in rows[tuple(np.pad(x["input_ids"][b], (0, 128 - width)).tolist())]
              if all((x[k][b] == full[k][i, :width]).all() for k in tagging.FEATURE_NAMES)
              and (y[b] == full["label_ids"][i, :width]).all()]
      assert same, "batch row %d is no window's first %d columns" % (b, width)
      i = same[0]
      assert not full["input_mask"][i, width:].any()
      assert (full["label_ids"][i, width:] == tagging.IGNORE).all()
  # Tweets are short: every batch is far below the 128 of max_seq_length.
  assert max(widths) < 100 and len(set(widths)) > 1, widths


# ------------------------------------------------------------------- model


def test_hf_bert_for_token_classification_parity(minilm_dir, tmp_path):
  """Real MiniLM + seeded head via save_pretrained -> from_preset; our
  word pieces of real dev sentences equal HF's is_split_into_words pieces."""
  torch = require("torch")
  transformers = require("transformers")
  torch.manual_seed(0)
  ref = transformers.BertForTokenClassification.from_pretrained(
      minilm_dir, num_labels=len(LABELS)).eval()
  with torch.no_grad():
    ref.classifier.weight.normal_(0.0, 0.5)
    ref.classifier.bias.uniform_(-1.0, 1.0)
  hf_dir = str(tmp_path / "hf_tc")
  ref.save_pretrained(hf_dir)
  with open(os.path.join(minilm_dir, "vocab.txt"), "rb") as f:
    open(os.path.join(hf_dir, "vocab.txt"), "wb").write(f.read())
  model = BertTokenClassifier.from_preset(hf_dir)
  assert model.num_labels == len(LABELS)
  assert model.classifier.output_weights.path.endswith("classifier/output_weights")
  np.testing.assert_array_equal(model.classifier.output_bias.numpy(),
                                ref.classifier.bias.detach().numpy())
  # Every bundled tweet (train and dev slices): our pieces == HF's.
  dev = conll.read_conll(NER_DEV) + conll.read_conll(NER_TRAIN)
  assert len(dev) == 262
  pre = preprocessing.BertPreprocessor(os.path.join(hf_dir, "vocab.txt"), True, 128)
  enc = tagging_task.Encoded(tagging.TaggingPreprocessor(pre, 64), dev)
  assert enc.num_windows == len(dev)  # no WNUT tweet needs a second window
  tok = transformers.BertTokenizerFast.from_pretrained(hf_dir)
  hf = tok([s.words for s in dev], is_split_into_words=True, truncation=True,
           max_length=128, padding="max_length")
  np.testing.assert_array_equal(enc.features["input_ids"], hf["input_ids"])
  np.testing.assert_array_equal(enc.features["input_mask"], hf["attention_mask"])
  # First pieces = HF's word_ids() first occurrences.
  labeled = tagging_task.Encoded(tagging.TaggingPreprocessor(pre, 64), dev[:8],
                                 [list(range(len(s.words))) for s in dev[:8]])
  for i in range(8):
    ids, prev, want = hf.word_ids(i), None, []
    for w in ids:
      want.append(w if (w is not None and w != prev) else -1)
      prev = w
    assert labeled.features["label_ids"][i].tolist() == want
  x = {k: v[:8] for k, v in enc.features.items()}
  ours = model(x).numpy()
  with torch.no_grad():
    want = ref(input_ids=torch.tensor(x["input_ids"]).long(),
               attention_mask=torch.tensor(x["input_mask"]).long(),
               token_type_ids=torch.tensor(x["segment_ids"]).long()).logits.numpy()
  assert ours.shape == (8, 128, len(LABELS)) and ours.dtype == np.float32
  mask = x["input_mask"].astype(bool)
  assert np.abs(ours - want)[mask].max() <= 1e-4, np.abs(ours - want)[mask].max()
  # Loss = HF's mean over labeled first pieces.
  y = labeled.features["label_ids"] % len(LABELS) * (labeled.features["label_ids"] >= 0) \
      - (labeled.features["label_ids"] < 0)
  loss_sum, count = tagging.tagging_loss(ours, y)
  with torch.no_grad():
    hf_loss = ref(input_ids=torch.tensor(x["input_ids"]).long(),
                  attention_mask=torch.tensor(x["input_mask"]).long(),
                  labels=torch.tensor(np.where(y < 0, -100, y)).long()).loss.item()
  assert float(loss_sum / count) == pytest.approx(hf_loss, abs=1e-4)
  # Half a head: an error naming the file. Another label count too.
  from safetensors.numpy import load_file, save_file  # pylint: disable=g-import-not-at-top
  half = tmp_path / "half"
  half.mkdir()
  tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
  del tensors["classifier.bias"]
  save_file(tensors, str(half / "model.safetensors"))
  (half / "config.json").write_bytes(open(os.path.join(hf_dir, "config.json"), "rb").read())
  with pytest.raises(errors.CheckpointError, match="only part of the token-classification"):
    BertTokenClassifier.from_preset(str(half), num_labels=len(LABELS))
  with pytest.raises(errors.CheckpointError, match="3 labels"):
    BertTokenClassifier.from_preset(hf_dir, num_labels=3)
  plain = BertTokenClassifier.from_preset(minilm_dir, num_labels=4)  # encoder only
  np.testing.assert_array_equal(plain.classifier.output_bias.numpy(), np.zeros(4))


def test_keras_round_trip(tmp_path):
  model = BertTokenClassifier(tiny_config(), num_labels=5)
  for i, v in enumerate(model.weights):
    v.assign(tf.random.stateless_normal(v.shape, [7, i], stddev=0.05))
  x = {"input_ids": tf.random.stateless_uniform([2, 12], [1, 2], 0, 50, tf.int32),
       "input_mask": tf.ones([2, 12], tf.int32), "segment_ids": tf.zeros([2, 12], tf.int32)}
  want = model(x).numpy()
  assert want.shape == (2, 12, 5)
  path = str(tmp_path / "tc.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  assert type(loaded) is BertTokenClassifier and loaded.num_labels == 5
  np.testing.assert_array_equal(loaded(x).numpy(), want)
  np.testing.assert_array_equal(BertTokenClassifier.from_preset(path)(x).numpy(), want)
  assert np.abs(model(x, training=True).numpy() - want).max() > 0
  assert BertTokenClassifier(tiny_config(), 3, dtype="mixed_bfloat16")(x).dtype == tf.float32
  with pytest.raises(ValueError, match="num_labels"):
    BertTokenClassifier(tiny_config(), 0)


# ------------------------------------------------------------------ export


MAX_WINDOWS = 4096


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  model = BertTokenClassifier(tiny_config(), num_labels=len(LABELS))
  for i, v in enumerate(model.weights):
    v.assign(tf.random.stateless_normal(v.shape, [3, i], stddev=0.3))
  # Every label wins somewhere (random logits of a tiny model vary little).
  model.classifier.output_weights.assign(
      tf.random.stateless_normal([len(LABELS), 128], [4, 0], stddev=3.0))
  pre = preprocessing.BertPreprocessor(VOCAB, True, 16)
  # max_windows: above the ~1,200 windows that 2,000 characters can need
  # (the fuzz tests compare whole sentences), below a 1 MB sentence's 40,000.
  path = tagging_export.export_tagger(model, pre, LABELS,
                                      str(tmp_path_factory.mktemp("ner_export")),
                                      doc_stride=5, max_windows=MAX_WINDOWS)
  return {"fn": tf.saved_model.load(path).signatures["serving_default"], "path": path,
          "model": model, "pre": pre}


def _serve(fn, sentences):
  out = fn(sentence=tf.constant(sentences, tf.string))
  return {k: v.numpy() for k, v in out.items()}


def _check(out, sentences):
  """Invariants of the outputs against the inputs (as Python decodes them)."""
  for b, raw in enumerate(sentences):
    s = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    n = out["num_words"][b]
    words = [w.decode() for w in out["words"][b][:n]]
    if not out["truncated"][b]:
      assert words == s.split()
    for i, w in enumerate(words):
      assert s[out["word_start_char"][b][i]:out["word_end_char"][b][i]] == w
    tags = [t.decode() for t in out["tags"][b][:n]]
    assert all(t in LABELS for t in tags)
    want = conll.get_entities(tags)
    e = out["num_entities"][b]
    assert [(out["entity_type"][b][k].decode(),) for k in range(e)] == [(w[0],) for w in want]
    for k, (_, first, last) in enumerate(want):
      start, end = out["entity_start_char"][b][k], out["entity_end_char"][b][k]
      assert (start, end) == (out["word_start_char"][b][first], out["word_end_char"][b][last])
      assert out["entity_text"][b][k].decode() == s[start:end]


def test_export_equals_the_task_on_real_dev(exported):
  """The SavedModel's tags on dev sentences joined with spaces == the task's
  predictions (the same TaggingPreprocessor, windows and max context)."""
  dev = conll.read_conll(NER_DEV, limit=40)
  enc = tagging_task.Encoded(tagging.TaggingPreprocessor(exported["pre"], 5), dev)
  assert enc.num_windows > 2 * len(dev)  # seq 16: long tweets take several windows
  logits = tagging_task.predict_window_logits(exported["model"], enc.features, 64)
  want = [[LABELS[i] for i in s] for s in enc.word_predictions(logits)]
  out = _serve(exported["fn"], [s.text for s in dev])
  for b, s in enumerate(dev):
    assert out["tags"][b][:len(s.words)].astype(str).tolist() == want[b]
  assert not out["truncated"].any()
  _check(out, [s.text for s in dev])
  assert sum(out["num_entities"]) > 0
  meta = saved_model.read_metadata(exported["path"])
  assert meta["export"] == "tagging" and meta["labels"] == LABELS
  assert sorted(meta["signatures"]["serving_default"]["outputs"]) == sorted(
      tagging_export.OUTPUTS)


def test_export_offsets_non_ascii_and_edge_strings(exported):
  sents = ["  Café  naïve\u3000Zürich 😀 x ", "", " \t\n ", "\u200b", "a\u00a0b\u2028c"]
  out = _serve(exported["fn"], sents)
  _check(out, sents)
  assert out["word_start_char"][0][:5].tolist() == [2, 8, 14, 21, 23]
  assert out["num_words"].tolist() == [5, 0, 0, 1, 3]
  raw = [b"\xff\xfe bad \xc3 utf8", b"\x00\x01", ("word " * 200000).encode()]
  out = _serve(exported["fn"], raw)
  _check(out, raw)
  assert out["truncated"].tolist() == [False, False, True]  # 1 MB: max_windows
  assert out["num_words"][2] == 200000
  assert _serve(exported["fn"], [])["tags"].shape[0] == 0


def _reference(exported, sentences):
  """What the SavedModel must answer, from Python and the in-process model:
  the words and code-point offsets of ``str.split()`` on the sentence as
  Python decodes it; the tags of the task's own pipeline (``Encoded``:
  TaggingPreprocessor windows, max-context first-piece logits) with the word
  logits (for near-ties)."""
  texts = [_dec(s) for s in sentences]
  words, spans = [], []
  for t in texts:
    w, pos, sp = t.split(), 0, []
    for x in w:
      pos = t.index(x, pos)
      sp.append((pos, pos + len(x)))
      pos += len(x)
    words.append(w)
    spans.append(sp)
  tags, logits = [[] for _ in texts], np.zeros([0, len(LABELS)], np.float32)
  if any(words):
    tp = tagging.TaggingPreprocessor(exported["pre"], 5)  # no window cap
    enc = tagging_task.Encoded(tp, [conll.Sentence(w, None, list(range(len(w))))
                                    for w in words])
    assert enc.windows_per_sentence.max() <= MAX_WINDOWS  # nothing truncated
    window_logits = tagging_task.predict_window_logits(exported["model"], enc.features, 256)
    logits, covered = tp.word_logits(enc.win, enc.pieces, tf.constant(window_logits))
    logits = logits.numpy()
    assert covered.numpy().all()
    ids, i = logits.argmax(-1), 0
    for b, w in enumerate(words):
      tags[b] = [LABELS[j] for j in ids[i:i + len(w)]]
      i += len(w)
  return {"texts": texts, "words": words, "spans": spans, "tags": tags,
          "logits": logits}


def _dec(s):
  """A served string as Python reads it (invalid UTF-8 -> U+FFFD)."""
  return s.decode("utf-8", "replace") if isinstance(s, bytes) else s


def _enc(s):
  """A drawn string as the bytes sent (text as UTF-8)."""
  return s.encode("utf-8") if isinstance(s, str) else s


def _serve_and_compare(exported, sentences):
  """Serves ``sentences`` and compares every output with :func:`_reference`:
  words, offsets, tags (a near-tie of the reference's word logits, within
  1e-5, may go either way), entities (seqeval's ``get_entities`` of the
  tags) with their types, offsets and texts, counts, and no truncation."""
  get_entities = require("seqeval.metrics.sequence_labeling").get_entities
  raw = [_enc(s) for s in sentences]
  out = _serve(exported["fn"], raw)
  ref = _reference(exported, raw)
  assert out["num_words"].tolist() == [len(w) for w in ref["words"]]
  assert not out["truncated"].any()
  i = 0
  for b, (t, words, spans) in enumerate(zip(ref["texts"], ref["words"], ref["spans"])):
    n = len(words)
    assert [w.decode("utf-8") for w in out["words"][b][:n]] == words
    assert all(w == b"" for w in out["words"][b][n:])
    assert list(zip(out["word_start_char"][b][:n].tolist(),
                    out["word_end_char"][b][:n].tolist())) == spans
    tags = [x.decode() for x in out["tags"][b][:n]]
    for k, (got, want) in enumerate(zip(tags, ref["tags"][b])):
      if got != want:  # only a near-tie of the reference's logits
        assert got in LABELS, (b, k, got)
        row = ref["logits"][i + k]
        assert row[LABELS.index(got)] >= row.max() - 1e-5, (b, k, got, want, row)
    i += n
    ents = get_entities(tags)
    e = out["num_entities"][b]
    assert e == len(ents)
    assert [x.decode() for x in out["entity_type"][b][:e]] == [x[0] for x in ents]
    starts = [spans[f][0] for _, f, _ in ents]
    ends = [spans[l][1] for _, _, l in ents]
    assert out["entity_start_char"][b][:e].tolist() == starts
    assert out["entity_end_char"][b][:e].tolist() == ends
    assert [x.decode("utf-8") for x in out["entity_text"][b][:e]] == [
        t[s0:s1] for s0, s1 in zip(starts, ends)]
  return out


def test_reference_comparison_fails_on_a_wrong_answer(exported):
  """The comparison the fuzz tests rely on catches a served answer that is
  not the model's (here: every tag moved one word to the right)."""
  sents = [s.text for s in conll.read_conll(NER_DEV, limit=4)]
  out = _serve_and_compare(exported, sents)
  assert sum(out["num_entities"]) > 0
  assert any(len(set(t[:n])) > 1 for t, n in zip(out["tags"], out["num_words"]))

  def shifted(sentence):
    res = dict(exported["fn"](sentence=sentence))
    res["tags"] = tf.roll(res["tags"], 1, axis=1)
    return res
  with pytest.raises(AssertionError):
    _serve_and_compare(dict(exported, fn=shifted), sents)


# Hypothesis: sentences from ``fuzz_util.unicode_strings`` (UTF-8 text of
# every Unicode category but Cs, the rare ones drawn on purpose, or invalid
# UTF-8); ``AWKWARD`` (one string of each kind) as an explicit example.


@fuzz_settings(15)
@hypothesis.given(sents=st.lists(unicode_strings(60), max_size=4))
@hypothesis.example(sents=AWKWARD)
def test_export_random_strings_equal_model(exported, sents):
  _serve_and_compare(exported, sents)


@slow_fuzz
@hypothesis.given(sents=st.lists(unicode_strings(SLOW_MAX_CHARS), min_size=1, max_size=3))
def test_export_random_long_strings_equal_model(exported, sents):
  """200 batches of sentences up to 2,000 characters of every category (Cs
  excluded, see ``fuzz_util``) and invalid UTF-8: every output == the
  reference's."""
  _serve_and_compare(exported, sents)


def test_export_label_mismatch(exported):
  with pytest.raises(ValueError, match="3 labels"):
    tagging_export.export_tagger(exported["model"], exported["pre"], ["O", "B-X", "I-X"],
                                 "unused")


# -------------------------------------------------------------------- tool


def _slice(tmp_path, n_train=60, n_dev=30):
  data = tmp_path / "data"
  data.mkdir()
  for name, n in (("train.txt", n_train), ("dev.txt", n_dev)):
    sents = conll.read_conll(os.path.join(NER_DIR, name), limit=n)
    conll.write_conll(str(data / name), [conll.Sentence(s.words, None, s.lines)
                                         for s in sents], [s.tags for s in sents])
  return data


def wnut_labels():
  """``--label_list`` of all 21 WNUT-16 tags (a small train slice lacks some)."""
  return "--label_list=" + ",".join(conll.label_list_from(conll.read_conll(NER_TRAIN)))


def test_tool_bad_input_is_a_flag_error_without_output(tmp_path):
  data = _slice(tmp_path, 4, 3)
  with open(data / "dev.txt", "a", encoding="utf-8") as f:
    f.write("Paris\tB-city\n")
  lines = (data / "dev.txt").read_text().count("\n")
  out = tmp_path / "out"
  proc = run_tool(["tools/run_ner.py", "--data_dir=%s" % data,
                   "--bert_config_file=%s" % TINY_CONFIG, "--vocab_file=%s" % VOCAB,
                   "--output_dir=%s" % out, "--do_train", "--do_eval", wnut_labels()],
                  check=False)
  assert proc.returncode != 0
  assert ("run_ner: error: --dev_file: %s:%d: tag 'B-city' is not one of the"
          % (data / "dev.txt", lines)) in proc.stderr, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  assert not out.exists() or not os.listdir(out)


def _read_predictions(path):
  """(words, gold tags, predicted tags) per sentence of a 3-column CoNLL file."""
  sents, cur = [], []
  for line in open(path, encoding="utf-8").read().split("\n"):
    if line:
      cur.append(line.split("\t"))
    elif cur:
      sents.append(cur)
      cur = []
  assert not cur and all(len(r) == 3 for s in sents for r in s)
  return ([[r[0] for r in s] for s in sents], [[r[1] for r in s] for s in sents],
          [[r[2] for r in s] for s in sents])


@pytest.mark.slow
def test_tool_end_to_end_and_export(tmp_path):
  """Train (tiny config, seq 16: windows) + eval + predict + export on WNUT
  rows; the model learns its training sentences; seqeval recomputes every
  written score (overall and per type) from test_predictions.txt; the
  SavedModel's tags equal the predictions file."""
  seqeval = require("seqeval.metrics")
  from seqeval.metrics.sequence_labeling import get_entities  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  data.mkdir()
  # train: the first 30 training tweets with an entity (48 entities);
  # dev = those, then 20 unseen dev tweets: a model that learned its
  # training sentences finds entities, and misses (or invents) some.
  train = [s for s in conll.read_conll(NER_TRAIN) if conll.get_entities(s.tags)][:30]
  dev = train + conll.read_conll(NER_DEV, limit=20)
  for name, sents in (("train.txt", train), ("dev.txt", dev), ("test.txt", dev)):
    conll.write_conll(str(data / name), [conll.Sentence(s.words, None, s.lines)
                                         for s in sents], [s.tags for s in sents])
  out, exp = tmp_path / "out", tmp_path / "exp"
  # AdamW, not the default original AdamWeightDecay: from random weights the
  # latter leaves this model at the all-O plateau for 200+ steps; AdamW at
  # 1e-3 leaves it after 75-85 of the 192 steps (seeds 0-3, measured).
  proc = run_tool(["tools/run_ner.py", "--data_dir=%s" % data,
                   "--bert_config_file=%s" % TINY_CONFIG, "--vocab_file=%s" % VOCAB,
                   "--output_dir=%s" % out, "--export_dir=%s" % exp, "--do_train",
                   "--do_eval", "--do_predict", "--train_batch_size=16",
                   "--num_train_epochs=25", "--max_seq_length=16", "--doc_stride=6",
                   "--iterations_per_loop=8", "--learning_rate=1e-3",
                   "--optimizer=adamw", wnut_labels()])
  assert "fine-tuning on" in proc.stdout and "123 windows" in proc.stdout
  # test_predictions.txt is the best dev model's: its record is best/eval_results.txt.
  res = dict(l.split(" = ") for l in (out / "best" / "eval_results.txt")
             .read_text().splitlines())
  words, true, pred = _read_predictions(out / "test_predictions.txt")
  assert words == [s.words for s in dev] and true == [s.tags for s in dev]
  warnings.simplefilter("ignore")
  found = sum(len(get_entities(p)) for p in pred)
  f1 = seqeval.f1_score(true, pred)
  # It learned: entities found, F1 >= 0.5 (a model that predicts only O
  # scores 0; measured ~0.95 on the 48 training entities, seeds 0-3).
  assert found >= 20 and f1 >= 0.5, (found, f1)
  assert float(res["eval_f1"]) == pytest.approx(f1, abs=1e-9)
  assert float(res["eval_precision"]) == pytest.approx(
      seqeval.precision_score(true, pred), abs=1e-9)
  assert float(res["eval_recall"]) == pytest.approx(seqeval.recall_score(true, pred),
                                                    abs=1e-9)
  assert float(res["eval_accuracy"]) == pytest.approx(seqeval.accuracy_score(true, pred),
                                                      abs=1e-9)
  report = seqeval.classification_report(true, pred, output_dict=True)
  types = sorted(k for k in report if not k.endswith(" avg"))
  assert sorted({k[5:k.rindex("_")] for k in res
                 if k.endswith("_support")}) == types  # every type, no other
  for ty in types:
    for k, ref in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
      assert float(res["eval_%s_%s" % (ty, k)]) == pytest.approx(report[ty][ref],
                                                                 abs=1e-9), (ty, k)
    assert int(res["eval_%s_support" % ty]) == report[ty]["support"], ty
  assert len({report[ty]["f1-score"] for ty in types}) > 2  # the types differ
  cfg = json.loads((out / "ner_config.json").read_text())
  assert cfg["labels"] == wnut_labels().split("=")[1].split(",")
  (version,) = os.listdir(exp)
  fn = tf.saved_model.load(str(exp / version)).signatures["serving_default"]
  served = _serve(fn, [s.text for s in dev])
  for b, s in enumerate(dev):
    assert served["tags"][b][:len(s.words)].astype(str).tolist() == pred[b]
  assert not [f for f in os.listdir(out) if ".tmp" in f]
