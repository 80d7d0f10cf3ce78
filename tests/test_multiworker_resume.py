"""A multi-worker job stopped and restarted resumes every worker's data position.

Two MultiWorkerMirroredStrategy workers on 127.0.0.1 (``tests/distributed_worker.py``)
pretrain the tiny BERT with ``--deterministic``: once straight to step 4, once
stopped at step 2 and restarted. Every worker saves its own ``tf.data``
iterator beside the chief's checkpoint (``data-worker-<i>/``), so the
restarted job reads the batches the uninterrupted one read and ends with
bit-identical weights. (Before, only the chief's position could be saved and
a restarted job re-read its data from the start: different batches,
different weights.)
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, SAMPLE_TEXT, VOCAB, free_ports, run_tool


def run_workers(records, out, npz_prefix, stop_at_step=0):
  ports = free_ports(2)
  cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
  procs = []
  for i in range(2):
    # A library run made deterministic as training.enable_determinism says
    # (the tools do this themselves for --deterministic): no oneDNN kernels.
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": i}}))
    procs.append(subprocess.Popen(
        [sys.executable, "tests/distributed_worker.py", "worker", records, out,
         "%s%d.npz" % (npz_prefix, i), str(stop_at_step), "1"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  logs = [p.communicate(timeout=900)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], "\n".join(l[-3000:] for l in logs)
  return logs


@pytest.mark.slow
def test_multi_worker_stop_and_resume_is_bit_identical(tmp_path):
  records = str(tmp_path / "pt.tfrecord")
  run_tool(["tools/create_pretraining_data.py", "--input_file=" + SAMPLE_TEXT,
            "--output_file=" + records, "--vocab_file=" + VOCAB,
            "--max_seq_length=64", "--max_predictions_per_seq=10",
            "--dupe_factor=2", "--random_seed=12345"])
  whole = str(tmp_path / "whole")
  run_workers(records, whole, str(tmp_path / "whole"))
  resumed = str(tmp_path / "resumed")
  logs = run_workers(records, resumed, str(tmp_path / "first"), stop_at_step=2)
  assert all("step 2/4" in l for l in logs)
  assert {"data-worker-0", "data-worker-1"} <= set(os.listdir(resumed))
  logs = run_workers(records, resumed, str(tmp_path / "resumed"))
  for i, log in enumerate(logs):
    assert "worker %d: restored its data position at step 2" % i in log, log[-3000:]
    assert "step 4/4" in log
  for i in range(2):
    a = np.load(str(tmp_path / ("whole%d.npz" % i)))
    b = np.load(str(tmp_path / ("resumed%d.npz" % i)))
    assert int(a["step"]) == int(b["step"]) == 4
    differ = [k for k in a.files if a[k].tobytes() != b[k].tobytes()]
    assert not differ, "worker %d: %d of %d tensors differ: %s" % (
        i, len(differ), len(a.files), differ[:5])
