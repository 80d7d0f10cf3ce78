r"""Hugging Face reference runs for pretraining from scratch and Table 5 (issue 25).

Torch only (no TensorFlow), so it runs where PyTorch is and TensorFlow is not
(the lent GPU machine) as well as here:

  pretrain: ``BertForPreTraining`` from scratch (its own initialization,
    seeded) on our pretraining records (converted once to ``.npz`` by
    ``--to_npz``, which needs TensorFlow), the recipe of ``run_pretraining
    --optimizer=adamw``: torch ``AdamW`` (bias correction, weight decay 0.01
    except LayerNorm and biases, eps 1e-6), global-norm clip 1.0, linear
    warm-up then linear decay (``--schedule=original``: the original's
    polynomial decay from step 0, as our runner; ``hf``: HF's
    ``get_linear_schedule_with_warmup``), dropout on, float32 (TF32 off). The
    masked-LM loss is the original's (``sum(w * nll) / (sum(w) + 1e-5)``),
    plus the NSP loss unless ``--no_nsp``. Every ``--window`` steps it records
    what our runner's TensorBoard ``train/`` holds for the same window
    (masked-LM accuracy = correct masked tokens / masked tokens over the
    window's steps; NSP accuracy; mean losses).
  finetune: then ``BertForSequenceClassification`` from those weights (or
    from a random init with ``--from_scratch``) on a bundled TSV task, the
    recipe of ``run_classifier --optimizer=adamw`` (same schedule, clip,
    decay; per-epoch shuffle, final model), dev accuracy.

Output: one JSON file per call with the recipe, per-window curves and the
fine-tuning accuracies.

  .venv/bin/python bench/hf_pretraining_reference.py --to_npz RECORDS OUT.npz
  python bench/hf_pretraining_reference.py --npz OUT.npz --seeds 1,2,3 \
    --num_train_steps 1000 --output hf_curves.json
"""

import argparse
import csv
import json
import math
import os
import time

import numpy as np

from _cpuinfo import cpu_line  # pylint: disable=wrong-import-position

FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
            "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def to_npz(records, out):
  """Our TFRecords (any count of files, in order) -> one ``.npz`` of arrays."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pretraining.records import parse_example_to_numpy  # pylint: disable=g-import-not-at-top
  rows = [parse_example_to_numpy(r.numpy())
          for r in tf.data.TFRecordDataset(records.split(","))]
  dtypes = dict(input_ids=np.uint16, input_mask=np.int8, segment_ids=np.int8,
                masked_lm_positions=np.uint8, masked_lm_ids=np.uint16,
                masked_lm_weights=np.float32, next_sentence_labels=np.int8)
  arrays = {k: np.stack([r[k] for r in rows]).astype(dtypes[k]) for k in FEATURES}
  arrays["next_sentence_labels"] = arrays["next_sentence_labels"].reshape(len(rows))
  np.savez_compressed(out, **arrays)
  print("wrote %d instances to %s" % (len(rows), out))


def lr_lambda(kind, warmup, total):
  """Learning-rate multiplier for update ``step`` (0-based, as both runners)."""
  def original(step):  # optimization.py: PolynomialDecay(power=1), warm-up overrides
    if step < warmup:
      return step / warmup
    return max(0.0, 1.0 - min(step, total) / total)

  def hf(step):  # transformers.get_linear_schedule_with_warmup
    if step < warmup:
      return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))
  return {"original": original, "hf": hf}[kind]


def make_optimizer(torch, model, lr, weight_decay=0.01):
  decay, no_decay = [], []
  for name, p in model.named_parameters():
    (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(p)
  return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                            {"params": no_decay, "weight_decay": 0.0}],
                           lr=lr, betas=(0.9, 0.999), eps=1e-6)


def bert_config(transformers, path, **kw):
  with open(path, encoding="utf-8") as f:
    c = json.load(f)
  return transformers.BertConfig(
      vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
      num_hidden_layers=c["num_hidden_layers"],
      num_attention_heads=c["num_attention_heads"],
      intermediate_size=c["intermediate_size"], hidden_act="gelu",
      hidden_dropout_prob=c["hidden_dropout_prob"],
      attention_probs_dropout_prob=c["attention_probs_dropout_prob"],
      max_position_embeddings=c["max_position_embeddings"],
      type_vocab_size=c["type_vocab_size"],
      initializer_range=c["initializer_range"], **kw)


def pretrain(torch, transformers, data, args, seed, device):
  """One from-scratch run; returns (model, curve list)."""
  torch.manual_seed(seed)
  np_rng = np.random.RandomState(seed)
  model = transformers.BertForPreTraining(
      bert_config(transformers, args.bert_config_file)).to(device)
  model.train()
  opt = make_optimizer(torch, model, args.learning_rate)
  sched = torch.optim.lr_scheduler.LambdaLR(
      opt, lr_lambda(args.schedule, args.num_warmup_steps, args.num_train_steps))
  n = len(data["input_ids"])
  order = np_rng.permutation(n)
  pos, curve = 0, []
  sums = dict(mlm_correct=0.0, mlm_weight=0.0, nsp_correct=0.0, count=0.0,
              mlm_loss=0.0, nsp_loss=0.0, steps=0)
  t0 = time.time()
  for step in range(1, args.num_train_steps + 1):
    if pos + args.train_batch_size > n:
      order, pos = np_rng.permutation(n), 0
    idx = order[pos:pos + args.train_batch_size]
    pos += args.train_batch_size
    b = {k: torch.from_numpy(data[k][idx].astype(
        np.float32 if k == "masked_lm_weights" else np.int64)).to(device)
         for k in FEATURES}
    out = model(input_ids=b["input_ids"], attention_mask=b["input_mask"],
                token_type_ids=b["segment_ids"])
    logits = out.prediction_logits.gather(
        1, b["masked_lm_positions"][:, :, None].expand(
            -1, -1, out.prediction_logits.shape[-1]))
    logp = torch.log_softmax(logits.float(), -1)
    nll = -logp.gather(2, b["masked_lm_ids"][:, :, None])[:, :, 0]
    w = b["masked_lm_weights"]
    mlm_loss = (nll * w).sum() / (w.sum() + 1e-5)
    nsp_labels = b["next_sentence_labels"].reshape(-1)
    nsp_loss = torch.nn.functional.cross_entropy(out.seq_relationship_logits.float(),
                                                 nsp_labels)
    loss = mlm_loss if args.no_nsp else mlm_loss + nsp_loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    with torch.no_grad():
      sums["mlm_correct"] += float(((logits.argmax(-1) == b["masked_lm_ids"]).float()
                                    * w).sum())
      sums["mlm_weight"] += float(w.sum())
      sums["nsp_correct"] += float((out.seq_relationship_logits.argmax(-1)
                                    == nsp_labels).float().sum())
      sums["count"] += float(len(idx))
      sums["mlm_loss"] += float(mlm_loss)
      sums["nsp_loss"] += float(nsp_loss)
      sums["steps"] += 1
    if step % args.window == 0:
      curve.append(dict(step=step,
                        masked_lm_accuracy=sums["mlm_correct"] / sums["mlm_weight"],
                        next_sentence_accuracy=sums["nsp_correct"] / sums["count"],
                        masked_lm_loss=sums["mlm_loss"] / sums["steps"],
                        next_sentence_loss=sums["nsp_loss"] / sums["steps"],
                        seconds=time.time() - t0))
      print("seed %d step %d %s" % (seed, step, " ".join(
          "%s=%.4f" % (k, v) for k, v in curve[-1].items() if k != "step")),
            flush=True)
      sums = dict.fromkeys(sums, 0.0)
  return model, curve


def read_tsv(path):
  with open(path, encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  head = rows[0]
  texts_a = [r[head.index("sentence" if "sentence" in head else "sentence1")]
             for r in rows[1:]]
  texts_b = ([r[head.index("sentence2")] for r in rows[1:]]
             if "sentence2" in head else None)
  labels = [int(r[head.index("label")]) for r in rows[1:]]
  return texts_a, texts_b, np.asarray(labels)


def finetune(torch, transformers, encoder_state, task_dir, args, seed, device):
  """Fine-tunes a classifier from ``encoder_state`` (None: random init)."""
  # (transformers 5 ignores BertTokenizer(vocab_file=...) and builds an empty
  # vocab: every word is [UNK]. The vocab is passed as a dict.)
  with open(args.vocab_file, encoding="utf-8") as f:
    vocab = {w.rstrip("\n"): i for i, w in enumerate(f)}
  tok = transformers.BertTokenizerFast(vocab=vocab, do_lower_case=True)
  probe = tok("the")["input_ids"]
  assert probe == [vocab["[CLS]"], vocab["the"], vocab["[SEP]"]], probe

  def encode(split):
    a, b, y = read_tsv(os.path.join(task_dir, split + ".tsv"))
    enc = tok(a, b, max_length=args.max_seq_length, truncation="longest_first",
              padding="max_length", return_tensors="np")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "token_type_ids": enc["token_type_ids"]}, y

  train, y_train = encode("train")
  dev, y_dev = encode("dev")
  torch.manual_seed(seed)
  rng = np.random.RandomState(seed)
  model = transformers.BertForSequenceClassification(bert_config(
      transformers, args.bert_config_file, num_labels=int(y_train.max()) + 1))
  if encoder_state is not None:
    missing, unexpected = model.bert.load_state_dict(encoder_state, strict=False)
    assert not unexpected and all("pooler" in m for m in missing), (missing, unexpected)
  model.to(device).train()
  steps_per_epoch = len(y_train) // args.ft_batch_size
  total = int(len(y_train) / args.ft_batch_size * args.ft_epochs)
  opt = make_optimizer(torch, model, args.ft_learning_rate)
  sched = torch.optim.lr_scheduler.LambdaLR(
      opt, lr_lambda(args.schedule, int(total * 0.1), total))
  step = 0
  while step < total:
    order = rng.permutation(len(y_train))
    for i in range(steps_per_epoch):
      if step >= total:
        break
      idx = order[i * args.ft_batch_size:(i + 1) * args.ft_batch_size]
      b = {k: torch.from_numpy(v[idx].astype(np.int64)).to(device)
           for k, v in train.items()}
      out = model(**b, labels=torch.from_numpy(y_train[idx].astype(np.int64)).to(device))
      opt.zero_grad(set_to_none=True)
      out.loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      opt.step()
      sched.step()
      step += 1
  model.eval()
  preds = []
  with torch.no_grad():
    for i in range(0, len(y_dev), 256):
      b = {k: torch.from_numpy(v[i:i + 256].astype(np.int64)).to(device)
           for k, v in dev.items()}
      preds.append(model(**b).logits.argmax(-1).cpu().numpy())
  return float((np.concatenate(preds) == y_dev).mean())


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--to_npz", nargs=2, metavar=("RECORDS", "OUT"))
  ap.add_argument("--npz")
  ap.add_argument("--bert_config_file", default="data/configs/bert_mini_config.json")
  ap.add_argument("--vocab_file", default="data/vocab/uncased_vocab.txt")
  ap.add_argument("--seeds", default="1,2,3")
  ap.add_argument("--num_train_steps", type=int, default=1000)
  ap.add_argument("--num_warmup_steps", type=int, default=100)
  ap.add_argument("--train_batch_size", type=int, default=64)
  ap.add_argument("--learning_rate", type=float, default=5e-4)
  ap.add_argument("--schedule", choices=("original", "hf"), default="original")
  ap.add_argument("--no_nsp", action="store_true")
  ap.add_argument("--window", type=int, default=50)
  ap.add_argument("--finetune", default="",
                  help="comma-separated task dirs (TSV) to fine-tune each run on")
  ap.add_argument("--from_scratch", action="store_true",
                  help="fine-tune from a random init (no pretraining)")
  ap.add_argument("--ft_seeds", default="1,2,3")
  ap.add_argument("--ft_learning_rate", type=float, default=1e-4)
  ap.add_argument("--ft_batch_size", type=int, default=32)
  ap.add_argument("--ft_epochs", type=float, default=3.0)
  ap.add_argument("--max_seq_length", type=int, default=128)
  ap.add_argument("--output", required=False)
  args = ap.parse_args()
  if args.to_npz:
    to_npz(*args.to_npz)
    return
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.backends.cuda.matmul.allow_tf32 = False
  torch.backends.cudnn.allow_tf32 = False
  device = "cuda" if torch.cuda.is_available() else "cpu"
  result = dict(recipe=vars(args), device=(torch.cuda.get_device_name(0)
                                           if device == "cuda" else cpu_line()),
                torch=torch.__version__, transformers=transformers.__version__, runs=[])
  tasks = [t for t in args.finetune.split(",") if t]
  data = None
  if not args.from_scratch:
    d = np.load(args.npz)
    data = {k: d[k] for k in d.files}
    ids = data["masked_lm_ids"][:4096][data["masked_lm_weights"][:4096] > 0]
    result["commonest_token_accuracy"] = float(np.bincount(ids).max() / len(ids))
  for seed in [int(s) for s in args.seeds.split(",")]:
    run = dict(seed=seed)
    state = None
    if data is not None:
      model, run["curve"] = pretrain(torch, transformers, data, args, seed, device)
      state = {k: v.detach().cpu() for k, v in model.bert.state_dict().items()}
    for task in tasks:
      accs = [finetune(torch, transformers, state, task, args, s, device)
              for s in [int(x) for x in args.ft_seeds.split(",")]]
      run.setdefault("finetune", {})[os.path.basename(task.rstrip("/"))] = accs
      print("seed %d %s dev accuracy %s" % (seed, task, accs), flush=True)
    result["runs"].append(run)
  if args.output:
    with open(args.output, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)


if __name__ == "__main__":
  main()
