r"""Fine-tunes BERT on a SWAG-style multiple-choice task (paper section 4.4).

Reads the SWAG CSV layout (``video-id,fold-ind,startphrase,sent1,sent2,
gold-source,ending0..ending3,label``) from ``--data_dir`` (``--train_file``
train.csv, ``--dev_file`` dev.csv, ``--test_file`` test.csv). Every choice
is one ``[CLS] sent1 [SEP] sent2 + " " + ending<i> [SEP]`` sequence (the
split of Hugging Face's ``run_swag.py``, see :mod:`bert_tf.data.swag`); the
model scores each from its pooled output and a softmax over the choices
gives the probabilities. ``--do_eval`` writes ``eval_results.txt``
(``eval_accuracy``, ``eval_loss``, ``global_step``; after every epoch when
training, the best model kept in ``OUTPUT_DIR/best/``), ``--do_predict``
writes ``predictions.csv`` (one probability per choice), ``--export_dir`` a
TF Serving SavedModel (:func:`bert_tf.export.export_multiple_choice`:
``context`` [B] + ``endings`` [B, N] strings in, ``probabilities`` [B, N]
and ``label_id`` [B] out). Flags in the style of ``run_classifier.py``;
``--init_checkpoint`` takes a Hugging Face BERT / ``BertForMultipleChoice``
directory (then ``--bert_config_file`` and ``--vocab_file`` default to its
files), an original TF1 checkpoint or ours. Restarting with the same
``--output_dir`` resumes.

  python tools/run_swag.py --do_train --do_eval \
    --data_dir=DATA_DIR --init_checkpoint=HF_DIR \
    --output_dir=/tmp/swag --max_seq_length=128 --train_batch_size=16 \
    --learning_rate=5e-5 --num_train_epochs=3
"""

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from bert_tf.tools import _common
from bert_tf import jobs
from bert_tf.tasks import swag


main, run = _common.fine_tuning_tool("run_swag", __name__, swag.SwagParams,
                                     jobs.run_swag, _common.export_model)


if __name__ == "__main__":
  run()
