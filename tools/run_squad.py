r"""Fine-tunes BERT on SQuAD v1.1 / v2.0 and predicts answer spans.

Flags follow google-research/bert ``run_squad.py`` (same names and
defaults; ``--use_tpu`` and ``--tpu_name`` kept, ``--num_tpu_cores`` etc.
are not needed: the strategy finds the cores). ``--do_predict`` writes the
original's ``predictions.json``, ``nbest_predictions.json`` and, with
``--version_2_with_negative``, ``null_odds.json`` into ``--output_dir``; when
``--predict_file`` has answers (a dev file) the official metrics (those of
``evaluate-v1.1.py`` / ``evaluate-v2.0.py``) are printed and written to
``eval_results.txt``. Added: ``--init_checkpoint`` also takes a Hugging Face
BERT or ``BertForQuestionAnswering`` directory (then ``--bert_config_file``
and ``--vocab_file`` default to its files) and our checkpoints;
``--distribution_strategy``, ``--optimizer``, ``--dtype``,
``--deterministic``, ``--seed``, ``--export_dir`` (a TF Serving SavedModel
by :func:`bert_tf.export.export_squad`: raw question + context strings in,
the answer text and its character offsets out). Restarting with the same
``--output_dir`` resumes.

  python tools/run_squad.py --do_train --do_predict \
    --train_file=train-v1.1.json --predict_file=dev-v1.1.json \
    --init_checkpoint=HF_DIR --output_dir=/tmp/squad \
    --max_seq_length=384 --doc_stride=128 --train_batch_size=12
"""

import sys

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import app
from absl import flags

from bert_tf.tools import _common
from bert_tf import jobs
from bert_tf import runner
from bert_tf import export
from bert_tf.tasks import squad

FLAGS = flags.FLAGS
_common.define_training_flags()  # --distribution_strategy defined once, here
_common.define_flags(squad.SquadParams, required=("output_dir",))
flags.adopt_module_key_flags(_common)  # --helpshort lists them too

TOOL = "run_squad"


def squad_exporter():
  """The export hook ``(model, serving_info, export_dir) -> path``: the
  fine-tuned model with the tokenizer, doc-stride windows and span choice
  inside (:func:`bert_tf.export.export_squad`) as a TF Serving SavedModel
  version under ``--export_dir``; None when ``bert_tf.export`` has no SQuAD
  export."""
  try:
    export_squad = export.export_squad
  except AttributeError:
    return None

  def exporter(model, info, export_dir):
    return export_squad(model, export_dir=export_dir, **info)
  return exporter


def main(argv):
  del argv
  if not (FLAGS.do_train or FLAGS.do_predict or FLAGS.export_dir):
    sys.exit("%s: error: at least one of --do_train, --do_predict or "
             "--export_dir must be set" % TOOL)
  exporter = None
  if FLAGS.export_dir:
    exporter = squad_exporter()
    if exporter is None:
      sys.exit("%s: error: --export_dir: this bert_tf has no SQuAD SavedModel "
               "export (bert_tf.export.export_squad)" % TOOL)
  try:
    if FLAGS.deterministic:  # before the strategy starts TensorFlow's runtime
      runner.enable_determinism_for_run(FLAGS.output_dir, FLAGS.seed)
    strategy = _common.strategy_from_flags()
    params = _common.params_from_flags(squad.SquadParams)
    jobs.run_squad(params, strategy, exporter=exporter)
  except _common.REPORTED as e:
    _common.fail(TOOL, e)


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
