"""Runs the ORIGINAL google-research/bert ``extract_features.py`` whole.

Usage: python original_extract_features.py WORKDIR --input_file=... \
         --output_file=... --vocab_file=... --bert_config_file=... \
         --init_checkpoint=... [--layers=... --max_seq_length=... ...]

The code is PyPI ``bert-tensorflow==1.0.4``, copied to WORKDIR/pkg/bert and
patched (``modeling.py``'s removed ``tensorflow.contrib`` layer_norm, as in
``tests/original_squad.py``), never vendored. Its ``main`` is called
unchanged; ``tf.estimator`` (removed in TF 2.16) is replaced on the
``tensorflow.compat.v1`` module of this process by a small CPU stand-in for
what ``main`` uses: ``tpu.RunConfig``, ``tpu.TPUConfig``,
``tpu.InputPipelineConfig``, ``ModeKeys.PREDICT``, ``tpu.TPUEstimatorSpec``
and ``tpu.TPUEstimator(...).predict(input_fn, yield_single_examples=True)``.
The stand-in builds the original's ``input_fn`` and ``model_fn`` in one
graph (``model_fn`` calls ``tf.train.init_from_checkpoint`` itself), runs
the variable initializers (which then read the checkpoint) and yields one
prediction dict per example, as the Estimator does.
"""

import os
import sys

import original_squad  # same directory: the package copy + modeling patch


class _Namespace:
  def __init__(self, **kw):
    self.__dict__.update(kw)


def estimator_standin(tf):
  """A ``tf.estimator`` namespace with the parts ``extract_features.main`` uses."""

  class TPUEstimatorSpec:
    def __init__(self, mode, predictions=None, scaffold_fn=None, **unused):
      self.mode, self.predictions, self.scaffold_fn = mode, predictions, scaffold_fn

  class TPUEstimator:
    def __init__(self, use_tpu, model_fn, config, predict_batch_size, **unused):
      assert not use_tpu
      self.model_fn, self.batch_size = model_fn, predict_batch_size

    def predict(self, input_fn, yield_single_examples=True):
      with tf.Graph().as_default():
        params = {"batch_size": self.batch_size}
        dataset = input_fn(params)
        features = tf.data.make_one_shot_iterator(dataset).get_next()
        spec = self.model_fn(features, None, "infer", params)
        assert spec.scaffold_fn is None
        with tf.Session() as sess:
          sess.run(tf.global_variables_initializer())
          while True:
            try:
              batch = sess.run(spec.predictions)
            except tf.errors.OutOfRangeError:
              return
            n = len(next(iter(batch.values())))
            for i in range(n):
              yield {k: v[i] for k, v in batch.items()}

  tpu = _Namespace(RunConfig=lambda **kw: _Namespace(**kw),
                   TPUConfig=lambda **kw: _Namespace(**kw),
                   InputPipelineConfig=_Namespace(PER_HOST_V2=2),
                   TPUEstimatorSpec=TPUEstimatorSpec, TPUEstimator=TPUEstimator)
  return _Namespace(ModeKeys=_Namespace(PREDICT="infer"), tpu=tpu)


def main(workdir, argv):
  original_squad.patched_package(workdir)
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  from bert import extract_features as ef  # pylint: disable=g-import-not-at-top
  assert ef.__file__.startswith(os.path.abspath(workdir)), ef.__file__
  ef.tf.estimator = estimator_standin(tf)
  ef.FLAGS(["extract_features"] + list(argv))
  ef.main(None)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2:])
