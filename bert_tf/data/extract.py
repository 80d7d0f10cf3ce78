"""Feature-extraction input and output, without TensorFlow (paper section 5.3).

The pure half of google-research/bert ``extract_features.py``:

* :func:`read_examples` - the ``--input_file`` lines: ``text_a`` or
  ``text_a ||| text_b`` (the original's regex ``^(.*) \\|\\|\\| (.*)$`` after
  ``str.strip()``);
* :func:`convert_example` / :func:`convert_examples_to_features` - the
  original's ``convert_examples_to_features``: the reference
  :class:`~bert_tf.tokenization.FullTokenizer`, ``_truncate_seq_pair``
  (longest first, ties pop ``text_b``), ``[CLS] a [SEP] (b [SEP])``;
* :func:`feature_json` - one output line in the original's JSON schema
  (``linex_index``, ``features[]`` of ``{"token", "layers": [{"index",
  "values"}]}``, values ``round(float(x), 6)``).

Defined behaviour where the original is silent or fails:

* a line with more than one ``|||`` -> :class:`~bert_tf.errors.InputError`
  naming the file and the 1-based line (the original silently splits at the
  last ``" ||| "``);
* an empty (or blank) line is kept, as in the original: it is an example
  whose ``text_a`` is ``""``, output as the two tokens ``[CLS]`` ``[SEP]``
  under its own ``linex_index`` (the line counter keeps counting);
* invalid UTF-8 -> :class:`~bert_tf.errors.InputError` naming file and line
  (the original raises ``UnicodeDecodeError``);
* lines end at ``\\n`` only (as ``tf.gfile.GFile.readline``); ``\\r`` and
  other surrounding whitespace are removed by ``str.strip()``.

TF-free: imports neither TensorFlow nor Keras.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from typing import Iterator, List, Optional, Sequence

import numpy as np

from bert_tf import errors
from bert_tf import tokenization

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")
SEPARATOR = "|||"


@dataclasses.dataclass
class InputExample:
  """One ``--input_file`` line (original ``extract_features.InputExample``).

  Attributes:
    unique_id: 0-based line number (the output's ``linex_index``).
    text_a: first segment (``""`` for an empty line).
    text_b: second segment, or None.
  """
  unique_id: int
  text_a: str
  text_b: Optional[str] = None


@dataclasses.dataclass
class InputFeatures:
  """The model inputs of one example (original ``extract_features.InputFeatures``).

  Attributes:
    unique_id: the example's ``unique_id``.
    tokens: word pieces with ``[CLS]``/``[SEP]``; length n <= max_seq_length.
    input_ids, input_type_ids: int lists of length n (not padded: the
      original pads to ``max_seq_length`` with 0; :func:`pad` does).
  """
  unique_id: int
  tokens: List[str]
  input_ids: List[int]
  input_type_ids: List[int]


def parse_line(line: str, unique_id: int, source: str = "<input>",
               line_number: Optional[int] = None) -> InputExample:
  """One stripped-or-not input line -> :class:`InputExample`.

  Args:
    line: the text of the line, without its ``\\n``.
    unique_id: the example's id (``linex_index``).
    source, line_number: for the error message (file and 1-based line).

  Raises:
    InputError: the line holds more than one ``|||``.
  """
  line = line.strip()
  if line.count(SEPARATOR) > 1:
    raise errors.InputError(
        "%s:%d: more than one '|||' on the line; a line is 'text_a' or "
        "'text_a ||| text_b'" % (source, unique_id + 1 if line_number is None
                                 else line_number), argument="input_file")
  m = _PAIR.match(line)
  if m is None:
    return InputExample(unique_id, line, None)
  return InputExample(unique_id, m.group(1), m.group(2))


def iter_examples(input_file: str) -> Iterator[InputExample]:
  """Streams the examples of ``input_file`` (one per line; see module doc).

  Raises:
    InputError: a line with more than one ``|||``, or invalid UTF-8 (naming
      the file and line); the file does not exist.
  """
  try:
    f = open(input_file, "rb")
  except OSError as e:
    raise errors.InputError("%s: %s" % (input_file, e.strerror or e),
                            argument="input_file") from e
  with f:
    for i, raw in enumerate(_lines(f)):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise errors.InputError("%s:%d: invalid UTF-8 (%s)" % (input_file, i + 1, e),
                                argument="input_file") from e
      yield parse_line(line, i, input_file, i + 1)


def _lines(f) -> Iterator[bytes]:
  """The lines of a binary file split at ``\\n`` only (``readline`` of
  ``tf.gfile.GFile``); a last line without ``\\n`` is kept, nothing after a
  final ``\\n`` is a line."""
  for raw in f:  # binary iteration splits at b"\n" only
    yield raw[:-1] if raw.endswith(b"\n") else raw


def read_examples(input_file: str) -> List[InputExample]:
  """All examples of ``input_file`` (original ``extract_features.read_examples``).

  Raises:
    InputError: see :func:`iter_examples`.
  """
  return list(iter_examples(input_file))


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
  """Original ``_truncate_seq_pair``: pops the end of the longer list (ties:
  ``tokens_b``) in place until the total is at most ``max_length``."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def convert_example(example: InputExample, seq_length: int,
                    tokenizer: "tokenization.FullTokenizer") -> InputFeatures:
  """One example -> :class:`InputFeatures` exactly as the original's
  ``convert_examples_to_features`` (a ``text_b`` that tokenizes to nothing
  counts as absent: no second ``[SEP]``, ``seq_length - 2`` truncation).

  Raises:
    ParamsError: ``seq_length`` < 3.
  """
  if seq_length < 3:
    raise errors.ParamsError("max_seq_length must be at least 3, got %d" % seq_length,
                             argument="max_seq_length")
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  if tokens_b:
    truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)
  elif len(tokens_a) > seq_length - 2:
    tokens_a = tokens_a[:seq_length - 2]
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  type_ids = [0] * len(tokens)
  if tokens_b:
    tokens += tokens_b + ["[SEP]"]
    type_ids += [1] * (len(tokens_b) + 1)
  return InputFeatures(example.unique_id, tokens,
                       tokenizer.convert_tokens_to_ids(tokens), type_ids)


def convert_examples_to_features(examples: Sequence[InputExample], seq_length: int,
                                 tokenizer) -> List[InputFeatures]:
  """Original ``extract_features.convert_examples_to_features`` (unpadded)."""
  return [convert_example(e, seq_length, tokenizer) for e in examples]


def parse_layers(layers: "str | Sequence[int]", num_hidden_layers: int) -> List[int]:
  """``--layers`` (``"-1,-2,-3,-4"`` or ints) -> list of layer indexes.

  Python list indexing over the L encoder layers, as the original's
  ``all_layers[layer_index]``: -L .. L-1 (0 = the first block's output).

  Raises:
    ParamsError: not integers, empty, or out of range (the original fails
      with ``IndexError``).
  """
  if isinstance(layers, str):
    items = [x.strip() for x in layers.split(",") if x.strip()]
  else:
    items = list(layers)
  try:
    out = [int(x) for x in items]
  except (TypeError, ValueError) as e:
    raise errors.ParamsError("layers must be comma-separated integers, got %r"
                             % (layers,), argument="layers") from e
  if not out:
    raise errors.ParamsError("layers is empty", argument="layers")
  bad = [i for i in out if not -num_hidden_layers <= i < num_hidden_layers]
  if bad:
    raise errors.ParamsError(
        "layers %s out of range for a model with %d layers (valid: %d..%d)"
        % (",".join(map(str, bad)), num_hidden_layers, -num_hidden_layers,
           num_hidden_layers - 1), argument="layers")
  return out


def round6(values: np.ndarray) -> np.ndarray:
  """float64 array equal, element for element, to ``round(float(x), 6)``.

  Vectorized form of the original's per-value Python rounding (8x faster),
  bit-identical for float32 (and float16) input: a float32 has 24
  significant bits and 10**6 = 2**6 * 15625 needs 14, so ``x * 1e6`` is
  exact in float64; ``np.rint`` then rounds it to the nearest integer q,
  ties to even, as Python's correctly rounded ``round`` does; and ``q / 1e6``
  is one IEEE division, the double nearest to q * 10**-6, which is what
  ``round`` returns. Signed zeros agree too. Not exact for float64 input
  (``x * 1e6`` may round): such input is first cast to float32 here, as the
  model's outputs are float32.
  """
  x = np.asarray(values)
  if x.dtype not in (np.float32, np.float16):
    x = x.astype(np.float32)
  return np.rint(x.astype(np.float64) * 1e6) / 1e6


def feature_json(unique_id: int, tokens: Sequence[str], layer_indexes: Sequence[int],
                 layer_values: Sequence) -> str:
  """One output line (without ``\\n``) in the original's schema and number format.

  Args:
    unique_id: ``linex_index``.
    tokens: the n tokens of the example.
    layer_indexes: the ``--layers`` values, in order.
    layer_values: per layer index, a float array [n', H] with n' >= n
      (rows beyond n are ignored); float32 values are rounded exactly as
      the original's ``round(float(x), 6)`` (see :func:`round6`).

  Returns:
    ``json.dumps`` of ``{"linex_index", "features": [{"token", "layers":
    [{"index", "values"}]}]}`` (keys in this order).
  """
  rows = [round6(np.asarray(values)[:len(tokens)]).tolist() for values in layer_values]
  features = []
  for i, token in enumerate(tokens):
    features.append(collections.OrderedDict(
        token=token,
        layers=[collections.OrderedDict(index=index, values=rows[j][i])
                for j, index in enumerate(layer_indexes)]))
  return json.dumps(collections.OrderedDict(linex_index=unique_id,
                                            features=features))
