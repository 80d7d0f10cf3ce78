r"""The reference Python WordPiece tokenizer, with the original's exact behaviour.

Source: google-research/bert ``tokenization.py`` (``FullTokenizer`` =
``BasicTokenizer`` + ``WordpieceTokenizer``), run under Python 3. Every rule
here (cleaning, CJK spacing, lower-casing with accent stripping, punctuation
splitting, greedy longest-match WordPiece with a 200-character word limit) is
the original's.

This is the tokenizer that ``tools/create_pretraining_data.py`` uses (so its
output is record-for-record identical to the original's). Fine-tuning and
serving use the in-graph tensorflow-text tokenizer in
:mod:`bert_tf.preprocessing`; BUILD_NOTES.md documents how the two differ.

``preserve_unused_tokens`` (``FullTokenizer``, ``BasicTokenizer``) is the
original's ``--preserve_unused_tokens`` (google-research/bert master and
``bert-tensorflow==1.0.4``): a whitespace-separated word (after cleaning and
CJK spacing, before lower-casing) that matches ``^\[unused\d+\]$`` and is in
the vocab is kept whole, neither lower-cased, split on punctuation nor
WordPiece-split; the usual way to add domain words to a released vocab. The
original reads a global absl flag that its ``tokenization`` module defines on
import; here it is an argument (the tools define the flag).
"""

import collections
import logging
import os
import re
import unicodedata

from typing import List, Sequence

from bert_tf import errors

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# What BERT needs: pretraining data also masks with [MASK].
REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
# What tokenizing and packing inputs needs (FullTokenizer's check): the
# original's FullTokenizer accepts a vocab without [MASK].
TOKENIZER_TOKENS = ("[UNK]", "[CLS]", "[SEP]")

# The original's rule for a token kept whole by --preserve_unused_tokens.
_UNUSED_TOKEN_RE = re.compile("^\\[unused\\d+\\]$")


VocabError = errors.VocabError  # re-exported; defined in bert_tf.errors


def convert_to_unicode(text):
  """Returns ``text`` as ``str``; bytes are decoded as UTF-8, bad bytes dropped.

  Matches the original ``convert_to_unicode`` (``errors="ignore"``).

  Raises:
    ValueError: ``text`` is neither ``str`` nor ``bytes``.
  """
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError("Unsupported string type: %s" % type(text))


def load_vocab(vocab_file):
  """Reads a vocab file into an ordered ``{token: id}`` dict.

  One token per line, stripped of surrounding whitespace; id = line number
  (0-based), the row of the embedding table and the id that the in-graph
  tensorflow-text table gives. A token on two lines is refused: no id can
  be right for it (google-research/bert master keeps the last line's id,
  ``bert-tensorflow==1.0.4`` keeps the first and renumbers every later
  token, misaligning them with the embedding rows, and tensorflow-text's
  table refuses to load), and it is what a vocab cut mid-line looks like.

  Args:
    vocab_file: path of a UTF-8 text file.

  Returns:
    ``collections.OrderedDict`` mapping ``str`` token to ``int`` id.

  Raises:
    VocabError: the file is missing, unreadable, or empty; or a token is on
      two lines (the message names the file, the token and both lines).
  """
  vocab = collections.OrderedDict()
  try:
    with open(vocab_file, "rb") as reader:
      lines = reader.read().split(b"\n")
  except OSError as e:
    raise VocabError("cannot read vocab file %r: %s" % (vocab_file, e)) from e
  cut = lines[-1] != b""  # no final newline: maybe cut mid-line
  if not cut:
    lines.pop()  # readline() semantics: a trailing newline adds no line.
  if not lines:  # an empty file (b"".split() is [b""], popped above)
    raise VocabError("vocab file %r is empty" % vocab_file)
  # Decoding the joined lines equals decoding each line: "\n" is never part of
  # a (valid or dropped) UTF-8 sequence.
  tokens = [t.strip() for t in convert_to_unicode(b"\n".join(lines)).split("\n")]
  for index, token in enumerate(tokens):
    if token in vocab:
      raise VocabError(
          "%s line %d: duplicate vocab token %r (also on line %d); every line must "
          "be a distinct token (id = line number)%s" % (
              os.fspath(vocab_file), index + 1, token, vocab[token] + 1,
              ": the file ends mid-line, copy the whole vocab file"
              if cut and index == len(tokens) - 1 else ""))
    vocab[token] = index
  if not vocab:
    raise VocabError("vocab file %r is empty" % vocab_file)
  return vocab


def check_vocab(vocab, vocab_file="<vocab>",
                required: Sequence[str] = REQUIRED_TOKENS) -> None:
  """Checks that ``vocab`` holds the special tokens ``required``.

  Args:
    vocab: ``{token: id}`` (or any container of tokens).
    vocab_file: the file's name, for the message.
    required: default every token BERT needs (``[UNK] [CLS] [SEP] [MASK]``:
      the pretraining data); :data:`TOKENIZER_TOKENS` for tokenizing alone.

  Raises:
    VocabError: naming ``vocab_file`` and the missing tokens among
      ``required``; the message also names any other missing BERT token
      (``[MASK]``) and what needs it.
  """
  missing = [t for t in required if t not in vocab]
  if missing:
    also = [t for t in REQUIRED_TOKENS if t not in vocab and t not in missing]
    raise VocabError("vocab file %r lacks the required token(s) %s%s" %
                     (vocab_file, " ".join(missing),
                      " (and %s, which pretraining needs)" % " ".join(also)
                      if also else ""))


def preserve_token(token: str, vocab, preserve_unused_tokens: bool) -> bool:
  r"""True when ``token`` is kept whole by ``--preserve_unused_tokens``.

  Source: original ``tokenization.preserve_token`` (google-research/bert
  master, ``bert-tensorflow==1.0.4``), which reads the global flag
  ``FLAGS.preserve_unused_tokens``; here the flag's value is an argument.

  Args:
    token: one whitespace-separated, cleaned word (``str``).
    vocab: ``{token: id}`` (any container of tokens).
    preserve_unused_tokens: the option; False -> always False.

  Returns:
    ``preserve_unused_tokens and token in vocab and`` ``token`` matches
    ``^\[unused\d+\]$`` (Python ``re``: ``\d`` is any Unicode digit).
  """
  if not preserve_unused_tokens:
    return False
  if token not in vocab:
    return False
  return bool(_UNUSED_TOKEN_RE.search(token))


def convert_by_vocab(vocab, items):
  """Maps each item through ``vocab`` (raises ``KeyError`` on a missing one)."""
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens: Sequence[str]) -> List[int]:
  """Token strings -> ids through ``vocab`` (``{token: id}``).

  Source: original ``tokenization.convert_tokens_to_ids``.

  Raises:
    KeyError: a token not in ``vocab``.
  """
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids: Sequence[int]) -> List[str]:
  """Ids -> token strings through ``inv_vocab`` (``{id: token}``).

  Source: original ``tokenization.convert_ids_to_tokens``.

  Raises:
    KeyError: an id not in ``inv_vocab``.
  """
  return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
  """Strips ``text`` and splits it on whitespace (``str.split()``)."""
  text = text.strip()
  if not text:
    return []
  return text.split()


class FullTokenizer:
  """End-to-end tokenization: basic tokenization, then WordPiece.

  Source: original ``tokenization.FullTokenizer`` (google-research/bert
  master; ``preserve_unused_tokens`` is its global ``--preserve_unused_tokens``
  flag).

  Args:
    vocab_file: path of the vocab (see :func:`load_vocab`).
    do_lower_case: lower-case and strip accents (uncased models).
    check_special_tokens: raise if ``[UNK] [CLS] [SEP]`` are missing
      (:data:`TOKENIZER_TOKENS`; like the original, a vocab without
      ``[MASK]`` is accepted: the pretraining-data code checks it itself).
    preserve_unused_tokens: keep vocab entries ``[unusedN]`` whole (see
      :func:`preserve_token`).

  Raises:
    VocabError: the vocab file is missing, unreadable, empty or incomplete.
  """

  def __init__(self, vocab_file, do_lower_case: bool = True,
               check_special_tokens: bool = True,
               preserve_unused_tokens: bool = False):
    self.vocab_file = vocab_file
    self.vocab = load_vocab(vocab_file)
    if check_special_tokens:
      check_vocab(self.vocab, vocab_file, TOKENIZER_TOKENS)
    self.inv_vocab = {v: k for k, v in self.vocab.items()}
    self.do_lower_case = do_lower_case
    self.preserve_unused_tokens = bool(preserve_unused_tokens)
    self.basic_tokenizer = BasicTokenizer(
        do_lower_case=do_lower_case, vocab=self.vocab,
        preserve_unused_tokens=self.preserve_unused_tokens)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

  def tokenize(self, text) -> List[str]:
    """Returns the list of WordPiece token strings of ``text`` (str or bytes)."""
    split_tokens = []
    preserve = self.preserve_unused_tokens
    for token in self.basic_tokenizer.tokenize(text):
      if preserve_token(token, self.vocab, preserve):
        split_tokens.append(token)
        continue
      for sub_token in self.wordpiece_tokenizer.tokenize(token):
        split_tokens.append(sub_token)
    return split_tokens

  def convert_tokens_to_ids(self, tokens):
    """Token strings -> list of int ids (``KeyError`` for an unknown token)."""
    return convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    """Int ids -> list of token strings."""
    return convert_by_vocab(self.inv_vocab, ids)


class BasicTokenizer:
  """Cleaning, CJK spacing, optional lower-casing, punctuation splitting.

  Source: original ``tokenization.BasicTokenizer`` (google-research/bert
  master: ``vocab`` and the ``--preserve_unused_tokens`` flag).

  Args:
    do_lower_case: lower-case and strip accents.
    vocab: a container of tokens that ``preserve_unused_tokens`` may keep
      whole (the original's ``vocab``, "tokens to not mutate").
    preserve_unused_tokens: keep a word that :func:`preserve_token` accepts
      as it is (no lower-casing, no punctuation splitting).
  """

  def __init__(self, do_lower_case: bool = True, vocab=(),
               preserve_unused_tokens: bool = False):
    self.do_lower_case = do_lower_case
    self.vocab = vocab
    self.preserve_unused_tokens = bool(preserve_unused_tokens)

  def tokenize(self, text) -> List[str]:
    """Returns the list of basic tokens (``str``) of ``text``."""
    text = convert_to_unicode(text)
    text = self._clean_text(text)
    text = self._tokenize_chinese_chars(text)
    orig_tokens = whitespace_tokenize(text)
    split_tokens = []
    preserve = self.preserve_unused_tokens
    for token in orig_tokens:
      if preserve_token(token, self.vocab, preserve):
        split_tokens.append(token)
        continue
      if self.do_lower_case:
        token = token.lower()
        token = self._run_strip_accents(token)
      split_tokens.extend(self._run_split_on_punc(token))
    return whitespace_tokenize(" ".join(split_tokens))

  def _run_strip_accents(self, text):
    text = unicodedata.normalize("NFD", text)
    return "".join(c for c in text if unicodedata.category(c) != "Mn")

  def _run_split_on_punc(self, text):
    chars = list(text)
    i = 0
    start_new_word = True
    output = []
    while i < len(chars):
      char = chars[i]
      if _is_punctuation(char):
        output.append([char])
        start_new_word = True
      else:
        if start_new_word:
          output.append([])
        start_new_word = False
        output[-1].append(char)
      i += 1
    return ["".join(x) for x in output]

  def _tokenize_chinese_chars(self, text):
    output = []
    for char in text:
      if _is_chinese_char(ord(char)):
        output.append(" ")
        output.append(char)
        output.append(" ")
      else:
        output.append(char)
    return "".join(output)

  def _clean_text(self, text):
    output = []
    for char in text:
      cp = ord(char)
      if cp == 0 or cp == 0xfffd or _is_control(char):
        continue
      if _is_whitespace(char):
        output.append(" ")
      else:
        output.append(char)
    return "".join(output)


class WordpieceTokenizer:
  """Greedy longest-match-first WordPiece with ``##`` continuations.

  Source: original ``tokenization.WordpieceTokenizer``. A word longer than
  ``max_input_chars_per_word`` characters, or with any piece not in the
  vocab, becomes ``unk_token`` as a whole.
  """

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def tokenize(self, text):
    """Returns the WordPiece tokens of already basic-tokenized ``text``."""
    text = convert_to_unicode(text)
    output_tokens = []
    for token in whitespace_tokenize(text):
      chars = list(token)
      if len(chars) > self.max_input_chars_per_word:
        output_tokens.append(self.unk_token)
        continue
      is_bad = False
      start = 0
      sub_tokens = []
      while start < len(chars):
        end = len(chars)
        cur_substr = None
        while start < end:
          substr = "".join(chars[start:end])
          if start > 0:
            substr = "##" + substr
          if substr in self.vocab:
            cur_substr = substr
            break
          end -= 1
        if cur_substr is None:
          is_bad = True
          break
        sub_tokens.append(cur_substr)
        start = end
      if is_bad:
        output_tokens.append(self.unk_token)
      else:
        output_tokens.extend(sub_tokens)
    return output_tokens


def _is_whitespace(char):
  if char in (" ", "\t", "\n", "\r"):
    return True
  return unicodedata.category(char) == "Zs"


def _is_control(char):
  if char in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
  cp = ord(char)
  if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
    return True
  return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
  return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or
          (0x20000 <= cp <= 0x2A6DF) or (0x2A700 <= cp <= 0x2B73F) or
          (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF) or
          (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))


def vocab_looks_cased(vocab):
  """True when the vocab holds upper-case word pieces (a cased model's vocab).

  Used to warn about ``--do_lower_case=True`` with a cased vocab; the
  original warns on the checkpoint name (``validate_case_matches_checkpoint``).
  """
  count = 0
  for token in vocab:
    if token.startswith("[") and token.endswith("]"):
      continue
    if any(c.isupper() for c in token):
      count += 1
      if count >= 100:
        return True
  return False


# The released checkpoints whose casing the original knows by name
# (google-research/bert tokenization.validate_case_matches_checkpoint).
LOWER_CASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                      "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                "multi_cased_L-12_H-768_A-12")


def validate_case_matches_checkpoint(do_lower_case: bool, init_checkpoint) -> bool:
  """Warns when ``--do_lower_case`` contradicts a released checkpoint's name.

  The original's check (same name, same rule: the directory name before
  ``/bert_model.ckpt``, e.g. ``uncased_L-12_H-768_A-12``), which raises
  ``ValueError`` and tells the user to comment the check out if it is
  wrong; here it logs a warning with the fix instead (a heuristic the user
  cannot switch off must not stop a run).

  Returns:
    True when it warned.
  """
  if not init_checkpoint:
    return False
  m = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", os.fspath(init_checkpoint))
  if m is None:
    return False
  name = m.group(1)
  if name in LOWER_CASED_MODELS and not do_lower_case:
    flag, kind, fix = "False", "lowercased", "True"
  elif name in CASED_MODELS and do_lower_case:
    flag, kind, fix = "True", "cased", "False"
  else:
    return False
  logging.warning(
      "--do_lower_case=%s with --init_checkpoint=%s, but %s is a %s model: pass "
      "--do_lower_case=%s so that fine-tuning tokenizes as the model was "
      "pretrained", flag, os.fspath(init_checkpoint), name, kind, fix)
  return True


def warn_if_case_mismatch(vocab, do_lower_case, vocab_file):
  """Logs a warning when the case flag disagrees with what the vocab holds."""
  cased = vocab_looks_cased(vocab)
  if cased and do_lower_case:
    logging.warning(
        "vocab %s looks cased but --do_lower_case=True: upper-case pieces will "
        "never be produced. Pass --do_lower_case=False for a cased model.",
        os.fspath(vocab_file))
  elif not cased and not do_lower_case:
    logging.warning(
        "vocab %s looks uncased but --do_lower_case=False: upper-case words "
        "will mostly become [UNK]. Pass --do_lower_case=True for an uncased "
        "model.", os.fspath(vocab_file))
