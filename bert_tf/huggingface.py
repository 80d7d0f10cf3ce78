"""Hugging Face BERT directories and the Hub cache, read without TensorFlow.

What transformers 4.x and 5.x (and sentence-transformers) write with
``save_pretrained``, read the way transformers' ``from_pretrained`` reads it:

* ``hf://ORG/NAME[@REVISION]`` -> the snapshot directory of that repo in the
  local Hugging Face cache (``HF_HUB_CACHE`` / ``HF_HOME``), through
  ``huggingface_hub.snapshot_download(..., local_files_only=True)``: never
  the network (:func:`resolve`);
* ``config.json``: ``model_type`` must be ``bert``; ``architectures``,
  ``id2label``, ``problem_type`` (:func:`read_config`, :func:`architecture`,
  :func:`label_names`);
* the weights, as a ``{PyTorch name: numpy array}`` mapping in PyTorch's
  layouts (:func:`read_tensors`, :class:`Tensors`: safetensors read lazily
  through ``safe_open``, each tensor when asked for): ``model.safetensors``, a sharded
  ``model.safetensors.index.json``, ``tf_model.h5`` of transformers 4.x's
  TensorFlow classes (read with h5py, renamed as transformers'
  ``convert_tf_weight_name_to_pt_weight_name`` does, kernels transposed),
  ``pytorch_model.bin`` (``torch.load(weights_only=True)`` only); legacy
  ``LayerNorm.gamma`` / ``.beta`` names become ``.weight`` / ``.bias`` as
  transformers' loader renames them;
* the tokenizer (:func:`read_tokenizer`): ``vocab.txt``, else
  ``tokenizer.json``'s WordPiece vocab; the casing from ``tokenizer.json``'s
  ``BertNormalizer`` or ``tokenizer_config.json``'s ``do_lower_case``;
  ``model_max_length``.

The PyTorch names are transformers' (``modeling_bert.py``):
``bert.embeddings.word_embeddings.weight``, ``bert.encoder.layer.3.attention.
self.query.weight`` [out, in], ``classifier.weight`` [L, H], ``qa_outputs.*``,
``cls.predictions.*``, ``cls.seq_relationship.*``; the table from our
original TF1 names to them is :func:`bert_tf.checkpoints.tf1_to_hf_name`.
"""

import collections.abc
import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from bert_tf import errors
from bert_tf import io_utils

SCHEME = "hf://"
CONFIG = "config.json"
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TF_H5 = "tf_model.h5"
PYTORCH_BIN = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"
# In the order transformers' from_pretrained prefers them.
WEIGHT_FILES = (SAFETENSORS, SAFETENSORS_INDEX, PYTORCH_BIN, PYTORCH_INDEX, TF_H5)
VOCAB = "vocab.txt"
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"

# transformers' PretrainedConfig.problem_type values (BertForSequenceClassification).
# Which task kind and model class read each BertFor* architecture is the kind
# record's (bert_tf.task_kinds.by_architecture).
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")
# config.json keys bert_tf writes for a classifier that reads long documents
# (transformers keeps unknown keys as config attributes and reads none of
# them: its model reads one window): the LongDocument settings' dict, the
# preprocessor's max_seq_length they were resolved for, and the model's
# window pooling (bert_tf.convert.long_document_config writes them).
LONG_DOCUMENT_KEY = "bert_tf_long_document"
MAX_SEQ_LENGTH_KEY = "bert_tf_max_seq_length"
WINDOW_POOLING_KEY = "bert_tf_window_pooling"
POOL_LOGITS_KEY = "bert_tf_pool_logits"


def _error(message: str, argument: Optional[str] = "preset") -> errors.CheckpointError:
  return errors.CheckpointError(message, argument=argument)


def parse_repo(preset: str) -> Tuple[str, Optional[str]]:
  """``hf://ORG/NAME[@REVISION]`` -> ``("ORG/NAME", REVISION or None)``.

  Raises:
    CheckpointError: not of that form (one line naming it).
  """
  body = preset[len(SCHEME):]
  repo, _, revision = body.partition("@")
  if not re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", repo) or (
      "@" in body and not revision):
    raise _error("%s: expected hf://ORG/NAME or hf://ORG/NAME@REVISION" % preset)
  return repo, revision or None


def cache_dir() -> str:
  """The Hugging Face hub cache: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
  ``~/.cache/huggingface/hub`` (huggingface_hub's ``constants``, read at call
  time so a changed environment counts)."""
  if os.environ.get("HF_HUB_CACHE"):
    return os.environ["HF_HUB_CACHE"]
  home = os.environ.get("HF_HOME") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
  return os.path.join(home, "hub")


def resolve(preset) -> str:
  """The local directory of a preset: ``hf://ORG/NAME[@REV]`` -> its cached
  snapshot; any other path as given.

  Source: ``huggingface_hub.snapshot_download(repo_id, revision=...,
  cache_dir=..., local_files_only=True)``, which reads ``refs/<revision>``
  (or takes a commit hash) and returns ``models--ORG--NAME/snapshots/<sha>/``
  without a network call.

  Args:
    preset: a path (str or PathLike) or ``hf://`` name.

  Returns:
    a path (str).

  Raises:
    CheckpointError: an ``hf://`` name that is malformed or not in the
      cache: one line naming the repo, the cache directory and
      ``hf download ORG/NAME`` (run where the Hub is reachable).
  """
  preset = os.fspath(preset)
  if not preset.startswith(SCHEME):
    return preset
  repo, revision = parse_repo(preset)
  cache = cache_dir()
  try:
    import huggingface_hub  # pylint: disable=g-import-not-at-top
    from huggingface_hub import errors as hub_errors  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise _error("%s: hf:// names are read from the Hugging Face cache through "
                 "huggingface_hub: pip install huggingface-hub" % preset) from None
  try:
    path = huggingface_hub.snapshot_download(
        repo, revision=revision, cache_dir=cache, local_files_only=True)
  except (hub_errors.LocalEntryNotFoundError, FileNotFoundError, ValueError,
          hub_errors.HFValidationError) as e:
    fill = "hf download %s%s" % (repo, " --revision %s" % revision if revision else "")
    raise _error("%s: %s%s is not in the Hugging Face cache %s (fill it where the Hub "
                 "is reachable: %s, then copy the cache or set HF_HUB_CACHE)"
                 % (preset, repo, "@" + revision if revision else "", cache, fill)) from e
  return str(path)


def is_hf_dir(path) -> bool:
  """True for a directory with ``config.json`` and one of :data:`WEIGHT_FILES`
  (an ``hf://`` name is resolved first: :func:`resolve` errors propagate)."""
  path = resolve(path)
  return (os.path.isdir(path) and os.path.exists(os.path.join(path, CONFIG))
          and any(os.path.exists(os.path.join(path, f)) for f in WEIGHT_FILES))


def read_config(model_dir: str) -> dict:
  """``config.json`` as a dict, checked to be a BERT's.

  Raises:
    CheckpointError: unreadable, not a JSON object, or ``model_type`` not
      ``bert`` (naming the file and the type).
  """
  path = os.path.join(model_dir, CONFIG)
  d = io_utils.read_json_object(path, _error)
  model_type = d.get("model_type", "bert")
  if model_type != "bert":
    raise _error("%s: model_type %r is not bert; bert_tf loads BERT models only "
                 "(architectures %s)" % (path, model_type, d.get("architectures")))
  return d


def architecture(hf_config: dict) -> Optional[str]:
  """The first of ``architectures`` (``"BertForSequenceClassification"``), or None."""
  archs = hf_config.get("architectures") or []
  return archs[0] if archs else None


def problem_type(hf_config: dict, num_labels: int) -> str:
  """``config.json``'s ``problem_type``, else transformers' inference for a
  sequence classifier: ``regression`` for one label, else single-label.

  Raises:
    CheckpointError: an unknown ``problem_type``.
  """
  pt = hf_config.get("problem_type")
  if pt is None:
    return "regression" if num_labels == 1 else "single_label_classification"
  if pt not in PROBLEM_TYPES:
    raise _error("config.json: problem_type %r is not one of %s" % (pt, ", ".join(PROBLEM_TYPES)))
  return pt


def long_document_settings(hf_config: dict) -> Tuple[Optional[dict], dict]:
  """What ``config.json`` records of how a classifier reads long documents.

  Returns:
    ``(settings, window)``: :data:`LONG_DOCUMENT_KEY`'s dict (the
    ``LongDocument`` fields) or None; ``{"window_pooling": str,
    "pool_logits": bool}`` of those recorded (possibly empty).

  Raises:
    CheckpointError: a recorded value of the wrong JSON type.
  """
  settings = hf_config.get(LONG_DOCUMENT_KEY)
  if settings is not None and not isinstance(settings, dict):
    raise _error("config.json: %s must be an object, got %r" % (LONG_DOCUMENT_KEY, settings))
  window = {}
  for key, name, kind in ((WINDOW_POOLING_KEY, "window_pooling", str),
                          (POOL_LOGITS_KEY, "pool_logits", bool)):
    if key in hf_config:
      if not isinstance(hf_config[key], kind):
        raise _error("config.json: %s must be a %s, got %r" % (
            key, kind.__name__, hf_config[key]))
      window[name] = hf_config[key]
  return settings, window


def label_names(hf_config: dict, num_labels: int) -> Optional[List[str]]:
  """``id2label`` names in id order when there are ``num_labels`` of them
  (transformers writes ``LABEL_i`` defaults: those are kept as names too)."""
  names = hf_config.get("id2label")
  if not isinstance(names, dict) or len(names) != num_labels:
    return None
  try:
    ordered = sorted(names.items(), key=lambda kv: int(kv[0]))
  except ValueError:
    return None
  if [int(k) for k, _ in ordered] != list(range(num_labels)):
    return None
  return [str(v) for _, v in ordered]


def _legacy_name(name: str) -> str:
  """transformers' load-time renames of old checkpoints: ``LayerNorm.gamma``
  -> ``.weight``, ``LayerNorm.beta`` -> ``.bias``."""
  if name.endswith(".gamma"):
    return name[:-len(".gamma")] + ".weight"
  if name.endswith(".beta"):
    return name[:-len(".beta")] + ".bias"
  return name


def tf_weight_name_to_pt(name: str) -> Tuple[str, bool]:
  """A transformers 4.x TF weight name -> ``(PyTorch name, transpose)``.

  Source: transformers 4.x ``modeling_tf_pytorch_utils.
  convert_tf_weight_name_to_pt_weight_name``: ``:0`` dropped, ``_._`` ->
  ``/``, a ``xxx___`` scope prefix dropped (``mlm___cls`` -> ``cls``), the
  model's own scope (``tf_bert_for_sequence_classification/``) dropped,
  ``kernel`` -> ``weight`` transposed, ``gamma``/``beta`` -> ``weight``/
  ``bias``, ``embeddings`` -> ``weight``.
  """
  name = name.replace(":0", "")
  name = re.sub(r"/[^/]*___([^/]*)/", r"/\1/", name)
  name = name.replace("_._", "/")
  name = re.sub(r"//+", "/", name)
  parts = name.split("/")[1:]  # the model's scope
  transpose = parts[-1] == "kernel"
  if parts[-1] in ("kernel", "gamma", "embeddings"):
    parts[-1] = "weight"
  if parts[-1] == "beta":
    parts[-1] = "bias"
  return ".".join(parts), transpose


def _read_h5(path: str) -> Dict[str, np.ndarray]:
  """``tf_model.h5`` (Keras 2 ``save_weights`` layout: per layer group, its
  ``weight_names`` attribute) as PyTorch names and layouts."""
  import h5py  # pylint: disable=g-import-not-at-top
  out = {}
  try:
    with h5py.File(path, "r") as f:
      layer_names = [n.decode() if isinstance(n, bytes) else n
                     for n in f.attrs.get("layer_names", list(f.keys()))]
      for layer in layer_names:
        group = f[layer]
        for wn in group.attrs.get("weight_names", []):
          wn = wn.decode() if isinstance(wn, bytes) else wn
          pt, transpose = tf_weight_name_to_pt(wn)
          value = np.asarray(group[wn])
          out[pt] = np.ascontiguousarray(value.T) if transpose else value
  except (OSError, KeyError) as e:
    raise _error("cannot read %s: %s (a truncated or not a Keras .h5 file?)"
                 % (path, errors.first_line(e, type(e).__name__))) from e
  return out


class Tensors(collections.abc.Mapping):
  """The tensors of one Hugging Face weight file (or sharded set), by
  PyTorch name: a read-only mapping whose values are read on access.

  keras-hub's shape (``keras_hub/src/utils/transformers/safetensor_utils.py``):
  a safetensors file is opened once with ``safetensors.safe_open`` (its
  header read, the data memory-mapped) and each tensor is read when asked
  for, so the names and a head's presence cost no tensor reads and every
  tensor is read once per load. Other formats (``tf_model.h5``,
  ``pytorch_model.bin``) are read whole once, as their libraries read them.

  Args:
    path: the file named in messages (the weight file or the shard index).
    getters: ``{name: () -> np.ndarray}``.

  Example::

    tensors = read_tensors("all-MiniLM-L6-v2")[0]
    "classifier.bias" in tensors          # no tensor read
    tensors["embeddings.word_embeddings.weight"].shape   # (30522, 384)
  """

  def __init__(self, path: str, getters: Dict[str, Callable[[], np.ndarray]]):
    self.path = path
    self._getters = getters

  def __getitem__(self, name: str) -> np.ndarray:
    try:
      get = self._getters[name]
    except KeyError:
      raise KeyError(name) from None
    return get()

  def __contains__(self, name) -> bool:
    return name in self._getters

  def __iter__(self) -> Iterator[str]:
    return iter(self._getters)

  def __len__(self) -> int:
    return len(self._getters)


def _eager(values: Dict[str, np.ndarray]) -> Dict[str, Callable[[], np.ndarray]]:
  return {k: (lambda v=v: v) for k, v in values.items()}


def _read_safetensors(path: str) -> Dict[str, Callable[[], np.ndarray]]:
  """A safetensors file opened once (``safe_open``): ``{name: reader}``."""
  from safetensors import safe_open  # pylint: disable=g-import-not-at-top
  if not os.path.exists(path):
    raise _error("%s: missing (the weights file)" % path)

  def unreadable(e):
    return _error("cannot read %s: %s (truncated or not a safetensors file?)"
                  % (path, errors.first_line(e, type(e).__name__)))
  try:
    handle = safe_open(path, framework="np")
    names = list(handle.keys())
  except Exception as e:  # pylint: disable=broad-except  # safetensors raises several types
    raise unreadable(e) from e

  def read(name):
    try:
      return handle.get_tensor(name)
    except Exception as e:  # pylint: disable=broad-except
      raise unreadable(e) from e
  return {n: functools.partial(read, n) for n in names}


def _read_torch(path: str) -> Dict[str, np.ndarray]:
  """``pytorch_model.bin`` by ``torch.load(weights_only=True)``: tensors only,
  no other object is unpickled."""
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise _error("%s: reading pytorch_model.bin needs PyTorch (pip install torch); or "
                 "convert it where PyTorch is installed: transformers' "
                 "AutoModel.from_pretrained(DIR).save_pretrained(DIR) writes "
                 "model.safetensors" % path) from None
  try:
    state = torch.load(path, map_location="cpu", weights_only=True)
  except Exception as e:  # pylint: disable=broad-except  # torch raises several types
    raise _error("cannot read %s with torch.load(weights_only=True): %s"
                 % (path, errors.first_line(e, type(e).__name__)[:300])) from e
  if not isinstance(state, dict):
    raise _error("%s: not a state dict of tensors" % path)
  return {k: v.detach().float().numpy() if v.is_floating_point() else v.numpy()
          for k, v in state.items() if hasattr(v, "detach")}


def _read_index(path: str, reader) -> Dict[str, Callable[[], np.ndarray]]:
  """A sharded checkpoint: ``weight_map`` {name: shard file} beside ``path``;
  ``reader(shard) -> {name: reader}``."""
  try:
    with open(path, encoding="utf-8") as f:
      weight_map = json.load(f)["weight_map"]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise _error("cannot read %s: %s (expected a weight_map)" % (path, e)) from e
  out = {}
  for shard in sorted(set(weight_map.values())):
    shard_path = os.path.join(os.path.dirname(path), shard)
    if not os.path.exists(shard_path):
      raise _error("%s names shard %s, which is missing" % (path, shard_path))
    out.update(reader(shard_path))
  missing = sorted(set(weight_map) - set(out))
  if missing:
    raise _error("%s: the shards lack %d of the tensors it lists (%s)"
                 % (path, len(missing), ", ".join(missing[:3])))
  return out


def weights_file(model_dir: str) -> str:
  """The weight file :func:`read_tensors` reads (the first of :data:`WEIGHT_FILES`).

  Raises:
    CheckpointError: none of them.
  """
  for name in WEIGHT_FILES:
    path = os.path.join(model_dir, name)
    if os.path.exists(path):
      return path
  raise _error("%s has none of %s" % (model_dir, ", ".join(WEIGHT_FILES)))


def read_tensors(model_dir: str) -> Tuple[Tensors, str]:
  """Every tensor of a Hugging Face directory, by PyTorch name and layout.

  Args:
    model_dir: a local directory (:func:`resolve` an ``hf://`` name first).

  Returns:
    ``(tensors, path of the file read)``: a :class:`Tensors` mapping
    (safetensors read lazily, each tensor on access); legacy
    ``gamma``/``beta`` names renamed (:func:`_legacy_name`).

  Raises:
    CheckpointError: no weight file, a missing shard, a truncated or
      unreadable file (a safetensors tensor: when it is read), a
      ``pytorch_model.bin`` without PyTorch.
  """
  path = weights_file(model_dir)
  name = os.path.basename(path)
  if name == SAFETENSORS:
    getters = _read_safetensors(path)
  elif name == SAFETENSORS_INDEX:
    getters = _read_index(path, _read_safetensors)
  elif name == PYTORCH_BIN:
    getters = _eager(_read_torch(path))
  elif name == PYTORCH_INDEX:
    getters = _read_index(path, lambda shard: _eager(_read_torch(shard)))
  else:
    getters = _eager(_read_h5(path))
  return Tensors(path, {_legacy_name(k): v for k, v in getters.items()}), path


@dataclasses.dataclass(frozen=True)
class Tokenizer:
  """A Hugging Face BERT tokenizer's settings, as bert_tf's preprocessor takes them.

  Attributes:
    vocab: the WordPiece tokens in id order.
    vocab_file: ``vocab.txt`` of the directory, or None (the vocab came from
      ``tokenizer.json``; :func:`vocab_file` writes it out).
    do_lower_case: lower-case and strip accents.
    model_max_length: ``tokenizer_config.json``'s, or None.
    source: the file the vocab came from.
  """
  vocab: Tuple[str, ...]
  vocab_file: Optional[str]
  do_lower_case: bool
  model_max_length: Optional[int]
  source: str


def _read_json(path: str) -> Optional[dict]:
  return io_utils.read_json_object(
      path, lambda message: _error(message, argument="preprocessor"), missing_ok=True)


def _normalizer_case(normalizer: Optional[dict], path: str) -> Optional[bool]:
  """``do_lower_case`` of a ``BertNormalizer`` (None: no normalizer).

  Raises:
    CheckpointError: settings the preprocessor does not have
      (``strip_accents`` other than ``lowercase``, ``clean_text`` or
      ``handle_chinese_chars`` off, another normalizer type).
  """
  if normalizer is None:
    return None
  if normalizer.get("type") != "BertNormalizer":
    raise _error("%s: normalizer %r is not BERT's BertNormalizer; bert_tf reads BERT "
                 "WordPiece tokenizers only" % (path, normalizer.get("type")),
                 argument="preprocessor")
  lower = bool(normalizer.get("lowercase", True))
  strip = normalizer.get("strip_accents")
  for key, value, want in (("strip_accents", lower if strip is None else bool(strip), lower),
                           ("clean_text", bool(normalizer.get("clean_text", True)), True),
                           ("handle_chinese_chars",
                            bool(normalizer.get("handle_chinese_chars", True)), True)):
    if value != want:
      raise _error("%s: BertNormalizer %s=%s with lowercase=%s has no bert_tf "
                   "preprocessor equivalent (the original BERT strips accents exactly "
                   "when it lower-cases, always cleans text and spaces CJK)"
                   % (path, key, normalizer.get(key), lower), argument="preprocessor")
  return lower


def read_tokenizer(model_dir: str) -> Optional[Tokenizer]:
  """The directory's BERT tokenizer, or None when it has neither
  ``vocab.txt`` nor ``tokenizer.json``.

  ``vocab.txt`` when present (one token per line, id = line), else
  ``tokenizer.json``'s ``model.vocab`` (token -> id, ids 0..V-1). The casing:
  ``tokenizer.json``'s ``BertNormalizer`` ``lowercase`` (``strip_accents``
  null follows it), else ``tokenizer_config.json``'s ``do_lower_case``
  (True without one), as transformers' ``BertTokenizerFast`` builds it.

  Raises:
    CheckpointError: a ``tokenizer.json`` that is not BERT WordPiece (another
      model type, continuation prefix, normalizer or pre-tokenizer), a vocab
      whose ids have gaps; one line naming the file.
  """
  tok_json_path = os.path.join(model_dir, TOKENIZER_JSON)
  tok_json = _read_json(tok_json_path)
  tok_config = _read_json(os.path.join(model_dir, TOKENIZER_CONFIG)) or {}
  vocab_path = os.path.join(model_dir, VOCAB)
  lower = None
  vocab = None
  if tok_json is not None:
    model = tok_json.get("model") or {}
    if model.get("type") != "WordPiece":
      raise _error("%s: model type %r is not BERT WordPiece; bert_tf reads WordPiece "
                   "tokenizers only" % (tok_json_path, model.get("type")),
                   argument="preprocessor")
    if model.get("continuing_subword_prefix", "##") != "##":
      raise _error("%s: continuing_subword_prefix %r is not BERT's '##'"
                   % (tok_json_path, model.get("continuing_subword_prefix")),
                   argument="preprocessor")
    pre = tok_json.get("pre_tokenizer")
    if pre is not None and pre.get("type") != "BertPreTokenizer":
      raise _error("%s: pre_tokenizer %r is not BERT's BertPreTokenizer"
                   % (tok_json_path, pre.get("type")), argument="preprocessor")
    lower = _normalizer_case(tok_json.get("normalizer"), tok_json_path)
    table = model.get("vocab") or {}
    vocab = [None] * len(table)
    for token, index in table.items():
      if not isinstance(index, int) or not 0 <= index < len(table) or vocab[index] is not None:
        raise _error("%s: the WordPiece vocab's ids are not 0..%d" % (
            tok_json_path, len(table) - 1), argument="preprocessor")
      vocab[index] = token
  if os.path.exists(vocab_path):
    with open(vocab_path, encoding="utf-8") as f:
      vocab = [line.rstrip("\n").rstrip("\r") for line in f]
    while vocab and not vocab[-1]:
      vocab.pop()
    source = vocab_path
  elif vocab is None:
    return None
  else:
    source = tok_json_path
  if lower is None:
    lower = bool(tok_config.get("do_lower_case", True))
  max_len = tok_config.get("model_max_length")
  max_len = int(max_len) if isinstance(max_len, (int, float)) and max_len < 1e9 else None
  return Tokenizer(tuple(vocab), vocab_path if source == vocab_path else None, lower,
                   max_len, source)


def vocab_file(tokenizer: Tokenizer) -> str:
  """A ``vocab.txt`` path for ``tokenizer``: its own, else the ``tokenizer.json``
  vocab written once (content-addressed, renamed when whole) under the
  temporary directory, where the preprocessor, a run directory's copy and
  a SavedModel's asset read it. The Hub cache is never written to."""
  if tokenizer.vocab_file:
    return tokenizer.vocab_file
  text = "\n".join(tokenizer.vocab) + "\n"
  digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
  d = os.path.join(tempfile.gettempdir(), "bert_tf-hf-vocab")
  path = os.path.join(d, "%s-%s" % (digest, VOCAB))
  if not os.path.exists(path):
    os.makedirs(d, exist_ok=True)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, path)
  return path
