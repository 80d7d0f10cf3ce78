"""The hyperparameter search (bert_tf.tuning, tools/tune.py; issue 39).

A tiny BERT (data/configs/bert_tiny_config.json) on a balanced 48/16-row
slice of data/movie_review_sentences, one epoch of batch 8 (6 steps) per
trial. The module fixture runs one 2-configuration search in-process
through the Python API; the slow tests run ``tools/tune.py`` in subprocesses
(2 workers on one SQLite study; ``kill -9`` mid-trial and a rerun, which ends
bit-identical to an uninterrupted search with ``--deterministic``).
"""

import collections
import csv
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import MOVIE_DIR, ROOT, TINY_CONFIG, VOCAB, run_tool

from bert_tf import errors
from bert_tf import tuning
from bert_tf.data import classifier_data
from bert_tf.tasks.classification import ClassifierParams

TEST_SENTENCES = ["a gorgeous , witty , seductive movie .",
                  "the plot is nothing but boilerplate clichés .",
                  "an utterly charming and hilarious film .",
                  "it 's a bore ."]


def _balanced(path, n):
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  out, count = [lines[0]], collections.Counter()
  for line in lines[1:]:
    label = line.split("\t")[-1]
    if count[label] < n // 2:
      out.append(line)
      count[label] += 1
  return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("movie")
  (d / "train.tsv").write_text(_balanced(os.path.join(MOVIE_DIR, "train.tsv"), 48))
  (d / "dev.tsv").write_text(_balanced(os.path.join(MOVIE_DIR, "dev.tsv"), 16))
  (d / "test.tsv").write_text("index\tsentence\n" + "".join(
      "%d\t%s\n" % (i, s) for i, s in enumerate(TEST_SENTENCES)))
  return str(d)


def _space(path, **values):
  space = {"learning_rate": [1e-3, 1e-4], "train_batch_size": [8],
           "num_train_epochs": [1]}
  space.update(values)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(space, f)
  return str(path)


def _params(data_dir, output_dir, **kw):
  values = dict(task_name="sst-2", data_dir=data_dir, output_dir=str(output_dir),
                bert_config_file=TINY_CONFIG, vocab_file=VOCAB, max_seq_length=32,
                eval_batch_size=16, iterations_per_loop=2, save_checkpoints_steps=2)
  values.update(kw)
  return ClassifierParams(**values)


def _export(model, run_dir, export_dir):
  from bert_tf import export  # pylint: disable=g-import-not-at-top
  return export.export_model(model, run_dir, export_dir)


def _rows(output_dir):
  with open(os.path.join(output_dir, tuning.RESULTS_CSV), encoding="utf-8") as f:
    return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def searched(tmp_path_factory, data_dir):
  """One finished 2-configuration search (API), with prediction and export;
  counts the reads of the data files."""
  out = tmp_path_factory.mktemp("search")
  space = _space(out / "space.json")
  reads = collections.Counter()
  real = classifier_data.read_split

  def counting(task, path, split, **kwargs):
    reads[os.path.basename(path)] += 1
    return real(task, path, split, **kwargs)

  classifier_data.read_split = counting
  lines = []
  try:
    search = tuning.Search("classifier", _params(data_dir, out / "run"),
                           tuning.SearchParams(search_space=space),
                           exporter=_export, do_predict=True, print_fn=lines.append)
    best = search.run()
  finally:
    classifier_data.read_split = real
  return {"out": str(out / "run"), "space": space, "best": best, "lines": lines,
          "reads": reads, "search": search}


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_results_files_progress_and_best_trial(searched):
  out, best = searched["out"], searched["best"]
  rows = _rows(out)
  assert list(rows[0]) == ["trial", "learning_rate", "num_train_epochs",
                           "train_batch_size", "seed", "metric", "steps",
                           "wall_seconds", "status", "error"]
  assert sorted(float(r["learning_rate"]) for r in rows) == [1e-4, 1e-3]
  assert {r["status"] for r in rows} == {"COMPLETE"}
  assert {r["steps"] for r in rows} == {"6"}  # int(48 / 8 * 1)
  for r in rows:  # the metric is the trial's own kept dev model's
    with open(os.path.join(out, "trials", r["trial"], "best", "best.json")) as f:
      assert float(r["metric"]) == pytest.approx(json.load(f)["value"])
  md = open(os.path.join(out, tuning.RESULTS_MD), encoding="utf-8").read()
  assert md.count("| COMPLETE |") == 2 and "eval_accuracy" in md
  with open(os.path.join(out, tuning.RESULTS_PNG), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  done = [l for l in searched["lines"] if l.startswith("[")]
  assert len(done) == 2
  assert done[-1].startswith("[2/2] trial ") and done[-1].endswith("eta 0:00")
  assert "learning_rate=" in done[0] and "eval_accuracy=" in done[0]
  with open(os.path.join(out, tuning.BEST_FILE), encoding="utf-8") as f:
    saved = json.load(f)
  assert saved == json.loads(json.dumps(best))
  assert saved["metric"] == max(float(r["metric"]) for r in rows)
  assert saved["metric_name"] == "eval_accuracy"
  assert {"learning_rate", "train_batch_size", "num_train_epochs", "seed",
          "run_dir", "export_path"} <= set(saved)
  assert saved["export_path"].startswith(os.path.join(out, "export"))


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_data_read_once_per_search(searched):
  # train.tsv, dev.tsv and test.tsv read once for the two trials
  assert dict(searched["reads"]) == {"train.tsv": 1, "dev.tsv": 1, "test.tsv": 1}


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_best_export_serves_the_trials_predictions(searched):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  best = searched["best"]
  with open(os.path.join(best["run_dir"], "test_results.tsv"), encoding="utf-8") as f:
    want = np.array([[float(x) for x in l.split("\t")] for l in f.read().splitlines()])
  fn = tf.saved_model.load(best["export_path"]).signatures["serving_default"]
  (name,) = fn.structured_input_signature[1]
  got = fn(**{name: tf.constant(TEST_SENTENCES)})["probabilities"].numpy()
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_rerun_runs_nothing_and_other_settings_are_refused(searched, data_dir):
  out = searched["out"]
  logs = {d: open(os.path.join(out, "trials", d, "log.txt")).read()
          for d in os.listdir(os.path.join(out, "trials"))}
  lines = []
  again = tuning.Search("classifier", _params(data_dir, out),
                        tuning.SearchParams(search_space=searched["space"]),
                        do_predict=True, print_fn=lines.append)
  best = again.run()
  assert not [l for l in lines if "started" in l]  # no trial ran again
  assert best["run_dir"] == searched["best"]["run_dir"]
  assert best["export_path"] == searched["best"]["export_path"]  # not exported twice
  assert logs == {d: open(os.path.join(out, "trials", d, "log.txt")).read() for d in logs}
  assert len(again.study.get_trials()) == 2
  other = _space(os.path.join(os.path.dirname(out), "other.json"),
                 learning_rate=[1e-3, 5e-5])
  with pytest.raises(errors.ParamsError) as e:
    tuning.Search("classifier", _params(data_dir, out, warmup_proportion=0.2),
                  tuning.SearchParams(search_space=other), do_predict=True).open_study()
  message = str(e.value)
  assert "search_space.learning_rate=[0.001, 0.0001] (the search) vs [0.001, 5e-05] (now)" \
      in message, message
  assert "--warmup_proportion=0.1 (the search) vs 0.2 (now)" in message, message


@pytest.mark.parametrize("space, fragment", [
    ({"learnin_rate": [1e-4]}, "unknown hyperparameter 'learnin_rate'"),
    ({"learning_rate": []}, "learning_rate has no values"),
    ({"learning_rate": {"low": 1e-4, "high": 1e-5}}, "range is empty (low 0.0001 >= high 1e-05)"),
    ({"learning_rate": {"low": 0, "high": 1e-4, "log": True}}, "log range needs low > 0"),
    ({"train_batch_size": [16.5]}, "train_batch_size value 16.5 is not an int"),
    ({"optimizer": ["adam"]}, "optimizer values must be among"),
    ({"seed": [1, 2]}, "seed is set by --num_restarts"),
    ({"max_seq_length": [64, 128]}, "max_seq_length changes the featurized data"),
])
def test_bad_search_space_is_named(tmp_path, space, fragment):
  path = tmp_path / "space.json"
  path.write_text(json.dumps(space))
  with pytest.raises(errors.ParamsError) as e:
    tuning.load_search_space(str(path), ClassifierParams)
  assert fragment in str(e.value) and str(path) in str(e.value)
  assert e.value.argument == "search_space"


def test_paper_and_glue_spaces():
  paper = tuning.load_search_space("paper", ClassifierParams)
  assert paper.is_grid and paper.grid_size() == 18
  assert paper.params == {"learning_rate": [5e-5, 3e-5, 2e-5],
                          "train_batch_size": [16, 32], "num_train_epochs": [2.0, 3.0, 4.0]}
  glue = tuning.load_search_space("glue", ClassifierParams)
  assert glue.grid_size() == 4 and glue.params["train_batch_size"] == [32]


def test_bad_metric_and_batch_are_named_before_training(tmp_path, data_dir):
  space = _space(tmp_path / "space.json")
  with pytest.raises(errors.ParamsError) as e:
    tuning.Search("classifier", _params(data_dir, tmp_path / "a"),
                  tuning.SearchParams(search_space=space, metric="eval_f1"))
  assert "does not report 'eval_f1'" in str(e.value) and "eval_accuracy" in str(e.value)
  big = _space(tmp_path / "big.json", train_batch_size=[8, 64])
  with pytest.raises(errors.ParamsError) as e:
    tuning.Search("classifier", _params(data_dir, tmp_path / "b"),
                  tuning.SearchParams(search_space=big))
  assert "train_batch_size 64 is above the 48 training rows" in str(e.value)
  assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "b")


def test_every_searchable_kind_runs_through_the_registry_with_one_job_call():
  """The search's task table is the registry's searchable kinds, and each
  kind's job takes the one call a trial makes (no per-task wrapper)."""
  import inspect  # pylint: disable=g-import-not-at-top
  from bert_tf import task_kinds  # pylint: disable=g-import-not-at-top
  assert list(tuning.TASKS) == [k.name for k in task_kinds.searchable_kinds()] == [
      "classifier", "squad", "ner", "swag"]
  for name, kind in tuning.TASKS.items():
    assert kind.attribute("params_class").__name__.endswith("Params"), name
    inspect.signature(kind.attribute("job")).bind(
        "params", "strategy", do_train=True, do_eval=True, do_predict=False,
        print_fn=print, exporter=None, task=None)
  assert "features" not in tuning.TASKS and "pretraining" not in tuning.TASKS


def test_a_dead_local_trial_is_failed_and_requeued_through_optuna_public_api(tmp_path):
  """The last grid point's trial of a dead process on this host (the other
  finished) is failed at once and queued again with its parameters and run
  directory, as a Ctrl-C'd trial is by ``requeue``; Optuna's GridSampler
  stops ``optimize`` when told its last point's result, which ``Study.tell``
  outside ``optimize`` refuses, so the failing goes through a second study
  object."""
  import socket  # pylint: disable=g-import-not-at-top
  from bert_tf.tuning import study as study_lib  # pylint: disable=g-import-not-at-top
  url = "sqlite:///" + str(tmp_path / "search.db")
  space = tuning.SearchSpace("grid", {"learning_rate": [1e-3, 1e-4]})
  storage = study_lib.open_storage(url, heartbeat_seconds=60, max_retries=3)
  study = study_lib.open_study(storage, url, "t", space, [1], 1, "auto", "eval_accuracy", {})
  dead = subprocess.Popen([sys.executable, "-c", "pass"])
  dead.wait()
  done, killed = study.ask(), study.ask()
  for t in (done, killed):
    study_lib.suggest(t, space, ClassifierParams)
    t.suggest_categorical("seed", [1])
    t.set_user_attr("run_index", t.number)
  killed.set_user_attr("worker", {"host": socket.gethostname(), "pid": dead.pid})
  study.tell(done, 0.5)
  lines = []
  study_lib.fail_dead_local_trials(study, storage, 3, lambda t: t.user_attrs["run_index"],
                                   lines.append)
  assert lines == ["trial 1: its process (pid %d) died; resuming it" % dead.pid]
  trials = study.get_trials()
  assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "WAITING"]
  assert study_lib.dead_process_error(trials[1]) == (
      "its process (pid %d) died; retried" % dead.pid)
  retry = trials[2]
  assert retry.params == trials[1].params and retry.user_attrs == {"run_index": 1}
  assert retry.system_attrs["failed_trial"] == 1
  study_lib.requeue(study, 1)  # an interrupted trial, by its number
  assert [t.params for t in study.get_trials()][3] == trials[1].params


@pytest.mark.parametrize("written_by", ["another_model", "no_model"])
def test_a_kept_checkpoint_that_does_not_fit_fails_in_one_line_not_an_export(
    tmp_path, data_dir, written_by):
  """The best trial's checkpoint is read strictly: one written by another
  model (intermediate size 256, not 512), or one without the model, is an
  error naming it, and nothing is exported (read with ``expect_partial``
  only, the second exported the rebuilt model's untrained weights without
  a word)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  space = _space(tmp_path / "space.json")
  if written_by == "another_model":
    config = json.loads(open(TINY_CONFIG, encoding="utf-8").read())
    (tmp_path / "other.json").write_text(json.dumps(dict(config, intermediate_size=256)))
    other = tuning.Search("classifier", _params(
        data_dir, tmp_path / "other", bert_config_file=str(tmp_path / "other.json")),
                          tuning.SearchParams(search_space=space))
    objects = other.task.checkpoint_objects(other.task.build_model())
  else:
    objects = {"step": tf.Variable(3)}
  run = tmp_path / "run" / "trials" / "0"
  prefix = tf.train.CheckpointManager(tf.train.Checkpoint(**objects), str(run),
                                      max_to_keep=1).save()
  exported = []
  search = tuning.Search("classifier", _params(data_dir, tmp_path / "run"),
                         tuning.SearchParams(search_space=space),
                         exporter=lambda *args: exported.append(args), print_fn=print)
  best = {"trial": 0, "learning_rate": 1e-3, "train_batch_size": 8, "num_train_epochs": 1,
          "seed": 12345, "metric": 0.5, "run_dir": str(run)}
  with pytest.raises(errors.CheckpointError) as e:
    search._finish(best)  # pylint: disable=protected-access
  message = str(e.value)
  assert "\n" not in message and not isinstance(e.value, errors.CorruptCheckpointError)
  assert message.startswith("trial %s: checkpoint %r does not fit the model" % (run, prefix))
  if written_by == "another_model":
    assert "512" in message and "256" in message, message  # the variable's two shapes
  assert not exported and not os.path.exists(tmp_path / "run" / tuning.BEST_FILE)


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_failing_trials_are_recorded_and_all_failed_is_an_error(tmp_path, data_dir):
  # lr 1e30 diverges: eval_loss is NaN, the trial fails with that error, the
  # search goes on to the next trial; with every trial failed it says so.
  space = _space(tmp_path / "space.json", learning_rate=[1e30, 1e31])
  lines = []
  with pytest.raises(errors.SearchError) as e:
    tuning.Search("classifier", _params(data_dir, tmp_path / "run"),
                  tuning.SearchParams(search_space=space, metric="eval_loss"),
                  print_fn=lines.append).run()
  assert str(e.value).startswith("every trial failed: trial 0: FloatingPointError: "
                                 "eval_loss is nan")
  rows = _rows(tmp_path / "run")
  assert [r["status"] for r in rows] == ["FAIL", "FAIL"]
  assert all("eval_loss is nan" in r["error"] for r in rows)
  assert len([l for l in lines if "FAILED: FloatingPointError" in l]) == 2


def _tool(data_dir, out, space, *extra):
  return [sys.executable, os.path.join(ROOT, "tools", "tune.py"), "--task=classifier",
          "--task_name=sst-2", "--data_dir=" + data_dir, "--output_dir=" + str(out),
          "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB,
          "--max_seq_length=32", "--eval_batch_size=16", "--search_space=" + space,
          "--export=false"] + list(extra)


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_tool_names_a_bad_flag_in_one_line(tmp_path, data_dir):
  space = _space(tmp_path / "space.json", learning_rate={"low": 1, "high": 1})
  proc = run_tool(_tool(data_dir, tmp_path / "out", space)[1:], check=False)
  assert proc.returncode != 0
  assert proc.stderr.strip().splitlines()[-1] == (
      "tune: error: --search_space: search space %s: learning_rate range is empty "
      "(low 1 >= high 1)" % space)
  proc = run_tool([os.path.join(ROOT, "tools", "tune.py")], check=False)
  assert proc.returncode != 0 and "--task is required" in proc.stderr


@pytest.mark.slow
def test_two_workers_share_a_grid_each_configuration_once(tmp_path, data_dir):
  # 2 learning rates x 2 restarts = 4 grid points, 2 processes, one SQLite study.
  space = _space(tmp_path / "space.json")
  out = tmp_path / "out"
  cmd = _tool(data_dir, out, space, "--num_restarts=2", "--iterations_per_loop=6")
  os.makedirs(out)
  procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True) for _ in range(2)]
  logs = [p.communicate(timeout=900)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], logs
  rows = _rows(out)
  assert len(rows) == 4 and {r["status"] for r in rows} == {"COMPLETE"}
  assert sorted((float(r["learning_rate"]), int(r["seed"])) for r in rows) == [
      (1e-4, 12345), (1e-4, 12346), (1e-3, 12345), (1e-3, 12346)]
  started = [l for log in logs for l in log.splitlines() if "started:" in l]
  assert len(started) == 4, logs  # every configuration ran exactly once
  assert all(log.count("started:") >= 1 for log in logs), logs  # both workers worked
  for r in rows:
    log = open(os.path.join(out, "trials", r["trial"], "log.txt")).read()
    assert log.count("fine-tuning sst-2") == 1


@pytest.mark.slow
def test_kill_9_mid_trial_then_the_same_command_resumes_it(tmp_path, data_dir):
  space = _space(tmp_path / "space.json", num_train_epochs=[2])  # 12 steps a trial
  out = tmp_path / "out"
  flags = ("--iterations_per_loop=1", "--save_checkpoints_steps=1", "--deterministic")
  cmd = _tool(data_dir, out, space, *flags)
  proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
  second = out / "trials" / "1"
  deadline = time.time() + 600
  while time.time() < deadline and proc.poll() is None:
    if second.exists() and any(f.startswith("ckpt-") and f.endswith(".index")
                               and f != "ckpt-1.index" for f in os.listdir(second)):
      break
    time.sleep(0.2)
  assert proc.poll() is None, "the search ended before its second trial checkpointed"
  os.killpg(proc.pid, signal.SIGKILL)
  proc.wait()
  first = _rows(out)
  assert [(r["trial"], r["status"]) for r in first] == [("0", "COMPLETE")]
  resume = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
  assert resume.returncode == 0, resume.stdout + resume.stderr
  assert "trial 1: its process (pid %d) died; resuming it" % proc.pid in resume.stdout
  assert "trial 0 started" not in resume.stdout  # the finished trial is not rerun
  log = (second / "log.txt").read_text()
  assert "resumed from %s" % os.path.join(str(second), "ckpt-") in log
  rows = _rows(out)
  assert [(r["trial"], r["status"]) for r in rows] == [("0", "COMPLETE"), ("1", "COMPLETE")]
  assert rows[0]["metric"] == first[0]["metric"]
  assert rows[1]["steps"] == "12"
  assert (out / "trials" / "0" / "log.txt").read_text().count("fine-tuning sst-2") == 1

  # Exactly as if never killed: trial 1's configuration searched without a
  # kill (--deterministic; the same seed) ends with the same weights,
  # optimizer slots, dev figures, kept model and metric. (Its input position
  # is in the checkpoint: without it the resumed trial re-reads its data
  # from the start and ends elsewhere.)
  from test_squad_resume import variables  # pylint: disable=g-import-not-at-top
  ref = tmp_path / "ref"
  one = _space(tmp_path / "one.json", num_train_epochs=[2],
               learning_rate=[float(rows[1]["learning_rate"])])
  subprocess.run(_tool(data_dir, ref, one, *flags), cwd=ROOT, check=True,
                 capture_output=True, timeout=900)
  [alone] = _rows(ref)
  assert (alone["learning_rate"], alone["steps"], alone["status"]) == (
      rows[1]["learning_rate"], "12", "COMPLETE")
  assert alone["metric"] == rows[1]["metric"]
  resumed, uninterrupted = variables(str(second)), variables(str(ref / "trials" / "0"))
  assert sorted(resumed) == sorted(uninterrupted) and len(resumed) > 20
  differ = [k for k in resumed if resumed[k].tobytes() != uninterrupted[k].tobytes()]
  assert not differ, "%d of %d tensors differ: %s" % (len(differ), len(resumed), differ[:5])
  for name in ("eval_results.txt", os.path.join("best", "best.json"),
               os.path.join("best", "eval_results.txt")):
    assert ((second / name).read_text().replace(str(second), "RUN") ==
            (ref / "trials" / "0" / name).read_text().replace(str(ref / "trials" / "0"),
                                                              "RUN")), name


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_range_search_with_restarts_and_holdout(tmp_path, data_dir):
  # A range: TPE samples 1 configuration, run with 2 seeds (the restart is
  # queued with the same learning rate); selection on 25% of train held out,
  # each kept model reported on the dev set.
  space = _space(tmp_path / "space.json",
                 learning_rate={"low": 1e-4, "high": 1e-3, "log": True})
  lines = []
  best = tuning.Search("classifier", _params(data_dir, tmp_path / "run"),
                       tuning.SearchParams(search_space=space, num_trials=1,
                                           num_restarts=2, holdout_fraction=0.25),
                       print_fn=lines.append).run()
  rows = _rows(tmp_path / "run")
  assert [r["seed"] for r in rows] == ["12345", "12346"]
  assert rows[0]["learning_rate"] == rows[1]["learning_rate"]
  assert 1e-4 <= float(rows[0]["learning_rate"]) <= 1e-3
  assert {r["steps"] for r in rows} == {"4"}  # int(36 / 8 * 1): 12 of 48 rows held out
  for r in rows:
    log = open(os.path.join(r["run_dir"] if "run_dir" in r else
                            os.path.join(tmp_path, "run", "trials", r["trial"]),
                            "log.txt")).read()
    assert "dev (12 examples)" in log  # selected on the held-out slice
    assert "reporting the kept model on the dev set:\ndev (16 examples)" in log
    assert float(r["dev_metric"]) == pytest.approx(float(
        log.split("dev (16 examples): accuracy=")[1].split()[0]), abs=1e-4)
  assert best["metric"] == max(float(r["metric"]) for r in rows)
  assert len([l for l in lines if " dev eval_accuracy=" in l]) == 2
