"""Atomic outputs: whole or absent, and with the mode a plain open() gives."""

import os

import pytest

from bert_tf import io_utils


def test_atomic_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
  old = os.umask(0o022)
  try:
    path = str(tmp_path / "predictions.json")
    io_utils.atomic_write_text(path, "{}")
    with open(str(tmp_path / "plain.json"), "w") as f:
      f.write("{}")
  finally:
    os.umask(old)
  assert open(path).read() == "{}"
  assert os.stat(path).st_mode & 0o777 == 0o644
  assert os.stat(str(tmp_path / "plain.json")).st_mode & 0o777 == 0o644


def test_failed_write_leaves_nothing(tmp_path):
  path = str(tmp_path / "out.txt")
  with pytest.raises(RuntimeError):
    with io_utils.atomic_output(path) as tmp:
      with open(tmp, "w") as f:
        f.write("partial")
      raise RuntimeError("killed")
  assert os.listdir(str(tmp_path)) == []
