"""Long documents in Keras, Hugging Face and the search (issue 69 items 1, 2
and 4, and its bad input).

* Keras: a ``BertClassifier`` whose ``PreprocessorLayer`` has a
  ``long_document`` method takes long strings in ``fit`` / ``evaluate`` /
  ``predict`` / ``__call__``. The oracle is the model called on the
  features of :class:`bert_tf.modeling.long_document.DocumentPacker`
  computed apart (``max_eval_windows`` for evaluation and prediction; for
  ``fit``, one SGD step's weights against ``train_on_batch`` on the
  packer's ``training=True`` features, which read ``max_windows``); the
  ``.keras`` file and ``from_preset`` keep the settings (a loaded model
  predicts the same on long texts); the cut warning names the remedy.
* Hugging Face: ``convert.to_transformers`` of such a model (and
  ``tools/convert_checkpoint.py --output_format=hf`` of a ``run_classifier
  --long_document=windows`` run, in ``test_long_document.py`` beside that
  run) writes the settings into ``config.json``,
  says in one line that transformers reads one window; transformers'
  own ``AutoModelForSequenceClassification`` loads the directory (logits
  of short texts equal ours within 1e-4) and ``from_preset`` of it
  restores the settings and the long-text predictions.
* The search: ``long_document`` as a grid dimension reaches each trial's
  task (its ``classifier_config.json``); the other tasks refuse it in one
  line.

Tiny models (``TINY_CONFIG`` without dropout, so that a training step is a
function of its batch), ``max_seq_length`` 16: a movie-review sentence is
several windows.
"""

import csv
import json
import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import MOVIE_DIR, TINY_CONFIG, VOCAB, copy_slice, require

from bert_tf import config as config_lib
from bert_tf import convert
from bert_tf import errors
from bert_tf import preprocessing
from bert_tf import tuning
from bert_tf.modeling import long_document
from bert_tf.modeling import models
from bert_tf.modeling import multiple_choice
from bert_tf.modeling import tagging

SEQ = 16
FEATURES = long_document.FEATURES


def _sentences(n, split="dev"):
  with open(os.path.join(MOVIE_DIR, split + ".tsv"), encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  return [r[0] for r in rows[:n]], [int(r[1]) for r in rows[:n]]


def _long_texts():
  """Four documents: two sentences joined (many windows of 14 tokens),
  a sentence of 24 word pieces (3 windows), a two-word text (one window) and an empty one."""
  s, _ = _sentences(6)
  return [s[0] + " " + s[1] + " " + s[2], s[4], "dull film", ""]


@pytest.fixture(scope="module")
def config():
  values = config_lib.BertConfig.from_json_file(TINY_CONFIG).to_dict()
  values.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  return config_lib.BertConfig.from_dict(values)


@pytest.fixture(scope="module")
def pre():
  return preprocessing.BertPreprocessor(VOCAB, True, SEQ)


def _scramble(model, seed):
  """Noise on every weight, so that windows and poolings differ visibly."""
  for i, v in enumerate(model.weights):
    v.assign(v + tf.random.stateless_normal(v.shape, [seed, i], stddev=0.1))


def _windowed(config, pre, seed=1, **settings):
  values = dict(method="windows", max_windows=2, max_eval_windows=5)
  values.update(settings)
  layer = preprocessing.PreprocessorLayer(
      pre, long_document=long_document.LongDocument(**values))
  model = models.BertClassifier(config, 3, preprocessor=layer, window_pooling="max")
  _scramble(model, seed)
  return model


def _packed(model, texts, training=False):
  """The oracle's features: DocumentPacker on the model's BertPreprocessor
  with the settings read back from the model's config (not its layer)."""
  settings = long_document.LongDocument.from_dict(
      model.get_config()["preprocessor"]["config"]["long_document"])
  packer = long_document.DocumentPacker(model.preprocessor.bert_preprocessor, settings,
                                        training)
  out = packer(tf.constant(texts))
  return {k: out[k] for k in FEATURES}, out["num_windows"].numpy()


def test_predict_evaluate_and_call_read_every_window_up_to_max_eval_windows(config, pre):
  model = _windowed(config, pre)
  texts = _long_texts()
  features, windows = _packed(model, texts)
  assert windows.tolist()[1:] == [3, 1, 1] and windows[0] == 5  # capped at 5
  assert features["input_ids"].shape[1] == 5 > 2  # more than max_windows
  want = model(features).numpy()
  assert np.abs(want[0] - want[2]).max() > 1e-3  # the documents differ
  np.testing.assert_allclose(model.predict(texts, batch_size=2, verbose=0), want, atol=1e-5)
  np.testing.assert_allclose(model(texts).numpy(), want, atol=1e-5)
  # A window's logits alone are not the document's (the pooling is real).
  first = model({k: v[:, 0] for k, v in features.items()}).numpy()
  assert np.abs(first[0] - want[0]).max() > 1e-3
  model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  labels = np.array([0, 1, 2, 1])
  log_p = want - np.log(np.exp(want).sum(-1, keepdims=True))
  assert model.evaluate(texts, labels, batch_size=4, verbose=0) == pytest.approx(
      -log_p[np.arange(4), labels].mean(), rel=1e-5)


def test_fit_trains_on_max_windows_a_document(config, pre):
  """One SGD step of fit on text equals train_on_batch on the packer's
  training features (at most max_windows=2 windows, spread first..last),
  not on its evaluation ones."""
  texts = _long_texts()[:2]
  labels = np.array([2, 0])
  models_ = [_windowed(config, pre, seed=3) for _ in range(3)]
  for m in models_:
    m.set_weights(models_[0].get_weights())
    m.compile(optimizer=keras.optimizers.SGD(0.5),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  train, windows = _packed(models_[0], texts, training=True)
  assert windows.tolist() == [2, 2]
  evaluation, _ = _packed(models_[0], texts)
  models_[0].fit(texts, labels, batch_size=2, epochs=1, shuffle=False, verbose=0)
  models_[1].train_on_batch(preprocessing.trim_to_longest(train), labels)
  models_[2].train_on_batch(preprocessing.trim_to_longest(evaluation), labels)
  fit_w = models_[0].classifier.output_weights.numpy()
  np.testing.assert_allclose(fit_w, models_[1].classifier.output_weights.numpy(), atol=1e-5)
  assert np.abs(fit_w - models_[2].classifier.output_weights.numpy()).max() > 1e-4


def test_keras_file_and_from_preset_keep_the_settings(config, pre, tmp_path):
  model = _windowed(config, pre, seed=5, method="windows", doc_stride=5)
  texts = _long_texts()
  want = model.predict(texts, verbose=0)
  path = str(tmp_path / "windows.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  layer_config = loaded.get_config()["preprocessor"]["config"]
  assert layer_config["long_document"] == dict(
      method="windows", head_tokens=3, doc_stride=5, max_windows=2, max_eval_windows=5,
      window_pooling="max", pool_logits=False)
  assert (loaded.window_pooling, loaded.pool_logits) == ("max", False)
  np.testing.assert_allclose(loaded.predict(texts, verbose=0), want, atol=1e-6)
  again = models.BertClassifier.from_preset(path, preprocessor=True)
  assert again.long_document == model.long_document and again.window_pooling == "max"
  np.testing.assert_allclose(again.predict(texts, verbose=0), want, atol=1e-6)
  # from_preset with other settings: head_tail (as a dict), mean pooling.
  other = models.BertClassifier.from_preset(
      path, preprocessor=True, long_document={"method": "head_tail", "head_tokens": 4},
      window_pooling="mean")
  assert (other.long_document.method, other.long_document.head_tokens,
          other.window_pooling) == ("head_tail", 4, "mean")
  settings = long_document.LongDocument("head_tail", head_tokens=4)
  feats = long_document.DocumentPacker(pre, settings)(tf.constant(texts))
  assert feats["input_ids"].shape == (4, SEQ)
  np.testing.assert_allclose(other.predict(texts, verbose=0),
                             other({k: feats[k] for k in FEATURES}).numpy(), atol=1e-5)
  # Ids only: the preset's pooling, no preprocessor.
  ids_only = models.BertClassifier.from_preset(path)
  assert ids_only.preprocessor is None and ids_only.window_pooling == "max"



def test_a_keras_file_is_served_by_its_settings(config, pre, tmp_path):
  """export_saved_model.py --from_preset=FILE.keras's path (load_preset,
  export_run): the SavedModel reads the file's windows, as predict."""
  from bert_tf.export import fine_tuned, from_preset  # pylint: disable=g-import-not-at-top
  model = _windowed(config, pre, seed=9, max_eval_windows=3)
  path = str(tmp_path / "served.keras")
  model.save(path)
  export = fine_tuned.export_run(from_preset.load_preset(path), None, str(tmp_path / "x"))
  texts = _long_texts()[:3]
  out = tf.saved_model.load(export).signatures["serving_default"](text=tf.constant(texts))
  assert out["num_windows"].numpy().tolist() == [3, 3, 1]
  assert out["truncated"].numpy().tolist() == [True, False, False]
  np.testing.assert_allclose(out["logits"].numpy(), model.predict(texts, verbose=0),
                             atol=1e-4)


def test_a_batch_of_empty_texts_is_one_window_each(config, pre):
  model = _windowed(config, pre)
  features, windows = _packed(model, ["", "dull film"])
  assert windows.tolist() == [1, 1]
  want = model({k: v[:1] for k, v in features.items()}).numpy()
  np.testing.assert_allclose(model.predict(["", ""], verbose=0), np.repeat(want, 2, 0),
                             atol=1e-5)


def _warnings(caplog, fn):
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    fn()
  return [r.getMessage() for r in caplog.records if "preprocessed" in r.getMessage()]


def test_cut_warning_names_the_remedy(config, pre, caplog):
  texts = _long_texts()
  head = models.BertClassifier(config, 2, preprocessor=pre)
  (line,) = _warnings(caplog, lambda: head.predict(texts, verbose=0))
  assert line.startswith("BertClassifier.predict: 2 (50.0%) of the 4 texts preprocessed "
                         "were longer than max_seq_length=16 tokens and were cut to "
                         "their first tokens (--long_document=windows / "
                         "long_document='windows' reads them whole"), line
  windowed = _windowed(config, pre, max_eval_windows=3)
  (line,) = _warnings(caplog, lambda: windowed.predict(texts, verbose=0))
  assert line.startswith("BertClassifier.predict: 1 (25.0%) of the 4 texts preprocessed "
                         "took more than max_eval_windows=3 windows of 16 tokens "
                         "(doc_stride=7)"), line
  # fit reads max_windows=2 of a long document by design: nothing to say.
  windowed.compile(optimizer="sgd",
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  assert _warnings(caplog, lambda: windowed.fit(texts, [0, 1, 2, 0], verbose=0)) == []
  tail = models.BertClassifier(config, 2, preprocessor=preprocessing.PreprocessorLayer(
      pre, long_document="tail"))
  (line,) = _warnings(caplog, lambda: tail.predict(texts, verbose=0))
  assert "were cut to their last tokens (--long_document=windows" in line, line


def test_bad_settings_and_other_models_are_refused_in_one_line(config, pre, tmp_path):
  def classifier(settings):
    return models.BertClassifier(config, 2, preprocessor=preprocessing.PreprocessorLayer(
        pre, long_document=settings))

  cases = [
      (lambda: classifier(long_document.LongDocument("head_tail", head_tokens=15)),
       "head_tokens", "long_document for max_seq_length=16: head_tokens=15: must be in "
       "[0, 14]"),
      (lambda: classifier({"method": "windows", "doc_stride": 14}), "doc_stride",
       "doc_stride=14: must be at least 1 and below the window's text length "
       "(max_seq_length - 2 = 14 tokens)"),
      (lambda: classifier("sliding"), "long_document",
       "long_document=sliding: one of head, tail, head_tail, windows"),
      (lambda: classifier(long_document.LongDocument("windows", max_windows=0)),
       "max_windows", "max_windows=0: must be at least 1"),
      (lambda: preprocessing.PreprocessorLayer(pre, long_document=3), "long_document",
       "long_document must be a LongDocument, its dict or a method name"),
      (lambda: preprocessing.PreprocessorLayer(pre, long_document="windows")(
          tf.constant(["a text"])), "long_document", "its BertClassifier packs the text"),
      (lambda: models.BertQuestionAnswerer(config, preprocessor=preprocessing.PreprocessorLayer(
          pre, long_document="windows")), "long_document", "pick which window already"),
      (lambda: tagging.BertTokenClassifier(config, 3, preprocessor=preprocessing.PreprocessorLayer(
          pre, long_document="windows")), "long_document", "pick which window already"),
      (lambda: multiple_choice.BertMultipleChoice(
          config, preprocessor=preprocessing.PreprocessorLayer(pre, long_document="tail")),
       "long_document", "pick which window already"),
      # Refused before the preset is read: the path does not exist.
      (lambda: models.BertQuestionAnswerer.from_preset(str(tmp_path / "none"),
                                                       long_document="windows"),
       "long_document", "BertQuestionAnswerer.from_preset"),
      (lambda: tagging.BertTokenClassifier.from_preset(str(tmp_path / "none"),
                                                       long_document="windows"),
       "long_document", "pick which window already"),
  ]
  path = str(tmp_path / "clf.keras")
  _windowed(config, pre).save(path)
  cases += [
      # The saved settings do not fit a preprocessor of another length.
      (lambda: models.BertClassifier.from_preset(path, preprocessor=True, max_seq_length=8),
       "doc_stride", "long_document for max_seq_length=8: doc_stride=7: must be at least 1 "
       "and below the window's text length (max_seq_length - 2 = 6 tokens)"),
      (lambda: models.BertClassifier.from_preset(str(tmp_path / "none"),
                                                 long_document="windows"),
       "long_document", "long_document='windows') reads text: pass preprocessor=True too"),
  ]
  for make, argument, fragment in cases:
    with pytest.raises(errors.ParamsError) as e:
      make()
    message = str(e.value)
    assert e.value.argument == argument and fragment in message, (argument, message)
    assert "\n" not in message


# --- Hugging Face ----------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_written(config, pre, tmp_path_factory):
  """A windowed classifier written by to_transformers (its warning lines)."""
  root = tmp_path_factory.mktemp("hf_long")
  model = _windowed(config, pre, seed=7, doc_stride=6, max_eval_windows=8)
  model.pool_logits = True  # recorded and restored too
  records = []
  handler = logging.Handler()
  handler.emit = records.append
  logger = logging.getLogger()
  logger.addHandler(handler)
  try:
    line = convert.to_transformers(model, str(root / "hf"))
  finally:
    logger.removeHandler(handler)
  notes = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
  return {"model": model, "dir": str(root / "hf"), "line": line, "notes": notes}


def test_hf_directory_keeps_the_settings_and_says_transformers_reads_one_window(hf_written):
  model, path = hf_written["model"], hf_written["dir"]
  assert hf_written["notes"] == [
      "to_transformers: this classifier reads long documents by long_document=windows "
      "(doc_stride=6, max_eval_windows=8, window_pooling=max, of logits); transformers "
      "will read one window (a text's first max_seq_length=16 tokens: "
      "tokenizer_config.json's model_max_length); the settings are kept for bert_tf in "
      "config.json's bert_tf_long_document, which from_preset reads back"]
  with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
    written = json.load(f)
  assert written["bert_tf_long_document"] == model.long_document.to_dict()
  assert (written["bert_tf_max_seq_length"], written["bert_tf_window_pooling"],
          written["bert_tf_pool_logits"]) == (16, "max", True)
  restored = models.BertClassifier.from_preset(path, preprocessor=True)
  assert restored.long_document == model.long_document
  assert (restored.window_pooling, restored.pool_logits) == ("max", True)
  assert restored.preprocessor.max_seq_length == SEQ
  texts = _long_texts()
  np.testing.assert_allclose(restored.predict(texts, verbose=0),
                             model.predict(texts, verbose=0), atol=1e-5)


def test_transformers_loads_the_directory_and_reads_a_short_text_as_we_do(hf_written):
  torch = require("torch")
  transformers = require("transformers")
  model, path = hf_written["model"], hf_written["dir"]
  ref, info = transformers.AutoModelForSequenceClassification.from_pretrained(
      path, output_loading_info=True)
  assert not (info["missing_keys"] or info["unexpected_keys"]), info
  tok = transformers.AutoTokenizer.from_pretrained(path)
  assert tok.model_max_length == SEQ
  short = ["dull film", "a fine , warm movie", "it is bad"]  # one window each
  enc = tok(short, padding=True, truncation=True, return_tensors="pt")
  with torch.no_grad():
    want = ref.eval()(**enc).logits.numpy()
  assert np.abs(want).max() > 0.1
  np.testing.assert_allclose(model.predict(short, verbose=0), want, atol=1e-4)
  # A long text: transformers reads its first window, as the line says.
  (text,) = _long_texts()[:1]
  enc = tok([text], truncation=True, return_tensors="pt")
  assert enc["input_ids"].shape[1] == SEQ
  features, _ = _packed(model, [text])
  first = {k: v[:, 0] for k, v in features.items()}
  with torch.no_grad():
    theirs = ref(**enc).logits.numpy()
  np.testing.assert_allclose(model(first).numpy(), theirs, atol=1e-4)


# --- the search -----------------------------------------------------------------


def test_search_space_takes_the_method_and_other_tasks_refuse_it(tmp_path):
  from bert_tf.tasks.classification import ClassifierParams  # pylint: disable=g-import-not-at-top
  from bert_tf import task_kinds  # pylint: disable=g-import-not-at-top
  path = tmp_path / "space.json"
  path.write_text(json.dumps({"long_document": ["head", "windows"],
                              "window_pooling": ["mean", "max"], "max_windows": [2]}))
  space = tuning.load_search_space(str(path), ClassifierParams)
  assert space.params == {"long_document": ["head", "windows"],
                          "window_pooling": ["mean", "max"], "max_windows": [2]}
  assert space.grid_size() == 4
  for kind in ("squad", "ner", "swag"):
    params_cls = task_kinds.get(kind).attribute("params_class")
    with pytest.raises(errors.ParamsError) as e:
      tuning.load_search_space(str(path), params_cls)
    message = str(e.value)
    assert e.value.argument == "search_space" and "\n" not in message
    assert ("long_document is not a flag of this task (%s): it is --task=classifier's"
            % params_cls.__name__) in message, message


def test_a_params_class_may_featurize_a_data_field_per_trial(tmp_path):
  """doc_stride changes the featurized data (SQuAD's windows): refused,
  unless the params class says it featurizes it anew for each trial."""
  import dataclasses  # pylint: disable=g-import-not-at-top

  @dataclasses.dataclass
  class Params:
    learning_rate: float = 1e-4
    doc_stride: int = 64

  @dataclasses.dataclass
  class PerTrial(Params):
    featurized_per_trial = frozenset({"doc_stride"})

  path = tmp_path / "space.json"
  path.write_text(json.dumps({"doc_stride": [32, 64]}))
  with pytest.raises(errors.ParamsError, match="doc_stride changes the featurized data"):
    tuning.load_search_space(str(path), Params)
  assert tuning.load_search_space(str(path), PerTrial).params == {"doc_stride": [32, 64]}


@pytest.mark.slow  # a 2-trial search (issue 41's rule)
def test_each_trial_reads_its_own_method(tmp_path):
  from bert_tf.tasks.classification import ClassifierParams  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  copy_slice(os.path.join(MOVIE_DIR, "train.tsv"), str(data / "train.tsv"), every=400)
  copy_slice(os.path.join(MOVIE_DIR, "dev.tsv"), str(data / "dev.tsv"), every=100)
  space = tmp_path / "space.json"
  space.write_text(json.dumps({"long_document": ["head", "windows"],
                               "train_batch_size": [8], "num_train_epochs": [1]}))
  out = tmp_path / "search"
  params = ClassifierParams(
      task_name="sst-2", data_dir=str(data), output_dir=str(out),
      bert_config_file=TINY_CONFIG, vocab_file=VOCAB, max_seq_length=SEQ,
      eval_batch_size=16, learning_rate=1e-3, max_windows=2)
  tuning.Search("classifier", params, tuning.SearchParams(search_space=str(space),
                                                          export=False),
                print_fn=lambda line: None).run()
  methods = {}
  for trial in sorted(os.listdir(out / "trials")):
    with open(out / "trials" / trial / "classifier_config.json", encoding="utf-8") as f:
      methods[trial] = json.load(f)["long_document"]["method"]
  assert sorted(methods.values()) == ["head", "windows"], methods
