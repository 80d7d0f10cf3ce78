"""The original BERT optimizer and learning-rate schedule, as Keras 3 objects.

Source: google-research/bert ``optimization.py``:

* learning rate: linear warm-up from 0 to ``init_lr`` over ``num_warmup_steps``,
  then linear (power 1) decay to 0 at ``num_train_steps``;
* ``AdamWeightDecayOptimizer``: Adam with beta_1 0.9, beta_2 0.999, epsilon
  1e-6 and NO bias correction; decoupled weight decay 0.01 added to the
  update of every variable whose name does not match
  ``LayerNorm|layer_norm|bias``;
* gradients clipped to global norm 1.0.
"""

import math
import re

import keras
import tensorflow as tf

from bert_tf import errors

DEFAULT_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Original schedule: ``init_lr * step / warmup`` while ``step < warmup``,
  else ``init_lr * (1 - min(step, total) / total)``.

  Args:
    init_lr: peak learning rate (float).
    num_train_steps: step at which the rate reaches 0 (int > 0).
    num_warmup_steps: warm-up length in steps (int >= 0).

  Call args:
    step: int or float scalar, the optimizer's iteration count before the
      update (the original's ``global_step``).

  Returns:
    float32 scalar learning rate.
  """

  def __init__(self, init_lr, num_train_steps, num_warmup_steps=0):
    if num_train_steps <= 0:
      raise ValueError("num_train_steps must be > 0, got %r" % num_train_steps)
    self.init_lr = float(init_lr)
    self.num_train_steps = int(num_train_steps)
    self.num_warmup_steps = int(num_warmup_steps)

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    total = float(self.num_train_steps)
    decayed = self.init_lr * (1.0 - tf.minimum(step, total) / total)
    if self.num_warmup_steps <= 0:
      return decayed
    warm = self.init_lr * step / float(self.num_warmup_steps)
    return tf.where(step < float(self.num_warmup_steps), warm, decayed)

  def get_config(self):
    return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps}


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(keras.optimizers.Optimizer):
  """The original ``AdamWeightDecayOptimizer`` (no bias correction).

  Per variable ``p`` with gradient ``g``::

      m = b1 * m + (1 - b1) * g
      v = b2 * v + (1 - b2) * g^2
      update = m / (sqrt(v) + eps) + (wd * p if decayed(p) else 0)
      p -= lr * update

  Args:
    learning_rate: float or schedule (e.g. :class:`WarmupLinearDecay`).
    weight_decay_rate: decoupled decay (0.01 in the original).
    beta_1, beta_2, epsilon: Adam constants (0.9, 0.999, 1e-6).
    exclude_from_weight_decay: regex fragments matched against the
      variable's path (``variable.path``).
    global_clipnorm: clip gradients to this global norm (1.0), or None.
  """

  def __init__(self, learning_rate=1e-4, weight_decay_rate=0.01, beta_1=0.9,
               beta_2=0.999, epsilon=1e-6,
               exclude_from_weight_decay=DEFAULT_EXCLUDE, global_clipnorm=1.0,
               name="adam_weight_decay", **kwargs):
    super().__init__(learning_rate=learning_rate, global_clipnorm=global_clipnorm,
                     name=name, **kwargs)
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
    self._exclude_re = (re.compile("|".join(self.exclude_from_weight_decay))
                        if self.exclude_from_weight_decay else None)

  def decays(self, variable):
    """Whether ``variable`` receives weight decay (by its path)."""
    if not self.weight_decay_rate:
      return False
    name = getattr(variable, "path", None) or variable.name
    return self._exclude_re is None or self._exclude_re.search(name) is None

  def build(self, var_list):
    """Creates the slots (``adam_m``, ``adam_v``: one per variable, its
    shape and dtype). Under ``tf.init_scope``, as Keras 2's optimizers
    did: when Keras ``fit`` builds the optimizer inside its first traced
    step, each of the ~100 slots of a tiny BERT otherwise got its own
    initializer graph, 1.4 s of a 5.8 s first ``fit`` step (cProfile, Zen 5,
    2026-11-29). The slots are still lifted out of that trace then, which
    traces the step twice; the task models build the optimizer before it
    (``models.TextInputsMixin.make_train_function``)."""
    if self.built:
      return
    with tf.init_scope():
      super().build(var_list)
      self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
    # Decided here, on the Keras variables' full paths: update_step may be
    # handed the underlying tf.Variable, whose name lacks the layer path.
    self._decay_flags = [self.decays(v) for v in var_list]

  def update_step(self, gradient, variable, learning_rate):
    index = self._get_variable_index(variable)
    decay = self.weight_decay_rate if self._decay_flags[index] else 0.0
    var, m, v = _on_device(variable, self._m[index], self._v[index])
    _fused_update(var.handle, m.handle, v.handle, tf.convert_to_tensor(gradient),
                  tf.cast(learning_rate, variable.dtype), decay, self.beta_1,
                  self.beta_2, self.epsilon)

  def get_config(self):
    config = super().get_config()
    config.update({"weight_decay_rate": self.weight_decay_rate,
                   "beta_1": self.beta_1, "beta_2": self.beta_2,
                   "epsilon": self.epsilon,
                   "exclude_from_weight_decay": list(self.exclude_from_weight_decay)})
    return config


def _tf_variable(variable):
  """The tf.Variable behind a Keras 3 variable (itself if already one)."""
  return variable if isinstance(variable, tf.Variable) else variable.value


def _on_device(variable, *slots):
  """``variable``'s tf.Variable and each of ``slots``' component on its device."""
  var = _tf_variable(variable)
  return (var, *(_local_component(_tf_variable(s), var) for s in slots))


def _local_component(slot, var):
  """The component of a distributed (e.g. Mirrored) ``slot`` on ``var``'s device.

  Under a ``tf.distribute`` strategy ``update_step`` runs once per device
  with ``var`` that device's component, while the slots are still the
  distributed variables. A distributed variable passed to the
  ``tf.function`` below is captured by its first trace, so every same-shaped
  variable would then share the first one's slots: pass plain per-device
  ``tf.Variable`` objects instead (a plain variable is a function input).
  """
  components = getattr(slot, "values", None)
  if not components:
    return slot
  for c in components:
    if c.device == var.device:
      return c
  raise ValueError("no component of %s on %s" % (slot.name, var.device))


@tf.function(jit_compile=True)
def _fused_update(var, m, v, grad, lr, decay, beta_1, beta_2, epsilon):
  """The original's update, compiled by XLA into one pass over the tensors.

  ``m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
  var -= lr * (m / (sqrt(v) + eps) + decay * var)``. Unfused, the ~15
  element-wise ops each stream the whole tensor through memory; the fused
  kernel reads ``var, m, v, grad`` once (measured on all-MiniLM-L6-v2's
  22.7M weights, 2 CPU cores: 0.42 s -> 0.08 s per step). The gradient is
  dense, as in the original.

  ``var``, ``m``, ``v`` are the variables' resource HANDLES (tf.resource
  scalars), read and written with the raw variable ops. Passing the variables
  themselves made the trace depend on the variable objects: slots that
  ``model.fit`` creates inside its first traced step
  (``UnliftedInitializerVariable``) are captured by the trace and keyed by
  object id, so after they were deleted a new same-shaped variable that
  reused the id hit that trace and failed with "Called a function
  referencing variables which have been deleted". Handles are plain inputs:
  one trace per dtype and ``decay``, XLA compiling per shape.
  """
  dtype = grad.dtype
  old_var = tf.raw_ops.ReadVariableOp(resource=var, dtype=dtype)
  next_m = (beta_1 * tf.raw_ops.ReadVariableOp(resource=m, dtype=dtype)
            + (1.0 - beta_1) * grad)
  next_v = (beta_2 * tf.raw_ops.ReadVariableOp(resource=v, dtype=dtype)
            + (1.0 - beta_2) * tf.square(grad))
  update = next_m / (tf.sqrt(next_v) + epsilon)
  if decay:
    update += decay * old_var
  tf.raw_ops.AssignVariableOp(resource=var, value=old_var - lr * update)
  tf.raw_ops.AssignVariableOp(resource=m, value=next_m)
  tf.raw_ops.AssignVariableOp(resource=v, value=next_v)


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamW(keras.optimizers.AdamW):
  """``keras.optimizers.AdamW`` with PyTorch's epsilon (``torch.optim.AdamW``).

  Keras adds ``epsilon`` to the UNcorrected ``sqrt(v)`` (the paper's
  "epsilon hat": ``alpha_t = lr sqrt(1 - b2^t) / (1 - b1^t)``,
  ``update = alpha_t m / (sqrt(v) + eps)``); PyTorch and Hugging Face add
  it to the bias-corrected one (Kingma & Ba, Algorithm 1)::

      update = lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

  In Keras' form the effective epsilon is ``eps / sqrt(1 - b2^t)``, 32 times
  larger at the first step, which slows weights with small gradients: in
  20 steps of all-MiniLM-L6-v2 sentence classification against
  ``torch.optim.AdamW`` the pooler's bias ended 78% off (relative to its
  largest value) and a step's loss 1.1e-4 off; with this step both stay
  under 1e-4 (``tests/test_lockstep_parity.py``). Everything else (decoupled
  decay ``lr * wd * var`` before the step, exclusions, clipping, slot names)
  is Keras' ``AdamW``'s, slot names included (checkpoints of either load).
  Each variable's decay and step run as one XLA-compiled update
  (:func:`_fused_adamw_update`, as :class:`AdamWeightDecay` does).

  Raises:
    ValueError: ``amsgrad=True`` (not torch's AdamW step).

  Example::

    opt = create_optimizer(5e-5, 1157, 115, optimizer="adamw")  # this class
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    if self.amsgrad:
      raise ValueError("bert_tf.optimization.AdamW takes torch.optim.AdamW's step "
                       "without amsgrad; use keras.optimizers.AdamW(amsgrad=True)")

  def build(self, var_list):
    """Keras' slots, made under ``tf.init_scope`` as
    :meth:`AdamWeightDecay.build` makes its own; which variables decay is
    decided here (Keras' ``_use_weight_decay``: its exclusions are fixed
    once the optimizer is built)."""
    if self.built:
      return
    with tf.init_scope():
      super().build(var_list)
    self._decay_flags = [self.weight_decay is not None
                         and self._use_weight_decay(_tf_variable(v)) for v in var_list]

  def _apply_weight_decay(self, variables):
    # The decay runs in update_step (the same ``var - var * wd * lr`` before
    # the Adam step, with the same learning rate).
    del variables

  def update_step(self, gradient, variable, learning_rate):
    index = self._get_variable_index(variable)
    var, m, v = _on_device(variable, self._momentums[index], self._velocities[index])
    decay = self.weight_decay if self._decay_flags[index] else 0.0
    _fused_adamw_update(var.handle, m.handle, v.handle, tf.convert_to_tensor(gradient),
                        tf.cast(learning_rate, variable.dtype),
                        tf.cast(self.iterations + 1, tf.float32), decay,
                        self.beta_1, self.beta_2, self.epsilon)


@tf.function(jit_compile=True)
def _fused_adamw_update(var, m, v, grad, lr, local_step, decay, beta_1, beta_2, epsilon):
  """:class:`AdamW`'s step for one variable, compiled by XLA into one pass.

  Keras' decoupled decay ``var -= var * wd * lr`` (``decay`` 0: none), then
  ``m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
  var -= m lr / (1 - b1^t) / (sqrt(v) / sqrt(1 - b2^t) + eps)``: the
  arithmetic, in its order, of Keras' ``AdamW`` with torch's epsilon
  placement (the Keras-ops step this replaced: ``git show 7343e89:bert_tf/optimization.py``).
  Handles, not variables, as in :func:`_fused_update`. One call per
  variable instead of ~25 Keras ops: tracing a MiniLM training step's
  optimizer part 2.2 -> 0.8 s, a step 0.22 -> 0.18 s, 20 lockstep steps
  12.1 -> 9.8 s with the trace (cProfile and timers, Zen 5, 2026-11-29).
  """
  dtype = grad.dtype
  t = tf.cast(local_step, dtype)
  bias_1 = 1.0 - tf.pow(tf.cast(beta_1, dtype), t)
  bias_2 = 1.0 - tf.pow(tf.cast(beta_2, dtype), t)
  old_var = tf.raw_ops.ReadVariableOp(resource=var, dtype=dtype)
  if decay:
    old_var = old_var - old_var * decay * lr
  old_m = tf.raw_ops.ReadVariableOp(resource=m, dtype=dtype)
  old_v = tf.raw_ops.ReadVariableOp(resource=v, dtype=dtype)
  next_m = old_m + (grad - old_m) * (1.0 - beta_1)
  next_v = old_v + (tf.square(grad) - old_v) * (1.0 - beta_2)
  denom = tf.sqrt(next_v) / tf.sqrt(bias_2) + epsilon
  tf.raw_ops.AssignVariableOp(resource=var, value=old_var - next_m * (lr / bias_1) / denom)
  tf.raw_ops.AssignVariableOp(resource=m, value=next_m)
  tf.raw_ops.AssignVariableOp(resource=v, value=next_v)


def early_step_ratio(step: int, beta_1: float = 0.9, beta_2: float = 0.999) -> float:
  """How much larger the original AdamWeightDecay's update is than Adam's
  bias-corrected one at ``step`` (1-based), for the same gradients.

  ``(1 - beta_1**t) / sqrt(1 - beta_2**t)``: its m and v lack the corrections
  ``1/(1 - beta**t)`` (google-research/bert ``optimization.py``; Zhang et
  al. 2021, "Revisiting Few-sample BERT Fine-tuning", section 3). 3.2 at
  step 100, 1.6 at 500, 1.3 at 1,000, 1.0 from a few thousand steps on.
  Returns a float >= 1 for the default betas; ``step`` < 1 counts as 1.
  """
  t = max(int(step), 1)
  return (1.0 - beta_1 ** t) / math.sqrt(1.0 - beta_2 ** t)


# Fine-tuning warm-ups below this many steps are where the stability study
# (issue 42: 5 small tasks x 5 seeds, BUILD_NOTES "Known problems") saw the
# original optimizer at risk: with 12 warm-up steps (the SQuAD slice, 125
# steps) its dev F1 spread over 13.31-31.10 (sd 7.07) against adamw's sd
# 1.09; with 33 (multiple choice), 89 (movie reviews, the main job) and
# ~106 (NER) warm-up steps it spread no more than adamw (sd 1.39 / 0.57 /
# 1.03 against 1.62 / 0.82 / 1.69) and its mean was level or higher.
FINE_TUNING_RISK_WARMUP_STEPS = 25


def short_warmup_warning(optimizer: str, num_warmup_steps: int, warmup: str,
                         risk: str, fix: str = "",
                         at_risk_below: int | None = None) -> str | None:
  """The one-line warning of a run with ``adamw_original`` and a short warm-up.

  When ``optimizer`` is ``adamw_original`` and its warm-up ends before the
  missing bias correction fades (:func:`early_step_ratio` at the warm-up's
  end >= 1.5, i.e. fewer than ~600 steps, far below ~1/(1 - beta_2) =
  1,000), the line names the warm-up (``warmup``, e.g.
  ``"--num_warmup_steps=100"``), the ratio, what it risks (``risk``) and
  ``--optimizer=adamw`` (then ``fix``); else None. Pretraining
  (:func:`bert_tf.tasks.pretraining.warmup_warning`) and fine-tuning
  (:meth:`bert_tf.tasks.fine_tuning.FineTuningTask.warmup_warning`) print it.
  ``at_risk_below``: a warm-up of at least that many steps gets no warning
  (fine-tuning passes :data:`FINE_TUNING_RISK_WARMUP_STEPS`, the regime
  where the stability study measured the risk).
  """
  if optimizer != "adamw_original":
    return None
  if at_risk_below is not None and int(num_warmup_steps) >= at_risk_below:
    return None
  ratio = early_step_ratio(max(int(num_warmup_steps), 1))
  if ratio < 1.5:
    return None
  return ("warning: --optimizer=adamw_original (the original's AdamWeightDecay, no "
          "bias correction) with %s, far below ~1000 steps (1/(1-beta_2)): at the peak "
          "learning rate its steps are %.1fx Adam's, %s. Use --optimizer=adamw "
          "(bias-corrected, as Hugging Face)%s" % (warmup, ratio, risk, fix))


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer="adamw_original",
                     weight_decay_rate=0.01):
  """The optimizer a training tool asks for by name.

  Args:
    optimizer: ``adamw_original`` (the original's AdamWeightDecay, default),
      ``adamw`` (:class:`AdamW`: Keras AdamW with bias correction and
      PyTorch's epsilon placement, epsilon 1e-6 here: ``torch.optim.AdamW``'s
      step), or ``lamb`` (``keras.optimizers.Lamb``).

  Raises:
    ValueError: unknown name.
  """
  schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
  if optimizer == "adamw_original":
    return AdamWeightDecay(schedule, weight_decay_rate=weight_decay_rate)
  if optimizer in ("adamw", "lamb"):
    cls = AdamW if optimizer == "adamw" else keras.optimizers.Lamb
    opt = cls(learning_rate=schedule, weight_decay=weight_decay_rate,
              epsilon=1e-6, global_clipnorm=1.0)
    opt.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    return opt
  raise errors.ParamsError("optimizer: unknown optimizer %r (adamw_original, "
                           "adamw, lamb)" % optimizer, argument="optimizer")
