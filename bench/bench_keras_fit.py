"""Fine-tunes all-MiniLM-L6-v2 with plain Keras ``compile`` + ``fit``.

The Keras-native path, against the project's runner (``tools/run_classifier.py``,
``tools/main_job.sh`` step 3, dev accuracy ~0.86 after 3 epochs):
``BertClassifier.from_preset(<HF dir>, num_labels=2)``, the raw movie-review
sentences (SST-2 layout) mapped through ``BertPreprocessor`` in tf.data,
the original ``AdamWeightDecay`` (``create_optimizer``: lr 5e-5, 10% linear
warm-up then linear decay, weight decay 0.01, clip norm 1.0), sparse
softmax cross-entropy on the logits, batch 32, seq 128, bucketed by length
like the runner. Dev accuracy after every epoch (``validation_data``).

Usage::

  .venv/bin/python bench/bench_keras_fit.py [--epochs=3] [--max_train_examples=0]
"""

import argparse
import math
import os
import random
import time

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import optimization  # noqa: E402
from bert_tf import preprocessing  # noqa: E402
from bert_tf.data import classifier_data  # noqa: E402
from bert_tf.modeling import models  # noqa: E402
from bert_tf.tools.minilm_dir import minilm_dir  # noqa: E402
from _cpuinfo import cpu_line  # noqa: E402

# Token-length bucket edges, as the runner's --bucket_by_length.
BUCKETS = (16, 24, 32, 48, 64, 96)


class EpochTimer(keras.callbacks.Callback):
  """Records the wall time of each epoch (seconds, training + validation)."""

  def on_train_begin(self, logs=None):
    self.times = []

  def on_epoch_begin(self, epoch, logs=None):
    self._t = time.time()

  def on_train_batch_end(self, batch, logs=None):
    if (batch + 1) % 50 == 0:
      print("  step %d: %.0f s, loss %.4f" % (batch + 1, time.time() - self._t,
                                             float((logs or {}).get("loss", 0))),
            flush=True)

  def on_epoch_end(self, epoch, logs=None):
    self.times.append(time.time() - self._t)
    print("epoch %d done in %.0f s: %s" % (epoch + 1, self.times[-1], {
        k: round(float(v), 4) for k, v in (logs or {}).items()}), flush=True)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--preset", default=None, help="model directory (default: MiniLM)")
  p.add_argument("--data_dir", default="data/movie_review_sentences")
  p.add_argument("--epochs", type=int, default=3)
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--eval_batch_size", type=int, default=64)
  p.add_argument("--max_seq_length", type=int, default=128)
  p.add_argument("--learning_rate", type=float, default=5e-5)
  p.add_argument("--warmup_proportion", type=float, default=0.1)
  p.add_argument("--max_train_examples", type=int, default=0, help="0: all")
  p.add_argument("--no_buckets", action="store_true",
                 help="plain batches in file order after shuffling")
  p.add_argument("--seed", type=int, default=12345)
  args = p.parse_args(argv)
  log = lambda s: print(s, flush=True)  # noqa: E731
  keras.utils.set_random_seed(args.seed)

  preset = args.preset or minilm_dir()
  log(cpu_line())
  log("tf %s, keras %s, %d CPU threads, TF_ENABLE_ONEDNN_OPTS=%s, "
      "XLA_FLAGS=%r" % (tf.__version__, keras.__version__, os.cpu_count(),
                        os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(default)"),
                        os.environ.get("XLA_FLAGS", "")))
  task = classifier_data.get_task("sst-2")
  train = classifier_data.read_split(task, os.path.join(args.data_dir, "train.tsv"),
                                     task.train)
  dev = classifier_data.read_split(task, os.path.join(args.data_dir, "dev.tsv"),
                                   task.train)
  texts, labels = train.texts_a, train.labels
  n = len(texts)
  if args.max_train_examples and args.max_train_examples < n:
    # The file is sorted by label: a slice is a random subset.
    keep = sorted(random.Random(args.seed).sample(range(n), args.max_train_examples))
    texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
    n = len(texts)
  pre = preprocessing.BertPreprocessor(os.path.join(preset, "vocab.txt"),
                                       do_lower_case=True,
                                       max_seq_length=args.max_seq_length)
  train_ds = classifier_data.examples_dataset(
      pre, texts, None, labels, args.batch_size,
      shuffle=True, seed=args.seed, drop_remainder=True,
      bucket_boundaries=None if args.no_buckets else BUCKETS)
  dev_ds = classifier_data.examples_dataset(
      pre, dev.texts_a, None, dev.labels, args.eval_batch_size)
  steps_per_epoch = int(math.ceil(n / args.batch_size))
  total = steps_per_epoch * args.epochs
  log("%s: %d train / %d dev sentences; batch %d, seq %d, %d steps/epoch x %d "
      "epochs, lr %g, warm-up %d steps" % (
          preset, n, len(dev), args.batch_size, args.max_seq_length,
          steps_per_epoch, args.epochs, args.learning_rate,
          int(total * args.warmup_proportion)))

  t0 = time.time()
  model = models.BertClassifier.from_preset(preset, num_labels=len(task.labels))
  model.compile(
      optimizer=optimization.create_optimizer(
          args.learning_rate, total, int(total * args.warmup_proportion)),
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"])
  load_s = time.time() - t0
  timer = EpochTimer()
  history = model.fit(train_ds, epochs=args.epochs, steps_per_epoch=steps_per_epoch,
                      validation_data=dev_ds, callbacks=[timer], verbose=2)
  h = history.history
  log("\nBertClassifier.from_preset(MiniLM) + compile + fit, %s, %d threads "
      "(load + compile %.1f s)" % (cpu_line(), os.cpu_count(), load_s))
  log("| epoch | train loss | train acc | dev loss | dev acc | seconds | ex/s |")
  log("|---|---|---|---|---|---|---|")
  for e in range(len(h["loss"])):
    log("| %d | %.4f | %.4f | %.4f | %.4f | %.0f | %.1f |" % (
        e + 1, h["loss"][e], h["accuracy"][e], h["val_loss"][e],
        h["val_accuracy"][e], timer.times[e],
        steps_per_epoch * args.batch_size / timer.times[e]))
  log("final dev accuracy %.4f (runner reference ~0.86 after 3 epochs)"
      % h["val_accuracy"][-1])


if __name__ == "__main__":
  main()
