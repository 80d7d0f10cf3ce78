"""``run_pretraining --init_checkpoint``: continued pretraining keeps the heads.

The original ``run_pretraining.py`` initialized every variable its
checkpoint held, the ``cls/predictions`` (masked-LM) and
``cls/seq_relationship`` (NSP) heads included. Checked here on each kind of
starting point, against the weights written into it by an independent
writer: a Hugging Face ``BertForPreTraining`` saved by ``transformers``
(torch), an original-layout TF1 checkpoint, and one of our pretraining runs;
a start model without heads (all-MiniLM-L6-v2) gets random heads and one
line saying so. Then the tool's bad input: a ``--bert_config_file`` that
differs from the checkpoint's config, no config at all, a corpus smaller than
one batch: one line each, non-zero exit, no output directory.
"""

import json
import os
import types

import numpy as np
import pytest

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf.modeling import models
from bert_tf.modeling import presets
from conftest import SAMPLE_TEXT, TINY_CONFIG, VOCAB, require, run_tool


def tiny():
  return config_lib.BertConfig.from_json_file(TINY_CONFIG)


def heads(pretrainer):
  return {n: v.numpy() for n, v in checkpoints.pretrainer_variables(pretrainer)
          if n.startswith("cls/")}


def test_hugging_face_bert_for_pretraining_heads_are_loaded(tmp_path):
  torch = require("torch")
  transformers = require("transformers")
  c = tiny()
  torch.manual_seed(0)
  hf = transformers.BertForPreTraining(transformers.BertConfig(
      vocab_size=c.vocab_size, hidden_size=c.hidden_size,
      num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
      intermediate_size=c.intermediate_size, hidden_act="gelu",
      max_position_embeddings=c.max_position_embeddings,
      type_vocab_size=c.type_vocab_size))
  with torch.no_grad():  # HF initializes biases to 0: make them tell apart
    for name, p in hf.named_parameters():
      if name.startswith("cls.") and name.endswith("bias"):
        p.normal_()
  hf.save_pretrained(str(tmp_path / "hf"))
  sd = {k: v.detach().numpy() for k, v in hf.state_dict().items()}
  model = models.build_pretrainer(checkpoints.read_hf_config(str(tmp_path / "hf")))
  what = presets.load_weights(model, str(tmp_path / "hf"), models.PRETRAINER_TASK)
  assert what.endswith("(with its cls/predictions and cls/seq_relationship heads)"), what
  got = heads(model)
  for ours, (theirs, transpose) in checkpoints.HF_HEAD_NAMES.items():
    want = sd[theirs].T if transpose else sd[theirs]
    np.testing.assert_array_equal(got[ours], want, err_msg=ours)
  np.testing.assert_array_equal(
      dict(checkpoints.encoder_variables(model.encoder))[
          "bert/embeddings/word_embeddings"].numpy(),
      sd["bert.embeddings.word_embeddings.weight"])
  # The directory as transformers 5 saves a tokenizer (tokenizer.json, no
  # vocab.txt): run_pretraining takes its vocab without --vocab_file.
  from bert_tf import convert, preprocessing  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  files = convert.tokenizer_files(preprocessing.BertPreprocessor(VOCAB), 512)
  (tmp_path / "hf" / "tokenizer.json").write_text(files["tokenizer.json"], encoding="utf-8")
  assert not (tmp_path / "hf" / "vocab.txt").exists()
  found = pretraining.model_files(types.SimpleNamespace(
      init_checkpoint=str(tmp_path / "hf"), bert_config_file=None, vocab_file=None,
      input_file="")).vocab_file
  with open(found, encoding="utf-8") as f, open(VOCAB, encoding="utf-8") as g:
    assert f.read().splitlines() == g.read().splitlines()


def test_a_start_model_without_heads_says_they_start_random(minilm_dir):
  model = models.build_pretrainer(checkpoints.read_hf_config(minilm_dir))
  before = heads(model)
  what = presets.load_weights(model, minilm_dir, models.PRETRAINER_TASK)
  assert what.endswith("; it has no masked-LM or next-sentence head: cls/predictions "
                       "and cls/seq_relationship start from a random init"), what
  after = heads(model)
  assert all(np.array_equal(before[k], after[k]) for k in before)


def test_original_checkpoint_heads_are_loaded_and_partial_heads_refused(tmp_path):
  source = models.build_pretrainer(tiny())
  prefix = str(tmp_path / "bert_model.ckpt")
  checkpoints.save_tf1_checkpoint(checkpoints.pretrainer_variables(source), prefix)
  model = models.build_pretrainer(tiny())
  assert any(not np.array_equal(a, b) for a, b in zip(heads(model).values(),
                                                      heads(source).values()))
  what = presets.load_weights(model, prefix, models.PRETRAINER_TASK)
  assert "with its cls/predictions and cls/seq_relationship heads" in what
  for k, v in heads(source).items():
    np.testing.assert_array_equal(heads(model)[k], v, err_msg=k)

  # An encoder-only checkpoint (no cls/): random heads, said once.
  enc_prefix = str(tmp_path / "enc" / "bert_model.ckpt")
  checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(source.encoder), enc_prefix)
  model = models.build_pretrainer(tiny(), nsp=False)
  what = presets.load_weights(model, enc_prefix, models.PRETRAINER_TASK)
  assert what.endswith("it has no masked-LM head: cls/predictions starts from a random init")

  # Only part of the masked-LM head: refused, naming what is missing.
  part = [(n, v) for n, v in checkpoints.pretrainer_variables(source)
          if n != "cls/predictions/output_bias"]
  part_prefix = str(tmp_path / "part" / "bert_model.ckpt")
  checkpoints.save_tf1_checkpoint(part, part_prefix)
  with pytest.raises(checkpoints.CheckpointError, match="cls/predictions/output_bias"):
    presets.load_weights(models.build_pretrainer(tiny()), part_prefix,
                         models.PRETRAINER_TASK)


def pretraining_records(tmp_path):
  records = str(tmp_path / "pt.tfrecord")
  run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
            "--output_file=" + records, "--vocab_file=" + VOCAB,
            "--max_seq_length=64", "--max_predictions_per_seq=10",
            "--dupe_factor=2", "--random_seed=12345"])
  return records


def pretrain(records, out, *extra, check=True):
  return run_tool(["tools/run_pretraining.py", "--input_file=" + records,
                   "--output_dir=" + out, "--do_train", "--num_train_steps=2",
                   "--train_batch_size=8", "--max_seq_length=64",
                   "--max_predictions_per_seq=10", "--vocab_file=" + VOCAB] + list(extra),
                  check=check)


def one_error_line(proc):
  assert proc.returncode != 0
  lines = [l for l in proc.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
  return lines[0]


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_tool_continues_from_our_run_with_its_heads_and_refuses_bad_input(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records = pretraining_records(tmp_path)
  first = str(tmp_path / "first")
  pretrain(records, first, "--bert_config_file=" + TINY_CONFIG)
  # No --bert_config_file: the run directory's bert_config.json is used.
  proc = pretrain(records, str(tmp_path / "second"), "--init_checkpoint=" + first)
  line = [l for l in proc.stdout.splitlines() if l.startswith("initialized from")]
  assert len(line) == 1 and line[0].endswith(
      "(with its cls/predictions and cls/seq_relationship heads)"), proc.stdout[-2000:]
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(first))
  saved = reader.get_tensor("model/masked_lm/output_bias/.ATTRIBUTES/VARIABLE_VALUE")
  assert np.abs(saved).max() > 0  # the first run trained the bias

  # A config that is not the checkpoint's: one line naming both files.
  with open(TINY_CONFIG, encoding="utf-8") as f:
    other = dict(json.load(f), hidden_size=64, intermediate_size=256)
  other_file = str(tmp_path / "other_config.json")
  with open(other_file, "w", encoding="utf-8") as f:
    json.dump(other, f)
  out = str(tmp_path / "refused")
  line = one_error_line(pretrain(records, out, "--init_checkpoint=" + first,
                                 "--bert_config_file=" + other_file, check=False))
  assert os.path.join(first, "bert_config.json") in line and other_file in line
  assert "hidden_size=128" in line and "hidden_size=64" in line
  assert "intermediate_size=512" in line and "intermediate_size=256" in line
  assert not os.path.exists(out)

  # No config anywhere: one line naming the flag.
  line = one_error_line(pretrain(records, out, check=False))
  assert "--bert_config_file is required" in line and not os.path.exists(out)

  # A corpus smaller than one batch: how many it has, how many a batch needs.
  line = one_error_line(pretrain(records, out, "--bert_config_file=" + TINY_CONFIG,
                                 "--train_batch_size=4096", check=False))
  n = sum(1 for _ in tf.data.TFRecordDataset(records))
  assert ("holds %d instances but one training batch needs 4096 (--train_batch_size)"
          % n) in line, line
  assert not os.path.exists(os.path.join(out, "checkpoint"))


def test_fine_tuning_takes_the_config_beside_a_pretraining_run(tmp_path):
  """A pretraining run's directory (or a checkpoint prefix in it) is a
  fine-tuning ``--init_checkpoint`` as it is: every fine-tuning task's one
  resolver (:func:`bert_tf.tasks.fine_tuning.resolve_config_and_vocab`,
  over the preset loader, as ``run_pretraining`` and ``extract_features``)
  takes the run's ``bert_config.json``; no config anywhere is one error
  naming the flag. (``run_classifier`` from a pretraining run asked for
  ``--bert_config_file`` before.)"""
  from bert_tf import errors  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import fine_tuning  # pylint: disable=g-import-not-at-top
  run = tmp_path / "pretrain"
  run.mkdir()
  c = tiny().to_dict()
  c["hidden_size"], c["num_attention_heads"] = 96, 3  # not the tiny config's
  (run / "bert_config.json").write_text(json.dumps(c))
  (run / "ckpt-40.index").write_text("")
  (run / "checkpoint").write_text('model_checkpoint_path: "ckpt-40"\n')
  out = tmp_path / "out"
  resolve = fine_tuning.resolve_config_and_vocab
  def params(ic):
    return types.SimpleNamespace(init_checkpoint=ic, bert_config_file=None,
                                 vocab_file=VOCAB, output_dir=str(out))
  for ic in (str(run), str(run / "ckpt-40")):
    config, vocab = resolve(params(ic))
    assert (config.hidden_size, vocab) == (96, VOCAB), (ic, config.hidden_size)
  bare = tmp_path / "bare"  # a checkpoint with no config beside it
  bare.mkdir()
  (bare / "ckpt-1.index").write_text("")
  with pytest.raises(errors.ConfigError, match="bert_config_file is required unless"):
    resolve(params(str(bare / "ckpt-1")))
  # A path that does not exist is that error, first (issue 40).
  with pytest.raises(errors.CheckpointError, match="does not exist"):
    resolve(params(str(tmp_path / "nothing")))


@pytest.mark.slow  # two tool runs and a pretraining: ~20-30 s
def test_a_pretraining_run_carries_its_vocab_and_casing_to_fine_tuning(tmp_path):
  """``run_pretraining`` given its ``--vocab_file`` (or finding one beside
  the config, or in a data manifest) copies it into the run directory with
  its casing (``pretraining_config.json``), so ``run_classifier
  --init_checkpoint=RUN`` needs neither ``--vocab_file`` nor
  ``--bert_config_file``; a run without one is one error naming
  ``--vocab_file`` and where it comes from, nothing written. (Issue 63 item 6:
  fine-tuning from a pretraining run needed ``--vocab_file`` again.)"""
  import shutil  # pylint: disable=g-import-not-at-top
  from test_fine_tuning_resume import _movie_slice  # pylint: disable=g-import-not-at-top
  records = pretraining_records(tmp_path)
  run = tmp_path / "pretrain"
  pretrain(records, str(run), "--bert_config_file=" + TINY_CONFIG)
  with open(VOCAB, "rb") as f:
    assert (run / "vocab.txt").read_bytes() == f.read()
  settings = json.loads((run / "pretraining_config.json").read_text())
  assert settings["do_lower_case"] is True and settings["max_seq_length"] == 64, settings
  assert "no upper-case" in settings["casing_from"]
  data = _movie_slice(str(tmp_path / "movie"), train_rows=16, dev_rows=8)
  fine = ["tools/run_classifier.py", "--task_name=sst-2", "--data_dir=" + data,
          "--do_train", "--num_train_epochs=1", "--train_batch_size=8",
          "--max_seq_length=32", "--learning_rate=1e-4"]
  out = tmp_path / "cls"
  p = run_tool(fine + ["--init_checkpoint=" + str(run), "--output_dir=" + str(out)])
  assert "initialized from" in p.stdout, p.stdout[-2000:]
  assert (out / "vocab.txt").read_bytes() == (run / "vocab.txt").read_bytes()
  assert json.loads((out / "classifier_config.json").read_text())["do_lower_case"] is True
  # A run that was given no vocab: one line, nothing written.
  bare = tmp_path / "bare"
  shutil.copytree(run, bare)
  os.remove(bare / "vocab.txt")
  line = one_error_line(run_tool(fine + ["--init_checkpoint=" + str(bare),
                                         "--output_dir=" + str(tmp_path / "cls2")],
                                 check=False))
  assert "--vocab_file is required" in line and "carries its vocab.txt" in line, line
  assert not os.path.exists(tmp_path / "cls2")


def test_a_cased_run_passes_its_casing_on(tmp_path):
  """The casing travels: a cased vocab (upper-case word pieces) records
  ``do_lower_case`` False; fine-tuning from that run takes it over the
  flag's default and refuses ``--do_lower_case=False`` for an uncased run;
  ``from_preset`` reads it too."""
  from bert_tf import errors  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import fine_tuning, pretraining  # pylint: disable=g-import-not-at-top
  with open(VOCAB, encoding="utf-8") as f:
    words = f.read().splitlines()
  cased = tmp_path / "cased_vocab.txt"
  cased.write_text("\n".join(words[:-200] + ["Cased%d" % i for i in range(200)]) + "\n",
                   encoding="utf-8")
  got = pretraining.tokenizer_settings(types.SimpleNamespace(
      input_file=str(tmp_path / "x.tfrecord"), vocab_file=str(cased), max_seq_length=32))
  assert got["do_lower_case"] is False and "has upper-case" in got["casing_from"], got
  run = tmp_path / "run"
  run.mkdir()
  (run / "bert_config.json").write_text(tiny().to_json_string())
  (run / "ckpt-4.index").write_text("")
  (run / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')
  (run / "vocab.txt").write_bytes(cased.read_bytes())
  (run / "pretraining_config.json").write_text(json.dumps(got))

  def params(lower):
    return types.SimpleNamespace(init_checkpoint=str(run / "ckpt-4"), bert_config_file=None,
                                 vocab_file=None, do_lower_case=lower)
  p = params(True)  # the flag's default
  _, vocab = fine_tuning.resolve_config_and_vocab(p)
  assert vocab == str(run / "vocab.txt") and p.do_lower_case is False
  assert presets.get_preset_loader(str(run)).do_lower_case() is False
  (run / "pretraining_config.json").write_text(json.dumps(dict(got, do_lower_case=True)))
  with pytest.raises(errors.ParamsError, match="do_lower_case=False, but .* was trained "
                     "on lower-cased text"):
    fine_tuning.resolve_config_and_vocab(params(False))
