"""WordPiece vocab learning (tensorflow-text's learner) in the original layout."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf import tokenization
from bert_tf import vocab_builder
from bert_tf import errors
from conftest import AUSTEN_SLICE, SAMPLE_TEXT, VOCAB

VOCAB_SIZE = 2000
# Measured: 1 of 17,877 held-out word pieces (0.006%) is [UNK] (the test prints it).
MAX_HELD_OUT_UNK_RATE = 0.001


@pytest.fixture(scope="module")
def austen_split(tmp_path_factory):
  """The first ~90% of the slice's documents to learn from, the rest held out."""
  with open(AUSTEN_SLICE, encoding="utf-8") as f:
    docs = f.read().split("\n\n")
  cut = int(len(docs) * 0.9)
  d = tmp_path_factory.mktemp("vocab")
  train, held = d / "train.txt", d / "held_out.txt"
  train.write_text("\n\n".join(docs[:cut]), encoding="utf-8")
  held.write_text("\n\n".join(docs[cut:]), encoding="utf-8")
  return str(train), str(held)


@pytest.fixture(scope="module")
def learned_vocab(austen_split, tmp_path_factory):
  out = str(tmp_path_factory.mktemp("vocab_out") / "vocab.txt")
  vocab, num_learned = vocab_builder.build_vocab(
      austen_split[0], out, VOCAB_SIZE, do_lower_case=True, num_unused=99,
      min_count=2)
  return out, vocab, num_learned


@pytest.mark.slow  # learning the vocab (module fixture): ~15-50 s
def test_layout_matches_the_original(learned_vocab):
  path, vocab, num_learned = learned_vocab
  lines = open(path, encoding="utf-8").read().split("\n")
  assert lines[-1] == "" and lines[:-1] == vocab
  assert len(vocab) == VOCAB_SIZE and len(set(vocab)) == VOCAB_SIZE
  # The released uncased vocab's reserved head, position for position.
  original = tokenization.load_vocab(VOCAB)
  for tok in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused98]"):
    assert vocab.index(tok) == original[tok], tok
  assert vocab[:104] == list(original)[:104]
  assert not vocab[104].startswith("[")  # num_unused=99: learned tokens follow
  # The learner fills (nearly) all the rest: 2000 - 104 reserved.
  assert num_learned >= 0.95 * (VOCAB_SIZE - 104), num_learned
  learned = vocab[104:104 + num_learned]
  assert "the" in learned and "##s" in learned and "elinor" in learned
  # Uncased: no capitals, no combining marks.
  assert not any(t != t.lower() for t in learned)
  # No file left under a temporary name.
  assert os.listdir(os.path.dirname(path)) == ["vocab.txt"]


# With its fixture ~15 s (learning the vocab): full suite only. The fast run
# keeps a learned vocab's layout and tokenizer (test_cased_and_bad_arguments)
# and the in-graph tokenizer against the original's (test_tokenization).
@pytest.mark.slow
def test_tokenizers_agree_and_held_out_unk_rate(learned_vocab, austen_split):
  path = learned_vocab[0]
  ref = tokenization.FullTokenizer(path, do_lower_case=True)
  graph = preprocessing.BertPreprocessor(path, do_lower_case=True)
  with open(AUSTEN_SLICE, encoding="utf-8") as f:
    lines = [l for l in f.read().split("\n") if l.strip()]
  got = graph.tokenize(tf.constant(lines)).to_list()
  same = sum(g == ref.convert_tokens_to_ids(ref.tokenize(l)) for g, l in zip(got, lines))
  assert same == len(lines), "%d of %d lines differ" % (len(lines) - same, len(lines))
  with open(austen_split[1], encoding="utf-8") as f:
    held = [l for l in f.read().split("\n") if l.strip()]
  ids = np.concatenate([ref.convert_tokens_to_ids(ref.tokenize(l)) for l in held])
  unk_rate = np.mean(ids == 100)
  print("held-out: %d pieces, UNK rate %.5f; %.3f pieces per word" % (
      len(ids), unk_rate,
      len(ids) / sum(len(ref.basic_tokenizer.tokenize(l)) for l in held)))
  assert len(ids) > 5000
  assert unk_rate <= MAX_HELD_OUT_UNK_RATE


def test_cased_and_bad_arguments(tmp_path):
  out = str(tmp_path / "cased.txt")
  vocab, _ = vocab_builder.build_vocab(SAMPLE_TEXT, out, 400, do_lower_case=False,
                                       num_unused=120, min_count=1)
  assert len(vocab) == 400 and vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert vocab[104] == "[unused99]" and vocab[124] == "[unused119]"
  assert any(t != t.lower() for t in vocab[125:])   # capitals kept
  tokenization.FullTokenizer(out, do_lower_case=False)
  with pytest.raises(vocab_builder.VocabBuildError, match="num_unused"):
    vocab_builder.learn_vocab(SAMPLE_TEXT, 400, num_unused=50)
  with pytest.raises(vocab_builder.VocabBuildError, match="vocab_size"):
    vocab_builder.learn_vocab(SAMPLE_TEXT, 100, num_unused=99)
  with pytest.raises(errors.InputError, match="no_such"):
    vocab_builder.learn_vocab(str(tmp_path / "no_such*.txt"), 400, num_unused=99)
