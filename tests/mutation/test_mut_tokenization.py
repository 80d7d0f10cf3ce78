"""bert_tf.tokenization against the original google-research/bert code (TF-free).

Reference: the installed ``bert/tokenization.py`` of PyPI bert-tensorflow
1.0.4, executed without TensorFlow by ``mutation_refs.original_tokenization``
(its own source; only ``tf.gfile.GFile`` and the absl flag replaced). Compared
on: the character classes over every ASCII/Latin-1 code point, the edges of
each CJK block and seeded random code points of all planes; seeded random
strings mixing vocab words, case, accents, combining marks, CJK, punctuation,
control characters, unusual whitespace, ``[unusedN]`` tokens and overlong
words; the bundled real task texts (SQuAD, Disfl-QA, WNUT-16 slices); vocab
files. The deliberate deviations (duplicate vocab lines, bad UTF-8) are
checked against fixed expectations; messages word for word.
"""

import json
import os
import random
import unicodedata

import pytest

from bert_tf import tokenization as tk
import mutation_refs

VOCAB = mutation_refs.VOCAB


@pytest.fixture(scope="module")
def orig():
  return mutation_refs.original_tokenization()


@pytest.fixture(scope="module")
def vocab():
  return tk.load_vocab(VOCAB)


CJK_EDGES = [0x4E00, 0x9FFF, 0x3400, 0x4DBF, 0x20000, 0x2A6DF, 0x2A700, 0x2B73F,
             0x2B740, 0x2B81F, 0x2B820, 0x2CEAF, 0xF900, 0xFAFF, 0x2F800, 0x2FA1F]


def _code_points():
  cps = list(range(0x250)) + [e + d for e in CJK_EDGES for d in (-1, 0, 1)]
  cps += [0x2000, 0x200B, 0x200D, 0x2028, 0x202F, 0x3000, 0x3001, 0xFEFF, 0xFFFD,
          0x0300, 0x0301, 0x05BE, 0x1680, 0x180E, 0x2010, 0x20AC, 0xE000, 0xD800]
  rng = random.Random(0)
  cps += [rng.randrange(0x110000) for _ in range(3000)]
  return cps


def test_character_classes_equal_original(orig):
  for cp in _code_points():
    c = chr(cp)
    assert tk._is_whitespace(c) == orig._is_whitespace(c), hex(cp)  # pylint: disable=protected-access
    assert tk._is_control(c) == orig._is_control(c), hex(cp)  # pylint: disable=protected-access
    assert tk._is_punctuation(c) == orig._is_punctuation(c), hex(cp)  # pylint: disable=protected-access
    assert tk._is_chinese_char(cp) == orig.BasicTokenizer()._is_chinese_char(cp), hex(cp)  # pylint: disable=protected-access


def test_character_classes_by_hand():
  for c in " \t\n\r\u00a0\u2003\u3000":
    assert tk._is_whitespace(c), repr(c)  # pylint: disable=protected-access
  for c in "a\x00\x0b\u200b\u2028_":
    assert not tk._is_whitespace(c), repr(c)  # pylint: disable=protected-access
  for c in "\x00\x07\x1f\x7f\u200b\u200d\ufeff":
    assert tk._is_control(c), repr(c)  # pylint: disable=protected-access
  for c in "\t\n\r a\u00e9":
    assert not tk._is_control(c), repr(c)  # pylint: disable=protected-access
  for c in "!/:@[`{~$^\u00bf\u2014\u3002\u300c":
    assert tk._is_punctuation(c), repr(c)  # pylint: disable=protected-access
  for c in " a0\u00e9\u4e2d\u20ac":
    assert not tk._is_punctuation(c), repr(c)  # pylint: disable=protected-access
  for lo, hi in zip(CJK_EDGES[::2], CJK_EDGES[1::2]):
    assert tk._is_chinese_char(lo) and tk._is_chinese_char(hi), hex(lo)  # pylint: disable=protected-access
    assert not tk._is_chinese_char(lo - 1) or lo - 1 in CJK_EDGES[1::2], hex(lo)  # pylint: disable=protected-access
  assert not tk._is_chinese_char(0x3000) and not tk._is_chinese_char(0xAC00)  # pylint: disable=protected-access


PIECES = ["hello", "Hello", "WORLD", "unwanted", "running", "wa", "##ing", "\u00e9t\u00e9",
          "Caf\u00e9", "na\u00efve", "e\u0301", "\u4e2d\u6587", "\u535a\u63a8", "\ud55c\uad6d\uc5b4",
          "!", "?", ",", "$5", "^_^", "\u00bfqu\u00e9?", "\u2014", "\u201cq\u201d", "\u3002",
          " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u200b", "\x00",
          "\ufffd", "\x07", "\u200d", "\ufeff", "[unused1]", "[UNUSED1]", "[unused99999]",
          "[unused1]!", "[MASK]", "[CLS]", "x" * 200, "y" * 201, "\u0391\u03b8\u03ae\u03bd\u03b1",
          "\u0130stanbul", "Stra\u00dfe", "\ufb01ne", "\uff21\uff22", "don't", "e.g.", "1,000.5",
          "\U00020000\U0002a6df", "\u0300", "a\u0300\u0301b", "\u05d0\u05d1", "\u0e01\u0e32",
          "ab@cd.com", "snake_case", "CamelCaseWord", "##", "#", "[", "]"]


def _random_texts(n, seed):
  rng = random.Random(seed)
  return ["".join(rng.choice(PIECES) + rng.choice(["", " ", ""])
                  for _ in range(rng.randint(0, 8))) for _ in range(n)]


@pytest.mark.parametrize("lower", [True, False])
def test_random_text_equals_original(orig, lower):
  ours = tk.FullTokenizer(VOCAB, do_lower_case=lower)
  ref = orig.FullTokenizer(VOCAB, do_lower_case=lower)
  basic, ref_basic = tk.BasicTokenizer(lower), orig.BasicTokenizer(lower)
  for text in _random_texts(400, int(lower)) + PIECES:
    assert ours.tokenize(text) == ref.tokenize(text), repr(text)
    assert basic.tokenize(text) == ref_basic.tokenize(text), repr(text)
    b = text.encode("utf-8")
    assert ours.tokenize(b) == ours.tokenize(text), repr(text)


def test_preserve_unused_tokens_equals_original(orig):
  ours = tk.FullTokenizer(VOCAB, preserve_unused_tokens=True)
  plain = tk.FullTokenizer(VOCAB)
  assert ours.preserve_unused_tokens is True and plain.preserve_unused_tokens is False
  orig.FLAGS.preserve_unused_tokens = True
  try:
    ref = orig.FullTokenizer(VOCAB)
    texts = _random_texts(200, 7) + ["[unused1] x [unused1]! [UNUSED1] [unused0]",
                                     "a[unused2] [unused3]b [unused1]"]
    for text in texts:
      assert ours.tokenize(text) == ref.tokenize(text), repr(text)
  finally:
    orig.FLAGS.preserve_unused_tokens = False
  assert ours.tokenize("[unused1] X!") == ["[unused1]", "x", "!"]
  assert plain.tokenize("[unused1] X!") == ["[", "unused", "##1", "]", "x", "!"]
  basic = tk.BasicTokenizer(do_lower_case=True, vocab={"[unused1]": 1},
                            preserve_unused_tokens=True)
  assert basic.tokenize("[unused1] [unused2] Ab") == [
      "[unused1]", "[", "unused2", "]", "ab"]
  assert basic.preserve_unused_tokens is True
  assert tk.BasicTokenizer(vocab={"[unused1]": 1}, preserve_unused_tokens=1).tokenize(
      "[unused1]") == ["[unused1]"]
  assert tk.BasicTokenizer(vocab={"[unused1]": 1}).tokenize("[unused1]") == [
      "[", "unused1", "]"]
  assert tk.BasicTokenizer().do_lower_case is True
  assert tk.BasicTokenizer().tokenize("[UNUSED1] A") == ["[", "unused1", "]", "a"]


def test_preserve_token(vocab):
  assert tk.preserve_token("[unused1]", vocab, True)
  assert tk.preserve_token("[unused1]", {"[unused1]": 0}, True)
  assert not tk.preserve_token("[unused1]", vocab, False)
  assert not tk.preserve_token("[unused99999]", vocab, True)  # not in the vocab
  assert not tk.preserve_token("[MASK]", vocab, True)
  assert not tk.preserve_token("x[unused1]", {"x[unused1]": 0}, True)
  assert not tk.preserve_token("[unused1]x", {"[unused1]x": 0}, True)
  assert not tk.preserve_token("[unused]", {"[unused]": 0}, True)
  assert tk.preserve_token("[unused\u0663]", {"[unused\u0663]": 0}, True)  # Unicode digit
  assert tk.preserve_token("[unused1]", ["[unused1]"], True) is True


def test_basic_and_wordpiece_by_hand(vocab):
  basic = tk.BasicTokenizer(do_lower_case=True)
  assert basic.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
      "hello", "!", "how", "are", "you", "?"]
  assert tk.BasicTokenizer(do_lower_case=False).tokenize("H\u00e9llo  WORLD!") == [
      "H\u00e9llo", "WORLD", "!"]
  assert basic.tokenize("H\u00e9llo caf\u00e9 e\u0301") == ["hello", "cafe", "e"]
  assert basic.tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
  assert basic.tokenize("a\x00b\ufffdc\u200bd\x07e") == ["abcde"]
  assert basic.tokenize("a\u00a0b\u3000c\td") == ["a", "b", "c", "d"]
  assert basic.tokenize("!!a..b") == ["!", "!", "a", ".", ".", "b"]
  assert basic.tokenize("") == [] and basic.tokenize("   ") == []
  assert basic.tokenize(b"caf\xc3\xa9 \xff!") == ["cafe", "!"]
  wp = tk.WordpieceTokenizer(vocab)
  assert wp.unk_token == "[UNK]" and wp.max_input_chars_per_word == 200
  assert wp.tokenize("unwanted running") == ["unwanted", "running"]
  assert wp.tokenize("unaffable") == ["una", "##ffa", "##ble"]
  assert wp.tokenize("x" * 200) != ["[UNK]"] and wp.tokenize("x" * 201) == ["[UNK]"]
  assert wp.tokenize("\u00e9\u00e9\u00e9\u4e2dq\U00010000") == ["[UNK]"]
  assert wp.tokenize(b"hello  ") == ["hello"]
  assert wp.tokenize("") == []
  small = {"un": 0, "##want": 1, "##ed": 2, "runn": 3, "##ing": 4, "want": 5, "u": 6}
  wp = tk.WordpieceTokenizer(small, unk_token="<unk>", max_input_chars_per_word=6)
  assert wp.tokenize("unwant wanted running u unwan") == [
      "un", "##want", "want", "##ed", "<unk>", "u", "<unk>"]
  assert tk.WordpieceTokenizer(small, max_input_chars_per_word=8).tokenize(
      "unwanted running unwantedx") == ["un", "##want", "##ed", "runn", "##ing", "[UNK]"]


def test_full_tokenizer_attributes_and_ids(vocab):
  t = tk.FullTokenizer(VOCAB, do_lower_case=False)
  assert t.vocab_file == VOCAB and t.do_lower_case is False
  assert t.vocab == vocab and t.inv_vocab == {v: k for k, v in vocab.items()}
  assert t.basic_tokenizer.do_lower_case is False and t.basic_tokenizer.vocab is t.vocab
  assert t.wordpiece_tokenizer.vocab is t.vocab
  assert tk.FullTokenizer(VOCAB).do_lower_case is True
  tokens = tk.FullTokenizer(VOCAB).tokenize("UNwant\u00e9d,running [MASK]")
  assert tokens == ["unwanted", ",", "running", "[", "mask", "]"]
  ids = t.convert_tokens_to_ids(tokens)
  assert ids == [vocab[x] for x in tokens] == tk.convert_tokens_to_ids(vocab, tokens)
  assert t.convert_ids_to_tokens(ids) == tokens
  assert tk.convert_ids_to_tokens(t.inv_vocab, ids) == tokens
  assert tk.convert_by_vocab({"a": 1, "b": 0}, ["b", "a", "b"]) == [0, 1, 0]
  with pytest.raises(KeyError):
    t.convert_tokens_to_ids(["Hello"])
  with pytest.raises(KeyError):
    t.convert_ids_to_tokens([len(vocab)])
  assert t.convert_ids_to_tokens([0, 100, 101, 102, 103]) == [
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert tk.whitespace_tokenize("  a \t b\n") == ["a", "b"]
  assert tk.whitespace_tokenize(" \n ") == [] and tk.whitespace_tokenize("") == []


def test_convert_to_unicode():
  assert tk.convert_to_unicode("caf\u00e9") == "caf\u00e9"
  assert tk.convert_to_unicode(b"caf\xc3\xa9\xff!") == "caf\u00e9!"
  with pytest.raises(ValueError) as e:
    tk.convert_to_unicode(5)
  assert str(e.value) == "Unsupported string type: <class 'int'>"


def test_load_vocab_equals_original(orig, vocab, tmp_path):
  assert vocab == orig.load_vocab(VOCAB) and list(vocab) == list(orig.load_vocab(VOCAB))
  assert len(vocab) == 30522 and vocab["[UNK]"] == 100 and vocab["##s"] == 2015
  for i, text in enumerate(["a\nb\nc\n", "a\nb\nc", "a\n\n", "a\n\nb\n", " a \n\tb\r\n[UNK] \n",
                            "\u00e9\n\u4e2d\n##x\n", "a\r\nb\r\n"]):
    path = tmp_path / ("v%d.txt" % i)
    path.write_bytes(text.encode("utf-8"))
    got = tk.load_vocab(str(path))
    assert got == orig.load_vocab(str(path)) and list(got) == list(orig.load_vocab(str(path))), text
  path.write_text("[PAD]\nx\n")
  assert tk.load_vocab(path) == {"[PAD]": 0, "x": 1}  # a PathLike


def test_load_vocab_deviations(tmp_path, caplog):
  v = tmp_path / "vocab.txt"
  v.write_text("[PAD]\nhello\nworld\nhello\nhello\n")
  with pytest.raises(tk.VocabError) as e:
    tk.load_vocab(str(v))
  assert str(e.value) == (
      "%s line 4: duplicate vocab token 'hello' (also on line 2); every line must "
      "be a distinct token (id = line number)" % v)
  v.write_bytes(b"[PAD]\nhello\nworld\nhel\nhello")  # cut mid-line
  with pytest.raises(tk.VocabError) as e:
    tk.load_vocab(str(v))
  assert str(e.value).endswith(
      "line 5: duplicate vocab token 'hello' (also on line 2); every line must be "
      "a distinct token (id = line number): the file ends mid-line, copy the "
      "whole vocab file")
  v.write_bytes(b"[PAD]\nhello\nhello\nworld\n")  # a duplicate, not the last line
  with pytest.raises(tk.VocabError, match=r"line 3: .*\(id = line number\)$"):
    tk.load_vocab(str(v))
  v.write_text("[PAD]\nhello\n")
  with caplog.at_level("WARNING"):
    tk.load_vocab(str(v))
  assert not caplog.records
  v.write_bytes(b"[PAD]\nab\xe2\n\xffcd\nx\xe2\x82\n")
  assert tk.load_vocab(str(v)) == {"[PAD]": 0, "ab": 1, "cd": 2, "x": 3}
  missing = str(tmp_path / "none.txt")
  with pytest.raises(tk.VocabError) as e:
    tk.load_vocab(missing)
  assert str(e.value).startswith("cannot read vocab file %r: " % missing)
  assert isinstance(e.value.__cause__, OSError)


def test_check_vocab_messages(tmp_path):
  full = {t: i for i, t in enumerate(tk.SPECIAL_TOKENS)}
  tk.check_vocab(full)
  tk.check_vocab(["[UNK]", "[CLS]", "[SEP]"], required=tk.TOKENIZER_TOKENS)
  cases = [
      ({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2}, tk.REQUIRED_TOKENS,
       "vocab file 'v.txt' lacks the required token(s) [MASK]"),
      ({"[UNK]": 0}, tk.REQUIRED_TOKENS,
       "vocab file 'v.txt' lacks the required token(s) [CLS] [SEP] [MASK]"),
      ({"[UNK]": 0, "[CLS]": 1}, tk.TOKENIZER_TOKENS,
       "vocab file 'v.txt' lacks the required token(s) [SEP] (and [MASK], which "
       "pretraining needs)"),
      ({"[UNK]": 0, "[CLS]": 1, "[MASK]": 2}, tk.TOKENIZER_TOKENS,
       "vocab file 'v.txt' lacks the required token(s) [SEP]"),
  ]
  for v, required, msg in cases:
    with pytest.raises(tk.VocabError) as e:
      tk.check_vocab(v, "v.txt", required)
    assert str(e.value) == msg
  with pytest.raises(tk.VocabError) as e:
    tk.check_vocab({})
  assert str(e.value) == ("vocab file '<vocab>' lacks the required token(s) [UNK] [CLS] "
                          "[SEP] [MASK]")
  v = tmp_path / "vocab.txt"
  v.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
  assert tk.FullTokenizer(str(v)).tokenize("hello x") == ["hello", "[UNK]"]
  v.write_text("[PAD]\n[UNK]\nhello\n")
  with pytest.raises(tk.VocabError) as e:
    tk.FullTokenizer(str(v))
  assert str(e.value) == ("vocab file %r lacks the required token(s) [CLS] [SEP] (and "
                          "[MASK], which pretraining needs)" % str(v))
  t = tk.FullTokenizer(str(v), check_special_tokens=False)
  assert t.tokenize("hello x") == ["hello", "[UNK]"]


def test_vocab_case_checks(vocab, caplog):
  assert not tk.vocab_looks_cased(vocab)
  cased = ["[UNK]", "[CLS]"] + ["W%d" % i for i in range(100)]
  assert tk.vocab_looks_cased(cased)
  assert not tk.vocab_looks_cased(cased[:-1])  # 99 upper-case pieces
  assert not tk.vocab_looks_cased(["[ABC%d]" % i for i in range(200)])
  assert tk.vocab_looks_cased(["[ABC%d" % i for i in range(100)])
  assert tk.vocab_looks_cased(["ABC%d]" % i for i in range(100)])
  assert tk.vocab_looks_cased(["x"] * 50 + ["xY"] * 100)
  cased_msg = ("vocab c.txt looks cased but --do_lower_case=True: upper-case pieces will "
               "never be produced. Pass --do_lower_case=False for a cased model.")
  uncased_msg = ("vocab u.txt looks uncased but --do_lower_case=False: upper-case words "
                 "will mostly become [UNK]. Pass --do_lower_case=True for an uncased model.")
  for v, lower, name, want in ((cased, True, "c.txt", [cased_msg]), (cased, False, "c.txt", []),
                               (vocab, True, "u.txt", []), (vocab, False, "u.txt", [uncased_msg])):
    caplog.clear()
    with caplog.at_level("WARNING"):
      tk.warn_if_case_mismatch(v, lower, name)
    assert [r.getMessage() for r in caplog.records] == want, (name, lower)


def test_check_vocab_names_every_other_missing_token():
  with pytest.raises(tk.VocabError) as e:
    tk.check_vocab({"[PAD]": 0}, "v.txt", required=("[UNK]",))
  assert str(e.value) == ("vocab file 'v.txt' lacks the required token(s) [UNK] (and [CLS] "
                          "[SEP] [MASK], which pretraining needs)")


def test_preserved_token_longer_than_a_wordpiece_word(orig, tmp_path):
  # A preserved vocab entry is kept whole even beyond the 200-character
  # WordPiece limit (FullTokenizer checks preserve_token before WordPiece).
  long_unused = "[unused" + "1" * 200 + "]"
  v = tmp_path / "vocab.txt"
  v.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", long_unused,
                          "a", "##b"]) + "\n")
  text = "a %s ab [unused2]" % long_unused
  ours = tk.FullTokenizer(str(v), preserve_unused_tokens=True)
  orig.FLAGS.preserve_unused_tokens = True
  try:
    want = orig.FullTokenizer(str(v)).tokenize(text)
  finally:
    orig.FLAGS.preserve_unused_tokens = False
  assert ours.tokenize(text) == want == ["a", long_unused, "a", "##b", "[UNK]", "[UNK]",
                                         "[UNK]"]
  assert tk.FullTokenizer(str(v)).tokenize(long_unused) == ["[UNK]", "[UNK]", "[UNK]"]


def _task_texts():
  texts = []
  for d in ("squad_v1", "squad_v2_disfl"):
    with open(os.path.join(mutation_refs.DATA, d, "dev.json"), encoding="utf-8") as f:
      for article in json.load(f)["data"]:
        for p in article["paragraphs"]:
          texts.append(p["context"])
          texts += [qa["question"] for qa in p["qas"]]
  with open(os.path.join(mutation_refs.DATA, "ner_wnut16", "dev.txt"), encoding="utf-8") as f:
    texts += [" ".join(l.split("\t")[0] for l in block.splitlines())
              for block in f.read().split("\n\n") if block.strip()]
  return texts


def test_real_task_texts_equal_original(orig):
  texts = _task_texts()
  assert len(texts) > 400
  assert any(unicodedata.category(c) == "Mn" for t in texts for c in unicodedata.normalize("NFD", t))
  for lower in (True, False):
    ours = tk.FullTokenizer(VOCAB, do_lower_case=lower)
    ref = orig.FullTokenizer(VOCAB, do_lower_case=lower)
    for text in texts:
      assert ours.tokenize(text) == ref.tokenize(text), text[:80]


def test_empty_vocab_file_is_refused(tmp_path):
  """An empty file is an error naming it (it used to load as ``{"": 0}``)."""
  v = tmp_path / "empty.txt"
  v.write_bytes(b"")
  with pytest.raises(tk.VocabError) as e:
    tk.load_vocab(str(v))
  assert str(e.value) == "vocab file %r is empty" % str(v)
  v.write_bytes(b"\n")  # one empty line: a vocab of one empty token, as the original
  assert tk.load_vocab(str(v)) == {"": 0}
