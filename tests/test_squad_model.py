"""BertQuestionAnswerer (original ``run_squad.create_model``) against references.

* Hugging Face ``BertForQuestionAnswering`` built from the real
  all-MiniLM-L6-v2 weights with a seeded random ``qa_outputs`` head, saved
  with ``save_pretrained`` and loaded by ``from_preset``: start/end logits
  within 1e-5 on real SQuAD question/context pairs.
* The original TF1 names (``bert/...`` + ``cls/squad/output_weights`` [2, H],
  ``cls/squad/output_bias`` [2]): write, reload, identical outputs.
* The ORIGINAL ``run_squad.create_model`` graph (bert-tensorflow 1.0.4,
  patched as ``tests/original_squad.py`` does): its random-init checkpoint
  loaded by ``from_preset`` gives its logits, and our weights written under
  the TF1 names restore into its ``tf.train.Saver`` (every name and shape
  exact) and give ours.
* ``.keras`` save/load, serialization, the span loss against the original's
  one-hot formula, mixed precision.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import tokenization
from bert_tf.modeling import BertQuestionAnswerer
from bert_tf.modeling import models
from bert_tf.modeling import presets
from conftest import SQUAD_V1_DIR, VOCAB, require, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))

# Runs in tests/ (imports original_squad for the patched package copy).
ORIGINAL_CREATE_MODEL = r"""
import sys
import original_squad  # sets TF_USE_LEGACY_KERAS before TensorFlow loads
workdir = sys.argv[1]
original_squad.patched_package(workdir)
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
from bert import modeling
from bert import run_squad as rs
rs.FLAGS.mark_as_parsed()
case = np.load(workdir + "/case.npz")
config = modeling.BertConfig.from_json_file(workdir + "/bert_config.json")
tf.set_random_seed(1234)
start, end = rs.create_model(config, False, tf.constant(case["input_ids"]),
                             tf.constant(case["input_mask"]),
                             tf.constant(case["segment_ids"]), False)
saver = tf.train.Saver()
out = {}
with tf.Session() as sess:
  sess.run(tf.global_variables_initializer())
  saver.save(sess, workdir + "/orig/model.ckpt")
  out["init_start"], out["init_end"] = sess.run([start, end])
  saver.restore(sess, workdir + "/ours/model.ckpt")
  out["ours_start"], out["ours_end"] = sess.run([start, end])
  out["names"] = np.array(sorted(v.op.name for v in tf.global_variables()))
np.savez(workdir + "/original.npz", **out)
"""


def squad_pairs(n=4):
  """(question, context) of the first question of each of the first ``n``
  paragraphs of the bundled SQuAD v1 dev slice (``data/squad_v1``)."""
  with open(os.path.join(SQUAD_V1_DIR, "dev.json"), encoding="utf-8") as f:
    data = json.load(f)["data"]
  out = [(para["qas"][0]["question"], para["context"])  # varied contexts
         for article in data for para in article["paragraphs"]][:n]
  assert len(out) == n, (len(out), n)
  return out


def pack(vocab_file, pairs, seq_len=96):
  """``[CLS] question [SEP] context [SEP]`` (context truncated), padded:
  int32 [B, S] ``input_ids``, ``input_mask``, ``segment_ids``."""
  tok = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  ids, mask, seg = [], [], []
  for i, (q, c) in enumerate(pairs):
    qt = tok.tokenize(q)[:24]
    budget = seq_len - len(qt) - 3 - (20 if i == 1 else 0)  # one shorter row: padding
    ct = tok.tokenize(c)[:budget]
    tokens = ["[CLS]"] + qt + ["[SEP]"] + ct + ["[SEP]"]
    s = [0] * (len(qt) + 2) + [1] * (len(ct) + 1)
    row = tok.convert_tokens_to_ids(tokens)
    pad = seq_len - len(row)
    ids.append(row + [0] * pad)
    mask.append([1] * len(row) + [0] * pad)
    seg.append(s + [0] * pad)
  return {k: np.asarray(v, np.int32) for k, v in
          (("input_ids", ids), ("input_mask", mask), ("segment_ids", seg))}


def tiny_config(**kw):
  return config_lib.BertConfig(vocab_size=kw.pop("vocab_size", 99), hidden_size=32,
                               num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64, **kw)


def random_inputs(batch=3, seq=12, vocab=99, seed=0):
  rng = np.random.RandomState(seed)
  mask = np.ones((batch, seq), np.int32)
  mask[1, seq // 2:] = 0
  return {"input_ids": rng.randint(1, vocab, (batch, seq)).astype(np.int32) * mask,
          "input_mask": mask,
          "segment_ids": (np.arange(seq) >= 4).astype(np.int32)[None].repeat(batch, 0) * mask}


def randomize(model, seed=1):
  """Distinctive values in every weight (so a missed load shows)."""
  for i, v in enumerate(model.weights):
    v.assign(tf.random.stateless_normal(v.shape, [seed, i], stddev=0.05))


def test_hf_bert_for_question_answering_parity(minilm_dir, tmp_path):
  """Real MiniLM encoder + a seeded random qa_outputs head, via save_pretrained."""
  torch = require("torch")
  transformers = require("transformers")
  torch.manual_seed(0)
  ref = transformers.BertForQuestionAnswering.from_pretrained(minilm_dir).eval()
  with torch.no_grad():  # a head that is not the default init
    ref.qa_outputs.weight.normal_(0.0, 0.1)
    ref.qa_outputs.bias.uniform_(-1.0, 1.0)
  hf_dir = str(tmp_path / "hf_squad")
  ref.save_pretrained(hf_dir)
  # The tokenizer's vocab beside the weights (as a real HF model directory).
  with open(os.path.join(minilm_dir, "vocab.txt"), "rb") as f:
    open(os.path.join(hf_dir, "vocab.txt"), "wb").write(f.read())

  model = BertQuestionAnswerer.from_preset(hf_dir)
  assert model.config.hidden_act == "gelu_exact"  # HF "gelu" = erf form
  np.testing.assert_array_equal(model.span_head.output_weights.numpy(),
                                ref.qa_outputs.weight.detach().numpy())
  x = pack(os.path.join(hf_dir, "vocab.txt"), squad_pairs())
  assert x["input_mask"].sum(1).min() < x["input_mask"].shape[1]  # padding
  ours = model(x)
  with torch.no_grad():
    r = ref(input_ids=torch.tensor(x["input_ids"]).long(),
            attention_mask=torch.tensor(x["input_mask"]).long(),
            token_type_ids=torch.tensor(x["segment_ids"]).long())
  for key, want in (("start_logits", r.start_logits), ("end_logits", r.end_logits)):
    got = ours[key].numpy()
    assert got.dtype == np.float32 and got.shape == x["input_ids"].shape
    diff = np.abs(got - want.numpy()).max()  # padded positions too
    assert diff <= 1e-5, (key, diff)
  # The head matters: a different head gives different logits.
  assert np.abs(ours["start_logits"].numpy() - ours["end_logits"].numpy()).max() > 0.1

  # The older PyTorch layout (pytorch_model.bin, no safetensors): same model.
  bin_dir = tmp_path / "hf_bin"
  bin_dir.mkdir()
  torch.save(ref.state_dict(), str(bin_dir / "pytorch_model.bin"))
  with open(os.path.join(hf_dir, "config.json"), "rb") as f:
    (bin_dir / "config.json").write_bytes(f.read())
  from_bin = BertQuestionAnswerer.from_preset(str(bin_dir))
  np.testing.assert_array_equal(from_bin(x)["start_logits"].numpy(),
                                ours["start_logits"].numpy())

  # --init_checkpoint path of the task: same loader, same weights.
  again = models.build_question_answerer(model.config)
  what = presets.load_weights(again, hf_dir, models.QUESTION_ANSWERER_TASK)
  assert "SQuAD head" in what
  np.testing.assert_array_equal(again(x)["end_logits"].numpy(),
                                ours["end_logits"].numpy())


def test_hf_encoder_only_dir_keeps_head_init(minilm_dir):
  """A plain BertModel directory (sentence encoder): encoder loaded, head initialized."""
  model = BertQuestionAnswerer.from_preset(minilm_dir)
  w = model.span_head.output_weights.numpy()
  assert w.shape == (2, 384) and 0.005 < w.std() < 0.03  # TruncatedNormal(0.02)
  np.testing.assert_array_equal(model.span_head.output_bias.numpy(), [0.0, 0.0])


def test_tf1_names_round_trip(tmp_path):
  """Written under the original run_squad.py names, reloaded by from_preset."""
  cfg = tiny_config()
  model = models.build_question_answerer(cfg)
  randomize(model)
  named = checkpoints.question_answerer_variables(model)
  names = [n for n, _ in named]
  assert names[-2:] == ["cls/squad/output_weights", "cls/squad/output_bias"]
  assert dict((n, tuple(v.shape)) for n, v in named)["cls/squad/output_weights"] == (2, 32)
  assert len(names) == len(model.weights) == 5 + 2 * 16 + 2 + 2
  run = tmp_path / "orig"
  prefix = checkpoints.save_tf1_checkpoint(named, str(run / "model.ckpt-7"))
  cfg.to_json_file(str(run / "bert_config.json"))
  shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  assert shapes["cls/squad/output_bias"] == [2]
  # Told a SQuAD model by its own names (the export's --from_preset task).
  from bert_tf.export import from_preset  # pylint: disable=g-import-not-at-top
  assert from_preset.preset_kind(presets.get_preset_loader(prefix)) == "squad"
  x = random_inputs()
  want = model(x)
  for loaded in (BertQuestionAnswerer.from_preset(prefix),
                 BertQuestionAnswerer.from_preset(prefix, config=cfg)):
    got = loaded(x)
    for k in ("start_logits", "end_logits"):
      np.testing.assert_array_equal(got[k].numpy(), want[k].numpy())
  # The task's loader too (bert/ + cls/squad).
  other = models.build_question_answerer(cfg)
  assert "SQuAD head" in presets.load_weights(other, prefix, models.QUESTION_ANSWERER_TASK)
  np.testing.assert_array_equal(other(x)["start_logits"].numpy(),
                                want["start_logits"].numpy())
  # A pretrained bert_model.ckpt (no cls/squad): encoder only, head initialized.
  enc_only = checkpoints.save_tf1_checkpoint(
      checkpoints.encoder_variables(model.encoder), str(tmp_path / "pre" / "bert_model.ckpt"))
  fresh = models.build_question_answerer(cfg)
  head0 = fresh.span_head.output_weights.numpy().copy()
  what = presets.load_weights(fresh, enc_only, models.QUESTION_ANSWERER_TASK)
  assert "SQuAD head" not in what
  np.testing.assert_array_equal(fresh.span_head.output_weights.numpy(), head0)
  np.testing.assert_array_equal(fresh.encoder.word_embeddings.numpy(),
                                model.encoder.word_embeddings.numpy())
  # Half a head is an error naming the missing variable.
  half = checkpoints.save_tf1_checkpoint(named[:-1], str(tmp_path / "half" / "model.ckpt"))
  with pytest.raises(checkpoints.CheckpointError, match="cls/squad/output_bias"):
    presets.load_weights(models.build_question_answerer(cfg), half,
                         models.QUESTION_ANSWERER_TASK)


def test_original_run_squad_create_model_both_ways(tmp_path, original_bert):
  """Original graph <-> ours through TF1 checkpoints (tanh GELU on both sides)."""
  del original_bert  # the fixture checks the package is installed
  cfg = tiny_config()
  assert cfg.hidden_act == "gelu"  # the original's tanh form
  work = tmp_path / "work"
  work.mkdir()
  cfg.to_json_file(str(work / "bert_config.json"))
  x = random_inputs(batch=3, seq=12)
  np.savez(str(work / "case.npz"), **x)
  ours = models.build_question_answerer(cfg)
  randomize(ours, seed=3)
  checkpoints.save_tf1_checkpoint(checkpoints.question_answerer_variables(ours),
                                  str(work / "ours" / "model.ckpt"))
  run_tool(["-c", ORIGINAL_CREATE_MODEL, str(work)], cwd=HERE)
  ref = np.load(str(work / "original.npz"))
  # Every variable of the original graph is one of ours, by name.
  assert sorted(ref["names"].tolist()) == sorted(
      n for n, _ in checkpoints.question_answerer_variables(ours))
  # Ours -> original: same logits.
  want = ours(x)
  np.testing.assert_allclose(ref["ours_start"], want["start_logits"].numpy(), atol=1e-5)
  np.testing.assert_allclose(ref["ours_end"], want["end_logits"].numpy(), atol=1e-5)
  # Original -> ours (from_preset of a fine-tuned-style model.ckpt): same logits.
  cfg.to_json_file(str(work / "orig" / "bert_config.json"))  # the original's run layout
  loaded = BertQuestionAnswerer.from_preset(str(work / "orig"))
  got = loaded(x)
  np.testing.assert_allclose(got["start_logits"].numpy(), ref["init_start"], atol=1e-5)
  np.testing.assert_allclose(got["end_logits"].numpy(), ref["init_end"], atol=1e-5)
  assert np.abs(ref["init_start"] - ref["init_end"]).max() > 1e-3  # two real rows


def test_our_checkpoints_and_keras_file(tmp_path):
  cfg = tiny_config()
  model = models.build_question_answerer(cfg)
  randomize(model)
  x = random_inputs()
  want = model(x)
  # .keras: identical outputs, same class, config round trip.
  path = str(tmp_path / "qa.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  assert type(loaded) is BertQuestionAnswerer and loaded.config == cfg
  for k in ("start_logits", "end_logits"):
    np.testing.assert_array_equal(loaded(x)[k].numpy(), want[k].numpy())
  again = BertQuestionAnswerer.from_config(model.get_config())
  assert again.config == cfg and len(again.weights) == len(model.weights)
  via_preset = BertQuestionAnswerer.from_preset(path)
  np.testing.assert_array_equal(via_preset(x)["end_logits"].numpy(),
                                want["end_logits"].numpy())
  # Our object checkpoint (what the runner writes): whole model.
  run = tmp_path / "run"
  tf.train.Checkpoint(model=model, encoder=model.encoder).write(str(run / "ckpt-3"))
  cfg.to_json_file(str(run / "bert_config.json"))
  fresh = models.build_question_answerer(cfg)
  assert "SQuAD head" in presets.load_weights(
      fresh, str(run / "ckpt-3"), models.QUESTION_ANSWERER_TASK)
  np.testing.assert_array_equal(fresh(x)["start_logits"].numpy(),
                                want["start_logits"].numpy())
  # A classifier checkpoint: only its encoder.
  clf = models.build_classifier(cfg, 3)
  randomize(clf, seed=7)
  tf.train.Checkpoint(model=clf, encoder=clf.encoder).write(str(tmp_path / "clf" / "ckpt-1"))
  qa = models.build_question_answerer(cfg)
  head0 = qa.span_head.output_weights.numpy().copy()
  what = presets.load_weights(qa, str(tmp_path / "clf" / "ckpt-1"),
                              models.QUESTION_ANSWERER_TASK)
  assert "SQuAD head" not in what
  np.testing.assert_array_equal(qa.span_head.output_weights.numpy(), head0)
  np.testing.assert_array_equal(qa.encoder.word_embeddings.numpy(),
                                clf.encoder.word_embeddings.numpy())


def test_head_is_the_original_formula_and_loss():
  """logits = sequence_output @ W^T + b; the loss is the original's one-hot form."""
  cfg = tiny_config()
  model = models.build_question_answerer(cfg)
  randomize(model)
  x = random_inputs()
  seq = model.encoder(x)["sequence_output"].numpy()
  w = model.span_head.output_weights.numpy()
  b = model.span_head.output_bias.numpy()
  logits = seq @ w.T + b  # [B, S, 2]
  out = model(x)
  np.testing.assert_allclose(out["start_logits"].numpy(), logits[..., 0], atol=1e-5)
  np.testing.assert_allclose(out["end_logits"].numpy(), logits[..., 1], atol=1e-5)
  start = np.array([3, 0, 7], np.int32)
  end = np.array([5, 0, 11], np.int32)
  got = models.span_loss(out["start_logits"], out["end_logits"], start, end).numpy()

  def original(lg, pos):  # run_squad.model_fn's compute_loss, per example
    lg = lg.astype(np.float64)
    logp = lg - lg.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    return -(np.eye(lg.shape[1])[pos] * logp).sum(-1)
  want = (original(out["start_logits"].numpy(), start) +
          original(out["end_logits"].numpy(), end)) / 2
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_mixed_precision_logits_are_float32():
  keras.config.set_dtype_policy("mixed_bfloat16")
  try:
    model = models.build_question_answerer(tiny_config())
    out = model(random_inputs())
    assert out["start_logits"].dtype == tf.float32
    assert out["end_logits"].dtype == tf.float32
    assert model.span_head.output_weights.dtype == tf.float32
  finally:
    keras.config.set_dtype_policy("float32")
