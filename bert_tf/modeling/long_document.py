"""Texts longer than one window: truncation methods and windows, in dense ops.

BERT reads ``max_seq_length`` tokens; the original ``run_classifier.py``
keeps a long text's first ``max_seq_length - 2`` word pieces (``head``).
:class:`LongDocument` chooses instead, for classification, regression and
multi-label heads alike:

* ``head`` (the default, the original's): the first tokens;
* ``tail``: the last tokens;
* ``head_tail``: the first ``head_tokens`` and the rest from the end (Sun et
  al. 2019, "How to Fine-Tune BERT for Text Classification?", arXiv
  1905.05583: head 128 + tail 382 of 512 best on IMDb);
* ``windows``: the document cut into windows of ``max_seq_length`` with a
  ``doc_stride`` overlap, as the original ``run_squad.py`` cuts contexts
  (window k starts at token ``k * min(doc_stride, window length)``; the
  last one reaches the end), each window encoded and the windows pooled
  into one prediction (:class:`bert_tf.modeling.models.BertClassifier`'s
  ``window_pooling``; Sun et al.'s hierarchical methods).

In a sentence pair the shorter text is kept in every window (its first
half-window of tokens at most), as SQuAD's question, and the longer one is
the document the method cuts; ``head`` pairs keep the original's round-robin
truncation (:class:`bert_tf.preprocessing.BertPreprocessor`).

A document of more than ``max_windows`` windows (training) or
``max_eval_windows`` (evaluation, prediction, serving) is read in that many:
all of them when it has no more, else that many spread evenly from its
first window to its last, so that training sees the start, the middle and
the end of a long document at a bounded cost, and a served 100,000-token
document costs at most the cap and says ``truncated``.

:func:`pack` is the one implementation of the packing: the training input
pipeline, the Keras text input, the SavedModel and the ``.tflite`` all call
it on their tokenizer's ids. Its ops are dense gathers and arithmetic (and
``RaggedTensorToTensor``), so LiteRT runs it.

Example::

  from bert_tf.modeling import long_document
  settings = long_document.LongDocument("windows").resolved(128)
  features = long_document.pack([preprocessor.tokenize(texts)], settings,
                                 preprocessor)   # input_ids [B, K, 128] ...
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf import errors

METHODS = ("head", "tail", "head_tail", "windows")
POOLINGS = ("mean", "max")
FEATURES = ("input_ids", "input_mask", "segment_ids")
# The remedy the length reports name for texts cut at max_seq_length.
REMEDY = ("--long_document=windows reads them whole, head_tail keeps their end: "
          "README, \"Long documents\"")


@dataclasses.dataclass(frozen=True)
class LongDocument:
  """How a classifier reads a text longer than one window (module doc).

  Attributes:
    method: one of :data:`METHODS`.
    head_tokens: ``head_tail``: tokens kept from the start (default: a
      quarter of the window's text length, Sun et al.'s 128 of 510).
    doc_stride: ``windows``: the step between window starts, in tokens
      (default: half the window's text length); below the window's text
      length (``max_seq_length - 2``) so that windows overlap.
    max_windows: windows of one document read in training (>= 1).
    max_eval_windows: windows of one document read in evaluation,
      prediction and serving (>= 1).
    window_pooling: ``windows``: how the windows' outputs make one (mean or
      max over the windows).
    pool_logits: ``windows``: pool the windows' logits instead of their
      pooled outputs (the same as the pooled outputs' mean at inference,
      the head being linear; it differs for ``max`` and in training).
  """
  method: str = "head"
  head_tokens: Optional[int] = None
  doc_stride: Optional[int] = None
  max_windows: int = 4
  max_eval_windows: int = 64
  window_pooling: str = "mean"
  pool_logits: bool = False

  @property
  def windowed(self) -> bool:
    """The document becomes several windows (``windows``)."""
    return self.method == "windows"

  def resolved(self, max_seq_length: int) -> "LongDocument":
    """These settings checked against ``max_seq_length``, defaults filled.

    Raises:
      ParamsError: an unknown method or pooling, ``max_windows`` /
        ``max_eval_windows`` below 1, ``head_tokens`` above
        ``max_seq_length - 2`` (or below 0), ``doc_stride`` not below the
        window's text length (or below 1); each naming its flag.
    """
    text = int(max_seq_length) - 2
    if self.method not in METHODS:
      raise errors.ParamsError("--long_document=%s: one of %s" % (
          self.method, ", ".join(METHODS)), argument="long_document")
    if self.window_pooling not in POOLINGS:
      raise errors.ParamsError("--window_pooling=%s: one of %s" % (
          self.window_pooling, ", ".join(POOLINGS)), argument="window_pooling")
    for name in ("max_windows", "max_eval_windows"):
      if int(getattr(self, name)) < 1:
        raise errors.ParamsError("--%s=%s: must be at least 1" % (name, getattr(self, name)),
                                 argument=name)
    head = text // 4 if self.head_tokens is None else int(self.head_tokens)
    if not 0 <= head <= text:
      raise errors.ParamsError(
          "--head_tokens=%d: must be in [0, %d] (max_seq_length - 2: the window's text)"
          % (head, text), argument="head_tokens")
    stride = max(1, text // 2) if self.doc_stride is None else int(self.doc_stride)
    if self.windowed and not 1 <= stride < max(text, 2):
      raise errors.ParamsError(
          "--doc_stride=%d: must be at least 1 and below the window's text length "
          "(max_seq_length - 2 = %d tokens) so that windows overlap" % (stride, text),
          argument="doc_stride")
    return dataclasses.replace(self, head_tokens=head, doc_stride=stride,
                               max_windows=int(self.max_windows),
                               max_eval_windows=int(self.max_eval_windows),
                               pool_logits=bool(self.pool_logits))

  def to_dict(self) -> dict:
    """JSON-ready settings (a run's settings file, ``config.json``, ``.keras``)."""
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values: Optional[dict]) -> "LongDocument":
    """The settings a dict records (None or {}: ``head``, the original's).

    Raises:
      ParamsError: an unknown key.
    """
    values = dict(values or {})
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
      raise errors.ParamsError("long-document settings: unknown key %s" % unknown[0],
                               argument="long_document")
    return cls(**values)


def _dense(tokens: tf.RaggedTensor):
  """``(ids int32 [B, T + 1] zero-padded, lengths int32 [B])`` of ragged ids
  (one padding column more, so a gather has a place even when T is 0)."""
  tokens = tf.cast(tokens, tf.int32)
  # A pad, not a concat of dense[:, :1]: a batch of empty texts is [B, 0].
  dense = tf.pad(tokens.to_tensor(0), [[0, 0], [0, 1]])
  return dense, tf.cast(tokens.row_lengths(), tf.int32)


def _windows(settings: LongDocument, doc_len, budget, cap: int) -> dict:
  """The windows of each document: which, where, how long.

  Args:
    doc_len: int32 [B], the document's tokens; budget: int32 [B], tokens a
      window holds of it; cap: windows read at most.

  Returns:
    dict of int32 [B, K] ``start``, ``length`` (0 past a document's
    windows), ``valid`` bool [B, K], ``num_windows`` int32 [B],
    ``needed`` int32 [B] (windows the whole document takes).
  """
  if settings.windowed:
    step = tf.minimum(budget, settings.doc_stride)
    over = tf.maximum(0, doc_len - budget)
    needed = 1 + (over + step - 1) // step
  else:
    step = budget
    needed = tf.ones_like(doc_len)
  num = tf.minimum(needed, cap)
  k_max = tf.maximum(1, tf.reduce_max(tf.concat([num, [1]], 0)))
  k = tf.expand_dims(tf.range(k_max), 0)                                      # [1, K]
  # All windows when they fit the cap; else `cap` spread evenly first..last.
  spread = (k * (tf.expand_dims(needed, 1) - 1) + (cap - 1) // 2) // max(cap - 1, 1)
  sel = tf.where(tf.expand_dims(needed, 1) <= cap, k, spread if cap > 1 else 0 * k)
  valid = k < tf.expand_dims(num, 1)
  if settings.method == "tail":
    start = tf.expand_dims(tf.maximum(0, doc_len - budget), 1) + 0 * k
  else:
    start = sel * tf.expand_dims(step, 1)
  length = tf.where(valid, tf.clip_by_value(tf.expand_dims(doc_len, 1) - start, 0,
                                             tf.expand_dims(budget, 1)), 0)
  return {"start": start, "length": length, "valid": valid, "num_windows": num,
          "needed": needed}


def _doc_index(settings: LongDocument, j, start, doc_len, budget):
  """The document token read at position j of a window (j int32 [B, K, S],
  the others broadcastable): ``start + j``, except a cut ``head_tail``: the
  first ``head_tokens``, then the end."""
  idx = start + j
  if settings.method == "head_tail":
    head = tf.minimum(settings.head_tokens, budget)
    tail_from = doc_len - (budget - head)
    cut = doc_len > budget
    idx = tf.where(cut & (j >= head), tail_from + (j - head), idx)
  return idx


def pack(tokens: Sequence[tf.RaggedTensor], settings: LongDocument, preprocessor,
         training: bool = False) -> Dict[str, tf.Tensor]:
  """The packed features of one or two batches of token ids (module doc).

  Args:
    tokens: one or two int RaggedTensors [B, (T)] (a text, or a pair):
      the format's tokenizer's ids (``BertPreprocessor.tokenize``, the
      LiteRT export's ``FastBertTokenizer``).
    settings: :class:`LongDocument`, :meth:`LongDocument.resolved` for the
      preprocessor's length (any ``method`` but ``head``).
    preprocessor: gives ``max_seq_length`` S and ``cls_id``, ``sep_id``,
      ``pad_id``.
    training: read at most ``max_windows`` windows (else ``max_eval_windows``).

  Returns:
    dict: ``input_ids``, ``input_mask``, ``segment_ids`` int32 [B, K, S]
    (``windows``: K the batch's most windows, a document's missing ones all
    zero) or [B, S] (``tail``, ``head_tail``); ``num_windows`` int32 [B]
    (windows read); ``truncated`` bool [B] (tokens left unread).

  Raises:
    ParamsError: ``head`` (the preprocessor's own packing) or more than two
      texts.
  """
  if settings.method == "head" or not 1 <= len(tokens) <= 2:
    raise errors.ParamsError("long_document.pack: a method other than head, one or two "
                             "texts (got %s, %d)" % (settings.method, len(tokens)),
                             argument="long_document")
  seq = int(preprocessor.max_seq_length)
  cap = settings.max_windows if training else settings.max_eval_windows
  da, la = _dense(tokens[0])
  if len(tokens) == 2:
    db, lb = _dense(tokens[1])
    r_is_a = la <= lb                       # the shorter is kept in every window
    kept_len = tf.minimum(tf.where(r_is_a, la, lb), (seq - 3) // 2)
    doc_len = tf.where(r_is_a, lb, la)
    budget = seq - 3 - kept_len
    cut_kept = tf.where(r_is_a, la, lb) > kept_len
  else:
    db, lb = da, la
    r_is_a = tf.zeros_like(la, tf.bool)
    kept_len = tf.zeros_like(la)
    doc_len, budget = la, tf.fill(tf.shape(la), seq - 2)
    cut_kept = tf.zeros_like(la, tf.bool)
  win = _windows(settings, doc_len, budget, cap)
  col = lambda x: tf.reshape(x, [-1, 1, 1])  # pylint: disable=unnecessary-lambda-assignment
  t = tf.reshape(tf.range(seq), [1, 1, seq])
  wl = tf.expand_dims(win["length"], -1)
  pair = len(tokens) == 2
  first = tf.where(col(r_is_a), col(kept_len), wl) if pair else wl
  second = tf.where(col(r_is_a), wl, col(kept_len)) if pair else 0 * wl
  j1, j2 = t - 1 + 0 * first, t - first - 2                              # [B, K, S]
  doc = lambda j: _doc_index(settings, j, tf.expand_dims(win["start"], -1),  # pylint: disable=unnecessary-lambda-assignment
                             col(doc_len), col(budget))
  src_a = tf.where(col(r_is_a), j1, doc(j1))
  src_b = tf.where(col(r_is_a), doc(j2), j2)
  gather = lambda d, i: tf.gather(  # pylint: disable=unnecessary-lambda-assignment
      d, tf.reshape(tf.clip_by_value(i, 0, tf.shape(d)[1] - 1), [tf.shape(d)[0], -1]),
      batch_dims=1)
  shape = tf.shape(j1)
  from_a = tf.reshape(gather(da, src_a), shape)
  from_b = tf.reshape(gather(db, src_b), shape)
  in_first = (t >= 1) & (t <= first)
  in_second = (t >= first + 2) & (t <= first + 1 + second)
  last = first + second + (2 if pair else 1)                            # the last [SEP]
  ids = tf.where(in_first, from_a, tf.where(in_second, from_b, preprocessor.pad_id))
  ids = tf.where(tf.equal(t, 0), preprocessor.cls_id, ids)
  ids = tf.where(tf.equal(t, first + 1) | tf.equal(t, last), preprocessor.sep_id, ids)
  valid = tf.expand_dims(win["valid"], -1)
  mask = tf.cast((t <= last) & valid, tf.int32)
  segments = tf.cast((t >= first + 2) & (t <= last) & valid, tf.int32) if pair else 0 * mask
  out = {"input_ids": tf.where(valid, ids, 0), "input_mask": mask, "segment_ids": segments}
  if not settings.windowed:
    out = {k: tf.gather(v, 0, axis=1) for k, v in out.items()}
  out["num_windows"] = win["num_windows"]
  out["truncated"] = (win["needed"] > cap) | cut_kept | (
      tf.zeros_like(cut_kept) if settings.windowed else doc_len > budget)
  return out


def head_flags(tokens: Sequence[tf.RaggedTensor], max_seq_length: int) -> Dict[str, tf.Tensor]:
  """``num_windows`` (ones) and ``truncated`` of the original's ``head``
  packing (round-robin trimming to ``max_seq_length``): int32 / bool [B]."""
  total = tf.add_n([tf.cast(t.row_lengths(), tf.int32) for t in tokens])
  cut = total > int(max_seq_length) - 1 - len(tokens)
  return {"num_windows": tf.ones_like(total), "truncated": cut}


class DocumentPacker:
  """A :class:`~bert_tf.preprocessing.BertPreprocessor` that reads long texts
  by a :class:`LongDocument` method: what the classifier's input pipeline,
  its Keras text input and its SavedModel call on raw strings.

  Args:
    preprocessor: the :class:`BertPreprocessor` (vocab, casing, length).
    settings: a :class:`LongDocument` (resolved here for the length).
    training: read ``max_windows`` windows (else ``max_eval_windows``).

  Call args:
    text_a: string [B]; text_b: optional string [B].

  Returns:
    the features of :func:`pack` (``head``: the preprocessor's own packing,
    [B, S]), with ``num_windows`` int32 [B] and ``truncated`` bool [B].

  Raises:
    ParamsError: settings that do not fit the preprocessor's length.

  Example::

    packer = DocumentPacker(preprocessor, LongDocument("windows"), training=True)
    features = packer(tf.constant(["a very long post ..."]))
  """

  def __init__(self, preprocessor, settings: LongDocument, training: bool = False):
    self.preprocessor = preprocessor
    self.settings = settings.resolved(preprocessor.max_seq_length)
    self.training = bool(training)
    self.max_seq_length = preprocessor.max_seq_length

  def pack_tokens(self, tokens: Sequence[tf.RaggedTensor]) -> Dict[str, tf.Tensor]:
    """The features of tokenized texts (one or two int RaggedTensors [B, (T)])."""
    if self.settings.method == "head":
      out = self.preprocessor.pack(list(tokens))
      out.update(head_flags(tokens, self.max_seq_length))
      return out
    return pack(tokens, self.settings, self.preprocessor, self.training)

  def __call__(self, text_a, text_b=None) -> Dict[str, tf.Tensor]:
    tokens = [self.preprocessor.tokenize(text_a)]
    if text_b is not None:
      tokens.append(self.preprocessor.tokenize(text_b))
    return self.pack_tokens(tokens)


def windows_needed(settings: LongDocument, len_a: np.ndarray, len_b: Optional[np.ndarray],
                   max_seq_length: int) -> tuple:
  """``(windows a whole document takes, document tokens left unread by a
  truncating method)`` per example, as :func:`pack` decides: int [N] each.

  Args:
    settings: resolved :class:`LongDocument`; len_a, len_b: word pieces of
      each text (len_b None for single texts); max_seq_length: S.
  """
  len_a = np.asarray(len_a, np.int64)
  if len_b is None:
    kept, doc, budget = np.zeros_like(len_a), len_a, np.full_like(len_a, max_seq_length - 2)
    kept_cut = np.zeros_like(len_a)
  else:
    len_b = np.asarray(len_b, np.int64)
    short = np.minimum(len_a, len_b)
    kept = np.minimum(short, (max_seq_length - 3) // 2)
    doc = np.where(len_a <= len_b, len_b, len_a)
    budget = max_seq_length - 3 - kept
    kept_cut = short - kept
  if settings.windowed:
    step = np.minimum(budget, settings.doc_stride)
    needed = 1 + (np.maximum(0, doc - budget) + step - 1) // step
    return needed, kept_cut
  return np.ones_like(doc), np.maximum(0, doc - budget) + kept_cut


def length_report(preprocessor, settings: LongDocument, text_a: Sequence[str],
                  text_b: Optional[Sequence[str]] = None, split: str = "train"):
  """The :class:`bert_tf.preprocessing.LengthReport` of a classifier split
  under ``settings``: what is cut, and a line that names the remedy.

  ``head`` (the original): texts longer than ``max_seq_length``;
  ``tail`` / ``head_tail``: the same texts, cut the method's way (the line
  names the remedy, :data:`REMEDY` / ``windows``, when any was cut);
  ``windows``: documents that need
  more than ``--max_eval_windows`` windows (read in that many spread over
  them).

  Args:
    preprocessor: the :class:`BertPreprocessor`; settings: resolved
      :class:`LongDocument`; text_a, text_b: the split's N texts (text_b
      None for single texts); split: its name.
  """
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  seq = preprocessor.max_seq_length
  len_a = preprocessing.token_lengths(preprocessor, text_a) - 2
  len_b = None if text_b is None else preprocessing.token_lengths(preprocessor, text_b) - 2
  total = len_a + (2 if len_b is None else len_b + 3)
  flag = "--max_seq_length=%d" % seq
  if settings.method == "head":
    cut, rule, remedy = None, "longer than %s tokens were cut" % flag, REMEDY
  else:
    needed, unread = windows_needed(settings, len_a, len_b, seq)
    if settings.windowed:
      cut, remedy = needed > settings.max_eval_windows, None
      rule = ("take more than --max_eval_windows=%d windows of %d tokens (--doc_stride=%d) "
              "and were read in %d spread over them" % (
                  settings.max_eval_windows, seq, settings.doc_stride,
                  settings.max_eval_windows))
    else:
      cut, remedy = unread > 0, "--long_document=windows reads them whole"
      kept = ("their last tokens" if settings.method == "tail" else
              "their first %d tokens and their last" % settings.head_tokens)
      rule = "longer than %s tokens were cut to %s" % (flag, kept)
  report = preprocessing.LengthReport.from_lengths(split, total, seq, cut=cut, rule=rule)
  # The remedy only where something was cut: a line on every split that
  # fits would teach users to skip it.
  if report.truncated and remedy:
    report = dataclasses.replace(report, rule="%s (%s)" % (rule, remedy))
  return report


def pool_windows(values: tf.Tensor, valid: tf.Tensor, pooling: str) -> tf.Tensor:
  """The windows of each document pooled: ``values`` float [B, K, D] over
  the ``valid`` bool [B, K] windows -> [B, D] (mean, or max; a document
  always has one window)."""
  valid = tf.expand_dims(tf.cast(valid, values.dtype), -1)
  if pooling == "max":
    low = tf.reduce_min(values) - 1.0
    return tf.reduce_max(values * valid + low * (1.0 - valid), axis=1)
  total = tf.reduce_sum(values * valid, axis=1)
  return total / tf.maximum(tf.reduce_sum(valid, axis=1), 1.0)
