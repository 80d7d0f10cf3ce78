"""A classifier, NER or SWAG run stopped mid-epoch and rerun ends as if never stopped.

Each task's training input is checkpointed with the run
(``resumable_input``: batches of row indices from a per-epoch permutation,
:func:`bert_tf.data.classifier_data.index_batches`; the tensorflow-text
preprocessing stays in the pipeline). The cheap checks: the iterator of
every fine-tuning pipeline (the classifier's with and without
``bucket_by_length``, NER's; SWAG's, slow: its tracing takes 6 s) saved
mid-stream and restored into a fresh pipeline yields the batches the first
one goes on to yield, under tf.data's ``FAIL`` external-state policy, from a
checkpoint under 200 kB; every epoch is a seeded permutation.

The slow check is the user's case, per task: the tiny BERT with
``deterministic`` trained 2 epochs straight, and stopped at the first step
of its second epoch (``stop_at_step``: a checkpoint there) then rerun, ends
with bit-identical weights, optimizer slots and dev figures. The runs go
through :class:`bert_tf.runner.Runner` in one subprocess (this file run as a
script, ``TF_ENABLE_ONEDNN_OPTS=0`` as the tools set it for
``--deterministic``), each task's data read once. Without the saved input
position the rerun starts its data over and every weight differs (checked
by setting ``resumable_input = False``: 3 of 3 tasks fail).
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import MC_DIR, MOVIE_DIR, NER_DIR, ROOT, TINY_CONFIG, VOCAB

KINDS = ("classifier", "ner", "swag")


def _movie_slice(d, train_rows=32, dev_rows=16):
  """The first rows of the movie-review train and dev files (SST-2 layout)."""
  os.makedirs(d, exist_ok=True)
  for name, n in (("train.tsv", train_rows), ("dev.tsv", dev_rows)):
    with open(os.path.join(MOVIE_DIR, name), encoding="utf-8") as f:
      lines = f.read().splitlines()[:n + 1]
    with open(os.path.join(d, name), "w", encoding="utf-8") as f:
      f.write("\n".join(lines) + "\n")
  return d


def build_task(kind, root):
  """The task of ``kind`` on a few dozen rows of data/, tiny BERT, 2 epochs,
  ``deterministic``; output under ``root``."""
  from bert_tf.tasks import classification, swag, tagging  # pylint: disable=g-import-not-at-top
  common = dict(output_dir=os.path.join(root, "whole"), vocab_file=VOCAB,
                bert_config_file=TINY_CONFIG, max_seq_length=32, learning_rate=1e-3,
                num_train_epochs=2, iterations_per_loop=1, save_checkpoints_steps=2,
                deterministic=True, seed=7)
  if kind == "classifier":  # bucket_by_length: the default
    p = classification.ClassifierParams(
        task_name="sst-2", data_dir=_movie_slice(os.path.join(root, "data")),
        train_batch_size=8, eval_batch_size=16, **common)
    return classification.ClassificationTask(p, do_train=True, do_eval=True)
  if kind == "ner":
    from bert_tf.data import conll  # pylint: disable=g-import-not-at-top
    labels = conll.label_list_from(conll.read_conll(os.path.join(NER_DIR, "train.txt")) +
                                   conll.read_conll(os.path.join(NER_DIR, "dev.txt")))
    p = tagging.NerParams(data_dir=NER_DIR, do_train=True, do_eval=True, max_examples=24,
                          label_list=tuple(labels),
                          doc_stride=16, train_batch_size=8, **common)
    return tagging.TokenTaggingTask(p)
  p = swag.SwagParams(data_dir=MC_DIR, do_train=True, do_eval=True, max_examples=16,
                      train_batch_size=4, **common)
  return swag.MultipleChoiceTask(p)


def run_kind(kind, root):
  """Worker: an uninterrupted run (``whole``), then a run stopped at the
  first step of epoch 2 and the same run again (``resumed``); each run's
  final variables go to ``<run>.npz``, its log lines to ``<run>.log``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import runner  # pylint: disable=g-import-not-at-top
  task = build_task(kind, root)
  ends = task.eval_at_steps()
  stop = ends[0] + 1
  assert len(ends) == 2 and stop < ends[1] == task.num_train_steps, (ends, task.num_train_steps)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  for name, stop_at in (("whole", None), ("resumed", stop), ("resumed", None)):
    t = task.with_params(dataclasses.replace(task.params,
                                             output_dir=os.path.join(root, name)))
    lines, final = [], {}
    runner.Runner(runner.RunnerParams.from_params(t.params, stop_at_step=stop_at),
                  lines.append).run(
        t, strategy, do_train=True, do_eval=True, eval_at_steps=t.eval_at_steps(),
        on_finish=lambda m, o, final=final: final.update(
            {"%04d" % i: v.numpy() for i, v in enumerate(m.variables + o.variables)}))
    with open(os.path.join(root, name + ".log"), "a", encoding="utf-8") as f:
      f.write("\n".join(lines) + "\n")
    if stop_at is None:
      np.savez(os.path.join(root, name + ".npz"), **final)
  with open(os.path.join(root, "plan.json"), "w", encoding="utf-8") as f:
    json.dump({"stop": stop, "steps": task.num_train_steps}, f)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """The three tasks' runs, in one subprocess (see the module docstring)."""
  root = str(tmp_path_factory.mktemp("resume"))
  env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
  env["TF_ENABLE_ONEDNN_OPTS"] = "0"  # as the tools set it for --deterministic
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), root] + list(KINDS),
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
  return root, proc


def _results(run_dir):
  """``eval_results.txt`` as a dict, the run's directory written RUN."""
  with open(os.path.join(run_dir, "eval_results.txt"), encoding="utf-8") as f:
    return dict(l.replace(run_dir, "RUN").split(" = ", 1) for l in f.read().splitlines())


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_stopped_mid_epoch_then_rerun_equals_an_uninterrupted_run(runs, kind):
  root, proc = runs
  d = os.path.join(root, kind)
  failed = os.path.join(d, "error.txt")
  assert not os.path.exists(failed), open(failed, encoding="utf-8").read()
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  plan = json.load(open(os.path.join(d, "plan.json"), encoding="utf-8"))
  log = open(os.path.join(d, "resumed.log"), encoding="utf-8").read()
  assert "resumed from %s at step %d" % (os.path.join(d, "resumed", "ckpt-%d" % plan["stop"]),
                                         plan["stop"]) in log, log[-3000:]
  a, b = np.load(os.path.join(d, "whole.npz")), np.load(os.path.join(d, "resumed.npz"))
  assert sorted(a.files) == sorted(b.files) and len(a.files) > 40
  differ = [k for k in a.files if a[k].tobytes() != b[k].tobytes()]
  assert not differ, "%d of %d tensors differ: %s" % (len(differ), len(a.files), differ[:5])
  whole = _results(os.path.join(d, "whole"))
  resumed = _results(os.path.join(d, "resumed"))
  assert whole == resumed and whole["global_step"] == str(plan["steps"])
  best = [json.load(open(os.path.join(d, r, "best", "best.json"), encoding="utf-8"))
          for r in ("whole", "resumed")]
  assert best[0] == best[1]  # the same best dev model (step, figures)


# --- the pipelines' iterators (cheap) ----------------------------------------


@pytest.fixture(scope="module")
def preprocessor():
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  return preprocessing.BertPreprocessor(VOCAB, True, 32)


@pytest.fixture(scope="module")
def pipelines(preprocessor, tmp_path_factory):
  """name -> a function making that training pipeline afresh: the
  classifier's (with and without length buckets), NER's and SWAG's, each
  under tf.data's FAIL external-state policy (any external state would fail
  the save)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data import classifier_data as cd  # pylint: disable=g-import-not-at-top
  from bert_tf.data import swag as swag_data  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import swag, tagging  # pylint: disable=g-import-not-at-top
  task = cd.get_task("sst-2")
  ex = cd.read_split(task, os.path.join(MOVIE_DIR, "train.tsv"), task.train)
  texts, labels = ex.texts_a[:40], ex.labels[:40]
  a, b, y = swag_data.choice_arrays(swag_data.read_swag_examples(
      os.path.join(MC_DIR, "train.csv"), limit=12))
  ner = tagging.TokenTaggingTask(tagging.NerParams(
      data_dir=NER_DIR, output_dir=str(tmp_path_factory.mktemp("ner")), vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, do_train=True, max_seq_length=32, doc_stride=16,
      max_examples=24, seed=3))
  makers = {
      "classifier": lambda: cd.examples_dataset(
          preprocessor, texts, None, labels, 8, shuffle=True, seed=3, drop_remainder=True),
      "classifier_bucketed": lambda: cd.examples_dataset(
          preprocessor, texts, None, labels, 4, shuffle=True, seed=3, drop_remainder=True,
          bucket_boundaries=(12, 16, 24)),
      "ner": lambda: ner.train_dataset(8, None),
      "swag": lambda: swag.choices_dataset(preprocessor, a, b, y, 4, shuffle=True, seed=3,
                                           drop_remainder=True),
  }
  options = tf.data.Options()
  options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.FAIL
  return {k: (lambda make=make: make().with_options(options)) for k, make in makers.items()}


@pytest.mark.parametrize("name", ["classifier", "classifier_bucketed", "ner",
                                  pytest.param("swag", marks=pytest.mark.slow)])
def test_pipeline_iterator_restores_its_exact_position(pipelines, name, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  flat = lambda batches: [x.numpy() for x in tf.nest.flatten(batches)]  # pylint: disable=unnecessary-lambda-assignment
  it = iter(pipelines[name]())
  start = [next(it) for _ in range(7)]  # past the first epoch
  path = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ckpt"))
  want = [next(it) for _ in range(6)]
  again = iter(pipelines[name]())
  tf.train.Checkpoint(iterator=again).restore(path).assert_consumed()
  got = [next(again) for _ in range(6)]
  assert all(np.array_equal(x, z) for x, z in zip(flat(want), flat(got)))
  # (not the stream's start again: the position really was restored)
  assert not all(np.array_equal(x, z) for x, z in zip(flat(want[:1]), flat(start[:1])))
  # The state is indices and a few prefetched batches: small.
  assert os.path.getsize(path + ".data-00000-of-00001") < 200_000


def test_index_batches_epochs_are_seeded_permutations():
  from bert_tf.data import classifier_data as cd  # pylint: disable=g-import-not-at-top
  n = 10
  stream = np.concatenate([b.numpy() for b in cd.index_batches(n, 5, shuffle=True, seed=1).take(8)])
  epochs = stream.reshape(4, n)
  assert all(sorted(e) == list(range(n)) for e in epochs)
  assert len({tuple(e) for e in epochs}) == 4  # a new order every epoch
  again = np.concatenate([b.numpy() for b in cd.index_batches(n, 5, shuffle=True, seed=1).take(8)])
  other = np.concatenate([b.numpy() for b in cd.index_batches(n, 5, shuffle=True, seed=2).take(8)])
  assert (stream == again).all() and not (stream == other).all()
  assert [list(b.numpy()) for b in cd.index_batches(5, 2)] == [[0, 1], [2, 3], [4]]
  with pytest.raises(ValueError):
    cd.index_batches(5, 2, bucket_boundaries=(3,))
  with pytest.raises(ValueError):
    cd.index_batches(0, 2, shuffle=True)


if __name__ == "__main__":  # the worker of the `runs` fixture: ROOT KIND...
  import traceback  # pylint: disable=g-import-not-at-top
  for _kind in sys.argv[2:]:
    _root = os.path.join(sys.argv[1], _kind)
    os.makedirs(_root, exist_ok=True)
    try:
      run_kind(_kind, _root)
    except Exception:  # pylint: disable=broad-except
      with open(os.path.join(_root, "error.txt"), "w", encoding="utf-8") as _f:
        _f.write(traceback.format_exc())
