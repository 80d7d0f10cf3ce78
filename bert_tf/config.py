"""``BertConfig``: the original ``bert_config.json``, read and written.

Source: google-research/bert ``modeling.BertConfig`` (11 keys). Presets follow
the paper (BASE, LARGE) and the original repository's 24 smaller models
(tiny, mini, small, medium).

``hidden_act`` keeps the original's meaning: ``"gelu"`` is the tanh
approximation that the original ``modeling.gelu`` computes. The exact (erf)
GELU, which Hugging Face configs call ``"gelu"``, is ``"gelu_exact"`` here;
:mod:`bert_tf.checkpoints` translates when it reads a Hugging Face config.
"""

import dataclasses
import json
import os

from bert_tf import io_utils
from bert_tf import errors

ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")


ConfigError = errors.ConfigError  # re-exported; defined in bert_tf.errors


@dataclasses.dataclass
class BertConfig:
  """Hyper-parameters of a BERT encoder (the original's 11 keys).

  Attributes:
    vocab_size: rows of the word-embedding table (int).
    hidden_size: H, width of every layer (int).
    num_hidden_layers: L, number of transformer blocks (int).
    num_attention_heads: A; must divide ``hidden_size`` (int).
    intermediate_size: width of the feed-forward layer, 4H in the paper.
    hidden_act: ``gelu`` (tanh approximation, the original's), ``gelu_exact``,
      ``relu``, ``tanh`` or ``linear``.
    hidden_dropout_prob: dropout on embeddings and block outputs (float).
    attention_probs_dropout_prob: dropout on attention probabilities (float).
    max_position_embeddings: longest sequence the model accepts (tokens).
    type_vocab_size: number of segment ids (2 in the released models).
    initializer_range: stddev of the TruncatedNormal initializer (0.02).

  Raises:
    ConfigError: from :meth:`validate` on inconsistent values.
  """

  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 16
  initializer_range: float = 0.02

  def validate(self, source="<config>"):
    """Raises ``ConfigError`` naming ``source`` if the values are inconsistent."""
    for name in ("vocab_size", "hidden_size", "num_hidden_layers",
                 "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size"):
      value = getattr(self, name)
      if not isinstance(value, int) or value <= 0:
        raise ConfigError("%s: %s must be a positive integer, got %r" %
                          (source, name, value))
    if self.hidden_size % self.num_attention_heads:
      raise ConfigError(
          "%s: hidden_size (%d) is not a multiple of num_attention_heads (%d)" %
          (source, self.hidden_size, self.num_attention_heads))
    if self.hidden_act not in ACTIVATIONS:
      raise ConfigError("%s: hidden_act %r is not one of %s" %
                        (source, self.hidden_act, ", ".join(ACTIVATIONS)))
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, name)
      if not 0.0 <= value < 1.0:
        raise ConfigError("%s: %s must be in [0, 1), got %r" %
                          (source, name, value))
    return self

  @classmethod
  def from_dict(cls, d, source="<dict>"):
    """Builds a config from a dict with the original's keys.

    Unknown keys are ignored (Hugging Face configs carry many); missing keys
    take the original's defaults, except ``vocab_size`` which is required.

    Raises:
      ConfigError: ``vocab_size`` missing, or inconsistent values.
    """
    if "vocab_size" not in d:
      raise ConfigError("%s: missing required key 'vocab_size'" % source)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in d.items() if k in names}
    return cls(**kwargs).validate(source)

  @classmethod
  def from_json_file(cls, path):
    """Reads an original ``bert_config.json``.

    Raises:
      ConfigError: naming ``path`` when it is missing, not JSON, or invalid.
    """
    try:
      with open(path, "r", encoding="utf-8") as f:
        d = json.load(f)
    except OSError as e:
      raise ConfigError("cannot read BERT config %r: %s" % (path, e)) from e
    except json.JSONDecodeError as e:
      raise ConfigError("BERT config %r is not valid JSON: %s" % (path, e)) from e
    if not isinstance(d, dict):
      raise ConfigError("BERT config %r must hold a JSON object" % path)
    return cls.from_dict(d, source=os.fspath(path))

  def to_dict(self):
    """The 11 original keys, in the original's order."""
    return dataclasses.asdict(self)

  def to_json_string(self):
    """JSON text as the original writes it (indent 2, sorted keys)."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def to_json_file(self, path):
    """Writes ``bert_config.json`` atomically (temporary name, then rename)."""
    io_utils.atomic_write_text(path, self.to_json_string())

  def get_config(self):
    """Keras-style alias of :meth:`to_dict` (the ``bert_config.json`` keys).

    A layer's ``get_config()`` stores this dict under ``"config"``;
    :func:`as_bert_config` turns it back into a ``BertConfig``.
    """
    return self.to_dict()

  @property
  def size_per_head(self):
    """``hidden_size // num_attention_heads``."""
    return self.hidden_size // self.num_attention_heads


def as_bert_config(value, source="<serialized config>"):
  """A :class:`BertConfig` from a ``BertConfig`` or its dict (``to_dict()``).

  The Keras layers of :mod:`bert_tf.modeling` accept either, so that
  ``from_config`` (which passes the dict from ``get_config``) rebuilds them.

  Example:
    >>> c = preset("tiny")
    >>> as_bert_config(c.to_dict()) == c
    True

  Args:
    value: ``BertConfig`` (returned as is) or a dict with the original keys.
    source: text naming where the dict came from, for errors.

  Returns:
    a validated :class:`BertConfig`.

  Raises:
    ConfigError: not a ``BertConfig`` or dict, or invalid values.
  """
  if isinstance(value, BertConfig):
    return value
  if isinstance(value, dict):
    return BertConfig.from_dict(value, source=source)
  raise ConfigError("%s: expected a BertConfig or a dict, got %s" %
                    (source, type(value).__name__))


# (L, H) of the released models; A = H / 64, intermediate = 4H.
_PRESET_SHAPES = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
    "large": (24, 1024),
}


def preset(name, vocab_size=30522, **overrides):
  """A named model size from the paper / the original repository.

  Args:
    name: ``tiny`` (L=2 H=128), ``mini`` (4, 256), ``small`` (4, 512),
      ``medium`` (8, 512), ``base`` (12, 768, A=12), ``large`` (24, 1024, A=16).
    vocab_size: vocabulary size.
    **overrides: any other ``BertConfig`` field.

  Raises:
    ConfigError: unknown ``name``.
  """
  if name not in _PRESET_SHAPES:
    raise ConfigError("unknown preset %r; choose one of %s" %
                      (name, ", ".join(_PRESET_SHAPES)))
  layers, hidden = _PRESET_SHAPES[name]
  kwargs = dict(vocab_size=vocab_size, hidden_size=hidden,
                num_hidden_layers=layers, num_attention_heads=hidden // 64,
                intermediate_size=4 * hidden, type_vocab_size=2)
  kwargs.update(overrides)
  return BertConfig(**kwargs).validate("preset %s" % name)


def check_vocab_size(num_tokens: int, config: "BertConfig", vocab_file: str,
                     argument: str = "vocab_file") -> None:
  """Refuses a vocab whose size is not the model's ``vocab_size``.

  A larger vocab makes ids past the embedding table (the original trains on
  NaNs); a smaller one is another model's vocab (a 5,000-line vocab for a
  30,522-token model tokenizes, then every id means something else). The
  original checked neither.

  Args:
    num_tokens: lines of ``vocab_file`` (token ids 0..num_tokens-1).
    config: the model's config.
    vocab_file: the file, for the message.
    argument: the flag to name.

  Raises:
    bert_tf.errors.VocabError: naming the file and both numbers.
  """
  if num_tokens != config.vocab_size:
    raise errors.VocabError(
        "vocab %r has %d tokens but the model's vocab_size is %d: pass the "
        "vocab.txt the model was trained with (or, for a new model, set "
        "vocab_size to %d in its bert_config.json)"
        % (vocab_file, num_tokens, config.vocab_size, num_tokens), argument=argument)
