"""Lockstep training: our task path against Hugging Face ``transformers`` (torch)
and against the original google-research/bert ``optimization.py``.

Both sides start from the same float32 weights (all-MiniLM-L6-v2, loaded
by our loader and by ``from_pretrained``, plus our randomly initialized head
copied into the ``BertFor...`` head), see the same batches in the same order
with dropout off, and step with the same optimizer semantics:

* ours: the task's own ``compute_loss`` (and ``loss_normalizers``), one
  :class:`bert_tf.training.Trainer` step per batch on the ``one_device``
  strategy (CPU), the optimizer of :func:`bert_tf.optimization.create_optimizer`
  (``adamw``: AdamW with bias correction, epsilon 1e-6 added to the
  bias-corrected root, decoupled decay 0.01 except ``gamma``/``beta``/``bias``;
  the Trainer clips to global norm 1.0) and its
  :class:`~bert_tf.optimization.WarmupLinearDecay` schedule;
* Hugging Face: the model's own loss, ``loss.backward()``,
  ``torch.nn.utils.clip_grad_norm_(1.0)``, ``torch.optim.AdamW`` (betas
  0.9/0.999, eps 1e-6, weight decay 0.01 on every parameter but
  ``LayerNorm.*`` and ``*.bias``) and
  ``transformers.get_linear_schedule_with_warmup``; denormals flushed to
  zero as TensorFlow's CPU kernels do;
* the original (``python lockstep_util.py original WORKDIR``, a subprocess):
  bert-tensorflow 1.0.4's ``run_classifier.create_model`` on its
  ``modeling.BertModel`` (``is_training=False``: no dropout) and its
  ``optimization.create_optimizer`` (AdamWeightDecayOptimizer, polynomial
  decay + warm-up, ``clip_by_global_norm(1.0)``) in a TF1 graph.

Differences are measured per tensor as ``max|ours - ref| / max(max|ref|, floor)``
(:func:`rel_diff`) with ``floor`` = the sum of the run's learning rates (how
far Adam moves a weight whose gradient keeps its sign), of the weights (the
acceptance criterion) and of the weight CHANGES over the run (``final -
initial``, see :func:`compare`). The floor matters only for a tensor that
starts at 0 (a head's bias, MiniLM's untrained pooler bias, the biases of a
random init) and ends smaller than one such sum, where ``max|ref|`` is set
by cancelling steps; the tables also give those tensors' unfloored values.
The changes show an optimizer difference that the weights hide: in 20
warm-up steps a weight moves by ~1e-4 of its size, so a wrong weight decay
(``lr * 0.01 * w`` per step) changes the weights by ~1e-6.
"""

import dataclasses
import json
import os
import re
import sys
from typing import Optional

import numpy as np

# The schedule of a long run: 1,157 steps, warm-up 10% = int(1157 * 0.1) = 115
# steps, as our tasks compute it (``int(num_train_steps * warmup_proportion)``;
# Hugging Face's Trainer would take ceil = 116: one number goes to both sides).
TOTAL_STEPS = 1157
WARMUP_STEPS = int(TOTAL_STEPS * 0.1)
LEARNING_RATE = 5e-5  # the tools' default peak rate
NUM_STEPS = 20
WEIGHT_DECAY = 0.01
EPSILON = 1e-6
CLIP_NORM = 1.0
FLOOR = 1e-12

LOSS_RTOL = 1e-4    # per-step loss
WEIGHT_RTOL = 1e-4  # every weight after the run

# Weights whose gradient is identically 0 (regular expressions, per task
# kind): a bias that adds one constant to every input of a softmax, which
# ignores it (d loss / d bias = sum(p - y) = 0): the SQuAD span head's bias
# (every position's start/end logit), the SWAG head's (every choice's score)
# and the attention key biases (every key's score of one query). They move
# by rounding noise alone (Adam scales noise up to ~lr * noise / eps), so
# instead of comparing noise both sides are checked to stay put: the largest
# move of either side must stay under ZERO_GRADIENT_RTOL of the sum of the
# learning rates (a weight with a real gradient moves by about that sum).
# The key biases need this only where they start at 0 (a random init): the
# pretrained ones of MiniLM are compared as weights (their noise moves are
# far below 1e-4 of their values).
ZERO_GRADIENT = {"squad": (r"^qa_outputs\.bias$",), "swag": (r"^classifier\.bias$",),
                 "pretraining": (r"attention[./]self[./]key[./]bias$",)}
ZERO_GRADIENT_RTOL = 5e-2


def rel_diff(ours, ref, floor=FLOOR):
  """``max|ours - ref| / max(max|ref|, floor)`` of two arrays (in float64)."""
  ours = np.asarray(ours, np.float64)
  ref = np.asarray(ref, np.float64)
  if ours.size == 0:
    return 0.0
  return float(np.abs(ours - ref).max() / max(float(np.abs(ref).max()), floor))


# --------------------------------------------------------------- names

HEADS = {  # task kind -> (our head layer attribute, HF head module)
    "classification": ("classifier", "classifier"),
    "ner": ("classifier", "classifier"),
    "swag": ("classifier", "classifier"),
    "squad": ("span_head", "qa_outputs"),
    "pretraining": (None, "cls"),
}


def named_pairs(model, kind, naming="hf"):
  """``[(name, our keras variable, transpose)]`` of every weight of ``model``.

  ``naming="hf"``: the Hugging Face ``BertFor...`` parameter names (encoder
  names from :func:`bert_tf.checkpoints.tf1_to_hf_name`, kernels
  transposed; the head's ``output_weights`` [N, H] is already
  ``nn.Linear``'s layout). ``naming="tf1"``: the original's names
  (``bert/...``; run_classifier's head ``output_weights``/``output_bias``).
  """
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  if kind == "pretraining":  # BertForPreTraining: cls.predictions, cls.seq_relationship
    out = []
    for name, var in checkpoints.pretrainer_variables(model):
      if naming == "tf1":
        out.append((name, var, False))
      elif name.startswith("cls/"):
        hf, transpose = checkpoints.HF_HEAD_NAMES[name]
        out.append((hf, var, transpose))
      else:
        hf, transpose = checkpoints.tf1_to_hf_name(name)
        out.append(("bert." + hf, var, transpose))
    return out
  ours_attr, hf_head = HEADS[kind]
  head = getattr(model, ours_attr)
  out = []
  for name, var in checkpoints.encoder_variables(model.encoder):
    if naming == "tf1":
      out.append((name, var, False))
    else:
      hf, transpose = checkpoints.tf1_to_hf_name(name)
      out.append(("bert." + hf, var, transpose))
  if naming == "tf1":
    out += [("output_weights", head.output_weights, False),
            ("output_bias", head.output_bias, False)]
  else:
    out += [(hf_head + ".weight", head.output_weights, False),
            (hf_head + ".bias", head.output_bias, False)]
  return out


def hf_no_decay(name):
  """Hugging Face's usual exclusion: ``LayerNorm`` weights and every bias."""
  return "LayerNorm" in name or name.endswith(".bias")


# --------------------------------------------------------------- results

@dataclasses.dataclass
class Run:
  """One side's trajectory.

  Attributes:
    losses: per step, ``{name: loss}`` of its batch before its update
      (``loss`` for fine-tuning; ``masked_lm`` and ``next_sentence`` for
      pretraining).
    initial: ``{name: np.ndarray}`` before the first step.
    snapshots: ``{step: {name: np.ndarray}}`` after that many steps.
    grad_norms: global gradient norm of each step, before clipping (HF).
    lrs: the learning rate of each step (HF).
  """
  losses: list
  initial: dict
  snapshots: dict
  grad_norms: list = dataclasses.field(default_factory=list)
  lrs: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Comparison:
  """Per-step loss and per-tensor weight / update differences.

  ``unused`` holds our weights that the reference model lacks (the pooler
  of a question answerer or token classifier: Hugging Face's
  ``BertForQuestionAnswering``/``BertForTokenClassification`` have none)
  and how far they moved (must be 0: no gradient, no decay).
  ``zero_gradient``: the :data:`ZERO_GRADIENT` weights, the largest move of
  either side / the sum of the learning rates. ``unfloored``: the weight
  differences ``max|ours - ref| / max|ref|`` of the tensors whose
  ``max|ref|`` is below the floor (the sum of the learning rates).
  """
  loss_diffs: list  # per step, ``{name: rel diff}``
  weight_diffs: dict
  update_diffs: dict
  unused: dict
  steps: int
  zero_gradient: dict = dataclasses.field(default_factory=dict)
  unfloored: dict = dataclasses.field(default_factory=dict)

  @staticmethod
  def worst(diffs, n=None):
    items = sorted(diffs.items(), key=lambda kv: -kv[1])
    return items if n is None else items[:n]

  def violations(self, loss_rtol=LOSS_RTOL, weight_rtol=WEIGHT_RTOL,
                 update_rtol=None):
    """What breaks lockstep (an empty list: none). ``update_rtol`` None
    leaves the weight changes unchecked."""
    out = ["step %d: %s loss rel diff %.3g > %g" % (i, n, d, loss_rtol)
           for i, step in enumerate(self.loss_diffs) for n, d in step.items()
           if not d <= loss_rtol]
    out += ["weight %s: rel diff %.3g > %g" % (n, d, weight_rtol)
            for n, d in self.worst(self.weight_diffs) if not d <= weight_rtol]
    if update_rtol is not None:
      out += ["update of %s: rel diff %.3g > %g" % (n, d, update_rtol)
              for n, d in self.worst(self.update_diffs) if not d <= update_rtol]
    out += ["unused %s moved by %.3g" % (n, d) for n, d in self.unused.items() if d]
    out += ["zero-gradient %s moved by %.3g of the lr sum > %g" % (n, d, ZERO_GRADIENT_RTOL)
            for n, d in self.zero_gradient.items() if not d <= ZERO_GRADIENT_RTOL]
    return out

  def table(self, title, n=5):
    """The largest differences, as printed lines."""
    lines = ["", "== %s: %d steps, %d tensors ==" % (
        title, self.steps, len(self.weight_diffs) + len(self.zero_gradient))]
    for name in self.loss_diffs[0]:
      d = [step[name] for step in self.loss_diffs]
      lines.append("per-step %s loss rel diff: max %.2e (step %d); all: %s" % (
          name, max(d), int(np.argmax(d)), " ".join("%.0e" % x for x in d)))
    lines.append("largest weight rel diffs, max|ours-ref| / max(max|ref|, sum of lrs) "
                 "per tensor:")
    lines += ["  %.3e  %s" % (d, k) for k, d in self.worst(self.weight_diffs, n)]
    lines.append("largest update rel diffs, of (final - initial), "
                 "/ max(max|ref update|, sum of lrs):")
    lines += ["  %.3e  %s" % (d, k) for k, d in self.worst(self.update_diffs, n)]
    if self.unfloored:
      lines.append("tensors under the floor, max|ours-ref| / max|ref|: %s" % ", ".join(
          "%s %.2e" % kv for kv in self.worst(self.unfloored)))
    if self.zero_gradient:
      lines.append("zero-gradient weights, largest move of either side / sum of lrs: %s"
                   % ", ".join("%s %.2e" % kv for kv in self.zero_gradient.items()))
    if self.unused:
      lines.append("ours only (no gradient), max |final - initial|: %s" % ", ".join(
          "%s %.1g" % kv for kv in self.unused.items()))
    return "\n".join(lines)


def compare(ours: Run, ref: Run, step: int, lr_sum: Optional[float] = None,
            zero_gradient=()) -> Comparison:
  """Compares the first ``step`` losses and the weights after ``step`` steps.

  The weight and update differences are divided by at least ``lr_sum``
  (default: the sum of ``ref.lrs``), how far Adam moves a weight whose
  gradient keeps its sign: a tensor that starts at 0 and ends smaller, or
  moves by rounding noise alone (the pretrained attention key biases:
  softmax ignores them), is not judged by its own tiny size. ``zero_gradient``: patterns of the
  weights whose gradient is identically 0 (see :data:`ZERO_GRADIENT`),
  checked to stay put on both sides instead of compared.
  """
  a, b = ours.snapshots[step], ref.snapshots[step]
  missing = sorted(set(b) - set(a))
  assert not missing, "reference weights we lack: %s" % missing
  if lr_sum is None:
    lr_sum = float(sum(ref.lrs[:step]))
  loss_diffs = [{n: abs(x[n] - y[n]) / max(abs(y[n]), FLOOR) for n in y}
                for x, y in zip(ours.losses[:step], ref.losses[:step])]
  assert len(loss_diffs) == step, (len(ours.losses), len(ref.losses), step)
  still = {n: max(float(np.abs(a[n] - ours.initial[n]).max()),
                  float(np.abs(b[n] - ref.initial[n]).max())) / max(lr_sum, FLOOR)
           for n in b if any(re.search(z, n) for z in zero_gradient)}
  floor = max(lr_sum, FLOOR)
  weights = {n: rel_diff(a[n], b[n], floor=floor) for n in b if n not in still}
  unfloored = {n: rel_diff(a[n], b[n]) for n in weights
               if 0 < np.abs(b[n]).max() < floor}
  updates = {n: rel_diff(a[n] - ours.initial[n], b[n] - ref.initial[n],
                         floor=floor) for n in b if n not in still}
  unused = {n: float(np.abs(a[n] - ours.initial[n]).max()) for n in sorted(set(a) - set(b))}
  return Comparison(loss_diffs, weights, updates, unused, step, still, unfloored)


# --------------------------------------------------------------- our side

@dataclasses.dataclass
class OurSetup:
  """Our side's knobs; the defaults are the parity settings, the negative
  controls change one."""
  optimizer: str = "adamw"
  clip_norm: Optional[float] = CLIP_NORM
  total_steps: int = TOTAL_STEPS
  warmup_steps: int = WARMUP_STEPS
  learning_rate: float = LEARNING_RATE
  weight_decay: float = WEIGHT_DECAY
  decay_everything: bool = False  # weight decay on LayerNorm and biases too
  hidden_act: Optional[str] = None  # override the config's activation


def no_dropout(config, hidden_act=None):
  """``config`` with both dropout rates 0 (and ``hidden_act`` if given)."""
  changes = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
  if hidden_act:
    changes["hidden_act"] = hidden_act
  return dataclasses.replace(config, **changes)


def _decay_everything(optimizer):
  """Negative control: weight decay on every variable (no exclusions)."""
  if hasattr(optimizer, "_exclude_re"):  # our AdamWeightDecay
    optimizer._exclude_re = None  # pylint: disable=protected-access
    optimizer.exclude_from_weight_decay = ()
  else:  # Keras AdamW
    optimizer.exclude_from_weight_decay(var_names=[])


def snapshot(pairs):
  return {n: np.array(np.transpose(v.numpy()) if t else v.numpy()) for n, v, t in pairs}


def train_ours(task, kind, batches, setup=OurSetup(), snapshot_steps=(NUM_STEPS,),
               seed=0, naming="hf", step_losses=None):
  """Trains our task path on ``batches``, in order; returns ``(Run, model)``.

  As :class:`bert_tf.runner.Runner` does: the model and the optimizer of
  :func:`bert_tf.optimization.create_optimizer` are made in the
  ``one_device`` strategy's scope, ``task.initialize`` loads the encoder
  (our Hugging Face loader for a HF directory), and
  :class:`bert_tf.training.Trainer` runs the task's ``compute_loss`` (with
  ``loss_normalizers`` when the task has them), here one step per call
  (``steps_per_loop=1``); each step's loss is ``task.train_metrics`` of its
  metric sums (``step_losses(sums) -> {name: loss}`` instead when given).
  The head keeps its seeded random initialization.
  """
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import distribute  # pylint: disable=g-import-not-at-top
  from bert_tf import optimization  # pylint: disable=g-import-not-at-top
  from bert_tf import training  # pylint: disable=g-import-not-at-top
  strategy = distribute.get_strategy("one_device")
  task.config = no_dropout(task.config, setup.hidden_act)
  with strategy.scope():
    keras.utils.set_random_seed(seed)
    model = task.build_model()
    optimizer = optimization.create_optimizer(
        setup.learning_rate, setup.total_steps, setup.warmup_steps, setup.optimizer,
        weight_decay_rate=setup.weight_decay)
    optimizer.global_clipnorm = setup.clip_norm  # the Trainer clips with it
    if setup.decay_everything:
      _decay_everything(optimizer)
    optimizer.build(model.trainable_variables)
  task.initialize(model)
  pairs = named_pairs(model, kind, naming)
  mapped = {id(v) for _, v, _ in pairs}
  unnamed = [v.path for v in model.trainable_variables if id(v) not in mapped]
  assert not unnamed, "weights without a name on the other side: %s" % unnamed
  if task.normalized_loss:
    compute = lambda f, t: task.compute_loss(model, f, t)  # noqa: E731
    normalizer = task.loss_normalizers
  else:
    compute = lambda f: task.compute_loss(model, f)  # noqa: E731
    normalizer = None
  trainer = training.Trainer(strategy, model, optimizer, compute,
                             normalizer_fn=normalizer)
  spec = tf.nest.map_structure(
      lambda x: tf.TensorSpec([None] * x.ndim, tf.as_dtype(x.dtype)), batches[0])
  iterator = iter(tf.data.Dataset.from_generator(lambda: iter(batches),
                                                 output_signature=spec))
  run = Run([], snapshot(pairs), {})

  def log(step, sums, seconds):
    del step, seconds
    if step_losses is None:
      run.losses.append({"loss": float(task.train_metrics(sums)["loss"])})
    else:
      run.losses.append({k: float(v) for k, v in step_losses(sums).items()})
  for step in sorted(snapshot_steps):
    trainer.train(iterator, step, steps_per_loop=1, log_fn=log)
    run.snapshots[step] = snapshot(pairs)
  assert len(run.losses) == max(snapshot_steps)
  return run, model


def task_batches(task, batch_size, n=NUM_STEPS, seed=0):
  """The first ``n`` batches of ``task.train_dataset``, as numpy.

  TensorFlow's global seed is set first: the task's shuffle has its own
  seed, but an op's random stream also depends on the global seed, which
  an earlier test may have set (``keras.utils.set_random_seed``): without
  this the batches would depend on the order the tests run in.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.random.set_seed(seed)
  dataset = task.train_dataset(batch_size, None)
  out = [tf.nest.map_structure(lambda x: x.numpy(), b) for b in dataset.take(n)]
  assert len(out) == n, "only %d batches" % len(out)
  return out


# --------------------------------------------------------------- HF side

HF_CLASSES = {"classification": "BertForSequenceClassification",
              "squad": "BertForQuestionAnswering",
              "ner": "BertForTokenClassification",
              "swag": "BertForMultipleChoice"}


def torch_setup():
  """torch on this process's cores, denormals flushed (as TensorFlow's CPU
  kernels run; also 2-4x faster Adam steps here). Returns the thread count."""
  import torch  # pylint: disable=g-import-not-at-top
  try:
    n = len(os.sched_getaffinity(0))
  except AttributeError:
    n = os.cpu_count() or 1
  torch.set_num_threads(max(1, n))
  torch.set_flush_denormal(True)
  return n


def hf_inputs(kind, batch):
  """One of our ``(features, labels)`` batches -> the HF model's arguments.

  ``input_mask`` -> ``attention_mask``, ``segment_ids`` -> ``token_type_ids``;
  SQuAD's positions -> ``start_positions``/``end_positions``; our tagging
  label -1 (no label: [CLS], [SEP], padding, non-first word pieces) -> HF's
  ignore index -100.
  """
  import torch  # pylint: disable=g-import-not-at-top
  x, y = batch
  t = lambda a: torch.as_tensor(np.asarray(a, np.int64))  # noqa: E731
  out = {"input_ids": t(x["input_ids"]), "attention_mask": t(x["input_mask"]),
         "token_type_ids": t(x["segment_ids"])}
  if kind == "squad":
    out["start_positions"] = t(y["start_positions"])
    out["end_positions"] = t(y["end_positions"])
  elif kind == "ner":
    labels = np.asarray(y, np.int64)
    out["labels"] = t(np.where(labels < 0, -100, labels))
  else:
    out["labels"] = t(y)
  return out


def build_hf(kind, minilm_dir, num_labels=None):
  """HF's ``BertFor...`` from ``from_pretrained(minilm_dir)``: float32,
  dropout 0, the exact (erf) GELU of MiniLM's ``"hidden_act": "gelu"``.

  One HF convention is switched off: ``BertEmbeddings.word_embeddings`` is
  ``nn.Embedding(padding_idx=0)``, which zeroes the gradient of the [PAD]
  row. The original BERT (and ours) has no such rule, and [PAD] does get a
  gradient where padding positions reach the loss: SQuAD's span softmax
  runs over every position, padding included (the original ``run_squad.py``
  and HF's ``BertForQuestionAnswering`` alike). With ``padding_idx`` the
  [PAD] row's update differs (SQuAD: 0.9 of an Adam step after 20 steps).
  """
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  transformers.logging.set_verbosity_error()
  kw = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
  if num_labels is not None:
    kw["num_labels"] = num_labels
  config = transformers.BertConfig.from_pretrained(minilm_dir, **kw)
  assert config.hidden_act == "gelu", config.hidden_act  # HF: exact erf GELU
  cls = getattr(transformers, HF_CLASSES[kind])
  model = cls.from_pretrained(minilm_dir, config=config, dtype=torch.float32)
  model.bert.embeddings.word_embeddings.padding_idx = None
  model.train()  # dropout probabilities are 0: nothing else differs
  return model


def check_and_copy_head(model, kind, weights, copy_all=False):
  """Checks that every HF weight ``from_pretrained`` loaded equals ours
  (both loaders read the same safetensors: bit-equal) and copies our head
  (``copy_all``: copies every weight, checking nothing).

  Returns:
    the names copied.
  """
  import torch  # pylint: disable=g-import-not-at-top
  head = HEADS[kind][1]
  params = dict(model.named_parameters())
  missing = sorted(set(params) - set(weights))
  assert not missing, "HF parameters we have no value for: %s" % missing
  copied = []
  with torch.no_grad():
    for name, p in params.items():
      value = weights[name]
      assert tuple(value.shape) == tuple(p.shape), (name, value.shape, p.shape)
      if copy_all or name.startswith(head + "."):
        p.copy_(torch.as_tensor(value))
        copied.append(name)
      else:
        np.testing.assert_array_equal(p.detach().numpy(), value, err_msg=name)
  return copied


def hf_snapshot(named):
  return {n: p.detach().numpy().copy() for n, p in named}


def train_hf(model, kind, batches, snapshot_steps=(NUM_STEPS,),
             learning_rate=LEARNING_RATE, total_steps=TOTAL_STEPS,
             warmup_steps=WARMUP_STEPS, loss_fn=None, weight_decay=WEIGHT_DECAY):
  """Hugging Face's usual fine-tuning loop on ``batches``; returns a :class:`Run`.

  The loss is the model's own (``outputs.loss``), or ``loss_fn(model,
  batch) -> (loss, {name: loss tensor})``.
  """
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  named = list(model.named_parameters())
  groups = [{"params": [p for n, p in named if not hf_no_decay(n)],
             "weight_decay": weight_decay},
            {"params": [p for n, p in named if hf_no_decay(n)], "weight_decay": 0.0}]
  opt = torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.999), eps=EPSILON)
  sched = transformers.get_linear_schedule_with_warmup(opt, warmup_steps, total_steps)
  run = Run([], hf_snapshot(named), {})
  for step, batch in enumerate(batches[:max(snapshot_steps)]):
    if loss_fn is None:
      loss = model(**hf_inputs(kind, batch)).loss
      run.losses.append({"loss": float(loss.detach())})
    else:
      loss, parts = loss_fn(model, batch)
      run.losses.append({k: float(v.detach()) for k, v in parts.items()})
    run.lrs.append(float(opt.param_groups[0]["lr"]))
    loss.backward()
    run.grad_norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                               CLIP_NORM)))
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    if step + 1 in snapshot_steps:
      run.snapshots[step + 1] = hf_snapshot(named)
  return run


def schedule_values(total=TOTAL_STEPS, warmup=WARMUP_STEPS, lr=LEARNING_RATE):
  """``(ours, hf)``: the learning rate of steps 0..total-1 (numpy float64)."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from bert_tf import optimization  # pylint: disable=g-import-not-at-top
  schedule = optimization.WarmupLinearDecay(lr, total, warmup)
  ours = np.array([float(schedule(s)) for s in range(total)])
  opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
  sched = transformers.get_linear_schedule_with_warmup(opt, warmup, total)
  hf = []
  for _ in range(total):
    hf.append(opt.param_groups[0]["lr"])
    opt.step()
    sched.step()
  return ours, np.array(hf)


# --------------------------------------------------------------- the original

def save_original_case(workdir, mode, batches, initial, config_dict, learning_rate,
                       total_steps, warmup_steps, num_labels=None):
  """Writes what :func:`original_main` reads: the batches, the initial
  weights by their original TF1 names, ``bert_config.json`` and the
  hyper-parameters. ``mode``: ``classifier`` (batches ``(features,
  label_ids)``) or ``pretraining`` (batches of record features)."""
  os.makedirs(workdir, exist_ok=True)
  arrays = {}
  for i, batch in enumerate(batches):
    if isinstance(batch, tuple):
      batch = dict(batch[0], label_ids=batch[1])
    for k, v in batch.items():
      arrays["%s/%d" % (k, i)] = v
  np.savez(os.path.join(workdir, "batches.npz"), **arrays)
  np.savez(os.path.join(workdir, "initial.npz"), **initial)
  with open(os.path.join(workdir, "bert_config.json"), "w") as f:
    json.dump(config_dict, f)
  with open(os.path.join(workdir, "hparams.json"), "w") as f:
    json.dump({"mode": mode, "num_batches": len(batches), "num_labels": num_labels,
               "learning_rate": learning_rate, "total_steps": total_steps,
               "warmup_steps": warmup_steps}, f)


def original_main(workdir):
  """Trains the ORIGINAL graph on the case in ``workdir``.

  bert-tensorflow 1.0.4, patched at run time by ``original_graph`` (a copy
  with the removed ``tf.contrib`` layer_norm replaced: same variables,
  epsilon 1e-12), and its ``optimization.create_optimizer`` as its model_fn
  builders call it (``use_tpu=False``: AdamWeightDecayOptimizer, linear
  warm-up and decay, ``clip_by_global_norm(1.0)``) in a TF1 graph. Mode
  ``classifier``: ``run_classifier.create_model(is_training=False)`` (no
  dropout: the model's probabilities are 0 and the head's hard-coded 0.1
  dropout is skipped), the mean per-example cross-entropy. Mode
  ``pretraining``: ``modeling.BertModel(is_training=True)`` with dropout
  0 in the config, ``run_pretraining.get_masked_lm_output`` +
  ``get_next_sentence_output``, total loss their sum. The initial weights
  are assigned by name. Writes ``original.npz``: each step's losses
  (``losses``, ``loss_names``) and every trainable variable at the end.
  """
  import original_graph  # pylint: disable=g-import-not-at-top  (sets TF_USE_LEGACY_KERAS)
  original_graph.patched_package(workdir)
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.disable_eager_execution()
  tf.disable_v2_tensorshape()  # run_classifier reads ``shape[-1].value``
  from absl import flags  # pylint: disable=g-import-not-at-top
  from bert import modeling  # pylint: disable=g-import-not-at-top
  from bert import optimization  # pylint: disable=g-import-not-at-top
  hp = json.load(open(os.path.join(workdir, "hparams.json")))
  # One of the two: both define the same absl flags.
  if hp["mode"] == "classifier":
    from bert import run_classifier  # pylint: disable=g-import-not-at-top
  else:
    from bert import run_pretraining  # pylint: disable=g-import-not-at-top
  flags.FLAGS.mark_as_parsed()
  data = np.load(os.path.join(workdir, "batches.npz"))
  initial = dict(np.load(os.path.join(workdir, "initial.npz")))
  config = modeling.BertConfig.from_json_file(os.path.join(workdir, "bert_config.json"))
  keys = sorted({k.split("/")[0] for k in data.files})
  ph = {k: tf.placeholder(tf.float32 if k == "masked_lm_weights" else tf.int32,
                          [None] * data[k + "/0"].ndim, name=k) for k in keys}
  if hp["mode"] == "classifier":
    loss, _, _, _ = run_classifier.create_model(
        config, False, ph["input_ids"], ph["input_mask"], ph["segment_ids"],
        ph["label_ids"], hp["num_labels"], False)
    parts = {"loss": loss}
  else:
    model = modeling.BertModel(config=config, is_training=True,
                               input_ids=ph["input_ids"], input_mask=ph["input_mask"],
                               token_type_ids=ph["segment_ids"],
                               use_one_hot_embeddings=False)
    mlm, _, _ = run_pretraining.get_masked_lm_output(
        config, model.get_sequence_output(), model.get_embedding_table(),
        ph["masked_lm_positions"], ph["masked_lm_ids"], ph["masked_lm_weights"])
    nsp, _, _ = run_pretraining.get_next_sentence_output(
        config, model.get_pooled_output(), ph["next_sentence_labels"])
    loss = mlm + nsp
    parts = {"masked_lm": mlm, "next_sentence": nsp}
  train_op = optimization.create_optimizer(
      loss, hp["learning_rate"], hp["total_steps"], hp["warmup_steps"], False)
  tvars = {v.name[:-2]: v for v in tf.trainable_variables()}
  assert sorted(tvars) == sorted(initial), sorted(set(tvars) ^ set(initial))
  names = sorted(parts)
  losses = []
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for name, var in tvars.items():
      var.load(initial[name], sess)
    for i in range(hp["num_batches"]):
      feed = {ph[k]: data["%s/%d" % (k, i)] for k in keys}
      values, _ = sess.run([[parts[n] for n in names], train_op], feed)
      losses.append([float(v) for v in values])
    final = sess.run(tvars)
  np.savez(os.path.join(workdir, "original.npz"), losses=np.array(losses),
           loss_names=np.array(names), **final)


def run_original(workdir):
  """Runs :func:`original_main` in a new process (TF1 graph mode)."""
  from conftest import run_tool  # pylint: disable=g-import-not-at-top
  run_tool([os.path.abspath(__file__), "original", workdir])


def read_original_run(workdir, initial, num_steps):
  """The :class:`Run` that :func:`original_main` wrote."""
  out = dict(np.load(os.path.join(workdir, "original.npz")))
  names = [str(n) for n in out.pop("loss_names")]
  losses = [dict(zip(names, map(float, row))) for row in out.pop("losses")]
  return Run(losses, initial, {num_steps: out})


def sum_of_lrs(learning_rate, total_steps, warmup_steps, steps):
  """Sum of our schedule's rates over the first ``steps`` steps."""
  from bert_tf import optimization  # pylint: disable=g-import-not-at-top
  schedule = optimization.WarmupLinearDecay(learning_rate, total_steps, warmup_steps)
  return float(sum(float(schedule(s)) for s in range(steps)))


if __name__ == "__main__":
  if sys.argv[1:2] == ["original"]:
    original_main(sys.argv[2])
  else:
    raise SystemExit("usage: python lockstep_util.py original WORKDIR")
