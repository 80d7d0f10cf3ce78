r"""The paper's fine-tuning procedure as one command: a hyperparameter search.

``--task=classifier|squad|ner|swag``, then that task tool's own flags
(``run_classifier``, ``run_squad``, ``run_ner``, ``run_swag``: data, init
checkpoint, ``--max_seq_length``, ...), plus the search flags:
``--search_space=paper`` (default: Appendix A.3's 18 configurations),
``glue`` (section 4.1) or a JSON file of the task tool's flag names
(``{"learning_rate": [5e-5, 3e-5], "num_train_epochs": [2, 3]}`` or ranges
``{"low": 1e-5, "high": 1e-4, "log": true}``; a classifier's may take the
long-document method as a dimension, ``{"long_document": ["head",
"windows"], "window_pooling": ["mean", "max"]}``), ``--num_restarts``,
``--holdout_fraction``, ``--metric``, ``--storage``. Each trial is a real run
of the task in ``OUTPUT_DIR/trials/<n>/``; the search (an Optuna study,
``OUTPUT_DIR/search.db`` by default) resumes when the same command runs
again, and several processes or machines on one ``--storage`` share it.
Writes ``search_results.csv``, ``search_results.md``, ``search_results.png``,
``best_trial.json`` and the best trial's SavedModel under
``OUTPUT_DIR/export/`` (see :mod:`bert_tf.tuning`).

  bert-tune --task=classifier --task_name=sst-2 \
    --data_dir=data/movie_review_sentences --init_checkpoint=HF_DIR \
    --max_seq_length=64 --output_dir=/tmp/tune --holdout_fraction=0.1
"""

import importlib
import os
import sys

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf.tools import _common
from bert_tf import task_kinds
from bert_tf import tuning

FLAGS = flags.FLAGS
TOOL = "tune"
# --task value -> its training tool's module (``run_classifier``, ...): the
# searchable kinds of the TF-free registry.
TOOLS = {k.name: os.path.splitext(k.tool)[0] for k in task_kinds.searchable_kinds()}

flags.DEFINE_enum("task", None, list(TOOLS),
                  "The fine-tuning task; its tool's flags (%s) follow."
                  % ", ".join(TOOLS.values()))
_common.define_flags(tuning.SearchParams)
flags.adopt_module_key_flags(_common)  # --helpshort lists the search flags too


def task_from_argv(argv) -> str:
  """``--task``'s value on the command line (before absl parses it), or None."""
  for i, arg in enumerate(argv[1:], 1):
    if arg.startswith("--task="):
      return arg.split("=", 1)[1]
    if arg == "--task" and i + 1 < len(argv):
      return argv[i + 1]
  return None


_TASK = task_from_argv(sys.argv)
_TOOL_MODULE = None
# The task tool's --export_dir has no meaning in a search (its trials export
# nothing; the best one goes under OUTPUT_DIR/export/ by --export): not in
# --helpshort, refused when given.
_NOT_IN_A_SEARCH = ("export_dir",)
if _TASK in TOOLS:  # the task tool's own flags, defined as that tool defines them
  _TOOL_MODULE = importlib.import_module("bert_tf.tools." + TOOLS[_TASK])
  for _flag in FLAGS.get_key_flags_for_module(_TOOL_MODULE):
    if _flag.name not in _NOT_IN_A_SEARCH:
      flags.declare_key_flag(_flag.name)


def _check_argv(argv) -> None:
  """One line, before absl parses, for what absl would word badly: no
  ``--task`` (its task tool's flags are then unknown to absl)."""
  helps = ("--help", "--helpshort", "--helpfull", "--helpxml", "-h", "-?")
  if _TASK is None and not any(a.split("=", 1)[0] in helps for a in argv[1:]):
    sys.exit("%s: error: --task is required: one of %s (then that task tool's flags)"
             % (TOOL, ", ".join(TOOLS)))


def main(argv):
  del argv
  if _TOOL_MODULE is None:
    sys.exit("%s: error: --task is required: one of %s (then that task tool's flags)"
             % (TOOL, ", ".join(TOOLS)))

  for name in _NOT_IN_A_SEARCH:
    if name in FLAGS and FLAGS[name].present:
      sys.exit("%s: error: --%s: a search exports its best trial under "
               "OUTPUT_DIR/export/ (--export); drop --%s" % (TOOL, name, name))

  def run_search():
    prepare = getattr(_TOOL_MODULE, "resolve_task_name", None)
    overrides = prepare() if prepare is not None else {}
    strategy = _common.strategy_from_flags()
    params_cls = task_kinds.get(FLAGS.task).attribute("params_class")
    params = _common.params_from_flags(params_cls, **overrides)
    search = tuning.Search(
        FLAGS.task, params, _common.params_from_flags(tuning.SearchParams),
        strategy=strategy, exporter=_common.export_model,
        do_predict=bool(FLAGS["do_predict"].value) if "do_predict" in FLAGS else False,
        print_fn=lambda line: print(line, flush=True))
    search.run()

  _common.reporting_errors(TOOL, run_search)


def run():
  """Console-script entry point."""
  _check_argv(sys.argv)
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
