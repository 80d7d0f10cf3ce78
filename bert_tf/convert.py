"""Converts BERT weights between formats (tools/convert_checkpoint.py).

Sits above :mod:`bert_tf.checkpoints` (name tables, readers, writers) and
:mod:`bert_tf.modeling` (it builds the model the weights go through).
Source: google-research/bert has no converter; the TF1 names are those of its
``modeling.py`` / ``run_pretraining.py``.

* :func:`convert_checkpoint`: TF1 <-> ours, Hugging Face -> either;
* :func:`to_transformers`: one of our models, or any preset (a run
  directory, a ``.keras`` file, a Hugging Face directory, an original
  checkpoint), written back as a transformers directory (``config.json``,
  ``model.safetensors``, ``vocab.txt``, ``tokenizer.json``,
  ``tokenizer_config.json``) that ``AutoModelFor<Task>.from_pretrained`` and
  ``AutoTokenizer.from_pretrained`` load: keras-hub's
  ``export_to_transformers``, for BERT. The tensor names invert the readers
  of :mod:`bert_tf.checkpoints`, so a Hugging Face directory read here and
  written back has byte-equal tensors.

Example::

  from bert_tf import convert
  convert.to_transformers("runs/mrpc", "mrpc_hf")  # a run_classifier.py run
  # transformers.AutoModelForSequenceClassification.from_pretrained("mrpc_hf")
"""

import json
import logging
import os
import re
import shutil
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import huggingface
from bert_tf import run_dir
from bert_tf import task_kinds
from bert_tf.modeling import models
from bert_tf.modeling import presets


def convert_checkpoint(src, dst, output_format, bert_config_file=None):
  """Converts BERT weights between the supported formats.

  Args:
    src: a Hugging Face BERT directory, an original TF1 checkpoint, or one
      of ours (prefix or directory).
    dst: output prefix (TF1 format: e.g. ``out/bert_model.ckpt``; ours: a
      checkpoint prefix such as ``out/ckpt``). ``bert_config.json`` is written
      beside it.
    output_format: ``ours`` or ``tf1``.
    bert_config_file: required unless ``src`` is a Hugging Face directory.

  Returns:
    a string describing what was written. Encoder weights always; the
    pretraining heads (``cls/...``) when the source has them. Optimizer
    slots are never copied (use :func:`shrink_tf1_checkpoint` for TF1 -> TF1).

  Raises:
    checkpoints.CheckpointError / ConfigError: naming the file and the problem.
  """
  if output_format not in ("ours", "tf1"):
    raise checkpoints.CheckpointError(
        "output_format must be 'ours' or 'tf1', got %r" % output_format,
        argument="output_format")
  hf = checkpoints.is_hf_dir(src)
  if hf:
    config = checkpoints.read_hf_config(src)
  elif bert_config_file:
    config = config_lib.BertConfig.from_json_file(bert_config_file)
  else:
    raise checkpoints.CheckpointError("bert_config_file is required for %r" % src,
                                      argument="bert_config_file")
  model = models.build_pretrainer(config)
  with_heads = False
  tf1_names = {} if hf else checkpoints.tf1_variable_names(src)
  if hf:
    checkpoints.load_hf_weights(model.encoder, src)
  elif "bert/embeddings/word_embeddings" in tf1_names:
    with_heads = "cls/predictions/output_bias" in tf1_names
    checkpoints.load_tf1_checkpoint(checkpoints.pretrainer_variables(model), src,
                        allow_missing=() if with_heads else ("cls/",))
  else:
    try:
      checkpoints.restore_object_checkpoint(src, "--input", model=model)
      with_heads = True
    except checkpoints.CheckpointError:
      # Not a pretraining run's: its encoder alone (a partial restore of a
      # fuller model; the rest is not converted).
      checkpoints.restore_object_checkpoint(src, "--input", encoder=model.encoder)
  named = checkpoints.pretrainer_variables(model) if with_heads else checkpoints.encoder_variables(model.encoder)
  config.to_json_file(os.path.join(os.path.dirname(os.path.abspath(dst)),
                                   "bert_config.json"))
  if output_format == "tf1":
    checkpoints.save_tf1_checkpoint(named, dst)
  else:
    objects = {"encoder": model.encoder}
    if with_heads:
      objects["model"] = model
    tf.train.Checkpoint(**objects).write(dst)
  return "%d variables (%s) -> %s [%s]" % (
      len(named), "encoder + pretraining heads" if with_heads else "encoder",
      dst, output_format)


# --- Writing back to transformers -------------------------------------------

# transformers builds these without the pooler (``add_pooling_layer=False``):
# a pooler tensor in their file is an "unexpected key".
NO_POOLER = ("BertForTokenClassification", "BertForQuestionAnswering", "BertForMaskedLM")
# Our hidden_act -> transformers' (``activations.ACT2FN``): our ``gelu`` is
# the original's tanh approximation, transformers' ``gelu_new``.
TRANSFORMERS_ACTIVATIONS = {"gelu_exact": "gelu", "gelu": "gelu_new", "relu": "relu",
                            "tanh": "tanh", "linear": "linear"}


def task_names() -> Tuple[str, ...]:
  """The kinds :func:`to_transformers` writes (``task=``, ``convert_checkpoint.py
  --task``): every :mod:`bert_tf.task_kinds` kind with a Keras model class and
  transformers architectures, in registration order."""
  return tuple(task_kinds.names(lambda k: bool(k.model_class and k.hf_architectures)))


# The kinds when this module was imported (the tool's --task choices).
TASKS = task_names()
SPECIAL_TOKENS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
                  "sep_token": "[SEP]", "mask_token": "[MASK]"}
# The original WordpieceTokenizer's max_input_chars_per_word (transformers'
# BertTokenizer uses 100; ours, like the original, 200).
MAX_INPUT_CHARS_PER_WORD = 200
SAFETENSORS_METADATA = {"format": "pt"}  # what transformers' save_pretrained writes


def _error(message: str, argument: Optional[str] = None) -> errors.CheckpointError:
  return errors.CheckpointError(message, argument=argument)


def transformers_architecture(model) -> str:
  """The transformers class of one of our models.

  Args:
    model: a :class:`BertEncoder`, :class:`BertPretrainer` (``nsp``:
      ``BertForPreTraining``, else ``BertForMaskedLM``), :class:`BertClassifier`,
      :class:`BertTokenClassifier`, :class:`BertQuestionAnswerer` or
      :class:`BertMultipleChoice`.

  Returns:
    ``"BertModel"``, ``"BertForSequenceClassification"``, ...: the first of
    the model class's kind's ``hf_architectures`` (:mod:`bert_tf.task_kinds`);
    a pretrainer without the next-sentence head is a ``BertForMaskedLM``.

  Raises:
    CheckpointError: another kind of model.
  """
  name = type(model).__name__
  kind = task_kinds.by_model_class(name)
  if kind is None or not kind.hf_architectures:
    raise _error("%s is not a bert_tf BERT model (BertEncoder, BertPretrainer, "
                 "BertClassifier, ...): nothing to write for transformers" % name)
  if kind.name == "pretraining" and getattr(model, "next_sentence", None) is None:
    return "BertForMaskedLM"
  return kind.hf_architectures[0]


def _array(variable, transpose: bool = False) -> np.ndarray:
  value = np.asarray(variable.numpy(), dtype=np.float32)
  return np.ascontiguousarray(value.T if transpose else value)


def transformers_tensors(model) -> Dict[str, np.ndarray]:
  """Every weight of ``model`` under transformers' name, in its layout.

  Inverse of the readers in :mod:`bert_tf.checkpoints`: the encoder by
  :func:`bert_tf.checkpoints.tf1_to_hf_name` (kernels [in, out] transposed
  to PyTorch's [out, in]; ``bert.`` prefixed except for a ``BertModel``; no
  pooler for the classes transformers builds without one, :data:`NO_POOLER`),
  the heads by ``HF_HEAD_NAMES`` (``cls.predictions.*``,
  ``cls.seq_relationship.*``), ``HF_CLASSIFIER_HEAD`` (``classifier.*``:
  sequence, token and multiple-choice classification, our ``output_weights``
  [L, H] layout) and ``HF_SQUAD_HEAD_NAMES`` (``qa_outputs.*`` [2, H]). The
  decoder of the masked LM is the tied word-embedding table, which
  transformers neither writes nor reads. Buffers (``position_ids``) are not
  weights.

  Source: transformers ``modeling_bert.py`` (``BertModel``,
  ``BertPreTrainingHeads``, ``BertFor*``), the keys its ``save_pretrained``
  writes.

  Args:
    model: one of our models (:func:`transformers_architecture`).

  Returns:
    ``{name: float32 C-contiguous np.ndarray}``.

  Raises:
    CheckpointError: another kind of model.
  """
  arch = transformers_architecture(model)
  encoder = presets.encoder_of(model)
  prefix = "" if arch == "BertModel" else "bert."
  out = {}
  for name, var in checkpoints.encoder_variables(encoder):
    if name.startswith("bert/pooler/") and arch in NO_POOLER:
      continue
    hf_name, transpose = checkpoints.tf1_to_hf_name(name)
    out[prefix + hf_name] = _array(var, transpose)
  if arch in ("BertForPreTraining", "BertForMaskedLM"):
    for name, var in checkpoints.pretrainer_variables(model):
      if name in checkpoints.HF_HEAD_NAMES:
        hf_name, transpose = checkpoints.HF_HEAD_NAMES[name]
        out[hf_name] = _array(var, transpose)
  elif arch == "BertForQuestionAnswering":
    for name, var in checkpoints.squad_head_variables(model):
      out[checkpoints.HF_SQUAD_HEAD_NAMES[name]] = _array(var)
  elif arch != "BertModel":
    head = model.classifier
    for ours, hf_name in checkpoints.HF_CLASSIFIER_HEAD.items():
      out[hf_name] = _array(getattr(head, ours))
  return out


def _label_names(model) -> List[str]:
  """The model's label names in id order; ``LABEL_i`` (transformers'
  default ``id2label``) for a model without names."""
  names = getattr(model, "label_names", None)
  return list(names) if names else ["LABEL_%d" % i for i in range(model.num_labels)]


def long_document_config(model) -> dict:
  """The ``config.json`` keys that keep how a classifier reads long
  documents, for bert_tf to read back (transformers ignores them: its
  ``BertForSequenceClassification`` reads one window).

  Args:
    model: one of our models.

  Returns:
    for a :class:`BertClassifier` whose preprocessor has a method other than
    ``head`` (:attr:`BertClassifier.long_document`), or with a window
    pooling other than the default: ``bert_tf_long_document`` (the
    settings' dict), ``bert_tf_max_seq_length`` (the length they were
    resolved for), ``bert_tf_window_pooling``, ``bert_tf_pool_logits``
    (:mod:`bert_tf.huggingface`'s key names); else ``{}``.
  """
  if not isinstance(model, models.BertClassifier):
    return {}
  settings = model.long_document
  reads = settings is not None and settings.method != "head"
  if not reads and model.window_pooling == "mean" and not model.pool_logits:
    return {}
  out = {huggingface.WINDOW_POOLING_KEY: model.window_pooling,
         huggingface.POOL_LOGITS_KEY: bool(model.pool_logits)}
  if reads:
    out[huggingface.LONG_DOCUMENT_KEY] = settings.to_dict()
    out[huggingface.MAX_SEQ_LENGTH_KEY] = model.preprocessor.max_seq_length
  return out


def long_document_note(model) -> Optional[str]:
  """The one line :func:`to_transformers` logs for a classifier that reads
  long documents (None for another model): transformers reads one window,
  the settings are kept for bert_tf."""
  keys = long_document_config(model)
  if huggingface.LONG_DOCUMENT_KEY not in keys:
    return None
  s = model.long_document
  what = {"windows": "windows (doc_stride=%d, max_eval_windows=%d, window_pooling=%s%s)" % (
      s.doc_stride, s.max_eval_windows, model.window_pooling,
      ", of logits" if model.pool_logits else ""),
          "head_tail": "head_tail (head_tokens=%d)" % s.head_tokens}.get(s.method, s.method)
  return ("to_transformers: this classifier reads long documents by long_document=%s; "
          "transformers will read one window (a text's first max_seq_length=%d tokens: "
          "tokenizer_config.json's model_max_length); the settings are kept for bert_tf "
          "in config.json's %s, which from_preset reads back" % (
              what, keys[huggingface.MAX_SEQ_LENGTH_KEY], huggingface.LONG_DOCUMENT_KEY))


def transformers_config(model, pad_token_id: int = 0) -> dict:
  """``config.json`` of ``model`` as transformers' ``BertConfig`` writes it.

  ``architectures`` and ``model_type`` (``bert``); the sizes, dropout rates
  and ``initializer_range`` of the model's :class:`BertConfig`;
  ``hidden_act`` translated (:data:`TRANSFORMERS_ACTIVATIONS`: our ``gelu``,
  the original's tanh approximation, is ``gelu_new``); ``layer_norm_eps``
  1e-12; a sequence classifier's ``id2label`` / ``label2id`` and
  ``problem_type`` (``single_label_classification``,
  ``multi_label_classification``, ``regression``); a token classifier's
  ``id2label`` / ``label2id`` (tag names). Unnamed labels are ``LABEL_i``,
  as transformers names them. A classifier that reads long documents adds
  :func:`long_document_config`'s keys.

  Source: transformers ``BertConfig`` / ``PretrainedConfig.to_dict``.

  Args:
    model: one of our models.
    pad_token_id: the vocab's ``[PAD]`` id.

  Returns:
    a JSON-ready dict.

  Raises:
    CheckpointError: another kind of model, or an activation transformers lacks.
  """
  arch = transformers_architecture(model)
  c = model.config
  if c.hidden_act not in TRANSFORMERS_ACTIVATIONS:
    raise _error("hidden_act %r has no transformers equivalent" % c.hidden_act)
  d = {
      "architectures": [arch],
      "model_type": "bert",
      "attention_probs_dropout_prob": c.attention_probs_dropout_prob,
      "classifier_dropout": None,
      "dtype": "float32",
      "hidden_act": TRANSFORMERS_ACTIVATIONS[c.hidden_act],
      "hidden_dropout_prob": c.hidden_dropout_prob,
      "hidden_size": c.hidden_size,
      "initializer_range": c.initializer_range,
      "intermediate_size": c.intermediate_size,
      "layer_norm_eps": 1e-12,
      "max_position_embeddings": c.max_position_embeddings,
      "num_attention_heads": c.num_attention_heads,
      "num_hidden_layers": c.num_hidden_layers,
      "pad_token_id": int(pad_token_id),
      "position_embedding_type": "absolute",
      "tie_word_embeddings": True,
      "type_vocab_size": c.type_vocab_size,
      "use_cache": True,
      "vocab_size": c.vocab_size,
  }
  if arch in ("BertForSequenceClassification", "BertForTokenClassification"):
    names = _label_names(model)
    d["id2label"] = {str(i): n for i, n in enumerate(names)}
    d["label2id"] = {n: i for i, n in enumerate(names)}
  if arch == "BertForSequenceClassification":
    d["problem_type"] = model.problem_type
  d.update(long_document_config(model))
  return d


def _preprocessor_of(preprocessor):
  """A :class:`BertPreprocessor` of a ``PreprocessorLayer`` or itself; None."""
  if preprocessor is None:
    return None
  return getattr(preprocessor, "bert_preprocessor", preprocessor)


def tokenizer_files(preprocessor, model_max_length: int) -> Dict[str, str]:
  """``vocab.txt``, ``tokenizer.json`` and ``tokenizer_config.json`` of a
  :class:`BertPreprocessor`, as transformers' ``BertTokenizer`` reads them.

  ``tokenizer.json`` is built with the ``tokenizers`` library as
  transformers' ``convert_slow_tokenizer.BertConverter`` builds it: a
  ``WordPiece`` model over the vocab (``[UNK]``, ``##``; at most
  :data:`MAX_INPUT_CHARS_PER_WORD` characters a word, the original's),
  ``BertNormalizer`` (``lowercase`` = ``do_lower_case``, ``strip_accents``
  null: it follows ``lowercase``, as the original strips accents exactly
  when it lower-cases; ``clean_text`` and ``handle_chinese_chars`` on),
  ``BertPreTokenizer``, the ``[CLS] A [SEP] B [SEP]`` template (segment ids
  0 and 1), the WordPiece decoder, and the special tokens. With
  ``preserve_unused_tokens`` the vocab's ``[unusedN]`` entries are added
  tokens, kept whole as the original's ``--preserve_unused_tokens`` keeps
  them.

  Args:
    preprocessor: a :class:`bert_tf.preprocessing.BertPreprocessor` (or
      its ``PreprocessorLayer``).
    model_max_length: the tokenizer's ``model_max_length`` (tokens).

  Returns:
    ``{file name: text}``.

  Raises:
    CheckpointError: the ``tokenizers`` package is missing, or the vocab
      repeats a token (one line naming it).
  """
  pre = _preprocessor_of(preprocessor)
  try:
    import tokenizers  # pylint: disable=g-import-not-at-top
    from tokenizers import decoders, models as tok_models, normalizers  # pylint: disable=g-import-not-at-top
    from tokenizers import pre_tokenizers, processors  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise _error("writing tokenizer.json needs the tokenizers package "
                 "(pip install tokenizers): %s" % e) from None
  lines = pre.vocab_lines()
  vocab = {}
  for index, token in enumerate(lines):
    if token in vocab:
      raise _error("the vocab repeats %r (lines %d and %d): transformers' tokenizer "
                   "needs one id per token" % (token, vocab[token] + 1, index + 1))
    vocab[token] = index
  tok = tokenizers.Tokenizer(tok_models.WordPiece(
      vocab, unk_token="[UNK]", continuing_subword_prefix="##",
      max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
  tok.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=None,
      lowercase=pre.do_lower_case)
  tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  tok.post_processor = processors.TemplateProcessing(
      single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
      special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
  tok.decoder = decoders.WordPiece(prefix="##")
  specials = {k: v for k, v in SPECIAL_TOKENS.items() if v in vocab}
  tok.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True)
                          for t in sorted(specials.values(), key=vocab.get)])
  if pre.preserve_unused_tokens:
    unused = [t for t in lines if re.fullmatch(r"\[unused\d+\]", t)]
    tok.add_tokens([tokenizers.AddedToken(t, normalized=False, special=False)
                    for t in unused])
  config = dict(
      tokenizer_class="BertTokenizer", do_lower_case=pre.do_lower_case,
      do_basic_tokenize=True, never_split=None, strip_accents=None,
      tokenize_chinese_chars=True, model_max_length=int(model_max_length),
      clean_up_tokenization_spaces=True, **specials)
  return {"vocab.txt": "".join(line + "\n" for line in lines),
          "tokenizer.json": tok.to_str(pretty=True),
          "tokenizer_config.json": json.dumps(config, indent=2, sort_keys=True) + "\n"}


def check_output_dir(output_dir: str, argument: str = "output") -> None:
  """Refuses an output directory that exists and is not empty (or is a file).

  Raises:
    CheckpointError: one line naming it.
  """
  if os.path.isdir(output_dir):
    if os.listdir(output_dir):
      raise _error("%s exists and is not empty: name a new directory (nothing was "
                   "written)" % output_dir, argument=argument)
  elif os.path.exists(output_dir):
    raise _error("%s exists and is not a directory (nothing was written)" % output_dir,
                 argument=argument)


def save_transformers(model, output_dir: str, preprocessor=None) -> str:
  """Writes ``model`` as a transformers directory (``save_pretrained``'s layout).

  ``config.json`` (:func:`transformers_config`), ``model.safetensors``
  (:func:`transformers_tensors`, written with the ``safetensors`` library,
  ``{"format": "pt"}`` metadata as transformers writes) and, with a
  preprocessor, the tokenizer files (:func:`tokenizer_files`;
  ``model_max_length`` = ``max_position_embeddings``, the most the model
  takes; for a classifier that reads long documents its preprocessor's
  ``max_seq_length``: transformers reads the first window). ``AutoModelFor<Task>.from_pretrained(output_dir)`` and
  ``AutoTokenizer.from_pretrained(output_dir)`` load it (transformers 5.x;
  ``vocab.txt`` serves 4.x's slow ``BertTokenizer`` too). Everything is
  written into a temporary sibling directory, renamed to ``output_dir``
  when whole: a failure leaves nothing under that name.

  Args:
    model: one of our models (:func:`transformers_architecture`), weights loaded.
    output_dir: a directory that does not exist or is empty.
    preprocessor: the tokenizer to write (a ``BertPreprocessor`` or
      ``PreprocessorLayer``); None: the model's own ``preprocessor``, else
      no tokenizer files.

  Returns:
    ``output_dir``.

  Raises:
    CheckpointError: an output directory that exists and is not empty,
      another kind of model, a vocab transformers cannot take.
  """
  check_output_dir(output_dir)
  pre = _preprocessor_of(preprocessor if preprocessor is not None
                         else getattr(model, "preprocessor", None))
  files = {"config.json": json.dumps(
      transformers_config(model, pre.pad_id if pre is not None else 0),
      indent=2, sort_keys=True) + "\n"}
  if pre is not None:
    keys = long_document_config(model)
    files.update(tokenizer_files(pre, keys.get(huggingface.MAX_SEQ_LENGTH_KEY,
                                               model.config.max_position_embeddings)))
  tensors = transformers_tensors(model)
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(output_dir)
  parent, base = os.path.split(output_dir)
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".%s." % base, suffix=".tmp", dir=parent)
  try:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 -> a plain mkdir's mode
    for name, text in files.items():
      with open(os.path.join(tmp, name), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    save_file(tensors, os.path.join(tmp, "model.safetensors"),
              metadata=SAFETENSORS_METADATA)
    check_output_dir(output_dir)  # still free: nothing appeared meanwhile
    if os.path.isdir(output_dir):
      os.rmdir(output_dir)
    os.rename(tmp, output_dir)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return output_dir


def _checkpoint_names(path: str) -> set:
  try:
    return {n for n, _ in tf.train.list_variables(path)}
  except (tf.errors.OpError, ValueError):
    return set()


def preset_task(loader) -> Tuple[Optional[str], bool]:
  """What a preset holds, from its own files: ``(task, nsp)``.

  ``task`` is one of :func:`task_names` or None (cannot be told); ``nsp`` says
  whether a ``pretraining`` preset has the next-sentence head.

  * a ``.keras`` file: its model class;
  * a Hugging Face directory: ``config.json``'s ``architectures``
    (``BertForMaskedLM``: pretraining without NSP), else its head tensors;
  * an original TF1 checkpoint: ``cls/predictions`` (pretraining),
    ``cls/squad`` (SQuAD), ``output_weights`` (a fine-tuned classifier), else
    the encoder;
  * one of our runs: its settings file (``classifier_config.json``, ...),
    else a pretraining run (with the heads its checkpoint holds).
  """
  if isinstance(loader, presets.KerasFileLoader):
    arch = transformers_architecture(loader.keras_model())
    return task_kinds.by_architecture(arch).name, arch == "BertForPreTraining"
  if isinstance(loader, presets.HuggingFaceLoader):
    arch = loader.architecture()
    tensors = loader.head_tensors()
    nsp = "cls.seq_relationship.weight" in tensors
    kind = task_kinds.by_architecture(arch) if arch else None
    if kind is not None:
      return kind.name, nsp
    if "qa_outputs.weight" in tensors:
      return "squad", False
    if "cls.predictions.bias" in tensors:
      return "pretraining", nsp
    return (None if "classifier.weight" in tensors else "encoder"), False
  kinds = run_dir.run_kinds(loader.run_dir)
  if isinstance(loader, presets.Tf1Loader):
    names = _checkpoint_names(loader.checkpoint)
    if len(kinds) == 1:
      return kinds[0], False
    if "cls/squad/output_weights" in names:
      return "squad", False
    if "output_weights" in names:
      return "classifier", False
    if "cls/predictions/output_bias" in names:
      return "pretraining", "cls/seq_relationship/output_weights" in names
    return "encoder", False
  if len(kinds) > 1:
    return None, False
  if kinds:
    return kinds[0], False
  names = _checkpoint_names(loader.checkpoint)
  if any(n.startswith("model/masked_lm/") for n in names):
    return "pretraining", any(n.startswith("model/next_sentence/") for n in names)
  return "encoder", False


def load_preset_model(preset, task: Optional[str] = None, config=None):
  """The model a preset holds (its heads and labels) and its tokenizer.

  Args:
    preset: any ``from_preset`` source: a run directory, a ``.keras`` file,
      a Hugging Face directory or ``hf://ORG/NAME[@REVISION]``, an original
      checkpoint.
    task: one of :func:`task_names`; None: the preset's own (:func:`preset_task`).
    config: a :class:`BertConfig` for a checkpoint without ``bert_config.json``.

  Returns:
    ``(model, preprocessor or None)``: the preset's vocab, casing and
    length; None when it has no vocab.

  Raises:
    CheckpointError: nothing loadable at ``preset`` (``argument="preset"``),
      a task that cannot be told (pass ``task``), ``pretraining`` asked of
      a preset without the masked-LM head; the preset's own errors.
  """
  tasks = task_names()
  if task is not None and task not in tasks:
    raise _error("task %r is not one of %s" % (task, ", ".join(tasks)), argument="task")
  try:
    loader = presets.get_preset_loader(preset)
  except errors.CheckpointError:
    if os.path.isfile(os.fspath(preset)):
      raise _error("%s is not a model: expected a run directory, a .keras file, a "
                   "Hugging Face directory (config.json + model.safetensors) or an "
                   "original checkpoint" % os.fspath(preset), argument="preset") from None
    raise
  own, nsp = preset_task(loader)
  if task is None and own is None:
    raise _error("%s: cannot tell its task (no architectures in config.json, no run "
                 "settings file); pass task (--task=%s)" % (preset, "|".join(tasks)),
                 argument="task")
  task = task or own
  if task == "pretraining" and own != "pretraining":
    raise _error("%s has no masked-LM head to write as BertForPreTraining (it holds "
                 "%s)" % (preset, own or "an unknown task"), argument="task")
  try:
    pre = loader.preprocessor(True)
  except errors.ConfigError:
    pre = None  # no vocab: the weights and config only
  if isinstance(loader, presets.KerasFileLoader) and task == own:
    return loader.keras_model(), pre
  cls = task_kinds.get(task).attribute("model_class")
  extra = {"nsp": nsp} if task == "pretraining" else {}
  if getattr(cls, "reads_long_documents", False) and pre is not None:
    # The preset's own preprocessor carries its long-document settings.
    extra["preprocessor"] = True
  return cls.from_preset(preset, config=config, **extra), pre


def to_transformers(model_or_preset, output_dir: str, task: Optional[str] = None,
                    preprocessor=None, config=None) -> str:
  """Writes one of our models, or a preset's, as a transformers directory.

  keras-hub's ``export_to_transformers`` for BERT: the directory that
  transformers 5.x ``AutoModelFor<Task>.from_pretrained`` and
  ``AutoTokenizer.from_pretrained`` load (:func:`save_transformers`), with
  the class of the model's task: ``BertForSequenceClassification``
  (``id2label``, ``label2id``, ``problem_type``),
  ``BertForTokenClassification`` (tag names), ``BertForQuestionAnswering``,
  ``BertForMultipleChoice``, ``BertForPreTraining`` / ``BertForMaskedLM``,
  ``BertModel``.

  A classifier that reads long documents (a preprocessor with a
  ``long_document`` method: a ``.keras`` file's, a ``run_classifier
  --long_document`` run's) keeps its settings in ``config.json``
  (:func:`long_document_config`), which ``from_preset`` reads back, and one
  warning line (:func:`long_document_note`) says that transformers will
  read one window.

  Args:
    model_or_preset: a model (``BertClassifier``, ...; weights loaded) or a
      preset (a run directory, a ``.keras`` file, a Hugging Face directory
      or ``hf://`` name, an original checkpoint; :func:`load_preset_model`).
    output_dir: a directory that does not exist or is empty.
    task: with a preset, one of :func:`task_names` (default: the preset's own).
    preprocessor: the tokenizer to write (default: the model's, or the
      preset's vocab and casing).
    config: with a preset, a :class:`BertConfig` for a checkpoint without
      ``bert_config.json``.

  Returns:
    one line: what was written where.

  Raises:
    CheckpointError: see :func:`save_transformers`, :func:`load_preset_model`;
      an output directory that exists and is not empty is refused before
      anything is read.
  """
  check_output_dir(output_dir)
  if isinstance(model_or_preset, (str, os.PathLike)):
    model, pre = load_preset_model(model_or_preset, task, config)
    preprocessor = preprocessor if preprocessor is not None else pre
  else:
    model = model_or_preset
  path = save_transformers(model, output_dir, preprocessor)
  note = long_document_note(model)
  if note:
    logging.warning("%s", note)
  arch = transformers_architecture(model)
  has_tokenizer = os.path.exists(os.path.join(path, "tokenizer.json"))
  from safetensors import safe_open  # pylint: disable=g-import-not-at-top
  with safe_open(os.path.join(path, "model.safetensors"), "np") as f:
    count = len(list(f.keys()))
  if not has_tokenizer:
    logging.warning("to_transformers: %s has no vocab: %s holds no tokenizer files "
                    "(pass a preprocessor / --vocab_file)", model_or_preset
                    if isinstance(model_or_preset, (str, os.PathLike)) else
                    type(model).__name__, path)
  labels = ""
  if arch in ("BertForSequenceClassification", "BertForTokenClassification"):
    labels = ", labels %s" % ", ".join(_label_names(model))
  return "%s (%d tensors%s%s) -> %s" % (
      arch, count, labels,
      ", tokenizer" if has_tokenizer else ", no tokenizer", path)
