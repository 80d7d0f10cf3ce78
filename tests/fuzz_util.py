"""Strings and settings of the serving fuzz tests (issue 23, item 1).

The contract: every served output equals the in-process reference, "with at
least 200 examples per signature in the slow run and strings up to 2,000
characters from all Unicode categories". Shared by ``test_export.py``,
``test_squad_export.py``, ``test_swag.py`` and ``test_ner.py`` (and the
alphabet by ``test_tokenization.py``):

* :func:`unicode_strings`: UTF-8 bytes of text from every Unicode category
  but Cs, the rare ones drawn on purpose, short and long; or invalid UTF-8;
* :data:`AWKWARD`: one string of each kind the fuzzing must reach, for
  ``@hypothesis.example`` (hypothesis alone draws short strings mostly);
* :func:`fuzz_settings` (the fast runs) and :func:`slow_fuzz` (the slow
  run: :data:`SLOW_EXAMPLES` examples, marked ``slow``), with
  :data:`SLOW_MAX_CHARS` the string length the slow runs draw up to.

Cs (surrogates) is the one category left out: a lone surrogate has no UTF-8
encoding, so no string holding one can reach a ``tf.string`` tensor (or the
tokenizers' input); invalid UTF-8, an encoded surrogate included, comes as
bytes instead.
"""

import hypothesis
from hypothesis import strategies as st
import pytest

SLOW_EXAMPLES = 200  # per test: each example goes through every signature
SLOW_MAX_CHARS = 2000

# The 29 general categories but Cs.
CATEGORIES = ("Cc", "Cf", "Cn", "Co", "Ll", "Lm", "Lo", "Lt", "Lu", "Mc", "Me", "Mn",
              "Nd", "Nl", "No", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "Sc", "Sk",
              "Sm", "So", "Zl", "Zp", "Zs")
# Each alphabet on its own: uniform code points (every category but Cs), then
# the categories and characters a tokenizer treats specially, which uniform
# draws over 1.1 million code points rarely meet.
ALPHABETS = (
    st.characters(exclude_categories=("Cs",)),  # every category but surrogates
    # a category first, then a character of it: the small ones (Lt, Nl, Me,
    # Pc, ...) as often as the large ones
    st.sampled_from(CATEGORIES).flatmap(lambda c: st.characters(categories=(c,))),
    st.characters(categories=("Cn",)),  # unassigned (noncharacters included)
    st.characters(categories=("Cc", "Cf", "Co")),  # controls, format, private use
    st.characters(categories=("Mn", "Mc", "Me")),  # combining marks
    st.characters(categories=("Zs", "Zl", "Zp")),  # separators (NBSP, U+3000, ...)
    # whitespace and controls that Python, the original and ICU disagree on
    st.sampled_from(" \t\n\r\x0b\x0c\x1c\x1f\x85\u200b\u2028\ufeff\ufffd\x00"),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # CJK
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),  # emoji
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),  # printable ASCII
    st.sampled_from("abcdefghijklmnopqrstuvwxyz ABCXYZ.,'?-"))  # word-like
# Any of them, character by character.
CHARS = st.one_of(*ALPHABETS)
WORDS = ("the", "of", "Paris", "New", "York", "café", "naïve", "Zürich", "@user",
         "#tag", "http://t.co/x", "don't", "U.S.", "3.5", "日本語", "😀")

# One string of each kind the fuzzing must reach: accents and combining
# marks, CJK, emoji (with ZWJ), unassigned and noncharacters, controls,
# format and private-use characters, separators, the whitespace-like
# controls, invalid UTF-8, and a long mixed text (2,000 characters).
AWKWARD = [
    "Caf\u00e9 na\u0131\u0308ve e\u0301\u0300 \u20dd Z\u00fcrich".encode(),
    "\u6771\u4eac\u306f\u5927\u304d\u3044 \u5317\u4eac".encode(),
    "emoji \U0001F600\U0001F468\u200d\U0001F469\u200d\U0001F467 ok\U0001FAE0".encode(),
    "\u0378\u0380 \U000E0080 \uffff \U0010FFFE \ufdd0 x".encode(),  # Cn
    "a\x00b\x07\x1b[0m \u200b\u200e\u2066 \ue000\U000F0000".encode(),  # Cc Cf Co
    "x\u00a0y\u3000z\u2028w\u2029v\u2003u".encode(),  # Zs Zl Zp
    "a\x1cb\x1fc\x85d\ufeffe\ufffd f\x0b\x0cg\r\nh".encode(),  # whitespace-like controls
    b"\xff\xfe bad \xc3 bytes \x80 \xed\xa0\x80",  # invalid UTF-8 (an encoded surrogate)
    ("Ab\u00e7 \u6771\U0001F600\u0301 \u0378\x01 " * 150)[:SLOW_MAX_CHARS].encode(),
]

_HEALTH = [hypothesis.HealthCheck.function_scoped_fixture,  # the fixtures are read-only
           hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.data_too_large,
           hypothesis.HealthCheck.large_base_example]


def _mix(pieces, rng, size):
  """``size`` characters of ``pieces`` chosen by ``rng``, one after another."""
  out, n = [], 0
  while n < size:
    piece = rng.choice(pieces)
    out.append(piece)
    n += len(piece)
  return "".join(out)[:size]


def long_text(min_size, max_size):
  """A strategy for text of ``min_size`` to ``max_size`` characters: up to 48
  pieces of 1-8 :data:`CHARS` characters each (drawn by hypothesis, which
  shrinks them), strung together in an order a hypothesis-seeded
  ``random.Random`` picks; the pieces carry the same alphabets. Drawn one
  character at a time through hypothesis, 1,000-2,000 characters took two
  thirds of a slow fuzz test (14 of 21 s for SWAG's 200 examples) and
  mostly overran hypothesis' buffer, so those draws were thrown away: of
  460 strings of a 200-example run 77 had 1,000+ characters (mean 307);
  with this strategy 208 of 487 (mean 686), drawn in 2.6 s instead of 14
  (2026-11-29).
  """
  pieces = st.lists(st.text(CHARS, min_size=1, max_size=8), min_size=1, max_size=48)
  return st.builds(_mix, pieces, st.randoms(use_true_random=False),
                   st.integers(min_size, max_size))


def unicode_strings(max_size):
  """A strategy for one string, as UTF-8 bytes, of at most ``max_size``
  characters (text) or bytes (raw), one of these kinds:

  * text of :data:`CHARS` (any alphabet, character by character);
  * runs of one alphabet of :data:`ALPHABETS` each (up to 12), so that the
    rare ones show up in few examples;
  * long text: :func:`long_text` of ``max_size // 2`` characters or more,
    or such runs repeated up to ``max_size`` characters;
  * words (:data:`WORDS` and short :data:`CHARS` text) joined by spaces;
  * raw bytes, or text with up to 8 bytes >= 0x80 spliced in (invalid
    UTF-8 amid real text).

  Args:
    max_size: the most characters of a text / bytes of a raw string (>= 1).

  Returns:
    a strategy of ``bytes``.
  """
  run = st.one_of(*[st.text(a, min_size=1, max_size=max(1, max_size // 4))
                    for a in ALPHABETS])
  runs = st.lists(run, max_size=12).map("".join)
  text = st.one_of(
      st.text(CHARS, max_size=max_size),
      runs,
      long_text(max_size // 2, max_size),
      st.builds(lambda t, n: t * n, st.lists(run, min_size=1, max_size=12).map("".join),
                st.integers(1, max_size)),
      st.lists(st.one_of(st.sampled_from(WORDS), st.text(CHARS, max_size=8)),
               max_size=max(1, max_size // 8)).map(" ".join))
  # bytes >= 0x80: stray continuation and lead bytes, almost never valid
  junk = st.lists(st.integers(0x80, 0xFF), min_size=1, max_size=min(8, max_size)).map(bytes)

  def splice(t, b, at):
    t = t[:max_size - len(b)]
    at = at % (len(t) + 1)
    return t[:at].encode("utf-8") + b + t[at:].encode("utf-8")

  return st.one_of(text.map(lambda t: t[:max_size].encode("utf-8")),
                   st.binary(max_size=max_size),
                   st.builds(splice, text, junk, st.integers(0, max_size)))


def fuzz_settings(max_examples):
  """``hypothesis.settings`` of a fuzz test: ``max_examples``, no deadline (a
  served call takes 10 ms to seconds), no health checks on generation speed,
  size or function-scoped fixtures (the fixtures are read-only)."""
  return hypothesis.settings(max_examples=max_examples, deadline=None,
                             suppress_health_check=_HEALTH)


def slow_fuzz(test):
  """Decorator (above ``@hypothesis.given``) of the slow run: marked
  ``slow``, :data:`SLOW_EXAMPLES` examples, as :func:`fuzz_settings`."""
  return pytest.mark.slow(fuzz_settings(SLOW_EXAMPLES)(test))
