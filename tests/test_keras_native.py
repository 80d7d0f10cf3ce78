"""Keras 3-native model surface: get_config, .keras save/load, from_preset, fit."""

import io
import json
import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import optimization
from bert_tf import preprocessing
from bert_tf.data import classifier_data
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling import models
from bert_tf.modeling import presets
from conftest import MOVIE_DIR, VOCAB

CONFIG = config_lib.BertConfig(
    vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=48, max_position_embeddings=32, type_vocab_size=2)


def batch(seed=0, b=3, s=12, vocab=120):
  rng = np.random.RandomState(seed)
  lengths = np.array([s, s - 4, 3])[:b]
  mask = (np.arange(s)[None] < lengths[:, None]).astype(np.int32)
  return {"input_ids": tf.constant(rng.randint(1, vocab, (b, s)) * mask, tf.int32),
          "input_mask": tf.constant(mask),
          "segment_ids": tf.constant((np.arange(s)[None] >= 4) * mask, tf.int32),
          "masked_lm_positions": tf.constant([[1, 2], [0, 5], [1, 2]][:b], tf.int32)}


def assert_same_weights(a, b):
  assert [w.path for w in a.weights] == [w.path for w in b.weights]
  for x, y in zip(a.weights, b.weights):
    np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)


def assert_same_outputs(a, b):
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def randomize(model, seed=1):
  """Non-trivial values everywhere (heads start at zero bias)."""
  rng = np.random.RandomState(seed)
  for w in model.weights:
    w.assign(rng.normal(0, 0.05, w.shape).astype(np.float32))


@pytest.mark.parametrize("what", ["encoder", "pretrainer", "classifier"])
def test_keras_save_load_roundtrip(tmp_path, what):
  if what == "encoder":
    model = encoder_lib.BertEncoder(CONFIG, name="bert")
  elif what == "pretrainer":
    model = models.build_pretrainer(CONFIG)
  else:
    model = models.build_classifier(CONFIG, 3)
  randomize(model)
  x = batch()
  path = str(tmp_path / ("%s.keras" % what))
  if what == "encoder":  # a layer saves inside a (functional) model
    inner = model
    inputs = {k: keras.Input((None,), dtype="int32", name=k)
              for k in encoder_lib.INPUT_NAMES}
    out = inner(inputs)
    model = keras.Model(inputs, {k: out[k] for k in ("sequence_output",
                                                     "pooled_output")})
    x = {k: x[k] for k in encoder_lib.INPUT_NAMES}
  model.save(path)
  loaded = keras.models.load_model(path)
  assert type(loaded) is type(model)
  if what != "encoder":
    assert loaded.config == CONFIG
  assert_same_weights(model, loaded)
  assert_same_outputs(model(x), loaded(x))
  if what == "pretrainer":
    # The tie survives: one table, shared by the encoder and the MLM head.
    assert loaded.masked_lm.embeddings is loaded.encoder.embeddings
    assert len(loaded.weights) == len(checkpoints.pretrainer_variables(loaded))
  if what == "encoder":
    enc = loaded.get_layer("bert")
    assert type(enc) is encoder_lib.BertEncoder and enc.config == CONFIG
    assert_same_outputs(inner(x), enc(x))


def test_get_config_from_config_every_layer():
  emb = bert_layers.BertEmbeddings(CONFIG, name="embeddings")
  layers = [bert_layers.Dropout(0.1, seed=3),
            emb,
            bert_layers.TransformerBlock(CONFIG, name="layer_0"),
            encoder_lib.BertEncoder(CONFIG, name="bert"),
            models.DenseHead(CONFIG, 5, name="classifier"),
            models.MaskedLMHead(CONFIG, emb, name="predictions")]
  for layer in layers:
    cfg = layer.get_config()
    json.dumps(cfg)  # plain JSON
    ser = keras.saving.serialize_keras_object(layer)
    assert ser["registered_name"] == "bert_tf>" + type(layer).__name__
    again = keras.saving.deserialize_keras_object(ser)
    assert type(again) is type(layer)
    assert again.get_config() == cfg
    assert [w.shape for w in again.weights] == [w.shape for w in layer.weights]
  assert layers[1].get_config()["config"] == CONFIG.to_dict()
  # A config dict is accepted where a BertConfig is, and validated.
  assert encoder_lib.BertEncoder(CONFIG.to_dict()).config == CONFIG
  with pytest.raises(errors.ConfigError, match="hidden_size"):
    encoder_lib.BertEncoder(dict(CONFIG.to_dict(), hidden_size=30))
  for model in (models.BertPretrainer(CONFIG, nsp=False), models.BertClassifier(CONFIG, 4)):
    again = type(model).from_config(model.get_config())
    assert again.get_config() == model.get_config()


def test_bert_config_serializes_as_its_dict():
  d = CONFIG.get_config()
  assert d == CONFIG.to_dict() and json.loads(CONFIG.to_json_string()) == d
  assert config_lib.as_bert_config(d) == CONFIG
  assert config_lib.as_bert_config(CONFIG) is CONFIG
  with pytest.raises(errors.ConfigError):
    config_lib.as_bert_config(42)


def test_summary_names_every_layer():
  model = models.build_classifier(CONFIG, 2)
  lines = []
  model.summary(expand_nested=True, print_fn=lambda s, **kw: lines.append(s))
  text = "\n".join(lines)
  print(text)
  for name in ("bert (BertEncoder)", "embeddings", "layer_0", "layer_1", "pooler",
               "classifier (DenseHead)", "dropout"):
    assert name in text, name
  assert "unbuilt" not in text
  n = sum(int(np.prod(w.shape)) for w in model.weights)
  assert "Total params: {:,}".format(n) in text
  lines.clear()
  models.build_pretrainer(CONFIG).summary(print_fn=lambda s, **kw: lines.append(s))
  text = "\n".join(lines)
  assert "predictions (MaskedLMHead)" in text and "seq_relationship" in text
  assert "unbuilt" not in text


def test_from_preset_hf_minilm(minilm_dir):
  ref = encoder_lib.BertEncoder(checkpoints.read_hf_config(minilm_dir), name="bert")
  presets.load_weights(ref, minilm_dir)
  enc = encoder_lib.BertEncoder.from_preset(minilm_dir)
  x = batch(vocab=30522)
  assert_same_outputs(ref(x), enc(x))
  clf = models.BertClassifier.from_preset(minilm_dir, num_labels=2)
  assert clf.num_labels == 2 and clf.config == ref.config
  assert_same_weights(ref, clf.encoder)
  pre = models.BertPretrainer.from_preset(minilm_dir)
  assert_same_weights(ref, pre.encoder)
  with pytest.raises(errors.ConfigError, match="num_labels"):
    models.BertClassifier.from_preset(minilm_dir)


def test_from_preset_hf_pretraining_heads(tmp_path):
  """A Hugging Face BertForPreTraining directory: encoder and cls.* heads."""
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  src = models.build_pretrainer(CONFIG)
  randomize(src, seed=7)
  tensors = {}
  for name, var in checkpoints.pretrainer_variables(src):
    if name.startswith("cls/"):
      hf, transpose = checkpoints.HF_HEAD_NAMES[name]
    else:
      hf, transpose = checkpoints.tf1_to_hf_name(name)
      hf = "bert." + hf
    value = var.numpy()
    tensors[hf] = np.ascontiguousarray(value.T if transpose else value)
  d = tmp_path / "hf"
  d.mkdir()
  save_file(tensors, str(d / "model.safetensors"))
  with open(d / "config.json", "w") as f:
    json.dump(dict(CONFIG.to_dict(), hidden_act="gelu_new",
                   architectures=["BertForPreTraining"]), f)
  x = batch()
  assert_same_outputs(src(x), models.BertPretrainer.from_preset(str(d))(x))
  # Only some head weights: refused, naming the missing ones.
  del tensors["cls.seq_relationship.bias"]
  save_file(tensors, str(d / "model.safetensors"))
  with pytest.raises(errors.CheckpointError, match="cls.seq_relationship.bias"):
    models.BertPretrainer.from_preset(str(d))


def test_from_preset_original_tf1_checkpoint(tmp_path):
  """bert_config.json + bert_model.ckpt as google-research/bert ships them."""
  src = models.build_pretrainer(CONFIG)
  randomize(src)
  d = tmp_path / "uncased_L-2_H-32_A-4"
  d.mkdir()
  CONFIG.to_json_file(str(d / "bert_config.json"))
  prefix = checkpoints.save_tf1_checkpoint(checkpoints.pretrainer_variables(src),
                                           str(d / "bert_model.ckpt"))
  x = batch()
  for path in (str(d), prefix):
    pre = models.BertPretrainer.from_preset(path)
    assert_same_outputs(src(x), pre(x))
    enc = encoder_lib.BertEncoder.from_preset(path)
    assert_same_outputs(src.encoder(x), enc(x))
  clf = models.BertClassifier.from_preset(str(d), num_labels=3)
  assert_same_weights(src.encoder, clf.encoder)
  # A fine-tuned original checkpoint: its output_weights head is loaded.
  tuned = models.build_classifier(CONFIG, 3)
  randomize(tuned, seed=4)
  ft = tmp_path / "ft"
  ft.mkdir()
  named = checkpoints.encoder_variables(tuned.encoder) + [
      ("output_weights", tuned.classifier.output_weights),
      ("output_bias", tuned.classifier.output_bias)]
  checkpoints.save_tf1_checkpoint(named, str(ft / "model.ckpt-10"))
  clf = models.BertClassifier.from_preset(str(ft / "model.ckpt-10"), config=CONFIG)
  assert clf.num_labels == 3
  assert_same_outputs(tuned(x), clf(x))


def test_from_preset_ours_and_keras_file(tmp_path):
  tuned = models.build_classifier(CONFIG, 3)
  randomize(tuned, seed=5)
  run = tmp_path / "run"
  run.mkdir()
  CONFIG.to_json_file(str(run / "bert_config.json"))
  with open(run / "classifier_config.json", "w") as f:
    json.dump({"labels": ["a", "b", "c"], "is_regression": False}, f)
  tf.train.Checkpoint(model=tuned, encoder=tuned.encoder).save(str(run / "ckpt"))
  x = batch()
  clf = models.BertClassifier.from_preset(str(run))  # num_labels from the run
  assert clf.num_labels == 3
  assert_same_outputs(tuned(x), clf(x))
  enc = encoder_lib.BertEncoder.from_preset(str(run))
  assert_same_outputs(tuned.encoder(x), enc(x))
  # A pretraining run (model = BertPretrainer): a classifier takes its encoder.
  pre = models.build_pretrainer(CONFIG)
  randomize(pre, seed=6)
  prun = tmp_path / "pretrain"
  prun.mkdir()
  CONFIG.to_json_file(str(prun / "bert_config.json"))
  tf.train.Checkpoint(model=pre, encoder=pre.encoder).save(str(prun / "ckpt"))
  assert_same_outputs(pre(x), models.BertPretrainer.from_preset(str(prun))(x))
  clf = models.BertClassifier.from_preset(str(prun), num_labels=2)
  assert_same_weights(pre.encoder, clf.encoder)
  # .keras file
  path = str(tmp_path / "clf.keras")
  tuned.save(path)
  assert_same_outputs(tuned(x), models.BertClassifier.from_preset(path)(x))
  assert_same_weights(tuned.encoder,
                      models.BertPretrainer.from_preset(path).encoder)
  with pytest.raises(errors.CheckpointError, match="does not exist"):
    encoder_lib.BertEncoder.from_preset(str(tmp_path / "nothing"))
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(errors.CheckpointError, match="holds no model"):
    encoder_lib.BertEncoder.from_preset(str(empty))


def movie_sentences(n, seed=0):
  task = classifier_data.get_task("sst-2")
  ex = classifier_data.read_split(task, os.path.join(MOVIE_DIR, "train.tsv"), task.train)
  keep = random.Random(seed).sample(range(len(ex.texts_a)), n)
  return [ex.texts_a[i] for i in keep], [ex.labels[i] for i in keep]


@pytest.mark.slow  # ~90 s on the shared 2-core machine (three traced functions)
def test_classifier_compile_fit_predict_on_raw_strings():
  """Plain compile + fit on raw strings through BertPreprocessor (tiny model)."""
  keras.utils.set_random_seed(0)
  texts, labels = movie_sentences(32)
  pre = preprocessing.BertPreprocessor(VOCAB, max_seq_length=32)
  config = config_lib.BertConfig(
      vocab_size=pre.vocab_size, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=64, max_position_embeddings=32,
      type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  model = models.build_classifier(config, 2)
  ds = classifier_data.examples_dataset(pre, texts, None, labels, 32)
  epochs = 40  # one batch per epoch: memorize 32 sentences
  model.compile(optimizer=optimization.create_optimizer(2e-3, epochs, 0),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"])
  before = model.evaluate(ds, verbose=0, return_dict=True)
  # One iterator for all epochs (the same batch each epoch): a new iterator
  # per epoch instantiates the tokenizer's kernels again (~0.15 s each).
  hist = model.fit(ds.repeat(), epochs=epochs, steps_per_epoch=1, verbose=0).history
  after = model.evaluate(ds, verbose=0, return_dict=True)
  assert after["loss"] < before["loss"] - 0.1, (before, after, hist["loss"])
  assert after["accuracy"] > 0.8, (before, after)
  assert hist["loss"][-1] < hist["loss"][0]
  # The optimizer's slots were made before the step was traced (eager
  # variables): slots made inside the trace are lifted
  # (``UnliftedInitializerVariable``) and the step is traced twice.
  lifted = [v.path for v in model.optimizer.variables
            if type(v.value).__name__ == "UnliftedInitializerVariable"]
  assert not lifted, lifted[:3]
  # predict: features only (dataset of dicts), logits [N, 2].
  feats = classifier_data.examples_dataset(pre, texts[:20], None, None, 8)
  logits = model.predict(feats, verbose=0)
  assert logits.shape == (20, 2) and np.isfinite(logits).all()
  direct = model(pre(tf.constant(texts[:8]))).numpy()
  np.testing.assert_allclose(logits[:8], direct, atol=1e-5)


def test_fit_optimizer_keeps_no_variable_in_its_traces():
  """AdamWeightDecay under ``model.fit``: the fused update's traces take only
  tensors. ``fit`` builds the optimizer inside its first traced step, and its
  slots (``UnliftedInitializerVariable``) used to enter the trace by object
  identity; once deleted, a later same-shaped variable reusing the id hit
  that trace and failed ("Called a function referencing variables which have
  been deleted": test_runner after this file, in CI)."""
  keras.utils.set_random_seed(0)
  inp = keras.Input((4,))
  model = keras.Model(inp, keras.layers.Dense(3)(keras.layers.Dense(5)(inp)))
  model.compile(optimizer=optimization.AdamWeightDecay(1e-2), loss="mse")
  x = np.random.RandomState(0).rand(16, 4).astype("float32")
  model.fit(x, x[:, :3], epochs=2, verbose=0)
  specs = [a for f in optimization._fused_update._list_all_concrete_functions()  # pylint: disable=protected-access
           for a in f.structured_input_signature[0][:5]]  # var, m, v, grad, lr
  assert specs and all(isinstance(a, tf.TensorSpec) for a in specs), specs
  # The update still trains: slots moved, weights changed from the start.
  assert all(np.abs(m.numpy()).sum() > 0 for m in model.optimizer._m)  # pylint: disable=protected-access
