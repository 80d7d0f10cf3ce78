"""The token-tagging task: NER fine-tuning (paper section 4.3, Figure 4d).

:class:`TokenTaggingTask` supplies the model, inputs, loss, evaluation and
predictions to :class:`bert_tf.runner.Runner`; :func:`bert_tf.jobs.run_ner`
composes the two.

Data: :mod:`bert_tf.data.conll` reads CoNLL files (TF-free). Words ->
word pieces -> windows is :class:`bert_tf.modeling.tagging.TaggingPreprocessor`
over the in-graph :class:`bert_tf.preprocessing.BertPreprocessor` (each
word tokenized on its own), the same objects that
:func:`bert_tf.export.export_tagger` bakes into the SavedModel. Every word's
label sits on its first word piece; other pieces, ``[CLS]``, ``[SEP]`` and
padding carry :data:`~bert_tf.modeling.tagging.IGNORE`. Sentences longer
than ``max_seq_length - 2`` pieces become several windows (``doc_stride``),
each a training feature; a word is predicted from its max-context window.

Loss: softmax cross-entropy averaged over the labeled first pieces of the
global batch (the normalizer is summed over replicas, as the masked-LM
weight of pretraining). Optimizer: AdamWeightDecay, linear warm-up over
``warmup_proportion`` of ``int(windows / train_batch_size * epochs)``
steps, linear decay to 0. With ``do_eval`` the dev file is scored after
every epoch (entity-level ``eval_precision``, ``eval_recall``, ``eval_f1``
with conlleval semantics, ``eval_accuracy`` over words, ``eval_loss``, and
``eval_<type>_{precision,recall,f1,support}`` per entity type) and the best
model by ``eval_f1`` is kept in ``<output_dir>/best/``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf import errors
from bert_tf import preprocessing
from bert_tf import task_kinds
from bert_tf.data import classifier_data
from bert_tf.data import conll
from bert_tf.modeling import presets
from bert_tf.modeling import tagging
from bert_tf.params import field
from bert_tf.tasks import base
from bert_tf.tasks import fine_tuning

RUN_CONFIG = task_kinds.get("ner").settings_file
PREDICTIONS_FILE = "test_predictions.txt"


@dataclasses.dataclass(kw_only=True)
class NerParams(fine_tuning.SplitFilesParams, fine_tuning.SkipPaddingParams):
  """Flags of ``tools/run_ner.py``, named as the original ``run_classifier.py``
  / ``run_squad.py``'s. Defaults: the issue's recipe (max_seq_length 128,
  batch 32, learning rate 5e-5, 20 epochs on WNUT-16, warm-up 0.1). The
  other fields: :class:`bert_tf.tasks.fine_tuning.SplitFilesParams`.

  Example::

    params = NerParams(data_dir="../shared/data/ner_wnut16", output_dir="/tmp/ner",
                       init_checkpoint=HF_DIR, do_train=True, do_eval=True)
  """
  output_dir: str = field(help="Where checkpoints, eval_results.txt and test_predictions.txt go.")
  data_dir: Optional[str] = field(None, "Directory of the CoNLL files (--train_file, --dev_file and --test_file are relative to it).")
  train_file: str = field("train.txt", "Training CoNLL file (token<TAB>tag, or CoNLL-2003 word POS chunk NER; IOB1, IOB2 or IOBES).")
  dev_file: str = field("dev.txt", "Dev CoNLL file with tags (--do_eval).")
  test_file: str = field("test.txt", "CoNLL file to predict (--do_predict; tokens only, or with tags).")
  label_list: Optional[tuple] = field(None, "Comma-separated tags (must include O). Default: the sorted set of the training file's tags plus O (or a finished run's ner_config.json).")
  init_checkpoint: Optional[str] = field(None, "Initial weights: ours, an original TF1 checkpoint, or a Hugging Face BERT / BertForTokenClassification directory.")
  max_seq_length: int = field(128, "Window width in WordPiece tokens ([CLS] + up to max_seq_length-2 pieces + [SEP]); longer sentences are split into windows.")
  doc_stride: int = field(64, "Pieces between the starts of the windows of a long sentence.")
  do_predict: bool = field(False, "Whether to write test_predictions.txt (CoNLL) for --test_file.")
  train_batch_size: int = field(32, "Total batch size for training (windows).")
  eval_batch_size: int = field(32, "Batch size for eval.")
  predict_batch_size: int = field(32, "Batch size for predict.")
  num_train_epochs: float = field(20.0, "Number of training epochs.")
  export_dir: Optional[str] = field(None, "Export a SavedModel (raw sentences in, per-word tags and entity spans out) to EXPORT_DIR/<version>/.")
  keep_best: bool = field(True, "With --do_train --do_eval: keep the best dev model (eval_f1; a tie keeps the later model) in OUTPUT_DIR/best/.")
  max_examples: Optional[int] = field(None, "Read at most this many sentences of each file (quick runs).")


def predict_window_logits(model, features: dict, batch_size: int) -> np.ndarray:
  """Logits float32 [W, S, L] of window features (int32 [W, S] arrays),
  in batches (the traced step is cached per model)."""
  step = fine_tuning.predict_step(model)
  n = len(features["input_ids"])
  out = [step({k: features[k][i:i + batch_size] for k in tagging.FEATURE_NAMES}).numpy()
         for i in range(0, n, batch_size)]
  return (np.concatenate(out, 0) if out else
          np.zeros([0, features["input_ids"].shape[1], model.num_labels], np.float32))


class Encoded:
  """Sentences through :class:`TaggingPreprocessor`: window features and
  what maps window logits back to words.

  Attributes:
    features: dict of int32 [W, S] numpy arrays (``input_ids``,
      ``input_mask``, ``segment_ids``, ``label_ids`` when labeled).
    num_windows: W.
  """

  def __init__(self, tp: tagging.TaggingPreprocessor, sentences, label_ids=None):
    words = tf.ragged.constant([s.words for s in sentences], dtype=tf.string,
                               ragged_rank=1) if sentences else \
        tf.RaggedTensor.from_row_lengths(tf.constant([], tf.string),
                                         tf.constant([], tf.int64))
    self.pieces = tp.word_pieces(words)
    self.win = tp.windows(self.pieces["ids"])
    self.lengths = [len(s.words) for s in sentences]
    self.features = {k: self.win[k].numpy() for k in tagging.FEATURE_NAMES}
    if label_ids is not None:
      flat = np.asarray([i for s in label_ids for i in s], np.int64)
      self.features["label_ids"] = tp.window_labels(self.win, self.pieces, flat).numpy()
    self.num_windows = len(self.features["input_ids"])
    self.windows_per_sentence = np.bincount(self.win["example"].numpy(),
                                            minlength=len(sentences))
    # [CLS] + the sentence's pieces + [SEP], untruncated (int64 [B]).
    self.sentence_lengths = self.pieces["ids"].row_lengths().numpy() + 2

  def word_predictions(self, logits: np.ndarray) -> list:
    """Per sentence, the argmax label id of every word (list of int lists)."""
    wl, _ = tagging.TaggingPreprocessor.word_logits(self.win, self.pieces,
                                                    tf.constant(logits))
    ids = np.argmax(wl.numpy(), -1).tolist()
    out, i = [], 0
    for n in self.lengths:
      out.append(ids[i:i + n])
      i += n
    return out


class TokenTaggingTask(fine_tuning.FineTuningTask):
  """CoNLL token tagging (NER) as a :class:`bert_tf.tasks.base.Task`.

  Reads the files on construction, so bad flags and files are reported
  (file and line) before any model is built or any file written.

  Args:
    params: :class:`NerParams`.

  Raises:
    bert_tf.errors.InputError / ConfigError / VocabError / ParamsError:
    naming the bad flag (``argument``), file and line.

  Example (``params`` as in :class:`NerParams`)::

    task = TokenTaggingTask(params)
    Runner(RunnerParams.from_params(task.params)).run(
        task, strategy, do_train=True, do_eval=True, eval_at_steps=task.eval_at_steps())
  """

  name = "ner"
  best_metric = "eval_f1"
  example_unit = "windows"
  normalized_loss = True
  resumable_input = True  # window-index permutations (train_dataset)
  kind = "ner"
  recorded_keys = fine_tuning.FineTuningTask.recorded_keys + ("doc_stride",)

  def __init__(self, params: NerParams):
    self.params = p = params
    self._set_actions()
    base.check_positive(p, ("train_batch_size", "eval_batch_size",
                             "predict_batch_size", "doc_stride", "max_examples"))
    self._set_preprocessor(*fine_tuning.resolve_config_and_vocab(p))
    self.tagging_preprocessor = tagging.TaggingPreprocessor(self.preprocessor,
                                                            p.doc_stride)
    self.labels = self._given_labels()
    self.train = self._read("train_file", True) if self.do_train else []
    if self.do_train and not self.train:
      raise errors.InputError("%s has no sentence" % fine_tuning.data_path(p, "train_file"),
                              argument="train_file")
    if self.labels is None and self.train:
      self.labels = conll.label_list_from(self.train)
    if self.labels is None:
      raise errors.InputError("no labels: pass --label_list, --do_train with a "
                              "--train_file, or an --output_dir of a finished run",
                              argument="label_list")
    self.label_ids = {l: i for i, l in enumerate(self.labels)}
    self.dev = self._read("dev_file", True) if self.do_eval else []
    self.test = self._read("test_file", False) if self.do_predict else []
    self.train_encoded = self._encode(self.train, True) if self.train else None
    self.dev_encoded = self._encode(self.dev, True) if self.dev else None
    self._test_encoded = None
    self._plan_steps(self.train_encoded.num_windows if self.train else 0)
    self._init_length_reports()

  @property
  def test_encoded(self) -> Optional[Encoded]:
    """The test sentences through the preprocessor (made once, on first use)."""
    if self._test_encoded is None and self.test:
      self._test_encoded = self._encode(self.test, False)
    return self._test_encoded

  def _encoded_splits(self) -> list:
    """``[(name, Encoded, flag of its batch size)]`` of the files read."""
    out = []
    if self.train:
      out.append(("train", self.train_encoded, "train_batch_size"))
    if self.dev:
      out.append(("dev", self.dev_encoded, "eval_batch_size"))
    if self.test:
      out.append(("test", self.test_encoded, "predict_batch_size"))
    return out

  def length_splits(self) -> list:
    """Per file read: ``[CLS] pieces [SEP]`` of every sentence untruncated
    (each word at least one piece, as the model sees it), and as cut the
    sentences split into more than one ``--doc_stride`` window (no word is
    lost: each is predicted from its max-context window)."""
    p = self.params
    rule = ("longer than --max_seq_length=%d tokens were split into windows "
            "--doc_stride=%d pieces apart (no word is cut)" % (p.max_seq_length, p.doc_stride))

    def report(name, enc):
      return preprocessing.LengthReport.from_lengths(
          name, enc.sentence_lengths, p.max_seq_length,
          cut=enc.windows_per_sentence > 1, unit="sentences", rule=rule)
    return [(name, lambda name=name, enc=enc: report(name, enc))
            for name, enc, _ in self._encoded_splits()]

  def batch_rows(self) -> list:
    """Each batch flag against the windows of its file."""
    p = self.params
    return [(flag, getattr(p, flag), enc.num_windows, "windows of %s" % fine_tuning.data_path(
        p, {"train": "train_file", "dev": "dev_file", "test": "test_file"}[name]))
            for name, enc, flag in self._encoded_splits()]

  def _given_labels(self):
    p = self.params
    if p.label_list:
      return conll.check_label_list(list(p.label_list), argument="label_list")
    labels = self.recorded_setting("labels")
    return None if labels is None else list(labels)

  def _read(self, name, with_tags):
    return conll.read_conll(fine_tuning.data_path(self.params, name), with_tags=with_tags,
                            labels=self.labels, argument=name,
                            limit=self.params.max_examples)

  def _encode(self, sentences, labeled):
    ids = [[self.label_ids[t] for t in s.tags] for s in sentences] if labeled else None
    return Encoded(self.tagging_preprocessor, sentences, ids)

  def build_model(self):
    return tagging.BertTokenClassifier(self.config, len(self.labels),
                                       skip_padding=self.params.skip_padding)

  def load_weights(self, model, path):
    """``--init_checkpoint``: the encoder, and the token-classification head
    where the start model has one of these labels
    (:func:`bert_tf.modeling.presets.load_weights`)."""
    return presets.load_weights(model, path, tagging.TAGGING_TASK)

  def run_config(self) -> dict:
    """``ner_config.json``: ``labels``, ``do_lower_case``,
    ``preserve_unused_tokens``, ``max_seq_length``, ``doc_stride``."""
    return dict(task="ner", labels=self.labels, **self.tokenizer_settings(),
                doc_stride=self.params.doc_stride)

  # --- training ----------------------------------------------------------

  def train_dataset(self, batch_size, input_context):
    """Repeated, shuffled ``(features, label_ids)`` batches of windows, int32
    [B, S'], each batch trimmed to its longest window (S' <=
    ``max_seq_length``; exact: the cut columns are padding, masked out and
    labeled IGNORE), as the classifier's batches
    (:func:`bert_tf.preprocessing.trim_to_longest`). Batches of shuffled
    window indices gather the rows of the featurized arrays
    (:func:`bert_tf.data.classifier_data.index_batches`: a new permutation
    every epoch), so the iterator is checkpointed with the run (exact
    resume) at the cost of one int64 per window."""
    del input_context
    f = self.train_encoded.features
    arrays = {k: tf.constant(f[k]) for k in tagging.FEATURE_NAMES + ("label_ids",)}

    def gather(idx):
      x = preprocessing.trim_to_longest(
          {k: tf.gather(arrays[k], idx) for k in tagging.FEATURE_NAMES})
      y = tf.gather(arrays["label_ids"], idx)
      return x, y[:, :tf.shape(x["input_ids"])[1]]
    return classifier_data.index_batches(
        self.train_encoded.num_windows, batch_size, shuffle=True,
        seed=self.params.seed, drop_remainder=True).map(gather).prefetch(2)

  def loss_normalizers(self, features):
    _, y = features
    return {"labeled": tf.reduce_sum(tf.cast(y >= 0, tf.float32))}

  def compute_loss(self, model, features, totals=None):
    x, y = features
    logits = tf.cast(model(x, training=True), tf.float32)
    loss_sum, count = tagging.tagging_loss(logits, y)
    den = count if totals is None else totals["labeled"]
    pred = tf.argmax(logits, -1, output_type=tf.int32)
    correct = tf.reduce_sum(tf.cast(tf.equal(pred, y), tf.float32))
    sums = {"loss_sum": loss_sum, "labeled": count, "correct": correct,
            "examples": tf.cast(tf.shape(y)[0], tf.float32)}
    return loss_sum / tf.maximum(den, 1.0), sums

  def train_metrics(self, sums):
    if not sums.get("labeled"):
      return {}
    return {"loss": sums["loss_sum"] / sums["labeled"],
            "accuracy": sums["correct"] / sums["labeled"]}

  # --- evaluation, prediction --------------------------------------------

  def predict_tags(self, model, encoded: Encoded, batch_size: int):
    """``(tags per sentence, window logits)`` of encoded sentences."""
    logits = predict_window_logits(model, encoded.features, batch_size)
    ids = encoded.word_predictions(logits)
    return [[self.labels[i] for i in s] for s in ids], logits

  def evaluate(self, model, print_fn):
    """Entity-level scores of the dev file (see the module docstring)."""
    if not self.dev:
      return {}
    pred, logits = self.predict_tags(model, self.dev_encoded, self.params.eval_batch_size)
    scores = conll.entity_scores([s.tags for s in self.dev], pred)
    loss_sum, count = tagging.tagging_loss(logits, self.dev_encoded.features["label_ids"])
    print_fn("%s (%d sentences, %d windows):\n%s" % (
        os.path.basename(fine_tuning.data_path(self.params, "dev_file")), len(self.dev),
        self.dev_encoded.num_windows, conll.format_report(scores).rstrip()))
    out = {"eval_precision": scores["precision"], "eval_recall": scores["recall"],
           "eval_f1": scores["f1"], "eval_accuracy": scores["accuracy"],
           "eval_loss": float(loss_sum) / max(float(count), 1.0)}
    for ty, s in scores["per_type"].items():
      for k in ("precision", "recall", "f1", "support"):
        out["eval_%s_%s" % (ty, k)] = float(s[k]) if k != "support" else int(s[k])
    return out

  def predict(self, model, output_dir, print_fn):
    """Writes ``test_predictions.txt`` (:func:`bert_tf.data.conll.write_conll`)."""
    del print_fn
    if not self.test:
      return []
    pred, _ = self.predict_tags(model, self.test_encoded, self.params.predict_batch_size)
    return [conll.write_conll(os.path.join(output_dir, PREDICTIONS_FILE), self.test, pred)]
