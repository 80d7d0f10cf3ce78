"""Faithful pretraining data: the original's records, record for record, fast.

Source: google-research/bert ``create_pretraining_data.py`` (bert-tensorflow
1.0.4, plus master's ``--do_whole_word_mask``): ``create_training_instances``,
``create_instances_from_document``, ``create_masked_lm_predictions``,
``truncate_seq_pair``. For the same input files, vocab, flags and seed the
records written here equal the original's, feature for feature
(``tests/test_pretraining_data.py`` runs the real original beside it).
Three changes that cannot alter the output:

* tokenization is memoized per word
  (:class:`bert_tf.data.pretraining.tokens.MemoTokenizer`, exact);
* instances are built on token ids, not strings, and the random calls are
  inlined: ``randint(a, b)`` is ``a + _randbelow(b - a + 1)`` and ``shuffle``
  is Fisher-Yates over ``_randbelow(i + 1)``, exactly as CPython's
  ``random.py`` implements them (checked against the interpreter's own
  ``random.Random`` on first use; on a mismatch the stdlib methods are used);
* records are encoded right after each instance is made
  (:class:`bert_tf.data.pretraining.records.RecordEncoder`); the final
  ``rng.shuffle`` permutes the encoded records, a list of the same length as
  the original's instance list, so the permutation is the same.

The whole corpus and every record are held in memory, as in the original
(:mod:`bert_tf.data.pretraining.sharded` streams instead). TF-free.
"""

import functools
import logging
import os
import random
import time
from typing import Callable, Dict, List, Optional, Tuple

from bert_tf import errors
from bert_tf import tokenization
from bert_tf.data.pretraining import documents as documents_lib
from bert_tf.data.pretraining import records as records_lib
from bert_tf.data.pretraining import tokens as tokens_lib

InputError = errors.InputError


# ---------------------------------------------------------------------------
# The random stream


def _randbelow(getrandbits, n):
  """CPython ``Random._randbelow_with_getrandbits(n)``: int in ``[0, n)``."""
  k = n.bit_length()
  r = getrandbits(k)
  while r >= n:
    r = getrandbits(k)
  return r


_BITS = [n.bit_length() for n in range(4097)]


def _shuffle(x, getrandbits):
  """CPython ``Random.shuffle(x)`` (Fisher-Yates, same draws), in place."""
  bits = _BITS if len(x) < len(_BITS) else [n.bit_length() for n in range(len(x) + 1)]
  for i in range(len(x) - 1, 0, -1):
    k = bits[i + 1]
    j = getrandbits(k)
    while j > i:
      j = getrandbits(k)
    x[i], x[j] = x[j], x[i]


def _inlined_rng_matches_stdlib():
  """True when the inlined draws equal this interpreter's ``random.Random``."""
  for seed in (0, 1, 12345):
    a, b = random.Random(seed), random.Random(seed)
    for n in (1, 2, 3, 5, 7, 64, 127, 128, 129, 1000, 30522):
      if a.randint(0, n - 1) != _randbelow(b.getrandbits, n):
        return False
      if a.randint(2, n + 2) != 2 + _randbelow(b.getrandbits, n + 1):
        return False
      x, y = list(range(n)), list(range(n))
      a.shuffle(x)
      _shuffle(y, b.getrandbits)
      if x != y or a.random() != b.random():
        return False
  return True


@functools.cache
def inlined_rng_ok() -> bool:
  """True when the inlined draws equal this interpreter's ``random.Random``
  (checked on first use, once per process: the check takes ~0.1 s, kept off
  import); False means the stdlib methods are used."""
  ok = _inlined_rng_matches_stdlib()
  if not ok:  # pragma: no cover (a future CPython changed random.py)
    logging.warning("random.Random differs from the inlined copy; using its methods")
  return ok


# ---------------------------------------------------------------------------
# Instance creation


class _Context:
  """Per-run constants of the faithful instance builder."""

  def __init__(self, vocab, rng, max_seq_length, short_seq_prob, masked_lm_prob,
               max_predictions_per_seq, do_whole_word_mask, encoder):
    vocab_words = list(vocab.keys())
    self.rand_ids = [vocab[w] for w in vocab_words]
    self.num_words = len(vocab_words)
    inv = {}
    for w, i in vocab.items():
      inv[i] = w
    self.continuation = bytearray(max(vocab.values()) + 1)
    for i, w in inv.items():
      if w.startswith("##"):
        self.continuation[i] = 1
    self.cls_id = vocab["[CLS]"]
    self.sep_id = vocab["[SEP]"]
    self.mask_id = vocab["[MASK]"]
    self.rng = rng
    self.max_seq_length = max_seq_length
    self.short_seq_prob = short_seq_prob
    self.masked_lm_prob = masked_lm_prob
    self.max_predictions_per_seq = max_predictions_per_seq
    self.do_whole_word_mask = do_whole_word_mask
    self.encoder = encoder


def _records_from_document(ctx, all_documents, document_index, out):
  """Appends the encoded instances of one document for one pass to ``out``.

  Same control flow and random draws as the original
  ``create_instances_from_document`` + ``truncate_seq_pair`` +
  ``create_masked_lm_predictions`` (the tests compare the records with the
  real original's).
  """
  rng = ctx.rng
  rand = rng.random
  getrandbits = rng.getrandbits
  if inlined_rng_ok():
    randbelow = lambda n: _randbelow(getrandbits, n)  # pylint: disable=unnecessary-lambda-assignment
    shuffle = lambda x: _shuffle(x, getrandbits)  # pylint: disable=unnecessary-lambda-assignment
  else:  # pragma: no cover
    randbelow = lambda n: rng.randint(0, n - 1)  # pylint: disable=unnecessary-lambda-assignment
    shuffle = rng.shuffle
  document = all_documents[document_index]
  num_docs = len(all_documents)
  max_num_tokens = ctx.max_seq_length - 3
  target_seq_length = max_num_tokens
  if rand() < ctx.short_seq_prob:
    target_seq_length = 2 + randbelow(max_num_tokens - 1)
  masked_lm_prob = ctx.masked_lm_prob
  max_pred = ctx.max_predictions_per_seq
  wwm = ctx.do_whole_word_mask
  cont = ctx.continuation
  mask_id = ctx.mask_id
  rand_ids = ctx.rand_ids
  num_words = ctx.num_words
  encode = ctx.encoder.encode
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = 1 + randbelow(len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a += current_chunk[j]
        tokens_b = []
        if len(current_chunk) == 1 or rand() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = randbelow(num_docs)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = randbelow(len(random_document))
          for j in range(random_start, len(random_document)):
            tokens_b += random_document[j]
            if len(tokens_b) >= target_b_length:
              break
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          for j in range(a_end, len(current_chunk)):
            tokens_b += current_chunk[j]
        # truncate_seq_pair
        while len(tokens_a) + len(tokens_b) > max_num_tokens:
          trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
          if rand() < 0.5:
            del trunc[0]
          else:
            trunc.pop()
        la = len(tokens_a)
        lb = len(tokens_b)
        assert la >= 1 and lb >= 1
        ids = [ctx.cls_id]
        ids += tokens_a
        ids.append(ctx.sep_id)
        ids += tokens_b
        ids.append(ctx.sep_id)
        n = la + lb + 3
        num_to_predict = min(max_pred, max(1, int(round(n * masked_lm_prob))))
        if not wwm:
          # Candidates: every position but [CLS], the middle and the final
          # [SEP] (the tokenizer never emits "[CLS]"/"[SEP]": it splits the
          # brackets off as punctuation).
          cand = list(range(1, la + 1))
          cand += range(la + 2, n - 1)
          shuffle(cand)
          chosen = cand[:num_to_predict]
        else:
          cand = []
          for index in range(1, n - 1):
            if index == la + 1:
              continue
            if cand and cont[ids[index]]:
              cand[-1].append(index)
            else:
              cand.append([index])
          shuffle(cand)
          chosen = []
          for index_set in cand:
            if len(chosen) >= num_to_predict:
              break
            if len(chosen) + len(index_set) > num_to_predict:
              continue
            # Groups are disjoint, so no index is ever already covered.
            chosen += index_set
        # The 80/10/10 rule, once for both paths. Choosing the positions
        # draws nothing after the shuffle, so drawing here, in the order the
        # positions were chosen, is the original's order of draws.
        out_ids = ids[:]
        for index in chosen:
          if rand() < 0.8:
            out_ids[index] = mask_id
          elif rand() < 0.5:
            pass
          else:
            out_ids[index] = rand_ids[randbelow(num_words)]
        chosen.sort()
        out.append(encode(out_ids, la, chosen, [ids[p] for p in chosen],
                          is_random_next))
      current_chunk = []
      current_length = 0
    i += 1


def create_records(all_documents: List[List[List[int]]], vocab: Dict[str, int],
                   rng: random.Random, max_seq_length: int = 128,
                   dupe_factor: int = 10, short_seq_prob: float = 0.1,
                   masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20,
                   do_whole_word_mask: bool = False,
                   progress: Optional[Callable[[int, int], None]] = None) -> List[bytes]:
  """Every record of the corpus, in the original's final (shuffled) order.

  Args:
    all_documents: documents of token ids
      (:func:`bert_tf.data.pretraining.documents.read_documents`), shuffled
      here in place.
    vocab: ``{token: id}`` of the tokenizer (``vocab_words`` is its keys, in
      order, as in the original).
    rng: ``random.Random(random_seed)``.
    progress: optional callable ``(done_documents, total_documents)``.

  Returns:
    list of serialized ``tf.train.Example`` (bytes).

  Raises:
    InputError: no document, or ``max_seq_length`` < 5.
  """
  if not all_documents:
    raise InputError("the input files hold no text that tokenizes to anything")
  if max_seq_length < 5:
    raise InputError("--max_seq_length must be at least 5, got %d" % max_seq_length)
  encoder = records_lib.RecordEncoder(max(vocab.values()), max_seq_length, max_predictions_per_seq)
  ctx = _Context(vocab, rng, max_seq_length, short_seq_prob, masked_lm_prob,
                 max_predictions_per_seq, do_whole_word_mask, encoder)
  rng.shuffle(all_documents)
  records = []
  total = dupe_factor * len(all_documents)
  done = 0
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      _records_from_document(ctx, all_documents, document_index, records)
      done += 1
      if progress is not None:
        progress(done, total)
  rng.shuffle(records)
  return records


def create_pretraining_data(input_file: str, output_file: str, vocab_file: str,
                            do_lower_case: bool = True, do_whole_word_mask: bool = False,
                            max_seq_length: int = 128, max_predictions_per_seq: int = 20,
                            random_seed: int = 12345, dupe_factor: int = 10,
                            masked_lm_prob: float = 0.15, short_seq_prob: float = 0.1,
                            progress: Optional[Callable[[int, int], None]] = None,
                            timings: Optional[dict] = None,
                            preserve_unused_tokens: bool = False) -> Tuple[int, int, List[str]]:
  """The whole faithful pipeline: read, tokenize, create, write.

  Source: the original's ``main``. Args mirror its flags; ``input_file`` is
  comma-separated globs (each glob's files in directory order, as
  ``tf.gfile.Glob``), ``output_file`` comma-separated paths (records
  round-robin over them, each written under a temporary name and renamed
  when all are whole).

  Args:
    progress: optional callable ``(done_documents, total_documents)``.
    timings: optional dict; receives seconds spent in ``read_tokenize``,
      ``create`` and ``write``.
    preserve_unused_tokens: the original's ``--preserve_unused_tokens``
      (vocab entries ``[unusedN]`` in the text stay whole tokens).

  Returns:
    ``(num_documents, num_instances, output_files)``.

  Raises:
    InputError / tokenization.VocabError: bad files or flags, naming them
      (a vocab without ``[UNK] [CLS] [SEP] [MASK]``, which the records need).
  """
  if max_predictions_per_seq < 1:
    raise InputError("--max_predictions_per_seq must be >= 1")
  if not 0.0 < masked_lm_prob < 1.0:
    raise InputError("--masked_lm_prob must be in (0, 1)")
  if dupe_factor < 1:
    raise InputError("--dupe_factor must be >= 1")
  tokenizer = tokenization.FullTokenizer(
      vocab_file, do_lower_case, preserve_unused_tokens=preserve_unused_tokens)
  tokenization.check_vocab(tokenizer.vocab, vocab_file)  # masking needs [MASK]
  tokenization.warn_if_case_mismatch(tokenizer.vocab, do_lower_case, vocab_file)
  input_files = documents_lib.expand_input_files(input_file, directory_order=True)
  output_files = [p.strip() for p in output_file.split(",") if p.strip()]
  if not output_files:
    raise InputError("--output_file is empty")
  for p in output_files:
    os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
  t0 = time.perf_counter()
  rng = random.Random(random_seed)
  memo = tokens_lib.MemoTokenizer(tokenizer)
  all_documents = documents_lib.read_documents(input_files, memo.tokenize_to_ids)
  t1 = time.perf_counter()
  num_documents = len(all_documents)
  records = create_records(all_documents, tokenizer.vocab, rng, max_seq_length,
                           dupe_factor, short_seq_prob, masked_lm_prob,
                           max_predictions_per_seq, do_whole_word_mask, progress)
  t2 = time.perf_counter()
  n = records_lib.write_records(records, output_files)
  t3 = time.perf_counter()
  if timings is not None:
    timings.update(read_tokenize=t1 - t0, create=t2 - t1, write=t3 - t2)
  return num_documents, n, output_files
