"""Every head of a Hugging Face BERT directory loads with ``from_preset``, labels included.

Directories written by transformers 5 itself (``save_pretrained``: config,
``model.safetensors``, ``tokenizer.json`` and no ``vocab.txt``): a
``BertForSequenceClassification`` fine-tuned from the real all-MiniLM-L6-v2
(3 named labels), and the other heads (multi-label and regression sequence
classification, token classification, question answering, multiple choice,
pretraining, masked LM) on the cropped MiniLM with seeded heads drawn far
from their zero/0.02 init (so a misread bias or layout shows). Each head's
logits are compared with transformers' own (CPU PyTorch) on real text: movie
reviews, tweets of WNUT-16, SQuAD-Shifts questions and contexts, wikiHow
choices. Then the formats beside safetensors: legacy ``gamma``/``beta``
names with and without ``bert.``, a sharded checkpoint, ``pytorch_model.bin``,
transformers 4.57.6's ``tf_model.h5`` (tests/data/hf_tf_model_h5); and the
bad input of issue 60, one line each.
"""

import csv
import json
import logging
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import huggingface
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import models
from bert_tf.modeling import multiple_choice
from bert_tf.modeling import presets
from bert_tf.modeling import tagging
import hf_util  # pylint: disable=g-bad-import-order
from conftest import MOVIE_DIR, NER_DIR, ROOT

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

H5_DIR = os.path.join(ROOT, "tests", "data", "hf_tf_model_h5")
ATOL = 1e-5
GENRES = ["action", "comedy", "drama", "horror"]


def _movie_sentences(n=6):
  with open(os.path.join(MOVIE_DIR, "dev.tsv"), encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  return [rows[i][0] for i in range(0, len(rows), len(rows) // n)][:n]


def _tweets(n=4):
  with open(os.path.join(NER_DIR, "dev.txt"), encoding="utf-8") as f:
    blocks = [b for b in f.read().split("\n\n") if b.strip()][:n]
  words = [[l.split("\t")[0] for l in b.splitlines()] for b in blocks]
  tags = [[l.split("\t")[1] for l in b.splitlines()] for b in blocks]
  return [" ".join(w) for w in words], tags


def _ours(enc):
  """transformers' tokenizer output -> our int32 feature dict."""
  return {"input_ids": tf.constant(enc["input_ids"], tf.int32),
          "input_mask": tf.constant(enc["attention_mask"], tf.int32),
          "segment_ids": tf.constant(enc["token_type_ids"], tf.int32)}


@pytest.fixture(scope="module")
def hf(minilm_dir, cropped_minilm_dir, tmp_path_factory):
  """``{name: directory}`` saved by transformers 5, and the tokenizer."""
  root = tmp_path_factory.mktemp("hf_heads")
  tok = transformers.AutoTokenizer.from_pretrained(minilm_dir)
  dirs = {}

  def save(name, model):
    d = str(root / name)
    model.save_pretrained(d)
    tok.save_pretrained(d)
    dirs[name] = d
    return model

  torch.manual_seed(0)
  named = {0: "negative", 1: "mixed", 2: "positive"}
  dirs["seq_model"] = save("seq", hf_util.far_from_init(transformers.BertForSequenceClassification
                                            .from_pretrained(minilm_dir, id2label=named), ("classifier",), 1))
  cropped = cropped_minilm_dir
  cls = transformers.BertForSequenceClassification
  dirs["multi_model"] = save("multi", hf_util.far_from_init(cls.from_pretrained(
      cropped, id2label=dict(enumerate(GENRES)), problem_type="multi_label_classification"),
      ("classifier",), 2))
  dirs["reg_model"] = save("reg", hf_util.far_from_init(cls.from_pretrained(cropped, num_labels=1),
                                            ("classifier",), 3))
  _, tags = _tweets()
  names = sorted({t for ts in tags for t in ts} | {"O", "B-person", "I-person"})
  dirs["ner_model"] = save("ner", hf_util.far_from_init(transformers.BertForTokenClassification.from_pretrained(
      cropped, id2label=dict(enumerate(names))), ("classifier",), 4))
  dirs["qa_model"] = save("qa", hf_util.far_from_init(transformers.BertForQuestionAnswering.from_pretrained(
      cropped), ("qa_outputs",), 5))
  dirs["mc_model"] = save("mc", hf_util.far_from_init(transformers.BertForMultipleChoice.from_pretrained(
      cropped), ("classifier",), 6))
  dirs["pt_model"] = save("pt", hf_util.far_from_init(transformers.BertForPreTraining.from_pretrained(
      cropped), ("cls.predictions.transform", "cls.seq_relationship", "cls.predictions.bias"), 7))
  dirs["mlm_model"] = save("mlm", hf_util.far_from_init(transformers.BertForMaskedLM.from_pretrained(
      cropped), ("cls.predictions.transform", "cls.predictions.bias"), 8))
  dirs["tok"] = tok
  dirs["root"] = root
  return dirs


def test_a_transformers5_sequence_classifier_loads_with_labels_and_tokenizer(hf):
  """The issue's first case: no num_labels, no vocab.txt, names and logits."""
  assert not os.path.exists(os.path.join(hf["seq"], "vocab.txt"))
  model = models.BertClassifier.from_preset(hf["seq"], preprocessor=True)
  assert (model.num_labels, model.problem_type) == (3, "single_label_classification")
  assert model.label_names == ["negative", "mixed", "positive"]
  texts = _movie_sentences()
  enc = hf["tok"](texts, padding=True, return_tensors="np")
  with torch.no_grad():
    want = hf["seq_model"](**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
  got = model.predict(texts, verbose=0)
  np.testing.assert_allclose(got, want, atol=ATOL)
  assert np.abs(want).max() > 0.5  # a head far from its init
  names = [hf["seq_model"].config.id2label[int(i)] for i in want.argmax(-1)]
  assert model.predict_labels(texts, verbose=0) == names
  assert model.get_config()["id2label"] == {"0": "negative", "1": "mixed", "2": "positive"}


def test_multi_label_and_regression_by_problem_type(hf):
  texts = _movie_sentences(4)
  enc = hf["tok"](texts, padding=True, return_tensors="np")
  for name, kind, n in (("multi", "multi_label_classification", 4), ("reg", "regression", 1)):
    model = models.BertClassifier.from_preset(hf[name])
    assert (model.num_labels, model.problem_type) == (n, kind)
    with torch.no_grad():
      want = hf[name + "_model"](**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
    np.testing.assert_allclose(model(_ours(enc)), want, atol=ATOL, err_msg=name)
  multi = models.BertClassifier.from_preset(hf["multi"], preprocessor=True)
  with torch.no_grad():
    logits = hf["multi_model"](**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
  want = [[GENRES[j] for j in np.flatnonzero(p >= 0.5)] for p in 1 / (1 + np.exp(-logits))]
  assert multi.predict_labels(texts, verbose=0) == want
  assert {len(w) for w in want} != {0} and {len(w) for w in want} != {4}
  # The names travel in the config and the .keras file (issue 63 item 7).
  assert multi.get_config()["id2label"] == {str(i): g for i, g in enumerate(GENRES)}
  path = str(hf["root"] / "multi.keras")
  multi.save(path)
  again = models.BertClassifier.from_preset(path, preprocessor=True)
  assert (again.label_names, again.problem_type) == (GENRES, "multi_label_classification")
  assert again.predict_labels(texts, verbose=0) == want
  # Served as it is (export_saved_model --from_preset's library path):
  # sigmoid probabilities and the names at or above 0.5, in both formats.
  from bert_tf.export import fine_tuned  # pylint: disable=g-import-not-at-top
  from bert_tf.export import from_preset  # pylint: disable=g-import-not-at-top
  run = from_preset.load_preset(hf["multi"])
  served = tf.saved_model.load(fine_tuned.export_run(run, None, str(hf["root"] / "multi_export"))
                               ).signatures["serving_default"](text=tf.constant(texts))
  np.testing.assert_allclose(served["probabilities"], 1 / (1 + np.exp(-logits)), atol=ATOL)
  assert [[l.decode() for l in row if l] for row in served["labels"].numpy()] == want
  from bert_tf.export import client  # pylint: disable=g-import-not-at-top
  lite = client.LiteRTSignature(os.path.join(fine_tuned.export_run(
      run, None, str(hf["root"] / "multi_lite"), format="litert"), "model.tflite"))(
          text=np.array([t.encode() for t in texts], dtype=object))
  np.testing.assert_allclose(lite["probabilities"], 1 / (1 + np.exp(-logits)), atol=ATOL)
  np.testing.assert_array_equal(lite["label_mask"], served["label_mask"].numpy())
  assert lite["labels"].tolist() == served["labels"].numpy().tolist()


def test_a_keras_file_without_optimizer_state(tmp_path):
  """After fit, ``save(..., include_optimizer=False)`` leaves the Adam slots out."""
  config = config_lib.BertConfig(vocab_size=2000, hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32,
                                 max_position_embeddings=16)
  model = models.BertClassifier(config, 2, id2label=["no", "yes"])
  x = {k: tf.ones([4, 8], tf.int32) for k in models.FEATURE_NAMES}
  model.compile(optimizer="adam",
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  model.fit(x, np.array([0, 1, 0, 1]), epochs=1, verbose=0)
  full, lean = str(tmp_path / "full.keras"), str(tmp_path / "lean.keras")
  model.save(full)
  model.save(lean, include_optimizer=False)
  assert model.compiled and os.path.getsize(lean) < 0.5 * os.path.getsize(full)
  again = keras.models.load_model(lean)
  assert not again.compiled and again.label_names == ["no", "yes"]
  np.testing.assert_array_equal(again(x), model(x))
  # A fine-tuned run's labels become the names too (classifier_config.json).
  run = tmp_path / "run"
  run.mkdir()
  config.to_json_file(str(run / "bert_config.json"))
  (run / "classifier_config.json").write_text(json.dumps(
      {"labels": ["neg", "pos"], "is_regression": False}))
  tf.train.Checkpoint(model=model, encoder=model.encoder).save(str(run / "ckpt"))
  tuned = models.BertClassifier.from_preset(str(run))
  assert tuned.label_names == ["neg", "pos"]
  np.testing.assert_array_equal(tuned(x), model(x))


def test_token_classifier_with_tag_names(hf):
  texts, _ = _tweets()
  model = tagging.BertTokenClassifier.from_preset(hf["ner"])
  ref = hf["ner_model"]
  assert model.label_names == [ref.config.id2label[i] for i in range(ref.config.num_labels)]
  enc = hf["tok"](texts, padding=True, return_tensors="np")
  with torch.no_grad():
    want = ref(**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
  got = model(_ours(enc)).numpy()
  mask = enc["attention_mask"].astype(bool)
  np.testing.assert_allclose(got[mask], want[mask], atol=ATOL)


def test_question_answerer_and_multiple_choice(hf):
  questions, contexts = hf_util.squad_pairs(3)
  enc = hf["tok"](questions, contexts, padding=True, truncation="only_second",
                  max_length=256, return_tensors="np")
  with torch.no_grad():
    want = hf["qa_model"](**{k: torch.tensor(v) for k, v in enc.items()})
  got = models.BertQuestionAnswerer.from_preset(hf["qa"])(_ours(enc))
  mask = enc["attention_mask"].astype(bool)
  for key in ("start_logits", "end_logits"):
    np.testing.assert_allclose(got[key].numpy()[mask], getattr(want, key).numpy()[mask],
                               atol=ATOL, err_msg=key)
  context, endings = hf_util.choices()
  firsts = [c for c in context for _ in range(4)]
  enc = hf["tok"](firsts, [e for es in endings for e in es], padding=True, return_tensors="np")
  enc = {k: v.reshape(len(context), 4, -1) for k, v in enc.items()}
  with torch.no_grad():
    want = hf["mc_model"](**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
  got = multiple_choice.BertMultipleChoice.from_preset(hf["mc"])(_ours(enc))
  np.testing.assert_allclose(got, want, atol=ATOL)
  # Served from the preset (export_saved_model --from_preset's library path):
  # transformers' softmax over the choices, from raw strings.
  from bert_tf.export import fine_tuned  # pylint: disable=g-import-not-at-top
  from bert_tf.export import from_preset  # pylint: disable=g-import-not-at-top
  path = fine_tuned.export_run(from_preset.load_preset(hf["mc"]), None,
                               str(hf["root"] / "mc_export"))
  served = tf.saved_model.load(path).signatures["serving_default"](
      context=tf.constant(context), endings=tf.constant(endings))
  np.testing.assert_allclose(served["probabilities"], tf.nn.softmax(want, -1), atol=ATOL)


def test_pretraining_and_masked_lm_heads(hf):
  texts = _movie_sentences(2)
  enc = hf["tok"](texts, padding=True, return_tensors="np")
  positions = np.array([[1, 3, 5], [2, 4, 6]], np.int32)
  inputs = dict(_ours(enc), masked_lm_positions=tf.constant(positions))
  tensors = {k: torch.tensor(v) for k, v in enc.items()}
  with torch.no_grad():
    pt = hf["pt_model"](**tensors)
    mlm = hf["mlm_model"](**tensors).logits.numpy()
  rows = np.arange(2)[:, None]
  got = models.BertPretrainer.from_preset(hf["pt"])(inputs)
  np.testing.assert_allclose(got["masked_lm_logits"], pt.prediction_logits.numpy()[rows, positions],
                             atol=1e-4)
  np.testing.assert_allclose(got["next_sentence_logits"], pt.seq_relationship_logits.numpy(),
                             atol=ATOL)
  got = models.BertPretrainer.from_preset(hf["mlm"], nsp=False)(inputs)
  np.testing.assert_allclose(got["masked_lm_logits"], mlm[rows, positions], atol=1e-4)


def test_a_missing_head_is_one_warning_or_an_error(hf, minilm_dir, caplog):
  # A BertModel (sentence-transformers' MiniLM) for a classifier: where
  # fine-tuning starts, one info line; another task's model: one warning.
  for preset, cls, level in ((minilm_dir, models.BertClassifier, logging.INFO),
                             (hf["qa"], tagging.BertTokenClassifier, logging.WARNING)):
    caplog.clear()
    with caplog.at_level(logging.INFO):
      clf = cls.from_preset(preset, num_labels=2)
    lines = [r for r in caplog.records if "random init" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == level, [r.getMessage() for r in lines]
    assert "classifier.weight, classifier.bias" in lines[0].getMessage()
    assert clf.label_names is None
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    models.BertPretrainer.from_preset(hf["mlm"])  # nsp=True: no cls.seq_relationship
  assert any("cls.seq_relationship.weight, cls.seq_relationship.bias" in r.getMessage()
             for r in caplog.records)
  # config.json says BertForSequenceClassification but the head is gone.
  broken = str(hf["root"] / "no_head")
  shutil.copytree(hf["multi"], broken)
  from safetensors.numpy import load_file, save_file  # pylint: disable=g-import-not-at-top
  path = os.path.join(broken, "model.safetensors")
  save_file({k: v for k, v in load_file(path).items() if not k.startswith("classifier.")}, path)
  with pytest.raises(errors.CheckpointError, match="says BertForSequenceClassification but "
                     ".*model.safetensors has no classifier.weight, classifier.bias"):
    models.BertClassifier.from_preset(broken, num_labels=4)
  # Another task's head under the same names: refused, not loaded.
  with pytest.raises(errors.CheckpointError,
                     match="BertForTokenClassification.*BertTokenClassifier.from_preset"):
    models.BertClassifier.from_preset(hf["ner"])
  with pytest.raises(errors.CheckpointError, match=r"classifier.weight has shape \[4, 128\].*"
                     r"wants \[3, 128\] \(3 labels\)"):
    models.BertClassifier.from_preset(hf["multi"], num_labels=3)


def _reference_logits(model_dir, enc, cls=None):
  cls = cls or transformers.BertForSequenceClassification
  model = cls.from_pretrained(model_dir).eval()
  with torch.no_grad():
    return model(**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()


def test_legacy_names_shards_and_pytorch_bin(hf):
  from safetensors.numpy import load_file, save_file  # pylint: disable=g-import-not-at-top
  texts = _movie_sentences(3)
  enc = hf["tok"](texts, padding=True, return_tensors="np")
  src = hf["multi"]
  want = _reference_logits(src, enc)
  tensors = load_file(os.path.join(src, "model.safetensors"))
  for prefix in ("bert.", ""):
    d = str(hf["root"] / ("legacy" + prefix.rstrip(".")))
    os.makedirs(d)
    shutil.copy(os.path.join(src, "config.json"), d)
    legacy = {}
    for k, v in tensors.items():
      k = k[len("bert."):] if k.startswith("bert.") and not prefix else k
      legacy[k.replace("LayerNorm.weight", "LayerNorm.gamma")
             .replace("LayerNorm.bias", "LayerNorm.beta")] = v
    assert any(k.endswith("LayerNorm.gamma") for k in legacy)
    save_file(legacy, os.path.join(d, "model.safetensors"))
    np.testing.assert_allclose(_reference_logits(d, enc), want, atol=ATOL)  # transformers reads it
    np.testing.assert_allclose(models.BertClassifier.from_preset(d)(_ours(enc)), want,
                               atol=ATOL, err_msg=prefix or "no prefix")
  sharded = str(hf["root"] / "sharded")
  hf["multi_model"].save_pretrained(sharded, max_shard_size="5MB")
  assert os.path.exists(os.path.join(sharded, "model.safetensors.index.json"))
  assert not os.path.exists(os.path.join(sharded, "model.safetensors"))
  np.testing.assert_allclose(models.BertClassifier.from_preset(sharded)(_ours(enc)), want,
                             atol=ATOL)
  binary = str(hf["root"] / "bin")
  os.makedirs(binary)
  shutil.copy(os.path.join(src, "config.json"), binary)
  torch.save(hf["multi_model"].state_dict(), os.path.join(binary, "pytorch_model.bin"))
  np.testing.assert_allclose(models.BertClassifier.from_preset(binary)(_ours(enc)), want,
                             atol=ATOL)
  # Bad input, one line each: a shard gone, a truncated file, no PyTorch.
  os.remove(os.path.join(sharded, sorted(f for f in os.listdir(sharded)
                                         if f.endswith(".safetensors"))[-1]))
  with pytest.raises(errors.CheckpointError, match="names shard .*, which is missing"):
    models.BertClassifier.from_preset(sharded)
  cut = str(hf["root"] / "cut")
  shutil.copytree(str(hf["root"] / "legacy"), cut)
  path = os.path.join(cut, "model.safetensors")
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)
  with pytest.raises(errors.CheckpointError, match="cannot read .*cut/model.safetensors.*truncated"):
    models.BertClassifier.from_preset(cut)
  real_import = __import__

  def no_torch(name, *args, **kwargs):
    if name == "torch":
      raise ImportError("no torch")
    return real_import(name, *args, **kwargs)

  import builtins  # pylint: disable=g-import-not-at-top
  builtins.__import__ = no_torch
  try:
    with pytest.raises(errors.CheckpointError, match="needs PyTorch.*save_pretrained"):
      models.BertClassifier.from_preset(binary)
  finally:
    builtins.__import__ = real_import


def test_tf_model_h5_of_transformers4_tf_classes():
  """tests/data/hf_tf_model_h5: TFBertForSequenceClassification (4.57.6)."""
  with open(os.path.join(H5_DIR, "expected.json"), encoding="utf-8") as f:
    expected = json.load(f)
  assert huggingface.weights_file(H5_DIR).endswith("tf_model.h5")
  model = models.BertClassifier.from_preset(H5_DIR, preprocessor=True)
  assert model.label_names == ["negative", "neutral", "positive"]
  features = model.preprocessor.bert_preprocessor(tf.constant(expected["sentences"]))
  n = len(expected["input_ids"][0])
  np.testing.assert_array_equal(features["input_ids"][:, :n], expected["input_ids"])
  np.testing.assert_allclose(model.predict(expected["sentences"], verbose=0),
                             expected["logits"], atol=ATOL)


def test_bad_directories_one_line_each(hf, tmp_path):
  other = tmp_path / "roberta"
  shutil.copytree(hf["reg"], other)
  config = json.loads((other / "config.json").read_text())
  (other / "config.json").write_text(json.dumps(dict(config, model_type="roberta")))
  with pytest.raises(errors.CheckpointError, match="model_type 'roberta' is not bert"):
    encoder_lib.BertEncoder.from_preset(str(other))
  wrong = tmp_path / "wrong_sizes"
  shutil.copytree(hf["reg"], wrong)
  (wrong / "config.json").write_text(json.dumps(dict(config, intermediate_size=256)))
  with pytest.raises(errors.CheckpointError, match=r"does not fit the model: variable "
                     r"bert/encoder/layer_0/intermediate/dense/kernel .*config.json disagrees"):
    encoder_lib.BertEncoder.from_preset(str(wrong))
  with pytest.raises(errors.ParamsError, match=r"max_seq_length=1024\): the model takes 3 to 512"):
    models.BertClassifier.from_preset(hf["seq"], preprocessor=True, max_seq_length=1024)
  pre = presets.get_preset_loader(hf["seq"]).preprocessor(True)
  import bert_tf.preprocessing as preprocessing  # pylint: disable=g-import-not-at-top
  long = preprocessing.BertPreprocessor(pre.vocab_lines(), True, 1024)
  with pytest.raises(errors.ParamsError, match="max_seq_length 1024 is above the model's "
                     "max_position_embeddings 512"):
    models.BertClassifier(presets.get_preset_loader(hf["seq"]).config(), 3, preprocessor=long)
  assert models.BertClassifier.from_preset(
      hf["seq"], preprocessor=True, max_seq_length=64).preprocessor.max_seq_length == 64


def test_a_token_classifier_is_served_with_its_tag_names(hf, tmp_path):
  """export_saved_model --from_preset's library path on a BertForTokenClassification."""
  from bert_tf.export import fine_tuned  # pylint: disable=g-import-not-at-top
  from bert_tf.export import from_preset  # pylint: disable=g-import-not-at-top
  run = from_preset.load_preset(hf["ner"])
  ref = hf["ner_model"].config.id2label
  assert run.kind == "ner" and list(run.spec.labels) == [ref[i] for i in range(len(ref))]
  path = fine_tuned.export_run(run, None, str(tmp_path / "ner"))
  texts, _ = _tweets()
  served = tf.saved_model.load(path).signatures["serving_default"](sentence=tf.constant(texts))
  enc = hf["tok"]([t.split() for t in texts], is_split_into_words=True, padding=True,
                  return_tensors="pt")
  with torch.no_grad():
    logits = hf["ner_model"](**enc).logits.numpy()
  names = hf["ner_model"].config.id2label
  for b, text in enumerate(texts):
    word_ids = enc.word_ids(b)
    first = [word_ids.index(w) for w in range(len(text.split()))]
    want = [names[int(i)] for i in logits[b, first].argmax(-1)]
    got = [t.decode() for t in served["tags"][b, :len(want)].numpy()]
    assert got == want, (text, got, want)
