r"""Fine-tunes BERT on a classification task, evaluates, predicts, exports.

Flags follow google-research/bert ``run_classifier.py``; added:
``--export_dir`` (a TF Serving SavedModel with the tokenizer inside),
``--distribution_strategy``, ``--optimizer``, ``--dtype``,
``--bucket_by_length``, the GLUE/XNLI tasks the original lacks (STS-B as
regression, QQP, MNLI matched + mismatched, QNLI, RTE, WNLI), generic
``--task_name=tsv|csv`` files (``--text_a_column``, ``--text_b_column``,
``--label_column``, ``--labels``), ``--xnli_language``, and prepared
tensorflow-datasets GLUE data (``--tfds_name=glue/sst2
--tfds_data_dir=DIR``; nothing is downloaded). ``--init_checkpoint`` takes
our checkpoints (a pretraining run's directory as it is), the original
``bert_model.ckpt``, or a Hugging Face BERT directory; ``--bert_config_file``
defaults to the config that came with it (``bert_config.json`` beside the
checkpoint, or the directory's ``config.json``), ``--vocab_file`` to a
Hugging Face directory's. With ``--do_eval`` the dev set is scored after each epoch and the
best model kept in ``OUTPUT_DIR/best/``; ``--do_predict`` and
``--export_dir`` use it when present (a tie keeps the later model), and
the last line printed names the model used and its dev figures.
``--do_predict`` writes ``test_results.tsv`` (as the original),
``predictions.tsv`` (a header: id, predicted label, one probability column
per label), the GLUE submission file (``SST-2.tsv``, ``MNLI-m.tsv`` +
``MNLI-mm.tsv``, ...) and, when the test file has labels (the dev file's
layout), its metrics in ``test_results.txt``; an earlier run's file of the
same name is kept as ``<name>.1.tsv`` (``.2``, ...), never overwritten.

  python tools/run_classifier.py --task_name=sst-2 --do_train --do_eval \
    --data_dir=data/movie_review_sentences --init_checkpoint=HF_DIR \
    --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export
"""

import sys

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf.tools import _common
from bert_tf import jobs
from bert_tf.data import classifier_data
from bert_tf.tasks import classification

FLAGS = flags.FLAGS
_common.define_flags(classification.ClassifierParams, required=("output_dir",))
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the test set (test_results.tsv, predictions.tsv; a labelled test file's metrics in test_results.txt; earlier files are kept as <name>.1.tsv, ...).")
_common.define_training_flags()
flags.adopt_module_key_flags(_common)  # --helpshort lists them too


def resolve_task_name():
  """``--task_name``, or the GLUE task of ``--tfds_name``; checks the data flags."""
  task_name = FLAGS.task_name
  if not task_name and FLAGS.tfds_name:
    task_name = classifier_data.TFDS_CONFIGS.get(FLAGS.tfds_name.split("/")[-1].split(":")[0])
  if not task_name:
    sys.exit("run_classifier: error: --task_name is required (or a GLUE --tfds_name)")
  if not (FLAGS.data_dir or FLAGS.tfds_name):
    sys.exit("run_classifier: error: --data_dir (or --tfds_name) is required")
  if FLAGS.tfds_name and not FLAGS.tfds_data_dir:
    sys.exit("run_classifier: error: --tfds_name needs --tfds_data_dir (nothing is downloaded)")
  return {"task_name": task_name}


main = _common.task_main("run_classifier", classification.ClassifierParams,
                         jobs.run_classifier,
                         ("do_train", "do_eval", "do_predict", "export_dir"),
                         exporter=_common.export_model, prepare=resolve_task_name,
                         job_flags=("do_train", "do_eval", "do_predict"))


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
