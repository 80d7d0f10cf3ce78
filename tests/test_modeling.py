"""Encoder, heads, config, optimizer and checkpoint loading against references."""

import json

import numpy as np
import pytest

import conftest
import keras
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import optimization
from bert_tf.modeling import BertClassifier, BertEncoder
from bert_tf.modeling import presets
from bert_tf.preprocessing import BertPreprocessor
from conftest import MOVIE_DIR, TINY_CONFIG, VOCAB

ORIGINAL_KEYS = {"vocab_size", "hidden_size", "num_hidden_layers",
                 "num_attention_heads", "intermediate_size", "hidden_act",
                 "hidden_dropout_prob", "attention_probs_dropout_prob",
                 "max_position_embeddings", "type_vocab_size", "initializer_range"}


def dev_sentences(n=12):
  with open(MOVIE_DIR + "/dev.tsv", encoding="utf-8") as f:
    rows = [l.split("\t")[0] for l in f.read().splitlines()[1:]]
  rows = rows[::len(rows) // n][:n]
  rows[1] = "Hi."  # a very short one, so the batch has lots of padding
  return rows


def test_config_round_trip_original_keys(tmp_path):
  c = config_lib.BertConfig.from_json_file(TINY_CONFIG)
  p = tmp_path / "bert_config.json"
  c.to_json_file(str(p))
  d = json.loads(p.read_text())
  assert set(d) == ORIGINAL_KEYS
  assert config_lib.BertConfig.from_dict(d) == c
  base = config_lib.preset("base")
  large = config_lib.preset("large")
  assert (base.num_hidden_layers, base.hidden_size, base.num_attention_heads) == (12, 768, 12)
  assert (large.num_hidden_layers, large.hidden_size, large.num_attention_heads) == (24, 1024, 16)


def test_config_errors(tmp_path):
  with pytest.raises(config_lib.ConfigError, match="missing.json"):
    config_lib.BertConfig.from_json_file(str(tmp_path / "missing.json"))
  bad = tmp_path / "bad.json"
  bad.write_text('{"vocab_size": 10, "hidden_size": 100, "num_attention_heads": 12}')
  with pytest.raises(config_lib.ConfigError, match="bad.json.*multiple"):
    config_lib.BertConfig.from_json_file(str(bad))


@pytest.mark.parametrize("skip_padding", [False, True])
def test_minilm_matches_transformers(minilm_dir, skip_padding):
  """Real weights: our encoder vs transformers.BertModel on CPU PyTorch
  (``skip_padding``: the blocks on the token rows only)."""
  torch = conftest.require("torch")
  transformers = conftest.require("transformers")
  cfg = checkpoints.read_hf_config(minilm_dir)
  assert cfg.hidden_act == "gelu_exact"  # HF "gelu" is the erf form
  enc = BertEncoder(cfg)
  enc(enc.dummy_inputs())
  checkpoints.load_hf_weights(enc, minilm_dir)
  pre = BertPreprocessor(minilm_dir + "/vocab.txt", True, 64)
  x = pre(tf.constant(dev_sentences()))
  assert x["input_mask"].numpy().sum(1).min() < 10  # padding present
  ours = enc(x, skip_padding=skip_padding)
  ref = transformers.BertModel.from_pretrained(minilm_dir).eval()
  with torch.no_grad():
    r = ref(input_ids=torch.tensor(x["input_ids"].numpy()).long(),
            attention_mask=torch.tensor(x["input_mask"].numpy()).long(),
            token_type_ids=torch.tensor(x["segment_ids"].numpy()).long(),
            output_hidden_states=True)
  mask = x["input_mask"].numpy()[..., None]
  diff = np.abs((ours["sequence_output"].numpy() - r.last_hidden_state.numpy()) * mask)
  assert diff.max() < 1e-5, diff.max()
  for i, h in enumerate(r.hidden_states[1:]):
    d = np.abs((ours["encoder_outputs"][i].numpy() - h.numpy()) * mask).max()
    assert d < 1e-5, (i, d)
  assert np.abs(ours["pooled_output"].numpy() - r.pooler_output.numpy()).max() < 1e-5
  if skip_padding:  # padding rows are zeros, not the original's values
    assert not np.any(ours["sequence_output"].numpy() * (1 - mask))


def test_skip_padding_gradients_equal_padded(minilm_dir):
  """One training step's gradients (dropout off: same function) with the
  blocks on the token rows only equal the padded computation's: the moves
  between layouts have hand-written gradients, and padding must get none."""
  cfg = checkpoints.read_hf_config(minilm_dir)
  cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
  enc = BertEncoder(cfg)
  enc(enc.dummy_inputs())
  checkpoints.load_hf_weights(enc, minilm_dir)
  x = BertPreprocessor(VOCAB, True, 64)(tf.constant(dev_sentences()[:6]))
  mask = tf.cast(x["input_mask"], tf.float32)
  assert 0 < float(tf.reduce_mean(mask)) < 0.8  # padding present
  probe = tf.random.stateless_normal([64, cfg.hidden_size], [7, 8])

  @tf.function
  def grads(skip):
    with tf.GradientTape() as tape:
      out = enc(x, training=True, skip_padding=skip)
      seq = out["sequence_output"] * mask[..., None]  # the tokens only
      loss = (tf.reduce_sum(seq * probe[:tf.shape(seq)[1]]) +
              tf.reduce_sum(out["pooled_output"] ** 2))
    names = [v.path for v in enc.trainable_variables]
    return loss, dict(zip(names, tape.gradient(loss, enc.trainable_variables)))

  loss_p, g_p = grads(False)
  loss_s, g_s = grads(True)
  np.testing.assert_allclose(loss_s.numpy(), loss_p.numpy(), rtol=1e-5)
  for name, ref in g_p.items():
    got = tf.convert_to_tensor(g_s[name]).numpy()
    ref = tf.convert_to_tensor(ref).numpy()
    scale = max(np.abs(ref).max(), 1e-3)
    # key/bias: zero in exact arithmetic (softmax ignores it), ~1e-6 noise here
    assert np.abs(got - ref).max() < 1e-4 * scale + 1e-5, (name, np.abs(got - ref).max(), scale)


def test_padding_does_not_change_outputs(minilm_dir):
  cfg = checkpoints.read_hf_config(minilm_dir)
  enc = BertEncoder(cfg)
  enc(enc.dummy_inputs())
  checkpoints.load_hf_weights(enc, minilm_dir)
  s = tf.constant(["A gorgeous, witty, seductive movie."])
  short = enc(BertPreprocessor(VOCAB, True, 16)(s))
  long = enc(BertPreprocessor(VOCAB, True, 128)(s))
  n = 10
  np.testing.assert_allclose(short["sequence_output"].numpy()[:, :n],
                             long["sequence_output"].numpy()[:, :n], atol=1e-5)


def test_checkpoint_shape_mismatch_names_variable(minilm_dir):
  cfg = checkpoints.read_hf_config(minilm_dir)
  cfg.intermediate_size = 1024
  enc = BertEncoder(cfg)
  enc(enc.dummy_inputs())
  with pytest.raises(checkpoints.CheckpointError,
                     match=r"intermediate/dense/kernel has shape \[384, 1536\] in "
                           r"the checkpoint but \[384, 1024\]"):
    checkpoints.load_hf_weights(enc, minilm_dir)


def test_our_checkpoint_shape_mismatch(tmp_path):
  small = BertClassifier(config_lib.preset("tiny", vocab_size=100), 2)
  small(small.encoder.dummy_inputs())
  path = tf.train.Checkpoint(encoder=small.encoder).write(str(tmp_path / "ck"))
  big = BertClassifier(config_lib.preset("tiny", vocab_size=200), 2)
  big(big.encoder.dummy_inputs())
  with pytest.raises(checkpoints.CheckpointError, match=r"\(100, 128\).*\(200, 128\)"):
    presets.load_weights(big.encoder, path)


def test_adam_weight_decay_matches_original_formula():
  """Two steps against the original AdamWeightDecayOptimizer's equations in numpy."""
  w0 = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
  b0 = np.array([0.1, -0.2], np.float32)
  kernel = tf.Variable(w0, name="dense/kernel")
  bias = tf.Variable(b0, name="dense/bias")
  lr = optimization.WarmupLinearDecay(0.1, num_train_steps=10, num_warmup_steps=2)
  opt = optimization.AdamWeightDecay(lr, global_clipnorm=None)
  grads = [np.array([[0.3, -0.1], [0.2, 0.4]], np.float32), np.array([0.5, -0.5], np.float32)]
  state = {"k": (w0.copy(), 0 * w0, 0 * w0), "b": (b0.copy(), 0 * b0, 0 * b0)}
  for step in range(3):
    opt.apply_gradients([(tf.constant(grads[0]), kernel), (tf.constant(grads[1]), bias)])
    rate = 0.1 * step / 2 if step < 2 else 0.1 * (1 - step / 10)
    for key, g, decay in (("k", grads[0], True), ("b", grads[1], False)):
      p, m, v = state[key]
      m = 0.9 * m + 0.1 * g
      v = 0.999 * v + 0.001 * g * g
      upd = m / (np.sqrt(v) + 1e-6) + (0.01 * p if decay else 0)
      state[key] = (p - rate * upd, m, v)
  np.testing.assert_allclose(kernel.numpy(), state["k"][0], rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(bias.numpy(), state["b"][0], rtol=1e-6, atol=1e-7)
  assert opt.decays(kernel) and not opt.decays(bias)


def test_checkpoint_round_trip_restores_every_variable(tmp_path):
  """Pretraining checkpoint (with optimizer) -> classifier encoder: all weights."""
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  cfg = config_lib.preset("tiny", vocab_size=100, num_hidden_layers=3)
  pre = pretraining.build_pretrainer(cfg)
  opt = optimization.create_optimizer(1e-3, 10, 1)
  opt.build(pre.trainable_variables)
  for v in pre.encoder.weights:  # distinctive values everywhere
    v.assign(tf.random.normal(v.shape, seed=1))
  path = tf.train.Checkpoint(model=pre, encoder=pre.encoder, optimizer=opt).write(
      str(tmp_path / "ckpt"))
  assert sorted(pre.encoder._trackable_children()) == sorted(
      ["embeddings", "pooler", "layer_0", "layer_1", "layer_2"])
  clf = BertClassifier(cfg, 2)
  clf(clf.encoder.dummy_inputs())
  presets.load_weights(clf.encoder, path)
  names_a = [n for n, _ in checkpoints.encoder_variables(pre.encoder)]
  names_b = [n for n, _ in checkpoints.encoder_variables(clf.encoder)]
  assert names_a == names_b and len(names_a) == 5 + 3 * 16 + 2
  for (name, a), (_, b) in zip(checkpoints.encoder_variables(pre.encoder),
                               checkpoints.encoder_variables(clf.encoder)):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_pretrainer_last_block_only_at_read_positions_equals_full_encoder():
  """BertPretrainer runs its last block only at [CLS] + the masked positions:
  the logits must equal the full encoder's rows gathered afterwards (with
  padding, repeated padding positions 0 and a position in the padding)."""
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  cfg = config_lib.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=64)
  model = pretraining.build_pretrainer(cfg)
  rng = np.random.RandomState(0)
  mask = np.ones((3, 16), np.int32)
  mask[1, 9:] = 0
  feats = {"input_ids": rng.randint(0, 120, (3, 16)).astype(np.int32) * mask,
           "input_mask": mask, "segment_ids": (np.arange(16) >= 6).astype(np.int32)[None]
           .repeat(3, 0) * mask,
           "masked_lm_positions": np.array([[3, 7, 15, 0], [1, 2, 0, 0], [12, 5, 5, 13]],
                                           np.int32)}
  got = model(feats, training=False)
  enc = model.encoder(feats, training=False)
  want_mlm = model.masked_lm(enc["sequence_output"], feats["masked_lm_positions"])
  want_nsp = model.next_sentence(enc["pooled_output"])
  assert got["masked_lm_logits"].shape == (3, 4, 120)
  np.testing.assert_allclose(got["masked_lm_logits"], want_mlm, atol=1e-5)
  np.testing.assert_allclose(got["next_sentence_logits"], want_nsp, atol=1e-5)
  # And the gathered rows are not trivially equal (the positions matter).
  other = model.masked_lm(enc["sequence_output"], np.zeros((3, 4), np.int32))
  assert np.abs(other.numpy() - want_mlm.numpy()).max() > 1e-3


def _small_encoder_and_features(**overrides):
  """A 2-block H=32 encoder (``overrides``: BertConfig fields) and a batch of 2
  x 10 ids whose second row is padded after 6 tokens: (config, encoder,
  features)."""
  cfg = config_lib.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=64, **overrides)
  rng = np.random.RandomState(0)
  keras.utils.set_random_seed(0)  # the encoder's initial weights too
  mask = np.ones((2, 10), np.int32)
  mask[1, 6:] = 0
  feats = {"input_ids": rng.randint(0, 120, (2, 10)).astype(np.int32) * mask,
           "input_mask": mask, "segment_ids": np.zeros((2, 10), np.int32)}
  return cfg, BertEncoder(cfg), feats


def test_fused_qkv_serving_weights_equal_and_used():
  """FusedQKV (what every export traces with): inference inside active()
  equals the plain call bit for bit, reads the copies (zeroing them changes
  the output), and leaves training and calls outside active() alone."""
  from bert_tf.modeling import layers  # pylint: disable=g-import-not-at-top
  cfg, enc, feats = _small_encoder_and_features(hidden_dropout_prob=0.0,
                                                attention_probs_dropout_prob=0.0)
  fused = layers.FusedQKV(enc)
  assert len(fused.variables) == 2 * cfg.num_hidden_layers
  assert fused.variables[0].shape == (32, 96) and fused.variables[1].shape == (96,)
  assert len(fused.replaced) == 6 * cfg.num_hidden_layers
  specs = {k: tf.TensorSpec([None, None], tf.int32) for k in feats}
  graph = lambda: tf.function(
      lambda f: enc(f, training=False)["sequence_output"]).get_concrete_function(specs)
  plain = graph()(feats).numpy()
  eager = enc(feats, training=False)["sequence_output"].numpy()
  with fused.active():
    traced = graph()
    train = enc(feats, training=True)["sequence_output"].numpy()
  assert np.array_equal(traced(feats).numpy(), plain)  # the same products
  assert np.array_equal(train, eager)  # dropout 0: training reads the separate kernels
  assert not layers._SERVING_QKV  # pylint: disable=protected-access
  fused.variables[0].assign(tf.zeros_like(fused.variables[0]))
  # The graph reads the copies: zeroed, the output moves (by 1e-3 to 1e-2 for
  # this small random init, whose attention adds little: not a fixed 1e-2).
  assert np.abs(traced(feats).numpy() - plain).max() > 1e-4
  assert np.array_equal(graph()(feats).numpy(), plain)  # outside active(): untouched
  with pytest.raises(ValueError, match="no TransformerBlock"):
    layers.FusedQKV(enc.embeddings)


def test_fused_qkv_bfloat16_serves_in_bfloat16_without_casting_weights():
  """FusedQKV(dtype="bfloat16") (--serving_dtype=bfloat16): inside active()
  every projection of the blocks multiplies bfloat16 rows by bfloat16 copies
  read as they are stored (no per-call weight cast), the output is within
  bfloat16 rounding of float32, and the layers' policies come back."""
  from bert_tf.modeling import layers  # pylint: disable=g-import-not-at-top
  cfg, enc, feats = _small_encoder_and_features()
  plain = enc(feats, training=False)["sequence_output"].numpy()
  fused = layers.FusedQKV(enc, dtype="bfloat16")
  assert len(fused.variables) == 8 * cfg.num_hidden_layers  # qkv + 3 projections
  assert {v.dtype for v in fused.variables} == {tf.bfloat16}
  assert len(fused.replaced) == 12 * cfg.num_hidden_layers
  specs = {k: tf.TensorSpec([None, None], tf.int32) for k in feats}
  with fused.active():
    assert enc.blocks[0].compute_dtype == "bfloat16"
    graph = tf.function(lambda f: enc(f, training=False)["sequence_output"]
                        ).get_concrete_function(specs)
  assert enc.compute_dtype == enc.blocks[0].compute_dtype == "float32"  # restored
  assert not layers._SERVING_DENSE  # pylint: disable=protected-access
  ops = graph.graph.get_operations()
  matmuls = [op for op in ops if op.type == "MatMul"]
  assert all(op.get_attr("T") == tf.bfloat16 for op in matmuls)  # the pooler too
  blocks = [op for op in matmuls if "/layer_" in op.name]
  assert len(blocks) == 4 * cfg.num_hidden_layers  # qkv, attention out, in, out
  # Every block kernel goes into its MatMul straight from a bfloat16 variable.
  for op in blocks:
    assert op.inputs[1].op.type == "ReadVariableOp", op.inputs[1].op.type
  got = graph(feats).numpy().astype(np.float32)
  diff = np.abs(got - plain).max()
  assert 1e-4 < diff < 0.05 * np.abs(plain).max(), diff  # bfloat16, not float32
  assert np.array_equal(enc(feats, training=False)["sequence_output"].numpy(), plain)
  with pytest.raises(ValueError, match="float dtype"):
    layers.FusedQKV(enc, dtype="int32")
