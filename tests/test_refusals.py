"""Impossible input is refused in one line before any work, leaving nothing
that looks complete (issue 63 "Bad input")."""

import os

import pytest

from conftest import MOVIE_DIR, TINY_CONFIG, VOCAB, run_tool


def _lines(text):
  return [l for l in text.splitlines() if l.strip()]


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
