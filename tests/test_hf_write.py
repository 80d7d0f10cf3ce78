"""Writing back to transformers: ``bert_tf.convert.to_transformers`` and
``tools/convert_checkpoint.py --output_format=hf`` (issue 60 item 5).

References are transformers 5 itself (CPU PyTorch): its
``AutoModelFor<Task>.from_pretrained`` and ``AutoTokenizer.from_pretrained``
load what we write with no missing or unexpected tensor, and their logits and
token ids equal ours on real text (movie reviews, WNUT-16 tweets, SQuAD-Shifts
questions and contexts, wikiHow choices). Three sources:

* directories transformers wrote (``save_pretrained`` of every head on the
  cropped all-MiniLM-L6-v2, heads drawn far from their init, its
  ``tokenizer.json`` and no ``vocab.txt``), read by ``from_preset`` and
  written back: every tensor byte-equal to transformers' own file, the
  config's class, labels and ``problem_type`` kept;
* models built here (a named classifier with an uncased tokenizer, an
  unnamed token classifier with a cased one) and the same model's ``.keras``
  file;
* an original ``bert_model.ckpt`` directory (heads under ``cls/``), as
  ``BertForPreTraining`` and, by ``task``, ``BertModel``;
* a run directory of ``tools/run_ner.py``, through the tool, with the bad
  input of the issue (an output directory that is not empty, an input that is
  no model): one line each, nothing written.
"""

import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf import convert
from bert_tf import errors
from bert_tf import huggingface
from bert_tf import preprocessing
from bert_tf.modeling import models
from bert_tf.modeling import tagging
from bert_tf.data import conll
import hf_util  # pylint: disable=g-bad-import-order
from conftest import MOVIE_DIR, NER_DIR, TINY_CONFIG, VOCAB
from conftest import require, run_tool

torch = require("torch")
transformers = require("transformers")
tokenizers = require("tokenizers")
from safetensors import safe_open  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

ATOL = 1e-5
FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "vocab.txt"]


def _movie_sentences(n=4):
  with open(os.path.join(MOVIE_DIR, "dev.tsv"), encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  return [rows[i][0] for i in range(0, len(rows), len(rows) // n)][:n]


def _tweets(n=4):
  """``n`` WNUT-16 dev tweets (text) and the train set's tag list."""
  sentences = conll.read_conll(os.path.join(NER_DIR, "dev.txt"))[:n]
  return [" ".join(s.words) for s in sentences], conll.label_list_from(
      conll.read_conll(os.path.join(NER_DIR, "train.txt")))


def _tensors(path):
  with safe_open(os.path.join(path, "model.safetensors"), "np") as f:
    return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


# name -> (transformers class, kwargs of from_pretrained, head prefixes to draw far)
HEADS = {
    "seq": ("BertForSequenceClassification",
            dict(id2label={0: "negative", 1: "mixed", 2: "positive"}), ("classifier",)),
    "multi": ("BertForSequenceClassification",
              dict(num_labels=4, problem_type="multi_label_classification"), ("classifier",)),
    "reg": ("BertForSequenceClassification", dict(num_labels=1), ("classifier",)),
    "ner": ("BertForTokenClassification", None, ("classifier",)),
    "qa": ("BertForQuestionAnswering", {}, ("qa_outputs",)),
    "mc": ("BertForMultipleChoice", {}, ("classifier",)),
    "pt": ("BertForPreTraining", {}, ("cls.predictions.transform", "cls.seq_relationship",
                                      "cls.predictions.bias")),
    "mlm": ("BertForMaskedLM", {}, ("cls.predictions.transform", "cls.predictions.bias")),
    "base": ("BertModel", {}, ("pooler",)),
}


@pytest.fixture(scope="module")
def hf(minilm_dir, cropped_minilm_dir, tmp_path_factory):
  """``{name: directory}`` that transformers 5 saved, and its tokenizer."""
  root = tmp_path_factory.mktemp("hf_write")
  tok = transformers.AutoTokenizer.from_pretrained(minilm_dir)
  _, tags = _tweets()
  out = {"tok": tok, "root": root}
  torch.manual_seed(0)
  for i, (name, (cls, kwargs, far)) in enumerate(HEADS.items()):
    if kwargs is None:
      kwargs = dict(id2label=dict(enumerate(tags)))
    model = getattr(transformers, cls).from_pretrained(cropped_minilm_dir, **kwargs)
    d = str(root / name)
    hf_util.far_from_init(model, far, i).save_pretrained(d)
    tok.save_pretrained(d)
    out[name] = d
  return out


def _enc(tok, name, max_length):
  """transformers' tokenizer output for the real text of a head, padded to
  ``max_length``; ``(encoding, texts)``."""
  pad = dict(padding="max_length", truncation=True, max_length=max_length, return_tensors="np")
  if name == "ner":
    texts = _tweets()[0]
    return tok(texts, **pad), (texts,)
  if name == "qa":
    q, c = hf_util.squad_pairs(2)
    return tok(q, c, **dict(pad, truncation="only_second")), (q, c)
  if name == "mc":
    context, endings = hf_util.choices()
    firsts = [c for c in context for _ in range(4)]
    seconds = [e for es in endings for e in es]
    enc = tok(firsts, seconds, **pad)
    return {k: v.reshape(len(context), 4, -1) for k, v in enc.items()}, (firsts, seconds)
  texts = _movie_sentences()
  return tok(texts, **pad), (texts,)


def _ours(enc):
  return {"input_ids": tf.constant(enc["input_ids"], tf.int32),
          "input_mask": tf.constant(enc["attention_mask"], tf.int32),
          "segment_ids": tf.constant(enc["token_type_ids"], tf.int32)}


POSITIONS = np.array([[1, 3, 5], [2, 4, 6], [1, 2, 3], [7, 8, 9]], np.int32)


def _compare(name, model, ref, enc):
  """Our outputs vs transformers' on ``enc`` (1e-5; where the mask is set)."""
  tensors = {k: torch.tensor(v) for k, v in enc.items()}
  with torch.no_grad():
    want = ref(**tensors)
  mask = enc["attention_mask"].astype(bool)
  if name in ("seq", "multi", "reg", "mc"):
    got, want = model(_ours(enc)).numpy(), want.logits.numpy()
    np.testing.assert_allclose(got, want, atol=ATOL, err_msg=name)
  elif name == "ner":
    np.testing.assert_allclose(model(_ours(enc)).numpy()[mask], want.logits.numpy()[mask],
                               atol=ATOL)
  elif name == "qa":
    got = model(_ours(enc))
    for key in ("start_logits", "end_logits"):
      np.testing.assert_allclose(got[key].numpy()[mask], getattr(want, key).numpy()[mask],
                                 atol=ATOL, err_msg=key)
  elif name in ("pt", "mlm"):
    got = model(dict(_ours(enc), masked_lm_positions=tf.constant(POSITIONS)))
    logits = want.prediction_logits if name == "pt" else want.logits
    rows = np.arange(len(POSITIONS))[:, None]
    np.testing.assert_allclose(got["masked_lm_logits"].numpy(),
                               logits.numpy()[rows, POSITIONS], atol=ATOL, rtol=1e-6)
    if name == "pt":
      np.testing.assert_allclose(got["next_sentence_logits"].numpy(),
                                 want.seq_relationship_logits.numpy(), atol=ATOL)
  else:
    got = model(_ours(enc))
    np.testing.assert_allclose(got["sequence_output"].numpy()[mask],
                               want.last_hidden_state.numpy()[mask], atol=ATOL)
    np.testing.assert_allclose(got["pooled_output"].numpy(), want.pooler_output.numpy(),
                               atol=ATOL)


@pytest.mark.parametrize("name", list(HEADS))
def test_transformers_directory_round_trips_byte_stable(hf, name):
  """HF -> ours -> HF: the same tensors byte for byte, the same class and
  labels; transformers loads it whole and agrees with our model and ids."""
  src, out = hf[name], str(hf["root"] / (name + "_back"))
  model, pre = convert.load_preset_model(src)
  assert convert.save_transformers(model, out, pre) == out
  assert sorted(os.listdir(out)) == FILES
  theirs, _ = _tensors(src)
  ours, metadata = _tensors(out)
  assert metadata == {"format": "pt"}
  assert sorted(ours) == sorted(theirs)
  for key, value in theirs.items():
    assert (ours[key].dtype, ours[key].shape) == (value.dtype, value.shape), key
    assert ours[key].tobytes() == value.tobytes(), key
  with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
    src_config = json.load(f)
  with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  for key in ("architectures", "model_type", "hidden_act", "hidden_size", "num_hidden_layers",
              "num_attention_heads", "intermediate_size", "vocab_size", "pad_token_id",
              "max_position_embeddings", "type_vocab_size", "layer_norm_eps"):
    assert config[key] == src_config[key], key
  cls = getattr(transformers, HEADS[name][0])
  ref, info = cls.from_pretrained(out, output_loading_info=True)
  assert not (info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"]), info
  src_ref = cls.from_pretrained(src)
  assert ref.config.id2label == src_ref.config.id2label
  if name in ("seq", "multi", "reg"):
    # Written out; transformers infers the same from the label count when unset.
    assert ref.config.problem_type == huggingface.problem_type(src_config, ref.num_labels)
  if name == "seq":
    assert config["label2id"] == {"negative": 0, "mixed": 1, "positive": 2}
    assert ref.config.id2label == {0: "negative", 1: "mixed", 2: "positive"}
  if name in ("multi", "reg"):
    assert config["problem_type"] == {"multi": "multi_label_classification",
                                      "reg": "regression"}[name]
  seq = 128 if name == "qa" else 48
  tok = transformers.AutoTokenizer.from_pretrained(out)
  enc, texts = _enc(tok, name, seq)
  want_enc, _ = _enc(hf["tok"], name, seq)
  for key in enc:
    np.testing.assert_array_equal(enc[key], want_enc[key], err_msg=key)
  if name != "qa":  # SQuAD windows truncate otherwise; transformers' ids are checked above
    ours_ids = preprocessing.BertPreprocessor(pre.vocab_lines(), pre.do_lower_case, seq)(
        *[tf.constant(t) for t in texts])
    for key, theirs in (("input_ids", "input_ids"), ("segment_ids", "token_type_ids")):
      np.testing.assert_array_equal(ours_ids[key].numpy(), enc[theirs].reshape(-1, seq))
  _compare(name, model, ref.eval(), enc)


def _scramble(model, seed):
  """N(0, 0.15) noise (seeded) added to every weight, so that no layout hides
  behind an init (zero biases, unit LayerNorm scales) and activations reach
  the range where the tanh GELU and the exact one differ."""
  for i, v in enumerate(model.weights):
    v.assign(v + tf.random.stateless_normal(v.shape, [seed, i], stddev=0.15))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """A named classifier (uncased tokenizer) and an unnamed token classifier
  (cased), built here, written by to_transformers; the classifier's .keras."""
  root = tmp_path_factory.mktemp("hf_built")
  config = config_lib.BertConfig.from_json_file(TINY_CONFIG)
  clf = models.BertClassifier(config, 2, id2label=["negative", "positive"],
                              preprocessor=preprocessing.BertPreprocessor(VOCAB, True, 48))
  _scramble(clf, 1)
  ner = tagging.BertTokenClassifier(
      config, 5, preprocessor=preprocessing.BertPreprocessor(VOCAB, False, 48))
  _scramble(ner, 2)
  keras_path = str(root / "clf.keras")
  clf.save(keras_path)
  lines = {name: convert.to_transformers(model, str(root / name))
           for name, model in (("clf", clf), ("ner", ner))}
  lines["keras"] = convert.to_transformers(keras_path, str(root / "keras"))
  return {"root": root, "clf": clf, "ner": ner, "lines": lines}


def test_models_built_here_load_in_transformers_with_their_tokenizer(built):
  root = built["root"]
  assert built["lines"]["clf"] == ("BertForSequenceClassification (41 tensors, labels "
                                   "negative, positive, tokenizer) -> %s" % (root / "clf"))
  texts = _movie_sentences()
  for name, cls, texts in (("clf", transformers.AutoModelForSequenceClassification, texts),
                           ("ner", transformers.AutoModelForTokenClassification,
                            _tweets()[0])):
    model, path = built[name], str(root / name)
    assert sorted(os.listdir(path)) == FILES
    ref, info = cls.from_pretrained(path, output_loading_info=True)
    assert not (info["missing_keys"] or info["unexpected_keys"]), info
    tok = transformers.AutoTokenizer.from_pretrained(path)
    pre = model.preprocessor.bert_preprocessor
    enc = tok(texts, padding="max_length", truncation=True, max_length=48, return_tensors="np")
    ours = pre(tf.constant(texts))
    for key, theirs in (("input_ids", "input_ids"), ("segment_ids", "token_type_ids"),
                        ("input_mask", "attention_mask")):
      np.testing.assert_array_equal(ours[key].numpy(), enc[theirs], err_msg=(name, key))
    # tokenizer.json alone (what the tokenizers library and its other
    # users read; transformers rebuilds the normalizer from tokenizer_config).
    alone = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    alone.enable_truncation(48)
    lengths = ours["input_mask"].numpy().sum(-1)
    assert [e.ids for e in alone.encode_batch(texts)] == [
        list(row[:n]) for row, n in zip(ours["input_ids"].numpy(), lengths)]
    assert huggingface.read_tokenizer(path).do_lower_case is pre.do_lower_case
    with torch.no_grad():
      want = ref.eval()(**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
    got = model(ours).numpy()
    assert np.abs(want).max() > 0.1  # not an init's near-zero logits
    if name == "ner":
      mask = enc["attention_mask"].astype(bool)
      got, want = got[mask], want[mask]
    np.testing.assert_allclose(got, want, atol=ATOL, err_msg=name)
  clf_ref = transformers.AutoModelForSequenceClassification.from_pretrained(str(root / "clf"))
  assert clf_ref.config.id2label == {0: "negative", 1: "positive"}
  assert clf_ref.config.problem_type == "single_label_classification"
  ner_ref = transformers.AutoModelForTokenClassification.from_pretrained(str(root / "ner"))
  assert ner_ref.config.id2label == {i: "LABEL_%d" % i for i in range(5)}  # unnamed
  # Casing: the cased tokenizer keeps capitals (the uncased vocab has no
  # "Paris": [UNK]), the uncased one folds them.
  for name, want in (("clf", True), ("ner", False)):
    with open(str(root / name / "tokenizer_config.json"), encoding="utf-8") as f:
      assert json.load(f)["do_lower_case"] is want
  # The .keras file writes the same directory, file for file.
  for f in FILES:
    assert (root / "keras" / f).read_bytes() == (root / "clf" / f).read_bytes(), f


def test_unknown_model_and_taken_output_dir_are_one_line(built, tmp_path):
  with pytest.raises(errors.CheckpointError, match="not a bert_tf BERT model"):
    convert.to_transformers(tf.keras.layers.Dense(2), str(tmp_path / "x"))
  assert not (tmp_path / "x").exists()
  with pytest.raises(errors.CheckpointError, match="exists and is not empty"):
    convert.to_transformers(built["clf"], str(built["root"] / "clf"))


def test_tool_writes_a_run_directory_and_refuses_bad_input(tmp_path):
  """tools/run_ner.py's run -> --output_format=hf -> transformers, tag names
  from ner_config.json; then the bad input of the issue, one line each."""
  data = tmp_path / "data"
  os.makedirs(data)
  blocks = open(os.path.join(NER_DIR, "train.txt"), encoding="utf-8").read().split("\n\n")
  (data / "train.txt").write_text("\n\n".join(blocks[:16]) + "\n", encoding="utf-8")
  tags = conll.label_list_from(conll.read_conll(os.path.join(NER_DIR, "train.txt")))
  run = tmp_path / "run"
  run_tool(["tools/run_ner.py", "--data_dir=%s" % data, "--bert_config_file=" + TINY_CONFIG,
            "--vocab_file=" + VOCAB, "--output_dir=%s" % run, "--do_train",
            "--train_batch_size=8", "--num_train_epochs=1", "--max_seq_length=32",
            "--label_list=" + ",".join(tags)])
  out = tmp_path / "hf"
  proc = run_tool(["tools/convert_checkpoint.py", "--input=%s" % run, "--output=%s" % out,
                   "--output_format=hf"])
  assert proc.stdout.startswith("wrote BertForTokenClassification (39 tensors, labels %s, "
                                "tokenizer) -> %s" % (", ".join(tags), out)), proc.stdout
  ref = transformers.AutoModelForTokenClassification.from_pretrained(str(out)).eval()
  with open(run / "ner_config.json", encoding="utf-8") as f:
    assert json.load(f)["labels"] == tags
  assert [ref.config.id2label[i] for i in range(len(tags))] == tags
  ours = tagging.BertTokenClassifier.from_preset(str(run), preprocessor=True)
  texts = _tweets()[0]
  enc = transformers.AutoTokenizer.from_pretrained(str(out))(
      texts, padding="max_length", truncation=True, max_length=32, return_tensors="np")
  feats = ours.preprocessor.bert_preprocessor(tf.constant(texts))
  np.testing.assert_array_equal(feats["input_ids"].numpy(), enc["input_ids"])
  with torch.no_grad():
    want = ref(**{k: torch.tensor(v) for k, v in enc.items()}).logits.numpy()
  mask = enc["attention_mask"].astype(bool)
  np.testing.assert_allclose(ours(feats).numpy()[mask], want[mask], atol=ATOL)

  before = {f: (out / f).read_bytes() for f in FILES}
  for args, message in (
      (["--input=%s" % run, "--output=%s" % out],
       "convert_checkpoint: error: --output: %s exists and is not empty: name a new "
       "directory (nothing was written)" % out),
      (["--input=" + VOCAB, "--output=%s" % (tmp_path / "new")],
       "convert_checkpoint: error: --input: %s is not a model: expected a run directory, "
       "a .keras file, a Hugging Face directory (config.json + model.safetensors) or an "
       "original checkpoint" % VOCAB),
      (["--input=%s" % data, "--output=%s" % (tmp_path / "new")],
       "convert_checkpoint: error: --input: %r holds no model" % str(data))):
    proc = run_tool(["tools/convert_checkpoint.py", "--output_format=hf"] + args, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith(message), \
        proc.stderr[-2000:]
  assert {f: (out / f).read_bytes() for f in FILES} == before
  assert not (tmp_path / "new").exists()
  assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temporary left


def test_original_checkpoint_writes_its_heads_and_task_picks_the_class(hf):
  """An original ``bert_model.ckpt`` directory (google-research/bert's
  release layout: the pretraining heads under ``cls/``) becomes a
  ``BertForPreTraining`` with transformers' tensors byte for byte;
  ``task="encoder"`` writes its ``BertModel``."""
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  model, pre = convert.load_preset_model(hf["pt"])
  tf1 = hf["root"] / "original"
  os.makedirs(tf1)
  checkpoints.save_tf1_checkpoint(checkpoints.pretrainer_variables(model),
                                  str(tf1 / "bert_model.ckpt"))
  model.config.to_json_file(str(tf1 / "bert_config.json"))
  (tf1 / "vocab.txt").write_text("".join(t + "\n" for t in pre.vocab_lines()), encoding="utf-8")
  line = convert.to_transformers(str(tf1), str(hf["root"] / "original_hf"))
  assert line.startswith("BertForPreTraining (78 tensors, tokenizer)"), line
  theirs, _ = _tensors(hf["pt"])
  ours, _ = _tensors(str(hf["root"] / "original_hf"))
  assert sorted(ours) == sorted(theirs)
  assert all(ours[k].tobytes() == v.tobytes() for k, v in theirs.items())
  line = convert.to_transformers(str(tf1), str(hf["root"] / "original_enc"), task="encoder")
  assert line.startswith("BertModel (71 tensors, tokenizer)"), line
  enc, _ = _tensors(str(hf["root"] / "original_enc"))
  assert sorted(enc) == sorted(k[len("bert."):] for k in theirs if k.startswith("bert."))
  with pytest.raises(errors.CheckpointError, match="no masked-LM head"):
    convert.to_transformers(hf["seq"], str(hf["root"] / "x"), task="pretraining")
  assert not (hf["root"] / "x").exists()
