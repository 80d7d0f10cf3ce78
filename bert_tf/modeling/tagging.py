"""Token tagging (NER, paper section 4.3 / Figure 4d): the model and the
in-graph word -> word-piece -> window pipeline.

* :class:`BertTokenClassifier`: encoder + dropout + one dense layer applied
  to every position's final hidden state (Hugging Face
  ``BertForTokenClassification``: ``classifier.weight`` [L, H],
  ``classifier.bias`` [L]; ours ``classifier/output_weights`` [L, H],
  ``classifier/output_bias`` [L], the original's head names).
* :class:`TaggingPreprocessor`: words -> word pieces (the project's
  :class:`bert_tf.preprocessing.BertPreprocessor`, each word tokenized on
  its own) -> windows of at most ``max_seq_length - 2`` pieces ->
  ``[CLS] window [SEP]`` features; per-word logits back from the windows;
  entity spans from tag ids (conlleval's chunk rules) in the graph. The
  task (training, dev, test) and the SavedModel (:mod:`bert_tf.export.tagging`)
  run this one implementation.

The paper's recipe (section 4.3): "we use the representation of the first
sub-token as the input to the token-level classifier over the NER label
set"; the other pieces of a word carry no label (ignored by the loss) and
are not read at prediction.

**Windows** (sentences longer than ``max_seq_length - 2`` pieces are split,
never cut): ``m = max_seq_length - 2`` pieces per window, window ``k``
starts at piece ``k * min(m, doc_stride)``, the last window is the first
that reaches the end of the sentence (the original ``run_squad.py`` doc-stride
loop with an empty question). Windows may start inside a word: pieces
are what is windowed. Every window is a training feature (a first piece
in two windows is labeled in both). At prediction a word takes the logits
of its first piece in the window where that piece has the most context:
``token_is_max_context`` of ``run_squad.py`` (largest ``min(left, right) +
0.01 * window_length``, the first window on ties).

A word with no word piece (only characters the tokenizer deletes, e.g. a
zero-width space) is given the single piece ``[UNK]`` so that every word
gets a prediction.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

import tensorflow as tf
import tensorflow_text as text

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import huggingface
from bert_tf import errors
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling import models
from bert_tf.modeling import presets
from bert_tf.modeling import task_model

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
# Hugging Face BertForTokenClassification head -> our head variables (no
# transpose: classifier.weight is [L, H], our output_weights too).
HF_HEAD = checkpoints.HF_CLASSIFIER_HEAD
IGNORE = -1  # label id of positions outside the loss ([CLS], [SEP], padding, non-first pieces)
# A tag's prefix as a code (label_tables), for conlleval's chunk rules in graph.
PREFIX_O, PREFIX_B, PREFIX_I, PREFIX_E, PREFIX_S = 0, 1, 2, 3, 4
PREFIX_CODES = {"O": PREFIX_O, "B": PREFIX_B, "I": PREFIX_I, "E": PREFIX_E, "S": PREFIX_S}
# Python str.split()'s whitespace (the split the CoNLL reader guarantees for
# training words): \t-\r, \x1c-\x20, \x85 and Unicode Z*.
WHITESPACE = r"[\t-\r\x{1c}-\x{20}\x{85}\p{Z}]+"


def load_hf_tagging_head(model: "BertTokenClassifier",
                         model_dir: "str | huggingface.Tensors") -> bool:
  """Loads a Hugging Face ``BertForTokenClassification`` head (``classifier``).

  Returns:
    True when the directory had the head, False when it has none.

  Raises:
    CheckpointError: half a head or a shape mismatch (another label count).
  """
  return checkpoints.load_hf_dense_head(model.classifier, model_dir,
                                        "token-classification head",
                                        "%d labels" % model.num_labels)


# What from_preset and --init_checkpoint read beyond the encoder (see
# presets.Task): the head of a Hugging Face BertForTokenClassification (L
# from classifier.bias), the labels of a run_ner run (the ner kind's
# settings file); the pooler is not read.
TAGGING_TASK = presets.Task(
    "tagging", kind="ner", head_name="the token-classification head",
    hf_optional=("bert/pooler/",),
    load_hf_head=load_hf_tagging_head, hf_num_labels=HF_HEAD["output_bias"],
    hf_head=tuple(HF_HEAD.values()))


@bert_layers.serializable
class BertTokenClassifier(models.TextInputsMixin, task_model.TaskModel):
  """Encoder + dropout + a dense layer over every position (Figure 4d).

  Sub-layers ``bert`` (:class:`BertEncoder`), ``dropout``
  (``hidden_dropout_prob``), ``classifier`` (:class:`DenseHead`:
  ``output_weights`` [L, H] TruncatedNormal(initializer_range),
  ``output_bias`` [L] zeros). Saves to ``.keras``.

  Args:
    config: a :class:`bert_tf.config.BertConfig` or its dict.
    num_labels: L, the number of tags.
    skip_padding: True (default): the encoder's row-wise steps skip the
      padding positions (``BertEncoder(..., skip_padding=True)``); the
      logits at the tokens equal the padded computation's up to float
      summation order (at padding positions they are the head's bias), and
      a batch padded to its longest row takes about the token share of the
      time. False: the original's computation on every position.
    preprocessor: optional :class:`bert_tf.preprocessing.BertPreprocessor`:
      the model then also takes sentences (``fit``/``evaluate``/``predict``,
      see :class:`bert_tf.modeling.models.TextInputsMixin`); part of the
      config, its vocab a ``.keras`` asset.
    id2label: the tag names, ``{id: name}`` (transformers' ``id2label``) or
      a list in id order; part of the config, returned by
      :attr:`label_names`. None: unnamed.

  Call args:
    inputs: dict with int32 (or int64) ``input_ids``, ``input_mask``,
      ``segment_ids``, each [B, S]; or, with a preprocessor, sentences:
      string [B], split into words on whitespace as the NER SavedModel does
      (:func:`split_words`), every word into its word pieces on its own
      (:meth:`TaggingPreprocessor.word_pieces`), packed as the sentence's
      FIRST window ``[CLS] pieces [SEP]`` of ``max_seq_length`` positions
      (:meth:`TaggingPreprocessor.first_windows`; pieces beyond
      ``max_seq_length - 2`` are dropped: the NER tool and export cover
      long sentences with several windows). Position 0 is ``[CLS]``,
      position ``1 + p`` the sentence's ``p``-th word piece, then ``[SEP]``
      and padding. A word's tag is read at its first piece
      (``first_piece`` of :meth:`TaggingPreprocessor.word_pieces`;
      :meth:`TaggingPreprocessor.word_logits` gathers them).
      Labels of sentences for ``fit``/``evaluate``: one tag id per word,
      int [B, W] padded with -1 (or ragged [B, (W)]); they are moved to the
      words' first pieces, every other position gets -1
      (:meth:`TaggingPreprocessor.window_labels`): compile with a loss that
      ignores -1 (``SparseCategoricalCrossentropy(from_logits=True,
      ignore_class=-1)``).
    training: enables dropout.
    skip_padding: optional bool overriding the constructor's for this call.

  Returns:
    float32 logits [B, S, L] (float32 under a mixed dtype policy too).

  Raises:
    ConfigError: ``config`` is neither a ``BertConfig`` nor a valid dict.
    ParamsError: ``num_labels`` < 1.

  ``from_preset`` (:meth:`bert_tf.modeling.task_model.TaskModel.from_preset`)
  loads the head too when the preset has one: a Hugging Face
  ``BertForTokenClassification`` directory (``classifier.weight`` [L, H],
  ``classifier.bias`` [L]; L from them when ``num_labels`` is None), our
  ``run_ner`` runs (L from ``ner_config.json``) and ``.keras`` token
  classifiers, with the tag names (``id2label``, a run's ``labels``); from
  any other preset only the encoder (then ``num_labels`` is required).
  ``from_run_settings`` takes the ``labels`` of a ``ner_config.json``.

  Example:
    >>> model = BertTokenClassifier(config_lib.preset("tiny"), num_labels=5)
    >>> x = {k: tf.zeros([2, 16], tf.int32) for k in FEATURE_NAMES}
    >>> model(x).shape
    TensorShape([2, 16, 5])
  """

  preset_task = TAGGING_TASK
  config_fields = ("num_labels", "skip_padding")
  label_fields = ("num_labels", "id2label")

  def __init__(self, config: "config_lib.BertConfig | dict", num_labels: int,
               skip_padding: bool = True, preprocessor=None, id2label=None, **kwargs):
    super().__init__(**kwargs)
    self.skip_padding = bool(skip_padding)
    config = config_lib.as_bert_config(config)
    self.config = config
    self.num_labels = task_model.check_num_labels(num_labels)
    self.id2label = models.normalize_id2label(id2label, self.num_labels)
    self.encoder = encoder_lib.BertEncoder(config, name="bert")
    self.dropout = bert_layers.Dropout(config.hidden_dropout_prob, name="dropout")
    self.classifier = models.DenseHead(config, self.num_labels, name="classifier")
    self.preprocessor = models.as_preprocessor_layer(preprocessor, config)
    self._tagging = None  # the TaggingPreprocessor, made on first use
    self.built = True  # every weight exists: .keras loading needs no build

  @property
  def label_names(self) -> Optional[list]:
    """The tag names in id order (list of str), or None when unnamed."""
    if self.id2label is None:
      return None
    return [self.id2label[i] for i in range(self.num_labels)]

  @classmethod
  def run_settings_kwargs(cls, settings: dict) -> dict:
    """``ner_config.json`` -> ``num_labels`` and ``id2label`` (its ``labels``).

    Raises:
      ConfigError: no ``labels``.
    """
    labels = task_model.run_labels(settings, cls.__name__)
    return {"num_labels": len(labels), "id2label": labels}

  @property
  def tagging_preprocessor(self) -> "TaggingPreprocessor":
    """The :class:`TaggingPreprocessor` of the model's preprocessor.

    Raises:
      ValueError: the model has no preprocessor.
    """
    pre = self._require_preprocessor()
    if self._tagging is None or self._tagging.preprocessor is not pre:
      self._tagging = TaggingPreprocessor(pre)
    return self._tagging

  def text_windows(self, sentences) -> tuple:
    """Sentences [B] -> ``(words, pieces, windows)``: :func:`split_words`'
    words (string RaggedTensor [B, (W)]), :meth:`TaggingPreprocessor.word_pieces`
    and :meth:`TaggingPreprocessor.first_windows` (the call's features)."""
    sentences = tf.strings.unicode_transcode(
        tf.reshape(sentences, [-1]), "UTF-8", "UTF-8", errors="replace",
        replacement_char=0xFFFD)
    tp = self.tagging_preprocessor
    words = split_words(sentences)[0]
    pieces = tp.word_pieces(words)
    return words, pieces, tp.first_windows(pieces["ids"])

  def text_features(self, x) -> dict:
    """Sentences [B] -> ids [B, S] (see the call args)."""
    win = self.text_windows(x)[2]
    return {k: win[k] for k in FEATURE_NAMES}

  def text_labels(self, x, y):
    """Word tag ids [B, W] (-1 padded) or [B, (W)] -> position labels [B, S]."""
    words, pieces, win = self.text_windows(x)
    if isinstance(y, tf.RaggedTensor):
      flat = y.flat_values
    else:
      flat = tf.RaggedTensor.from_tensor(
          tf.convert_to_tensor(y), lengths=words.row_lengths()).flat_values
    return self.tagging_preprocessor.window_labels(win, pieces, flat)

  def call(self, inputs, training=False, skip_padding=None):
    inputs = self._model_inputs(inputs)
    skip = self.skip_padding if skip_padding is None else skip_padding
    seq = self.encoder({k: inputs[k] for k in FEATURE_NAMES}, training=training,
                       skip_padding=skip)["sequence_output"]  # [B, S, H]
    shape = tf.shape(seq)
    flat = tf.reshape(self.dropout(seq, training=training), [-1, shape[2]])
    logits = self.classifier(flat)                                 # [B*S, L]
    return tf.reshape(logits, [shape[0], shape[1], self.num_labels])


def tagging_loss(logits, label_ids):
  """Sum of the softmax cross-entropy over labeled positions and their count.

  Args:
    logits: float [B, S, L]; label_ids: int [B, S], :data:`IGNORE` (-1)
      where there is no label.

  Returns:
    ``(loss_sum, count)``: float32 scalars; the mean loss is their ratio.
  """
  label_ids = tf.cast(label_ids, tf.int32)
  weights = tf.cast(label_ids >= 0, tf.float32)
  ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.maximum(label_ids, 0), logits=tf.cast(logits, tf.float32))
  return tf.reduce_sum(ce * weights), tf.reduce_sum(weights)


def row_ids(ragged: tf.RaggedTensor) -> tf.Tensor:
  """int64 [N]: the row of each of ``ragged``'s N values (``value_rowids``)."""
  return tf.cast(ragged.value_rowids(), tf.int64)


class TaggingPreprocessor(tf.Module):
  """Words -> word pieces -> ``[CLS] window [SEP]`` features, and back.

  Args:
    preprocessor: the :class:`bert_tf.preprocessing.BertPreprocessor`
      (vocab, lower-casing, ``max_seq_length`` = the window width S).
    doc_stride: distance in pieces between window starts (at most S - 2).
    max_windows: windows per sentence at most (None: no limit; the
      export's guard against huge inputs: words beyond get no logits).

  Raises:
    errors.ParamsError: ``doc_stride`` < 1 or ``max_windows`` < 1.

  Example::

    tp = TaggingPreprocessor(BertPreprocessor(vocab, True, 128), doc_stride=64)
    words = tf.ragged.constant([["Empire", "State", "Building"]])
    pieces = tp.word_pieces(words)
    win = tp.windows(pieces["ids"])           # input_ids [W, 128], ...
  """

  def __init__(self, preprocessor, doc_stride: int = 64,
               max_windows: Optional[int] = None, name="tagging_preprocessor"):
    super().__init__(name=name)
    if int(doc_stride) < 1:
      raise errors.ParamsError("doc_stride must be at least 1, got %s" % doc_stride,
                               argument="doc_stride")
    if max_windows is not None and int(max_windows) < 1:
      raise errors.ParamsError("max_windows must be at least 1, got %s" % max_windows,
                               argument="max_windows")
    self.preprocessor = preprocessor
    self.max_seq_length = preprocessor.max_seq_length
    self.doc_stride = int(doc_stride)
    self.max_windows = None if max_windows is None else int(max_windows)
    self.unk_id = preprocessor.unk_id

  def word_pieces(self, words: tf.RaggedTensor) -> dict:
    """Word pieces of every sentence.

    Args:
      words: string RaggedTensor [B, (W)].

    Returns:
      dict: ``ids`` int64 RaggedTensor [B, (P)] (the pieces of each
      sentence, every word at least one piece); ``first_piece`` int64 [N]
      (N = all words, row-major): index of each word's first piece in
      ``ids.flat_values``; ``num_pieces`` int64 [N].
    """
    flat = words.flat_values
    pieces = self.preprocessor.tokenize(flat)                       # [N, (p)]
    n_words = tf.shape(flat, tf.int64)[0]
    lengths = pieces.row_lengths()
    new_len = tf.maximum(lengths, 1)
    starts = tf.cumsum(new_len, exclusive=True)                      # [N]
    total = tf.reduce_sum(new_len)
    rows = row_ids(pieces)
    pos = tf.gather(starts, rows) + (tf.range(tf.size(pieces.flat_values, tf.int64)) -
                                     tf.gather(pieces.row_starts(), rows))
    values = tf.tensor_scatter_nd_update(
        tf.fill([total], tf.constant(self.unk_id, tf.int64)), pos[:, None],
        tf.cast(pieces.flat_values, tf.int64))
    per_sentence = tf.math.unsorted_segment_sum(
        new_len, row_ids(words), tf.shape(words.row_lengths(), tf.int64)[0])
    del n_words
    return {"ids": tf.RaggedTensor.from_row_lengths(values, per_sentence),
            "first_piece": starts, "num_pieces": new_len}

  def windows(self, ids: tf.RaggedTensor) -> dict:
    """The windows of every sentence (see the module docstring).

    Args:
      ids: int64 RaggedTensor [B, (P)] of word pieces.

    Returns:
      dict: ``example`` int64 [W] (sentence of each window, in order),
      ``input_ids``, ``input_mask``, ``segment_ids`` int32 [W, S],
      ``piece_index`` int64 [W, S] (index into ``ids.flat_values`` of the
      piece at each position, -1 at [CLS], [SEP] and padding),
      ``is_max_context`` bool [W, S].
    """
    seq = self.max_seq_length
    m = tf.constant(seq - 2, tf.int64)
    n = ids.row_lengths()
    step = tf.minimum(m, self.doc_stride)
    num = tf.where(n > 0, 1 + tf.maximum(tf.zeros_like(n), (n - m + step - 1) // step),
                   tf.zeros_like(n))
    if self.max_windows is not None:
      num = tf.minimum(num, self.max_windows)
    k = tf.ragged.range(num)
    example = row_ids(k)
    k = k.flat_values
    start = k * step
    length = tf.minimum(m, tf.gather(n, example) - start)
    base = tf.gather(ids.row_starts(), example) + start
    offsets = tf.ragged.range(length)                                # [W, (len)]
    gidx = offsets + tf.expand_dims(base, 1)
    window_ids = tf.gather(ids.flat_values, gidx)
    pre = self.preprocessor
    packed, segments = text.combine_segments(
        [window_ids], start_of_sequence_id=pre.cls_id, end_of_segment_id=pre.sep_id)
    input_ids, input_mask = text.pad_model_inputs(packed, seq, pad_value=pre.pad_id)
    segment_ids, _ = text.pad_model_inputs(segments, seq)
    # token_is_max_context (run_squad._check_is_max_context), float64.
    i = tf.cast(offsets.flat_values, tf.float64)
    window = row_ids(offsets)
    wlen = tf.cast(tf.gather(length, window), tf.float64)
    score = tf.minimum(i, wlen - 1.0 - i) + 0.01 * wlen
    pos = gidx.flat_values
    total = tf.cast(tf.size(ids.flat_values), tf.int32)
    pos32 = tf.cast(pos, tf.int32)
    best = tf.math.unsorted_segment_max(score, pos32, total)
    num_w = tf.shape(example, tf.int64)[0]
    best_window = tf.math.unsorted_segment_min(
        tf.where(score == tf.gather(best, pos32), window, num_w), pos32, total)
    is_max = tf.gather(best_window, pos32) == window
    idx = tf.stack([window, offsets.flat_values + 1], axis=1)
    shape = tf.stack([num_w, tf.constant(seq, tf.int64)])
    return {"example": example,
            "input_ids": tf.cast(input_ids, tf.int32),
            "input_mask": tf.cast(input_mask, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "piece_index": tf.scatter_nd(idx, pos + 1, shape) - 1,
            "is_max_context": tf.scatter_nd(idx, tf.cast(is_max, tf.int32), shape) > 0}

  def first_windows(self, ids: tf.RaggedTensor) -> dict:
    """The first window of every sentence, empty sentences included: the
    :meth:`windows` of a sentence with at most ``max_seq_length - 2`` pieces
    (later pieces are dropped), one row per sentence.

    Args:
      ids: int64 RaggedTensor [B, (P)] of word pieces.

    Returns:
      dict as :meth:`windows` (``example`` = 0..B-1; ``is_max_context``
      True at every piece), every tensor with B rows; an empty sentence is
      ``[CLS] [SEP]``.
    """
    pre = self.preprocessor
    features = pre.pack([ids])  # [CLS] ids[:S-2] [SEP], padded
    seq = self.max_seq_length
    length = tf.minimum(ids.row_lengths(), seq - 2)                  # [B]
    j = tf.range(seq, dtype=tf.int64)[None, :] - 1                   # [1, S]
    inside = (j >= 0) & (j < length[:, None])
    piece_index = tf.where(inside, ids.row_starts()[:, None] + j, -1)
    return dict(features, example=tf.range(tf.shape(length, tf.int64)[0]),
                piece_index=piece_index, is_max_context=inside)

  def window_labels(self, win: dict, pieces: dict, word_labels) -> tf.Tensor:
    """Label ids [W, S] of the windows: each word's label at its first piece,
    :data:`IGNORE` elsewhere (other pieces, [CLS], [SEP], padding).

    Args:
      win: :meth:`windows`' dict; pieces: :meth:`word_pieces`' dict.
      word_labels: int [N], one label id per word (row-major).
    """
    total = tf.size(pieces["ids"].flat_values, tf.int64)
    piece_label = tf.scatter_nd(pieces["first_piece"][:, None],
                                tf.cast(word_labels, tf.int64) + 1, [total]) - 1
    padded = tf.concat([piece_label, [IGNORE]], 0)
    pi = win["piece_index"]
    return tf.cast(tf.gather(padded, tf.where(pi >= 0, pi, total)), tf.int32)

  @staticmethod
  def word_logits(win: dict, pieces: dict, logits) -> tuple:
    """Per-word logits: the logits of each word's first piece in its
    max-context window.

    Args:
      win, pieces: as :meth:`window_labels`; logits: float [W, S, L].

    Returns:
      ``(word_logits float32 [N, L], covered bool [N])``; ``covered`` is
      False for a word whose first piece lies in no window (only with
      ``max_windows``), whose logits are then zeros.
    """
    logits = tf.cast(logits, tf.float32)
    sel = (win["piece_index"] >= 0) & win["is_max_context"]
    idx = tf.boolean_mask(win["piece_index"], sel)
    vals = tf.boolean_mask(logits, sel)
    total = tf.size(pieces["ids"].flat_values, tf.int64)
    num_labels = tf.shape(logits, tf.int64)[2]
    piece_logits = tf.scatter_nd(idx[:, None], vals, tf.stack([total, num_labels]))
    covered = tf.scatter_nd(idx[:, None], tf.ones_like(idx, tf.int32), [total]) > 0
    return (tf.gather(piece_logits, pieces["first_piece"]),
            tf.gather(covered, pieces["first_piece"]))


def split_words(sentence) -> tuple:
  """Whitespace words with code-point and byte offsets (:data:`WHITESPACE`):
  the word split of the NER SavedModel and of the tagger's text input.

  Args:
    sentence: string [B], valid UTF-8.

  Returns:
    ``(words, start_char, end_char, start_byte, end_byte)``: RaggedTensors
    [B, (W)] (string, then int64).
  """
  # The split op stops at a NUL byte: split a copy with NUL -> \x01 (same
  # length; neither is whitespace) and cut the words from the sentence.
  _, start_b, end_b = text.regex_split_with_offsets(
      tf.strings.regex_replace(sentence, "\x00", "\x01"), WHITESPACE, "")
  s0, s1 = start_b.to_tensor(0), end_b.to_tensor(0)
  dense = tf.strings.substr(tf.expand_dims(sentence, 1), tf.cast(s0, tf.int32),
                            tf.cast(s1 - s0, tf.int32), unit="BYTE")
  words = tf.RaggedTensor.from_tensor(dense, lengths=start_b.row_lengths())
  _, cp_off = tf.strings.unicode_decode_with_offsets(sentence, "UTF-8")
  nbytes = tf.cast(tf.strings.length(sentence), tf.int64)
  byte_base = tf.cumsum(nbytes, exclusive=True)                    # [B]
  char_base = tf.cast(cp_off.row_starts(), tf.int64)               # [B]
  cp_global = (tf.cast(cp_off.flat_values, tf.int64) +
               tf.gather(byte_base, row_ids(cp_off)))
  rows = row_ids(start_b)
  to_char = lambda b: (tf.searchsorted(  # pylint: disable=unnecessary-lambda-assignment
      cp_global, tf.cast(b.flat_values, tf.int64) + tf.gather(byte_base, rows),
      side="left", out_type=tf.int64) - tf.gather(char_base, rows))
  return (words, start_b.with_flat_values(to_char(start_b)),
          end_b.with_flat_values(to_char(end_b)), start_b, end_b)


def label_tables(labels: Sequence[str]):
  """``(prefix codes, type ids, type names)`` of a label list: prefix code
  per label (:data:`PREFIX_CODES`: O=0 B=1 I=2 E=3 S=4), a type id per label
  (-1 for ``O``), the sorted type names."""
  types = sorted({l[2:] for l in labels if l != "O"})
  prefix = [PREFIX_CODES[l[0]] if l != "O" else PREFIX_O for l in labels]
  type_ids = [types.index(l[2:]) if l != "O" else -1 for l in labels]
  return prefix, type_ids, types


def _is_any(code: tf.Tensor, *codes: int) -> tf.Tensor:
  """bool: ``code`` equals one of ``codes`` (a chain of ``logical_or``, ops
  LiteRT converts)."""
  return functools.reduce(tf.logical_or, [tf.equal(code, c) for c in codes])


def chunk_boundaries(prev_prefix: tf.Tensor, cur_prefix: tf.Tensor, prev_type: tf.Tensor,
                     cur_type: tf.Tensor) -> tuple:
  """conlleval's chunk rules between each tag and the one before it.

  Source: conlleval's ``endOfChunk`` / ``startOfChunk`` (the rules of
  :func:`bert_tf.data.conll.get_entities`), on prefix codes
  (:data:`PREFIX_CODES`) and type ids (:func:`label_tables`): a chunk ends
  before ``cur`` after an E or S, a B or I followed by O, B or S, or a type
  change inside a chunk; one starts at ``cur`` on B or S, an I or E after
  O, E or S, or a type change.

  Args:
    prev_prefix, cur_prefix: int prefix codes, any shape (the same).
    prev_type, cur_type: int type ids (-1 for ``O``), that shape.

  Returns:
    ``(ends, starts)``: bool tensors of that shape; ``ends``: a chunk ends
    just before ``cur``; ``starts``: one starts at ``cur``.
  """
  ends = (_is_any(prev_prefix, PREFIX_E, PREFIX_S)
          | (_is_any(prev_prefix, PREFIX_B, PREFIX_I)
             & _is_any(cur_prefix, PREFIX_O, PREFIX_B, PREFIX_S))
          | ((prev_prefix != PREFIX_O) & (prev_type != cur_type)))
  starts = (_is_any(cur_prefix, PREFIX_B, PREFIX_S)
            | (_is_any(prev_prefix, PREFIX_O, PREFIX_E, PREFIX_S)
               & _is_any(cur_prefix, PREFIX_I, PREFIX_E))
            | ((cur_prefix != PREFIX_O) & (prev_type != cur_type)))
  return ends, starts


def entity_spans(tag_ids: tf.RaggedTensor, prefix_codes, type_ids) -> dict:
  """Entities of every sentence's tags with conlleval's chunk rules (the
  in-graph twin of :func:`bert_tf.data.conll.get_entities`).

  Args:
    tag_ids: int RaggedTensor [B, (W)] of label ids.
    prefix_codes, type_ids: :func:`label_tables`' lists.

  Returns:
    dict of int64 [E] (entities in row-major order): ``row`` (sentence),
    ``first``, ``last`` (word indexes, inclusive), ``type_id``.
  """
  prefix_t = tf.constant(list(prefix_codes), tf.int64)
  type_t = tf.constant(list(type_ids), tf.int64)
  o_id = tf.cast(tf.argmin(tf.abs(prefix_t)), tf.int64)  # an O label (prefix 0)
  tag_ids = tf.cast(tag_ids, tf.int64)
  dense = tag_ids.to_tensor(default_value=o_id)
  b = tf.shape(dense, tf.int64)[0]
  dense = tf.concat([dense, tf.fill([b, 1], o_id)], 1)              # [B, W+1]
  prev = tf.concat([tf.fill([b, 1], o_id), dense[:, :-1]], 1)
  ends, starts = chunk_boundaries(tf.gather(prefix_t, prev), tf.gather(prefix_t, dense),
                                  tf.gather(type_t, prev), tf.gather(type_t, dense))
  width = tf.shape(dense, tf.int64)[1]
  start_pos = tf.where(starts)                                      # [E, 2]
  end_flat = tf.where(tf.reshape(ends, [-1]))[:, 0]
  g = start_pos[:, 0] * width + start_pos[:, 1]
  nxt = tf.gather(end_flat, tf.searchsorted(end_flat, g, side="right"))
  return {"row": start_pos[:, 0], "first": start_pos[:, 1],
          "last": nxt - start_pos[:, 0] * width - 1,
          "type_id": tf.gather_nd(tf.gather(type_t, dense), start_pos)}
