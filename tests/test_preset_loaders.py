"""``presets``: one loader class per preset source, picked once per ``from_preset``.

Each source on a real preset (MiniLM's Hugging Face directory; tiny run
directories, original checkpoints and ``.keras`` files built here), a
``.keras`` file read once per ``from_preset``, and a source added as one
class plus one registry line.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import preprocessing
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import models
from bert_tf.modeling import presets
from bert_tf.modeling import tagging

CONFIG = config_lib.BertConfig(
    vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=48, max_position_embeddings=32, type_vocab_size=2)


def _randomize(model, seed):
  rng = np.random.RandomState(seed)
  for w in model.weights:
    w.assign(rng.normal(0, 0.05, w.shape).astype(np.float32))


def _same(a, b):
  for x, y in zip(a.weights, b.weights):
    np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
  """``{name: path}`` of one tiny preset per source, and the models saved."""
  d = tmp_path_factory.mktemp("presets")
  vocab = d / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                             ["w%d" % i for i in range(115)]) + "\n")
  tuned = models.build_classifier(CONFIG, 3)
  _randomize(tuned, 1)
  # Our run: classifier_config.json, a newest checkpoint and a best/ one.
  run = d / "run"
  run.mkdir()
  CONFIG.to_json_file(str(run / "bert_config.json"))
  (run / "vocab.txt").write_text(vocab.read_text())
  (run / "classifier_config.json").write_text(json.dumps(
      {"labels": ["a", "b", "c"], "is_regression": False, "max_seq_length": 24,
       "do_lower_case": False}))
  newest = models.build_classifier(CONFIG, 3)
  tf.train.Checkpoint(model=newest, encoder=newest.encoder).save(str(run / "ckpt"))
  tf.train.Checkpoint(model=tuned, encoder=tuned.encoder).save(str(run / "best" / "ckpt"))
  # An original release directory, named as a cased one.
  orig = d / "cased_L-2_H-32_A-4"
  orig.mkdir()
  CONFIG.to_json_file(str(orig / "bert_config.json"))
  (orig / "vocab.txt").write_text(vocab.read_text())
  checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(tuned.encoder),
                                  str(orig / "bert_model.ckpt"))
  # An original fine-tuned classifier prefix (output_weights [3, H]).
  ft = d / "ft"
  ft.mkdir()
  checkpoints.save_tf1_checkpoint(
      checkpoints.encoder_variables(tuned.encoder) + [
          ("output_weights", tuned.classifier.output_weights),
          ("output_bias", tuned.classifier.output_bias)],
      str(ft / "model.ckpt-10"))
  # A .keras classifier with its preprocessor.
  saved = models.BertClassifier(
      CONFIG, 3, preprocessor=preprocessing.BertPreprocessor(str(vocab), True, 16))
  for dst, src in zip(saved.weights, tuned.weights):
    dst.assign(src)
  saved.save(str(d / "clf.keras"))
  return {"run": str(run), "run_prefix": str(run / "ckpt-1"), "orig": str(orig),
          "ft": str(ft / "model.ckpt-10"), "keras": str(d / "clf.keras"),
          "tuned": tuned}


def test_each_source_picks_its_loader(sources, minilm_dir):
  want = {"run": presets.RunDirLoader, "run_prefix": presets.RunDirLoader,
          "orig": presets.Tf1Loader, "ft": presets.Tf1Loader,
          "keras": presets.KerasFileLoader}
  for name, cls in want.items():
    assert type(presets.get_preset_loader(sources[name])) is cls, name
  hf = presets.get_preset_loader(minilm_dir)
  assert type(hf) is presets.HuggingFaceLoader
  assert hf.config() == checkpoints.read_hf_config(minilm_dir)
  assert hf.num_labels(models.CLASSIFIER_TASK) is None
  assert hf.num_labels(tagging.TAGGING_TASK) is None  # a BertModel: no head
  assert hf.missing_labels_reason(tagging.TAGGING_TASK) == "no classifier head"
  assert hf.vocab_file().endswith("vocab.txt") and hf.do_lower_case()
  assert hf.max_seq_length() == 128

  run = presets.get_preset_loader(sources["run"])
  assert run.checkpoint.endswith("best/ckpt-1")  # best/ before the newest
  assert run.config() == CONFIG
  assert run.num_labels(models.CLASSIFIER_TASK) == 3
  assert run.labels(models.CLASSIFIER_TASK) == ["a", "b", "c"]
  assert run.num_labels(tagging.TAGGING_TASK) is None  # no ner_config.json
  assert (run.do_lower_case(), run.max_seq_length()) == (False, 24)  # recorded
  assert presets.get_preset_loader(sources["run_prefix"]).run_dir == sources["run"]

  orig = presets.get_preset_loader(sources["orig"])
  assert orig.checkpoint.endswith("bert_model.ckpt")
  assert orig.num_labels(models.CLASSIFIER_TASK) is None
  assert (orig.do_lower_case(), orig.max_seq_length()) == (False, 32)  # cased_*; capped
  assert presets.get_preset_loader(sources["ft"]).num_labels(models.CLASSIFIER_TASK) == 3

  kf = presets.get_preset_loader(sources["keras"])
  assert kf.config() == CONFIG and kf.num_labels(models.CLASSIFIER_TASK) == 3
  assert (kf.do_lower_case(), kf.max_seq_length()) == (True, 16)
  assert kf.preprocessor(True) is kf.keras_model().preprocessor.bert_preprocessor


def test_each_source_loads_the_same_classifier(sources):
  tuned, x = sources["tuned"], {"input_ids": tf.constant([[2, 7, 9, 3]]),
                                "input_mask": tf.ones([1, 4], tf.int32),
                                "segment_ids": tf.zeros([1, 4], tf.int32)}
  want = tuned(x).numpy()
  for name in ("run", "keras"):
    np.testing.assert_array_equal(models.BertClassifier.from_preset(sources[name])(x),
                                  want, err_msg=name)
  ft = models.BertClassifier.from_preset(sources["ft"], config=CONFIG)
  np.testing.assert_array_equal(ft(x), want)
  enc = encoder_lib.BertEncoder.from_preset(sources["orig"])
  _same(enc, tuned.encoder)
  with pytest.raises(errors.ConfigError, match="unknown number of labels; pass num_labels"):
    tagging.BertTokenClassifier.from_preset(sources["orig"])


def test_init_checkpoint_takes_what_from_preset_takes(sources):
  """``--init_checkpoint`` (:func:`presets.load_weights`) reads a run
  directory by the one best-or-latest rule (``best/``: the tuned weights,
  not the newest checkpoint's) and a release directory's ``bert_model.ckpt``,
  as ``from_preset`` does; a task model's head comes along where the start
  model has it, and the line says which weights it was."""
  tuned = sources["tuned"]
  for name in ("run", "orig"):
    enc = encoder_lib.BertEncoder(CONFIG, name="bert")
    what = presets.load_weights(enc, sources[name])
    _same(enc, tuned.encoder)
    assert what.endswith(("best/ckpt-1", "bert_model.ckpt")), what
  clf = models.build_classifier(CONFIG, 3)
  what = presets.load_weights(clf, sources["run"])  # the class's head spec
  _same(clf, tuned)
  assert what.endswith("best/ckpt-1 (with the classification head)"), what
  clf = models.build_classifier(CONFIG, 3)
  head = clf.classifier.output_bias.numpy().copy()
  assert "(with" not in presets.load_weights(clf, sources["run"], presets.ENCODER)
  np.testing.assert_array_equal(clf.classifier.output_bias.numpy(), head)
  with pytest.raises(errors.CheckpointError, match="--init_checkpoint: .* does not "
                     "exist") as e:
    presets.load_weights(clf, sources["run"] + "-nothing")
  assert e.value.argument == "init_checkpoint"


def test_a_run_model_is_rebuilt_from_its_settings_with_no_branch_per_kind(sources):
  """``from_run_settings``: the kind record's model class and the run's
  settings file rebuild the model a run trained; its checkpoint restores
  into it whole (strict), giving the tuned logits."""
  from bert_tf import run_dir, task_kinds  # pylint: disable=g-import-not-at-top
  run = sources["run"]
  with open(os.path.join(run, "classifier_config.json"), encoding="utf-8") as f:
    settings = json.load(f)
  cls = task_kinds.get("classifier").attribute("model_class")
  model = cls.from_run_settings(CONFIG.to_dict(), settings)
  assert type(model) is models.BertClassifier and model.label_names == ["a", "b", "c"]
  checkpoints.restore_object_checkpoint(run_dir.model_checkpoint(run), "test", model=model)
  _same(model, sources["tuned"])
  reg = cls.from_run_settings(CONFIG, {"is_regression": True, "labels": []})
  multi = cls.from_run_settings(CONFIG, {"labels": ["x", "y"], "multi_label": True})
  assert (reg.num_labels, reg.problem_type) == (1, "regression")
  assert (multi.num_labels, multi.problem_type) == (2, "multi_label_classification")
  tagger = task_kinds.get("ner").attribute("model_class").from_run_settings(
      CONFIG, {"labels": ["O", "B-PER", "I-PER"]})
  assert (tagger.num_labels, tagger.label_names) == (3, ["O", "B-PER", "I-PER"])
  for kind in ("squad", "swag"):
    got = task_kinds.get(kind).attribute("model_class").from_run_settings(CONFIG, {})
    assert type(got).__name__ == task_kinds.get(kind).model_class.rsplit(":", 1)[1]
  for name in ("classifier", "ner"):
    with pytest.raises(errors.ConfigError, match="record no labels") as e:
      task_kinds.get(name).attribute("model_class").from_run_settings(CONFIG, {})
    assert e.value.argument == "labels"
  # One refusal, one error class, in every class with labels.
  for cls in (models.BertClassifier, tagging.BertTokenClassifier):
    with pytest.raises(errors.ConfigError, match="unknown number of labels; pass "
                       "num_labels") as e:
      cls.from_preset(sources["orig"])
    assert e.value.argument == "num_labels"
    with pytest.raises(errors.ParamsError, match="num_labels must be at least 1"):
      cls(CONFIG, 0)
  with pytest.raises(errors.ParamsError, match="takes token ids"):
    models.BertPretrainer.from_preset(sources["orig"], preprocessor=True)


def test_no_loader_names_what_is_missing(tmp_path):
  with pytest.raises(errors.CheckpointError, match="does not exist"):
    presets.get_preset_loader(str(tmp_path / "nothing"))
  with pytest.raises(errors.CheckpointError, match="holds no model"):
    presets.get_preset_loader(str(tmp_path))


def test_a_keras_file_is_loaded_once_per_from_preset(sources, monkeypatch):
  calls = []
  real = keras.models.load_model

  def counting(*args, **kwargs):
    calls.append(args[0])
    return real(*args, **kwargs)

  monkeypatch.setattr(keras.models, "load_model", counting)
  # num_labels, the preprocessor and the weights all from the one file.
  clf = models.BertClassifier.from_preset(sources["keras"], preprocessor=True)
  assert clf.num_labels == 3 and clf.preprocessor is not None
  assert calls == [sources["keras"]]
  calls.clear()
  tagger = tagging.BertTokenClassifier.from_preset(sources["keras"])
  assert tagger.num_labels == 3 and len(calls) == 1


def test_a_hugging_face_weight_file_is_opened_once_per_from_preset(sources, tmp_path,
                                                                  monkeypatch):
  """``from_preset`` of a Hugging Face classifier asks its weight file for the
  label count, the architecture check, the encoder and the head: one
  ``safe_open`` of ``model.safetensors`` serves them all (keras-hub's lazy
  reads), and no whole-file read happens."""
  import safetensors  # pylint: disable=g-import-not-at-top
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  from bert_tf import convert  # pylint: disable=g-import-not-at-top
  tuned = sources["tuned"]
  hf = str(tmp_path / "hf")
  pre = presets.get_preset_loader(sources["keras"]).preprocessor(True)
  convert.save_transformers(tuned, hf, pre)
  opened, whole = [], []
  real_open = safetensors.safe_open

  def counting_open(path, *args, **kwargs):
    opened.append(path)
    return real_open(path, *args, **kwargs)

  monkeypatch.setattr(safetensors, "safe_open", counting_open)
  monkeypatch.setattr(safetensors.numpy, "load_file",
                      lambda *a, **k: whole.append(a) or {})
  clf = models.BertClassifier.from_preset(hf, preprocessor=True)
  assert opened == [os.path.join(hf, "model.safetensors")] and not whole, (opened, whole)
  assert clf.num_labels == 3 and clf.preprocessor is not None
  x = {"input_ids": tf.constant([[2, 7, 9, 3]]), "input_mask": tf.ones([1, 4], tf.int32),
       "segment_ids": tf.zeros([1, 4], tf.int32)}
  np.testing.assert_allclose(clf(x), tuned(x), atol=1e-6)


class NpzLoader(presets.PresetLoader):
  """A made-up source: ``.npz`` of the encoder's original names + ``config``."""

  @classmethod
  def can_load(cls, path):
    return path.endswith(".npz")

  def config(self):
    with np.load(self.preset) as f:
      return config_lib.BertConfig.from_dict(json.loads(str(f["config"])))

  def load_into(self, model, task=presets.ENCODER):
    with np.load(self.preset) as f:
      for name, var in checkpoints.encoder_variables(presets.encoder_of(model)):
        var.assign(f[name])


def test_a_new_source_is_one_class_and_one_registry_line(sources, tmp_path, monkeypatch):
  tuned = sources["tuned"]
  path = str(tmp_path / "weights.npz")
  np.savez(path, config=json.dumps(CONFIG.to_dict()),
           **{n: v.numpy() for n, v in checkpoints.encoder_variables(tuned.encoder)})
  with pytest.raises(errors.CheckpointError, match="does not exist"):
    presets.get_preset_loader(path)
  monkeypatch.setattr(presets, "LOADERS", [NpzLoader] + presets.LOADERS)
  assert type(presets.get_preset_loader(path)) is NpzLoader
  _same(encoder_lib.BertEncoder.from_preset(path), tuned.encoder)
  clf = models.BertClassifier.from_preset(path, num_labels=2)
  _same(clf.encoder, tuned.encoder)
  # The defaults: no labels recorded, no vocab.
  with pytest.raises(errors.ConfigError, match="pass num_labels"):
    models.BertClassifier.from_preset(path)
  with pytest.raises(errors.ConfigError, match="no vocab.txt"):
    models.BertClassifier.from_preset(path, num_labels=2, preprocessor=True)
