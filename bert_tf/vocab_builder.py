"""Learns a WordPiece vocabulary from a corpus, in the original BERT layout.

The learner is tensorflow-text's
(``tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset``: BERT's
word splitting, then a frequency-threshold search for the subword set). The
text is first normalized exactly as the reference ``BasicTokenizer``
(``bert_tf.tokenization``) and the in-graph ``BertPreprocessor`` do: the
original's character cleaning, and for uncased vocabs ``str.lower()`` + NFD
+ dropping Mn marks (tensorflow-text's own ``lower_case`` uses NFKC case
folding instead), so the learned pieces are the ones both tokenizers look up.

Output layout (the released uncased/cased vocabs, e.g.
``data/vocab/uncased_vocab.txt``)::

  0          [PAD]
  1..99      [unused0] .. [unused98]
  100..103   [UNK] [CLS] [SEP] [MASK]
  104..      [unused99] .. [unused{num_unused-1}]
  then       the learned tokens (single characters first, then by count)
  then       more [unusedN] if the learner returned fewer tokens than asked,
             so the file has exactly ``vocab_size`` lines.

``num_unused`` (default 994, the original's count) is the number of
``[unusedN]`` slots reserved for later special tokens; at least 99 so that
``[UNK] [CLS] [SEP] [MASK]`` keep the original ids 100-103 (code and
checkpoints that hard-code them keep working). A small vocab for a new domain
may keep just 99.
"""

import logging

import tensorflow as tf
import tensorflow_text as text
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bvd

from bert_tf import errors
from bert_tf import io_utils
from bert_tf import preprocessing
from bert_tf.data.pretraining import documents

ORIGINAL_NUM_UNUSED = 994
NUM_UNUSED_BEFORE_UNK = 99
SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")


VocabBuildError = errors.VocabBuildError  # re-exported; defined in bert_tf.errors


def special_layout(num_unused):
  """The reserved head of the vocab: ``[PAD]``, unused slots, specials.

  Args:
    num_unused: total ``[unusedN]`` slots (>= 99).

  Returns:
    list of ``5 + num_unused`` token strings, ``[PAD]`` at 0, ``[UNK]`` at
    100, ``[CLS]`` 101, ``[SEP]`` 102, ``[MASK]`` 103.

  Raises:
    VocabBuildError: ``num_unused`` < 99.
  """
  if num_unused < NUM_UNUSED_BEFORE_UNK:
    raise VocabBuildError(
        "--num_unused must be at least %d (keeps [UNK] [CLS] [SEP] [MASK] at "
        "the original ids 100-103), got %d" % (NUM_UNUSED_BEFORE_UNK, num_unused))
  head = ["[PAD]"] + ["[unused%d]" % i for i in range(NUM_UNUSED_BEFORE_UNK)]
  head += list(SPECIALS)
  head += ["[unused%d]" % i for i in range(NUM_UNUSED_BEFORE_UNK, num_unused)]
  return head


def normalize(lines, do_lower_case):
  """Reference ``BasicTokenizer`` normalization of a [B] string tensor.

  The same ops as :meth:`bert_tf.preprocessing.BertPreprocessor.normalize`:
  cleaning (invalid UTF-8 replaced, U+FFFD/NUL/Cc/Cf deleted, whitespace to
  spaces), and when ``do_lower_case`` lower-casing, NFD, Mn marks removed.
  """
  s = preprocessing.BertPreprocessor.sanitize(lines)
  if do_lower_case:
    s = tf.strings.lower(s, encoding="utf-8")
    s = text.normalize_utf8(s, "NFD")
    s = tf.strings.regex_replace(s, r"\p{Mn}", "")
  return s


def learn_vocab(input_file, vocab_size, do_lower_case=True,
                num_unused=ORIGINAL_NUM_UNUSED, max_unique_chars=1000,
                min_count=10):
  """Learns a WordPiece vocab with the special tokens in the original's places.

  Args:
    input_file: comma-separated globs of UTF-8 text (any line structure; the
      pretraining corpus format works as is).
    vocab_size: lines of the output vocab (specials and unused slots included).
    do_lower_case: learn an uncased vocab (lower case, accents stripped).
    num_unused: ``[unusedN]`` slots (>= 99; 994 in the original).
    max_unique_chars: alphabet cap of the learner (words with rarer characters
      are not counted; those characters become ``[UNK]``).
    min_count: lower bound of the learner's token-count threshold search.

  Returns:
    list of ``vocab_size`` unique token strings.

  Raises:
    errors.InputError: a glob matches no file (names it), a file cannot be
      read (names it).
    VocabBuildError: ``vocab_size`` too small for the reserved tokens, or
      the corpus holds no word.
  """
  head = special_layout(num_unused)
  if vocab_size < len(head) + 2:
    raise VocabBuildError(
        "--vocab_size=%d leaves no room for learned tokens after %d reserved "
        "ones ([PAD], %d [unusedN], [UNK] [CLS] [SEP] [MASK]); lower --num_unused"
        % (vocab_size, len(head), num_unused))
  files = documents.expand_input_files(input_file)
  # The pretraining reader's lines (stripped, invalid UTF-8 dropped), blank
  # lines skipped.
  lines = tf.data.Dataset.from_generator(
      lambda: documents.iter_lines(files),
      output_signature=tf.TensorSpec([], tf.string))
  lines = lines.batch(1024).map(lambda b: normalize(b, do_lower_case),
                                num_parallel_calls=tf.data.AUTOTUNE)
  if next(iter(lines.take(1)), None) is None:
    raise VocabBuildError("--input_file %r holds no text" % input_file)
  target = vocab_size - len(head)
  learned = bvd.bert_vocab_from_dataset(
      lines, vocab_size=target, reserved_tokens=[],
      bert_tokenizer_params={"lower_case": False},
      learn_params={"max_unique_chars": max_unique_chars, "lower_thresh": min_count})
  reserved = set(head)
  learned = [t for t in learned if t and t not in reserved and not t.isspace()]
  learned = learned[:target]
  vocab = head + learned
  k = num_unused
  while len(vocab) < vocab_size:
    vocab.append("[unused%d]" % k)
    k += 1
  logging.info("learned %d tokens (+%d padding [unusedN]) from %s",
               len(learned), vocab_size - len(head) - len(learned), files)
  return vocab


def build_vocab(input_file, output_file, vocab_size, do_lower_case=True,
                num_unused=ORIGINAL_NUM_UNUSED, max_unique_chars=1000,
                min_count=10):
  """:func:`learn_vocab`, written atomically to ``output_file`` (one per line).

  Returns:
    ``(vocab, number_of_learned_tokens)``.

  Raises:
    as :func:`learn_vocab`.
  """
  vocab = learn_vocab(input_file, vocab_size, do_lower_case, num_unused,
                      max_unique_chars, min_count)
  io_utils.atomic_write_text(output_file, "\n".join(vocab) + "\n")
  num_learned = sum(1 for t in vocab[len(special_layout(num_unused)):]
                    if not (t.startswith("[unused") and t.endswith("]")))
  return vocab, num_learned
