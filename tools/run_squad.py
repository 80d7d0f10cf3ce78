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

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf.tools import _common
from bert_tf import jobs
from bert_tf.tasks import squad

FLAGS = flags.FLAGS
_common.define_task_flags(squad.SquadParams, __name__)

TOOL = "run_squad"


main = _common.task_main(TOOL, squad.SquadParams, jobs.run_squad,
                         ("do_train", "do_predict", "export_dir"),
                         exporter=_common.export_model)


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
