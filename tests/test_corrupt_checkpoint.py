"""A truncated checkpoint is named as truncated, never as "does not fit"
(issue 63 item 3).

As ``--init_checkpoint``: one line naming the file. As the newest checkpoint
of the run being resumed: it costs only its own steps. A real tiny run (the
runner's tagging task of ``test_runner.py``, ``deterministic``) stopped at
step 6, its ``ckpt-6.*`` deleted by hand, resumed to step 8, ``ckpt-8``'s
``.data`` cut in half and resumed to the end: each rerun warns in one line
naming the checkpoint and the steps trained again, resumes from the newest
whole checkpoint, and the run ends with every variable (optimizer slots
included) bit-identical to an uninterrupted run's. With no whole checkpoint
left the run is one error; "does not fit" only for another model."""

import os

import numpy as np
import pytest

from conftest import TINY_CONFIG, VOCAB, run_tool


def _cut(prefix):
  """Cuts the checkpoint's .data file in half, as a killed copy would."""
  directory = os.path.dirname(prefix)
  (data,) = [f for f in os.listdir(directory)
             if f.startswith(os.path.basename(prefix) + ".data")]
  path = os.path.join(directory, data)
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


@pytest.fixture(scope="module")
def encoder_and_checkpoint(tmp_path_factory):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
  enc = encoder_lib.BertEncoder(config_lib.BertConfig.from_json_file(TINY_CONFIG))
  enc({k: np.ones((1, 4), np.int32) for k in encoder_lib.INPUT_NAMES})
  prefix = tf.train.Checkpoint(encoder=enc).save(
      str(tmp_path_factory.mktemp("ck") / "ckpt"))
  _cut(prefix)
  return enc, prefix


def test_library_names_a_cut_object_checkpoint(encoder_and_checkpoint):
  from bert_tf import checkpoints, errors  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import presets  # pylint: disable=g-import-not-at-top
  enc, prefix = encoder_and_checkpoint
  assert checkpoints.unreadable_reason(prefix).startswith("IndexError")
  with pytest.raises(errors.CorruptCheckpointError, match="truncated or unreadable") as e:
    presets.load_weights(enc, prefix)
  assert e.value.path == prefix and "does not fit" not in str(e.value)


def test_library_names_a_cut_tf1_checkpoint(encoder_and_checkpoint, tmp_path):
  from bert_tf import checkpoints, errors  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import presets  # pylint: disable=g-import-not-at-top
  enc, _ = encoder_and_checkpoint
  prefix = str(tmp_path / "bert_model.ckpt")
  checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(enc), prefix)
  assert checkpoints.unreadable_reason(prefix) is None
  _cut(prefix)
  with pytest.raises(errors.CorruptCheckpointError, match=r"bert_model\.ckpt is truncated"):
    presets.load_weights(enc, prefix)


def test_tool_says_one_line_for_a_cut_init_checkpoint(encoder_and_checkpoint, tmp_path):
  _, prefix = encoder_and_checkpoint
  (tmp_path / "in.txt").write_text("It is a truth universally acknowledged.\n",
                                   encoding="utf-8")
  out = tmp_path / "out.jsonl"
  p = run_tool(["tools/extract_features.py", "--input_file=" + str(tmp_path / "in.txt"),
                "--output_file=" + str(out), "--vocab_file=" + VOCAB,
                "--bert_config_file=" + TINY_CONFIG, "--max_seq_length=16",
                "--init_checkpoint=" + prefix], check=False)
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert p.returncode != 0
  assert len(lines) == 1, p.stderr[-3000:]
  assert "--init_checkpoint" in lines[0] and prefix in lines[0], lines
  assert "truncated or unreadable" in lines[0] and "does not fit" not in lines[0], lines
  assert not out.exists() and not [f for f in os.listdir(tmp_path) if "out" in f]


# --- the run's own newest checkpoint (issue 63 item 3: resume) ---------------


def _log(lines, what):
  return [l for l in lines if what in l]


@pytest.fixture(scope="module")
def resumed_past_bad_checkpoints(tmp_path_factory):
  """The runner's tiny tagging task (``test_runner.TaggingTask``, 12 steps,
  a checkpoint every 2, ``deterministic``): once uninterrupted; once stopped
  at step 6, ``ckpt-6.*`` deleted by hand, rerun to step 8, ``ckpt-8``'s
  ``.data`` cut in half, rerun to the end. Returns both runs' final
  variables, the reruns' log lines and the run directory."""
  from bert_tf import runner  # pylint: disable=g-import-not-at-top
  from test_runner import TaggingTask, strategy, variables_of  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("bad_ckpt")

  def run(out, stop_at=None):
    lines, final = [], {}
    runner.Runner(runner.RunnerParams(output_dir=str(out), iterations_per_loop=2,
                                      save_checkpoints_steps=2, deterministic=True,
                                      seed=5, stop_at_step=stop_at),
                  lines.append).run(TaggingTask(), strategy(), do_train=True,
                                    on_finish=lambda m, o: final.update(variables_of(m)))
    return lines, final

  _, whole = run(root / "whole")
  out = root / "run"
  run(out, stop_at=6)
  for name in os.listdir(out):
    if name.startswith("ckpt-6."):
      os.remove(out / name)
  deleted, _ = run(out, stop_at=8)
  _cut(str(out / "ckpt-8"))
  cut, resumed = run(out)
  return whole, resumed, deleted, cut, out


def test_deleted_newest_checkpoint_falls_back_in_one_line(resumed_past_bad_checkpoints):
  _, _, deleted, _, out = resumed_past_bad_checkpoints
  (warning,) = _log(deleted, "warning: checkpoint")
  assert warning == ("warning: checkpoint %s is missing (no ckpt-6.index); resuming from %s, "
                     "the newest whole one: steps 5-6 are trained again"
                     % (out / "ckpt-6", out / "ckpt-4")), deleted
  assert "resumed from %s at step 4" % (out / "ckpt-4") in deleted
  assert not _log(deleted, "does not fit")
  assert any(l.startswith("step 8/12") for l in deleted), deleted


def test_truncated_newest_checkpoint_costs_its_own_steps(resumed_past_bad_checkpoints):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  whole, resumed, _, cut, out = resumed_past_bad_checkpoints
  (warning,) = _log(cut, "warning: checkpoint")
  assert warning.startswith("warning: checkpoint %s is truncated or unreadable (IndexError: "
                            % (out / "ckpt-8")), warning
  assert warning.endswith("resuming from %s, the newest whole one: steps 7-8 are trained "
                          "again" % (out / "ckpt-6")), warning
  assert "resumed from %s at step 6" % (out / "ckpt-6") in cut
  # The same final weights, optimizer slots included, as the uninterrupted run.
  assert sorted(resumed) == sorted(whole) and len(whole) > 20
  differ = [k for k in whole if whole[k].tobytes() != resumed[k].tobytes()]
  assert not differ, "%d of %d variables differ: %s" % (len(differ), len(whole), differ[:5])
  # The state file goes on from the checkpoints that read whole.
  listed = tf.train.get_checkpoint_state(str(out)).all_model_checkpoint_paths
  assert [os.path.basename(p) for p in listed] == ["ckpt-8", "ckpt-10", "ckpt-12"]
  assert checkpoints_read_whole(listed)


def checkpoints_read_whole(prefixes):
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  return all(checkpoints.unreadable_reason(p) is None for p in prefixes)


def test_no_whole_checkpoint_left_is_one_error(resumed_past_bad_checkpoints, tmp_path):
  import shutil  # pylint: disable=g-import-not-at-top
  from bert_tf import errors, runner  # pylint: disable=g-import-not-at-top
  from test_runner import TaggingTask, strategy  # pylint: disable=g-import-not-at-top
  *_, out = resumed_past_bad_checkpoints
  copy = tmp_path / "copy"
  shutil.copytree(out, copy, ignore=shutil.ignore_patterns("best", "train", "eval"))
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for prefix in tf.train.get_checkpoint_state(str(copy)).all_model_checkpoint_paths:
    _cut(prefix)
  with pytest.raises(errors.CorruptCheckpointError, match="no whole checkpoint to resume "
                     "from") as e:
    runner.Runner(runner.RunnerParams(output_dir=str(copy), iterations_per_loop=2,
                                      save_checkpoints_steps=2, deterministic=True, seed=5),
                  lambda l: None).run(TaggingTask(), strategy(), do_train=True)
  assert "does not fit" not in str(e.value) and str(copy / "ckpt-12") in str(e.value)


def test_a_whole_checkpoint_of_another_model_does_not_fit(resumed_past_bad_checkpoints,
                                                          tmp_path):
  """A resume whose checkpoints read whole (an input iterator's state among
  their tensors) but hold another model is the one case that says "does not
  fit"."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  from bert_tf import errors, runner  # pylint: disable=g-import-not-at-top
  import test_runner  # pylint: disable=g-import-not-at-top
  *_, out = resumed_past_bad_checkpoints
  copy = tmp_path / "copy"
  shutil.copytree(out, copy, ignore=shutil.ignore_patterns("best", "train", "eval"))

  class Wider(test_runner.TaggingTask):
    def build_model(self):
      model = test_runner.Tagger(dataclasses.replace(test_runner.tiny_config(),
                                                     hidden_size=32))
      model({k: v[:1] for k, v in self.train_x.items()})
      return model
  with pytest.raises(errors.CheckpointError, match="does not fit the model") as e:
    runner.Runner(runner.RunnerParams(output_dir=str(copy), iterations_per_loop=2,
                                      save_checkpoints_steps=2, deterministic=True, seed=5),
                  lambda l: None).run(Wider(), test_runner.strategy(), do_train=True)
  assert not isinstance(e.value, errors.CorruptCheckpointError)
  assert str(copy / "ckpt-12") in str(e.value)
