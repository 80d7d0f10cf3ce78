"""The fine-tuning tools' default optimizer is the one BUILD_NOTES names, and a
short warm-up with the original optimizer gets one warning line (issue 42)."""

import dataclasses
import os
import re

from bert_tf import optimization
from bert_tf.tasks import base
from bert_tf.tasks import classification
from bert_tf.tasks import fine_tuning
from bert_tf.tasks import pretraining
from bert_tf.tasks import squad
from bert_tf.tasks import swag
from bert_tf.tasks import tagging

from conftest import ROOT

NOTES_SENTENCE = re.compile(r"The fine-tuning tools'\s+default\s+optimizer\s+is\s+`(\w+)`")


def _default(params_cls, name="optimizer"):
  return {f.name: f.default for f in dataclasses.fields(params_cls)}[name]


def test_fine_tuning_default_optimizer_is_the_one_the_notes_name():
  with open(os.path.join(ROOT, "BUILD_NOTES.md"), encoding="utf-8") as f:
    named = NOTES_SENTENCE.findall(f.read())
  assert len(named) == 1, "BUILD_NOTES.md must name the default once: %r" % named
  # Every fine-tuning tool's flags come from these params classes
  # (tools/_common.define_flags); bert-tune's trials run the same tasks.
  for cls in (fine_tuning.FineTuningParams, classification.ClassifierParams,
              squad.SquadParams, swag.SwagParams, tagging.NerParams):
    assert _default(cls) == named[0], cls.__name__
  # Pretraining keeps the original's optimizer whatever fine-tuning does.
  assert _default(pretraining.PretrainingParams) == "adamw_original"


class _Spec:
  """Stands in for a fine-tuning task: only its optimizer schedule."""

  def __init__(self, name, warmup, steps=340):
    self.spec = base.OptimizerSpec(5e-5, steps, warmup, name)

  def optimizer_spec(self):
    return self.spec


def test_short_warmup_with_the_original_optimizer_warns():
  # The stability study's SQuAD slice: 125 steps, 10% warm-up = 12 steps,
  # where the original optimizer's runs spread over 13-31 F1.
  line = fine_tuning.FineTuningTask.warmup_warning(_Spec("adamw_original", 12, steps=125))
  assert line.startswith("warning: --optimizer=adamw_original"), line
  assert "12 warm-up steps" in line and "--optimizer=adamw " in line, line
  assert "Zhang et al. 2021" in line and "Mosbach et al. 2021" in line, line
  ratio = float(re.search(r"steps are ([0-9.]+)x Adam's", line).group(1))
  assert 6.5 < ratio < 6.7  # (1 - 0.9**12) / sqrt(1 - 0.999**12) = 6.57
  assert "\n" not in line
  # Bias-corrected, or a warm-up where the study saw no extra spread: silent.
  # run_swag's defaults on mc_wikihow (337 steps, 33 of warm-up) and the main
  # job (893 steps, 89 of warm-up) among them.
  assert fine_tuning.FineTuningTask.warmup_warning(_Spec("adamw", 12)) is None
  for warmup in (33, 89, 400, 1000):
    assert fine_tuning.FineTuningTask.warmup_warning(_Spec("adamw_original", warmup)) is None
  assert fine_tuning.FineTuningTask.warmup_warning(
      _Spec("adamw_original", optimization.FINE_TUNING_RISK_WARMUP_STEPS - 1)) is not None
