"""A task kind is one record (issue 68 item 1).

A stand-in kind, ``stub`` (a sentiment classifier of its own: settings file,
architecture name, model class, head spec, task class, serving module), is
registered with :func:`bert_tf.task_kinds.registered` and nothing else: its
run directory is read and its model rebuilt, its preset loaded, its
SavedModel and ``.tflite`` written and answering as the Keras model does, a
format its record refuses refused in the record's words, and the search
sees it and its metric. Then the registry's own rules.
"""

import dataclasses
import importlib
import json
import os

import numpy as np
import pytest

from conftest import TINY_CONFIG, VOCAB

import tensorflow as tf  # noqa: E402  pylint: disable=g-import-not-at-top

from bert_tf import config as config_lib  # noqa: E402
from bert_tf import errors  # noqa: E402
from bert_tf import preprocessing  # noqa: E402
from bert_tf import run_dir  # noqa: E402
from bert_tf import task_kinds  # noqa: E402
from bert_tf.export import client  # noqa: E402
from bert_tf.export import fine_tuned  # noqa: E402
from bert_tf.export import saved_model  # noqa: E402
from bert_tf.modeling import models  # noqa: E402
from bert_tf.modeling import presets  # noqa: E402
from bert_tf.tasks import fine_tuning  # noqa: E402

STUB = "stub"
LABELS = ["grim", "glad"]
SEQ = 32
# The stand-in's head: the classifier's, under its own kind (whose record
# names the settings file that holds its labels).
STUB_TASK = dataclasses.replace(models.CLASSIFIER_TASK, name="stub_head", kind=STUB)


class StubClassifier(models.BertClassifier):
  """The stand-in kind's Keras model."""
  preset_task = STUB_TASK


class StubServing(saved_model.ClassifierServing):
  """The stand-in kind's serving module (every format consumes it)."""
  kind = STUB


class StubTask(fine_tuning.FineTuningTask):
  """The stand-in kind's task class: nothing of its own but the kind."""
  kind = STUB


RECORD = task_kinds.TaskKind(
    STUB, "a stand-in sentiment classifier", settings_file="stub_config.json",
    tool="run_stub.py", fine_tuning=True, hf_architectures=("StubForSentiment",),
    model_class="test_task_kinds:StubClassifier", head="test_task_kinds:STUB_TASK",
    params_class="bert_tf.tasks.classification:ClassifierParams",
    task_class="test_task_kinds:StubTask", job="bert_tf.jobs:run_classifier",
    serving="test_task_kinds:StubServing",
    exports=(STUB, "preprocessor", "encoder", "features"),
    formats={task_kinds.SAVED_MODEL: None, task_kinds.LITERT: None,
             task_kinds.MEDIAPIPE: "a stand-in refused on purpose"},
    selection_metric="eval_stub_score", reported_metrics=("eval_stub_score", "eval_loss"))


@pytest.fixture(scope="module")
def stub_run(tmp_path_factory):
  """A run directory of the stand-in kind: its settings file, config, vocab
  and a checkpoint of a (random) StubClassifier, as a training job writes."""
  d = tmp_path_factory.mktemp("stub_run")
  config = config_lib.BertConfig.from_json_file(TINY_CONFIG)
  tf.keras.utils.set_random_seed(7)
  model = StubClassifier(config, num_labels=len(LABELS))
  pre = preprocessing.BertPreprocessor(VOCAB, True, SEQ)
  model(pre(tf.constant(["warm up"])), training=False)
  with open(os.path.join(d, run_dir.BERT_CONFIG), "w", encoding="utf-8") as f:
    f.write(config.to_json_string())
  with open(VOCAB, "rb") as src, open(os.path.join(d, run_dir.VOCAB), "wb") as dst:
    dst.write(src.read())
  with open(os.path.join(d, RECORD.settings_file), "w", encoding="utf-8") as f:
    json.dump({"task_name": "stub-sst", "labels": LABELS, "max_seq_length": SEQ,
               "do_lower_case": True, "is_pair": False, "is_regression": False}, f)
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model, encoder=model.encoder),
                             str(d), max_to_keep=1).save()
  return str(d), model, pre


def _same_weights(a, b):
  for x, y in zip(a.weights, b.weights):
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_a_registered_kind_runs_through_every_table(stub_run, tmp_path):
  path, model, pre = stub_run
  texts = ["a glad and gorgeous film", "grim", ""]
  want = tf.nn.softmax(model(preprocessing.trim_to_longest(pre(tf.constant(texts))),
                             training=False), -1).numpy()
  with pytest.raises(errors.ParamsError):
    task_kinds.get(STUB)
  with task_kinds.registered(RECORD):
    # The run directory: its kind from the record's settings file, its
    # model rebuilt by the record's class and restored.
    assert run_dir.run_kinds(path) == [STUB] and fine_tuned.run_kind(path) == STUB
    run = fine_tuned.load_run(path)
    assert type(run.model) is StubClassifier and run.spec.labels == tuple(LABELS)
    _same_weights(run.model, model)
    # The preset: the loader finds the labels in the record's settings file.
    loaded = StubClassifier.from_preset(path)
    assert loaded.num_labels == len(LABELS) and loaded.label_names == LABELS
    _same_weights(loaded, model)
    assert task_kinds.by_architecture("StubForSentiment") is RECORD
    # The SavedModel and the .tflite of the record's serving module.
    sm = fine_tuned.export_run(run, None, str(tmp_path / "sm"))
    meta = client.read_metadata(sm)
    assert (meta["export"], meta["labels"], meta["task_name"]) == (STUB, LABELS, "stub-sst")
    out = tf.saved_model.load(sm).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(out["probabilities"].numpy(), want, atol=1e-5)
    lite = fine_tuned.export_run(run, None, str(tmp_path / "lite"), format="litert")
    got = client.LiteRTSignature(os.path.join(lite, client.TFLITE_FILE), num_threads=1)(
        text=np.array([t.encode() for t in texts], dtype=object))
    np.testing.assert_allclose(got["probabilities"], want, atol=1e-5)
    assert [l.decode() for l in got["labels"]] == [LABELS[i] for i in want.argmax(-1)]
    # A format the record refuses: its line, before any work.
    with pytest.raises(errors.BertTfError, match="a stand-in refused on purpose"):
      fine_tuned.export_run(run, None, str(tmp_path / "mp"), format=task_kinds.MEDIAPIPE)
    assert not (tmp_path / "mp").exists()
    # The search: a searchable kind, its metric the record's.
    search = importlib.import_module("bert_tf.tuning.search")
    assert STUB in search.TASKS
    task = object.__new__(StubTask)
    assert (task.selection_metric, list(task.reported_metrics)) == (
        "eval_stub_score", ["eval_stub_score", "eval_loss"])
  # Gone with the context: the registry is as it was.
  assert STUB not in task_kinds.KINDS and run_dir.run_kinds(path) == []


def test_the_registry_refuses_a_kind_that_claims_anothers_files():
  for clash, what in ((dict(settings_file=task_kinds.NER_CONFIG), "ner_config.json"),
                      (dict(hf_architectures=("BertForMultipleChoice",)),
                       "BertForMultipleChoice")):
    with pytest.raises(errors.ParamsError, match=what):
      task_kinds.register(dataclasses.replace(RECORD, **clash))
    assert STUB not in task_kinds.KINDS
  # One name per kind: every record's settings file and architectures once.
  files = [k.settings_file for k in task_kinds.KINDS.values() if k.settings_file]
  archs = [a for k in task_kinds.KINDS.values() for a in k.hf_architectures]
  assert len(files) == len(set(files)) and len(archs) == len(set(archs))
  assert task_kinds.get("ner").export_name == "tagging"
  assert task_kinds.get("squad").refusal(task_kinds.LITERT).startswith("SQuAD's")
  assert "it writes classifier, features" in task_kinds.get("ner").refusal(
      task_kinds.MEDIAPIPE)
