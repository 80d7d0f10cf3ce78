"""The rough edges a newcomer hit (issue 40, items 2-8), each fixed and pinned.

* Ctrl-C / SIGTERM during training: a checkpoint at the current step, one
  line, exit 130 / 143; the rerun resumes bit-identically.
* A vocab with a duplicate line (a file cut mid-line): one line naming the
  token and both lines.
* A wrong ``--init_checkpoint`` is the first error reported.
* Undecodable bytes: one warning (file, first line, count), or
  ``--strict_utf8``'s one-line refusal.
* ``--do_predict`` on a labelled test file: metrics, a headed
  ``predictions.tsv``, nothing overwritten silently.
* The last lines name the exported model; ``eval_results.txt`` says where
  its figures are.
* Help, defaults, the case check, TensorBoard, the ETA, ties.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, SAMPLE_TEXT, TINY_CONFIG, VOCAB, run_tool

NOISE = ("Traceback", "I0000", "E0000", "W0000", "FailedPrecondition")


def _lines(text):
  return [l for l in text.splitlines() if l.strip()]


# --- a wrong --init_checkpoint is the first error ---------------------------


@pytest.mark.parametrize("tool,extra", [
    ("tools/run_classifier.py", ["--task_name=sst-2", "--data_dir=data/movie_review_sentences",
                                 "--do_train"]),
    ("tools/run_pretraining.py", ["--input_file=nothing.tfrecord", "--do_train"]),
])
def test_missing_init_checkpoint_is_the_first_error(tmp_path, tool, extra):
  p = run_tool([tool, "--init_checkpoint=no_such_ckpt", "--output_dir=" + str(tmp_path / "o")]
               + extra, check=False)
  assert p.returncode != 0
  assert _lines(p.stderr) == [
      "%s: error: --init_checkpoint: 'no_such_ckpt' does not exist"
      % os.path.basename(tool)[:-3]], p.stderr[-3000:]


def test_resolve_config_and_vocab_checks_the_checkpoint_first():
  from bert_tf import errors  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import classification, fine_tuning, squad, tagging  # pylint: disable=g-import-not-at-top
  for cls in (classification.ClassifierParams, squad.SquadParams, tagging.NerParams):
    names = {f for f in cls.__dataclass_fields__}
    kwargs = {k: "x" for k in ("output_dir", "task_name", "data_dir") if k in names}
    params = cls(init_checkpoint="no_such_ckpt", **kwargs)
    with pytest.raises(errors.CheckpointError) as e:
      fine_tuning.resolve_config_and_vocab(params)
    assert e.value.argument == "init_checkpoint" and "'no_such_ckpt' does not exist" in str(e.value)
  # A checkpoint prefix (ckpt-N.index) and a directory exist.
  fine_tuning.check_init_checkpoint(os.path.dirname(TINY_CONFIG))
  fine_tuning.check_init_checkpoint(None)


# --- duplicate vocab lines --------------------------------------------------


def _cut_vocab(path, keep=5000):
  """The first ``keep`` lines of the vocab, then a later line cut mid-word so
  that it repeats an earlier token; returns (token, its first line, cut line)."""
  with open(VOCAB, encoding="utf-8") as f:
    lines = f.read().splitlines()
  first = {t: i + 1 for i, t in enumerate(lines[:keep])}
  for line in lines[keep:]:
    for k in range(len(line) - 1, 1, -1):
      if line[:k] in first and not line[:k].startswith("["):
        with open(path, "w", encoding="utf-8") as f:
          f.write("\n".join(lines[:keep] + [line[:k]]))  # no final newline: cut
        return line[:k], first[line[:k]], keep + 1
  raise AssertionError("no cut line found")


def test_vocab_cut_mid_line_is_one_line(tmp_path):
  vocab = tmp_path / "vocab.txt"
  token, first, cut = _cut_vocab(vocab)
  p = run_tool(["tools/run_classifier.py", "--task_name=sst-2",
                "--data_dir=data/movie_review_sentences", "--bert_config_file=" + TINY_CONFIG,
                "--vocab_file=" + str(vocab), "--do_train",
                "--output_dir=" + str(tmp_path / "o")], check=False)
  assert p.returncode != 0
  assert _lines(p.stderr) == [
      "run_classifier: error: %s line %d: duplicate vocab token %r (also on line %d); "
      "every line must be a distinct token (id = line number): the file ends "
      "mid-line, copy the whole vocab file" % (vocab, cut, token, first)], p.stderr[-3000:]
  assert not any(n in p.stderr + p.stdout for n in NOISE)


# --- Ctrl-C / SIGTERM during training ---------------------------------------


def _squad_command(tmp_path, out):
  return ["tools/run_squad.py", "--do_train",
          "--train_file=" + str(tmp_path / "train.json"),
          "--bert_config_file=" + TINY_CONFIG, "--vocab_file=" + VOCAB,
          "--max_seq_length=128", "--doc_stride=64", "--train_batch_size=4",
          "--num_train_epochs=1", "--save_checkpoints_steps=1000",
          "--iterations_per_loop=3", "--deterministic", "--output_dir=" + str(tmp_path / out)]


def _interrupt(command, after_step, signum):
  """Runs ``command``, sends ``signum`` once step ``after_step`` is logged;
  returns (exit status, stdout lines, stderr)."""
  proc = subprocess.Popen([sys.executable] + command, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  seen = []
  for line in proc.stdout:
    seen.append(line)
    if line.startswith("step ") and int(line.split()[1].split("/")[0]) >= after_step:
      proc.send_signal(signum)
      break
  out, err = proc.communicate(timeout=300)
  return proc.returncode, seen + out.splitlines(), err


@pytest.mark.slow  # three tool runs
def test_ctrl_c_saves_the_step_and_the_rerun_resumes_exactly(tmp_path):
  from test_run_squad import V1_TRAIN, write_slice  # pylint: disable=g-import-not-at-top
  from test_squad_resume import checkpoint_step, variables  # pylint: disable=g-import-not-at-top
  write_slice(V1_TRAIN, str(tmp_path / "train.json"), 64)  # 16 steps
  whole = str(tmp_path / "whole")
  run_tool(_squad_command(tmp_path, "whole"))
  assert checkpoint_step(whole) == 16

  stopped = str(tmp_path / "stopped")
  rc, _, err = _interrupt(_squad_command(tmp_path, "stopped"), 3, signal.SIGINT)
  step = checkpoint_step(stopped)
  assert rc == 130, (rc, err[-3000:])
  # (Before it, the one warning that no --init_checkpoint was given.)
  assert _lines(err)[-1] == "interrupted at step %d; rerun the same command to resume" % step, (
      err[-3000:])
  assert len(_lines(err)) <= 2 and sum("interrupted" in l for l in _lines(err)) == 1, (
      err[-3000:])
  assert not any(n in err for n in NOISE)
  # Saved at the step it stopped (--save_checkpoints_steps=1000 saves none
  # before the end): the first loop of 3 steps, or within the next one.
  assert 3 <= step <= 6, step
  p = run_tool(_squad_command(tmp_path, "stopped"))
  assert "resumed from %s at step %d" % (os.path.join(stopped, "ckpt-%d" % step),
                                         step) in p.stdout
  assert checkpoint_step(stopped) == 16
  a, b = variables(whole), variables(stopped)
  assert sorted(a) == sorted(b) and len(a) > 20
  # (save_counter counts the checkpoints written: 1 vs 2.)
  differ = [k for k in a if a[k].tobytes() != b[k].tobytes() and
            not k.startswith("save_counter/")]
  assert not differ, "%d of %d tensors differ: %s" % (len(differ), len(a), differ[:5])


def test_stop_request_ends_the_loop_at_a_step_boundary(tmp_path):
  """In process: the flag set before a loop stops it after its first step;
  the checkpoint is at that step and Interrupted names it."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import training  # pylint: disable=g-import-not-at-top
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.1)
    opt.build(model.trainable_variables)
  data = iter(tf.data.Dataset.from_tensors(
      (tf.ones([4, 2]), tf.ones([4, 1]))).repeat())

  def loss_fn(batch):
    x, y = batch
    loss = tf.reduce_mean(tf.square(model(x) - y))
    return loss, {"loss_sum": loss}
  trainer = training.Trainer(strategy, model, opt, loss_fn)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=opt),
                                       str(tmp_path), max_to_keep=2,
                                       step_counter=opt.iterations, checkpoint_interval=1000)
  before = signal.getsignal(signal.SIGINT)
  with training.StopRequest() as stop:
    trainer.train(data, 5, manager, steps_per_loop=5, stop=stop)
    assert int(opt.iterations.numpy()) == 5  # not signalled: the whole loop
    os.kill(os.getpid(), signal.SIGINT)  # handled: no KeyboardInterrupt
    for _ in range(100):  # the watcher thread sets the flag
      if stop.flag.numpy():
        break
      time.sleep(0.05)
    assert stop.requested and stop.signum == signal.SIGINT
    with pytest.raises(training.Interrupted) as e:
      trainer.train(data, 20, manager, steps_per_loop=10, stop=stop)
  assert str(e.value) == "interrupted at step 5; rerun the same command to resume"
  assert manager.latest_checkpoint.endswith("ckpt-5")
  assert signal.getsignal(signal.SIGINT) is before
  # SIGTERM alike; the flag is read inside the loop: set while a loop of 10
  # steps runs, it ends that loop after the step under way.
  with training.StopRequest() as stop:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(100):
      if stop.flag.numpy():
        break
      time.sleep(0.05)
    sums = trainer._step(data, tf.constant(10), stop.flag)  # pylint: disable=protected-access
    assert int(opt.iterations.numpy()) == 6 and float(sums["loss_sum"]) > 0
    with pytest.raises(training.Interrupted) as e:
      trainer.train(data, 20, manager, steps_per_loop=10, stop=stop)
  assert e.value.signum == signal.SIGTERM and e.value.step == 6
  assert manager.latest_checkpoint.endswith("ckpt-6")


def test_the_loop_traces_the_step_once_and_sums_every_step():
  """``Trainer``'s loop of n steps is one graph with ONE copy of the step
  (a copy before the loop doubled the time to trace and optimize it), runs
  exactly n steps, and returns the float32 sums of their metrics: here the
  batch index and its square, 5 steps per loop (0..4, then 5..7)."""
  import keras  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import training  # pylint: disable=g-import-not-at-top
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.0)
    opt.build(model.trainable_variables)
  traces = []

  def loss_fn(x):
    traces.append(1)
    loss = tf.reduce_mean(model(x))
    return loss, {"index": x[0, 0], "square": x[0, 0] ** 2}
  trainer = training.Trainer(strategy, model, opt, loss_fn)
  data = iter(tf.data.Dataset.range(100).map(lambda i: tf.fill([2, 1], tf.cast(i, tf.float32))))
  seen = []
  trainer.train(data, 8, steps_per_loop=5, log_fn=lambda step, sums, _: seen.append((step, sums)))
  assert len(traces) == 1, "the step was traced %d times" % len(traces)
  assert [(s, m["index"], m["square"], m["steps"]) for s, m in seen] == [
      (5, 10.0, 30.0, 5.0), (8, 18.0, 110.0, 3.0)]
  assert int(opt.iterations.numpy()) == 8
  assert np.asarray(next(data)).ravel()[0] == 8  # no batch read beyond the 8 steps


# --- text that is not UTF-8 ---------------------------------------------------


def _latin1_csv(path, rows):
  with open(path, "wb") as f:
    f.write(b"text,label\n")
    for text, label in rows:
      f.write(("%s,%s\n" % (text, label)).encode("latin-1"))


def test_classifier_file_not_utf8_warns_once_or_is_refused(tmp_path, caplog):
  from bert_tf import errors  # pylint: disable=g-import-not-at-top
  from bert_tf.data import classifier_data  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "train.csv")
  _latin1_csv(path, [("plain text", "a"), ("caf\u00e9 cr\u00e8me", "b"), ("ok", "a"),
                     ("na\u00efve", "b")])
  task = classifier_data.get_task("csv", text_a_column="text", label_column="label")
  with caplog.at_level("WARNING"):
    ex = classifier_data.read_split(task, path, task.train)
  # The original's decoding: the bad bytes become U+FFFD, every row is read.
  assert ex.texts_a == ["plain text", "caf\ufffd cr\ufffdme", "ok", "na\ufffdve"]
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert len(warnings) == 1, warnings
  assert warnings[0].startswith(
      "%s: 2 lines are not valid UTF-8 (first: line 3); the undecodable bytes were "
      "replaced by U+FFFD, as the original does. Re-encode it as UTF-8" % path), warnings
  assert "--strict_utf8" in warnings[0]
  with pytest.raises(errors.InputError) as e:
    classifier_data.read_split(task, path, task.train, strict_utf8=True)
  assert str(e.value).startswith("%s line 3: not valid UTF-8" % path)
  caplog.clear()
  with caplog.at_level("WARNING"):  # a UTF-8 file: no word
    _latin1_csv(path, [("plain", "a"), ("text", "b")])
    classifier_data.read_split(task, path, task.train)
  assert not caplog.records


def test_count_not_utf8_lines_across_blocks(tmp_path):
  from bert_tf import io_utils  # pylint: disable=g-import-not-at-top
  path = tmp_path / "c.txt"
  lines = [b"line %d ok" % i for i in range(50)]
  lines[7] = b"caf\xe9"
  lines[33] = b"\xff\xfe"
  path.write_bytes(b"\n".join(lines) + b"\nlast \xe9")  # no final newline
  for block in (8, 64, 1 << 20):
    assert io_utils.count_not_utf8_lines(str(path), block_size=block) == (3, 8), block


def test_corpus_not_utf8_warns_once_or_is_refused(tmp_path):
  corpus = tmp_path / "latin1.txt"
  with open(SAMPLE_TEXT, encoding="utf-8") as f:
    text = f.read().splitlines()[1:40]  # (line 1 holds CJK, not Latin-1)
  text[3] += " caf\u00e9"
  text[10] += " na\u00efve"
  corpus.write_bytes("\n".join(text).encode("latin-1") + b"\n")
  common = ["tools/create_pretraining_data.py", "--input_file=" + str(corpus),
            "--vocab_file=" + VOCAB, "--dupe_factor=1", "--max_seq_length=64"]
  p = run_tool(common + ["--output_file=" + str(tmp_path / "a.tfrecord")])
  warnings = [l for l in _lines(p.stderr) if l.startswith("warning:")]
  assert warnings == [
      "warning: %s: 2 lines are not valid UTF-8 (first: line 4); the undecodable bytes "
      "were dropped, as the original does. Re-encode it as UTF-8 (e.g. iconv -f "
      "latin1 -t utf-8 FILE > FILE.utf8), or pass --strict_utf8 to refuse such files"
      % corpus], p.stderr
  assert os.path.exists(tmp_path / "a.tfrecord")
  p = run_tool(common + ["--output_file=" + str(tmp_path / "b.tfrecord"), "--strict_utf8"],
               check=False)
  assert p.returncode != 0
  assert _lines(p.stderr) == [
      "create_pretraining_data: error: %s line 4: not valid UTF-8 (--strict_utf8 refuses "
      "such text); re-encode it as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE > "
      "FILE.utf8), or drop --strict_utf8 to read it with the bad bytes dropped" % corpus], (
          p.stderr)
  assert not os.path.exists(tmp_path / "b.tfrecord")


# --- the best model, ties, eval_results.txt, the last line --------------------


def test_tie_keeps_the_later_model_and_the_last_line_names_it(tmp_path):
  import json  # pylint: disable=g-import-not-at-top
  from bert_tf import runner  # pylint: disable=g-import-not-at-top
  from test_runner import TaggingTask, strategy  # pylint: disable=g-import-not-at-top

  class Scripted(TaggingTask):
    """Dev accuracy 0.5, 0.7, 0.7, 0.6 at steps 2, 4, 6, 8."""
    scores = [0.5, 0.7, 0.7, 0.6]

    def evaluate(self, model, print_fn):
      return {"eval_accuracy": self.scores.pop(0), "eval_loss": 1.0}

  out, lines = str(tmp_path / "run"), []
  runner.Runner(runner.RunnerParams(output_dir=out, iterations_per_loop=2),
                lines.append).run(
      Scripted(num_train_steps=8), strategy(), do_train=True, do_eval=True,
      eval_at_steps=(2, 4, 6), export_fn=lambda m: os.path.join(out, "export", "1"))
  best = json.load(open(os.path.join(out, "best", "best.json")))
  assert best["step"] == 6 and best["value"] == 0.7  # the tie: the later step
  # eval_results.txt: the final step's figures, and where the best model's are.
  text = open(os.path.join(out, "eval_results.txt")).read()
  best_file = os.path.join(out, "best", "eval_results.txt")
  assert text == ("eval_accuracy = 0.6\neval_loss = 1.0\nglobal_step = 8\n"
                  "best_model = step 6 by accuracy=0.7000, the model prediction and "
                  "export use; its figures: %s\n" % best_file)
  assert open(best_file).read() == "eval_accuracy = 0.7\neval_loss = 1.0\nglobal_step = 6\n"
  assert lines[-2] == "exported SavedModel to %s" % os.path.join(out, "export", "1")
  assert lines[-1] == (
      "exported the best dev model: step 6 of 8, highest accuracy (a tie keeps the later "
      "step); dev figures (%s): eval_accuracy=0.7000 eval_loss=1.0000" % best_file)
  # Without a kept best model: the final step, and why.
  out2, lines2 = str(tmp_path / "nobest"), []
  Scripted.scores = [0.5, 0.6]
  runner.Runner(runner.RunnerParams(output_dir=out2, iterations_per_loop=2,
                                    keep_best=False), lines2.append).run(
      Scripted(num_train_steps=4), strategy(), do_train=True, do_eval=True,
      eval_at_steps=(2,), export_fn=lambda m: "x")
  assert lines2[-1] == (
      "exported the final model: step 4 (no dev evaluation kept a best model); dev "
      "figures (%s): eval_accuracy=0.6000 eval_loss=1.0000"
      % os.path.join(out2, "eval_results.txt"))
  assert "best_model" not in open(os.path.join(out2, "eval_results.txt")).read()


def test_eta_is_the_recent_loops_rate_not_the_first():
  from bert_tf import runner  # pylint: disable=g-import-not-at-top
  eta = runner.EtaEstimator(window=3)
  assert eta.seconds_left(100) == 0.0
  eta.update(10, 30.0)  # the first loop: tracing and compiling
  assert eta.seconds_left(100) == pytest.approx(300.0)  # all there is so far
  eta.update(10, 10.0)
  assert eta.seconds_left(100) == pytest.approx(100.0)  # the first loop left out
  for _ in range(3):
    eta.update(10, 5.0)
  assert eta.seconds_left(100) == pytest.approx(50.0)  # the last 3 loops
  eta.update(5, 5.0)  # a short last loop counts by its steps
  assert eta.seconds_per_step() == pytest.approx(15.0 / 25.0)
  assert eta.seconds_left(-3) == 0.0


# --- --do_predict on a labelled test file -------------------------------------


@pytest.fixture(scope="module")
def predicted(tmp_path_factory):
  """A tiny sst-2 run: train 1 epoch on 64 rows, dev 32 rows, a labelled
  test.tsv (dev rows in the dev layout), --do_predict twice."""
  from bert_tf import distribute, jobs  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import classification  # pylint: disable=g-import-not-at-top
  from conftest import MOVIE_DIR, copy_slice  # pylint: disable=g-import-not-at-top
  d = tmp_path_factory.mktemp("sst")
  data, out = str(d / "data"), str(d / "out")
  copy_slice(os.path.join(MOVIE_DIR, "train.tsv"), data + "/train.tsv", limit=64)
  copy_slice(os.path.join(MOVIE_DIR, "dev.tsv"), data + "/dev.tsv", limit=32)
  copy_slice(os.path.join(MOVIE_DIR, "dev.tsv"), data + "/test.tsv", every=3, limit=24)
  params = classification.ClassifierParams(
      task_name="sst-2", data_dir=data, output_dir=out, vocab_file=VOCAB,
      bert_config_file=TINY_CONFIG, max_seq_length=32, train_batch_size=16,
      num_train_epochs=1, iterations_per_loop=2, bucket_by_length=False)
  first, second = [], []
  res = jobs.run_classifier(params, distribute.get_strategy("one_device"), do_train=True,
                            do_eval=True, do_predict=True, print_fn=first.append)
  jobs.run_classifier(params, distribute.get_strategy("one_device"), do_train=False,
                      do_eval=False, do_predict=True, print_fn=second.append)
  return out, data, res, first, second


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_labelled_test_file_gets_metrics_and_headed_predictions(predicted):
  import numpy as np  # pylint: disable=g-import-not-at-top
  out, data, _, first, _ = predicted
  with open(data + "/test.tsv", encoding="utf-8") as f:
    gold = [int(l.split("\t")[1]) for l in f.read().splitlines()[1:]]
  with open(os.path.join(out, "test_results.txt"), encoding="utf-8") as f:
    results = dict(l.split(" = ") for l in f.read().splitlines())
  assert sorted(results) == ["test_accuracy", "test_loss"]
  # The original's file, no header: the probabilities.
  with open(os.path.join(out, "test_results.tsv"), encoding="utf-8") as f:
    probs = np.array([[float(x) for x in l.split("\t")] for l in f.read().splitlines()])
  assert probs.shape == (24, 2)
  accuracy = float((probs.argmax(1) == np.array(gold)).mean())
  assert float(results["test_accuracy"]) == pytest.approx(accuracy, abs=1e-12)
  loss = -np.log(probs[np.arange(24), gold]).mean()
  assert float(results["test_loss"]) == pytest.approx(loss, rel=1e-4)
  assert any(l.startswith("test (24 labelled examples): accuracy=%.4f" % accuracy)
             for l in first), first
  # predictions.tsv: a header, the row id, the label name, the probabilities by label.
  with open(os.path.join(out, "predictions.tsv"), encoding="utf-8") as f:
    rows = [l.split("\t") for l in f.read().splitlines()]
  assert rows[0] == ["id", "prediction", "probability_0", "probability_1"]
  assert [r[0] for r in rows[1:]] == [str(i) for i in range(24)]
  assert [r[1] for r in rows[1:]] == [str(i) for i in probs.argmax(1)]
  np.testing.assert_array_equal(np.array([r[2:] for r in rows[1:]], float), probs)


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_a_second_predict_keeps_the_first_outputs(predicted):
  out, _, _, _, second = predicted
  for name in ("test_results.tsv", "predictions.tsv", "SST-2.tsv", "test_results.txt"):
    stem, ext = os.path.splitext(name)
    kept = "%s.1%s" % (stem, ext)
    assert os.path.exists(os.path.join(out, kept)) and os.path.exists(os.path.join(out, name))
    assert "kept the previous %s as %s" % (name, kept) in second, second
  with open(os.path.join(out, "test_results.tsv")) as a, \
       open(os.path.join(out, "test_results.1.tsv")) as b:
    assert a.read() == b.read()  # the same model predicted twice


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_the_run_ends_naming_the_model_that_predicted(predicted):
  out, _, res, first, second = predicted
  step = res["global_step"]
  for lines in (first, second):
    assert lines[-1].startswith("predicted with the best dev model: step %d of %d, "
                                "highest accuracy" % (res["best_step"], step)), lines[-3:]
    assert os.path.join(out, "best", "eval_results.txt") in lines[-1]


# --- help, the case check, TensorBoard, packaging -----------------------------


def test_classifier_help_lists_tasks_and_files():
  p = run_tool(["tools/run_classifier.py", "--helpfull"], check=False)  # (absl exits 1)
  from bert_tf.data import classifier_data  # pylint: disable=g-import-not-at-top
  text = " ".join(p.stdout.split())
  for name in classifier_data.task_names():
    assert name in text.split("--task_name:")[1].split("--")[0], name
  data_help = text.split("--data_dir:")[1].split("--")[0]
  assert "csv: train.csv, dev.csv, test.csv" in data_help, data_help
  assert "mnli: train.tsv, dev_matched.tsv" in data_help, data_help
  assert "a tie keeps the later model" in text.split("--[no]keep_best:")[1].split("(default")[0]
  assert "bert_tf.data.classifier_data" not in text


def test_case_mismatch_warns_by_checkpoint_name_or_vocab(tmp_path, caplog):
  from bert_tf import tokenization  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import classification  # pylint: disable=g-import-not-at-top
  from conftest import MOVIE_DIR  # pylint: disable=g-import-not-at-top
  ckpt = "/models/cased_L-12_H-768_A-12/bert_model.ckpt"
  with caplog.at_level("WARNING"):
    assert tokenization.validate_case_matches_checkpoint(True, ckpt)
    assert not tokenization.validate_case_matches_checkpoint(False, ckpt)
    assert tokenization.validate_case_matches_checkpoint(
        False, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    assert not tokenization.validate_case_matches_checkpoint(False, "/m/mine/ckpt-3")
  assert [r.getMessage() for r in caplog.records] == [
      "--do_lower_case=True with --init_checkpoint=%s, but cased_L-12_H-768_A-12 is a "
      "cased model: pass --do_lower_case=False so that fine-tuning tokenizes as the "
      "model was pretrained" % ckpt,
      "--do_lower_case=False with --init_checkpoint=/m/uncased_L-12_H-768_A-12/"
      "bert_model.ckpt, but uncased_L-12_H-768_A-12 is a lowercased model: pass "
      "--do_lower_case=True so that fine-tuning tokenizes as the model was pretrained"]
  # No checkpoint name tells: the vocab's content does (an uncased vocab).
  caplog.clear()
  with caplog.at_level("WARNING"):
    classification.ClassificationTask(classification.ClassifierParams(
        task_name="sst-2", data_dir=MOVIE_DIR, output_dir=str(tmp_path / "o"),
        vocab_file=VOCAB, bert_config_file=TINY_CONFIG, do_lower_case=False),
        do_train=False, do_eval=False)
  assert any("looks uncased but --do_lower_case=False" in r.getMessage()
             for r in caplog.records), caplog.text


def test_tensorboard_is_installed_and_the_editable_install_is_quiet():
  import tomllib  # pylint: disable=g-import-not-at-top
  import tensorboard  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from tensorboard.backend.event_processing import event_accumulator  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
    assert "tensorboard==" in f.read()  # what tools/setup.sh installs
  # The causes of setuptools' BuildBackendWarnings: a TOML-table license
  # (deprecated), and the editable finder's note (silenced where pip runs it).
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    project = tomllib.load(f)
  assert isinstance(project["project"]["license"], str)
  assert project["build-system"]["requires"] == ["setuptools>=77"]
  with open(os.path.join(ROOT, "tools", "setup.sh"), encoding="utf-8") as f:
    setup = f.read()
  assert "setuptools==" in setup
  assert 'PYTHONWARNINGS="ignore:Editable installation"' in setup
