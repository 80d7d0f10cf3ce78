"""Impossible input is refused in one line before any work, leaving nothing
that looks complete (issue 63 "Bad input")."""

import json
import os
import re

import pytest

from conftest import (MC_DIR, MOVIE_DIR, NER_DIR, SQUAD_V1_DIR, TINY_CONFIG, VOCAB,
                      copy_slice, run_tool)


def _lines(text):
  """Non-blank lines, without TensorFlow's C++ log lines (``E0000 ...``): the
  tests' warm tool server runs at TF_CPP_MIN_LOG_LEVEL=2, a real tool at 3."""
  return [l for l in text.splitlines()
          if l.strip() and not re.match(r"[IWE]\d{4} \d\d:\d\d:\d\d", l)]


def test_stray_tab_row_names_file_and_line(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  (data / "train.tsv").write_text("sentence\tlabel\ngood film\t1\nbad\tfilm\t0\n",
                                  encoding="utf-8")
  out = tmp_path / "out"
  p = run_tool(["tools/run_classifier.py", "--task_name=tsv", "--text_a_column=sentence",
                "--label_column=label", "--data_dir=" + str(data),
                "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB,
                "--do_train", "--output_dir=" + str(out)], check=False)
  assert p.returncode != 0
  (line,) = _lines(p.stderr)
  assert "train.tsv line 3: 3 tab-separated fields, the header has 2" in line, line
  assert not out.exists() or not any(
      f.endswith((".index", "eval_results.txt")) for _, _, fs in os.walk(out) for f in fs)


def test_tune_names_task_and_lists_one_export_flag(tmp_path):
  p = run_tool(["tools/tune.py", "--task_name=sst-2", "--output_dir=" + str(tmp_path / "s")],
               check=False)
  assert p.returncode != 0
  (line,) = _lines(p.stderr)
  assert line.startswith("tune: error: --task is required: one of classifier"), line
  assert not (tmp_path / "s").exists()
  p = run_tool(["tools/tune.py", "--task=classifier", "--helpshort"], check=False)
  export_flags = [l.split(":")[0].strip() for l in p.stdout.splitlines()
                  if l.strip().startswith("--") and "export" in l.split(":")[0]]
  assert export_flags == ["--[no]export"], export_flags
  assert "--task_name" in p.stdout and "--learning_rate" in p.stdout
  p = run_tool(["tools/tune.py", "--task=classifier", "--task_name=sst-2",
                "--export_dir=" + str(tmp_path / "e"), "--output_dir=" + str(tmp_path / "s")],
               check=False)
  assert p.returncode != 0
  (line,) = _lines(p.stderr)
  assert line.startswith("tune: error: --export_dir: a search exports its best trial"), line
  assert not (tmp_path / "s").exists() and not (tmp_path / "e").exists()


@pytest.mark.parametrize("flag,word", [("--learning_rate=-5e-5", "learning_rate must be positive"),
                                       ("--num_train_epochs=0", "num_train_epochs must be positive"),
                                       ("--num_train_epochs=-1", "num_train_epochs must be positive"),
                                       ("--warmup_proportion=1.5", "warmup_proportion must be in [0, 1]")])
def test_impossible_schedule_is_refused_before_work(flag, word, tmp_path):
  out = tmp_path / "out"
  p = run_tool(["tools/run_classifier.py", "--task_name=sst-2", "--data_dir=" + MOVIE_DIR,
                "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB,
                "--do_train", "--output_dir=" + str(out), flag], check=False)
  assert p.returncode != 0
  (line,) = _lines(p.stderr)
  assert line.startswith("run_classifier: error: --" + word), line
  assert not out.exists() or not any(
      f.endswith((".index", "eval_results.txt")) for _, _, fs in os.walk(out) for f in fs)


@pytest.mark.parametrize("flag,word", [("--learning_rate=0", "learning_rate must be positive"),
                                       ("--num_train_steps=0", "num_train_steps must be positive"),
                                       ("--num_warmup_steps=-1", "num_warmup_steps must be >= 0")])
def test_impossible_pretraining_schedule_is_refused_before_work(flag, word, tmp_path):
  out = tmp_path / "out"
  p = run_tool(["tools/run_pretraining.py", "--input_file=" + str(tmp_path / "none.tfrecord"),
                "--bert_config_file=" + TINY_CONFIG, "--output_dir=" + str(out), "--do_train",
                flag], check=False)
  assert p.returncode != 0
  (line,) = _lines(p.stderr)
  assert line.startswith("run_pretraining: error: --" + word), line
  assert not out.exists()


# --- batch sizes against the rows of their split (issue 63 item 2) ----------


def _squad_slice(src, dst, articles=1, paragraphs=2):
  """The first paragraphs of a SQuAD file (same layout)."""
  with open(src, encoding="utf-8") as f:
    data = json.load(f)
  data["data"] = [dict(a, paragraphs=a["paragraphs"][:paragraphs])
                  for a in data["data"][:articles]]
  with open(dst, "w", encoding="utf-8") as f:
    json.dump(data, f)
  return str(dst)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  """Tiny data for every fine-tuning tool: 100 SST-2 rows, a SQuAD slice,
  and the flags each tool's runs share (tiny random BERT, short inputs)."""
  root = tmp_path_factory.mktemp("tiny")
  copy_slice(os.path.join(MOVIE_DIR, "train.tsv"), str(root / "sst2" / "train.tsv"), limit=100)
  squad_file = _squad_slice(os.path.join(SQUAD_V1_DIR, "train.json"), root / "squad.json")
  model = ["--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB]
  return {
      "root": root,
      "run_classifier": ["tools/run_classifier.py", "--task_name=sst-2",
                         "--data_dir=" + str(root / "sst2"), "--max_seq_length=32"] + model,
      "run_squad": ["tools/run_squad.py", "--train_file=" + squad_file,
                    "--predict_file=" + squad_file, "--max_seq_length=64",
                    "--doc_stride=32", "--max_query_length=16"] + model,
      "run_ner": ["tools/run_ner.py", "--data_dir=" + NER_DIR, "--max_examples=20",
                  "--dev_file=train.txt", "--test_file=train.txt", "--max_seq_length=24",
                  "--doc_stride=8"] + model,
      "run_swag": ["tools/run_swag.py", "--data_dir=" + MC_DIR, "--max_examples=20",
                   "--max_seq_length=32"] + model,
  }


def _no_complete_output(out):
  assert not out.exists() or not any(
      f.endswith((".index", "eval_results.txt", "_config.json"))
      for _, _, fs in os.walk(out) for f in fs), list(os.walk(out))


@pytest.mark.parametrize("tool,batch,rows", [
    ("run_classifier", "100000", "100 training examples of"),
    ("run_classifier", "0", None),
    ("run_squad", "100000", "training windows (features) of"),
    ("run_ner", "100000", "windows of"),
    ("run_swag", "100000", "20 examples of")])
def test_train_batch_above_rows_refused_before_work(tiny, tool, batch, rows):
  """The original would batch the repeated rows (100,000 of 100 were
  OOM-killed after 276 s) and plan 0 steps; here one line before any file."""
  out = tiny["root"] / ("out_%s_%s" % (tool, batch))
  p = run_tool(tiny[tool] + ["--do_train", "--train_batch_size=" + batch,
                             "--output_dir=" + str(out)], check=False)
  assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
  (line,) = _lines(p.stderr)
  if rows is None:
    assert line == "%s: error: --train_batch_size must be positive, got 0" % tool, line
  else:
    assert line.startswith("%s: error: --train_batch_size %s is above the " % (tool, batch)), line
    assert rows in line and "use at most" in line, line
  assert "fine-tuning" not in p.stdout  # refused before the run's first line
  _no_complete_output(out)


def _lengths_written(out, name):
  with open(os.path.join(out, name), encoding="utf-8") as f:
    return json.load(f)["lengths"]


def _check_length_lines(stdout, lengths):
  """One printed line per split of the settings file, with its figures."""
  for split, r in lengths.items():
    (line,) = [l for l in stdout.splitlines() if l.startswith(split + ": ")]
    assert line.startswith("%s: %d of %d %s (%.1f%%) " % (
        split, r["truncated"], r["examples"], r["unit"], 100 * r["share"])), line
    assert "--max_seq_length=%d" % r["max_seq_length"] in line
    assert line.endswith("(length p50 %d / p90 %d / max %d tokens)" % (r["p50"], r["p90"], r["max"]))


def test_eval_and_predict_batches_above_rows_use_the_rows(tiny):
  """An eval or predict batch flag above its file's rows: one line saying the
  rows go in one batch, the run completes (SQuAD's fixed-shape prediction
  batch pads to no more than the features); every split's length line
  printed once and written to the settings file."""
  out = tiny["root"] / "ner_run"
  p = run_tool(tiny["run_ner"] + ["--do_train", "--do_eval", "--do_predict",
                                  "--train_batch_size=8", "--num_train_epochs=1",
                                  "--eval_batch_size=100000", "--predict_batch_size=100000",
                                  "--output_dir=" + str(out)])
  notes = [l for l in p.stdout.splitlines() if "is above the" in l]
  assert len(notes) == 2 and notes[0].startswith("--eval_batch_size=100000 is above the "), notes
  assert notes[1].startswith("--predict_batch_size=100000 is above the ")
  assert notes[1].endswith("windows of %s: they go in one batch of %s" % (
      os.path.join(NER_DIR, "train.txt"), notes[1].split()[-1])), notes[1]
  lengths = _lengths_written(out, "ner_config.json")
  assert set(lengths) == {"train", "dev", "test"} and lengths["train"]["examples"] == 20
  assert lengths["train"]["truncated"] > 0  # seq 24: long sentences take windows
  _check_length_lines(p.stdout, lengths)
  assert (out / "test_predictions.txt").exists()

  out = tiny["root"] / "squad_run"
  p = run_tool(tiny["run_squad"] + ["--do_train", "--do_predict", "--train_batch_size=4",
                                    "--num_train_epochs=0.5", "--predict_batch_size=100000",
                                    "--output_dir=" + str(out)])
  (note,) = [l for l in p.stdout.splitlines() if "is above the" in l]
  assert note.startswith("--predict_batch_size=100000 is above the ") and "one batch of" in note
  lengths = _lengths_written(out, "squad_config.json")
  assert set(lengths) == {"train", "predict"} and lengths["train"]["unit"] == "questions"
  _check_length_lines(p.stdout, lengths)
  assert "the context took more than one window (--doc_stride=32)" in p.stdout
  with open(out / "predictions.json", encoding="utf-8") as f:
    assert len(json.load(f)) == lengths["predict"]["examples"]
