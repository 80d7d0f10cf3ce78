"""What a new user meets first: one clear line per problem, a report of what
was written, no TensorFlow noise (issue "a newcomer's first hour")."""

import os

import numpy as np
import pytest

from conftest import MOVIE_DIR, TINY_CONFIG, VOCAB, run_tool

NOISE = ("I0000", "E0000", "W0000", "cuInit", "absl::InitializeLog", "oneDNN",
         "Traceback", "Value in checkpoint")


def _lines(text):
  return [l for l in text.splitlines() if l.strip()]


def _encoder_checkpoint(path, hidden_size):
  """An encoder checkpoint of ours (the tiny config, or another width)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
  cfg = config_lib.BertConfig.from_json_file(TINY_CONFIG)
  cfg = config_lib.BertConfig(**dict(cfg.to_dict(), hidden_size=hidden_size,
                                     num_attention_heads=2))
  enc = encoder_lib.BertEncoder(cfg)
  enc({k: np.ones((1, 4), np.int32) for k in encoder_lib.INPUT_NAMES})
  return tf.train.Checkpoint(encoder=enc).save(os.path.join(path, "ckpt"))


@pytest.mark.slow  # three tool start-ups
def test_vocab_checkpoint_mismatch_and_success_report(tmp_path):
  small_vocab = tmp_path / "vocab5000.txt"
  with open(VOCAB, encoding="utf-8") as f:
    small_vocab.write_text("".join(f.readlines()[:5000]), encoding="utf-8")
  # 1. A 5,000-line vocab for a 30,522-token model: one line with both numbers.
  p = run_tool(["tools/run_classifier.py", "--task_name=sst-2", "--data_dir=" + MOVIE_DIR,
                "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + str(small_vocab),
                "--do_train", "--output_dir=" + str(tmp_path / "cls")], check=False, fresh=True)
  assert p.returncode != 0
  assert _lines(p.stderr) == [l for l in _lines(p.stderr) if "5000 tokens" in l], p.stderr
  assert len(_lines(p.stderr)) == 1 and "30522" in p.stderr, p.stderr
  assert not any(n in p.stderr + p.stdout for n in NOISE), p.stderr
  # 2. A checkpoint of another width than --bert_config_file: one line.
  (tmp_path / "in.txt").write_text("Who was Jim Henson ? ||| Jim Henson was a puppeteer\n"
                                   "It is a truth universally acknowledged.\n", encoding="utf-8")
  wrong = _encoder_checkpoint(str(tmp_path / "wrong"), hidden_size=64)
  common = ["tools/extract_features.py", "--input_file=" + str(tmp_path / "in.txt"),
            "--output_file=" + str(tmp_path / "out.jsonl"), "--vocab_file=" + VOCAB,
            "--bert_config_file=" + TINY_CONFIG, "--layers=-1,-2", "--max_seq_length=32"]
  p = run_tool(common + ["--init_checkpoint=" + wrong], check=False, fresh=True)
  assert p.returncode != 0
  assert len(_lines(p.stderr)) == 1, p.stderr[-3000:]
  assert "does not fit the model" in p.stderr and "--bert_config_file" in p.stderr
  assert not any(n in p.stderr for n in NOISE), p.stderr[-3000:]
  assert not os.path.exists(tmp_path / "out.jsonl")
  # 3. Success says what it wrote.
  good = _encoder_checkpoint(str(tmp_path / "good"), hidden_size=128)
  p = run_tool(common + ["--init_checkpoint=" + good], fresh=True)
  assert p.stderr.strip() == "", p.stderr[-3000:]
  (line,) = _lines(p.stdout)
  assert line.startswith("extract_features: wrote 2 examples x 2 layers (-1,-2) to "
                         + str(tmp_path / "out.jsonl")), line
  assert len(open(tmp_path / "out.jsonl").read().splitlines()) == 2


def test_tools_load_tensorflow_without_keras_optional_imports():
  """Keras imports scikit-learn and matplotlib when installed (here, the
  test references); a tool's TensorFlow import skips them (~1.4 s of a ~4.5 s
  start), and they import as usual afterwards (bert-tune's PNG)."""
  import importlib  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from bert_tf.tools import _startup  # pylint: disable=g-import-not-at-top
  sys.modules.pop("colorsys", None)
  with _startup.without_optional_imports(("colorsys",)):
    with pytest.raises(ModuleNotFoundError):
      importlib.import_module("colorsys")
  assert importlib.import_module("colorsys").hsv_to_rgb(0, 0, 1) == (1, 1, 1)
  p = run_tool(["-c", "import sys\nfrom bert_tf.tools import _startup\n"
                "_startup.import_tensorflow([])\n"
                "print('sklearn' in sys.modules, 'matplotlib' in sys.modules)\n"
                "import matplotlib.pyplot, sklearn.metrics\nprint('imported')"], fresh=True)
  assert p.stdout.split() == ["False", "False", "imported"], p.stdout + p.stderr
