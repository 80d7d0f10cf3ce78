"""``from_preset``: a bert_tf model built and loaded from a directory or file.

keras-hub's habit (``keras_hub.models.BertBackbone.from_preset``), over the
formats that :mod:`bert_tf.checkpoints` reads:

* a Hugging Face BERT directory (``config.json`` + ``model.safetensors``);
* an original google-research/bert directory (``bert_config.json`` +
  ``bert_model.ckpt.*``) or TF1 checkpoint prefix (also a fine-tuned
  ``model.ckpt-N``: its ``output_weights``/``output_bias`` head is loaded);
* one of ours: a run directory (``bert_config.json`` + object checkpoints;
  ``best/`` is preferred when it holds one) or a checkpoint prefix;
* a ``.keras`` file written by ``model.save``.

The model classes call :func:`load` with a factory; this module never
imports them (``encoder.py`` and ``models.py`` import it).
"""

import json
import os
import zipfile
from typing import Callable, Optional

import keras
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import preprocessing

# Written by run_classifier beside its checkpoints (labels, task).
CLASSIFIER_RUN_CONFIG = "classifier_config.json"
BEST_DIR = "best"
# Every fine-tuning tool's settings file (do_lower_case, max_seq_length, ...).
RUN_CONFIGS = (CLASSIFIER_RUN_CONFIG, "ner_config.json", "squad_config.json",
               "swag_config.json")
# from_preset(..., preprocessor=True) without a recorded length: the
# original run_classifier's --max_seq_length default (capped at the model's
# max_position_embeddings).
DEFAULT_MAX_SEQ_LENGTH = 128


def encoder_of(model):
  """The :class:`BertEncoder` of ``model`` (itself for an encoder)."""
  return model if hasattr(model, "blocks") else model.encoder


def _is_prefix(path):
  return bool(tf.io.gfile.glob(path + ".index"))


def resolve(preset: str):
  """Finds what a preset path holds.

  Args:
    preset: see the module docstring.

  Returns:
    ``(kind, checkpoint, run_dir)``: kind ``"keras"``, ``"hf"`` or
    ``"ckpt"``; the file / directory / checkpoint prefix to read; the
    directory where ``bert_config.json`` and ``classifier_config.json`` are
    looked for (None for ``keras``/``hf``).

  Raises:
    CheckpointError: nothing loadable at ``preset``.
  """
  preset = os.fspath(preset)
  if preset.endswith(".keras") and os.path.isfile(preset):
    return "keras", preset, None
  if checkpoints.is_hf_dir(preset):
    return "hf", preset, None
  if os.path.isdir(preset):
    best = os.path.join(preset, BEST_DIR)
    latest = tf.train.latest_checkpoint(best) if os.path.isdir(best) else None
    if latest is None and _is_prefix(os.path.join(preset, "bert_model.ckpt")):
      latest = os.path.join(preset, "bert_model.ckpt")
    if latest is None:
      latest = tf.train.latest_checkpoint(preset)
    if latest is None:
      raise errors.CheckpointError(
          "from_preset: %r holds no model: expected a Hugging Face directory "
          "(config.json + model.safetensors), bert_config.json + "
          "bert_model.ckpt, or bert_config.json + our checkpoints" % preset,
          argument="preset")
    return "ckpt", latest, preset
  if _is_prefix(preset):
    d = os.path.dirname(os.path.abspath(preset))
    if (not os.path.exists(os.path.join(d, "bert_config.json")) and
        os.path.basename(d) == BEST_DIR):
      d = os.path.dirname(d)
    return "ckpt", preset, d
  raise errors.CheckpointError("from_preset: %r does not exist" % preset,
                               argument="preset")


def read_config(run_dir: Optional[str], preset: str) -> config_lib.BertConfig:
  """``run_dir/bert_config.json`` as a :class:`BertConfig`.

  Raises:
    ConfigError: missing (pass ``config=``) or invalid.
  """
  path = os.path.join(run_dir or "", "bert_config.json")
  if not os.path.exists(path):
    raise errors.ConfigError(
        "from_preset: no bert_config.json beside %r; pass config=" % preset,
        argument="config")
  return config_lib.BertConfig.from_json_file(path)


def load_keras_file(path: str) -> keras.Model:
  """``keras.models.load_model(path, compile=False)`` with bad files named.

  Raises:
    CheckpointError: ``path`` is not a readable ``.keras`` archive (corrupt,
      truncated, another format) or holds a model that is not bert_tf's;
      one line naming the file and what went wrong.
  """
  try:
    model = keras.models.load_model(path, compile=False)
  except (ValueError, TypeError, KeyError, OSError, zipfile.BadZipFile,
          json.JSONDecodeError) as e:
    raise errors.CheckpointError(
        "%s is not a loadable .keras model of bert_tf (%s: %s)"
        % (path, type(e).__name__, errors.first_line(e, "no detail")[:300]),
        argument="preset") from None
  if not (hasattr(model, "blocks") or hasattr(getattr(model, "encoder", None), "blocks")):
    raise errors.CheckpointError(
        "%s holds a %s, not a bert_tf model (BertEncoder, BertClassifier, ...)"
        % (path, type(model).__name__), argument="preset")
  return model


def run_num_labels(preset: str) -> Optional[int]:
  """Number of classes a preset was fine-tuned for, or None if unknown.

  Read from a ``.keras`` classifier, ``classifier_config.json`` (ours: 1 for
  regression) or a TF1 checkpoint's ``output_weights`` [N, H].
  """
  kind, path, run_dir = resolve(preset)
  if kind == "keras":
    model = load_keras_file(path)
    return getattr(model, "num_labels", None)
  if kind != "ckpt":
    return None
  rc = os.path.join(run_dir, CLASSIFIER_RUN_CONFIG)
  if os.path.exists(rc):
    with open(rc, encoding="utf-8") as f:
      d = json.load(f)
    if d.get("is_regression"):
      return 1
    if d.get("labels"):
      return len(d["labels"])
  shape = checkpoints.tf1_variable_names(path).get("output_weights")
  return int(shape[0]) if shape else None


def _copy(pairs_to, pairs_from, source):
  """Assigns named variables ``pairs_from`` into ``pairs_to`` (same names)."""
  src = dict(pairs_from)
  for name, var in pairs_to:
    value = src.get(name)
    if value is None or tuple(value.shape) != tuple(var.shape):
      raise errors.CheckpointError(
          "from_preset: %s does not fit the model at variable %s" % (source, name),
          argument="preset")
  for name, var in pairs_to:
    var.assign(src[name])


def load(preset: str, what: str, factory: Callable, config=None):
  """Builds a model with ``factory(config)`` and loads ``preset`` into it.

  Args:
    preset: a path (see the module docstring).
    what: ``"encoder"``, ``"pretrainer"`` or ``"classifier"``.
    factory: ``BertConfig -> model`` whose weights all exist.
    config: a :class:`BertConfig` (or dict) that overrides the preset's.

  Returns:
    the model, weights loaded (task heads too when the preset has them).

  Raises:
    CheckpointError, ConfigError: see :func:`resolve`, :func:`read_config`
      and the loaders of :mod:`bert_tf.checkpoints`.
  """
  kind, path, run_dir = resolve(preset)
  if kind == "keras":
    saved = load_keras_file(path)
    cfg = config_lib.as_bert_config(config) if config is not None else saved.config
    model = factory(cfg)
    same = type(saved) is type(model) and [w.shape for w in saved.weights] == [
        w.shape for w in model.weights]
    if same:
      for dst, src in zip(model.weights, saved.weights):
        dst.assign(src)
    else:
      _copy(checkpoints.encoder_variables(encoder_of(model)),
            checkpoints.encoder_variables(encoder_of(saved)), path)
    return model
  if kind == "hf":
    cfg = (config_lib.as_bert_config(config) if config is not None
           else checkpoints.read_hf_config(path))
    model = factory(cfg)
    checkpoints.load_hf_weights(encoder_of(model), path)
    if what == "pretrainer":  # BertForPreTraining heads, when present
      checkpoints.load_hf_pretraining_heads(checkpoints.pretrainer_variables(model),
                                            path)
    return model
  cfg = (config_lib.as_bert_config(config) if config is not None
         else read_config(run_dir, preset))
  model = factory(cfg)
  encoder = encoder_of(model)
  if checkpoints.is_tf1_checkpoint(path):
    if what == "pretrainer":
      named = checkpoints.pretrainer_variables(model)
    else:
      named = checkpoints.encoder_variables(encoder)
    if what == "classifier":
      named += [("output_weights", model.classifier.output_weights),
                ("output_bias", model.classifier.output_bias)]
    checkpoints.load_tf1_checkpoint(named, path,
                                    allow_missing=("cls/", "output_"))
    return model
  source = "from_preset(%r)" % preset
  if what != "encoder":
    try:
      checkpoints.restore_object_checkpoint(path, source, model=model)
      return model
    except errors.CheckpointError:
      pass  # e.g. a pretraining checkpoint for a classifier: encoder only
  checkpoints.restore_object_checkpoint(path, source, encoder=encoder)
  return model


def _preset_settings(kind: str, path: str, run_dir: Optional[str]) -> dict:
  """``do_lower_case``, ``max_seq_length``, ``preserve_unused_tokens`` that
  a preset records (a run's settings file; Hugging Face
  ``tokenizer_config.json``'s ``do_lower_case``; an original directory
  named ``cased_*`` is cased), with the defaults where it records none."""
  settings = {"do_lower_case": True, "preserve_unused_tokens": False}
  if kind == "hf":
    tok = os.path.join(path, "tokenizer_config.json")
    if os.path.exists(tok):
      with open(tok, encoding="utf-8") as f:
        settings["do_lower_case"] = bool(json.load(f).get("do_lower_case", True))
    cfg = checkpoints.read_hf_config(path)
  else:
    name = os.path.basename(os.path.normpath(run_dir))
    if name.startswith("cased") or "_cased" in name or "-cased" in name:
      settings["do_lower_case"] = False
    for run_config in RUN_CONFIGS:
      f_path = os.path.join(run_dir, run_config)
      if os.path.exists(f_path):
        with open(f_path, encoding="utf-8") as f:
          recorded = json.load(f)
        settings.update({k: recorded[k] for k in ("do_lower_case", "max_seq_length",
                                                  "preserve_unused_tokens")
                         if recorded.get(k) is not None})
    cfg = read_config(run_dir, path)
  settings.setdefault("max_seq_length",
                      min(DEFAULT_MAX_SEQ_LENGTH, cfg.max_position_embeddings))
  return settings


def preprocessor_for(preset: str, preprocessor):
  """The preprocessor a task model built by ``from_preset`` carries.

  Args:
    preset: a path (see the module docstring).
    preprocessor: None or False (none: the model takes ids only); a
      :class:`bert_tf.preprocessing.BertPreprocessor` or
      ``PreprocessorLayer`` (returned as is); True: the preset's own:
      a ``.keras`` model's preprocessor, else ``vocab.txt`` beside the
      weights (Hugging Face directory, original directory, our run
      directory) with the preset's ``do_lower_case``, ``max_seq_length`` and
      ``preserve_unused_tokens`` (a run's settings file; Hugging Face
      ``tokenizer_config.json``; defaults: lower-casing unless the original
      directory is named ``cased_*``, 128 tokens capped at
      ``max_position_embeddings``).

  Returns:
    a ``BertPreprocessor`` (or the layer given), or None.

  Raises:
    errors.ConfigError: True and the preset has no vocab (naming where it
      looked) or is a ``.keras`` model without a preprocessor.
  """
  if preprocessor is None or preprocessor is False:
    return None
  if preprocessor is not True:
    return preprocessor
  kind, path, run_dir = resolve(preset)
  if kind == "keras":
    saved = getattr(load_keras_file(path), "preprocessor", None)
    if saved is None:
      raise errors.ConfigError(
          "from_preset(%r, preprocessor=True): the .keras model has no "
          "preprocessor; pass preprocessor=BertPreprocessor(vocab_file, "
          "do_lower_case, max_seq_length)" % preset, argument="preprocessor")
    return saved.bert_preprocessor
  vocab = os.path.join(path if kind == "hf" else run_dir, "vocab.txt")
  if not os.path.exists(vocab):
    raise errors.ConfigError(
        "from_preset(%r, preprocessor=True): no vocab.txt at %s; pass "
        "preprocessor=BertPreprocessor(vocab_file, do_lower_case, max_seq_length)"
        % (preset, vocab), argument="preprocessor")
  s = _preset_settings(kind, path, run_dir)
  return preprocessing.BertPreprocessor(
      vocab, s["do_lower_case"], s["max_seq_length"],
      preserve_unused_tokens=s["preserve_unused_tokens"])
