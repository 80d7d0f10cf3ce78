r"""Fine-tunes BERT for token tagging (NER, paper section 4.3 / Figure 4d).

Reads CoNLL files from ``--data_dir`` (``--train_file`` train.txt,
``--dev_file`` dev.txt, ``--test_file`` test.txt): ``token<TAB>tag`` or the
CoNLL-2003 ``word POS chunk NER`` layout, a blank line between sentences,
``-DOCSTART-`` lines skipped; IOB1, IOB2 or IOBES tags. Labels: ``--label_list``
or the sorted set of the training tags plus ``O``. Each word's label sits on
its first word piece (the other pieces are ignored by the loss and at
prediction); a sentence longer than ``--max_seq_length`` - 2 pieces is split
into windows ``--doc_stride`` pieces apart, each word predicted from its
max-context window (never cut). ``--do_eval`` writes ``eval_results.txt``
(entity-level ``eval_precision``/``eval_recall``/``eval_f1`` with conlleval
semantics, per-type ``eval_<type>_*``; after every epoch when training, the
best model by ``eval_f1`` kept in ``OUTPUT_DIR/best/``), ``--do_predict``
writes ``test_predictions.txt`` (CoNLL), ``--export_dir`` a TF Serving
SavedModel (:func:`bert_tf.export.export_tagger`: raw sentences in, per-word
tags and entity spans with code-point offsets out). ``--init_checkpoint``
takes a Hugging Face BERT / ``BertForTokenClassification`` directory (then
``--bert_config_file`` and ``--vocab_file`` default to its files), an
original TF1 checkpoint or ours. Restarting with the same ``--output_dir``
resumes.

  python tools/run_ner.py --do_train --do_eval \
    --data_dir=../shared/data/ner_wnut16 --init_checkpoint=HF_DIR \
    --output_dir=/tmp/ner --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=5e-5 --num_train_epochs=20
"""

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from bert_tf.tools import _common
from bert_tf import jobs
from bert_tf.tasks import tagging


main, run = _common.fine_tuning_tool("run_ner", __name__, tagging.NerParams,
                                     jobs.run_ner, _common.export_model)  # run: console script


if __name__ == "__main__":
  run()
