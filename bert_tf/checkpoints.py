"""Reading pretrained weights: Hugging Face BERT, original TF1 checkpoints, ours.

Every weight of our encoder and pretraining heads is named here by its
original TF1 checkpoint name (google-research/bert ``modeling.py`` and
``run_pretraining.py``: ``bert/embeddings/word_embeddings``,
``bert/encoder/layer_3/attention/self/query/kernel``,
``cls/predictions/output_bias``, ...). Hugging Face names derive from those.
Optimizer slots (``adam_m``, ``adam_v``) are never weights.
"""

import glob
import logging
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import huggingface
from bert_tf import run_dir


CheckpointError = errors.CheckpointError  # re-exported; defined in bert_tf.errors


# Hugging Face "hidden_act" -> ours. HF "gelu" is the exact (erf) GELU.
HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu",
                  "gelu_pytorch_tanh": "gelu", "relu": "relu", "tanh": "tanh"}


def encoder_variables(encoder):
  """``[(original TF1 name, keras variable)]`` for a :class:`BertEncoder`."""
  e = encoder.embeddings
  out = [("bert/embeddings/word_embeddings", e.word_embeddings),
         ("bert/embeddings/token_type_embeddings", e.token_type_embeddings),
         ("bert/embeddings/position_embeddings", e.position_embeddings),
         ("bert/embeddings/LayerNorm/gamma", e.layer_norm.gamma),
         ("bert/embeddings/LayerNorm/beta", e.layer_norm.beta)]
  for i, b in enumerate(encoder.blocks):
    p = "bert/encoder/layer_%d/" % i
    for sub, layer in (("attention/self/query", b.query),
                       ("attention/self/key", b.key),
                       ("attention/self/value", b.value),
                       ("attention/output/dense", b.attention_output),
                       ("intermediate/dense", b.intermediate),
                       ("output/dense", b.output_dense)):
      out.append((p + sub + "/kernel", layer.kernel))
      out.append((p + sub + "/bias", layer.bias))
    for sub, ln in (("attention/output/LayerNorm", b.attention_layer_norm),
                    ("output/LayerNorm", b.output_layer_norm)):
      out.append((p + sub + "/gamma", ln.gamma))
      out.append((p + sub + "/beta", ln.beta))
  out.append(("bert/pooler/dense/kernel", encoder.pooler.kernel))
  out.append(("bert/pooler/dense/bias", encoder.pooler.bias))
  return out


def pretrainer_variables(pretrainer):
  """Encoder variables plus the ``cls/predictions`` and ``cls/seq_relationship`` heads."""
  out = encoder_variables(pretrainer.encoder)
  m = pretrainer.masked_lm
  out += [("cls/predictions/transform/dense/kernel", m.transform.kernel),
          ("cls/predictions/transform/dense/bias", m.transform.bias),
          ("cls/predictions/transform/LayerNorm/gamma", m.layer_norm.gamma),
          ("cls/predictions/transform/LayerNorm/beta", m.layer_norm.beta),
          ("cls/predictions/output_bias", m.output_bias)]
  if pretrainer.next_sentence is not None:
    n = pretrainer.next_sentence
    out += [("cls/seq_relationship/output_weights", n.output_weights),
            ("cls/seq_relationship/output_bias", n.output_bias)]
  return out


SQUAD_HEAD = ("cls/squad/output_weights", "cls/squad/output_bias")
# Original run_squad.py head -> Hugging Face BertForQuestionAnswering (same layout).
HF_SQUAD_HEAD_NAMES = {"cls/squad/output_weights": "qa_outputs.weight",
                       "cls/squad/output_bias": "qa_outputs.bias"}


def squad_head_variables(model):
  """``[(original TF1 name, variable)]`` of a question answerer's span head.

  Source: google-research/bert ``run_squad.create_model``
  (``cls/squad/output_weights`` [2, H], ``cls/squad/output_bias`` [2]).
  """
  head = model.span_head
  return [(SQUAD_HEAD[0], head.output_weights), (SQUAD_HEAD[1], head.output_bias)]


def question_answerer_variables(model):
  """Encoder variables plus the ``cls/squad`` head of a
  :class:`~bert_tf.modeling.models.BertQuestionAnswerer`: every weight of
  the original ``run_squad.py`` graph, by its name."""
  return encoder_variables(model.encoder) + squad_head_variables(model)


def tf1_to_hf_name(name):
  """Original TF1 name -> ``(Hugging Face name, transpose_kernel)``."""
  n = name
  transpose = n.endswith("/kernel")
  if n.startswith("bert/"):
    n = n[len("bert/"):]
  n = n.replace("encoder/layer_", "encoder/layer/")
  if n.endswith("_embeddings"):
    n += "/weight"
  n = (n.replace("/kernel", "/weight").replace("/gamma", "/weight")
       .replace("/beta", "/bias"))
  return n.replace("/", "."), transpose


def _assign_all(pairs, source, config_hint="check --bert_config_file"):
  """Assigns ``[(name, variable, np.ndarray)]`` after checking every shape.

  Raises:
    CheckpointError: naming ``source``, the first mismatched variable and
      both shapes (and ``config_hint``); nothing is assigned in that case.
  """
  for name, var, value in pairs:
    if tuple(value.shape) != tuple(var.shape):
      raise CheckpointError(
          "%s does not fit the model: variable %s has shape %s in the "
          "checkpoint but %s in the model (%s)" %
          (source, name, list(value.shape), list(var.shape), config_hint))
  for _, var, value in pairs:
    var.assign(value.astype(np.float32))


def hf_config_to_bert_config(hf_config, source="<config.json>"):
  """A Hugging Face ``BertModel`` config dict -> :class:`BertConfig`.

  ``hidden_act`` is translated (HF ``gelu`` is our ``gelu_exact``).

  Raises:
    ConfigError: unsupported activation or missing keys.
  """
  d = dict(hf_config)
  act = d.get("hidden_act", "gelu")
  if act not in HF_ACTIVATIONS:
    raise config_lib.ConfigError("%s: unsupported hidden_act %r" % (source, act))
  d["hidden_act"] = HF_ACTIVATIONS[act]
  eps = d.get("layer_norm_eps", 1e-12)
  if abs(eps - 1e-12) > 1e-15:
    logging.warning("%s: layer_norm_eps=%g, the model uses 1e-12", source, eps)
  return config_lib.BertConfig.from_dict(d, source)


HF_WEIGHT_FILES = huggingface.WEIGHT_FILES


def is_hf_dir(path):
  """True for a Hugging Face directory (``config.json`` + ``model.safetensors``,
  a sharded ``model.safetensors.index.json``, ``pytorch_model.bin`` or
  ``tf_model.h5``), an ``hf://ORG/NAME`` name resolved in the local cache
  (:func:`bert_tf.huggingface.is_hf_dir`).

  Raises:
    CheckpointError: an ``hf://`` name that is not cached.
  """
  return huggingface.is_hf_dir(path)


def local_checkpoint(init_checkpoint):
  """``init_checkpoint`` with an ``hf://ORG/NAME[@REV]`` name resolved to its
  snapshot in the local Hugging Face cache (:func:`bert_tf.huggingface.resolve`);
  any other value as given (None too). The one place a starting point's
  name becomes a path, so every ``--init_checkpoint`` takes ``hf://``.

  Raises:
    CheckpointError: an ``hf://`` name that is malformed or not cached.
  """
  if not init_checkpoint:
    return init_checkpoint
  try:
    return huggingface.resolve(init_checkpoint)
  except CheckpointError as e:
    raise CheckpointError(str(e), argument="init_checkpoint") from None


def read_hf_tensors(model_dir):
  """All tensors of a Hugging Face directory (or ``hf://`` name), by PyTorch
  name and layout (:func:`bert_tf.huggingface.read_tensors`: safetensors
  read lazily through ``safe_open``, sharded safetensors, ``tf_model.h5``,
  ``pytorch_model.bin`` by ``torch.load(weights_only=True)``; legacy
  ``gamma``/``beta`` renamed).

  Returns:
    ``(tensors, path of the file read)``: a :class:`bert_tf.huggingface.Tensors`
    mapping ``{name: np.ndarray}``.

  Raises:
    CheckpointError: no weight file, an unreadable one, or a
      ``pytorch_model.bin`` without PyTorch.
  """
  return huggingface.read_tensors(huggingface.resolve(model_dir))


def hf_tensors(source) -> "huggingface.Tensors":
  """``source``'s tensors: itself when it is a :class:`bert_tf.huggingface.Tensors`
  already (a loader's, opened once), else :func:`read_hf_tensors` of the
  directory (or ``hf://`` name) it names.

  Raises:
    CheckpointError: as :func:`read_hf_tensors`.
  """
  if isinstance(source, huggingface.Tensors):
    return source
  return read_hf_tensors(source)[0]


def read_hf_config(model_dir):
  """``BertConfig`` of a Hugging Face BERT directory (``config.json``).

  Raises:
    CheckpointError: unreadable, or ``model_type`` is not ``bert``.
    ConfigError: unsupported activation or missing keys.
  """
  model_dir = huggingface.resolve(model_dir)
  d = huggingface.read_config(model_dir)
  return hf_config_to_bert_config(d, os.path.join(model_dir, "config.json"))


def load_hf_weights(encoder, model_dir, optional=()):
  """Loads a Hugging Face ``BertModel``'s weights into ``encoder``.

  Reads ``model_dir/model.safetensors`` (or ``pytorch_model.bin``, see
  :func:`read_hf_tensors`). Accepts keys with or without the ``bert.``
  prefix (``BertForPreTraining`` and friends); ignores heads and buffers the
  encoder lacks.

  Args:
    encoder: a built :class:`BertEncoder`.
    model_dir: a Hugging Face BERT directory, or its tensors
      (:func:`hf_tensors`: a loader's, read once).
    optional: original TF1 name prefixes that may be absent (they keep
      their values), e.g. ``("bert/pooler/",)`` for
      ``BertForQuestionAnswering``, saved without a pooler.

  Returns:
    the path of the weight file read.

  Raises:
    CheckpointError: file missing/unreadable, a weight missing, or a shape
      mismatch (first mismatched variable and both shapes).
  """
  tensors = hf_tensors(model_dir)
  path = tensors.path
  pairs = []
  for name, var in encoder_variables(encoder):
    hf_name, transpose = tf1_to_hf_name(name)
    value = tensors.get(hf_name, tensors.get("bert." + hf_name))
    if value is None:
      if any(name.startswith(p) for p in optional):
        continue
      raise CheckpointError("%s has no weight %s (for %s)" % (path, hf_name, name))
    pairs.append((name, var, value.T if transpose else value))
  _assign_all(pairs, path, "its config.json disagrees with its tensors, or pass "
              "the config that fits them")
  return path


# Original TF1 head names -> (Hugging Face BertForPreTraining names, transpose).
HF_HEAD_NAMES = {
    "cls/predictions/transform/dense/kernel": (
        "cls.predictions.transform.dense.weight", True),
    "cls/predictions/transform/dense/bias": ("cls.predictions.transform.dense.bias", False),
    "cls/predictions/transform/LayerNorm/gamma": (
        "cls.predictions.transform.LayerNorm.weight", False),
    "cls/predictions/transform/LayerNorm/beta": (
        "cls.predictions.transform.LayerNorm.bias", False),
    "cls/predictions/output_bias": ("cls.predictions.bias", False),
    "cls/seq_relationship/output_weights": ("cls.seq_relationship.weight", False),
    "cls/seq_relationship/output_bias": ("cls.seq_relationship.bias", False),
}


HF_HEAD_GROUPS = ("cls/predictions", "cls/seq_relationship")

# Our dense heads (DenseHead: output_weights [N, H], output_bias [N]) ->
# transformers' names, the same layout (no transpose):
# BertForSequenceClassification, BertForTokenClassification and
# BertForMultipleChoice (N = 1) all name theirs ``classifier``.
HF_CLASSIFIER_HEAD = {"output_weights": "classifier.weight", "output_bias": "classifier.bias"}


def load_hf_dense_head(head, model_dir, what: str, hint: str = "") -> bool:
  """Loads a ``classifier.weight`` [N, H] / ``classifier.bias`` [N] head
  (:data:`HF_CLASSIFIER_HEAD`) into a :class:`DenseHead`.

  Args:
    head: the model's :class:`bert_tf.modeling.models.DenseHead`.
    model_dir: a Hugging Face directory (or ``hf://`` name), or its tensors
      (:func:`hf_tensors`).
    what: the head's name in errors ("classification head").
    hint: appended to a shape error ("3 labels").

  Returns:
    True when the directory had the head, False when it has none.

  Raises:
    CheckpointError: half a head, or another shape (another label count:
      naming the tensor and both shapes).
  """
  tensors = hf_tensors(model_dir)
  path = tensors.path
  found = {ours: tensors[hf] for ours, hf in HF_CLASSIFIER_HEAD.items() if hf in tensors}
  if not found:
    return False
  if len(found) != len(HF_CLASSIFIER_HEAD):
    raise CheckpointError("%s has only part of the %s (classifier.weight and "
                          "classifier.bias)" % (path, what))
  for name, value in found.items():
    var = getattr(head, name)
    if tuple(value.shape) != tuple(var.shape):
      raise CheckpointError(
          "%s: %s has shape %s, the model's %s wants %s%s" % (
              path, HF_CLASSIFIER_HEAD[name], list(value.shape), what,
              list(var.shape), " (%s)" % hint if hint else ""), argument="num_labels")
  for name, value in found.items():
    getattr(head, name).assign(value.astype(np.float32))
  return True


def load_hf_pretraining_heads(named_variables, model_dir):
  """Loads the ``cls.*`` heads of a Hugging Face ``BertForPreTraining``.

  Source: Hugging Face ``BertPreTrainingHeads`` (``cls.predictions.*``,
  ``cls.seq_relationship.*``), whose layout is the original's
  ``cls/predictions`` and ``cls/seq_relationship`` (the decoder weight is
  the tied word-embedding table, not read here).

  Args:
    named_variables: ``[(original TF1 name, variable)]``, e.g. the ``cls/``
      entries of :func:`pretrainer_variables`; other names are skipped.
    model_dir: a Hugging Face directory (``model.safetensors``), or its
      tensors (:func:`hf_tensors`).

  Returns:
    the TF1 names loaded: both heads, the masked-LM head alone (a
    ``BertForMaskedLM``, which has no ``cls.seq_relationship``), or ``[]``
    when the file has none (``BertModel`` checkpoints such as sentence
    encoders).

  Raises:
    CheckpointError: unreadable file, only some weights of one head
      present, or a shape mismatch.
  """
  tensors = hf_tensors(model_dir)
  path = tensors.path
  loaded = []
  for group in HF_HEAD_GROUPS:
    wanted = [(n, v) for n, v in named_variables
              if n in HF_HEAD_NAMES and n.startswith(group + "/")]
    found = [(n, v, tensors[HF_HEAD_NAMES[n][0]]) for n, v in wanted
             if HF_HEAD_NAMES[n][0] in tensors]
    if not found:
      continue
    if len(found) != len(wanted):
      missing = sorted(HF_HEAD_NAMES[n][0] for n, _ in wanted
                       if HF_HEAD_NAMES[n][0] not in tensors)
      raise CheckpointError("%s has only some %s head weights; missing %s"
                            % (path, group, ", ".join(missing)))
    _assign_all([(n, v, t.T if HF_HEAD_NAMES[n][1] else t) for n, v, t in found], path)
    loaded += [n for n, _, _ in found]
  return loaded


def load_tf1_checkpoint(named_variables, ckpt_path, allow_missing=()):
  """Loads an original TF1 checkpoint (``bert_model.ckpt``) by variable name.

  Args:
    named_variables: ``[(original name, variable)]`` from
      :func:`encoder_variables` or :func:`pretrainer_variables`.
    ckpt_path: checkpoint prefix or directory.
    allow_missing: name prefixes that may be absent (e.g. ``("cls/",)``).

  Raises:
    CheckpointError: unreadable checkpoint, missing variable, shape mismatch.
  """
  try:
    reader = tf.train.load_checkpoint(ckpt_path)
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError("cannot read checkpoint %r: %s" % (ckpt_path, e)) from e
  shapes = reader.get_variable_to_shape_map()
  pairs = []
  for name, var in named_variables:
    if name not in shapes:
      if any(name.startswith(p) for p in allow_missing):
        continue
      raise CheckpointError("checkpoint %r has no variable %s" % (ckpt_path, name))
    try:
      value = reader.get_tensor(name)
    except Exception as e:  # pylint: disable=broad-except
      # A cut .data file raises IndexError / DataLossError here.
      raise errors.CorruptCheckpointError(
          "checkpoint %s is truncated or unreadable (%s reading %s: %s)"
          % (ckpt_path, type(e).__name__, name, errors.first_line(e, "no detail")[:200]),
          path=ckpt_path) from None
    pairs.append((name, var, value))
  _assign_all(pairs, "checkpoint %r" % ckpt_path)


def tf1_variable_names(path):
  """``{name: shape}`` of a name-based checkpoint, or {} if unreadable."""
  try:
    return tf.train.load_checkpoint(path).get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError):
    return {}


def is_tf1_checkpoint(path):
  """True when ``path`` is a TF1 name-based checkpoint holding ``bert/`` names."""
  return "bert/embeddings/word_embeddings" in tf1_variable_names(path)


def restore_object_checkpoint(ckpt_path: str, source: str, hint: str = "check --bert_config_file",
                              **objects) -> str:
  """Restores one of our object-based checkpoints into ``objects``: the one
  restore of the library (presets, ``--init_checkpoint``, the runner's
  ``best/``, the converter; the exports and the search call it too).

  Strict where it matters: every variable of ``objects`` must be in the
  checkpoint with its shape (``assert_existing_objects_matched``), so a
  model restored for evaluation or export is whole or the call fails in one
  line; values of the checkpoint that ``objects`` do not hold (the
  optimizer's slots, the heads of a fuller model when only ``encoder=`` is
  asked for) are left unread (``expect_partial``): asking for a part is
  how a partial restore is written. A failure is told apart: files that do
  not read whole (:func:`unreadable_reason`) from a checkpoint that does
  not fit.

  Args:
    ckpt_path: checkpoint prefix (``DIR/ckpt-N``), or a run directory: its
      model checkpoint by the one best-or-latest rule
      (:func:`bert_tf.run_dir.model_checkpoint`: ``best/`` when kept, else
      the newest).
    source: text naming the file or flag, for errors.
    hint: what a mismatch message suggests (default: the config flag).
    **objects: trackables by checkpoint key (``encoder=...``, ``model=...``).

  Returns:
    the checkpoint prefix restored.

  Raises:
    CorruptCheckpointError: files that are truncated or unreadable.
    CheckpointError: no checkpoint in the directory, or a checkpoint that
      does not fit ``objects`` (TF's message names the variable and both
      shapes).
  """
  if os.path.isdir(ckpt_path):
    found = run_dir.model_checkpoint(ckpt_path)
    if found is None:
      raise CheckpointError("%s: no checkpoint in directory %r" % (source, ckpt_path))
    ckpt_path = found
  try:
    status = tf.train.Checkpoint(**objects).read(ckpt_path)
    status.expect_partial()
    status.assert_existing_objects_matched()
  except Exception as e:  # pylint: disable=broad-except
    # TensorFlow's reader raises IndexError, DataLossError, ... for cut
    # files: only the tensors' own readability tells a corrupt file from a
    # model that does not fit.
    # The failed restore leaves deferred restorations in the model: when it
    # is deleted, TensorFlow would log one "Value in checkpoint could not be
    # found" line per variable (~1,160 for BASE) after this error.
    silence_unrestored_warnings()
    reason = unreadable_reason(ckpt_path)
    if reason is not None:
      raise errors.CorruptCheckpointError(
          "%s: checkpoint %s is truncated or unreadable (%s)" % (source, ckpt_path, reason),
          path=ckpt_path) from None
    if not isinstance(e, (ValueError, AssertionError, tf.errors.OpError)):
      raise
    raise CheckpointError("%s: checkpoint %r does not fit the model (%s): %s"
                          % (source, ckpt_path, hint, errors.first_line(e))) from None
  return ckpt_path


def unreadable_reason(ckpt_path: str) -> Optional[str]:
  """Why a checkpoint's files cannot be read whole, or None when they can.

  Reads every tensor of ``ckpt_path`` (an object- or name-based checkpoint
  prefix): called after a restore failed, to tell a truncated or missing
  ``.data``/``.index`` file from a checkpoint that does not fit the model.

  Args:
    ckpt_path: checkpoint prefix (``DIR/ckpt-N``).

  Returns:
    A short reason (str) naming what failed, or None.
  """
  if not tf.io.gfile.exists(ckpt_path + ".index"):
    return "no file %s.index" % ckpt_path
  try:
    reader = tf.train.load_checkpoint(ckpt_path)
    for name, dtype in reader.get_variable_to_dtype_map().items():
      if dtype != tf.variant:  # an input iterator's state: no NumPy value to read
        reader.get_tensor(name)
  except Exception as e:  # pylint: disable=broad-except
    return "%s: %s" % (type(e).__name__, errors.first_line(e, "no detail")[:200])
  return None


class _UnrestoredFilter(logging.Filter):
  """Drops TensorFlow's per-variable "unrestored value" warnings."""

  PREFIXES = ("Value in checkpoint could not be found",
              "Detecting that an object or model or tf.train.Checkpoint is being "
              "deleted with unrestored values")

  def filter(self, record):
    return not str(record.getMessage()).startswith(self.PREFIXES)


def silence_unrestored_warnings() -> None:
  """Installs :class:`_UnrestoredFilter` on TensorFlow's logger (once): after a
  mismatch has been reported as one :class:`CheckpointError` line."""
  logger = tf.get_logger()
  if not any(isinstance(f, _UnrestoredFilter) for f in logger.filters):
    logger.addFilter(_UnrestoredFilter())


def load_tf1_pretraining_heads(named_variables, ckpt_path) -> list:
  """Loads the ``cls/predictions`` (masked-LM) and ``cls/seq_relationship``
  (next-sentence) heads of an original checkpoint, each where present.

  The original ``run_pretraining.py`` initialized every variable its
  checkpoint held (continued pretraining from ``bert_model.ckpt`` keeps
  its heads).

  Args:
    named_variables: ``[(original TF1 name, variable)]`` (the ``cls/``
      entries of :func:`pretrainer_variables`; other names are skipped).
    ckpt_path: an original checkpoint prefix.

  Returns:
    the TF1 names loaded ([] for an encoder-only checkpoint).

  Raises:
    CheckpointError: only some weights of one head present (naming the
      missing ones), a shape mismatch, an unreadable checkpoint.
  """
  names = tf1_variable_names(ckpt_path)
  heads = [(n, v) for n, v in named_variables if n.startswith("cls/")]
  present = [(n, v) for n, v in heads if n in names]
  for group in HF_HEAD_GROUPS:
    got = [n for n, _ in present if n.startswith(group + "/")]
    want = [n for n, _ in heads if n.startswith(group + "/")]
    if got and len(got) != len(want):
      raise CheckpointError("checkpoint %r has only some %s weights; missing %s"
                            % (ckpt_path, group, ", ".join(sorted(set(want) - set(got)))))
  load_tf1_checkpoint(present, ckpt_path)
  return [n for n, _ in present]


def restore_pretraining_heads(pretrainer, ckpt_path: str, source: str) -> list:
  """The heads a checkpoint of one of our pretraining runs holds (its
  ``model``'s ``masked_lm`` / ``next_sentence``), restored into
  ``pretrainer``: the partial restore when the whole model does not fit
  (a run without the next-sentence head).

  Args:
    pretrainer: a :class:`bert_tf.modeling.models.BertPretrainer`.
    ckpt_path: an object checkpoint prefix.
    source: text naming the path, for errors.

  Returns:
    the TF1 names of the head weights restored ([] when it has none).

  Raises:
    CheckpointError: see :func:`restore_object_checkpoint`.
  """
  names = [n for n, _ in tf.train.list_variables(ckpt_path)]
  children, loaded = {}, []
  for child, group in (("masked_lm", "cls/predictions/"),
                       ("next_sentence", "cls/seq_relationship/")):
    if getattr(pretrainer, child, None) is not None and any(
        n.startswith("model/%s/" % child) for n in names):
      children[child] = getattr(pretrainer, child)
      loaded += [n for n, _ in pretrainer_variables(pretrainer) if n.startswith(group)]
  if children:
    restore_object_checkpoint(ckpt_path, source, model=tf.train.Checkpoint(**children))
  return loaded


def _load_head(named, tensors, source):
  """Assigns a head found in ``tensors`` ({TF1 name: array}); returns the
  names loaded ([] when none is there).

  Raises:
    CheckpointError: only some of the head's weights present, or a shape
      mismatch.
  """
  found = [(n, v, tensors[n]) for n, v in named if n in tensors]
  if not found:
    return []
  if len(found) != len(named):
    missing = sorted(n for n, _ in named if n not in tensors)
    raise CheckpointError("%s has only part of the SQuAD head; missing %s"
                          % (source, ", ".join(missing)))
  _assign_all(found, source)
  return [n for n, _, _ in found]


def load_hf_squad_head(model, model_dir):
  """Loads a Hugging Face ``BertForQuestionAnswering`` head (``qa_outputs``).

  ``qa_outputs.weight`` [2, H] and ``qa_outputs.bias`` [2] have the
  original ``cls/squad`` layout (row 0: start, row 1: end; no transpose).

  Returns:
    the TF1 names loaded, or ``[]`` when the directory has no head.

  Raises:
    CheckpointError: unreadable file, half a head, or a shape mismatch.
  """
  tensors = hf_tensors(model_dir)
  renamed = {n: tensors[h] for n, h in HF_SQUAD_HEAD_NAMES.items() if h in tensors}
  return _load_head(squad_head_variables(model), renamed, tensors.path)


def load_tf1_squad_head(model, ckpt_path):
  """Loads ``cls/squad/output_weights`` and ``output_bias`` from an original
  fine-tuned ``run_squad.py`` checkpoint, when it has them.

  Returns:
    the names loaded, or ``[]`` (e.g. a pretrained ``bert_model.ckpt``).

  Raises:
    CheckpointError: unreadable checkpoint, half a head, or a shape mismatch.
  """
  shapes = tf1_variable_names(ckpt_path)
  if not any(n in shapes for n in SQUAD_HEAD):
    return []
  reader = tf.train.load_checkpoint(ckpt_path)
  tensors = {n: reader.get_tensor(n) for n in SQUAD_HEAD if n in shapes}
  return _load_head(squad_head_variables(model), tensors,
                    "checkpoint %r" % ckpt_path)


def save_tf1_checkpoint(named_variables, ckpt_prefix):
  """Writes weights under their original TF1 names (``bert_model.ckpt``).

  The files (``PREFIX.index``, ``PREFIX.data-*``) are readable by the
  original code's ``tf.train.Saver`` / ``init_from_checkpoint`` and by
  :func:`load_tf1_checkpoint`. No optimizer slots are written. Files are
  written under a temporary prefix and renamed when whole.

  Args:
    named_variables: ``[(original name, variable)]``.
    ckpt_prefix: output prefix, e.g. ``out/bert_model.ckpt``.

  Returns:
    ``ckpt_prefix``.
  """
  d = os.path.dirname(os.path.abspath(ckpt_prefix))
  os.makedirs(d, exist_ok=True)
  tmp = ckpt_prefix + ".tmp-%d" % os.getpid()
  names = [n for n, _ in named_variables]
  values = [tf.convert_to_tensor(v) for _, v in named_variables]
  tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names,
                    shape_and_slices=[""] * len(names), tensors=values)
  for path in sorted(glob.glob(tmp + ".*"), key=lambda p: p.endswith(".index")):
    os.replace(path, ckpt_prefix + path[len(tmp):])  # .index last
  return ckpt_prefix


SLOT_SUFFIXES = ("/adam_m", "/adam_v")


def shrink_tf1_checkpoint(src, dst, keep_optimizer_slots=False):
  """Copies an original TF1 checkpoint without its Adam slots (~1/3 the size).

  The original's most asked question: a fine-tuned ``model.ckpt-N`` holds
  ``*/adam_m`` and ``*/adam_v`` beside every weight. Every other variable
  (including task heads and ``global_step``) is kept under its name.

  Returns:
    ``(dst, number of variables written, number dropped)``.

  Raises:
    CheckpointError: unreadable ``src``.
  """
  try:
    reader = tf.train.load_checkpoint(src)
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError("cannot read checkpoint %r: %s" % (src, e)) from e
  names = sorted(reader.get_variable_to_shape_map())
  keep = [n for n in names if keep_optimizer_slots or not n.endswith(SLOT_SUFFIXES)]
  save_tf1_checkpoint([(n, reader.get_tensor(n)) for n in keep], dst)
  return dst, len(keep), len(names) - len(keep)
