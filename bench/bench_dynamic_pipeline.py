"""Throughput of the dynamic masking pipeline, by hand.

Prints examples/s that ``bert_tf.data.pretraining.dynamic.dynamic_pretraining_dataset``
delivers at batch 32, seq 128, 20 predictions, with and without whole-word
masking, from document records written by ``tools/create_pretraining_documents.py``:

  .venv/bin/python tools/create_pretraining_documents.py \
      --input_file=data/corpus/austen_slice.txt --output_file=/tmp/docs.tfrecord \
      --vocab_file=data/vocab/uncased_vocab.txt
  .venv/bin/python bench/bench_dynamic_pipeline.py /tmp/docs.tfrecord

Compare with the training step's consumption (bench/bench_pretraining_step.py).
"""

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import bert_tf  # noqa: E402,F401  (sets the Keras backend)
from bert_tf.data.pretraining import dynamic as dm  # noqa: E402
from _cpuinfo import cpu_line  # noqa: E402


def main(argv):
  if len(argv) < 2:
    sys.exit(__doc__)
  vocab = os.path.join(ROOT, "data", "vocab", "uncased_vocab.txt")
  print(cpu_line())
  print("| whole_word_mask | first batch s | examples/s (steady) |")
  print("|---|---|---|")
  for wwm in (False, True):
    ds = dm.dynamic_pretraining_dataset(argv[1], vocab, 32, 128, 20, seed=1,
                                        do_whole_word_mask=wwm)
    t = time.time()
    it = iter(ds)
    next(it)
    first = time.time() - t
    for _ in range(50):
      next(it)
    n = 400
    t = time.time()
    for _ in range(n):
      next(it)
    print("| %s | %.1f | %.0f |" % (wwm, first, n * 32 / (time.time() - t)))


if __name__ == "__main__":
  main(sys.argv)
