"""The LiteRT (.tflite) export with the tokenizer inside (issue 61).

Tiny random-init models of every string task (one conversion each, module
scope) against the Keras models they were converted from, fed the
``BertPreprocessor``'s ids (the SavedModel's computation); the NER and
preprocessor ``.tflite`` against their SavedModels (every output); the in-graph
``FastBertTokenizer`` against the original ``FullTokenizer`` on the
project's tokenizer corpora; bad input fed to the interpreter; a fresh
process with numpy, ai_edge_litert and tensorflow_text only; the export and
predict tools on a run directory. The real-weights accuracy tables are
written by the scripts beside them in bench/results/litert_2026-12-02/.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import unicodedata

import numpy as np
import pytest

from conftest import MOVIE_DIR, NER_DIR, ROOT, TINY_CONFIG, VOCAB, run_tool

pytest.importorskip("ai_edge_litert")

import tensorflow as tf  # noqa: E402  pylint: disable=g-import-not-at-top

from bert_tf import config as config_lib  # noqa: E402
from bert_tf import preprocessing  # noqa: E402
from bert_tf import run_dir  # noqa: E402
from bert_tf import task_kinds  # noqa: E402
from bert_tf import tokenization  # noqa: E402
from bert_tf.export import client  # noqa: E402
from bert_tf.export import fine_tuned  # noqa: E402
from bert_tf.export import litert  # noqa: E402
from bert_tf.export import saved_model  # noqa: E402
from bert_tf.export import tagging as tagging_export  # noqa: E402
from bert_tf.modeling import encoder as encoder_lib  # noqa: E402
from bert_tf.modeling import models  # noqa: E402
from bert_tf.modeling import multiple_choice  # noqa: E402
from bert_tf.modeling import tagging  # noqa: E402

SEQ = 32
TOKEN_SEQ = 64
LABELS = ["a", "b", "c"]
# Every chunk prefix (IOBES), so random tags meet each of conlleval's rules.
TAGS = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "S-LOC"]
NER_STRIDE, NER_WINDOWS = 11, 4
SENTENCES = ["Empire State Building is in New York .", "caf\u00e9 NA\u00cfVE \u4e2d\u6587",
             "", "   ", "word " * 80, "x" * 300]
PAIRS = (["a gorgeous , witty , seductive movie .", "short", "one two three four five "
          "six seven eight nine ten eleven twelve thirteen fourteen", ""],
         ["It was fine.", "a b c d e f g h i j k l m n o p q r s t u v w x y z",
          "one two", "   "])


def _b(values):
  return np.array([v.encode("utf-8") for v in values], dtype=object)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """One tiny model per task, exported float32 once: ``(paths, models, pre,
  tokenizer-only paths)``; ``paths["ner_saved"]``: the NER model's SavedModel."""
  d = tmp_path_factory.mktemp("litert")
  cfg = config_lib.BertConfig.from_json_file(TINY_CONFIG)
  tf.keras.utils.set_random_seed(3)
  pre = preprocessing.BertPreprocessor(VOCAB, True, SEQ)
  built = {
      "pair": ("classifier", models.build_classifier(cfg, 3),
               dict(labels=LABELS, is_pair=True)),
      # doc_stride 11 of 30-piece windows: up to 3 windows hold a piece (ties
      # of max context); max_windows 4 truncates the longest sentences.
      "ner": ("ner", tagging.BertTokenClassifier(cfg, len(TAGS)),
              dict(labels=TAGS, doc_stride=NER_STRIDE, max_windows=NER_WINDOWS)),
      "swag": ("swag", multiple_choice.build_multiple_choice(cfg), dict(num_choices=4)),
      "features": ("features", encoder_lib.BertEncoder(cfg), {}),
  }
  paths = {}
  for name, (what, model, kw) in built.items():
    paths[name] = os.path.join(litert.export_litert(what, model, pre, str(d / name), **kw),
                               litert.MODEL_FILE)
  paths["ner_saved"] = tagging_export.export_tagger(
      built["ner"][1], pre, TAGS, str(d / "ner_saved"), NER_STRIDE, NER_WINDOWS)
  tok = {}
  for lower in (True, False):
    p = preprocessing.BertPreprocessor(VOCAB, lower, TOKEN_SEQ)
    tok[lower] = os.path.join(litert.export_litert("preprocessor", None, p,
                                                   str(d / ("pre%d" % lower))),
                              litert.MODEL_FILE)
  return paths, {k: v[1] for k, v in built.items()}, pre, tok


def _corpus():
  from test_tokenization import ADVERSARIAL, austen_lines, task_texts  # pylint: disable=g-import-not-at-top
  with open(os.path.join(MOVIE_DIR, "train.tsv"), encoding="utf-8") as f:
    movies = [l.split("\t")[0] for l in f.read().splitlines()[1:1500]]
  extra = ["", " ", "\t\n", "caf\u00e9 \u00c5ngstr\u00f6m na\u00efve", "\u4e2d\u6587\u5b57\u7b26 "
           "\u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4", "\U0001F600 emoji", "x" * 199, "x" * 200,
           "x" * 201, "y" * 250 + " ok", "[unused1] [UNUSED2] x[unused3]", "He said: \"no!\""]
  return movies + austen_lines()[:1500] + task_texts()[:1500] + ADVERSARIAL + extra


def _known_difference(text, lower=False):
  """The documented classes (litert.TOKEN_DIFFERENCES): a control or format
  character (the original deletes it, FastBertNormalizer breaks the word
  there); uncased, a character whose NFKC case folding (FastBertNormalizer)
  is not ``str.lower`` + NFD (the original): ligatures, full-width forms,
  ``\u00df``, fractions, Roman numerals, final sigma."""
  if any(unicodedata.category(c) in ("Cc", "Cf") and c not in "\t\n\r" or c == "\ufffd"
         for c in text):
    return True
  return lower and (unicodedata.normalize("NFKD", text.casefold()) !=
                    unicodedata.normalize("NFD", text.lower()))


@pytest.mark.parametrize("lower", [True, False])
def test_in_graph_tokenizer_gives_the_originals_ids(exports, lower):
  tok = exports[3][lower]
  ref = tokenization.FullTokenizer(VOCAB, do_lower_case=lower)
  texts = _corpus()
  sig = client.LiteRTSignature(tok, num_threads=1)
  got = []
  for i in range(0, len(texts), 500):
    out = sig(text=_b(texts[i:i + 500]))
    got += [row[m > 0].tolist() for row, m in zip(out["input_ids"], out["input_mask"])]
  bad, known = [], []
  for text, ids in zip(texts, got):
    want = ref.convert_tokens_to_ids(["[CLS]"] + ref.tokenize(text)[:TOKEN_SEQ - 2] + ["[SEP]"])
    if ids != want:
      (known if _known_difference(text, lower) else bad).append(text)
  assert not bad, bad[:5]
  assert len(texts) > 4000
  # The documented difference is real (the notes would otherwise be stale).
  assert any("\x00" in t or "\x07" in t for t in known), known[:3]


def _keras(model, features):
  return {k: v.numpy() for k, v in features.items()}, model


def test_outputs_equal_the_keras_model_on_the_savedmodels_ids(exports):
  paths, built, pre, _ = exports
  # Pairs: longest-first trimming (PAIRS[0][2] and [1][1] both over budget).
  out = client.LiteRTSignature(paths["pair"], num_threads=1)(
      text_a=_b(PAIRS[0]), text_b=_b(PAIRS[1]))
  f = pre(tf.constant(PAIRS[0]), tf.constant(PAIRS[1]))
  want = built["pair"](f, training=False).numpy()
  np.testing.assert_allclose(out["logits"], want, atol=1e-4)
  assert out["labels"].tolist() == [LABELS[i].encode() for i in want.argmax(-1)]
  assert out["label_ids"].dtype == np.int32
  # A batch of short rows runs at its own length (LiteOps.own_length): same logits.
  short = (["short", "a b"], ["It was fine.", ""])
  out = client.LiteRTSignature(paths["pair"], num_threads=1)(
      text_a=_b(short[0]), text_b=_b(short[1]))
  f = pre(tf.constant(short[0]), tf.constant(short[1]))
  assert f["input_mask"].numpy().sum(-1).max() <= 16
  np.testing.assert_allclose(out["logits"], built["pair"](f, training=False).numpy(), atol=1e-4)
  # A request of one row runs at that row's own length.
  for a, b in zip(PAIRS[0] + short[0], PAIRS[1] + short[1]):
    out = client.LiteRTSignature(paths["pair"], num_threads=1)(text_a=_b([a]), text_b=_b([b]))
    f = pre(tf.constant([a]), tf.constant([b]))
    np.testing.assert_allclose(out["logits"], built["pair"](f, training=False).numpy(),
                               atol=1e-4)

  context = ["He opens the door.", "She bakes bread."]
  endings = [["and walks in.", "and flies away.", "", "and sits."],
             ["Knead the dough", "Paint the fence", "Wash the car", "Mix " * 40]]
  for rows in (slice(None), slice(0, 1), slice(1, 2)):  # a batch, and each alone
    out = client.LiteRTSignature(paths["swag"], num_threads=1)(
        context=_b(context[rows]), endings=np.array([_b(e) for e in endings[rows]]))
    f = multiple_choice.choice_features(pre, tf.constant(context[rows]),
                                        tf.constant(endings[rows]))
    np.testing.assert_allclose(out["logits"], built["swag"](f, training=False).numpy(),
                               atol=1e-4)

  out = client.LiteRTSignature(paths["features"], num_threads=1)(text_a=_b(SENTENCES))
  f = pre(tf.constant(SENTENCES))
  enc = built["features"](f, training=False)
  m = f["input_mask"].numpy()[..., None]
  np.testing.assert_allclose(out["sequence_output"] * m, enc["sequence_output"].numpy() * m,
                             atol=1e-4)
  np.testing.assert_allclose(out["pooled_output"], enc["pooled_output"].numpy(), atol=1e-4)
  assert out["encoder_outputs"].shape[1] == len(enc["encoder_outputs"])


def _ner_sentences():
  """Real tweets (WNUT16 dev + train slice), each alone and five joined (2-4
  windows of 30 pieces; longer: truncated), empty / whitespace rows, and
  words whose byte and code point offsets differ, between every whitespace
  character of ``str.split()`` and characters that are not whitespace."""
  from bert_tf.data import conll  # pylint: disable=g-import-not-at-top
  real = [" ".join(s.words) for s in conll.read_conll(os.path.join(NER_DIR, "dev.txt"))]
  real += [" ".join(s.words) for s in conll.read_conll(os.path.join(NER_DIR, "train.txt"),
                                                       limit=150)]
  spaces = [chr(c) for c in range(0x3001) if chr(c).isspace()]
  odd = ["caf\u00e9 M\u00fcnchen \u4e2d\u6587\u5b57 \U0001F600x \U0001F1EB\U0001F1F7 \u00c5ngstr\u00f6m",
         "w".join(spaces) + "w", "a\u200bb c\ufeffd e\u180ef g\x00h i\x01j \u00ad \u200b",
         "  lead and trail\t\n ", "\u3000\u00a0", "\U0001F600 " * 20, "x" * 300 + " \u00e9" * 3]
  joined = [" ".join(real[i:i + 5]) for i in range(0, 40, 5)]
  return real + joined + ["", " ", "\t\n"] + odd + SENTENCES


def test_ner_answers_the_ner_savedmodels_outputs(exports):
  """Every output of the NER SavedModel of the same model (words, tags,
  offsets, entities, truncated), doc-stride windows included, equal; the
  predict tool's JSON lines too."""
  paths = exports[0]
  sentences = _ner_sentences()
  lite = client.LiteRTSignature(paths["ner"], num_threads=1)
  saved = tf.saved_model.load(paths["ner_saved"]).signatures["serving_default"]
  assert sorted(lite.interpreter.get_signature_runner().get_output_details()) == sorted(
      tagging_export.OUTPUTS)
  entities, truncated = 0, 0
  # The last batches: short windows (the encoder at their own length); one
  # sentence alone.
  short = ["Empire State Building = ESB .", "", "caf\u00e9 \U0001F600 ok"]
  for batch in [sentences[i:i + 64] for i in range(0, len(sentences), 64)] + [short, short[:1]]:
    got = lite(sentence=_b(batch))
    want = {k: v.numpy() for k, v in saved(sentence=tf.constant(batch)).items()}
    for k in tagging_export.OUTPUTS:
      assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
      bad = np.argwhere(got[k] != want[k]) if got[k].ndim else []
      assert not len(bad), (k, batch[bad[0][0]][:80], got[k][tuple(bad[0])], want[k][tuple(bad[0])])
    entities += int(want["num_entities"].sum())
    truncated += int(want["truncated"].sum())
  ref = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
  pieces = [sum(max(1, len(ref.tokenize(w))) for w in s.split()) for s in sentences]
  step = min(SEQ - 2, NER_STRIDE)
  num = [0 if n == 0 else 1 + max(0, -(-(n - SEQ + 2) // step)) for n in pieces]
  assert {2, 3} <= set(num) and max(num) > NER_WINDOWS, sorted(set(num))
  assert entities > 200 and 0 < truncated < len(sentences) // 4, (entities, truncated)
  # The predict tool's answer (client.serve) is the SavedModel's, line for line.
  rows = sentences[-12:]
  assert (client.serve(os.path.dirname(paths["ner"]), rows, num_threads=1) ==
          client.serve(paths["ner_saved"], rows))


def test_pair_signatures_of_preprocessor_and_features(exports, tmp_path):
  """``pair`` (text_a, text_b) beside ``serving_default``, as the SavedModels:
  the preprocessor SavedModel's ids on real dialog pairs (trimmed longest
  first), the features export the Keras encoder's outputs on them."""
  from conftest import DATA  # pylint: disable=g-import-not-at-top
  paths, built, pre, tok = exports
  with open(os.path.join(DATA, "dialog_reply_pairs", "dev.tsv"), encoding="utf-8") as f:
    rows = [l.split("\t")[:2] for l in f.read().splitlines()[1:201]]
  a = [r[0] for r in rows] + ["", "one two three " * 30, "x"]
  b = [r[1] for r in rows] + ["", "y", "four five " * 30]
  for path in (tok[True], paths["features"]):
    sigs = client.litert_interpreter(path, 1).get_signature_list()
    assert sigs["pair"]["inputs"] == ["text_a", "text_b"], sigs
  saved = saved_model.export_preprocessor(
      preprocessing.BertPreprocessor(VOCAB, True, TOKEN_SEQ), str(tmp_path / "pre"))
  want = tf.saved_model.load(saved).signatures["pair"](text_a=tf.constant(a),
                                                       text_b=tf.constant(b))
  got = client.LiteRTSignature(tok[True], "pair", num_threads=1)(text_a=_b(a), text_b=_b(b))
  for k in ("input_word_ids", "input_mask", "input_type_ids"):
    np.testing.assert_array_equal(got[k], want[k].numpy(), err_msg=k)
  assert got["input_type_ids"].sum() > 0 and (got["input_mask"].sum(-1) == TOKEN_SEQ).any()
  # The predict tool's --pair (client.serve) takes the .tflite's pair signature.
  args = [a[0], b[0], a[1], b[1]]
  assert (client.serve(os.path.dirname(tok[True]), args, pair=True) ==
          client.serve(saved, args, pair=True))
  got = client.LiteRTSignature(paths["features"], "pair", num_threads=1)(
      text_a=_b(a), text_b=_b(b))
  f = pre(tf.constant(a), tf.constant(b))
  np.testing.assert_array_equal(got["input_ids"], f["input_ids"].numpy())
  np.testing.assert_array_equal(got["segment_ids"], f["segment_ids"].numpy())
  enc = built["features"](f, training=False)
  m = f["input_mask"].numpy()[..., None]
  np.testing.assert_allclose(got["sequence_output"] * m, enc["sequence_output"].numpy() * m,
                             atol=1e-4)
  np.testing.assert_allclose(got["pooled_output"], enc["pooled_output"].numpy(), atol=1e-4)


def test_bad_input_is_one_clear_error_never_a_crash(exports):
  paths, models_, pre = exports[0], exports[1], exports[2]
  sig = client.LiteRTSignature(paths["pair"], num_threads=1)
  ner = client.LiteRTSignature(paths["ner"], num_threads=1)
  with pytest.raises(client.PredictError, match="not valid UTF-8"):
    ner(sentence=np.array([b"\xc3("], dtype=object))
  assert ner(sentence=_b([]))["num_words"].shape == (0,)
  cases = [
      ({"text_a": _b(["a", "b"]), "text_b": _b(["c"])}, "different numbers of rows"),
      ({"text_a": _b(["a"])}, "takes text_a, text_b"),
      ({"text_a": np.array([[b"a", b"b"]], dtype=object), "text_b": _b(["b"])},
       "must have shape"),
  ]
  for inputs, message in cases:
    with pytest.raises(client.PredictError, match=message):
      sig(**inputs)
  # The SavedModel's text contract: an empty batch answers empty outputs, a
  # [B, 1] request is flattened, invalid UTF-8 is dropped as the SavedModel's
  # preprocessor drops it (the user's message of issue 70 among them).
  empty = sig(text_a=_b([]), text_b=_b([]))
  assert empty["probabilities"].shape == (0, 3) and empty["labels"].shape == (0,)
  a = np.array([b"free \xff\xfe prize call now", b"caf\xe9 ok", b"\xe2\x80", b"ok"],
               dtype=object)
  b = np.array([b"x", b"\xc3(", b"y \xf0\x9f\x98", b"\xed\xa0\x80z"], dtype=object)
  got = sig(text_a=a.reshape(-1, 1), text_b=b.reshape(-1, 1))
  feats = preprocessing.trim_to_longest(pre(tf.constant(a), tf.constant(b)))
  want = tf.nn.softmax(models_["pair"](feats, training=False), -1).numpy()
  np.testing.assert_allclose(got["probabilities"], want, atol=1e-5)
  # Defined answers: empty / whitespace strings, 100 kB texts, 5,000-character words.
  out = sig(text_a=_b(["", "   \t", "word " * 20000]), text_b=_b([" ", "", "x" * 5000]))
  assert out["probabilities"].shape == (3, 3)
  # The interpreter itself, fed the same requests raw in another process:
  # an error line each, never a signal (RoundRobinTrim's kernel segfaulted on
  # mismatched batches before the PACK guard).
  script = textwrap.dedent("""
      import sys, numpy as np
      from ai_edge_litert import interpreter
      from tensorflow_text import tflite_registrar
      it = interpreter.InterpreterWithCustomOps(
          custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS, model_path=sys.argv[1])
      run = it.get_signature_runner()
      s = lambda *v: np.array(list(v), dtype=object)
      for a, b in [(s(), s()), (s(b"a", b"b"), s(b"c")), (s(b"\\xff\\xfe x"), s(b"y"))]:
        try:
          run(text_a=a, text_b=b); print("answered")
        except RuntimeError as e:
          print("error", str(e).splitlines()[0])
      it = interpreter.InterpreterWithCustomOps(
          custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS, model_path=sys.argv[2])
      run = it.get_signature_runner()
      for x in [s(), s(b"\\xff\\xfe x \\xe2\\x80", b"\\xc3"), s(b"", b" ")]:
        try:
          print("answered", run(sentence=x)["num_words"].tolist())
        except RuntimeError as e:
          print("error", str(e).splitlines()[0])
      """)
  p = subprocess.run([sys.executable, "-c", script, paths["pair"], paths["ner"]],
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-2000:]
  lines = p.stdout.splitlines()
  # An empty batch answers; mismatched batches are PACK's error, not a
  # signal; invalid UTF-8 answers. NER answers an empty batch too (invalid
  # UTF-8 answers there, but only the client's refusal is defined).
  assert lines[0] == "answered" and "PACK" in lines[1] and lines[2] == "answered", lines
  assert lines[3:] == ["answered []", "answered [3, 1]", "answered [0, 0]"], lines


def test_fresh_process_with_litert_and_tensorflow_text_only(exports, tmp_path):
  path = exports[0]["pair"]
  script = textwrap.dedent("""
      import json, sys
      import numpy as np
      from ai_edge_litert import interpreter
      import tensorflow_text
      try:
        interpreter.Interpreter(model_path=sys.argv[1]).get_signature_runner()(
            text_a=np.array([b"x"], dtype=object), text_b=np.array([b"y"], dtype=object))
        unregistered = "loaded"
      except RuntimeError as e:
        unregistered = str(e).splitlines()[0]
      it = interpreter.InterpreterWithCustomOps(
          custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
          model_path=sys.argv[1], num_threads=1)
      out = it.get_signature_runner("serving_default")(
          text_a=np.array([b"a gorgeous film", b"dull"], dtype=object),
          text_b=np.array([b"yes", b"no"], dtype=object))
      mods = sorted(m.split(".")[0] for m in sys.modules if m.startswith("bert_tf"))
      print(json.dumps({"labels": [l.decode() for l in out["labels"]],
                        "logits": out["logits"].tolist(), "unregistered": unregistered,
                        "mods": mods}))
      """)
  env = dict(os.environ, PYTHONPATH="")
  p = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True,
                     timeout=120, cwd=str(tmp_path), env=env)
  assert p.returncode == 0, p.stderr[-2000:]
  res = json.loads(p.stdout.splitlines()[-1])
  assert not res["mods"], res["mods"]
  # Without tensorflow-text's registrar the first text kernel is unresolved.
  assert re.search(r"unresolved custom op: (TFText>)?(ByteSplit|FastBert)", res["unregistered"]), res

  want = client.LiteRTSignature(path, num_threads=1)(
      text_a=_b(["a gorgeous film", "dull"]), text_b=_b(["yes", "no"]))
  np.testing.assert_allclose(res["logits"], want["logits"], atol=1e-6)
  assert res["labels"] == [l.decode() for l in want["labels"]]


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
  """A run directory written by hand (no training) with a ckpt-1."""
  out = tmp_path_factory.mktemp("run") / "run"
  out.mkdir()
  shutil.copy(TINY_CONFIG, out / run_dir.BERT_CONFIG)
  shutil.copy(VOCAB, out / run_dir.VOCAB)
  (out / run_dir.CLASSIFIER_CONFIG).write_text(json.dumps({
      "task_name": "sst-2", "labels": ["neg", "pos"], "do_lower_case": True,
      "max_seq_length": 40, "is_regression": False, "is_pair": False}))
  model = models.build_classifier(config_lib.BertConfig.from_json_file(TINY_CONFIG), 2)
  tf.train.Checkpoint(model=model).save(str(out / "ckpt"))
  return str(out), model


def test_tools_export_and_predict_a_tflite(classifier_run, tmp_path):
  out, model = classifier_run
  export_dir = str(tmp_path / "lite")
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + out,
                "--export_dir=" + export_dir, "--format=litert", "--quantize=dynamic_int8"])
  assert "quantize=dynamic_int8" in p.stdout, p.stdout
  assert "warning: the in-graph tokenizer differs" in p.stdout
  tflite = os.path.join(export_dir, "1", litert.MODEL_FILE)
  # The summary names the file, its size and the length it reads.
  assert re.search(r"to %s \([\d.]+ MB, quantize=dynamic_int8, max_seq_length 40\)"
                   % re.escape(tflite), p.stdout), p.stdout
  # Two signatures (serving_default, pair) in the preprocessor's file.
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + out, "--what=preprocessor",
                "--export_dir=" + str(tmp_path / "pre"), "--format=litert"])
  assert client.read_metadata(str(tmp_path / "pre" / "1"))["inputs"] == {
      "serving_default": ["text"], "pair": ["text_a", "text_b"]}, p.stdout
  meta = client.read_metadata(os.path.dirname(tflite))
  assert (meta["format"], meta["labels"], meta["inputs"]) == ("litert", ["neg", "pos"], ["text"])
  p = run_tool(["tools/predict_saved_model.py", "--num_threads=1", export_dir,
                "a gorgeous film", "dull"])
  rows = [json.loads(l) for l in p.stdout.splitlines()]
  assert [r["labels"] in ("neg", "pos") for r in rows] == [True, True]
  # int8 weights: the float32 model's labels on this request, and the hook writes litert.
  path = fine_tuned.export_model(model, out, str(tmp_path / "hook"), format="litert")
  want = client.LiteRTSignature(os.path.join(path, litert.MODEL_FILE))(
      text=_b(["a gorgeous film", "dull"]))
  np.testing.assert_allclose([r["probabilities"] for r in rows], want["probabilities"],
                             atol=0.05)
  # Refused in one line before any work: SQuAD, --quantize without litert.
  squad = tmp_path / "squad"
  squad.mkdir()
  shutil.copy(TINY_CONFIG, squad / run_dir.BERT_CONFIG)
  (squad / task_kinds.get("squad").settings_file).write_text("{}")
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + str(squad),
                "--export_dir=" + str(tmp_path / "sq"), "--format=litert"], check=False)
  assert p.returncode != 0 and "not convertible" in p.stderr, p.stderr
  assert not os.path.exists(tmp_path / "sq")
  p = run_tool(["tools/export_saved_model.py", "--output_dir=" + out,
                "--export_dir=" + str(tmp_path / "q"), "--quantize=float16"], check=False)
  assert p.returncode != 0 and "only --format=litert quantizes" in p.stderr, p.stderr
