"""Calls functions of the ORIGINAL ``create_pretraining_data.py`` in a subprocess.

The code is PyPI ``bert-tensorflow==1.0.4`` as installed (TF1-style:
``tensorflow.compat.v1``, absl flags), imported in a process of its own so
that its flag definitions and TensorFlow state stay out of the test process.
(``tests/original_create_data.py`` runs its whole ``main()``; this runs
single functions.)

In the test process::

  import original_subprocess
  docs, lengths = original_subprocess.call([
      ("read_documents", {"input_files": [path], "vocab_file": VOCAB}),
      ("truncate_seq_pair", {"cases": [[5, 9, 7], ...]}),
  ])

Requests (``name``, ``kwargs``) and their results (JSON):

* ``read_documents``: ``input_files``, ``vocab_file``, ``do_lower_case``
  (default True): the original ``create_training_instances``'
  ``all_documents`` just before its first ``rng.shuffle``, i.e. the
  documents as the original reads them (files in order, blank lines end a
  document, empty documents dropped): a list of documents, each a list of
  sentences, each a list of token ids (``tokenizer.convert_tokens_to_ids``
  of the original's ``FullTokenizer``). The original function itself runs,
  with ``dupe_factor=0`` and an ``rng`` that records what it is asked to
  shuffle.
* ``truncate_seq_pair``: ``cases``, a list of ``[len_a, len_b,
  max_num_tokens]``: ``[len(tokens_a), len(tokens_b)]`` after the original
  ``truncate_seq_pair(list(range(len_a)), list(range(len_b)),
  max_num_tokens, random.Random(0))`` for each case.

Usage (what :func:`call` runs): ``python original_subprocess.py
REQUESTS_JSON RESULTS_JSON``.
"""

import copy
import json
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def call(requests):
  """Runs ``requests`` (list of ``(name, kwargs)``) in one subprocess of the
  original code; returns the list of their results."""
  with tempfile.TemporaryDirectory(prefix="original_subprocess.") as d:
    req, res = os.path.join(d, "requests.json"), os.path.join(d, "results.json")
    with open(req, "w", encoding="utf-8") as f:
      json.dump([[name, kwargs] for name, kwargs in requests], f)
    from conftest import run_tool  # pylint: disable=g-import-not-at-top
    proc = run_tool([os.path.abspath(__file__), req, res], cwd=d, check=False)
    assert proc.returncode == 0, "the original failed (%d):\n%s" % (
        proc.returncode, proc.stderr[-4000:])
    with open(res, encoding="utf-8") as f:
      return json.load(f)


class _RecordingRandom(random.Random):
  """A ``random.Random`` that keeps a copy of every list it shuffles."""

  def __init__(self, seed):
    super().__init__(seed)
    self.shuffled = []

  def shuffle(self, x):  # pylint: disable=arguments-differ
    self.shuffled.append(copy.deepcopy(x))
    super().shuffle(x)


def _read_documents(cpd, input_files, vocab_file, do_lower_case=True):
  from bert import tokenization  # pylint: disable=g-import-not-at-top
  tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file,
                                         do_lower_case=do_lower_case)
  rng = _RecordingRandom(12345)
  instances = cpd.create_training_instances(
      input_files, tokenizer, max_seq_length=128, dupe_factor=0,
      short_seq_prob=0.1, masked_lm_prob=0.15, max_predictions_per_seq=20,
      rng=rng)
  assert instances == [] and len(rng.shuffled) == 2, len(rng.shuffled)
  return [[tokenizer.convert_tokens_to_ids(s) for s in doc]
          for doc in rng.shuffled[0]]


def _truncate_seq_pair(cpd, cases):
  out = []
  for len_a, len_b, max_num in cases:
    a, b = list(range(len_a)), list(range(len_b))
    cpd.truncate_seq_pair(a, b, max_num, random.Random(0))
    out.append([len(a), len(b)])
  return out


def main(requests_json, results_json):
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  from bert import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
  # The installed release itself (tests/original_create_data.py patches a copy).
  assert metadata.version("bert-tensorflow") == "1.0.4"
  installed = [str(f.locate()) for f in metadata.files("bert-tensorflow")
               if str(f) == "bert/create_pretraining_data.py"]
  assert installed == [os.path.abspath(cpd.__file__)], (installed, cpd.__file__)
  flags.FLAGS(["original_subprocess"])  # the original reads flag defaults
  with open(requests_json, encoding="utf-8") as f:
    requests = json.load(f)
  functions = {"read_documents": _read_documents,
               "truncate_seq_pair": _truncate_seq_pair}
  results = [functions[name](cpd, **kwargs) for name, kwargs in requests]
  with open(results_json, "w", encoding="utf-8") as f:
    json.dump(results, f)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
