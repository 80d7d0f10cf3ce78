"""bert_tf.metrics against scikit-learn and scipy (TF-free; mutation tests).

Random labels of 2-5 classes and random scores (seeded), every degenerate
case the module defines (no positives, a constant input, undefined MCC),
every ``Task.metrics`` kind of :func:`bert_tf.metrics.compute` and its
errors, word for word.
"""

import math

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from bert_tf import metrics


def _label_pairs():
  rng = np.random.RandomState(7)
  for n in (1, 2, 3, 10, 57, 300):
    for k in (2, 3, 5):
      y = rng.randint(0, k, n)
      p = np.where(rng.rand(n) < 0.6, y, rng.randint(0, k, n))
      yield y, p


def test_accuracy_f1_mcc_equal_sklearn():
  for y, p in _label_pairs():
    assert metrics.accuracy(p, y) == pytest.approx(sk.accuracy_score(y, p), abs=1e-15)
    for positive in (0, 1, 2):
      want = sk.f1_score(y, p, labels=[positive], average="micro", zero_division=0)
      assert metrics.f1(p, y, positive=positive) == pytest.approx(want, abs=1e-12)
    assert metrics.f1(p, y) == pytest.approx(
        sk.f1_score(y, p, labels=[1], average="micro", zero_division=0), abs=1e-12)
    assert metrics.matthews_corrcoef(p, y) == pytest.approx(
        sk.matthews_corrcoef(y, p), abs=1e-12)


def test_binary_hand_counts():
  # TP=2 FP=1 FN=1 TN=2: F1 = 4/6, MCC = (4-1)/sqrt(3*3*3*3) = 1/3.
  y = [1, 1, 1, 0, 0, 0]
  p = [1, 1, 0, 1, 0, 0]
  assert metrics.accuracy(p, y) == pytest.approx(4 / 6)
  assert metrics.f1(p, y) == pytest.approx(4 / 6)
  assert metrics.f1(p, y, positive=0) == pytest.approx(4 / 6)
  assert metrics.matthews_corrcoef(p, y) == pytest.approx(1 / 3)
  # Asymmetric: TP=1 FP=3 FN=0 -> 2/6; FP and FN swapped -> the same F1.
  assert metrics.f1([1, 1, 1, 1], [1, 0, 0, 0]) == pytest.approx(2 / 5)
  assert metrics.f1([1, 0, 0, 0], [1, 1, 1, 1]) == pytest.approx(2 / 5)
  assert metrics.f1([1, 1, 0], [1, 0, 1]) == pytest.approx(0.5)
  assert metrics.matthews_corrcoef([1, 0, 0, 1], [1, 1, 0, 0]) == 0.0
  assert metrics.matthews_corrcoef([0, 1, 1, 0], [1, 0, 0, 1]) == pytest.approx(-1.0)
  assert metrics.matthews_corrcoef([2, 0, 1], [2, 0, 1]) == pytest.approx(1.0)


def test_degenerate_cases():
  # No positive anywhere: F1 is 0 (sklearn zero_division=0), not 1 or NaN.
  assert metrics.f1([0, 0, 0], [0, 0, 0]) == 0.0
  assert metrics.f1([0, 2], [2, 0]) == 0.0
  # All positives right.
  assert metrics.f1([1, 1], [1, 1]) == 1.0
  # Constant predictions (or labels): MCC undefined -> 0.0.
  assert metrics.matthews_corrcoef([1, 1, 1], [0, 1, 0]) == 0.0
  assert metrics.matthews_corrcoef([0, 1, 0], [1, 1, 1]) == 0.0
  assert metrics.matthews_corrcoef([1, 1], [1, 1]) == 0.0
  for got in (metrics.accuracy([1, 0], [1, 1]), metrics.f1([1], [1]),
              metrics.matthews_corrcoef([1, 0], [1, 0])):
    assert type(got) is float  # pylint: disable=unidiomatic-typecheck


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_pearson_spearman_rankdata_equal_scipy():
  rng = np.random.RandomState(3)
  for n in (2, 3, 8, 50, 400):
    x = rng.randn(n)
    y = 0.5 * x + rng.randn(n)
    ties_x = np.round(rng.rand(n) * 4) / 2  # many ties
    ties_y = np.round(rng.rand(n) * 3)
    for a, b in ((x, y), (ties_x, ties_y), (ties_x, y), (y, -x)):
      assert metrics.pearson(a, b) == pytest.approx(stats.pearsonr(a, b)[0], abs=1e-12, nan_ok=True)
      assert metrics.spearman(a, b) == pytest.approx(stats.spearmanr(a, b)[0], abs=1e-12, nan_ok=True)
      np.testing.assert_array_equal(metrics.rankdata(a), stats.rankdata(a))
  np.testing.assert_array_equal(metrics.rankdata([3.0, 1.0, 3.0, 2.0, 3.0]),
                                [4.0, 1.0, 4.0, 2.0, 4.0])
  np.testing.assert_array_equal(metrics.rankdata([2, 1]), [2.0, 1.0])
  # Integer inputs are read as floats (no integer division or overflow).
  assert metrics.pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
  assert metrics.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0


def test_pearson_is_clipped_to_one_and_nan_when_constant():
  # Unclipped, x against 3x + 1 is 1 + 2**-52 and against -3x + 1 is
  # -(1 + 2**-52) in float64 for these values; the result stays in [-1, 1].
  x = np.array([0.1, 0.2, 0.7, 1.3, 2.9, 0.05, 9.4])
  a, b = x - x.mean(), 3 * x - (3 * x).mean()
  assert np.dot(a, b) / np.sqrt(np.dot(a, a) * np.dot(b, b)) > 1.0
  assert metrics.pearson(x, 3 * x + 1) == 1.0
  assert metrics.pearson(x, -3 * x + 1) == -1.0
  assert math.isnan(metrics.pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
  assert math.isnan(metrics.pearson([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]))
  assert math.isnan(metrics.spearman([5, 5, 5], [1, 2, 3]))


def test_main_metric():
  assert metrics.main_metric("mcc") == "mcc"
  assert metrics.main_metric("acc_and_f1") == "acc_and_f1"
  assert metrics.main_metric("pearson_and_spearman") == "corr"
  assert metrics.main_metric("accuracy") == "accuracy"
  assert metrics.main_metric("anything") == "accuracy"


def test_compute_every_kind():
  y = [1, 1, 1, 0, 0, 0, 2]
  p = [1, 1, 0, 1, 0, 0, 2]
  assert metrics.compute("accuracy", p, y) == {"accuracy": pytest.approx(5 / 7)}
  got = metrics.compute("mcc", p, y)
  assert got == {"accuracy": pytest.approx(5 / 7),
                 "mcc": pytest.approx(sk.matthews_corrcoef(y, p))}
  got = metrics.compute("acc_and_f1", p, y)
  f1 = sk.f1_score(y, p, labels=[1], average="micro")
  assert got == {"accuracy": pytest.approx(5 / 7), "f1": pytest.approx(f1),
                 "acc_and_f1": pytest.approx((5 / 7 + f1) / 2)}
  x = [0.5, 2.0, 1.0, 4.0, 3.5]
  z = [1.0, 1.5, 0.0, 5.0, 2.0]
  got = metrics.compute("pearson_and_spearman", x, z)
  pr, sr = stats.pearsonr(x, z)[0], stats.spearmanr(x, z)[0]
  assert pr != pytest.approx(sr)
  assert got == {"pearson": pytest.approx(pr), "spearmanr": pytest.approx(sr),
                 "corr": pytest.approx((pr + sr) / 2)}


def test_errors_name_the_problem():
  with pytest.raises(ValueError) as e:
    metrics.compute("bleu", [1], [1])
  assert str(e.value) == "unknown metric kind 'bleu'"
  with pytest.raises(ValueError) as e:
    metrics.accuracy([1, 0, 1], [1, 0])
  assert str(e.value) == ("predictions (3,) and labels (2,) must be [N] vectors "
                          "of the same length")
  with pytest.raises(ValueError) as e:
    metrics.f1([[1, 0]], [[1, 0]])
  assert str(e.value) == ("predictions (1, 2) and labels (1, 2) must be [N] "
                          "vectors of the same length")
  for fn in (metrics.matthews_corrcoef, metrics.pearson):
    with pytest.raises(ValueError, match="must be"):
      fn([1, 2], [1, 2, 3])


def test_pearson_reads_float32_scores_in_float64():
  # STS-B predictions are float32 model outputs: the correlation is that of
  # their exact float64 values (scipy on the float64 copies, to 1e-12), not
  # a float32 computation (errors ~1e-7).
  rng = np.random.RandomState(11)
  x = rng.randn(500).astype(np.float32) * 3 + 100
  y = (x + rng.randn(500).astype(np.float32) * 5).astype(np.float32)
  x64, y64 = x.astype(np.float64), y.astype(np.float64)
  want = stats.pearsonr(x64, y64)[0]
  for a, b in ((x, y), (x, y64), (x64, y)):
    assert abs(metrics.pearson(a, b) - want) < 1e-12
  assert metrics.pearson(x, y) == metrics.pearson(x64, y64)


def test_pearson_with_unit_denominator():
  # Centered [-0.5, 0.5] and [-1, 1]: the denominator sqrt(0.5 * 2) is exactly 1.
  assert metrics.pearson([0.0, 1.0], [0.0, 2.0]) == 1.0
  assert metrics.pearson([0.0, 1.0], [2.0, 0.0]) == -1.0
