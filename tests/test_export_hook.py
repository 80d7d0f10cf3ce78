"""The one export hook and the TF-only client (issue 59 items 2 and 5).

``bert_tf.export.export_model(model, output_dir, export_dir)`` builds what
an export needs from the run directory's own files (written by the task
before training) and writes the run's default export; ``jobs`` binds it to
``params.output_dir`` / ``params.export_dir``; the writer and the client
share the metadata file name and the version rule. A tiny classifier run
directory is written here by hand (no training).
"""

import json
import os
import shutil
import types

import pytest

from bert_tf import config as config_lib
from bert_tf import jobs
from bert_tf import run_dir
from bert_tf.export import base
from bert_tf.export import client
from bert_tf.export import fine_tuned
from bert_tf.modeling import models
from conftest import TINY_CONFIG, VOCAB

LABELS = ["0", "1"]


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
  """A run directory as ClassificationTask writes it before training, and an
  in-memory classifier of its shape."""
  out = tmp_path_factory.mktemp("hook") / "run"
  out.mkdir()
  shutil.copy(TINY_CONFIG, out / run_dir.BERT_CONFIG)
  shutil.copy(VOCAB, out / run_dir.VOCAB)
  (out / run_dir.CLASSIFIER_CONFIG).write_text(json.dumps({
      "task_name": "sst-2", "labels": LABELS, "do_lower_case": True,
      "max_seq_length": 16, "is_regression": False, "is_pair": False}))
  model = models.build_classifier(config_lib.BertConfig.from_json_file(TINY_CONFIG),
                                  len(LABELS))
  return str(out), model


def test_export_model_writes_the_runs_default_export(classifier_run, tmp_path):
  out, model = classifier_run
  export_dir = str(tmp_path / "export")
  path = fine_tuned.export_model(model, out, export_dir)
  assert path == os.path.join(export_dir, "1")
  meta = client.read_metadata(path)
  assert (meta["export"], meta["task_name"], meta["labels"], meta["max_seq_length"],
          meta["is_pair"]) == ("classifier", "sst-2", LABELS, 16, False)
  # The writer's next version and the client's choice follow one rule.
  assert client.version_numbers(export_dir) == [1]
  assert base.next_version(export_dir) == 2
  assert client.resolve_export(export_dir) == path
  lines = client.serve(export_dir, ["a gorgeous film", "dull"])
  rows = [json.loads(l) for l in lines]
  assert len(rows) == 2 and all(r["labels"] in LABELS for r in rows)
  assert all(len(r["probabilities"]) == 2 for r in rows)


def test_export_model_refuses_an_unknown_format(classifier_run, tmp_path):
  out, model = classifier_run
  with pytest.raises(fine_tuned.FineTunedDirError, match="format 'onnx': one of litert, mediapipe, saved_model"):
    fine_tuned.export_model(model, out, str(tmp_path / "x"), format="onnx")
  assert not os.path.exists(tmp_path / "x")


def test_jobs_bind_the_hook_to_the_run_and_export_directories():
  calls = []

  def exporter(model, output_dir, export_dir):
    calls.append((model, output_dir, export_dir))
    return export_dir + "/1"

  params = types.SimpleNamespace(output_dir="/runs/a", export_dir="/exports/a")
  assert jobs._export_fn(exporter, params)("MODEL") == "/exports/a/1"  # pylint: disable=protected-access
  assert calls == [("MODEL", "/runs/a", "/exports/a")]
  assert jobs._export_fn(exporter, types.SimpleNamespace(  # pylint: disable=protected-access
      output_dir="/runs/a", export_dir="")) is None
  assert jobs._export_fn(None, params) is None  # pylint: disable=protected-access


def test_client_refuses_a_request_in_one_line(classifier_run, tmp_path):
  out, model = classifier_run
  export_dir = str(tmp_path / "export")
  fine_tuned.export_model(model, out, export_dir)
  with pytest.raises(client.PredictError, match="no request: give STRINGs after"):
    client.serve(export_dir)
  with pytest.raises(client.PredictError, match="has no signature 'nope'"):
    client.serve(export_dir, ["x"], signature_name="nope")
