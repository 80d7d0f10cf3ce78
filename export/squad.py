"""SQuAD SavedModel: raw question + context strings in, the answer span out.

Everything the original ``run_squad.py`` does around the network runs inside
the TensorFlow graph, so TF Serving answers raw strings with no Python:

1. **tokenize** (the project's :class:`bert_tf.preprocessing.BertPreprocessor`
   normalization + tensorflow-text ``BertTokenizer``, the vocab a SavedModel
   asset). The question keeps its first ``max_query_length`` word pieces
   (original ``convert_examples_to_features``). The context is tokenized
   *with offsets*: it is split into code points, each code point is
   normalized on its own (sanitize, and for uncased models lower-case + NFD +
   drop Mn, exactly ``BertPreprocessor.normalize``), the normalized pieces are
   joined and tokenized with byte offsets, and a cumulative byte-length table
   maps every word piece back to the code points of the ORIGINAL context it
   came from ("Café" -> ``cafe`` -> ``Café``; deleted control characters and
   stripped accents included). With the preprocessor's
   ``preserve_unused_tokens`` the per-code-point pieces are
   ``BertPreprocessor.normalize_chars``'s (vocab entries ``[unusedN]`` kept
   whole, as the original's ``--preserve_unused_tokens``).
2. **windows** (the original's doc-stride loop): ``m = max_seq_length -
   len(query) - 3`` context pieces per window, window ``k`` starts at
   ``k * min(m, doc_stride)``, the last window is the first that reaches the
   end of the context; ``[CLS] query [SEP] window [SEP]``, segment ids 0 then
   1, zero padding to ``max_seq_length``. ``token_is_max_context`` is the
   original's ``_check_is_max_context`` (largest ``min(left, right) + 0.01 *
   window_length``, computed in float64 as Python does, first window on
   ties).
3. **one model call** for every window of every question of the batch
   (``[total_windows, max_seq_length]``).
4. **best span** as the original's ``write_predictions``: per window the
   ``n_best_size`` (20) best start and end positions (``top_k``; ties to the
   lower position, as Python's stable sort), pairs kept when both lie in the
   window's context, the start has max context, ``start <= end`` and
   ``end - start + 1 <= max_answer_length``; score = start_logit +
   end_logit in float64; the best score over all windows, ties to the
   original's order (window, start rank, end rank).
   Version 2 (``version_2_with_negative``): null score = min over windows of
   ``start_logits[0] + end_logits[0]``; ``null_score_diff = null_score -
   best_start_logit - best_end_logit`` (float64, in the original's order);
   no answer when ``null_score_diff > null_score_diff_threshold``.

Signature ``serving_default``: inputs ``question``, ``context`` string [B]
(another rank is flattened, different sizes -> ``INVALID_ARGUMENT``);
outputs

* ``answer`` string [B]: the ORIGINAL context's text between the first and
  the last word piece of the span (the original's ``get_final_text`` result
  for one word; for several words the original re-joins the words with one
  space, this keeps the context's own whitespace);
* ``start_char``, ``end_char`` int32 [B]: Unicode code-point offsets into the
  context, ``end_char`` exclusive: ``answer == context[start_char:end_char]``
  in Python (for a context that is not valid UTF-8: offsets into the context
  with its invalid bytes replaced by U+FFFD as
  ``tf.strings.unicode_transcode(errors="replace")`` does, which agrees with
  Python's ``bytes.decode("utf-8", "replace")`` on every input tested);
* ``score`` float32 [B]: start_logit + end_logit of the best non-null span;
* v2 only: ``no_answer`` bool [B], ``null_score_diff`` float32 [B].

No valid span (never a serving error): a context with windows whose
n-best holds no valid span (every pair of the ``n_best_size`` best starts
and ends is reversed, too long, or outside the context) gets the
original's nonce answer: ``answer`` "empty" (``NO_SPAN_TEXT``, the text
``write_predictions`` puts in ``predictions.json``), ``start_char = end_char
= 0``, ``score = -inf``, and in v2 ``null_score_diff`` = the null score (the
nonce entry's logits are 0, as in ``null_odds.json``). A context without any
window (empty or whitespace-only) -> ``answer`` "", ``start_char = end_char
= 0``, ``score = -inf``; v2: ``no_answer`` True, ``null_score_diff = +inf``.
So ``answer == context[start_char:end_char]`` unless ``score`` is -inf. A
v2 ``no_answer`` also empties ``answer`` and sets ``start_char = end_char =
0`` (as the original's predictions file); ``score`` still holds the best
non-null span's score. An empty question is
answered as the original does (``[CLS] [SEP] context [SEP]``). A context
needing more than ``max_windows`` (default 100) windows is searched in its
first ``max_windows`` windows only, and ``token_is_max_context`` is decided
among those windows. Strings of any size (1 MB and more) are tokenized
whole.

Ops: tensorflow-text's ``NormalizeUTF8``, ``RegexSplitWithOffsets`` and
``WordpieceTokenizeWithOffsets`` (no round-robin trimmer: the windows are
packed with ``combine_segments``), so TF Serving >= 2.2 can serve it (the
metadata file lists them, as for every export).

Deviations from the original, all documented in the tests: the original's
tokenizer vs tensorflow-text's (see ``BertPreprocessor``); the per-code-point
normalization differs from whole-string NFD only in the canonical reordering
of combining marks that are not Mn (then dropped anyway); the answer text as
said above.
"""

import tensorflow as tf
import tensorflow_text as text

from bert_tf import errors
from bert_tf import preprocessing
from bert_tf.data.squad import NO_SPAN_TEXT
from bert_tf.export import base
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib

WARMUP_QUESTIONS = ("Which team won Super Bowl 50?", "", "Where is the caf\u00e9?")
WARMUP_CONTEXTS = (
    "Super Bowl 50 was an American football game. The Denver Broncos defeated "
    "the Carolina Panthers 24\u201310 to earn their third Super Bowl title.",
    "   ",
    "The Caf\u00e9 de Flore is in Paris. " * 60)


class SquadServing(serving.ServingModule):
  """Tokenizer + windows + question-answering model + span choice (kind
  ``squad``; see the module doc).

  Args:
    model: a built question-answering model, called as ``model({"input_ids",
      "input_mask", "segment_ids"} int32 [W, S], training=False)`` and
      returning ``{"start_logits", "end_logits"}`` float [W, S]
      (:class:`bert_tf.modeling.BertQuestionAnswerer`).
    preprocessor: a :class:`bert_tf.preprocessing.BertPreprocessor` (vocab,
      lower-casing); its ``max_seq_length`` is the window width S.
    spec: a ``squad`` :class:`ServingSpec`: ``doc_stride``, ``max_windows``
      (windows searched per context at most) and the original
      ``run_squad.py``'s ``max_query_length``, ``max_answer_length``,
      ``n_best_size``, ``version_2_with_negative``,
      ``null_score_diff_threshold``.
    ops: the SavedModel's ops (the only format with SQuAD's ragged ops).
    track_model: track the model's variables (False for a model that holds
      none, e.g. a test stand-in).

  Raises:
    errors.ParamsError: inconsistent lengths.
  """

  kind = "squad"
  # The original run_squad.py's flags; the windows searched per context.
  defaults = {"doc_stride": 128, "max_windows": 100, "max_query_length": 64,
              "max_answer_length": 30, "n_best_size": 20,
              "version_2_with_negative": False, "null_score_diff_threshold": 0.0}
  extra_settings = ("max_query_length", "max_answer_length", "n_best_size",
                    "version_2_with_negative", "null_score_diff_threshold")

  @classmethod
  def settings_from_run(cls, run_config) -> dict:
    """``squad_config.json``'s window and answer settings, as they are."""
    keys = ("doc_stride",) + cls.extra_settings
    return {k: run_config[k] for k in keys if k in run_config}

  def squad_settings(self) -> dict:
    """The answer settings and the windows as one dict."""
    return dict(self.spec.settings, doc_stride=self.spec.doc_stride,
                max_windows=self.spec.max_windows)

  def __init__(self, model, preprocessor, spec: spec_lib.ServingSpec, ops=None,
               track_model: bool = True):
    seq = preprocessor.max_seq_length
    settings = dict(spec.settings, doc_stride=spec.doc_stride, max_windows=spec.max_windows)
    for name, low in (("doc_stride", 1), ("max_query_length", 0),
                      ("max_answer_length", 1), ("n_best_size", 1), ("max_windows", 1)):
      if int(settings[name]) < low:
        raise errors.ParamsError("%s must be at least %d, got %s" % (
            name, low, settings[name]), argument=name)
    if seq - int(settings["max_query_length"]) - 3 < 1:
      raise errors.ParamsError(
          "max_seq_length %d leaves no room for the context after a query of "
          "max_query_length %d (needs max_seq_length >= max_query_length + 4)"
          % (seq, settings["max_query_length"]), argument="max_seq_length")
    self.max_seq_length = seq
    self.doc_stride = int(settings["doc_stride"])
    self.max_query_length = int(settings["max_query_length"])
    self.max_answer_length = int(settings["max_answer_length"])
    self.n_best_size = int(settings["n_best_size"])
    self.max_windows = int(settings["max_windows"])
    self.version_2_with_negative = bool(settings["version_2_with_negative"])
    self.null_score_diff_threshold = float(settings["null_score_diff_threshold"])
    super().__init__(model if track_model else None, preprocessor, spec, ops)
    if not track_model:
      base.hold(self, model)

  def build_signatures(self):
    return tf.function(self._serve, autograph=False, input_signature=[
        base.string_spec("question"), base.string_spec("context")]), None

  def metadata(self) -> dict:
    outputs = ["answer", "end_char", "score", "start_char"]
    if self.version_2_with_negative:
      outputs += ["no_answer", "null_score_diff"]
    out = super().metadata()
    out.update(self.squad_settings(), task="squad", is_pair=True, outputs=sorted(outputs),
               null_score_diff_threshold=self.null_score_diff_threshold,
               offsets="start_char/end_char: Unicode code points, end exclusive")
    return out

  def warmup_requests(self):
    return [("serving_default", {"question": list(WARMUP_QUESTIONS),
                                 "context": list(WARMUP_CONTEXTS)})]


  # ------------------------------------------------------------ tokenizing

  def tokenize_context(self, context):
    """Word pieces of each context with code-point offsets.

    Args:
      context: string [B], valid UTF-8 (see :meth:`sanitize_utf8`).

    Returns:
      ``(ids, start_char, end_char)``: int64 RaggedTensors [B, (T)];
      ``start_char``/``end_char`` are the code-point offsets (end exclusive)
      of each piece in ``context``.
    """
    chars = tf.strings.unicode_split(context, "UTF-8")            # [B, (C)]
    norm = self.preprocessor.normalize_chars(chars).flat_values    # [N]
    norm_len = tf.cast(tf.strings.length(norm), tf.int64)          # bytes
    cum_after = tf.cumsum(norm_len)                                # global
    row_bytes = tf.math.unsorted_segment_sum(norm_len, base.row_ids(chars),
                                             tf.shape(context, tf.int64)[0])
    row_byte_base = tf.cumsum(row_bytes, exclusive=True)           # [B]
    row_char_base = tf.cast(chars.row_starts(), tf.int64)          # [B]
    norm_text = tf.strings.reduce_join(chars.with_flat_values(norm), axis=1)
    ids, starts, ends = self.preprocessor.tokenizer.tokenize_with_offsets(norm_text)
    ids, starts, ends = (ids.merge_dims(-2, -1), starts.merge_dims(-2, -1),
                         ends.merge_dims(-2, -1))
    rows = base.row_ids(ids)
    byte_base = tf.gather(row_byte_base, rows)
    char_base = tf.gather(row_char_base, rows)
    # The code point holding byte b: the first whose cumulative end > b
    # (deleted code points have zero length and are skipped).
    start_char = tf.searchsorted(cum_after, byte_base + starts.flat_values,
                                 side="right", out_type=tf.int64) - char_base
    end_char = tf.searchsorted(cum_after, byte_base + ends.flat_values - 1,
                               side="right", out_type=tf.int64) - char_base + 1
    return (ids, ids.with_flat_values(start_char), ids.with_flat_values(end_char))

  @staticmethod
  def sanitize_utf8(strings):
    """Invalid UTF-8 replaced by U+FFFD (``unicode_transcode``, errors="replace")."""
    return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)

  # ------------------------------------------------------------- windows

  def windows(self, query_ids, context_ids):
    """The original's doc-stride windows of every example.

    Args:
      query_ids: int64 RaggedTensor [B, (Q)] (already truncated).
      context_ids: int64 RaggedTensor [B, (T)].

    Returns:
      dict: ``example`` int64 [W] (the example of each window, windows of an
      example contiguous and in order), ``start`` int64 [W] (first context
      piece), ``length`` int64 [W], ``query_length`` int64 [W],
      ``input_ids``, ``input_mask``, ``segment_ids`` int32 [W, S],
      ``token_is_max_context`` bool [W, S] (at feature positions, as the
      original's dict), ``token_index`` int64 [W, S] (global index into
      ``context_ids.flat_values`` of the piece at each feature position, -1
      outside the window's context).
    """
    seq = self.max_seq_length
    qlen = query_ids.row_lengths()                          # [B] int64
    n = context_ids.row_lengths()
    m = seq - qlen - 3
    step = tf.minimum(m, self.doc_stride)
    num = tf.where(n > 0, 1 + tf.maximum(
        tf.zeros_like(n), (n - m + step - 1) // step), tf.zeros_like(n))
    num = tf.minimum(num, self.max_windows)
    k = tf.ragged.range(num)                                 # [B, (K)]
    example = base.row_ids(k)                                    # [W]
    k = k.flat_values
    w_step, w_m, w_n = (tf.gather(step, example), tf.gather(m, example),
                        tf.gather(n, example))
    start = k * w_step
    length = tf.minimum(w_m, w_n - start)
    w_qlen = tf.gather(qlen, example)
    first = tf.gather(context_ids.row_starts(), example) + start  # global index
    offsets = tf.ragged.range(length)                        # [W, (len)]
    gidx = offsets + tf.expand_dims(first, 1)
    window_ids = tf.gather(context_ids.flat_values, gidx)
    query = tf.gather(query_ids, example)
    pre = self.preprocessor
    ids, segments = text.combine_segments(
        [query, window_ids], start_of_sequence_id=pre.cls_id,
        end_of_segment_id=pre.sep_id)
    input_ids, input_mask = text.pad_model_inputs(ids, seq, pad_value=pre.pad_id)
    segment_ids, _ = text.pad_model_inputs(segments, seq)

    # token_is_max_context (original _check_is_max_context).
    i = tf.cast(offsets.flat_values, tf.float64)
    wlen = tf.cast(tf.gather(length, base.row_ids(offsets)), tf.float64)
    score = tf.minimum(i, wlen - 1.0 - i) + 0.01 * wlen
    pos = gidx.flat_values
    total = tf.cast(tf.shape(context_ids.flat_values, tf.int64)[0], tf.int32)
    pos32 = tf.cast(pos, tf.int32)
    best = tf.math.unsorted_segment_max(score, pos32, total)
    window = base.row_ids(offsets)
    big = tf.cast(tf.shape(example, tf.int64)[0], tf.int64)
    best_window = tf.math.unsorted_segment_min(
        tf.where(score == tf.gather(best, pos32), window, big), pos32, total)
    is_max = tf.gather(best_window, pos32) == window
    # Context part of feature row w: positions qlen + 2 + i.
    shift = tf.expand_dims(w_qlen + 2, 1)
    feat_pos = offsets + shift                              # [W, (len)]
    scatter_idx = tf.stack([window, feat_pos.flat_values], axis=1)
    shape = tf.stack([big, tf.constant(seq, tf.int64)])
    is_max_dense = tf.scatter_nd(scatter_idx, tf.cast(is_max, tf.int32), shape) > 0
    token_index = tf.scatter_nd(scatter_idx, pos + 1, shape) - 1
    return {"example": example, "start": start, "length": length,
            "query_length": w_qlen,
            "input_ids": tf.cast(input_ids, tf.int32),
            "input_mask": tf.cast(input_mask, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "token_is_max_context": is_max_dense, "token_index": token_index}

  # ------------------------------------------------------------ best span

  def best_spans(self, win, start_logits, end_logits, batch_size):
    """The original's best span per example from the windows' logits.

    Args:
      win: :meth:`windows`' dict.
      start_logits, end_logits: float [W, S].
      batch_size: B (int64 scalar).

    Returns:
      dict of [B]: ``found`` bool, ``start_token``, ``end_token`` int64
      (global indexes into the context pieces; 0 where not found),
      ``start_logit``, ``end_logit``, ``score`` float64 (-inf where not
      found), ``null_score`` float64 (+inf without windows).
    """
    seq = self.max_seq_length
    k = min(self.n_best_size, seq)
    s64 = tf.cast(start_logits, tf.float64)
    e64 = tf.cast(end_logits, tf.float64)
    # top_k puts the lower index first on ties, as the original's stable sort.
    _, s_idx = tf.math.top_k(tf.cast(start_logits, tf.float32), k=k)
    _, e_idx = tf.math.top_k(tf.cast(end_logits, tf.float32), k=k)
    s_idx = tf.cast(s_idx, tf.int64)
    e_idx = tf.cast(e_idx, tf.int64)
    tok = win["token_index"]
    s_tok = tf.gather(tok, s_idx, batch_dims=1)             # [W, k]
    e_tok = tf.gather(tok, e_idx, batch_dims=1)
    s_max = tf.gather(win["token_is_max_context"], s_idx, batch_dims=1)
    s_ok = (s_tok >= 0) & s_max
    e_ok = e_tok >= 0
    si = s_idx[:, :, None]
    ei = e_idx[:, None, :]
    valid = (s_ok[:, :, None] & e_ok[:, None, :] & (ei >= si) &
             (ei - si + 1 <= self.max_answer_length))      # [W, k, k]
    s_l = tf.gather(s64, s_idx, batch_dims=1)
    e_l = tf.gather(e64, e_idx, batch_dims=1)
    score = s_l[:, :, None] + e_l[:, None, :]
    neg_inf = tf.constant(float("-inf"), tf.float64)
    score = tf.where(valid, score, neg_inf)
    num_w = tf.shape(tok, tf.int64)[0]
    flat_score = tf.reshape(score, [-1])
    flat_valid = tf.reshape(valid, [-1])
    order = tf.range(num_w * k * k, dtype=tf.int64)         # original's order
    cand_example = tf.repeat(win["example"], k * k)
    b32 = tf.cast(batch_size, tf.int32)
    ex32 = tf.cast(cand_example, tf.int32)
    best = tf.math.unsorted_segment_max(tf.where(flat_valid, flat_score, neg_inf),
                                        ex32, b32)
    is_best = flat_valid & (flat_score == tf.gather(best, ex32))
    big = num_w * k * k
    first = tf.math.unsorted_segment_min(tf.where(is_best, order, big), ex32, b32)
    found = first < big
    pick = tf.where(found, first, tf.zeros_like(first))
    w = pick // (k * k)
    rs = (pick // k) % k
    re = pick % k
    # One zero row appended so that examples without a window gather row W.
    w = tf.where(found, w, num_w)
    pad = lambda t: tf.concat(
        [t, tf.zeros(tf.concat([[1], tf.shape(t)[1:]], 0), t.dtype)], 0)
    start_pos = tf.gather_nd(pad(s_idx), tf.stack([w, rs], 1))
    end_pos = tf.gather_nd(pad(e_idx), tf.stack([w, re], 1))
    out = {"found": found}
    out["start_token"] = tf.gather_nd(pad(tok), tf.stack([w, start_pos], 1))
    out["end_token"] = tf.gather_nd(pad(tok), tf.stack([w, end_pos], 1))
    out["start_logit"] = tf.gather_nd(pad(s64), tf.stack([w, start_pos], 1))
    out["end_logit"] = tf.gather_nd(pad(e64), tf.stack([w, end_pos], 1))
    out["score"] = tf.where(found, out["start_logit"] + out["end_logit"], neg_inf)
    null = s64[:, 0] + e64[:, 0]
    out["null_score"] = tf.math.unsorted_segment_min(
        null, tf.cast(win["example"], tf.int32), b32)       # +inf (max float) if none
    has_window = tf.math.unsorted_segment_sum(
        tf.ones_like(win["example"]), tf.cast(win["example"], tf.int32), b32) > 0
    out["null_score"] = tf.where(has_window, out["null_score"],
                                 tf.constant(float("inf"), tf.float64))
    out["has_window"] = has_window
    return out

  # --------------------------------------------------------------- serve

  def answer(self, question, context):
    """The serving computation on flat [B] batches; returns the output dict."""
    question = base.as_batch(question)
    context = self.sanitize_utf8(base.as_batch(context))
    batch = tf.shape(context, tf.int64)[0]
    query_ids = self.preprocessor.tokenize(question)[:, :self.max_query_length]
    ids, start_char, end_char = self.tokenize_context(context)
    win = self.windows(query_ids, ids)
    logits = base.serving_call(self, {
        "input_ids": win["input_ids"], "input_mask": win["input_mask"],
        "segment_ids": win["segment_ids"]})
    best = self.best_spans(win, logits["start_logits"], logits["end_logits"], batch)
    found = best["found"]
    flat_start = start_char.flat_values
    flat_end = end_char.flat_values
    safe = lambda t, i: tf.gather(tf.concat([t, tf.zeros([1], t.dtype)], 0),
                                  tf.where(found, i, tf.shape(t, tf.int64)[0]))
    s_char = tf.where(found, safe(flat_start, best["start_token"]), 0)
    e_char = tf.where(found, safe(flat_end, best["end_token"]), 0)
    out = {"score": tf.cast(best["score"], tf.float32)}
    answer = tf.strings.substr(context, tf.cast(s_char, tf.int32),
                               tf.cast(e_char - s_char, tf.int32), unit="UTF8_CHAR")
    # Windows but no valid span in the n-best: the original's nonce entry
    # ("empty", start and end logits 0), as predictions.json says.
    answer = tf.where(found | ~best["has_window"], answer, NO_SPAN_TEXT)
    if self.version_2_with_negative:
      # Not found: the nonce entry's logits are 0, so the diff is the null
      # score (+inf without any window).
      diff = tf.where(found, best["null_score"] - best["start_logit"] - best["end_logit"],
                      best["null_score"])
      no_answer = diff > self.null_score_diff_threshold
      out["no_answer"] = no_answer
      out["null_score_diff"] = tf.cast(diff, tf.float32)
      s_char = tf.where(no_answer, tf.zeros_like(s_char), s_char)
      e_char = tf.where(no_answer, tf.zeros_like(e_char), e_char)
      answer = tf.where(no_answer, tf.constant(""), answer)
    out["answer"] = answer
    out["start_char"] = tf.cast(s_char, tf.int32)
    out["end_char"] = tf.cast(e_char, tf.int32)
    return out

  def _serve(self, question, context):
    question, context = base.as_batch(question), base.as_batch(context)
    check = tf.debugging.assert_equal(
        tf.size(question), tf.size(context),
        message="question and context must hold the same number of strings")
    with tf.control_dependencies([check]):
      return self.answer(tf.identity(question), tf.identity(context))


def SquadServingModule(model, preprocessor, track_model: bool = True,  # pylint: disable=invalid-name
                       **settings) -> SquadServing:
  """A :class:`SquadServing` from the original ``run_squad.py``'s settings
  (``doc_stride``, ``max_query_length``, ``max_answer_length``,
  ``version_2_with_negative``, ``null_score_diff_threshold``,
  ``n_best_size``, ``max_windows``; defaults :attr:`SquadServing.defaults`).

  Raises:
    errors.ParamsError: inconsistent lengths.
  """
  spec = spec_lib.ServingSpec.create(
      "squad", preprocessor.max_seq_length, do_lower_case=preprocessor.do_lower_case,
      preserve_unused_tokens=bool(getattr(preprocessor, "preserve_unused_tokens", False)),
      **settings)
  return SquadServing(model, preprocessor, spec, track_model=track_model)


def export_squad(model, vocab_file, do_lower_case, export_dir, max_seq_length=384,
                 doc_stride=128, max_query_length=64, max_answer_length=30,
                 version_2_with_negative=False, null_score_diff_threshold=0.0,
                 version=None, n_best_size=20, max_windows=100,
                 preserve_unused_tokens=False):
  """Writes ``export_dir/<version>/``, a SQuAD SavedModel; returns its path.

  Args:
    model: a built question answerer (see :class:`SquadServingModule`).
    vocab_file: the WordPiece vocab (a SavedModel asset).
    do_lower_case: uncased model.
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    max_seq_length, doc_stride, max_query_length, max_answer_length,
      version_2_with_negative, null_score_diff_threshold, n_best_size: the
      original ``run_squad.py`` flags.
    version: integer version; default
      :func:`bert_tf.export.base.next_version`.
    max_windows: windows searched per context at most.
    preserve_unused_tokens: the tokenizer keeps vocab entries ``[unusedN]``
      whole (the original's ``--preserve_unused_tokens``).

  Returns:
    the path of the version directory.

  Raises:
    FileExistsError: that version already exists.
    errors.ParamsError: inconsistent lengths.
    tokenization.VocabError: a bad vocab.
  """
  pre = preprocessing.BertPreprocessor(vocab_file, do_lower_case, max_seq_length,
                                       preserve_unused_tokens=preserve_unused_tokens)
  module = SquadServingModule(
      model, pre, doc_stride=doc_stride, max_query_length=max_query_length,
      max_answer_length=max_answer_length,
      version_2_with_negative=version_2_with_negative,
      null_score_diff_threshold=null_score_diff_threshold,
      n_best_size=n_best_size, max_windows=max_windows)
  return base.write_module(module, export_dir, version)
