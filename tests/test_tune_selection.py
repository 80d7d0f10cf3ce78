"""A trial's score is the metric of the model it keeps and exports (issue 59).

MRPC-style pair classification on a balanced slice of the bundled dialog
reply pairs (data/dialog_reply_pairs, written in MRPC's column layout): the
search selects on ``eval_f1`` (GLUE's MRPC figure) while the task keeps its
``best/`` by ``eval_acc_and_f1`` when run alone. Each trial must keep
``best/`` by the search's metric, so that its score, its ``best/`` figures
(what the dev report and the export use) and the evaluation it came from are
one checkpoint. Also: the package's seams (the search space and the result
files load without TensorFlow or Optuna; only the study module imports
Optuna) and the runner's lowest-is-best rule.
"""

import ast
import csv
import glob
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import DATA, ROOT, TINY_CONFIG, VOCAB

from bert_tf import run_dir
from bert_tf import runner
from bert_tf import tuning
from bert_tf.tasks.classification import ClassifierParams

PAIRS = os.path.join(DATA, "dialog_reply_pairs")


def _mrpc_layout(src, dst, n):
  """The first ``n`` rows of a (sentence1, sentence2, label) TSV, balanced,
  as MRPC's ``Quality  #1 ID  #2 ID  #1 String  #2 String``."""
  with open(src, encoding="utf-8") as f:
    rows = [l.rstrip("\n").split("\t") for l in f.read().splitlines()[1:]]
  picked, count = [], {"0": 0, "1": 0}
  for a, b, label in rows:
    if count[label] < n // 2:
      picked.append((label, a, b))
      count[label] += 1
  with open(dst, "w", encoding="utf-8") as f:
    f.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    for i, (label, a, b) in enumerate(picked):
      f.write("%s\t%d\t%d\t%s\t%s\n" % (label, 2 * i, 2 * i + 1, a, b))


@pytest.mark.slow  # a trained search: full suite, not the day-to-day loop (issue 41)
def test_pair_task_trial_keeps_and_scores_best_by_the_search_metric(tmp_path):
  data = tmp_path / "mrpc"
  data.mkdir()
  _mrpc_layout(os.path.join(PAIRS, "train.tsv"), data / "train.tsv", 48)
  _mrpc_layout(os.path.join(PAIRS, "dev.tsv"), data / "dev.tsv", 32)
  space = tmp_path / "space.json"
  space.write_text(json.dumps({"learning_rate": [1e-3], "train_batch_size": [8],
                               "num_train_epochs": [3]}))
  out = tmp_path / "run"
  params = ClassifierParams(task_name="mrpc", data_dir=str(data), output_dir=str(out),
                            bert_config_file=TINY_CONFIG, vocab_file=VOCAB,
                            max_seq_length=32, eval_batch_size=16,
                            iterations_per_loop=3, save_checkpoints_steps=6)
  search = tuning.Search("classifier", params,
                         tuning.SearchParams(search_space=str(space)), print_fn=print)
  assert search.metric == "eval_f1" and search.task.best_metric == "eval_acc_and_f1"
  best = search.run()
  with open(out / tuning.RESULTS_CSV, encoding="utf-8") as f:
    [row] = list(csv.DictReader(f))
  trial = out / "trials" / row["trial"]
  with open(trial / "best" / "best.json", encoding="utf-8") as f:
    kept = json.load(f)
  # best/ is kept by the search's metric ...
  assert kept["metric"] == "f1", kept
  # ... its value is the trial's score and best/'s own figures ...
  figures = run_dir.read_results(str(trial / "best" / "eval_results.txt"))
  assert float(row["metric"]) == pytest.approx(kept["value"])
  assert float(figures["eval_f1"]) == pytest.approx(kept["value"])
  assert best["metric"] == pytest.approx(kept["value"])
  # ... and the best of every evaluation the trial ran (a tie: the later).
  log = (trial / "log.txt").read_text()
  f1s = [float(x) for x in re.findall(r"dev \(32 examples\):.*?\bf1=([0-9.]+)", log)]
  assert len(f1s) == 3, log  # one per epoch
  assert kept["value"] == pytest.approx(max(f1s), abs=1e-4)
  assert kept["step"] == 6 * (len(f1s) - f1s[::-1].index(max(f1s)))


def test_search_space_and_results_load_without_tensorflow_or_optuna():
  code = ("import sys; import bert_tf.tuning.space, bert_tf.tuning.results; "
          "print([m for m in ('tensorflow', 'keras', 'optuna') if m in sys.modules])")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                       capture_output=True, text=True).stdout
  assert out.strip() == "[]"


def test_only_the_study_module_imports_optuna():
  importers = []
  for path in glob.glob(os.path.join(ROOT, "bert_tf", "tuning", "*.py")):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
               [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      if any(n.split(".")[0] == "optuna" for n in names):
        importers.append(os.path.basename(path))
  assert set(importers) == {"study.py"}, importers


def test_runner_keeps_the_lowest_when_told():
  assert runner._better(0.5, 0.7, lowest=True)  # pylint: disable=protected-access
  assert not runner._better(0.9, 0.7, lowest=True)  # pylint: disable=protected-access
  assert runner._better(0.7, 0.7, lowest=True)  # a tie keeps the later
  assert not runner._better(float("nan"), 0.7, lowest=True)  # pylint: disable=protected-access
  assert runner._better(0.9, 0.7)  # pylint: disable=protected-access
  assert not runner._better(0.5, 0.7)  # pylint: disable=protected-access
