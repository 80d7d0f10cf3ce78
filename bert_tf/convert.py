"""Converts BERT weights between formats (tools/convert_checkpoint.py).

Sits above :mod:`bert_tf.checkpoints` (name tables, readers, writers) and
:mod:`bert_tf.modeling` (it builds the model the weights go through).
Source: google-research/bert has no converter; the TF1 names are those of its
``modeling.py`` / ``run_pretraining.py``.
"""

import os

import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf.modeling import models


def convert_checkpoint(src, dst, output_format, bert_config_file=None):
  """Converts BERT weights between the supported formats.

  Args:
    src: a Hugging Face BERT directory, an original TF1 checkpoint, or one
      of ours (prefix or directory).
    dst: output prefix (TF1 format: e.g. ``out/bert_model.ckpt``; ours: a
      checkpoint prefix such as ``out/ckpt``). ``bert_config.json`` is written
      beside it.
    output_format: ``ours`` or ``tf1``.
    bert_config_file: required unless ``src`` is a Hugging Face directory.

  Returns:
    a string describing what was written. Encoder weights always; the
    pretraining heads (``cls/...``) when the source has them. Optimizer
    slots are never copied (use :func:`shrink_tf1_checkpoint` for TF1 -> TF1).

  Raises:
    checkpoints.CheckpointError / ConfigError: naming the file and the problem.
  """
  if output_format not in ("ours", "tf1"):
    raise checkpoints.CheckpointError(
        "output_format must be 'ours' or 'tf1', got %r" % output_format,
        argument="output_format")
  hf = checkpoints.is_hf_dir(src)
  if hf:
    config = checkpoints.read_hf_config(src)
  elif bert_config_file:
    config = config_lib.BertConfig.from_json_file(bert_config_file)
  else:
    raise checkpoints.CheckpointError("bert_config_file is required for %r" % src,
                                      argument="bert_config_file")
  model = models.build_pretrainer(config)
  with_heads = False
  tf1_names = {} if hf else checkpoints.tf1_variable_names(src)
  if hf:
    checkpoints.load_hf_weights(model.encoder, src)
  elif "bert/embeddings/word_embeddings" in tf1_names:
    with_heads = "cls/predictions/output_bias" in tf1_names
    checkpoints.load_tf1_checkpoint(checkpoints.pretrainer_variables(model), src,
                        allow_missing=() if with_heads else ("cls/",))
  else:
    try:
      checkpoints.restore_object_checkpoint(src, "--input", model=model)
      with_heads = True
    except checkpoints.CheckpointError:
      checkpoints.restore_object_checkpoint(src, "--input", encoder=model.encoder)
  named = checkpoints.pretrainer_variables(model) if with_heads else checkpoints.encoder_variables(model.encoder)
  config.to_json_file(os.path.join(os.path.dirname(os.path.abspath(dst)),
                                   "bert_config.json"))
  if output_format == "tf1":
    checkpoints.save_tf1_checkpoint(named, dst)
  else:
    objects = {"encoder": model.encoder}
    if with_heads:
      objects["model"] = model
    tf.train.Checkpoint(**objects).write(dst)
  return "%d variables (%s) -> %s [%s]" % (
      len(named), "encoder + pretraining heads" if with_heads else "encoder",
      dst, output_format)
