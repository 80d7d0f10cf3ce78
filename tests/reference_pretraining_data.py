"""Test oracle: a line-by-line port of the original ``create_pretraining_data.py``.

Source: google-research/bert ``create_pretraining_data.py`` (bert-tensorflow
1.0.4, plus master's ``--do_whole_word_mask``), on token strings, with
``tf.train.Example`` written by protobuf through ``tf.io.TFRecordWriter``.
It shares no instance-making code with ``bert_tf.data.pretraining``: tests compare the fast
faithful mode (``bert_tf.data.pretraining.faithful``) and the dynamic mode's
rules with it; ``tests/original_create_data.py`` runs the real original.
"""

import collections
import dataclasses
import logging
import random

from bert_tf import io_utils
from bert_tf import tokenization
from bert_tf.data.pretraining import documents
from bert_tf.errors import InputError

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


@dataclasses.dataclass
class TrainingInstance:
  """One ``[CLS] A [SEP] B [SEP]`` example with its masks (token strings)."""
  tokens: list
  segment_ids: list
  masked_lm_positions: list
  masked_lm_labels: list
  is_random_next: bool


def read_documents(input_files, tokenizer):
  """Tokenized documents, exactly as the original builds ``all_documents``.

  Args:
    input_files: list of paths, read in order; documents continue across files.
    tokenizer: a :class:`bert_tf.tokenization.FullTokenizer` (or anything
      with ``tokenize(str) -> list[str]``).

  Returns:
    list of documents; a document is a non-empty list of non-empty token lists.

  Raises:
    InputError: an input file cannot be read (names the file).
  """
  all_documents = [[]]
  for path in input_files:
    try:
      with open(path, "rb") as f:
        data = f.read()
    except OSError as e:
      raise InputError("cannot read input file %r: %s" % (path, e)) from e
    lines = data.split(b"\n")
    if lines[-1] == b"":
      lines.pop()  # readline() semantics: a final newline ends the last line.
    for raw in lines:
      line = tokenization.convert_to_unicode(raw).strip()
      if not line:
        all_documents.append([])
      tokens = tokenizer.tokenize(line)
      if tokens:
        all_documents[-1].append(tokens)
  return [d for d in all_documents if d]


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Trims the longer list (ties trim ``tokens_b``) from a random end, in place."""
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_num_tokens:
      break
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    assert len(trunc_tokens) >= 1
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq,
                                 vocab_words, rng, do_whole_word_mask=False):
  """Chooses and replaces the masked positions of ``tokens``.

  Args:
    tokens: list of token strings including ``[CLS]``/``[SEP]``.
    masked_lm_prob: fraction of ``len(tokens)`` to predict (0.15).
    max_predictions_per_seq: cap on predictions.
    vocab_words: list of every vocab entry (random replacements).
    rng: the shared ``random.Random``.
    do_whole_word_mask: mask all pieces of a word together.

  Returns:
    ``(output_tokens, masked_lm_positions, masked_lm_labels)``; positions
    sorted ascending, labels the original tokens.
  """
  cand_indexes = []
  for (i, token) in enumerate(tokens):
    if token == "[CLS]" or token == "[SEP]":
      continue
    if do_whole_word_mask and cand_indexes and token.startswith("##"):
      cand_indexes[-1].append(i)
    else:
      cand_indexes.append([i])
  rng.shuffle(cand_indexes)
  output_tokens = list(tokens)
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(tokens) * masked_lm_prob))))
  masked_lms = []
  covered_indexes = set()
  for index_set in cand_indexes:
    if len(masked_lms) >= num_to_predict:
      break
    if len(masked_lms) + len(index_set) > num_to_predict:
      continue
    if any(index in covered_indexes for index in index_set):
      continue
    for index in index_set:
      covered_indexes.add(index)
      if rng.random() < 0.8:
        masked_token = "[MASK]"
      elif rng.random() < 0.5:
        masked_token = tokens[index]
      else:
        masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      output_tokens[index] = masked_token
      masked_lms.append((index, tokens[index]))
  masked_lms.sort(key=lambda x: x[0])
  return (output_tokens, [p for p, _ in masked_lms], [l for _, l in masked_lms])


def create_instances_from_document(all_documents, document_index, max_seq_length,
                                   short_seq_prob, masked_lm_prob,
                                   max_predictions_per_seq, vocab_words, rng,
                                   do_whole_word_mask=False):
  """All instances of one document for one ``dupe_factor`` pass (original order)."""
  document = all_documents[document_index]
  max_num_tokens = max_seq_length - 3
  target_seq_length = max_num_tokens
  if rng.random() < short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)
  instances = []
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
          a_end = rng.randint(1, len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a.extend(current_chunk[j])
        tokens_b = []
        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
              break
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          for j in range(a_end, len(current_chunk)):
            tokens_b.extend(current_chunk[j])
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        assert len(tokens_a) >= 1
        assert len(tokens_b) >= 1
        tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        tokens, positions, labels = create_masked_lm_predictions(
            tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
            do_whole_word_mask)
        instances.append(TrainingInstance(tokens, segment_ids, positions, labels,
                                          is_random_next))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def create_training_instances(all_documents, vocab_words, rng, max_seq_length=128,
                              dupe_factor=10, short_seq_prob=0.1,
                              masked_lm_prob=0.15, max_predictions_per_seq=20,
                              do_whole_word_mask=False, progress=None):
  """Every instance of the corpus, in the original's order (shuffled at the end).

  Args:
    all_documents: from :func:`read_documents` (shuffled here in place).
    vocab_words: ``list(tokenizer.vocab.keys())``.
    rng: ``random.Random(random_seed)``.
    progress: optional callable ``(done_documents, total_documents)``.

  Returns:
    list of :class:`TrainingInstance`.

  Raises:
    InputError: the corpus has no document, or ``max_seq_length`` < 5.
  """
  if not all_documents:
    raise InputError("the input files hold no text that tokenizes to anything")
  if max_seq_length < 5:
    raise InputError("--max_seq_length must be at least 5, got %d" % max_seq_length)
  rng.shuffle(all_documents)
  instances = []
  total = dupe_factor * len(all_documents)
  done = 0
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      instances.extend(create_instances_from_document(
          all_documents, document_index, max_seq_length, short_seq_prob,
          masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
          do_whole_word_mask))
      done += 1
      if progress is not None:
        progress(done, total)
  rng.shuffle(instances)
  return instances


def _int_feature(values):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def instance_to_features(instance, vocab, max_seq_length, max_predictions_per_seq):
  """The padded id lists of one instance, keyed by the original feature names."""
  input_ids = [vocab[t] for t in instance.tokens]
  if len(input_ids) > max_seq_length:
    raise InputError("instance of %d tokens exceeds max_seq_length %d" %
                     (len(input_ids), max_seq_length))
  pad = max_seq_length - len(input_ids)
  input_mask = [1] * len(input_ids) + [0] * pad
  segment_ids = list(instance.segment_ids) + [0] * pad
  input_ids = input_ids + [0] * pad
  n = len(instance.masked_lm_positions)
  mpad = max_predictions_per_seq - n
  features = collections.OrderedDict()
  features["input_ids"] = input_ids
  features["input_mask"] = input_mask
  features["segment_ids"] = segment_ids
  features["masked_lm_positions"] = list(instance.masked_lm_positions) + [0] * mpad
  features["masked_lm_ids"] = [vocab[t] for t in instance.masked_lm_labels] + [0] * mpad
  features["masked_lm_weights"] = [1.0] * n + [0.0] * mpad
  features["next_sentence_labels"] = [1 if instance.is_random_next else 0]
  return features


def features_to_example(features):
  """A ``tf.train.Example`` with the original's feature types and order."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  feats = collections.OrderedDict()
  for name, values in features.items():
    if name == "masked_lm_weights":
      feats[name] = _float_feature(values)
    else:
      feats[name] = _int_feature(values)
  return tf.train.Example(features=tf.train.Features(feature=feats))


def write_instances(instances, vocab, max_seq_length, max_predictions_per_seq,
                    output_files, log_examples=0):
  """Writes instances round-robin over ``output_files`` (original order).

  Each file is written under a temporary name and renamed only after every
  file is whole.

  Returns:
    number of records written.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with io_utils.atomic_outputs(output_files) as tmp_names:
    writers = [tf.io.TFRecordWriter(p) for p in tmp_names]
    for index, instance in enumerate(instances):
      features = instance_to_features(instance, vocab, max_seq_length,
                                      max_predictions_per_seq)
      writers[index % len(writers)].write(
          features_to_example(features).SerializeToString())
      if index < log_examples:
        logging.info("*** Example ***\ntokens: %s\n%s", " ".join(instance.tokens),
                     "\n".join("%s: %s" % (k, " ".join(map(str, v)))
                                for k, v in features.items()))
    for w in writers:
      w.close()
  return len(instances)


def create_pretraining_data(input_file, output_file, vocab_file, do_lower_case=True,
                            do_whole_word_mask=False, max_seq_length=128,
                            max_predictions_per_seq=20, random_seed=12345,
                            dupe_factor=10, masked_lm_prob=0.15, short_seq_prob=0.1):
  """The original's ``main`` with this port: ``(num_documents, num_instances, outputs)``."""
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
  input_files = documents.expand_input_files(input_file, directory_order=True)
  output_files = [p.strip() for p in output_file.split(",") if p.strip()]
  docs = read_documents(input_files, tokenizer)
  instances = create_training_instances(
      docs, list(tokenizer.vocab.keys()), random.Random(random_seed), max_seq_length,
      dupe_factor, short_seq_prob, masked_lm_prob, max_predictions_per_seq,
      do_whole_word_mask)
  n = write_instances(instances, tokenizer.vocab, max_seq_length,
                      max_predictions_per_seq, output_files)
  return len(docs), n, output_files
