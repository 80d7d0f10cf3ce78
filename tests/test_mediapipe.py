"""The MediaPipe Tasks export, ``--format=mediapipe`` (issue 70 item 1).

A tiny BERT run directory (random weights with ``initializer_range`` 0.2,
so that its outputs differ from text to text, and a head centred on the dev
set, so that both labels occur), exported by the tool (float32 classifier)
and through ``export_run`` (dynamic_int8; the features kind, ``mean`` and
``pooled``; a multi-label spec with ``dynamic_length``), run by MediaPipe's
own ``TextClassifier`` / ``TextEmbedder`` (PyPI mediapipe 1.2.2) against
the SavedModel exports of the same weights. MediaPipe's ids come from an
id-echo file (:func:`bert_tf.export.mediapipe.token_ids_model`): scores
are compared on the lines where MediaPipe's tokenizer gives the
SavedModel's ids, and its tokenizer is compared with the original
``FullTokenizer`` on the tokenizer tests' corpora (every difference one of
:data:`bert_tf.export.mediapipe.TOKEN_DIFFERENCES`). Accuracy on the
fine-tuned MiniLM: ``bench/results/mediapipe_2026-12-05/``.
"""

import collections
import json
import os
import re
import shutil
import sys
import unicodedata

import numpy as np
import pytest

from conftest import AUSTEN_SLICE, MOVIE_DIR, TINY_CONFIG, VOCAB, require, run_tool

require("mediapipe", "tools/setup.sh --test installs it (requirements-test.txt; the "
        "bert_tf[mediapipe] extra)")

import tensorflow as tf  # noqa: E402  pylint: disable=g-import-not-at-top

from bert_tf import config as config_lib  # noqa: E402
from bert_tf import preprocessing  # noqa: E402
from bert_tf import run_dir  # noqa: E402
from bert_tf import tokenization  # noqa: E402
from bert_tf.export import client  # noqa: E402
from bert_tf.export import fine_tuned  # noqa: E402
from bert_tf.export import formats  # noqa: E402
from bert_tf.export import mediapipe  # noqa: E402
from bert_tf.export import spec as spec_lib  # noqa: E402
from bert_tf.modeling import models  # noqa: E402

SEQ = 64
LABELS = ["negative", "positive"]
LONG = "a gorgeous , witty , seductive movie " * 20  # > SEQ pieces: cut
TOOL = "tools/export_saved_model.py"


def _dev():
  with open(os.path.join(MOVIE_DIR, "dev.tsv"), encoding="utf-8") as f:
    rows = [l.rstrip("\n").split("\t") for l in f][1:]
  return [r[0] for r in rows]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """A classifier run directory written by hand (no training): ``(path,
  model, preprocessor)``."""
  out = tmp_path_factory.mktemp("mp_run") / "run"
  out.mkdir()
  with open(TINY_CONFIG, encoding="utf-8") as f:
    config = dict(json.load(f), initializer_range=0.2)
  (out / run_dir.BERT_CONFIG).write_text(json.dumps(config))
  shutil.copy(VOCAB, out / run_dir.VOCAB)
  (out / run_dir.CLASSIFIER_CONFIG).write_text(json.dumps({
      "task_name": "sst-2", "labels": LABELS, "do_lower_case": True,
      "max_seq_length": SEQ, "is_regression": False, "is_pair": False}))
  tf.keras.utils.set_random_seed(5)
  model = models.build_classifier(config_lib.BertConfig(**config), 2)
  pre = preprocessing.BertPreprocessor(VOCAB, True, SEQ)
  head = model.classifier
  head.output_weights.assign(head.output_weights * 10.0)
  logits = model(pre(tf.constant(_dev()[::4])), training=False).numpy()
  head.output_bias.assign(head.output_bias + [0.0, -np.median(logits[:, 1] - logits[:, 0])])
  tf.train.Checkpoint(model=model).save(str(out / "ckpt"))
  return str(out), model, pre


@pytest.fixture(scope="module")
def exports(run, tmp_path_factory):
  """Every export once: ``{name: version path}``, ``"tool"`` the tool's
  (its stdout under ``"tool_stdout"``), ``"ids"`` the id-echo file."""
  path, model, pre = run
  d = tmp_path_factory.mktemp("mp_exports")
  p = run_tool([TOOL, "--output_dir=" + path, "--export_dir=" + str(d / "tool"),
                "--format=mediapipe"])
  out = {"tool": os.path.join(str(d / "tool"), "1"), "tool_stdout": p.stdout}
  rd = fine_tuned.with_model(fine_tuned.read_run(path), model)
  for name, what, options in (
      ("saved", None, {}), ("features_saved", "features", {}),
      ("int8", None, dict(format="mediapipe", quantize="dynamic_int8")),
      ("mean", "features", dict(format="mediapipe")),
      ("pooled", "features", dict(format="mediapipe", embedding="pooled"))):
    out[name] = fine_tuned.export_run(rd, what, str(d / name), **options)
  multi = rd.spec.replace(problem_type=spec_lib.MULTI_LABEL)
  out["multi"] = formats.write("mediapipe", multi, model, pre, str(d / "multi"),
                               dynamic_length=True)
  out["ids"] = str(d / "ids.tflite")
  with open(out["ids"], "wb") as f:
    f.write(mediapipe.token_ids_model(pre.vocab_lines(), 512))
  return out


@pytest.fixture(scope="module")
def mp():
  return mediapipe.load_mediapipe()


def _tflite(version_path):
  return os.path.join(version_path, mediapipe.MODEL_FILE)


@pytest.fixture(scope="module")
def reference(exports):
  """The SavedModels' answers on the dev set (+ LONG, + ""): classifier
  ``probabilities``, ``logits``, ``labels``; features ``mean`` / ``pooled``
  and the ids (``ids``: one list per text)."""
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  texts = _dev() + [LONG, ""]
  clf = tf.saved_model.load(exports["saved"]).signatures["serving_default"]
  feat = tf.saved_model.load(exports["features_saved"]).signatures["serving_default"]
  out = collections.defaultdict(list)
  for i in range(0, len(texts), 128):
    batch = tf.constant(texts[i:i + 128])
    c, f = clf(text=batch), feat(text_a=batch)
    mask = f["input_mask"].numpy()
    seq = f["sequence_output"].numpy() * mask[..., None]
    out["probabilities"].append(c["probabilities"].numpy())
    out["logits"].append(c["logits"].numpy())
    out["labels"] += [l.decode() for l in c["labels"].numpy()]
    out["mean"].append(seq.sum(1) / mask.sum(1, keepdims=True))
    out["pooled"].append(f["pooled_output"].numpy())
    out["ids"] += [row[m > 0].tolist() for row, m in zip(f["input_ids"].numpy(), mask)]
  ref = {k: (np.concatenate(v) if k not in ("labels", "ids") else v) for k, v in out.items()}
  ref["texts"] = texts
  return ref


@pytest.fixture(scope="module")
def same_ids(exports, reference, mp):
  """bool [N]: MediaPipe's tokenizer gives the SavedModel's ids for that text."""
  with mp.text.TextEmbedder.create_from_model_path(exports["ids"]) as echo:
    return np.array([mediapipe.token_ids(echo, t) == ids
                     for t, ids in zip(reference["texts"], reference["ids"])])


def _classify(mp, path, texts, names=False):
  with mp.text.TextClassifier.create_from_model_path(_tflite(path)) as clf:
    scores, labels = np.zeros([len(texts), len(LABELS)], np.float32), []
    for i, text in enumerate(texts):
      cats = clf.classify(text).classifications[0].categories
      for c in cats:
        scores[i, c.index] = c.score
      labels.append(max(cats, key=lambda c: c.score).category_name)
  return (scores, labels) if names else scores


def test_text_classifier_answers_the_savedmodels_labels_and_scores(exports, reference,
                                                                   same_ids, mp):
  scores, labels = _classify(mp, exports["tool"], reference["texts"], names=True)
  want = reference["probabilities"]
  # A model whose answer depends on the text (else equal answers prove nothing).
  assert want[:, 1].std() > 0.05 and 0.2 < np.mean(want[:, 1] > 0.5) < 0.8
  # MediaPipe's own tokenizer gives other ids on a few lines (accents, see
  # test_mediapipe_tokenizer_differs_only_as_documented): scores equal elsewhere.
  differ = np.flatnonzero(~same_ids)
  assert 0 < len(differ) < 20, [reference["texts"][i] for i in differ]
  np.testing.assert_allclose(scores[same_ids], want[same_ids], atol=1e-4)
  # Labels equal wherever the ids are and the SavedModel's answer is no tie
  # within that tolerance (this random model has lines at 0.5 +- 1e-5).
  equal = np.array(labels) == np.array(reference["labels"])
  decided = same_ids & (np.abs(want[:, 1] - want[:, 0]) > 2e-4)
  assert equal[decided].all() and decided.sum() > 0.98 * len(decided)
  print("dev + 2: %d lines, %d with other ids (%d of them another label), labels equal on "
        "%d, max |score diff| %.2g (equal ids) %.2g (all)" % (
            len(scores), len(differ), (~equal[differ]).sum(), equal.sum(),
            np.abs(scores - want)[same_ids].max(), np.abs(scores - want).max()))


def test_the_tools_file_is_what_mediapipe_reads(exports, mp):
  """One subgraph, int32 [1, S] ids / mask / segment ids, MediaPipe's
  metadata (tokenizer, vocab, labels, parser version), the summary line and
  one warning per tokenizer difference."""
  stdout, path = exports["tool_stdout"], exports["tool"]
  tflite = _tflite(path)
  assert re.search(r"^exported classifier \(sst-2, checkpoint .*ckpt-1\) to %s \([\d.]+ MB, "
                   r"quantize=none, max_seq_length 64, output probabilities\); run it with "
                   r"MediaPipe Tasks' TextClassifier" % re.escape(tflite), stdout, re.M), stdout
  warnings = [l for l in stdout.splitlines() if l.startswith("warning: MediaPipe's tokenizer")]
  assert len(warnings) == len(mediapipe.TOKEN_DIFFERENCES), stdout
  with open(tflite, "rb") as f:
    flat = f.read()
  model = mp.schema.Model.GetRootAsModel(flat, 0)
  assert model.SubgraphsLength() == 1
  sg = model.Subgraphs(0)
  inputs = {sg.Tensors(sg.Inputs(i)).Name().decode(): sg.Tensors(sg.Inputs(i)).ShapeAsNumpy()
            .tolist() for i in range(sg.InputsLength())}
  assert inputs == {"serving_default_%s:0" % n: [1, SEQ] for n in mediapipe.INPUT_NAMES}
  meta = client.read_metadata(path)
  assert (meta["format"], meta["labels"], meta["outputs"], meta["mediapipe_task"]) == (
      "mediapipe", LABELS, ["probabilities"], "TextClassifier")
  assert meta["token_differences"] == list(mediapipe.TOKEN_DIFFERENCES)
  shown = mp.metadata.MetadataDisplayer.with_model_buffer(flat)
  assert json.loads(shown.get_metadata_json()) == meta["tflite_metadata"]
  assert meta["tflite_metadata"]["min_parser_version"] == "1.1.0"
  files = shown.get_packed_associated_file_list()
  assert sorted(files) == ["labels.txt", mediapipe.VOCAB_FILE], files
  assert shown.get_associated_file_buffer("labels.txt").decode().split() == LABELS
  vocab = shown.get_associated_file_buffer(mediapipe.VOCAB_FILE).decode().splitlines()
  assert vocab == preprocessing.read_vocab_lines(VOCAB)
  # The predict tool names MediaPipe's tasks for it (its inputs are ids).
  p = run_tool(["tools/predict_saved_model.py", path, "a gorgeous film"], check=False)
  assert p.returncode != 0 and "TextClassifier" in p.stderr, p.stderr


def test_dynamic_int8_file_runs_in_mediapipe_as_in_litert(run, exports, reference,
                                                          same_ids, mp):
  """The int8 file (a quarter of the float32 one) answers in MediaPipe what
  LiteRT answers on the SavedModel's ids (its accuracy on a fine-tuned
  model: the bench table)."""
  from ai_edge_litert import interpreter  # pylint: disable=g-import-not-at-top
  pick = [i for i in range(0, len(reference["texts"]), 7) if same_ids[i]]
  texts = [reference["texts"][i] for i in pick]
  got = _classify(mp, exports["int8"], texts)
  tflite = _tflite(exports["int8"])
  assert os.path.getsize(tflite) < 0.35 * os.path.getsize(_tflite(exports["tool"]))
  assert client.read_metadata(exports["int8"])["quantize"] == "dynamic_int8"
  runner = interpreter.Interpreter(model_path=tflite, num_threads=1).get_signature_runner()
  f = {k: v.numpy() for k, v in run[2](tf.constant(texts)).items()}
  want = np.concatenate([runner(ids=f["input_ids"][i:i + 1], mask=f["input_mask"][i:i + 1],
                                segment_ids=f["segment_ids"][i:i + 1])["probabilities"]
                         for i in range(len(texts))])
  np.testing.assert_allclose(got, want, atol=1e-5)
  # Quantized: not the float32 answers (this random model's int8 error is large).
  assert np.abs(got - reference["probabilities"][pick]).max() > 1e-3


@pytest.mark.parametrize("embedding", ["mean", "pooled"])
def test_text_embedder_answers_the_features_exports_embedding(exports, reference, same_ids,
                                                              mp, embedding):
  texts = reference["texts"]
  pick = [i for i in range(0, len(texts), 4)] + [len(texts) - 2, len(texts) - 1]
  with mp.text.TextEmbedder.create_from_model_path(_tflite(exports[embedding])) as emb:
    got = np.array([emb.embed(texts[i]).embeddings[0].embedding for i in pick])
  want = reference[embedding][pick]
  assert got.shape == want.shape and np.abs(want.std(0)).mean() > 1e-3
  keep = same_ids[pick]
  np.testing.assert_allclose(got[keep], want[keep], atol=1e-4)
  assert client.read_metadata(exports[embedding])["embedding"] == embedding


def test_multi_label_sigmoid_and_dynamic_length(exports, reference, same_ids, mp):
  """A multi-label spec: each score the sigmoid of its logit; inputs
  [1, None], the long text cut at S as the SavedModel cuts it."""
  texts = reference["texts"]
  pick = [i for i in range(0, len(texts), 9)] + [len(texts) - 2, len(texts) - 1]
  assert len(reference["ids"][-2]) == SEQ  # LONG is cut
  got = _classify(mp, exports["multi"], [texts[i] for i in pick])
  want = 1.0 / (1.0 + np.exp(-reference["logits"][pick]))
  keep = same_ids[pick]
  np.testing.assert_allclose(got[keep], want[keep], atol=1e-4)
  meta = client.read_metadata(exports["multi"])
  assert meta["multi_label"] and meta["dynamic_length"]
  with open(_tflite(exports["multi"]), "rb") as f:
    sg = mp.schema.Model.GetRootAsModel(f.read(), 0).Subgraphs(0)
  assert sg.Tensors(sg.Inputs(0)).ShapeSignatureAsNumpy().tolist() == [1, -1]


# ---------------------------------------------------------------- tokenizer


def original_normalization(text):
  """The text as the original BasicTokenizer (uncased) cleans it before
  splitting (``_clean_text``, ``whitespace_tokenize``, ``_run_strip_accents``):
  NUL, U+FFFD and control / format characters (but tab and newlines)
  deleted, whitespace to a space, ``str.lower``, NFD, accents (Mn) dropped."""
  kept = []
  for c in text:
    category = unicodedata.category(c)
    if c in "\x00\ufffd" or (category in ("Cc", "Cf") and c not in "\t\n\r"):
      continue
    kept.append(" " if c.isspace() or category == "Zs" else c)
  nfd = unicodedata.normalize("NFD", "".join(kept).lower())
  return "".join(c for c in nfd if unicodedata.category(c) != "Mn")


# Which of TOKEN_DIFFERENCES (in order) a text holds: accents, non-ASCII
# upper case, other NFD decompositions (Hangul), non-ASCII whitespace,
# control / format characters, a word of 101-200 bytes, NUL.
CLASSES = (
    lambda t: any(unicodedata.category(c) == "Mn" for c in unicodedata.normalize("NFD", t)),
    lambda t: any(ord(c) > 127 and c.lower() != c for c in t),
    lambda t: any(unicodedata.normalize("NFD", c) != c and not any(
        unicodedata.category(x) == "Mn" for x in unicodedata.normalize("NFD", c)) for c in t),
    lambda t: any(ord(c) > 127 and (c.isspace() or unicodedata.category(c) == "Zs")
                  for c in t),
    lambda t: any(unicodedata.category(c) in ("Cc", "Cf") and c not in "\t\n\r\x00"
                  or c == "\ufffd" for c in t),
    lambda t: any(100 < len(w.encode()) and len(w) <= 200 for w in t.split()),
    lambda t: "\x00" in t,
)
EDGE_CASES = ["x" * 101, "\u00e9" * 60, "a\x00b c", "b\u200bc d\x07e", "a\u00a0b a\u3000b",
              "A\x0bB A\x0cB", "\u00c9COLE \u0130stanbul", "\ud55c\uad6d\uc5b4", "x" * 100]


def test_mediapipe_tokenizer_differs_only_as_documented(exports, mp):
  """MediaPipe's ids against the original FullTokenizer's (uncased) on the
  tokenizer tests' corpora: equal on every line once the text is cleaned
  as the original cleans it (so each difference is its normalization:
  accents, case, NFD, whitespace, control characters), but for words of
  101-200 bytes and NUL; each class of TOKEN_DIFFERENCES occurs."""
  from test_tokenization import ADVERSARIAL, CASES, _lines, task_texts  # pylint: disable=g-import-not-at-top
  with open(os.path.join(MOVIE_DIR, "train.tsv"), encoding="utf-8") as f:
    movies = [l.split("\t")[0] for l in f.read().splitlines()[1:]]
  corpora = {"austen_slice": _lines(AUSTEN_SLICE), "movie_reviews": movies + _dev(),
             "task_texts": task_texts(),
             "edge_cases": ADVERSARIAL + [c for c, lower in CASES if lower] + EDGE_CASES}
  ref = tokenization.FullTokenizer(VOCAB, do_lower_case=True)

  def original(text):
    return ref.convert_tokens_to_ids(["[CLS]"] + ref.tokenize(text)[:510] + ["[SEP]"])
  report, unexplained = {}, []
  with mp.text.TextEmbedder.create_from_model_path(exports["ids"]) as echo:
    for name, lines in corpora.items():
      differ, kinds = 0, collections.Counter()
      for text in lines:
        want = original(text)
        if mediapipe.token_ids(echo, text) == want:
          continue
        differ += 1
        found = {i for i, holds in enumerate(CLASSES) if holds(text)}
        kinds.update(found)
        # Cleaned as the original cleans it, MediaPipe gives the original's ids
        # (but where a word is over 100 bytes or a NUL cuts the text).
        if not found or (not found & {5, 6} and mediapipe.token_ids(
            echo, original_normalization(text)) != want):
          unexplained.append(text)
      report[name] = (len(lines), differ, dict(sorted(kinds.items())))
  print("\n".join("%s: %d lines, %d differ, by class %s" % ((k,) + v)
                  for k, v in report.items()))
  assert not unexplained, unexplained[:5]
  seen = set().union(*(v[2] for v in report.values()))
  assert seen == set(range(len(mediapipe.TOKEN_DIFFERENCES))), seen
  # ASCII prose tokenizes as the original's; the real-text differences are rare.
  assert report["austen_slice"][1] == 0
  assert 0 < report["movie_reviews"][1] < 0.02 * report["movie_reviews"][0]


# ---------------------------------------------------------------- refusals


def _pair_run(path, tmp_path):
  pair = tmp_path / "pair"
  pair.mkdir()
  for name in (run_dir.BERT_CONFIG, run_dir.VOCAB):
    shutil.copy(os.path.join(path, name), pair / name)
  (pair / run_dir.CLASSIFIER_CONFIG).write_text(json.dumps({
      "task_name": "mrpc", "labels": ["0", "1"], "do_lower_case": True,
      "max_seq_length": SEQ, "is_regression": False, "is_pair": True}))
  return str(pair)


def _one_line_refusal(p, export_dir, pattern):
  assert p.returncode != 0 and not os.path.exists(export_dir), p.stdout
  lines = p.stderr.strip().splitlines()
  assert len(lines) == 1 and re.search(pattern, lines[0]), p.stderr


def test_tool_refuses_in_one_line_before_any_work(run, tmp_path):
  path = run[0]
  out = str(tmp_path / "x")
  _one_line_refusal(run_tool([TOOL, "--output_dir=" + path, "--export_dir=" + out,
                              "--format=mediapipe", "--what=encoder"], check=False),
                    out, r"^export_saved_model: error: --format=mediapipe --what=encoder: .*"
                         r"TextClassifier \(classifier\) and TextEmbedder \(features\)")
  _one_line_refusal(run_tool([TOOL, "--output_dir=" + _pair_run(path, tmp_path),
                              "--export_dir=" + out, "--format=mediapipe"], check=False),
                    out, r"sentence pairs; MediaPipe's TextClassifier takes one text")
  _one_line_refusal(run_tool([TOOL, "--output_dir=" + path, "--export_dir=" + out,
                              "--format=mediapipe", "--embedding=pooled"], check=False),
                    out, r"--embedding is for --what=features")


def test_refusals_write_nothing(run, tmp_path, monkeypatch):
  _, model, pre = run
  spec = spec_lib.ServingSpec.create("classifier", SEQ, labels=LABELS, do_lower_case=True)
  out = str(tmp_path / "x")

  def refused(pattern, spec=spec, pre=pre, **options):
    with pytest.raises(errors_of_export, match=pattern) as e:
      formats.write("mediapipe", spec, model, pre, out, **options)
    assert "\n" not in str(e.value) and not os.path.exists(out)
  errors_of_export = (mediapipe.MediaPipeExportError, formats.FormatError)
  refused(r"regression model has no MediaPipe task",
          spec=spec_lib.ServingSpec.create("classifier", SEQ, problem_type=spec_lib.REGRESSION,
                                           do_lower_case=True))
  refused(r"a cased model; MediaPipe lower-cases every input",
          spec=spec.replace(do_lower_case=False))
  refused(r"--quantize=int8: --format=mediapipe writes one of none, dynamic_int8, float16",
          quantize="int8")
  refused(r"--embedding is for --what=features", embedding="pooled")
  refused(r"--format=mediapipe: --xla", xla=True)
  lines = preprocessing.read_vocab_lines(VOCAB)
  refused(r"vocab line 3 is empty; MediaPipe's vocab loader skips empty lines",
          pre=preprocessing.BertPreprocessor(lines[:2] + [""] + lines[3:], True, SEQ))
  with pytest.raises(mediapipe.MediaPipeExportError, match=r"the vocab has no \[UNK\]"):
    mediapipe.check_vocab([l for l in lines if l != "[UNK]"])
  monkeypatch.setitem(sys.modules, "mediapipe", None)  # as if not installed
  refused(r"needs MediaPipe, which is not installed: pip install mediapipe==1\.2\.2")
