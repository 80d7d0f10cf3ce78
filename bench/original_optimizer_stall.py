r"""Does the ORIGINAL's AdamWeightDecay stall on the main job's small recipe?

Issue 25, item 2. The main job's pretraining recipe (``tools/main_job.sh``):
the tiny BERT ``data/configs/bert_tiny_config.json`` (L=2, H=128, the
original's tanh GELU ``"gelu"`` on both sides), the Austen-slice records of
``tools/create_pretraining_data.py`` (the main job's flags), batch 32, seq
128, 20 predictions, peak learning rate 1e-3, 300 steps, 30 warm-up steps,
weight decay 0.01, global-norm clip 1.0. Three optimizers, the SAME batches in
the same order and the SAME initial weights (per seed):

* ``original``: bert-tensorflow 1.0.4 itself (``modeling.BertModel`` +
  ``run_pretraining.get_masked_lm_output`` / ``get_next_sentence_output`` +
  ``optimization.create_optimizer(loss, lr, steps, warmup, use_tpu=False)``:
  AdamWeightDecayOptimizer, polynomial decay with linear warm-up,
  ``clip_by_global_norm(1.0)``) in a TF1 graph, in a subprocess
  (``tests/original_graph.py`` patches a copy of the package for TF 2.21);
* ``ours_adamw_original``: bert_tf's pretraining path with
  ``--optimizer=adamw_original`` (the task's ``compute_loss``,
  :class:`bert_tf.training.Trainer`, ``create_optimizer``; driven by
  ``tests/lockstep_util.train_ours``, as the lockstep tests);
* ``ours_adamw``: the same with ``--optimizer=adamw`` (bias-corrected).

The records are read once in file order (``create_pretraining_data``
shuffled them when it wrote them): the last ``--eval_batches`` full batches
are held out (never trained on; note ``--dupe_factor=2`` puts the same
documents, differently masked and paired, on both sides), the others are
cycled in file order (batch ``i`` of step ``i``, modulo their count). The
tool's own pipeline shuffles (``tools/run_pretraining.py`` could not give
the same order), so this drives the Trainer directly.

Initial weights: bert_tf's seeded initialization (``keras.utils.
set_random_seed(seed)``), copied by name into the original graph. Dropout:
``--dropout=on`` is the recipe (0.1; each side draws its own masks),
``off`` sets both rates to 0 (then the original and ours run in lockstep
until rounding differences grow).

Every ``--eval_every`` steps: masked-LM accuracy and loss on the held-out
batches (eval mode, no dropout), the accuracy of always predicting the
training records' commonest masked token on the same batches (the
baseline), and the share of predictions that are that token. The original
is evaluated in its own graph (its ``get_masked_lm_output`` log-probs, as
``run_pretraining``'s ``metric_fn``); its final weights are also evaluated
by our model as a cross-check (``cross_check`` in the JSON).

Results accumulate in ``--output_dir`` (``curves.json``: every run's
curves and per-step training losses, keyed by run; ``table.md``: the
tables), so runs can be added one call at a time:

  bash tools/main_job.sh   # or its step 1 alone: runs/main_job/pretrain_data/austen.tfrecord
  PYTHONPATH=tests nice -n 10 .venv/bin/python bench/original_optimizer_stall.py \
    --records=runs/main_job/pretrain_data/austen.tfrecord --seeds=0 --dropout=on
  ... --sides=original --learning_rate=1e-4        # a variant, original only
  ... --report_only                                 # rewrite table.md
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.join(ROOT, "tests") not in [os.path.abspath(p) for p in sys.path]:
  sys.exit("run with PYTHONPATH=tests: this script uses tests/lockstep_util.py and "
           "tests/original_graph.py")

CONFIG = os.path.join(ROOT, "data", "configs", "bert_tiny_config.json")
SIDES = ("original", "ours_adamw_original", "ours_adamw")
SEQ, PREDS = 128, 20
OUTPUT_DIR = os.path.join(ROOT, "bench", "results", "pretraining", "original_stall")


# --------------------------------------------------------------- data

def load_batches(records, batch_size):
  """Full batches of ``records`` in file order (numpy dicts, the features of
  ``bert_tf.data.pretraining.input.pretraining_dataset``); the last partial
  batch is dropped."""
  from bert_tf.data.pretraining import input as pretraining_input  # pylint: disable=g-import-not-at-top
  ds = pretraining_input.pretraining_dataset(records, batch_size, SEQ, PREDS,
                                             is_training=False)
  out = []
  for b in ds:
    b = {k: v.numpy() for k, v in b.items()}
    if b["input_ids"].shape[0] == batch_size:
      out.append(b)
  return out


def commonest(batches):
  """``(token, accuracy)``: the commonest masked token (weighted) of ``batches``."""
  ids = np.concatenate([b["masked_lm_ids"].ravel() for b in batches])
  w = np.concatenate([b["masked_lm_weights"].ravel() for b in batches])
  counts = np.bincount(ids, weights=w)
  token = int(np.argmax(counts))
  return token, float(counts[token] / w.sum())


def token_accuracy(batches, token):
  """Masked-LM accuracy of always predicting ``token`` on ``batches``."""
  ids = np.concatenate([b["masked_lm_ids"].ravel() for b in batches])
  w = np.concatenate([b["masked_lm_weights"].ravel() for b in batches])
  return float((w * (ids == token)).sum() / w.sum())


def schedule_note(lr, steps, warmup):
  return "lr=%g steps=%d warmup=%d" % (lr, steps, warmup)


def checksum(weights):
  """Sum of squares of every initial weight (float64): equal inits, equal sums."""
  return float(sum(np.square(np.asarray(v, np.float64)).sum() for v in weights.values()))


def run_key(side, lr, steps, warmup, dropout, seed):
  return "%s|lr=%g|steps=%d|warmup=%d|dropout=%s|seed=%d" % (
      side, lr, steps, warmup, dropout, seed)


# --------------------------------------------------------------- our side

def _mlm_loss(sums):
  """This step's training masked-LM and NSP loss from our metric sums."""
  return {"masked_lm": sums["mlm_loss_sum"] / (sums["mlm_weight"] + 1e-5),
          "next_sentence": sums["nsp_loss_sum"] / sums["examples"]}


@contextlib.contextmanager
def _keep_dropout(lu, keep):
  """``lockstep_util.train_ours`` turns dropout off; ``keep`` leaves the
  config's rates (the recipe's 0.1) in place."""
  saved = lu.no_dropout
  if keep:
    lu.no_dropout = lambda config, hidden_act=None: config
  try:
    yield
  finally:
    lu.no_dropout = saved


class Evaluator:
  """Held-out masked-LM metrics of a weight dict (original TF1 names), by
  our pretrainer in eval mode (``training=False``: no dropout)."""

  def __init__(self, model, eval_batches, token):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
    self.model = model
    self.vars = dict(checkpoints.pretrainer_variables(model))
    self.batches = eval_batches
    self.token = token

    @tf.function(reduce_retracing=True)
    def step(features):
      logits = tf.cast(model(features, training=False)["masked_lm_logits"], tf.float32)
      logp = tf.nn.log_softmax(logits, -1)
      nll = -tf.gather(logp, features["masked_lm_ids"], batch_dims=2)
      return tf.argmax(logits, -1, output_type=tf.int32), nll
    self.step = step

  def __call__(self, weights):
    for name, var in self.vars.items():
      var.assign(weights[name])
    return metrics_of(self.batches, [self.step(b) for b in self.batches], self.token)


def metrics_of(batches, outputs, token):
  """Held-out metrics from per-batch ``(predicted ids [B, P], nll [B, P])``."""
  correct = loss = weight = top = 0.0
  predicted = set()
  for b, (pred, nll) in zip(batches, outputs):
    pred, nll = np.asarray(pred).reshape(b["masked_lm_ids"].shape), np.asarray(nll)
    w = b["masked_lm_weights"]
    correct += float((w * (pred == b["masked_lm_ids"])).sum())
    loss += float((w * nll.reshape(w.shape)).sum())
    top += float((w * (pred == token)).sum())
    weight += float(w.sum())
    predicted.update(pred[w > 0].ravel().tolist())
  return {"masked_lm_accuracy": correct / weight, "masked_lm_loss": loss / weight,
          "commonest_share": top / weight, "distinct_predictions": len(predicted)}


def run_ours(optimizer, train_batches, eval_batches, token, args, seed, dropout):
  """Trains bert_tf's pretraining path; returns ``(result dict, initial
  weights by TF1 name, evaluator)``."""
  import lockstep_util as lu  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  config = config_lib.BertConfig.from_json_file(CONFIG)
  assert config.hidden_act == "gelu"  # the original's tanh GELU
  params = pretraining.PretrainingParams(
      input_file=args.records, output_dir=tempfile.mkdtemp(dir=args.work_dir),
      max_seq_length=SEQ, max_predictions_per_seq=PREDS,
      train_batch_size=args.batch_size, learning_rate=args.learning_rate,
      num_train_steps=args.num_train_steps, num_warmup_steps=args.num_warmup_steps,
      optimizer=optimizer)
  task = pretraining.PretrainingTask(config, params)
  batches = [train_batches[i % len(train_batches)] for i in range(args.num_train_steps)]
  points = list(range(args.eval_every, args.num_train_steps + 1, args.eval_every))
  if points[-1] != args.num_train_steps:
    points.append(args.num_train_steps)
  start = time.time()
  with _keep_dropout(lu, dropout == "on"):
    run, model = lu.train_ours(
        task, "pretraining", batches, naming="tf1", seed=seed, step_losses=_mlm_loss,
        snapshot_steps=points, setup=lu.OurSetup(
            optimizer=optimizer, learning_rate=args.learning_rate,
            total_steps=args.num_train_steps, warmup_steps=args.num_warmup_steps))
  seconds = time.time() - start
  want = 0.1 if dropout == "on" else 0.0
  assert task.config.hidden_dropout_prob == want, task.config
  evaluator = Evaluator(model, eval_batches, token)
  curve = [dict(step=0, **evaluator(run.initial))]
  curve += [dict(step=s, **evaluator(run.snapshots[s])) for s in points]
  result = {"curve": curve, "train_masked_lm_loss": [l["masked_lm"] for l in run.losses],
            "train_next_sentence_loss": [l["next_sentence"] for l in run.losses],
            "train_seconds": seconds}
  return result, run.initial, evaluator


# --------------------------------------------------------------- the original

def run_original(workdir, train_batches, eval_batches, initial, token, args, seed,
                 dropout):
  """Writes the case (``lockstep_util.save_original_case`` + the held-out
  batches) and trains the original in a subprocess; returns its result."""
  import lockstep_util as lu  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.BertConfig.from_json_file(CONFIG).to_dict()
  if dropout == "off":
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  lu.save_original_case(workdir, "pretraining", train_batches, initial, config,
                        args.learning_rate, args.num_train_steps, args.num_warmup_steps)
  np.savez(os.path.join(workdir, "eval.npz"),
           **{"%s/%d" % (k, i): v for i, b in enumerate(eval_batches) for k, v in b.items()})
  with open(os.path.join(workdir, "bench.json"), "w") as f:
    json.dump({"num_eval_batches": len(eval_batches), "eval_every": args.eval_every,
               "seed": seed, "token": token}, f)
  start = time.time()
  proc = subprocess.run([sys.executable, os.path.abspath(__file__),
                         "--original_workdir", workdir], capture_output=True, text=True)
  if proc.returncode != 0:
    sys.stderr.write(proc.stderr[-5000:])
    raise SystemExit("the original's run failed (exit %d)" % proc.returncode)
  result = json.load(open(os.path.join(workdir, "original_result.json")))
  result["train_seconds"] = time.time() - start
  return result


def original_main(workdir):
  """The original graph (subprocess, TF1): train on ``batches.npz`` cycled
  for ``total_steps`` steps, evaluating the held-out ``eval.npz`` batches
  every ``eval_every`` steps with an eval-mode tower that shares the
  variables (``is_training=False``: no dropout). Writes
  ``original_result.json`` and the final weights ``original_final.npz``."""
  import original_graph  # pylint: disable=g-import-not-at-top  (sets TF_USE_LEGACY_KERAS)
  original_graph.patched_package(workdir)
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  tf.disable_v2_tensorshape()
  from absl import flags  # pylint: disable=g-import-not-at-top
  from bert import modeling  # pylint: disable=g-import-not-at-top
  from bert import optimization  # pylint: disable=g-import-not-at-top
  from bert import run_pretraining  # pylint: disable=g-import-not-at-top
  flags.FLAGS.mark_as_parsed()
  hp = json.load(open(os.path.join(workdir, "hparams.json")))
  bench = json.load(open(os.path.join(workdir, "bench.json")))
  data = np.load(os.path.join(workdir, "batches.npz"))
  evals = np.load(os.path.join(workdir, "eval.npz"))
  initial = dict(np.load(os.path.join(workdir, "initial.npz")))
  config = modeling.BertConfig.from_json_file(os.path.join(workdir, "bert_config.json"))
  tf.set_random_seed(bench["seed"])  # dropout masks
  keys = sorted({k.split("/")[0] for k in data.files})
  ph = {k: tf.placeholder(tf.float32 if k == "masked_lm_weights" else tf.int32,
                          [None] * data[k + "/0"].ndim, name=k) for k in keys}

  def tower(is_training):
    model = modeling.BertModel(config=config, is_training=is_training,
                               input_ids=ph["input_ids"], input_mask=ph["input_mask"],
                               token_type_ids=ph["segment_ids"],
                               use_one_hot_embeddings=False, scope="bert")
    mlm = run_pretraining.get_masked_lm_output(
        config, model.get_sequence_output(), model.get_embedding_table(),
        ph["masked_lm_positions"], ph["masked_lm_ids"], ph["masked_lm_weights"])
    nsp = run_pretraining.get_next_sentence_output(
        config, model.get_pooled_output(), ph["next_sentence_labels"])
    return mlm, nsp

  (mlm_loss, _, _), (nsp_loss, _, _) = tower(True)
  train_op = optimization.create_optimizer(
      mlm_loss + nsp_loss, hp["learning_rate"], hp["total_steps"], hp["warmup_steps"],
      False)
  tvars = {v.name[:-2]: v for v in tf.trainable_variables()}
  assert sorted(tvars) == sorted(initial), sorted(set(tvars) ^ set(initial))
  with tf.variable_scope(tf.get_variable_scope(), reuse=True):
    (_, eval_nll, eval_log_probs), _ = tower(False)
  assert sorted(v.name[:-2] for v in tf.trainable_variables()) == sorted(tvars)
  eval_pred = tf.argmax(eval_log_probs, axis=-1, output_type=tf.int32)  # as metric_fn

  eval_batches = [{k: evals["%s/%d" % (k, i)] for k in keys}
                  for i in range(bench["num_eval_batches"])]

  def evaluate(sess):
    outs = [sess.run([eval_pred, eval_nll], {ph[k]: b[k] for k in keys})
            for b in eval_batches]
    return metrics_of(eval_batches, outs, bench["token"])

  curve, mlm, nsp = [], [], []
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for name, var in tvars.items():
      var.load(initial[name], sess)
    curve.append(dict(step=0, **evaluate(sess)))
    for i in range(hp["total_steps"]):
      j = i % hp["num_batches"]
      feed = {ph[k]: data["%s/%d" % (k, j)] for k in keys}
      a, b, _ = sess.run([mlm_loss, nsp_loss, train_op], feed)
      mlm.append(float(a))
      nsp.append(float(b))
      if (i + 1) % bench["eval_every"] == 0 or i + 1 == hp["total_steps"]:
        curve.append(dict(step=i + 1, **evaluate(sess)))
    final = sess.run(tvars)
  np.savez(os.path.join(workdir, "original_final.npz"), **final)
  with open(os.path.join(workdir, "original_result.json"), "w") as f:
    json.dump({"curve": curve, "train_masked_lm_loss": mlm,
               "train_next_sentence_loss": nsp}, f)


# --------------------------------------------------------------- report

def _by_step(curve):
  return {p["step"]: p for p in curve}


def write_report(output_dir, data):
  """``table.md``: one accuracy table per (schedule, dropout), seed means
  and per-seed values, plus the lockstep summary of the dropout-off pairs."""
  runs = data["runs"]
  groups = {}
  for key, r in runs.items():
    side, rest = key.split("|", 1)
    config, seed = rest.rsplit("|seed=", 1)
    groups.setdefault(config, {}).setdefault(side, {})[int(seed)] = r
  lines = ["# The original's AdamWeightDecay on the main job's small recipe", "",
           "Written by `bench/original_optimizer_stall.py` (see its docstring). Tiny "
           "BERT (L=2, H=128), Austen-slice records of the main job "
           "(%s), batch %d, seq %d, %d predictions, weight decay 0.01, clip 1.0. "
           "Held out: the last %d full batches of the file (%d records, %d masked "
           "tokens); training cycles the other %d batches in file order. Baseline: "
           "always predicting the training records' commonest masked token "
           "(id %d) on the held-out batches. Accuracy: held-out masked-LM accuracy "
           "(eval mode). `share`: fraction of held-out predictions that are the "
           "commonest token." % (
               data["records"], data["batch_size"], SEQ, PREDS, data["eval_batches"],
               data["eval_records"], data["eval_tokens"], data["train_batches"],
               data["token"], ), ""]
  base = data["baseline"]
  for config in sorted(groups):
    sides = groups[config]
    seeds = sorted({s for v in sides.values() for s in v})
    order = [s for s in SIDES if s in sides]
    lines += ["## %s, seeds %s" % (config.replace("|", ", "),
                                  ",".join(map(str, seeds))), ""]
    lines.append("| step | " + " | ".join(
        "%s acc (share)" % s for s in order) + " | baseline |")
    lines.append("|---" * (len(order) + 2) + "|")
    steps = sorted(_by_step(next(iter(sides[order[0]].values()))["curve"]))
    for st in steps:
      cells = []
      for s in order:
        accs = [_by_step(r["curve"])[st]["masked_lm_accuracy"] for r in sides[s].values()]
        shares = [_by_step(r["curve"])[st]["commonest_share"] for r in sides[s].values()]
        if len(accs) > 1:
          cells.append("%.4f ± %.4f (%.2f)" % (np.mean(accs), np.std(accs), np.mean(shares)))
        else:
          cells.append("%.4f (%.2f)" % (accs[0], shares[0]))
      lines.append("| %d | %s | %.4f |" % (st, " | ".join(cells), base))
    lines.append("")
    lines.append("Held-out masked-LM loss at the last step: " + "; ".join(
        "%s %s" % (s, " ".join("%.3f" % r["curve"][-1]["masked_lm_loss"]
                               for _, r in sorted(sides[s].items()))) for s in order))
    lines.append("Distinct predicted tokens on the held-out batches at the last step: "
                 + "; ".join("%s %s" % (s, " ".join(
                     "%d" % r["curve"][-1]["distinct_predictions"]
                     for _, r in sorted(sides[s].items()))) for s in order))
    if len(seeds) > 1:
      lines.append("Per seed, final accuracy: " + "; ".join(
          "%s %s" % (s, " ".join("%.4f" % r["curve"][-1]["masked_lm_accuracy"]
                                 for _, r in sorted(sides[s].items()))) for s in order))
    for s in order:
      for seed, r in sorted(sides[s].items()):
        if "cross_check" in r:
          lines.append("Cross-check (seed %d): the original's final weights by our "
                       "evaluator: accuracy %.4f (its own graph: %.4f)." % (
                           seed, r["cross_check"]["masked_lm_accuracy"],
                           r["curve"][-1]["masked_lm_accuracy"]))
    if "original" in sides and "ours_adamw_original" in sides:
      for seed in sorted(set(sides["original"]) & set(sides["ours_adamw_original"])):
        a = np.array(sides["original"][seed]["train_masked_lm_loss"])
        b = np.array(sides["ours_adamw_original"][seed]["train_masked_lm_loss"])
        d = np.abs(a - b) / np.abs(a)
        first = lambda t: next((i + 1 for i, x in enumerate(d) if x > t), None)  # noqa: E731
        lines.append(
            "Training MLM loss, original vs ours_adamw_original (seed %d), per-step "
            "relative difference: max over steps 1-10 %.1e, 1-50 %.1e, 1-300 %.1e; "
            "first step above 1e-4: %s, above 1e-2: %s." % (
                seed, d[:10].max(), d[:50].max(), d.max(), first(1e-4), first(1e-2)))
    lines.append("")
  with open(os.path.join(output_dir, "table.md"), "w") as f:
    f.write("\n".join(lines))
  print("\n".join(lines))


# --------------------------------------------------------------- main

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--original_workdir", help=argparse.SUPPRESS)
  ap.add_argument("--records", default=os.path.join(ROOT, "runs", "main_job", "pretrain_data", "austen.tfrecord"))
  ap.add_argument("--work_dir", default=os.path.join(ROOT, "runs", "original_stall"))
  ap.add_argument("--output_dir", default=OUTPUT_DIR)
  ap.add_argument("--sides", default=",".join(SIDES))
  ap.add_argument("--seeds", default="0")
  ap.add_argument("--dropout", choices=("on", "off"), default="on")
  ap.add_argument("--batch_size", type=int, default=32)
  ap.add_argument("--learning_rate", type=float, default=1e-3)
  ap.add_argument("--num_train_steps", type=int, default=300)
  ap.add_argument("--num_warmup_steps", type=int, default=30)
  ap.add_argument("--eval_every", type=int, default=25)
  ap.add_argument("--eval_batches", type=int, default=20)
  ap.add_argument("--report_only", action="store_true")
  ap.add_argument("--redo", action="store_true", help="Rerun runs already in curves.json.")
  args = ap.parse_args()
  if args.original_workdir:
    original_main(args.original_workdir)
    return
  os.makedirs(args.output_dir, exist_ok=True)
  path = os.path.join(args.output_dir, "curves.json")
  data = json.load(open(path)) if os.path.exists(path) else {"runs": {}}
  if args.report_only:
    write_report(args.output_dir, data)
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.makedirs(args.work_dir, exist_ok=True)
  batches = load_batches(args.records, args.batch_size)
  train, held = batches[:-args.eval_batches], batches[-args.eval_batches:]
  token, _ = commonest(train)
  base = token_accuracy(held, token)
  data.update(records=args.records, batch_size=args.batch_size, token=token,
              baseline=base, eval_batches=len(held), train_batches=len(train),
              eval_records=len(held) * args.batch_size,
              eval_tokens=int(sum(b["masked_lm_weights"].sum() for b in held)),
              held_out_commonest=commonest(held))
  print("%d full batches: %d train, %d held out; commonest training token %d, "
        "baseline on held-out %.4f" % (len(batches), len(train), len(held), token, base))
  sides = args.sides.split(",")
  for seed in map(int, args.seeds.split(",")):
    keys = {s: run_key(s, args.learning_rate, args.num_train_steps,
                       args.num_warmup_steps, args.dropout, seed) for s in sides}
    todo = [s for s in sides if args.redo or keys[s] not in data["runs"]]
    if not todo:
      continue
    # Ours with adamw_original runs first: its initial weights (seeded) go
    # to the original; ours_adamw starts from the same (checked).
    initial = evaluator = None
    for side in [s for s in ("ours_adamw_original", "ours_adamw") if s in todo]:
      opt = side[len("ours_"):]
      result, init, evaluator = run_ours(opt, train, held, token, args, seed, args.dropout)
      if initial is not None:
        assert all(np.array_equal(initial[k], init[k]) for k in initial), "init differs"
      initial = init
      result["initial_checksum"] = checksum(init)
      data["runs"][keys[side]] = result
      print("%s: final acc %.4f (%.0fs)" % (keys[side], result["curve"][-1][
          "masked_lm_accuracy"], result["train_seconds"]), flush=True)
      json.dump(data, open(path, "w"))
    if "original" in todo:
      if initial is None:  # the seeded init without training: a 1-step-free build
        _, initial, evaluator = _initial_only(train, held, token, args, seed)
      work = os.path.join(args.work_dir, "original_" + keys["original"].replace(
          "|", "_").replace("=", ""))
      result = run_original(work, train, held, initial, token, args, seed, args.dropout)
      result["initial_checksum"] = checksum(initial)
      final = dict(np.load(os.path.join(work, "original_final.npz")))
      result["cross_check"] = evaluator(final)
      data["runs"][keys["original"]] = result
      print("%s: final acc %.4f (%.0fs)" % (keys["original"], result["curve"][-1][
          "masked_lm_accuracy"], result["train_seconds"]), flush=True)
      json.dump(data, open(path, "w"))
  write_report(args.output_dir, data)


def _initial_only(train, held, token, args, seed):
  """Our seeded initial weights (TF1 names) and an evaluator, no training."""
  import keras  # pylint: disable=g-import-not-at-top
  import lockstep_util as lu  # pylint: disable=g-import-not-at-top
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf import distribute  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  del train, args
  config = config_lib.BertConfig.from_json_file(CONFIG)
  with distribute.get_strategy("one_device").scope():
    keras.utils.set_random_seed(seed)
    model = pretraining.build_pretrainer(config)
  pairs = [(n, v, False) for n, v in checkpoints.pretrainer_variables(model)]
  return None, lu.snapshot(pairs), Evaluator(model, held, token)


if __name__ == "__main__":
  main()
