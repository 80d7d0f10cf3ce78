"""Runs the ORIGINAL google-research/bert ``run_squad.py`` data functions.

Usage: python original_squad.py WORKDIR JOBS_JSON

JOBS_JSON holds a list of jobs; every job runs in this one process (one
TensorFlow import for all):

- ``{"kind": "features", "input_file", "vocab_file", "do_lower_case",
  "is_training", "version_2_with_negative", "max_seq_length", "doc_stride",
  "max_query_length", "output"}``: ``read_squad_examples`` +
  ``convert_examples_to_features`` (an ``output_fn`` collecting the
  features); writes ``output`` (JSON) with the examples, the features (every
  field) and the number of "Could not find answer" warnings.
- ``{"kind": "predictions", ... the same reading fields ..., "logits",
  "n_best_size", "max_answer_length", "null_score_diff_threshold",
  "output_dir"}``: reads and converts as above (is_training False), makes a
  ``RawResult`` per feature from the ``logits`` npz (``unique_ids``,
  ``start_logits``, ``end_logits``; floats converted with ``float()`` as the
  original's ``main`` does) and calls ``write_predictions`` into
  ``output_dir`` (``predictions.json``, ``nbest_predictions.json``,
  ``null_odds.json``).

The code is PyPI ``bert-tensorflow==1.0.4``, copied to WORKDIR/pkg/bert and
patched, never vendored. ``run_squad.py`` itself already imports
``tensorflow.compat.v1`` (``tf.flags``, ``tf.logging``, ``tf.gfile`` still
exist there); the only patch is in ``modeling.py``, which it imports: the
removed ``tensorflow.contrib`` import is replaced by a stand-in for
``contrib_layers.layer_norm`` (LayerNorm/beta, LayerNorm/gamma, epsilon
1e-12, as in ``tests/original_graph.py``), never called by the data
functions. The original reads ``FLAGS.version_2_with_negative``,
``FLAGS.null_score_diff_threshold`` and ``FLAGS.verbose_logging``; they are
set per job.
"""

import importlib.util
import json
import os
import shutil
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CONTRIB_IMPORT = "from tensorflow.contrib import layers as contrib_layers\n"
CONTRIB_STANDIN = '''

class contrib_layers(object):  # patched: tensorflow.contrib is gone in TF 2
  """Stand-in for contrib layer_norm (same variables, epsilon 1e-12)."""

  @staticmethod
  def layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    with tf.variable_scope(scope, default_name="LayerNorm"):
      dim = inputs.shape[-1]
      beta = tf.get_variable("beta", [dim], initializer=tf.zeros_initializer())
      gamma = tf.get_variable("gamma", [dim], initializer=tf.ones_initializer())
      mean, variance = tf.nn.moments(inputs, [-1], keep_dims=True)
      return (inputs - mean) * tf.rsqrt(variance + 1e-12) * gamma + beta
'''


def patched_package(workdir):
  """Copies bert-tensorflow 1.0.4 to WORKDIR/pkg/bert with modeling.py patched."""
  src = os.path.dirname(importlib.util.find_spec("bert").origin)
  dst = os.path.join(workdir, "pkg", "bert")
  if not os.path.exists(dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    path = os.path.join(dst, "modeling.py")
    with open(path, encoding="utf-8") as f:
      code = f.read()
    assert code.count(CONTRIB_IMPORT) == 1, "patch target not found in modeling.py"
    code = code.replace(CONTRIB_IMPORT, "")
    anchor = "import tensorflow.compat.v1 as tf\n"
    assert code.count(anchor) == 1
    code = code.replace(anchor, anchor + CONTRIB_STANDIN)
    with open(path, "w", encoding="utf-8") as f:
      f.write(code)
  sys.path.insert(0, os.path.join(workdir, "pkg"))


def _features(rs, tokenization, job, is_training, counter):
  rs.FLAGS.version_2_with_negative = bool(job.get("version_2_with_negative", False))
  examples = rs.read_squad_examples(input_file=job["input_file"],
                                    is_training=is_training)
  tokenizer = tokenization.FullTokenizer(vocab_file=job["vocab_file"],
                                         do_lower_case=job.get("do_lower_case", True))
  features = []
  rs.convert_examples_to_features(
      examples=examples, tokenizer=tokenizer,
      max_seq_length=job["max_seq_length"], doc_stride=job["doc_stride"],
      max_query_length=job["max_query_length"], is_training=is_training,
      output_fn=features.append)
  return examples, features


def _feature_dict(f):
  return {
      "unique_id": f.unique_id, "example_index": f.example_index,
      "doc_span_index": f.doc_span_index, "tokens": f.tokens,
      "token_to_orig_map": sorted(f.token_to_orig_map.items()),
      "token_is_max_context": sorted(f.token_is_max_context.items()),
      "input_ids": f.input_ids, "input_mask": f.input_mask,
      "segment_ids": f.segment_ids, "start_position": f.start_position,
      "end_position": f.end_position, "is_impossible": f.is_impossible,
  }


def _example_dict(e):
  return {"qas_id": e.qas_id, "question_text": e.question_text,
          "doc_tokens": e.doc_tokens, "orig_answer_text": e.orig_answer_text,
          "start_position": e.start_position, "end_position": e.end_position,
          "is_impossible": e.is_impossible}


def main(workdir, jobs_json):
  patched_package(workdir)
  import numpy as np  # pylint: disable=g-import-not-at-top
  from bert import run_squad as rs  # pylint: disable=g-import-not-at-top
  from bert import tokenization  # pylint: disable=g-import-not-at-top
  assert rs.__file__.startswith(os.path.abspath(workdir)), rs.__file__
  rs.FLAGS.mark_as_parsed()  # the original reads flag defaults

  # Count the original's "Could not find answer" warnings (it only logs them).
  counter = {"could_not_find": 0}
  warning = rs.tf.logging.warning

  def counting_warning(msg, *args, **kwargs):
    if str(msg).startswith("Could not find answer"):
      counter["could_not_find"] += 1
    return warning(msg, *args, **kwargs)

  rs.tf.logging.warning = counting_warning
  rs.tf.logging.set_verbosity(rs.tf.logging.ERROR)  # no per-example info lines

  with open(jobs_json, encoding="utf-8") as f:
    jobs = json.load(f)
  for job in jobs:
    counter["could_not_find"] = 0
    rs.FLAGS.verbose_logging = bool(job.get("verbose_logging", False))
    if job["kind"] == "features":
      examples, features = _features(rs, tokenization, job,
                                     bool(job["is_training"]), counter)
      out = {"could_not_find": counter["could_not_find"],
             "examples": [_example_dict(e) for e in examples],
             "features": [_feature_dict(f) for f in features]}
      with open(job["output"], "w", encoding="utf-8") as f:
        json.dump(out, f)
    elif job["kind"] == "predictions":
      examples, features = _features(rs, tokenization, job, False, counter)
      logits = np.load(job["logits"])
      results = []
      for uid, start, end in zip(logits["unique_ids"], logits["start_logits"],
                                 logits["end_logits"]):
        results.append(rs.RawResult(unique_id=int(uid),
                                    start_logits=[float(x) for x in start.flat],
                                    end_logits=[float(x) for x in end.flat]))
      rs.FLAGS.null_score_diff_threshold = float(job.get("null_score_diff_threshold", 0.0))
      out_dir = job["output_dir"]
      os.makedirs(out_dir, exist_ok=True)
      rs.write_predictions(
          examples, features, results, job["n_best_size"], job["max_answer_length"],
          job.get("do_lower_case", True), os.path.join(out_dir, "predictions.json"),
          os.path.join(out_dir, "nbest_predictions.json"),
          os.path.join(out_dir, "null_odds.json"))
    else:
      raise ValueError("unknown job kind %r" % job["kind"])


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
