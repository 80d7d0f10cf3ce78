"""The tokenizer of a Hugging Face directory comes along with ``preprocessor=True``.

transformers 5's ``save_pretrained`` writes ``tokenizer.json`` and
``tokenizer_config.json`` and no ``vocab.txt``: the preprocessor is built from
``tokenizer.json``'s WordPiece vocab and ``BertNormalizer`` settings. Its ids
equal transformers' own tokenizer's on the project's tokenizer test corpus
(tests/test_tokenization.py: the bundled Austen slice and every text of the
bundled task slices),
for an uncased tokenizer (all-MiniLM-L6-v2's) and a cased one (the same vocab,
``do_lower_case=False``, as transformers writes a cased BERT's). A tokenizer
that is not BERT WordPiece is refused in one line.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import errors
from bert_tf import huggingface
from bert_tf.modeling import presets
from conftest import AUSTEN_SLICE
from test_tokenization import _lines, task_texts

transformers = pytest.importorskip("transformers")

# Words longer than this become [UNK] in transformers' WordPiece
# (max_input_chars_per_word); the original BERT's limit is 200 characters.
HF_MAX_WORD = 100


@pytest.fixture(scope="module")
def corpus():
  return _lines(AUSTEN_SLICE) + task_texts()


@pytest.fixture(scope="module")
def saved(minilm_dir, tmp_path_factory):
  """``{"uncased": dir, "cased": dir}`` written by transformers 5, no vocab.txt."""
  root = tmp_path_factory.mktemp("hf_tok")
  out = {}
  for case, lower in (("uncased", True), ("cased", False)):
    d = str(root / case)
    tok = transformers.BertTokenizerFast(os.path.join(minilm_dir, "vocab.txt"),
                                         do_lower_case=lower)
    tok.save_pretrained(d)
    shutil.copy(os.path.join(minilm_dir, "config.json"), d)
    shutil.copy(os.path.join(minilm_dir, "model.safetensors"), d)
    assert not os.path.exists(os.path.join(d, "vocab.txt"))
    out[case] = (d, transformers.AutoTokenizer.from_pretrained(d))
  return out


def _long_word(text):
  return any(len(w) > HF_MAX_WORD for w in text.split())


@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_ids_equal_transformers_tokenizer_on_the_corpus(saved, corpus, case):
  d, reference = saved[case]
  loader = presets.get_preset_loader(d)
  assert loader.do_lower_case() is (case == "uncased")
  assert loader.max_seq_length() == 128
  pre = loader.preprocessor(True)
  texts = [t for t in corpus if not _long_word(t)]
  assert len(corpus) - len(texts) < 0.002 * len(corpus)  # the 100-character words
  want = reference(texts, add_special_tokens=False)["input_ids"]
  got = []
  for i in range(0, len(texts), 512):
    got += pre.tokenize(tf.constant(texts[i:i + 512])).to_list()
  bad = [(texts[i], g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
  assert not bad, "%d of %d differ; first %r" % (len(bad), len(texts), bad[0])
  # [CLS] a [SEP] b [SEP] packing as transformers' pair encoding.
  enc = reference(texts[:8], texts[8:16], padding="max_length", max_length=128,
                  truncation="longest_first", return_tensors="np")
  feats = pre(tf.constant(texts[:8]), tf.constant(texts[8:16]))
  np.testing.assert_array_equal(feats["input_ids"], enc["input_ids"])
  np.testing.assert_array_equal(feats["segment_ids"], enc["token_type_ids"])


def test_vocab_txt_preferred_and_model_max_length(saved, tmp_path):
  d = str(tmp_path / "short")
  shutil.copytree(saved["uncased"][0], d)
  config = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
  config["model_max_length"] = 64
  with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f)
  assert presets.get_preset_loader(d).max_seq_length() == 64
  tok = huggingface.read_tokenizer(d)
  assert tok.vocab_file is None and tok.source.endswith("tokenizer.json")
  written = huggingface.vocab_file(tok)
  with open(written, encoding="utf-8") as f:
    assert f.read().split("\n")[:5] == list(tok.vocab[:5])
  with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(tok.vocab) + "\n")
  assert huggingface.read_tokenizer(d).vocab_file == os.path.join(d, "vocab.txt")


def test_a_tokenizer_that_is_not_bert_wordpiece_is_refused(saved, tmp_path):
  for name, edit, message in (
      ("bpe", lambda t: t["model"].update(type="BPE"), "model type 'BPE' is not BERT WordPiece"),
      ("sp", lambda t: t.update(normalizer={"type": "NFKC"}),
       "normalizer 'NFKC' is not BERT's BertNormalizer"),
      ("accents", lambda t: t["normalizer"].update(strip_accents=False),
       "strip_accents=False with lowercase=True has no bert_tf preprocessor equivalent")):
    d = str(tmp_path / name)
    shutil.copytree(saved["uncased"][0], d)
    path = os.path.join(d, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
      tok = json.load(f)
    edit(tok)
    with open(path, "w", encoding="utf-8") as f:
      json.dump(tok, f)
    with pytest.raises(errors.CheckpointError, match=message) as e:
      presets.get_preset_loader(d).preprocessor(True)
    assert "\n" not in str(e.value) and "tokenizer.json" in str(e.value)
