"""Feature extraction: every token's hidden states from chosen encoder layers
(paper section 5.3, the feature-based approach; google-research/bert
``extract_features.py``).

Data is the original's, in Python (:mod:`bert_tf.data.extract`, TF-free):
``--input_file`` lines -> examples -> the original's tokenization and
truncation -> here the :class:`~bert_tf.modeling.BertEncoder` over batches
-> one JSON line per input line in the original's schema.

Differences from the original, none visible in the output file:

* no estimator: a ``tf.function`` over [B, S'] batches, S' the longest
  example of the batch (the original pads every example to
  ``max_seq_length``; padding is masked out, so values agree to float
  rounding, ~1e-7);
* examples are read in windows of ``batch_size * 16`` lines, sorted by
  length inside a window (fewer padded positions) and written back in input
  order; memory is bounded by the window, not the file (the original holds
  every feature in memory);
* ``--init_checkpoint`` also takes a Hugging Face directory, our runs and
  checkpoints and ``.keras`` files, through the preset loader every tool uses
  (:func:`bert_tf.modeling.presets.load_weights`).
"""

from __future__ import annotations

import itertools
import time
import types
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import tokenization
from bert_tf.data import extract
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import presets
from bert_tf.tasks import fine_tuning

WINDOW_BATCHES = 16


class FeatureExtractor:
  """Runs the encoder and returns chosen layers' outputs for each token.

  Args:
    encoder: a built :class:`~bert_tf.modeling.BertEncoder` with its weights.
    vocab_file: WordPiece vocab of the model.
    do_lower_case: uncased model.
    max_seq_length: tokens per example, ``[CLS]``/``[SEP]`` included
      (3 .. ``max_position_embeddings``).
    layers: layer indexes (``"-1,-2,-3,-4"`` or ints), Python indexing over
      the L blocks' outputs (-1 = last block = ``sequence_output``).
    batch_size: examples per encoder call.
    preserve_unused_tokens: the original's ``--preserve_unused_tokens``
      (vocab entries ``[unusedN]`` in the text stay whole tokens).

  Raises:
    ParamsError: bad ``layers``, ``max_seq_length`` or ``batch_size``.
    VocabError: unreadable vocab.
  """

  def __init__(self, encoder, vocab_file: str, do_lower_case: bool = True,
               max_seq_length: int = 128, layers: "str | Sequence[int]" = "-1,-2,-3,-4",
               batch_size: int = 32, preserve_unused_tokens: bool = False):
    config = encoder.config
    self.encoder = encoder
    self.layer_indexes = extract.parse_layers(layers, config.num_hidden_layers)
    if not 3 <= max_seq_length <= config.max_position_embeddings:
      raise errors.ParamsError(
          "max_seq_length must be in 3..%d (max_position_embeddings), got %d"
          % (config.max_position_embeddings, max_seq_length), argument="max_seq_length")
    if batch_size < 1:
      raise errors.ParamsError("batch_size must be positive, got %d" % batch_size,
                               argument="batch_size")
    self.max_seq_length = int(max_seq_length)
    self.batch_size = int(batch_size)
    self.vocab_file = vocab_file
    self.do_lower_case = bool(do_lower_case)
    self.preserve_unused_tokens = bool(preserve_unused_tokens)
    self.tokenizer = tokenization.FullTokenizer(
        vocab_file, do_lower_case=do_lower_case,
        preserve_unused_tokens=self.preserve_unused_tokens)
    positions = [i % config.num_hidden_layers for i in self.layer_indexes]
    spec = tf.TensorSpec([None, None], tf.int32)

    def run(input_ids, input_mask, segment_ids):
      out = encoder({"input_ids": input_ids, "input_mask": input_mask,
                     "segment_ids": segment_ids}, training=False)
      return tf.stack([out["encoder_outputs"][p] for p in positions], axis=0)
    self._run = tf.function(run, input_signature=[spec, spec, spec],
                            autograph=False, jit_compile=False)

  @classmethod
  def from_checkpoint(cls, init_checkpoint: str, bert_config_file: Optional[str] = None,
                      vocab_file: Optional[str] = None, **kwargs) -> "FeatureExtractor":
    """An extractor with the weights of any starting point: a Hugging Face
    directory or ``hf://`` name, an original TF1 checkpoint or release
    directory, one of our runs (``best/`` when kept, else the newest) or
    checkpoints, a ``.keras`` file.

    The config, vocab and casing come from the starting point's preset
    loader, the flags overriding, as for every training tool
    (:func:`bert_tf.tasks.fine_tuning.resolve_config_and_vocab`: ``do_lower_case``
    left at True takes a recorded casing); the vocab's size is checked
    against the config; the weights load by
    :func:`bert_tf.modeling.presets.load_weights`.

    Args:
      init_checkpoint: the starting point.
      bert_config_file, vocab_file: the flags (None: the starting point's).
      **kwargs: :class:`FeatureExtractor` arguments (``do_lower_case``, ...).

    Raises:
      CheckpointError, ConfigError, VocabError, InputError, ParamsError:
        naming the flag (``argument``).
    """
    params = types.SimpleNamespace(init_checkpoint=init_checkpoint,
                                   bert_config_file=bert_config_file, vocab_file=vocab_file,
                                   do_lower_case=kwargs.get("do_lower_case", True))
    config, vocab_file = fine_tuning.resolve_config_and_vocab(params)
    config_lib.check_vocab_size(len(tokenization.load_vocab(vocab_file)), config, vocab_file)
    kwargs["do_lower_case"] = params.do_lower_case
    encoder = encoder_lib.BertEncoder(config, name="bert")
    what = presets.load_weights(encoder, init_checkpoint)
    logging.info("extract_features: loaded %s", what)
    return cls(encoder, vocab_file, **kwargs)

  def features(self, example: "extract.InputExample") -> "extract.InputFeatures":
    """The original's tokenization and truncation of one example."""
    return extract.convert_example(example, self.max_seq_length, self.tokenizer)

  def compute(self, features: Sequence["extract.InputFeatures"]) -> np.ndarray:
    """Chosen layers' outputs of up to ``batch_size`` features.

    Returns:
      float32 [K, B, S', H]: K = len(layers) in ``layers`` order, S' = the
      longest feature's token count (row b is valid up to its own length).
    """
    width = max(len(f.input_ids) for f in features)
    ids = np.zeros([len(features), width], np.int32)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for b, f in enumerate(features):
      n = len(f.input_ids)
      ids[b, :n] = f.input_ids
      mask[b, :n] = 1
      types[b, :n] = f.input_type_ids
    return self._run(tf.constant(ids), tf.constant(mask), tf.constant(types)).numpy()

  def extract(self, examples: Iterable["extract.InputExample"]
              ) -> Iterator[Tuple["extract.InputFeatures", np.ndarray]]:
    """``(features, values)`` per example, in input order.

    ``values`` is float32 [K, n, H] for the example's n tokens. Examples are
    taken in windows of ``batch_size * 16``, batched by length inside a
    window.
    """
    it = iter(examples)
    while True:
      window = [self.features(e) for e in
                itertools.islice(it, self.batch_size * WINDOW_BATCHES)]
      if not window:
        return
      order = sorted(range(len(window)), key=lambda i: len(window[i].input_ids))
      results = [None] * len(window)
      for start in range(0, len(order), self.batch_size):
        chunk = order[start:start + self.batch_size]
        values = self.compute([window[i] for i in chunk])
        for b, i in enumerate(chunk):
          results[i] = values[:, b, :len(window[i].input_ids)]
      for f, v in zip(window, results):
        yield f, v

  def write_json(self, input_file: str, output_file: str,
                 progress: Optional[Callable[[int], None]] = None) -> int:
    """Writes ``output_file`` (JSON lines, the original's schema) atomically.

    Args:
      input_file: lines ``text_a`` or ``text_a ||| text_b`` (see
        :mod:`bert_tf.data.extract` for empty lines and errors).
      output_file: written under a temporary name and renamed when whole;
        on any error no ``output_file`` appears (an old one is untouched).
      progress: called with the number of lines written so far.

    Returns:
      the number of lines written (= input lines).

    Raises:
      InputError: bad input line (file and line named).
    """
    n = 0
    with io_utils.atomic_output(output_file) as tmp:
      with open(tmp, "w", encoding="utf-8") as f:
        for feat, values in self.extract(extract.iter_examples(input_file)):
          f.write(extract.feature_json(feat.unique_id, feat.tokens,
                                       self.layer_indexes, values) + "\n")
          n += 1
          if progress is not None:
            progress(n)
    return n


def extract_features(input_file: str, output_file: str, init_checkpoint: str,
                     bert_config_file: Optional[str] = None,
                     vocab_file: Optional[str] = None, layers="-1,-2,-3,-4",
                     max_seq_length: int = 128, batch_size: int = 32,
                     do_lower_case: bool = True,
                     preserve_unused_tokens: bool = False) -> int:
  """The whole ``extract_features.py`` job: load, extract, write JSON lines.

  Returns:
    the number of lines written.

  Raises:
    BertTfError subclasses naming the flag, file or line; nothing is
    written on error.
  """
  start = time.time()
  extractor = FeatureExtractor.from_checkpoint(
      init_checkpoint, bert_config_file, vocab_file, do_lower_case=do_lower_case,
      max_seq_length=max_seq_length, layers=layers, batch_size=batch_size,
      preserve_unused_tokens=preserve_unused_tokens)
  n = extractor.write_json(input_file, output_file)
  logging.info("extract_features: %d lines in %.1f s -> %s", n, time.time() - start,
               output_file)
  return n
