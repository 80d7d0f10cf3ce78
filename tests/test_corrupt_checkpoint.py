"""A truncated checkpoint is named as truncated, never as "does not fit"
(issue 63 item 3: --init_checkpoint)."""

import os

import numpy as np
import pytest

from conftest import TINY_CONFIG, VOCAB, run_tool


def _cut(prefix):
  """Cuts the checkpoint's .data file in half, as a killed copy would."""
  directory = os.path.dirname(prefix)
  (data,) = [f for f in os.listdir(directory)
             if f.startswith(os.path.basename(prefix) + ".data")]
  path = os.path.join(directory, data)
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


@pytest.fixture(scope="module")
def encoder_and_checkpoint(tmp_path_factory):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
  enc = encoder_lib.BertEncoder(config_lib.BertConfig.from_json_file(TINY_CONFIG))
  enc({k: np.ones((1, 4), np.int32) for k in encoder_lib.INPUT_NAMES})
  prefix = tf.train.Checkpoint(encoder=enc).save(
      str(tmp_path_factory.mktemp("ck") / "ckpt"))
  _cut(prefix)
  return enc, prefix


def test_library_names_a_cut_object_checkpoint(encoder_and_checkpoint):
  from bert_tf import checkpoints, errors  # pylint: disable=g-import-not-at-top
  enc, prefix = encoder_and_checkpoint
  assert checkpoints.unreadable_reason(prefix).startswith("IndexError")
  with pytest.raises(errors.CorruptCheckpointError, match="truncated or unreadable") as e:
    checkpoints.load_encoder_weights(enc, prefix)
  assert e.value.path == prefix and "does not fit" not in str(e.value)


def test_library_names_a_cut_tf1_checkpoint(encoder_and_checkpoint, tmp_path):
  from bert_tf import checkpoints, errors  # pylint: disable=g-import-not-at-top
  enc, _ = encoder_and_checkpoint
  prefix = str(tmp_path / "bert_model.ckpt")
  checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(enc), prefix)
  assert checkpoints.unreadable_reason(prefix) is None
  _cut(prefix)
  with pytest.raises(errors.CorruptCheckpointError, match=r"bert_model\.ckpt is truncated"):
    checkpoints.load_encoder_weights(enc, prefix)


def test_tool_says_one_line_for_a_cut_init_checkpoint(encoder_and_checkpoint, tmp_path):
  _, prefix = encoder_and_checkpoint
  (tmp_path / "in.txt").write_text("It is a truth universally acknowledged.\n",
                                   encoding="utf-8")
  out = tmp_path / "out.jsonl"
  p = run_tool(["tools/extract_features.py", "--input_file=" + str(tmp_path / "in.txt"),
                "--output_file=" + str(out), "--vocab_file=" + VOCAB,
                "--bert_config_file=" + TINY_CONFIG, "--max_seq_length=16",
                "--init_checkpoint=" + prefix], check=False)
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert p.returncode != 0
  assert len(lines) == 1, p.stderr[-3000:]
  assert "--init_checkpoint" in lines[0] and prefix in lines[0], lines
  assert "truncated or unreadable" in lines[0] and "does not fit" not in lines[0], lines
  assert not out.exists() and not [f for f in os.listdir(tmp_path) if "out" in f]
