"""SQuAD training steps: epochs over questions (the original) or windows (HF).

The original ``run_squad.py`` trains ``int(len(train_examples) /
train_batch_size * num_train_epochs)`` steps (read from the installed
``bert-tensorflow==1.0.4`` source here and evaluated), so one "epoch" covers
fewer windows than a long context makes. ``--epochs_over=features`` counts
like Hugging Face's ``Trainer`` over ``run_qa.py``'s windows (computed here
by ``transformers.Trainer.set_initial_training_values`` on a torch
``DataLoader`` of that many windows, ``max_steps = ceil(epochs *
ceil(windows / batch))``). The task logs ``N steps = M of K
windows per epoch``. Data: a small SQuAD v1.1 file written by the test.
"""

import importlib.util
import json
import logging
import math
import os
import re
import types

import pytest

from bert_tf import errors
from bert_tf import tokenization
from bert_tf.data import squad as squad_data
from conftest import TINY_CONFIG, VOCAB, require

SEQ, STRIDE, QUERY = 64, 32, 16


def _squad_file(path, paragraphs=3, questions=3, sentences=8):
  """A SQuAD v1.1 file: long contexts (several windows each), answers found
  in the text (``answer_start`` by ``str.index``)."""
  data = []
  for i in range(paragraphs):
    context = " ".join("Sentence %d of paragraph %d says that river number %d "
                       "flows north." % (j, i, 10 * i + j) for j in range(sentences))
    qas = []
    for q in range(questions):
      j = (3 * q + 1) % sentences
      answer = "river number %d" % (10 * i + j)
      qas.append({"id": "p%dq%d" % (i, q),
                  "question": "What flows north in sentence %d of paragraph %d?" % (j, i),
                  "answers": [{"text": answer, "answer_start": context.index(answer)}]})
    data.append({"title": "t%d" % i, "paragraphs": [{"context": context, "qas": qas}]})
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": data}, f)
  return str(path)


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  path = _squad_file(tmp_path_factory.mktemp("squad_epochs") / "train.json")
  examples = squad_data.read_squad_examples(path, is_training=True)
  features = squad_data.convert_examples_to_features(
      examples, tokenization.FullTokenizer(VOCAB, True), SEQ, STRIDE, QUERY, True)
  assert len(examples) == 9 and len(features) == 27  # 3 windows per question
  return path, len(examples), len(features)


def _task(tmp_path, train_file, **kw):
  from bert_tf.tasks import squad  # pylint: disable=g-import-not-at-top
  params = squad.SquadParams(
      output_dir=str(tmp_path), train_file=train_file, vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, max_seq_length=SEQ, doc_stride=STRIDE,
      max_query_length=QUERY, **kw)
  return squad.QuestionAnsweringTask(params, do_train=True, do_predict=False)


def _original_steps(num_examples, batch, epochs):
  """The original run_squad.py's own expression, evaluated."""
  spec = importlib.util.find_spec("bert")
  assert spec is not None, "run tools/setup.sh --test (installs bert-tensorflow)"
  with open(os.path.join(os.path.dirname(spec.origin), "run_squad.py"),
            encoding="utf-8") as f:
    code = " ".join(f.read().split())
  m = re.findall(r"num_train_steps = (int\( len\(train_examples\) / "
                 r"FLAGS\.train_batch_size \* FLAGS\.num_train_epochs\))", code)
  assert len(m) == 1, "the original's step count changed"
  flags = types.SimpleNamespace(train_batch_size=batch, num_train_epochs=epochs)
  return eval(m[0], {"len": len, "int": int},  # pylint: disable=eval-used
              {"train_examples": [None] * num_examples, "FLAGS": flags})


def _hf_steps(num_features, batch, epochs):
  """Hugging Face Trainer's max_steps for a train set of num_features windows.

  ``Trainer.set_initial_training_values`` itself, on a torch ``DataLoader``
  as ``Trainer.get_train_dataloader`` makes it (``dataloader_drop_last``
  False by default); the Trainer object is a stand-in (a real one needs
  ``accelerate``) giving one process, no gradient accumulation.
  """
  torch = require("torch")
  transformers = require("transformers")
  fields = transformers.TrainingArguments.__dataclass_fields__
  assert fields["dataloader_drop_last"].default is False
  assert fields["max_steps"].default == -1
  loader = torch.utils.data.DataLoader(list(range(num_features)), batch_size=batch,
                                       drop_last=False)
  assert len(loader) == math.ceil(num_features / batch)
  args = types.SimpleNamespace(max_steps=-1, num_train_epochs=epochs,
                               gradient_accumulation_steps=1)
  trainer = types.SimpleNamespace(get_total_train_batch_size=lambda a: batch,
                                  get_sp_size=lambda: 1,
                                  num_examples=lambda dl: len(dl.dataset))
  values = transformers.Trainer.set_initial_training_values(trainer, args, loader)
  return values[-1]  # max_steps


@pytest.mark.parametrize("batch,epochs", [(4, 2.5), (8, 3.0), (32, 1.0)])
def test_step_counts_match_the_original_and_hugging_face(train_file, tmp_path, caplog,
                                                         batch, epochs):
  path, n_examples, n_features = train_file
  orig = _original_steps(n_examples, batch, epochs)
  hf = _hf_steps(n_features, batch, epochs)
  expected = {(4, 2.5): (5, 18), (8, 3.0): (3, 12), (32, 1.0): (1, 1)}[batch, epochs]
  assert (max(1, orig), hf) == expected
  for mode, steps in (("examples", max(1, orig)), ("features", hf)):
    with caplog.at_level(logging.INFO, logger="absl"):
      caplog.clear()
      task = _task(tmp_path, path, train_batch_size=batch, num_train_epochs=epochs,
                   **({} if mode == "examples" else {"epochs_over": mode}))
    assert task.num_train_steps == steps
    assert task.optimizer_spec().num_train_steps == steps
    assert len(task.train_examples) == n_examples and task.num_train_features == n_features
    per_epoch = min(n_features, round(steps * batch / epochs))
    line = "SQuAD training: %d steps = %d of %d windows per epoch (--epochs_over=%s" % (
        steps, per_epoch, n_features, mode)
    assert line in caplog.text, caplog.text


def test_log_line_wording(train_file, tmp_path, caplog):
  path, _, _ = train_file
  with caplog.at_level(logging.INFO, logger="absl"):
    _task(tmp_path, path, train_batch_size=4, num_train_epochs=2.5)
  assert ("SQuAD training: 5 steps = 8 of 27 windows per epoch (--epochs_over=examples: "
          "int(9 questions / 4 * 2.5); 9 questions)") in caplog.text
  caplog.clear()
  with caplog.at_level(logging.INFO, logger="absl"):
    _task(tmp_path, path, train_batch_size=4, num_train_epochs=2.5, epochs_over="features")
  assert ("SQuAD training: 18 steps = 27 of 27 windows per epoch (--epochs_over=features: "
          "ceil(2.5 * ceil(27 windows / 4)); 9 questions)") in caplog.text


def test_bad_epochs_over_names_the_flag(train_file, tmp_path):
  from bert_tf.tasks import squad  # pylint: disable=g-import-not-at-top
  path, _, _ = train_file
  with pytest.raises(errors.ParamsError, match="epochs_over") as e:
    _task(tmp_path, path, epochs_over="windows")
  assert e.value.argument == "epochs_over"
  with pytest.raises(errors.ParamsError, match="epochs_over"):
    squad.num_train_steps(9, 27, 4, 1.0, "windows")
  field = {f.name: f for f in squad.dataclasses.fields(squad.SquadParams)}["epochs_over"]
  assert field.default == "examples"
  assert field.metadata["choices"] == ("examples", "features")


def test_run_squad_accepts_the_flag():
  from conftest import run_tool  # pylint: disable=g-import-not-at-top
  p = run_tool(["tools/run_squad.py", "--helpfull"], check=False)
  out = p.stdout + p.stderr
  assert "--epochs_over: <examples|features>" in out, out[-2000:]
