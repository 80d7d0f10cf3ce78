"""Exact, memoized WordPiece tokenization of the original's ``FullTokenizer``.

Source: google-research/bert ``tokenization.FullTokenizer`` (the reference
port is :mod:`bert_tf.tokenization`). Tokenization is 59% of the original
``create_pretraining_data.py``'s time; :class:`MemoTokenizer` memoizes it
per whitespace-separated word. The original's cleaning and CJK spacing map
each character independently, and every later step (lower-casing, accent
stripping, punctuation splitting, WordPiece) works on one
whitespace-separated word at a time, so ``tokenize(line)`` is the
concatenation of ``tokenize(word)`` over the words of the cleaned line: the
cache is exact, not an approximation. The original's
``--preserve_unused_tokens`` (the tokenizer's ``preserve_unused_tokens``)
decides per whitespace-separated word too, so it is cached the same way.

TF-free: the pretraining-data worker processes load it.
"""

import re

from bert_tf import tokenization


class _CharMap(dict):
  """``str.translate`` table: the original's per-character cleaning + CJK spacing.

  Filled lazily from the reference ``BasicTokenizer`` (``_clean_text`` then
  ``_tokenize_chinese_chars`` on the single character), so it is the
  original's rule by construction.
  """

  def __init__(self, basic_tokenizer):
    super().__init__()
    self._basic = basic_tokenizer

  def __missing__(self, cp):
    ch = chr(cp)
    out = self._basic._tokenize_chinese_chars(self._basic._clean_text(ch))  # pylint: disable=protected-access
    value = ch if out == ch else out
    self[cp] = value
    return value


# ASCII punctuation as the original defines it (33-47, 58-64, 91-96, 123-126;
# every ASCII character of a Unicode P* category lies in these ranges).
_ASCII_PUNC_SPLIT = re.compile(r"[!-/:-@\[-`{-~]|[^!-/:-@\[-`{-~]+")


_PLAIN_WORD = re.compile(r"^[a-z0-9]+$", re.M)


class MemoTokenizer:
  """Exact, memoized :class:`bert_tf.tokenization.FullTokenizer`.

  ``tokenize(text)`` equals ``full_tokenizer.tokenize(text)`` for every
  string (tested against the reference and the original on real text and on
  generated Unicode). Cleaning (delete NUL, U+FFFD, Cc/Cf; whitespace to a
  space) and CJK spacing are per-character maps, done with one
  ``str.translate``; the cleaned text is split on whitespace and each word's
  WordPiece tokens are computed once by the reference tokenizer and cached.

  Args:
    full_tokenizer: the reference tokenizer (its vocab and case flag).
    max_cache_words: the cache is cleared when it holds this many words, so
      memory stays bounded on corpora with unbounded vocabularies.

  Example:

    >>> tok = MemoTokenizer(tokenization.FullTokenizer("vocab.txt"))
    >>> tok.tokenize("Unaffable words")      # ['una', '##ffa', '##ble', 'words']
    >>> tok.tokenize_to_ids("Unaffable words")  # the same, as vocab ids
  """

  def __init__(self, full_tokenizer: tokenization.FullTokenizer,
               max_cache_words: int = 2_000_000):
    self.full_tokenizer = full_tokenizer
    self.vocab = full_tokenizer.vocab
    self._char_map = _CharMap(full_tokenizer.basic_tokenizer)
    self._tokens = {}
    self._ids = {}
    self._max_cache_words = max_cache_words
    self._preserve = full_tokenizer.preserve_unused_tokens
    self._prefill_ids()

  def _prefill_ids(self):
    """Seeds the id cache with the vocab's whole-word entries.

    A word of ASCII lower-case letters and digits that is itself a vocab
    entry is its own tokenization (cleaning, lower-casing, accent stripping
    and punctuation splitting leave it unchanged; WordPiece's longest match is
    the whole word), and so is its capitalized form when lower-casing. Most
    running words of English text are such words, so most cache misses (a
    reference tokenization each) are gone before the first line.
    """
    lower = self.full_tokenizer.do_lower_case
    max_chars = self.full_tokenizer.wordpiece_tokenizer.max_input_chars_per_word
    vocab, ids = self.vocab, self._ids
    joined = "\n".join(vocab)
    # ASCII lower-case letters and digits only (str.islower() or isdigit()).
    seeded = {w: (vocab[w],) for w in _PLAIN_WORD.findall(joined) if len(w) <= max_chars}
    ids.update(seeded)
    if lower:
      ids.update({w.capitalize(): i for w, i in seeded.items() if not w.isdigit()})

  def _word_tokens(self, word):
    """Tokens of one cleaned, whitespace-free word (a cache miss).

    ASCII words skip what cannot change them (cleaning and CJK spacing were
    done by the translate table; NFD accent stripping is the identity on
    ASCII) and split punctuation with a regex over the original's ASCII
    punctuation set; every other word goes through the reference tokenizer.
    A word that ``preserve_unused_tokens`` keeps (``[unusedN]`` in the vocab)
    is its own token.
    """
    if not word.isascii():
      return self.full_tokenizer.tokenize(word)
    if tokenization.preserve_token(word, self.vocab, self._preserve):
      return [word]
    if self.full_tokenizer.do_lower_case:
      word = word.lower()
    wordpiece = self.full_tokenizer.wordpiece_tokenizer
    wp, vocab = wordpiece.tokenize, self.vocab
    max_chars = wordpiece.max_input_chars_per_word
    out = []
    for piece in _ASCII_PUNC_SPLIT.findall(word):
      # A piece that is itself a vocab entry is its own longest match.
      if len(piece) <= max_chars and piece in vocab:
        out.append(piece)
      else:
        out += wp(piece)
    return out

  def _clean(self, text):
    """The original's cleaning and CJK spacing; printable ASCII is unchanged
    by both, so it skips the (per-character, Python-level) translate."""
    if text.isascii() and text.isprintable():
      return text
    return text.translate(self._char_map)

  def tokenize(self, text):
    """WordPiece token strings of ``text`` (``str`` or UTF-8 ``bytes``): list of str."""
    text = tokenization.convert_to_unicode(text)
    cache = self._tokens
    out = []
    for word in self._clean(text).split():
      toks = cache.get(word)
      if toks is None:
        if len(cache) >= self._max_cache_words:
          cache.clear()
        toks = cache[word] = tuple(self._word_tokens(word))
      out += toks
    return out

  def tokenize_to_ids(self, text):
    """Vocab ids of ``tokenize(text)``: list of int (ids in ``[0, len(vocab))``)."""
    text = tokenization.convert_to_unicode(text)
    cache = self._ids
    words = self._clean(text).split()
    try:  # every word cached (the common case once the cache is warm)
      return [i for word in words for i in cache[word]]
    except KeyError:
      pass
    out = []
    for word in words:
      ids = cache.get(word)
      if ids is None:
        if len(cache) >= self._max_cache_words:
          cache.clear()
        vocab = self.vocab
        ids = cache[word] = tuple(vocab[t] for t in self._word_tokens(word))
      out += ids
    return out
