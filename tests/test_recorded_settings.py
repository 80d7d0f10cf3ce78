"""A run without training on a finished run's ``--output_dir`` tokenizes as
the run trained.

Found by the SWAG export test: ``run_swag --output_dir=RUN --export_dir=EXP``
on a run trained with ``--max_seq_length=48`` exported with the flag's
default 128 and rewrote the run's settings file. Now a predict/export run
takes the recorded ``max_seq_length`` (NER: and ``doc_stride``) where its
flag is left at the default, keeps an explicit other length, refuses an
explicit other ``--do_lower_case`` / ``--preserve_unused_tokens`` in one
line, and leaves the training run's files as they were.
"""

import json
import os

import pytest

from conftest import MOVIE_DIR, TINY_CONFIG, VOCAB, copy_slice, run_tool


@pytest.mark.slow
def test_predict_and_export_runs_use_the_recorded_tokenizer_settings(tmp_path):
  data = tmp_path / "data"
  copy_slice(os.path.join(MOVIE_DIR, "train.tsv"), str(data / "train.tsv"), limit=64)
  copy_slice(os.path.join(MOVIE_DIR, "dev.tsv"), str(data / "dev.tsv"), limit=16)
  copy_slice(os.path.join(MOVIE_DIR, "dev.tsv"), str(data / "test.tsv"), limit=16)
  out = str(tmp_path / "run")
  common = ["tools/run_classifier.py", "--task_name=sst-2", "--data_dir=" + str(data),
            "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB,
            "--output_dir=" + out]
  run_tool(common + ["--do_train", "--max_seq_length=48", "--train_batch_size=8",
                     "--num_train_epochs=0.25"])
  settings = os.path.join(out, "classifier_config.json")
  with open(settings, encoding="utf-8") as f:
    before = f.read()
  assert json.loads(before)["max_seq_length"] == 48

  # Export without the flag: the recorded 48, the settings file untouched.
  proc = run_tool(common + ["--export_dir=" + str(tmp_path / "export")])
  assert "resumed from" in proc.stdout  # the trained weights, not a fresh model
  with open(settings, encoding="utf-8") as f:
    assert f.read() == before
  exported = [os.path.join(r, n) for r, _, ns in os.walk(tmp_path / "export")
              for n in ns if n == "classifier_config.json" or n.endswith(".json")]
  lengths = set()
  for path in exported:
    with open(path, encoding="utf-8") as f:
      try:
        d = json.load(f)
      except json.JSONDecodeError:
        continue
    if isinstance(d, dict) and "max_seq_length" in d:
      lengths.add(d["max_seq_length"])
  assert lengths == {48}, (exported, lengths)

  # An explicit other casing: one line, nothing written.
  proc = run_tool(common + ["--do_predict", "--do_lower_case=false"], check=False)
  assert proc.returncode != 0
  lines = [l for l in proc.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "--do_lower_case" in lines[0] and settings in lines[0], (
      proc.stderr[-2000:])
  assert not os.path.exists(os.path.join(out, "test_results.tsv"))

  # Predict with an explicit longer length: kept; the training run's file stays.
  proc = run_tool(common + ["--do_predict", "--max_seq_length=64"])
  assert "resumed from" in proc.stdout
  with open(settings, encoding="utf-8") as f:
    assert f.read() == before
