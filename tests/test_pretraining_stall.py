"""The original optimizer's short-warm-up stall gets a voice.

``run_pretraining`` keeps the original AdamWeightDecay as its default, warns
when it runs with a warm-up far below ~1/(1 - beta_2) steps, and shows the
masked-LM accuracy of always predicting the commonest token beside the
model's, so a stalled run is visible.
"""

import collections
import math

import numpy as np
import pytest

from bert_tf import config as config_lib
from bert_tf import jobs
from bert_tf import distribute
from bert_tf.data.pretraining import faithful
from bert_tf.tasks import pretraining
from conftest import AUSTEN_SLICE, TINY_CONFIG, VOCAB, read_records


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("stall") / "austen.tfrecord")
  with open(AUSTEN_SLICE, encoding="utf-8") as f:
    text = "".join(f.readlines()[:1500])
  corpus = tmp_path_factory.mktemp("corpus") / "austen.txt"
  corpus.write_text(text, encoding="utf-8")
  faithful.create_pretraining_data(str(corpus), path, VOCAB, max_seq_length=64,
                                   max_predictions_per_seq=10, dupe_factor=1,
                                   random_seed=7)
  return path


def test_early_step_ratio_is_the_missing_bias_correction():
  assert pretraining.early_step_ratio(100) == pytest.approx(
      (1 - 0.9 ** 100) / math.sqrt(1 - 0.999 ** 100))
  assert pretraining.early_step_ratio(100) == pytest.approx(3.24, abs=0.01)
  assert pretraining.early_step_ratio(500) == pytest.approx(1.59, abs=0.01)
  assert pretraining.early_step_ratio(1000) == pytest.approx(1.26, abs=0.01)
  assert pretraining.early_step_ratio(20000) == pytest.approx(1.0, abs=1e-6)


def test_warning_only_for_the_original_optimizer_with_a_short_warmup(records):
  def params(**kw):
    return pretraining.PretrainingParams(input_file=records, output_dir="x", **kw)
  line = pretraining.warmup_warning(params(num_warmup_steps=100))
  assert line and "--num_warmup_steps=100" in line and "3.2x" in line
  assert "--optimizer=adamw" in line
  assert pretraining.warmup_warning(params(num_warmup_steps=10000)) is None
  assert pretraining.warmup_warning(params(num_warmup_steps=100, optimizer="adamw")) is None
  assert params().optimizer == "adamw_original"  # the default stays the original's


def test_commonest_token_accuracy_counts_the_masked_ids(records):
  p = pretraining.PretrainingParams(input_file=records, output_dir="x", max_seq_length=64,
                                    max_predictions_per_seq=10, eval_batch_size=8)
  token, acc = pretraining.commonest_token_accuracy(p, max_records=10 ** 6)
  counts, total = collections.Counter(), 0.0
  for r in read_records(records):
    for i, w in zip(r["masked_lm_ids"], r["masked_lm_weights"]):
      if w > 0:
        counts[int(i)] += float(w)
        total += float(w)
  want_token, want_count = counts.most_common(1)[0]
  assert token == want_token and acc == pytest.approx(want_count / total, rel=1e-9)
  assert 0.02 < acc < 0.2  # real text: "the", ",", "." lead
  # The same records whatever the batch size.
  small = pretraining.commonest_token_accuracy(p, max_records=100)
  for batch in (3, 64):
    q = pretraining.PretrainingParams(input_file=records, output_dir="x", max_seq_length=64,
                                      max_predictions_per_seq=10, eval_batch_size=batch)
    assert pretraining.commonest_token_accuracy(q, max_records=100) == small


@pytest.mark.slow  # a short training run
def test_run_prints_the_warning_and_the_baseline_beside_the_accuracy(records, tmp_path):
  lines = []
  p = pretraining.PretrainingParams(
      input_file=records, output_dir=str(tmp_path / "run"), max_seq_length=64,
      max_predictions_per_seq=10, train_batch_size=8, eval_batch_size=8,
      num_train_steps=4, num_warmup_steps=2, iterations_per_loop=2, max_eval_steps=2,
      learning_rate=1e-3)
  res = jobs.run_pretraining(config_lib.BertConfig.from_json_file(TINY_CONFIG), p,
                             distribute.get_strategy("one_device"), do_train=True,
                             do_eval=True, print_fn=lines.append)
  assert lines[0].startswith("warning: --optimizer=adamw_original")
  assert lines[1].startswith("masked-LM baseline: always predicting the commonest")
  steps = [l for l in lines if l.startswith("step ")]
  assert steps and all("commonest_token_accuracy=" in l for l in steps), steps
  baseline = float(lines[1].split("masked_lm_accuracy ")[1].split()[0])
  (evals,) = [l for l in lines if l.startswith("eval: ")]
  assert "commonest_token_accuracy=%.4f" % baseline in evals, evals
  assert "masked_lm_accuracy=" in evals
  # eval_results.txt keeps the original's keys; TensorBoard's train/ has both.
  results = open(tmp_path / "run" / "eval_results.txt").read()
  assert "commonest_token_accuracy" not in results and "masked_lm_accuracy" in results
  assert res["train_commonest_token_accuracy"] == pytest.approx(baseline, abs=1e-4)
