"""The main job's chain on small real slices: every stage through the real tools.

raw text -> TFRecords -> pretraining (stop + resume) -> fine-tuning from our
checkpoint and from the real MiniLM weights -> SavedModel -> predictions in a
fresh process importing only tensorflow and tensorflow_text, equal to the
in-process model's.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks import classification as classifier
from bert_tf import preprocessing
from bert_tf.data import classifier_data
from conftest import (DATA, MOVIE_DIR, SAMPLE_TEXT, TINY_CONFIG, VOCAB, copy_slice,
                      read_records, run_tool)

pytestmark = pytest.mark.slow

SENTENCES = ["A gorgeous, witty, seductive movie.",
             "The plot is a mess and the acting is even worse.", "", "   ",
             "It's not a masterpiece, but it is never boring. " * 40,
             "caf\u00e9 \u535a\u63a8 \x00\ufffd na\u00efve"]

FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
assert not any(m.split('.')[0] in ('bert_tf', 'export') for m in sys.modules)
fn = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
args = json.loads(sys.argv[2])
out = fn(**{k: tf.constant(v) for k, v in args.items()})
print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(),
                  "labels": [l.decode() for l in out["labels"].numpy()],
                  "label_ids": out["label_ids"].numpy().tolist()}))
"""


def in_process_probabilities(output_dir, texts_a, texts_b=None):
  """Rebuilds the fine-tuned model from its checkpoint; the same preprocessing."""
  run = json.load(open(os.path.join(output_dir, classifier.RUN_CONFIG)))
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  cfg = config_lib.BertConfig.from_json_file(os.path.join(output_dir, "bert_config.json"))
  model = classifier.build_classifier(cfg, len(run["labels"]))
  tf.train.Checkpoint(model=model).read(
      tf.train.latest_checkpoint(output_dir)).expect_partial(
      ).assert_existing_objects_matched()
  pre = preprocessing.BertPreprocessor(os.path.join(output_dir, "vocab.txt"),
                                       run["do_lower_case"], run["max_seq_length"])
  feats = preprocessing.trim_to_longest(
      pre(tf.constant(texts_a), None if texts_b is None else tf.constant(texts_b)))
  return tf.nn.softmax(model(feats, training=False)).numpy()


def fresh_process_predict(export_path, inputs):
  p = run_tool(["-c", FRESH_PROCESS, export_path, json.dumps(inputs)])
  return json.loads(p.stdout.strip().splitlines()[-1])


def test_pretrain_finetune_export_chain(tmp_path):
  data = str(tmp_path / "pt.tfrecord")
  run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
            "--output_file=" + data, "--vocab_file=" + VOCAB, "--dupe_factor=5",
            "--max_seq_length=64", "--max_predictions_per_seq=10"])
  records = read_records(data)
  assert len(records) > 50
  assert all(r["input_ids"].shape == (64,) for r in records)

  pt_dir = str(tmp_path / "pretrain")
  common = ["tools/run_pretraining.py", "--input_file=" + data, "--output_dir=" + pt_dir,
            "--bert_config_file=" + TINY_CONFIG, "--do_train", "--train_batch_size=8",
            "--max_seq_length=64", "--max_predictions_per_seq=10",
            "--learning_rate=1e-3", "--num_warmup_steps=5", "--num_train_steps=40",
            "--iterations_per_loop=10", "--save_checkpoints_steps=10"]
  first = run_tool(common + ["--stop_at_step=20"])
  assert "step 20/40" in first.stdout and "step 30/40" not in first.stdout
  second = run_tool(common + ["--do_eval", "--max_eval_steps=5"])
  assert "resumed from" in second.stdout and "at step 20" in second.stdout
  assert "step 40/40" in second.stdout and "step 10/40" not in second.stdout
  losses = [float(l.split("masked_lm_loss=")[1].split()[0])
            for l in (first.stdout + second.stdout).splitlines() if "masked_lm_loss=" in l]
  assert losses[-1] < losses[0] - 0.5, losses  # it learns
  results = dict(l.split(" = ") for l in
                 open(os.path.join(pt_dir, "eval_results.txt")).read().splitlines())
  assert set(results) == {"global_step", "masked_lm_accuracy", "masked_lm_loss",
                          "next_sentence_accuracy", "next_sentence_loss"}
  assert results["global_step"] == "40"
  assert tf.train.latest_checkpoint(pt_dir).endswith("ckpt-40")

  # Fine-tune from our pretraining run on a real slice (its directory as it
  # is: the config is the bert_config.json the run wrote); export.
  sst = str(tmp_path / "sst")
  copy_slice(MOVIE_DIR + "/train.tsv", sst + "/train.tsv", every=40)
  copy_slice(MOVIE_DIR + "/dev.tsv", sst + "/dev.tsv", every=20)
  ft_dir, export_dir = str(tmp_path / "ft"), str(tmp_path / "export")
  p = run_tool(["tools/run_classifier.py", "--task_name=sst-2", "--do_train", "--do_eval",
                "--data_dir=" + sst, "--vocab_file=" + VOCAB,
                "--init_checkpoint=" + pt_dir, "--max_seq_length=64", "--train_batch_size=16",
                "--num_train_epochs=1", "--output_dir=" + ft_dir, "--export_dir=" + export_dir])
  # The default optimizer with 1 warm-up step: one line names the risk and the fix.
  (warning,) = [l for l in p.stdout.splitlines() if l.startswith("warning: --optimizer")]
  assert "1 warm-up steps" in warning and "--optimizer=adamw " in warning, warning
  ev = open(os.path.join(ft_dir, "eval_results.txt")).read()
  assert "eval_accuracy = " in ev and "global_step = 14" in ev
  export_path = os.path.join(export_dir, "1")
  assert os.path.exists(os.path.join(export_path, "saved_model.pb"))
  # The vocab asset is the run directory's copy (the export is built from the
  # run's own files): the same bytes as --vocab_file.
  with open(os.path.join(export_path, "assets", "vocab.txt"), "rb") as f, \
       open(VOCAB, "rb") as g:
    assert f.read() == g.read()
  got = fresh_process_predict(export_path, {"text": SENTENCES})
  want = in_process_probabilities(ft_dir, SENTENCES)
  np.testing.assert_allclose(np.array(got["probabilities"]), want, atol=1e-6)
  assert got["labels"] == [str(i) for i in want.argmax(-1)]


def test_minilm_pair_task_export_matches(minilm_dir, tmp_path):
  """Real weights, two-segment task (dialog reply pairs), export with two inputs."""
  src = os.path.join(DATA, "dialog_reply_pairs", "train.tsv")
  d = str(tmp_path / "pairs")
  copy_slice(src, d + "/train.tsv", every=15, limit=96)
  copy_slice(src.replace("train", "dev"), d + "/dev.tsv", every=10)
  ft_dir, export_dir = str(tmp_path / "ft"), str(tmp_path / "export")
  run_tool(["tools/run_classifier.py", "--task_name=pairs", "--do_train", "--do_eval",
            "--data_dir=" + d, "--init_checkpoint=" + minilm_dir, "--max_seq_length=64",
            "--train_batch_size=16", "--num_train_epochs=1",
            "--output_dir=" + ft_dir, "--export_dir=" + export_dir])
  a = ["no, no, it's my fault", "gosh, if only we could find kat a boyfriend...", ""]
  b = ["yeah.", "let me see what i can do.", "a reply " * 80]
  got = fresh_process_predict(os.path.join(export_dir, "1"), {"text_a": a, "text_b": b})
  np.testing.assert_allclose(np.array(got["probabilities"]),
                             in_process_probabilities(ft_dir, a, b), atol=1e-6)


def test_bad_classifier_inputs(tmp_path):
  base = ["tools/run_classifier.py", "--do_train", "--vocab_file=" + VOCAB,
          "--bert_config_file=" + TINY_CONFIG, "--output_dir=" + str(tmp_path / "o")]
  p = run_tool(base + ["--task_name=nope", "--data_dir=" + MOVIE_DIR], check=False)
  assert p.returncode != 0 and "unknown task 'nope'" in p.stderr
  bad = tmp_path / "bad"
  bad.mkdir()
  (bad / "train.tsv").write_text("sentence\tlabel\nok\t1\nno label column\n")
  p = run_tool(base + ["--task_name=sst-2", "--data_dir=" + str(bad)], check=False)
  assert p.returncode != 0 and "train.tsv line 3" in p.stderr
  p = run_tool(base[:3] + ["--bert_config_file=" + str(tmp_path / "nope.json"),
                           "--output_dir=" + str(tmp_path / "o2"),
                           "--task_name=sst-2", "--data_dir=" + MOVIE_DIR], check=False)
  assert p.returncode != 0 and "nope.json" in p.stderr
  with pytest.raises(classifier_data.TaskError, match="label '7'"):
    (bad / "dev.tsv").write_text("sentence\tlabel\nok\t7\n")
    classifier_data.read_examples(classifier_data.get_task("sst-2"), str(bad / "dev.tsv"))


def test_mirrored_strategy_on_two_cpu_devices(tmp_path):
  """Pretraining and fine-tuning under MirroredStrategy (2 logical CPUs)."""
  data = str(tmp_path / "pt.tfrecord")
  run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
            "--output_file=" + data, "--vocab_file=" + VOCAB, "--dupe_factor=2",
            "--max_seq_length=64", "--max_predictions_per_seq=10"])
  mirrored = ["--distribution_strategy=mirrored", "--num_cpu_devices=2"]
  pt_dir = str(tmp_path / "pt")
  p = run_tool(["tools/run_pretraining.py", "--input_file=" + data, "--output_dir=" + pt_dir,
                "--bert_config_file=" + TINY_CONFIG, "--do_train", "--do_eval",
                "--max_eval_steps=2", "--train_batch_size=8", "--max_seq_length=64",
                "--max_predictions_per_seq=10", "--num_train_steps=10",
                "--num_warmup_steps=2", "--iterations_per_loop=5"] + mirrored)
  assert "step 10/10" in p.stdout and "functional_saver" not in p.stderr
  assert tf.train.latest_checkpoint(pt_dir).endswith("ckpt-10")
  sst = str(tmp_path / "sst")
  n = copy_slice(MOVIE_DIR + "/train.tsv", sst + "/train.tsv", every=100)
  copy_slice(MOVIE_DIR + "/dev.tsv", sst + "/dev.tsv", every=50)
  ft = str(tmp_path / "ft")
  run_tool(["tools/run_classifier.py", "--task_name=sst-2", "--do_train", "--do_eval",
            "--data_dir=" + sst, "--vocab_file=" + VOCAB, "--bert_config_file=" + TINY_CONFIG,
            "--init_checkpoint=" + pt_dir, "--max_seq_length=64", "--train_batch_size=8",
            "--num_train_epochs=1", "--output_dir=" + ft] + mirrored)
  steps = int(n / 8)  # one epoch, global batch 8 (4 per replica)
  assert "global_step = %d\n" % steps in open(os.path.join(ft, "eval_results.txt")).read()
