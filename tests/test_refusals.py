"""Impossible input is refused in one line before any work, leaving nothing
that looks complete (issue 63 "Bad input")."""

import os

from conftest import TINY_CONFIG, VOCAB, run_tool


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
