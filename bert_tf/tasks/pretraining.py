"""The pretraining task: masked LM + next sentence (original ``run_pretraining.py``).

:class:`PretrainingTask` supplies the model, inputs, loss and metrics to
:class:`bert_tf.runner.Runner`, which owns the loop, resume and outputs;
:func:`bert_tf.jobs.run_pretraining` composes the two.

Loss, as the original: masked-LM ``sum(w * CE) / (sum(w) + 1e-5)`` plus
next-sentence mean cross-entropy, over the GLOBAL batch: the denominators
(the masked-LM weight sum and the example count) are summed over all
replicas and accumulation micro-batches before the forward pass (see
:class:`bert_tf.training.Trainer`), so one step is the same whether the
batch runs on one device, on N replicas or in k micro-batches. (On one
device this is exactly the original; the original on a TPU pod averaged the
per-core losses, each with its own denominator.)

Metrics as the original's ``eval_results.txt``: ``masked_lm_accuracy``,
``masked_lm_loss``, ``next_sentence_accuracy``, ``next_sentence_loss``,
``global_step``.

Exact resume: the checkpoint holds the model, the optimizer (with its step),
the dropout seed-generator states and the ``tf.data`` iterator (shuffle
buffers and position), so with ``deterministic=True`` (op determinism) a
run killed at any point and restarted ends with bit-identical weights.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import shutil
from typing import Optional, Tuple

import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import optimization
from bert_tf import precision
from bert_tf import run_dir
from bert_tf import tokenization
from bert_tf.data.pretraining import documents
from bert_tf.data.pretraining import input as pretraining_input
from bert_tf.modeling import models
from bert_tf.modeling import presets
from bert_tf.params import field
from bert_tf.tasks import base
from bert_tf.tasks import fine_tuning

DTYPES = precision.DTYPES
OPTIMIZERS = ("adamw_original", "adamw", "lamb")


@dataclasses.dataclass
class PretrainingParams:
  """Flags of the original ``run_pretraining.py`` (same names and defaults),
  plus the added ones; ``tools/run_pretraining.py`` defines its flags from
  these fields."""
  input_file: str = field(help="Input TF example files (comma-separated globs).")
  output_dir: str = field(help="Where checkpoints and eval_results.txt go.")
  init_checkpoint: Optional[str] = field(None, "Initial encoder weights (ours, original TF1, or a Hugging Face directory).")
  max_seq_length: int = field(128, "Sequence length of the records.")
  max_predictions_per_seq: int = field(20, "Masked LM predictions per record.")
  train_batch_size: int = field(32, "Global training batch size (all replicas, all accumulation steps).")
  eval_batch_size: int = field(8, "Eval batch size.")
  learning_rate: float = field(5e-5, "Peak learning rate (Adam).")
  num_train_steps: int = field(100000, "Number of training steps.")
  num_warmup_steps: int = field(10000, "Number of warm-up steps.")
  save_checkpoints_steps: int = field(1000, "How often to save a checkpoint.")
  iterations_per_loop: int = field(100, "Steps per host loop (the most per tf.function call) and per progress line; a progress line also comes at least about every minute.")
  max_eval_steps: int = field(100, "Maximum number of eval steps.")
  optimizer: str = field("adamw_original", "Optimizer (default: the original AdamWeightDecay).", choices=OPTIMIZERS)
  nsp: bool = field(True, "Train the next-sentence head (False: the paper's No-NSP ablation).")
  seed: int = field(12345, "Shuffle, dropout and initialization seed.")
  stop_at_step: Optional[int] = field(None, "Stop (with a checkpoint) at this step; a rerun resumes to --num_train_steps.")
  vocab_file: Optional[str] = field(None, "Vocab of the model (the one the records were made with); default: the --init_checkpoint's (vocab.txt of its run or release directory; a Hugging Face directory's, tokenizer.json's vocab too), else vocab.txt beside --bert_config_file, else the one an --input_file manifest records. Checked against vocab_size; copied into --output_dir with its casing, so fine-tuning with --init_checkpoint=OUTPUT_DIR needs no --vocab_file.")
  num_accumulation_steps: int = field(1, "Split each replica's batch into this many micro-batches; one update from their summed gradients.")
  dtype: str = field("float32", "Compute dtype policy (mixed_float16 adds dynamic loss scaling; auto: mixed_bfloat16 where the CPU has bf16 units (avx512_bf16/amx_bf16) or on a TPU, else float32).", choices=DTYPES)
  jit_compile: bool = field(False, "XLA-compile the forward and backward pass.")
  deterministic: bool = field(False, "Enable TensorFlow op determinism (bit-identical reruns and resumes).")
  dynamic: bool = field(False, "Input files hold tokenized documents (tools/create_pretraining_documents.py); pairs and masks are made on the fly.")
  masked_lm_prob: float = field(0.15, "--dynamic: masked LM probability.")
  short_seq_prob: float = field(0.1, "--dynamic: probability of a shorter target length.")
  do_whole_word_mask: bool = field(False, "--dynamic: mask whole words.")
  keep_checkpoint_max: int = field(3, "Checkpoints kept.")


build_pretrainer = models.build_pretrainer


def model_files(params) -> fine_tuning.ModelFiles:
  """The config and vocab ``run_pretraining.py`` starts from: those of
  :func:`bert_tf.tasks.fine_tuning.model_files` (``--bert_config_file`` /
  ``--vocab_file``, else the ``--init_checkpoint``'s preset loader: a
  Hugging Face directory's ``config.json`` and vocab, ``tokenizer.json``'s
  WordPiece vocab when it has no ``vocab.txt`` as transformers 5 saves it;
  a run's or release directory's files; else the files beside the config
  or in ``output_dir``), and without a vocab there the one a data manifest
  given as ``--input_file`` records (``--runner=beam``'s
  ``<output_file>.json``). The run directory keeps a copy of the vocab
  (``vocab.txt``, with its casing), for fine-tuning with
  ``--init_checkpoint=RUN``.

  Args:
    params: with ``init_checkpoint``, ``bert_config_file``, ``vocab_file``,
      ``input_file`` (comma-separated patterns), optionally ``output_dir``.

  Returns:
    :class:`bert_tf.tasks.fine_tuning.ModelFiles` (``vocab_file`` None:
    nothing found, the run records no vocab).

  Raises:
    as :func:`bert_tf.tasks.fine_tuning.model_files`.
  """
  files = fine_tuning.model_files(params)
  if files.vocab_file:
    return files
  for pattern in (params.input_file or "").split(","):
    recorded = (documents.manifest_flags(pattern.strip()) or {}).get("vocab_file") \
        if pattern.strip() else None
    if recorded and os.path.exists(recorded):
      return dataclasses.replace(files, vocab_file=recorded, do_lower_case=None)
  return files


def tokenizer_settings(params: PretrainingParams) -> dict:
  """How the records' text was tokenized, as a pretraining run records it.

  The records hold ids only; the casing comes from the data tool's manifest
  (``--input_file`` naming a ``<output_file>.json`` of the same vocab:
  its ``do_lower_case`` and ``preserve_unused_tokens``), else from the vocab
  itself (cased when it holds upper-case word pieces:
  :func:`bert_tf.tokenization.vocab_looks_cased`, the check fine-tuning
  warns with).

  Args:
    params: with ``vocab_file`` set.

  Returns:
    ``{"do_lower_case": bool, "casing_from": str, "max_seq_length": int}``
    and ``preserve_unused_tokens`` when the manifest records it.
  """
  out = {"max_seq_length": params.max_seq_length}
  for pattern in params.input_file.split(","):
    flags = documents.manifest_flags(pattern.strip()) or {}
    theirs = flags.get("vocab_file")
    if (flags.get("do_lower_case") is not None and theirs and os.path.exists(theirs)
        and os.path.samefile(theirs, params.vocab_file)):
      out.update(do_lower_case=bool(flags["do_lower_case"]),
                 casing_from="the data manifest %s" % pattern.strip())
      if flags.get("preserve_unused_tokens") is not None:
        out["preserve_unused_tokens"] = bool(flags["preserve_unused_tokens"])
      return out
  cased = tokenization.vocab_looks_cased(tokenization.load_vocab(params.vocab_file))
  out.update(do_lower_case=not cased,
             casing_from="the vocab (%s upper-case word pieces)" % ("has" if cased else "no"))
  return out


def loss_normalizers(features):
  """Counters the loss is divided by: float32 ``mlm_weight`` (sum of
  ``masked_lm_weights``) and ``examples`` (batch size), from the inputs."""
  return {"mlm_weight": tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                              tf.float32)),
          "examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}


def pretraining_metrics(outputs, features, nsp=True, totals=None):
  """Loss (original definition) and metric counters.

  Args:
    outputs: :class:`BertPretrainer` outputs (logits of any float dtype;
      the loss is computed in float32).
    features: the batch (see :func:`pretraining_input.pretraining_dataset`).
    totals: optional global ``{"mlm_weight", "examples"}`` (see
      :func:`loss_normalizers`): the loss is then this batch's share of the
      global loss ``sum(w*CE)/(W + 1e-5) + sum(nsp CE)/N``; else the loss of
      this batch alone.

  Returns:
    ``(loss, sums)``: ``loss`` float32 scalar; ``sums`` dict of float32
    counters: ``mlm_loss_sum``, ``mlm_weight``, ``mlm_correct``,
    ``nsp_loss_sum``, ``nsp_correct``, ``examples``.
  """
  logits = tf.cast(outputs["masked_lm_logits"], tf.float32)
  num, den = models.masked_lm_loss(logits, features["masked_lm_ids"],
                                   features["masked_lm_weights"])
  w = tf.cast(features["masked_lm_weights"], tf.float32)
  pred = tf.argmax(logits, -1, output_type=tf.int32)
  correct = tf.cast(tf.equal(pred, features["masked_lm_ids"]), tf.float32)
  batch = tf.cast(tf.shape(logits)[0], tf.float32)
  mlm_den = den if totals is None else totals["mlm_weight"]
  examples = batch if totals is None else totals["examples"]
  loss = num / (mlm_den + 1e-5)
  sums = {"mlm_loss_sum": num, "mlm_weight": den,
          "mlm_correct": tf.reduce_sum(correct * w), "examples": batch}
  if nsp:
    nsp_logits = tf.cast(outputs["next_sentence_logits"], tf.float32)
    labels = tf.reshape(features["next_sentence_labels"], [-1])
    nsp_sum = models.next_sentence_loss(nsp_logits, labels)
    loss += nsp_sum / examples
    sums["nsp_loss_sum"] = nsp_sum
    sums["nsp_correct"] = tf.reduce_sum(tf.cast(tf.equal(
        tf.argmax(nsp_logits, -1, output_type=tf.int32), labels), tf.float32))
  return loss, sums


def summarize(sums):
  """Metric counters -> the original's named metrics (floats)."""
  out = {}
  if sums.get("mlm_weight"):
    out["masked_lm_loss"] = sums["mlm_loss_sum"] / sums["mlm_weight"]
    out["masked_lm_accuracy"] = sums["mlm_correct"] / sums["mlm_weight"]
  if "nsp_loss_sum" in sums and sums.get("examples"):
    out["next_sentence_loss"] = sums["nsp_loss_sum"] / sums["examples"]
    out["next_sentence_accuracy"] = sums["nsp_correct"] / sums["examples"]
  return out


# The original optimizer's early over-sized steps (moved to bert_tf.optimization).
early_step_ratio = optimization.early_step_ratio


def warmup_warning(params) -> Optional[str]:
  """The line to print when the original optimizer runs with a short warm-up.

  The original's AdamWeightDecay has no bias correction; with its 10,000
  warm-up steps that is gone before the peak learning rate. With a warm-up
  far below ~1/(1 - beta_2) = 1,000 steps the peak rate meets steps several
  times Adam's (:func:`early_step_ratio`), and a small model can stall at
  predicting the commonest tokens (BUILD_NOTES: the stall). Returns None
  when nothing is wrong.
  """
  return optimization.short_warmup_warning(
      params.optimizer, params.num_warmup_steps,
      "--num_warmup_steps=%d" % params.num_warmup_steps,
      "and a small model can stall at predicting the commonest token (watch "
      "masked_lm_accuracy against commonest_token_accuracy)",
      " or --num_warmup_steps>=1000")


def commonest_token_accuracy(params, max_records: int = 4096) -> Tuple[int, float]:
  """The masked-LM accuracy of always predicting the commonest masked token.

  Counts ``masked_lm_ids`` (weighted by ``masked_lm_weights``) over the
  first ``max_records`` records of ``input_file`` in file order (the same
  records whatever the batch size): a model whose accuracy sits at this
  number has learned only token frequencies (a stalled run).

  Returns:
    ``(token_id, accuracy)``; ``(0, 0.0)`` when the data has no prediction.
  """
  ds = _dataset(params, params.eval_batch_size, False, None)
  counts = collections.Counter()
  total, seen = 0.0, 0
  for features in ds:
    if seen >= max_records:
      break
    take = max_records - seen
    ids = features["masked_lm_ids"].numpy()[:take]
    weights = features["masked_lm_weights"].numpy()[:take]
    seen += ids.shape[0]
    ids, weights = ids.reshape(-1), weights.reshape(-1)
    for token, w in zip(ids[weights > 0].tolist(), weights[weights > 0].tolist()):
      counts[token] += w
    total += float(weights.sum())
  if not counts or total <= 0:
    return 0, 0.0
  token, count = counts.most_common(1)[0]
  return int(token), float(count / total)


def vocab_size_of(vocab_file):
  """Number of tokens in a vocab file (one per line, as the original)."""
  return len(tokenization.load_vocab(vocab_file))


def check_schedule(params) -> None:
  """ParamsError naming the flag of a schedule that cannot train, which the
  original's ``run_pretraining.py`` runs anyway: a learning rate or step
  count that is not positive, a negative warm-up. A warm-up longer than
  training stays allowed: it is what the original's defaults
  (``--num_warmup_steps=10000``) make of every short run, whose learning
  rate then ramps for the whole run.

  Raises:
    ParamsError: the first bad field, ``argument`` set to its name.
  """
  base.check_positive(params, ("learning_rate", "num_train_steps"))
  if params.num_warmup_steps < 0:
    raise errors.ParamsError("num_warmup_steps must be >= 0, got %d" % params.num_warmup_steps,
                             argument="num_warmup_steps")


def check_inputs(config, params, batch_records=None):
  """Everything that can be checked before any step runs.

  Checks the schedule (:func:`check_schedule`), ``--max_seq_length`` against ``max_position_embeddings``, the vocab
  file's size against ``vocab_size``, that ``--input_file`` matches files,
  and (static pipeline) the first records of every shard: their widths
  against ``--max_seq_length`` / ``--max_predictions_per_seq`` and their
  token ids (the first batch of the first file) against ``vocab_size``.

  Returns:
    the list of input files.

  Raises:
    ValueError / ``errors.InputError`` /
    ``pretraining_input.RecordError``, naming the flag or file; InputError
    also when the records hold fewer instances than one training batch.
  """
  check_schedule(params)
  if params.max_seq_length > config.max_position_embeddings:
    raise ValueError("--max_seq_length %d exceeds max_position_embeddings %d of "
                     "the BERT config" % (params.max_seq_length,
                                          config.max_position_embeddings))
  if params.vocab_file:
    config_lib.check_vocab_size(vocab_size_of(params.vocab_file), config,
                                params.vocab_file)
  if params.num_accumulation_steps < 1:
    raise ValueError("--num_accumulation_steps must be >= 1, got %d"
                     % params.num_accumulation_steps)
  files = documents.expand_input_files(params.input_file)
  if not params.dynamic:
    pretraining_input.inspect_records(
        files[:1], params.max_seq_length, params.max_predictions_per_seq,
        vocab_size=config.vocab_size,
        num_records=max(1, batch_records or params.train_batch_size))
    if len(files) > 1:
      pretraining_input.inspect_records(
          files[1:], params.max_seq_length, params.max_predictions_per_seq,
          vocab_size=config.vocab_size, num_records=1)
    batch = params.train_batch_size
    have = pretraining_input.count_records(files, batch)
    if have < batch:
      raise errors.InputError(
          "--input_file %s holds %d instance%s but one training batch needs %d "
          "(--train_batch_size): add text, raise create_pretraining_data's "
          "--dupe_factor, or lower --train_batch_size" % (
              params.input_file, have, "" if have == 1 else "s", batch),
          argument="input_file")
  return files


def _dataset(params, batch_size, is_training, input_context):
  if params.dynamic:
    from bert_tf.data.pretraining.dynamic import dynamic_pretraining_dataset  # pylint: disable=g-import-not-at-top
    if not params.vocab_file:
      raise errors.ParamsError("dynamic needs vocab_file", argument="vocab_file")
    return dynamic_pretraining_dataset(
        params.input_file, params.vocab_file, batch_size, params.max_seq_length,
        params.max_predictions_per_seq, masked_lm_prob=params.masked_lm_prob,
        short_seq_prob=params.short_seq_prob,
        do_whole_word_mask=params.do_whole_word_mask, nsp=params.nsp,
        seed=params.seed, is_training=is_training, input_context=input_context)
  return pretraining_input.pretraining_dataset(
      params.input_file, batch_size, params.max_seq_length,
      params.max_predictions_per_seq, is_training=is_training, seed=params.seed,
      input_context=input_context)


def _name_bad_record(params, files, error):
  """Re-raises a tf.data parse error naming the file and record (scans the
  shards one by one); re-raises ``error`` itself when no record is bad."""
  if params.dynamic:
    raise error
  where = pretraining_input.find_bad_record(files, params.max_seq_length,
                                            params.max_predictions_per_seq)
  if where is None:
    raise error
  raise pretraining_input.RecordError("--input_file: " + where) from None


def evaluate(model, params, nsp=True):
  """One ordered pass (at most ``max_eval_steps`` batches) over ``input_file``.

  Static pipeline: the records in file order, not shuffled, the last partial
  batch kept (the original's ``is_training=False`` input_fn).
  """
  ds = _dataset(params, params.eval_batch_size, False, None)

  @tf.function(reduce_retracing=True, autograph=False)
  def step(features):
    return pretraining_metrics(model(features, training=False), features, nsp)[1]

  totals = {}
  for i, features in enumerate(ds):
    if i >= params.max_eval_steps:
      break
    for k, v in step(features).items():
      totals[k] = totals.get(k, 0.0) + float(v)
  return summarize(totals)


class PretrainingTask(base.Task):
  """Masked-LM + next-sentence pretraining as a :class:`bert_tf.tasks.base.Task`.

  Inputs: the original TFRecords (``--input_file``), or tokenized documents
  masked on the fly (``dynamic``); the iterator position is checkpointed
  (exact resume). Loss: :func:`pretraining_metrics` over the global batch
  (:func:`loss_normalizers`). Evaluation: one ordered pass of at most
  ``max_eval_steps`` batches (:func:`evaluate`).

  Args:
    config: :class:`bert_tf.config.BertConfig`.
    params: :class:`PretrainingParams`.

  Example::

    task = PretrainingTask(BertConfig.from_json_file("bert_config.json"),
                           PretrainingParams(input_file="out.tfrecord",
                                             output_dir="/tmp/pt"))
    Runner(RunnerParams.from_params(task.params)).run(task, strategy)
  """

  name = "pretraining"
  example_unit = "seq"
  throughput_name = "sequences_per_second"
  resumable_input = True
  normalized_loss = True
  def __init__(self, config: config_lib.BertConfig, params: PretrainingParams):
    self.config = config
    self.params = params
    self.train_batch_size = params.train_batch_size
    self._files = None
    self._baseline = None

  @property
  def run_files(self) -> tuple:
    """``bert_config.json``; with a known vocab also ``vocab.txt`` and
    ``pretraining_config.json`` (its casing), so that fine-tuning with
    ``--init_checkpoint=RUN`` needs no ``--vocab_file``."""
    if self.params.vocab_file:
      return (run_dir.BERT_CONFIG, run_dir.VOCAB, run_dir.PRETRAINING_CONFIG)
    return (run_dir.BERT_CONFIG,)

  def check_inputs(self) -> None:
    self._files = check_inputs(self.config, self.params)

  def optimizer_spec(self) -> base.OptimizerSpec:
    p = self.params
    return base.OptimizerSpec(p.learning_rate, p.num_train_steps,
                              p.num_warmup_steps, p.optimizer)

  def build_model(self):
    return models.build_pretrainer(self.config, nsp=self.params.nsp)

  def initialize(self, model):
    """``--init_checkpoint``: the encoder and the heads the start model has
    (:func:`bert_tf.modeling.presets.load_weights`; the line names the heads
    that start from a random init)."""
    if self.params.init_checkpoint:
      return presets.load_weights(model, self.params.init_checkpoint,
                                  models.PRETRAINER_TASK)
    return None

  def write_run_files(self, output_dir: str) -> None:
    """``bert_config.json``; with ``vocab_file``, a copy as ``vocab.txt`` and
    :func:`tokenizer_settings` as ``pretraining_config.json`` (each written
    whole under a temporary name, then renamed)."""
    self.config.to_json_file(os.path.join(output_dir, run_dir.BERT_CONFIG))
    vocab = self.params.vocab_file
    if not vocab:
      return
    dst = os.path.join(output_dir, run_dir.VOCAB)
    if not (os.path.exists(dst) and os.path.samefile(vocab, dst)):
      tmp = dst + ".tmp"
      shutil.copyfile(vocab, tmp)
      os.replace(tmp, dst)
    io_utils.atomic_write_text(
        os.path.join(output_dir, run_dir.PRETRAINING_CONFIG),
        json.dumps(tokenizer_settings(self.params), indent=2, sort_keys=True) + "\n")

  def train_dataset(self, batch_size, input_context):
    return _dataset(self.params, batch_size, True, input_context)

  def loss_normalizers(self, features):
    return loss_normalizers(features)

  def compute_loss(self, model, features, totals=None):
    outputs = model(features, training=True)
    return pretraining_metrics(outputs, features, self.params.nsp, totals)

  def baseline(self) -> Tuple[int, float]:
    """:func:`commonest_token_accuracy` of the input (computed once)."""
    if self._baseline is None:
      try:
        self._baseline = commonest_token_accuracy(self.params)
      except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        self.explain_data_error(e)  # names the file and record
        raise
    return self._baseline

  def train_metrics(self, sums):
    out = summarize(sums)
    if "masked_lm_accuracy" in out:
      out["commonest_token_accuracy"] = self.baseline()[1]
    return out

  def explain_data_error(self, error):
    _name_bad_record(self.params, self._files, error)

  def evaluate(self, model, print_fn):
    metrics = evaluate(model, self.params, nsp=self.params.nsp)
    shown = dict(metrics)
    if "masked_lm_accuracy" in metrics:  # in the log; eval_results.txt keeps the original's keys
      shown["commonest_token_accuracy"] = self.baseline()[1]
    print_fn("eval: " + " ".join("%s=%.4f" % (k, v) for k, v in sorted(shown.items())))
    return metrics
