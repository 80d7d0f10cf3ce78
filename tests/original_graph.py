"""Runs the ORIGINAL google-research/bert graph (bert-tensorflow 1.0.4).

Usage: python original_graph.py WORKDIR {init|load}
  init: random-init the original BertModel + pretraining heads, save
        WORKDIR/orig/bert_model.ckpt, write WORKDIR/orig_outputs.npz
  load: restore WORKDIR/ours/bert_model.ckpt into the original graph and write
        WORKDIR/orig_from_ours.npz
Inputs and config come from WORKDIR/case.npz and WORKDIR/bert_config.json.

The package is copied to WORKDIR/pkg/bert and patched, never vendored: TF1
imports through ``tensorflow.compat.v1``, ``tf.layers`` from tf-keras
(TF_USE_LEGACY_KERAS=1), and a stand-in for the removed
``tf.contrib.layers.layer_norm`` creating ``LayerNorm/beta`` and
``LayerNorm/gamma`` with epsilon 1e-12, as contrib did.
"""

import importlib.util
import os
import shutil
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"

LAYER_NORM = '''
def layer_norm(input_tensor, name=None):
  """Stand-in for contrib layer_norm (same variables, epsilon 1e-12)."""
  with tf.variable_scope(name, default_name="LayerNorm"):
    dim = input_tensor.shape[-1]
    beta = tf.get_variable("beta", [dim], initializer=tf.zeros_initializer())
    gamma = tf.get_variable("gamma", [dim], initializer=tf.ones_initializer())
    mean, variance = tf.nn.moments(input_tensor, [-1], keep_dims=True)
    return (input_tensor - mean) * tf.rsqrt(variance + 1e-12) * gamma + beta
'''


def patched_package(workdir):
  src = os.path.dirname(importlib.util.find_spec("bert").origin)
  dst = os.path.join(workdir, "pkg", "bert")
  if not os.path.exists(dst):
    shutil.copytree(src, dst)
    path = os.path.join(dst, "modeling.py")
    code = open(path).read()
    code = code.replace("from tensorflow.contrib import layers as contrib_layers\n", "")
    start = code.index("def layer_norm(input_tensor, name=None):")
    end = code.index("def layer_norm_and_dropout(")
    code = code[:start] + LAYER_NORM.lstrip() + "\n\n" + code[end:]
    open(path, "w").write(code)
  sys.path.insert(0, os.path.join(workdir, "pkg"))


def main(workdir, mode):
  patched_package(workdir)
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  from absl import flags  # pylint: disable=g-import-not-at-top
  from bert import modeling  # pylint: disable=g-import-not-at-top
  import bert.run_pretraining as rp  # pylint: disable=g-import-not-at-top
  flags.FLAGS.mark_as_parsed()
  case = np.load(os.path.join(workdir, "case.npz"))
  config = modeling.BertConfig.from_json_file(os.path.join(workdir, "bert_config.json"))
  tf.set_random_seed(1234)
  input_ids = tf.constant(case["input_ids"])
  model = modeling.BertModel(config=config, is_training=False, input_ids=input_ids,
                             input_mask=tf.constant(case["input_mask"]),
                             token_type_ids=tf.constant(case["segment_ids"]),
                             use_one_hot_embeddings=False)
  mlm_loss, _, mlm_log_probs = rp.get_masked_lm_output(
      config, model.get_sequence_output(), model.get_embedding_table(),
      tf.constant(case["masked_lm_positions"]), tf.constant(case["masked_lm_ids"]),
      tf.constant(case["masked_lm_weights"]))
  nsp_loss, _, nsp_log_probs = rp.get_next_sentence_output(
      config, model.get_pooled_output(), tf.constant(case["next_sentence_labels"]))
  fetch = {"sequence_output": model.get_sequence_output(),
           "pooled_output": model.get_pooled_output(),
           "masked_lm_log_probs": mlm_log_probs, "next_sentence_log_probs": nsp_log_probs,
           "masked_lm_loss": mlm_loss, "next_sentence_loss": nsp_loss}
  for i, layer in enumerate(model.get_all_encoder_layers()):
    fetch["layer_%d" % i] = layer
  saver = tf.train.Saver()
  with tf.Session() as sess:
    if mode == "init":
      sess.run(tf.global_variables_initializer())
      os.makedirs(os.path.join(workdir, "orig"), exist_ok=True)
      saver.save(sess, os.path.join(workdir, "orig", "bert_model.ckpt"))
      out = "orig_outputs.npz"
    else:
      saver.restore(sess, os.path.join(workdir, "ours", "bert_model.ckpt"))
      out = "orig_from_ours.npz"
    np.savez(os.path.join(workdir, out), **sess.run(fetch))


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
