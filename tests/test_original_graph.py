"""Checkpoint compatibility with the original ``modeling.py`` graph, both ways."""

import json
import os

import numpy as np
import pytest

import conftest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf.tasks import pretraining
from bert_tf.modeling import models
from conftest import ROOT, run_tool

CONFIG = {"vocab_size": 120, "hidden_size": 64, "num_hidden_layers": 3,
          "num_attention_heads": 4, "intermediate_size": 96, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 32, "type_vocab_size": 2,
          "initializer_range": 0.02}


def make_case(workdir):
  rng = np.random.RandomState(0)
  b, s, p = 4, 16, 5
  lengths = np.array([16, 11, 5, 8])  # padding in the batch
  mask = (np.arange(s)[None] < lengths[:, None]).astype(np.int32)
  ids = rng.randint(1, CONFIG["vocab_size"], (b, s)).astype(np.int32) * mask
  seg = ((np.arange(s)[None] >= (lengths // 2)[:, None]) * mask).astype(np.int32)
  pos = np.stack([np.sort(rng.choice(l, p, replace=False)) for l in lengths]).astype(np.int32)
  case = {"input_ids": ids, "input_mask": mask, "segment_ids": seg,
          "masked_lm_positions": pos,
          "masked_lm_ids": rng.randint(0, CONFIG["vocab_size"], (b, p)).astype(np.int32),
          "masked_lm_weights": (rng.rand(b, p) < 0.8).astype(np.float32),
          "next_sentence_labels": np.array([[0], [1], [1], [0]], np.int32)}
  np.savez(os.path.join(workdir, "case.npz"), **case)
  with open(os.path.join(workdir, "bert_config.json"), "w") as f:
    json.dump(CONFIG, f)
  return case


def our_outputs(model, case):
  enc = model.encoder(case)
  out = model(case)
  mlm_lp = tf.nn.log_softmax(out["masked_lm_logits"]).numpy()
  num, den = models.masked_lm_loss(out["masked_lm_logits"], case["masked_lm_ids"],
                                   case["masked_lm_weights"])
  res = {"sequence_output": enc["sequence_output"].numpy(),
         "pooled_output": enc["pooled_output"].numpy(),
         "masked_lm_log_probs": mlm_lp.reshape(-1, CONFIG["vocab_size"]),
         "next_sentence_log_probs": tf.nn.log_softmax(out["next_sentence_logits"]).numpy(),
         "masked_lm_loss": float(num / (den + 1e-5)),
         "next_sentence_loss": float(models.next_sentence_loss(
             out["next_sentence_logits"], case["next_sentence_labels"])) / 4}
  for i, layer in enumerate(enc["encoder_outputs"]):
    res["layer_%d" % i] = layer.numpy()
  return res


def assert_close(ours, ref, mask):
  for k, want in ref.items():
    got = ours[k]
    if want.ndim == 3:  # [B, S, H]: padding rows are free to differ
      got, want = got * mask[..., None], want * mask[..., None]
    diff = np.abs(np.asarray(got) - want).max()
    assert diff < 1e-5, (k, diff)


@pytest.fixture(scope="module")
def original_outputs(tmp_path_factory, original_bert):
  conftest.require("tf_keras")
  workdir = str(tmp_path_factory.mktemp("orig"))
  case = make_case(workdir)
  run_tool([os.path.join(ROOT, "tests", "original_graph.py"), workdir, "init"])
  return workdir, case, dict(np.load(os.path.join(workdir, "orig_outputs.npz")))


def test_original_checkpoint_loads_with_same_outputs(original_outputs):
  workdir, case, ref = original_outputs
  cfg = config_lib.BertConfig.from_json_file(os.path.join(workdir, "bert_config.json"))
  model = pretraining.build_pretrainer(cfg)
  checkpoints.load_tf1_checkpoint(checkpoints.pretrainer_variables(model),
                                  os.path.join(workdir, "orig", "bert_model.ckpt"))
  assert_close(our_outputs(model, case), ref, case["input_mask"])


def test_our_checkpoint_loads_into_original_graph(original_outputs):
  workdir, case, _ = original_outputs
  cfg = config_lib.BertConfig.from_json_file(os.path.join(workdir, "bert_config.json"))
  model = pretraining.build_pretrainer(cfg)
  for v in model.weights:  # our own distinctive weights
    v.assign(tf.random.normal(v.shape, stddev=0.05, seed=7))
  checkpoints.save_tf1_checkpoint(checkpoints.pretrainer_variables(model),
                                  os.path.join(workdir, "ours", "bert_model.ckpt"))
  run_tool([os.path.join(ROOT, "tests", "original_graph.py"), workdir, "load"])
  ref = dict(np.load(os.path.join(workdir, "orig_from_ours.npz")))
  assert_close(our_outputs(model, case), ref, case["input_mask"])


def test_mismatched_config_names_first_variable(original_outputs):
  workdir, _, _ = original_outputs
  cfg = config_lib.BertConfig.from_dict(dict(CONFIG, intermediate_size=128))
  model = pretraining.build_pretrainer(cfg)
  with pytest.raises(checkpoints.CheckpointError,
                     match=r"layer_0/intermediate/dense/kernel has shape \[64, 96\] "
                           r"in the checkpoint but \[64, 128\]"):
    checkpoints.load_tf1_checkpoint(checkpoints.pretrainer_variables(model),
                                    os.path.join(workdir, "orig", "bert_model.ckpt"))


def test_convert_original_to_ours_keeps_outputs(original_outputs, tmp_path):
  workdir, case, ref = original_outputs
  run_tool(["tools/convert_checkpoint.py",
            "--input=" + os.path.join(workdir, "orig", "bert_model.ckpt"),
            "--bert_config_file=" + os.path.join(workdir, "bert_config.json"),
            "--output=" + str(tmp_path / "ours" / "ckpt"), "--output_format=ours"])
  cfg = config_lib.BertConfig.from_json_file(str(tmp_path / "ours" / "bert_config.json"))
  model = pretraining.build_pretrainer(cfg)
  checkpoints.restore_object_checkpoint(str(tmp_path / "ours" / "ckpt"), "test", model=model)
  assert_close(our_outputs(model, case), ref, case["input_mask"])


@pytest.mark.slow
def test_convert_hf_to_tf1_and_shrink(minilm_dir, tmp_path):
  out = str(tmp_path / "tf1" / "bert_model.ckpt")
  p = run_tool(["tools/convert_checkpoint.py", "--input=" + minilm_dir, "--output=" + out,
                "--output_format=tf1"])
  assert "encoder" in p.stdout
  cfg = checkpoints.read_hf_config(minilm_dir)
  a, b = pretraining.build_pretrainer(cfg), pretraining.build_pretrainer(cfg)
  checkpoints.load_hf_weights(a.encoder, minilm_dir)
  checkpoints.load_tf1_checkpoint(checkpoints.encoder_variables(b.encoder), out)
  for (name, x), (_, y) in zip(checkpoints.encoder_variables(a.encoder),
                               checkpoints.encoder_variables(b.encoder)):
    np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=name)
  # A fine-tuned original checkpoint carries Adam slots; --shrink drops them.
  fat = str(tmp_path / "fat" / "model.ckpt-10")
  named = [(n, v) for n, v in checkpoints.encoder_variables(a.encoder)[:4]]
  slots = [(n + s, tf.zeros_like(v)) for n, v in named for s in ("/adam_m", "/adam_v")]
  checkpoints.save_tf1_checkpoint(named + slots + [("global_step", tf.constant(10, tf.int64))], fat)
  small = str(tmp_path / "small" / "model.ckpt")
  p = run_tool(["tools/convert_checkpoint.py", "--input=" + fat, "--output=" + small, "--shrink"])
  assert "5 variables kept, 8 optimizer slots dropped" in p.stdout
  assert sorted(n for n, _ in tf.train.list_variables(small)) == sorted(
      [n for n, _ in named] + ["global_step"])
