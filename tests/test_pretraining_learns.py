"""Pretraining learns: a small BERT trained from scratch memorizes a corpus.

Static records from ``data/corpus/sample_text.txt`` (the
original's own sample corpus; fixed seed), a small model trained in-process by
:func:`bert_tf.jobs.run_pretraining` (the library behind
``tools/run_pretraining.py``), then its evaluation pass over the same
records: masked-LM accuracy >= 0.9 and next-sentence accuracy >= 0.95,
written to ``eval_results.txt`` as the original does.

The vocab is the subset of the uncased BERT vocab that the corpus uses (plus
the special tokens): WordPiece's greedy longest match gives the same pieces
with any subset that holds every piece the full vocab produced, so the
records carry the same tokens while the output layer is ~300 rows instead of
30,522 (the test then takes ~1 minute on 2 cores instead of ~10).
"""

import os

import pytest
import tensorflow as tf

from conftest import SAMPLE_TEXT, VOCAB
from bert_tf import config as config_lib
from bert_tf import jobs
from bert_tf.tasks import pretraining
from bert_tf import tokenization
from bert_tf.data.pretraining import faithful

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
SEQ, PREDS = 64, 10


def write_corpus_vocab(text_file, full_vocab, out):
  """Writes the tokens of ``full_vocab`` that ``text_file`` uses (and the
  specials), in the full vocab's order; returns their number."""
  tok = tokenization.FullTokenizer(full_vocab, do_lower_case=True)
  with open(text_file, encoding="utf-8") as f:
    used = {t for line in f for t in tok.tokenize(line)}
  keep = [t for t in tok.vocab if t in used or t in SPECIALS]
  with open(out, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in keep))
  return len(keep)


@pytest.mark.slow
def test_small_bert_memorizes_sample_text(tmp_path):
  vocab = str(tmp_path / "vocab.txt")
  vocab_size = write_corpus_vocab(SAMPLE_TEXT, VOCAB, vocab)
  assert 200 < vocab_size < 1000
  records = str(tmp_path / "sample.tfrecord")
  _, num_instances, _ = faithful.create_pretraining_data(
      SAMPLE_TEXT, records, vocab, max_seq_length=SEQ,
      max_predictions_per_seq=PREDS, random_seed=12345, dupe_factor=2)
  assert num_instances >= 40
  config = config_lib.BertConfig(
      vocab_size=vocab_size, hidden_size=128, num_hidden_layers=2,
      num_attention_heads=2, intermediate_size=512, type_vocab_size=2,
      max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0)
  steps = 150
  params = pretraining.PretrainingParams(
      input_file=records, output_dir=str(tmp_path / "run"), vocab_file=vocab,
      max_seq_length=SEQ, max_predictions_per_seq=PREDS, train_batch_size=32,
      eval_batch_size=32, learning_rate=2e-3, num_train_steps=steps,
      num_warmup_steps=15, iterations_per_loop=50, save_checkpoints_steps=steps,
      max_eval_steps=1000, seed=1)
  lines = []
  results = jobs.run_pretraining(
      config, params, tf.distribute.OneDeviceStrategy("/cpu:0"), do_train=True,
      do_eval=True, print_fn=lines.append)
  log = "\n".join(lines)
  assert results["global_step"] == steps, log
  assert results["masked_lm_accuracy"] >= 0.9, log
  assert results["next_sentence_accuracy"] >= 0.95, log
  # The loss fell from chance (ln(vocab_size)) on the way.
  assert results["masked_lm_loss"] < 1.0, log
  with open(os.path.join(params.output_dir, "eval_results.txt")) as f:
    written = dict(line.strip().split(" = ") for line in f)
  assert float(written["masked_lm_accuracy"]) == pytest.approx(
      results["masked_lm_accuracy"])
  assert int(written["global_step"]) == steps
