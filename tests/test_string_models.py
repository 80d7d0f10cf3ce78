"""Task models that take raw strings (issue 40, must-show 1).

``BertClassifier`` (single sentences and pairs), ``BertTokenClassifier``,
``BertQuestionAnswerer`` and ``BertMultipleChoice`` built with a
preprocessor take text in ``fit``, ``evaluate`` and ``predict``; the
preprocessor is part of the model's config and its vocab a ``.keras``
asset; a ``.keras`` model loaded in a new process (``import bert_tf`` and
nothing else) gives on raw strings what the SavedModel export of the same
model gives; id dicts work as before.

The reference for "the same preprocessing" is the project's exports
(``bert_tf.export``), themselves tested against the original BERT code; the
weights of the key comparison are the real all-MiniLM-L6-v2.
"""

import json
import os
import subprocess
import sys
import textwrap
import warnings
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf import config as config_lib
from bert_tf import preprocessing
from bert_tf.export import multiple_choice as export_mc
from bert_tf.export import saved_model
from bert_tf.export import squad as export_squad
from bert_tf.export import tagging as export_tagging
from bert_tf.modeling import models
from bert_tf.modeling import multiple_choice
from bert_tf.modeling import tagging
from conftest import VOCAB

SEQ = 32
TINY = config_lib.BertConfig(
    vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=48, max_position_embeddings=64, type_vocab_size=2)
NO_DROPOUT = config_lib.BertConfig(**dict(
    TINY.to_dict(), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
SCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]

MOVIES = ["A gorgeous, witty, seductive movie.", "Dull and overlong.",
          "The Caf\u00e9 scenes are CHARMING!", "",
          "The plot is a mess and the acting is even worse. " * 20]
PAIRS = (["How old are you?", "What is your name?", "Where is Paris?"],
         ["I am six.", "", "Paris is in France, on the Seine."])
SENTENCES = ["Empire State Building = ESB .", "Jim Henson lived in Caf\u00e9ville",
             "", "unaffable   words\tsplit"]
QUESTIONS = (["Which team won Super Bowl 50?", "Where is the caf\u00e9?"],
             ["The Denver Broncos defeated the Carolina Panthers 24\u201310.",
              "The Caf\u00e9 de Flore is in Paris."])
CHOICES = (["He opens the door.", "She bakes bread."],
           [["and walks in.", "and flies away.", "", "and sits."],
            ["Knead the dough", "Paint the fence", "Wash the car", "Mix"]])


def _pre():
  return preprocessing.BertPreprocessor(VOCAB, True, SEQ)


def _fit_one_step(model, x, y, loss):
  model.compile(optimizer=bert_tf.create_optimizer(1e-3, 10, 1), loss=loss)
  model.fit(x, y, epochs=1, batch_size=8, verbose=0)
  assert int(model.optimizer.iterations.numpy()) == 1


# In a new process: the .keras files with `import bert_tf` (and keras) only,
# then the SavedModels (which need the tensorflow-text ops).
LOADER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import bert_tf
    import keras
    cases = json.load(open(sys.argv[1]))
    out = {}
    for name, case in cases.items():
      model = keras.models.load_model(case["keras"])
      pred = model.predict(case["x"], verbose=0)
      pred = pred if isinstance(pred, dict) else {"logits": pred}
      out.update({name + "/keras/" + k: np.asarray(v) for k, v in pred.items()})
      out[name + "/vocab_file"] = np.asarray(str(model.preprocessor.bert_preprocessor.vocab_file))
    import tensorflow as tf
    import tensorflow_text  # the SavedModels' ops
    for name, case in cases.items():
      serve = tf.saved_model.load(case["export"]).signatures["serving_default"]
      res = serve(**{k: tf.constant(v) for k, v in case["export_inputs"].items()})
      out.update({name + "/export/" + k: v.numpy().astype(bytes) if v.dtype == tf.string
                  else v.numpy() for k, v in res.items()})
    np.savez(sys.argv[2], **out)
""")


@pytest.fixture(scope="module")
def minilm_classifier(tmp_path_factory, minilm_dir):
  """A MiniLM classifier built with ``preprocessor=True``, one ``fit`` step
  on raw strings, saved and exported."""
  d = tmp_path_factory.mktemp("minilm")
  model = models.BertClassifier.from_preset(minilm_dir, num_labels=2, preprocessor=True)
  _fit_one_step(model, MOVIES[:4], [1, 0, 1, 0], SCE)
  model.save(str(d / "clf.keras"))
  export = saved_model.export_classifier(
      model, model.preprocessor.bert_preprocessor, ["neg", "pos"], str(d / "export"),
      task_name="sst-2", is_pair=False)
  return {"model": model, "case": {
      "keras": str(d / "clf.keras"), "x": MOVIES, "export": export,
      "export_inputs": {"text": MOVIES}}}


def _run_loader(tmp, cases):
  with open(tmp / "cases.json", "w", encoding="utf-8") as f:
    json.dump(cases, f)
  env = dict(os.environ)
  env.pop("KERAS_BACKEND", None)  # as in a user's shell: bert_tf selects it
  proc = subprocess.run([sys.executable, "-c", LOADER, str(tmp / "cases.json"),
                         str(tmp / "out.npz")], capture_output=True, text=True,
                        env=env, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return dict(np.load(tmp / "out.npz"))


@pytest.mark.slow  # MiniLM fit step, export and a new process (~1 minute)
def test_minilm_keras_file_predicts_strings_as_its_savedmodel(minilm_classifier, loaded):
  """The key check: real MiniLM, ``from_preset(..., preprocessor=True)``,
  ``fit`` on strings, ``.keras`` loaded in a new process -> ``predict`` on
  raw strings equals the classifier SavedModel's logits."""
  got = loaded
  keras_logits, export_logits = got["classifier/keras/logits"], got["classifier/export/logits"]
  assert keras_logits.shape == export_logits.shape == (len(MOVIES), 2)
  diff = float(np.abs(keras_logits - export_logits).max())
  print("MiniLM classifier: .keras predict vs SavedModel logits, max |diff| = %.3g" % diff)
  assert diff < 1e-4
  # The loaded model's vocab is the in-memory asset, not a file path.
  assert str(got["classifier/vocab_file"]) == "None"
  # ... and the in-process model gives the same.
  np.testing.assert_allclose(minilm_classifier["model"].predict(MOVIES, verbose=0),
                             keras_logits, atol=1e-5)


def test_keras_file_holds_the_vocab_as_an_asset_and_no_path(tmp_path):
  """The vocab is a ``.keras`` asset and the config names no file: the model
  loads and takes text after its vocab file is gone."""
  vocab = tmp_path / "my_vocab" / "vocab.txt"
  vocab.parent.mkdir()
  vocab.write_bytes(open(VOCAB, "rb").read())
  model = models.BertClassifier(TINY, 2, preprocessor=preprocessing.BertPreprocessor(
      str(vocab), True, SEQ))
  path = str(tmp_path / "clf.keras")
  model.save(path)
  expected = model(tf.constant(MOVIES)).numpy()
  vocab.unlink()
  with zipfile.ZipFile(path) as z:
    config = z.read("config.json").decode("utf-8")
    assets = [n for n in z.namelist() if n.startswith("assets/") and n.endswith("/vocab.txt")]
    assert len(assets) == 1, z.namelist()
    asset = z.read(assets[0]).decode("utf-8").split("\n")[:-1]
  assert asset == preprocessing.read_vocab_lines(VOCAB)
  assert "my_vocab" not in config and "vocab.txt" not in config
  pre = json.loads(config)["config"]["preprocessor"]
  assert pre["registered_name"] == "bert_tf>PreprocessorLayer"
  assert {k: pre["config"][k] for k in ("do_lower_case", "max_seq_length")} == {
      "do_lower_case": True, "max_seq_length": SEQ}
  loaded = keras.models.load_model(path)
  assert loaded.preprocessor.bert_preprocessor.vocab_file is None
  np.testing.assert_array_equal(loaded(tf.constant(MOVIES)).numpy(), expected)


def test_from_preset_true_reads_the_presets_vocab_and_case(minilm_dir):
  model = models.BertClassifier.from_preset(minilm_dir, num_labels=2, preprocessor=True)
  pre = model.preprocessor.bert_preprocessor
  assert (pre.vocab_file, pre.do_lower_case, pre.max_seq_length) == (
      os.path.join(minilm_dir, "vocab.txt"), True, 128)  # tokenizer_config.json; 128


@pytest.fixture(scope="module")
def tiny_cases(tmp_path_factory):
  """The other task models (tiny config, the real uncased vocab), each with
  one ``fit`` step on text, saved and exported: ``(models, cases, folder)``."""
  d = tmp_path_factory.mktemp("tiny")
  keras.utils.set_random_seed(1)
  cases, built = {}, {}

  pair = models.BertClassifier(TINY, 3, preprocessor=_pre())
  _fit_one_step(pair, PAIRS, [0, 1, 2], SCE)
  built["pair_classifier"] = pair
  cases["pair_classifier"] = {
      "x": {"text_a": PAIRS[0], "text_b": PAIRS[1]},
      "export": saved_model.export_classifier(
          pair, pair.preprocessor.bert_preprocessor, ["a", "b", "c"], str(d / "pair"),
          is_pair=True),
      "export_inputs": {"text_a": PAIRS[0], "text_b": PAIRS[1]}}

  mc = multiple_choice.BertMultipleChoice(TINY, preprocessor=_pre())
  _fit_one_step(mc, CHOICES, [0, 1], SCE)
  built["multiple_choice"] = mc
  cases["multiple_choice"] = {
      "x": {"context": CHOICES[0], "endings": CHOICES[1]},
      "export": export_mc.export_multiple_choice(
          mc, mc.preprocessor.bert_preprocessor, str(d / "mc"), num_choices=4),
      "export_inputs": {"context": CHOICES[0], "endings": CHOICES[1]}}

  tagger = tagging.BertTokenClassifier(TINY, len(TAGS), preprocessor=_pre())
  word_tags = [[3, 4, 4, 0, 0, 0], [1, 2, 0, 0, 3], [], [0, 0, 0]]
  _fit_one_step(tagger, SENTENCES, tf.ragged.constant(word_tags),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                           ignore_class=-1))
  built["tagger"] = tagger
  cases["tagger"] = {
      "x": SENTENCES,
      "export": export_tagging.export_tagger(
          tagger, tagger.preprocessor.bert_preprocessor, TAGS, str(d / "ner")),
      "export_inputs": {"sentence": SENTENCES}}

  qa = models.BertQuestionAnswerer(TINY, preprocessor=_pre(), max_query_length=8)
  _fit_one_step(qa, QUESTIONS, {"start_logits": [12, 14], "end_logits": [13, 15]},
                {"start_logits": SCE, "end_logits": SCE})
  built["question_answerer"] = qa
  cases["question_answerer"] = {
      "x": {"question": QUESTIONS[0], "context": QUESTIONS[1]},
      "export": export_squad.export_squad(
          qa, VOCAB, True, str(d / "squad"), max_seq_length=SEQ, max_query_length=8),
      "export_inputs": {"question": QUESTIONS[0], "context": QUESTIONS[1]}}

  for name, model in built.items():
    path = str(d / ("%s.keras" % name))
    model.save(path)
    cases[name]["keras"] = path
  return built, cases, d


@pytest.fixture(scope="module")
def loaded(minilm_classifier, tiny_cases):
  """Every case (the MiniLM classifier as ``classifier``) loaded and run in
  ONE new process (:data:`LOADER`): one TensorFlow start for both tests."""
  _, cases, d = tiny_cases
  return _run_loader(d, dict(cases, classifier=minilm_classifier["case"]))


def _max_diff(a, b):
  return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


@pytest.mark.slow  # four tiny exports and a new process (~2 minutes)
def test_every_task_models_keras_file_predicts_strings_as_its_savedmodel(tiny_cases, loaded):
  built, got = tiny_cases[0], loaded
  # Pair classifier and multiple choice: the exports return logits.
  for name in ("pair_classifier", "multiple_choice"):
    diff = _max_diff(got[name + "/keras/logits"], got[name + "/export/logits"])
    print("%s: .keras predict vs SavedModel logits, max |diff| = %.3g" % (name, diff))
    assert got[name + "/keras/logits"].shape == got[name + "/export/logits"].shape
    assert diff < 1e-5
  # Tagger: per-position logits; each word's tag is read at its first piece
  # and equals the NER export's tag (every sentence fits one window).
  tagger = built["tagger"]
  words, pieces, win = tagger.text_windows(tf.constant(SENTENCES))
  word_logits, covered = tagging.TaggingPreprocessor.word_logits(
      win, pieces, got["tagger/keras/logits"])
  assert bool(tf.reduce_all(covered))
  tags = words.with_flat_values(tf.gather(TAGS, tf.argmax(word_logits, -1))).to_list()
  export_tags = [[t.decode() for t in row[:n]] for row, n in
                 zip(got["tagger/export/tags"], got["tagger/export/num_words"])]
  assert [[t.decode() for t in row] for row in tags] == export_tags
  top2 = np.sort(word_logits.numpy(), -1)[:, -2:]
  print("tagger: tags equal the SavedModel's for %d words (smallest top-2 margin %.3g)"
        % (len(top2), float((top2[:, 1] - top2[:, 0]).min())))
  # Question answerer: start/end logits over the one window; the export's best
  # span score is the best valid (start, end) of those logits (one window:
  # context positions, start <= end, at most 30 pieces, n-best 20).
  qa = built["question_answerer"]
  feats = qa.text_features(QUESTIONS)
  start, end = got["question_answerer/keras/start_logits"], got["question_answerer/keras/end_logits"]
  diffs = []
  for i in range(len(QUESTIONS[0])):
    seg, mask = feats["segment_ids"][i].numpy(), feats["input_mask"][i].numpy()
    context = np.flatnonzero((seg == 1) & (mask == 1))[:-1]  # the final [SEP] is not context
    s_top = np.argsort(-start[i], kind="stable")[:20]
    e_top = np.argsort(-end[i], kind="stable")[:20]
    best = max(start[i][s] + end[i][e] for s in s_top for e in e_top
               if s in context and e in context and s <= e < s + 30)
    diffs.append(abs(best - got["question_answerer/export/score"][i]))
  print("question answerer: best span score from .keras logits vs SavedModel, "
        "max |diff| = %.3g" % max(diffs))
  assert max(diffs) < 1e-5


def test_question_answerer_text_is_the_squad_exports_first_window():
  """One windowing: the model's (question, context) features are the SQuAD
  SavedModel's first window (the original's doc-stride loop)."""
  pre = _pre()
  qa = models.BertQuestionAnswerer(TINY, preprocessor=pre, max_query_length=8)
  module = export_squad.SquadServingModule(qa, pre, max_query_length=8, track_model=False)
  questions = tf.constant(QUESTIONS[0] + ["a very long question " * 5])
  contexts = tf.constant(QUESTIONS[1] + ["Paris is a city in France. " * 20])
  query = pre.tokenize(questions)[:, :8]
  context_ids = module.tokenize_context(contexts)[0]
  win = module.windows(query, context_ids)
  first = np.searchsorted(win["example"].numpy(), np.arange(3))  # each example's window 0
  assert len(win["example"]) > 3  # the long context has several windows
  feats = qa.text_features((questions, contexts))
  for k in models.FEATURE_NAMES:
    np.testing.assert_array_equal(feats[k].numpy(), tf.gather(win[k], first).numpy(), k)


def test_tagger_text_is_the_ner_first_window_with_labels_at_first_pieces():
  tagger = tagging.BertTokenClassifier(TINY, len(TAGS), preprocessor=_pre())
  long_sentence = " ".join(["unaffable"] * 20)  # 3 pieces a word: several windows
  sentences = tf.constant(SENTENCES[:2] + [long_sentence])
  words, pieces, win = tagger.text_windows(sentences)
  windows = tagger.tagging_preprocessor.windows(pieces["ids"])
  first = np.searchsorted(windows["example"].numpy(), np.arange(3))
  for k in models.FEATURE_NAMES + ("piece_index",):
    np.testing.assert_array_equal(win[k].numpy(), tf.gather(windows[k], first).numpy(), k)
  word_tags = [[1, 2, 2, 0, 0, 0], [1, 2, 0, 0, 3], [3] + [4] * 19]
  labels = tagger.text_labels(sentences, tf.ragged.constant(word_tags)).numpy()
  vocab = tagger.preprocessor.bert_preprocessor.vocab_lines()
  assert [vocab[i] for i in win["input_ids"][1].numpy()[:6]] == [
      "[CLS]", "jim", "henson", "lived", "in", "cafe"]
  first_pieces = pieces["first_piece"].numpy()
  starts = pieces["ids"].row_starts().numpy()
  rows = words.value_rowids().numpy()
  expected = np.full_like(labels, -1)
  for tag, piece, row in zip(sum(word_tags, []), first_pieces, rows):
    position = 1 + piece - starts[row]
    if position <= SEQ - 2:  # in the first window
      expected[row, position] = tag
  np.testing.assert_array_equal(labels, expected)
  assert (labels[2] >= 0).sum() < 20  # the long sentence's later words fall outside
  assert labels[1][:3].tolist() == [-1, 1, 2]


def test_fit_on_strings_equals_fit_on_their_ids():
  """``fit(strings, labels)`` trains exactly as ``fit`` on the preprocessor's
  ids (no shuffle, one batch)."""
  pre = _pre()
  a = models.BertClassifier(NO_DROPOUT, 3, preprocessor=pre)
  b = models.BertClassifier(NO_DROPOUT, 3)
  b.set_weights(a.get_weights())
  x, y = PAIRS, np.array([0, 1, 2])
  for model, data in ((a, x), (b, dict(preprocessing.trim_to_longest(pre(*map(tf.constant, x)))))):
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=SCE)
    model.fit(data, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
  for wa, wb in zip(a.weights, b.weights):
    np.testing.assert_allclose(wa.numpy(), wb.numpy(), atol=1e-6, err_msg=wa.path)
  assert not np.allclose(a.get_weights()[-2], models.BertClassifier(TINY, 3).get_weights()[-2])
  # predict on strings (pairs as a tuple) = the call on their ids.
  np.testing.assert_allclose(a.predict(x, verbose=0), b(
      dict(preprocessing.trim_to_longest(pre(*map(tf.constant, x))))).numpy(), atol=1e-5)


def test_id_inputs_and_config_without_a_preprocessor_are_unchanged():
  pre = _pre()
  with_pre = tagging.BertTokenClassifier(TINY, 3, preprocessor=pre)
  plain = tagging.BertTokenClassifier(TINY, 3)
  plain.set_weights(with_pre.get_weights())
  ids = pre(tf.constant(SENTENCES))
  np.testing.assert_array_equal(with_pre(ids).numpy(), plain(ids).numpy())
  assert "preprocessor" not in plain.get_config()
  assert "preprocessor" not in models.BertQuestionAnswerer(TINY).get_config()
  assert "max_query_length" not in models.BertQuestionAnswerer(TINY).get_config()
  clone = tagging.BertTokenClassifier.from_config(with_pre.get_config())
  assert clone.preprocessor.max_seq_length == SEQ  # its vocab comes with load_assets


def test_text_without_a_preprocessor_is_one_clear_error():
  model = models.BertClassifier(TINY, 2)
  with pytest.raises(ValueError, match="built without a preprocessor.*preprocessor=True"):
    model(tf.constant(["raw string"]))


def test_fit_on_a_dataset_warns_nothing_about_shuffle():
  """Keras 3 warns ``shuffle=True was passed`` for every Dataset given to
  ``fit`` with its default ``shuffle=True``; the task models pass
  ``shuffle=False`` for a Dataset (it shuffles itself)."""
  model = models.BertClassifier(TINY, 2, preprocessor=_pre())
  model.compile(optimizer="sgd", loss=SCE)
  ds = tf.data.Dataset.from_tensor_slices((MOVIES[:2], [1, 0])).batch(2)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(ds, epochs=1, verbose=0)
  assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]


def test_in_memory_vocab_has_the_file_tables_ids(tmp_path):
  """``load_assets`` builds the table from the vocab lines in memory: same
  keys and ids as TensorFlow's file table (CRLF, spaces kept, no final
  newline), and the asset round trip keeps them."""
  lines = [l.rstrip("\n") for l in open(VOCAB, encoding="utf-8")][:1000]
  path = tmp_path / "vocab.txt"
  path.write_bytes(("\r\n".join(lines[:500]) + "\n" + "\n".join(lines[500:-1]) + "\n"
                    + " spaced \n" + lines[-1]).encode("utf-8"))
  from_file = preprocessing.BertPreprocessor(str(path), True, 16)
  layer = preprocessing.PreprocessorLayer(str(path), True, 16)
  layer.save_assets(str(tmp_path))
  loaded = preprocessing.PreprocessorLayer(None, True, 16)
  loaded.load_assets(str(tmp_path))
  in_memory = loaded.bert_preprocessor
  assert in_memory.vocab_file is None
  keys = tf.constant(lines[:600] + [" spaced ", "spaced", lines[-1], "nope\r"])
  np.testing.assert_array_equal(in_memory._table.lookup(keys).numpy(),  # pylint: disable=protected-access
                                from_file._table.lookup(keys).numpy())  # pylint: disable=protected-access
  text = tf.constant(["Hello, world! The caf\u00e9 is open.", ""])
  for k, v in from_file(text).items():
    np.testing.assert_array_equal(in_memory(text)[k].numpy(), v.numpy(), k)


def test_from_preset_keras_file_keeps_its_preprocessor(tmp_path):
  model = multiple_choice.BertMultipleChoice(TINY, preprocessor=_pre())
  model.save(str(tmp_path / "mc.keras"))
  again = multiple_choice.BertMultipleChoice.from_preset(str(tmp_path / "mc.keras"),
                                                         preprocessor=True)
  np.testing.assert_allclose(again(CHOICES).numpy(), model(CHOICES).numpy(), atol=1e-6)
  models.BertClassifier(TINY, 2).save(str(tmp_path / "plain.keras"))
  with pytest.raises(ValueError, match="has no preprocessor"):
    models.BertClassifier.from_preset(str(tmp_path / "plain.keras"), preprocessor=True)
