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
import json
import os
import shutil
from typing import Optional
import weakref

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import config as config_lib
from bert_tf import errors
from bert_tf import io_utils
from bert_tf import preprocessing
from bert_tf.data import conll
from bert_tf.modeling import tagging
from bert_tf.params import field
from bert_tf.tasks import base
from bert_tf.tasks import swag

RUN_CONFIG = tagging.TAGGING_RUN_CONFIG
PREDICTIONS_FILE = "test_predictions.txt"


@dataclasses.dataclass
class NerParams:
  """Flags of ``tools/run_ner.py``, named as the original ``run_classifier.py``
  / ``run_squad.py``'s. Defaults: the issue's recipe (max_seq_length 128,
  batch 32, learning rate 5e-5, 20 epochs on WNUT-16, warm-up 0.1).

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
  vocab_file: Optional[str] = field(None, "The vocabulary file of the pretrained model (default: vocab.txt of a Hugging Face --init_checkpoint).")
  bert_config_file: Optional[str] = field(None, "bert_config.json of the pretrained model (default: a Hugging Face --init_checkpoint's config.json).")
  init_checkpoint: Optional[str] = field(None, "Initial weights: ours, an original TF1 checkpoint, or a Hugging Face BERT / BertForTokenClassification directory.")
  do_lower_case: bool = field(True, "Whether to lower case the input text.")
  preserve_unused_tokens: bool = field(False, "Keep vocab entries [unusedN] that stand alone in the text as whole tokens (the original's --preserve_unused_tokens; the usual way to add domain words to a vocab).")
  max_seq_length: int = field(128, "Window width in WordPiece tokens ([CLS] + up to max_seq_length-2 pieces + [SEP]); longer sentences are split into windows.")
  doc_stride: int = field(64, "Pieces between the starts of the windows of a long sentence.")
  do_train: bool = field(False, "Whether to fine-tune on --train_file.")
  do_eval: bool = field(False, "Whether to score --dev_file (after every epoch when training).")
  do_predict: bool = field(False, "Whether to write test_predictions.txt (CoNLL) for --test_file.")
  train_batch_size: int = field(32, "Total batch size for training (windows).")
  eval_batch_size: int = field(32, "Batch size for eval.")
  predict_batch_size: int = field(32, "Batch size for predict.")
  learning_rate: float = field(5e-5, "Peak learning rate (Adam).")
  num_train_epochs: float = field(20.0, "Number of training epochs.")
  warmup_proportion: float = field(0.1, "Fraction of steps for linear warm-up.")
  save_checkpoints_steps: int = field(1000, "How often to save a checkpoint.")
  keep_checkpoint_max: int = field(2, "Checkpoints kept.")
  iterations_per_loop: int = field(50, "Steps per loop (and per progress line).")
  optimizer: str = field("adamw_original", "Optimizer (default: the original AdamWeightDecay).", choices=("adamw_original", "adamw", "lamb"))
  seed: int = field(12345, "Shuffle, dropout and initialization seed.")
  export_dir: Optional[str] = field(None, "Export a SavedModel (raw sentences in, per-word tags and entity spans out) to EXPORT_DIR/<version>/.")
  distribution_strategy: str = field("one_device", "tf.distribute strategy.", choices=("one_device", "mirrored", "multi_worker_mirrored", "tpu"))
  dtype: str = field("float32", "Compute dtype policy.", choices=("float32", "mixed_bfloat16", "mixed_float16"))
  deterministic: bool = field(False, "Enable TensorFlow op determinism (bit-identical reruns and resumes).")
  keep_best: bool = field(True, "With --do_train --do_eval: keep the best dev model (eval_f1) in OUTPUT_DIR/best/.")
  max_examples: Optional[int] = field(None, "Read at most this many sentences of each file (quick runs).")


_PREDICT_FNS = weakref.WeakKeyDictionary()


def predict_window_logits(model, features: dict, batch_size: int) -> np.ndarray:
  """Logits float32 [W, S, L] of window features (int32 [W, S] arrays),
  in batches (the traced step is cached per model)."""
  step = _PREDICT_FNS.get(model)
  if step is None:
    step = tf.function(lambda f: tf.cast(model(f, training=False), tf.float32),
                       reduce_retracing=True)
    _PREDICT_FNS[model] = step
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


class TokenTaggingTask(base.Task):
  """CoNLL token tagging (NER) as a :class:`bert_tf.tasks.base.Task`.

  Reads the files on construction, so bad flags and files are reported
  (file and line) before any model is built or any file written.

  Args:
    params: :class:`NerParams`.

  Raises:
    bert_tf.errors.InputError / ConfigError / VocabError / ParamsError:
    naming the bad flag (``argument``), file and line.

  Example::

    task = TokenTaggingTask(NerParams(data_dir="../shared/data/ner_wnut16",
        output_dir="/tmp/ner", init_checkpoint=HF_DIR, do_train=True, do_eval=True))
    Runner(RunnerParams.from_params(task.params)).run(
        task, strategy, do_train=True, do_eval=True, eval_at_steps=task.eval_at_steps())
  """

  name = "ner"
  best_metric = "eval_f1"
  example_unit = "windows"
  normalized_loss = True
  run_files = ("bert_config.json", "vocab.txt", RUN_CONFIG)

  def __init__(self, params: NerParams):
    self.params = p = params
    self.do_train, self.do_eval, self.do_predict = p.do_train, p.do_eval, p.do_predict
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                 "doc_stride"):
      if getattr(p, name) <= 0:
        raise errors.ParamsError("%s must be positive, got %d" % (name, getattr(p, name)),
                                 argument=name)
    if p.max_examples is not None and p.max_examples <= 0:
      raise errors.ParamsError("max_examples must be positive, got %d" % p.max_examples,
                               argument="max_examples")
    config, vocab_file = swag.resolve_config_and_vocab(p)
    if p.max_seq_length > config.max_position_embeddings:
      raise errors.ParamsError(
          "--max_seq_length %d exceeds max_position_embeddings %d" %
          (p.max_seq_length, config.max_position_embeddings), argument="max_seq_length")
    self.preprocessor = preprocessing.BertPreprocessor(
        vocab_file, p.do_lower_case, p.max_seq_length,
        preserve_unused_tokens=p.preserve_unused_tokens)
    config_lib.check_vocab_size(self.preprocessor.vocab_size, config, vocab_file)
    self.tagging_preprocessor = tagging.TaggingPreprocessor(self.preprocessor,
                                                            p.doc_stride)
    self.config, self.vocab_file = config, vocab_file
    self.labels = self._given_labels()
    self.train = self._read("train_file", True) if self.do_train else []
    if self.do_train and not self.train:
      raise errors.InputError("%s has no sentence" % swag.data_path(p, "train_file"),
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
    self.train_batch_size = p.train_batch_size
    self.num_train_steps = 1
    if self.do_train:
      self.num_train_steps = max(1, int(self.train_encoded.num_windows /
                                        p.train_batch_size * p.num_train_epochs))

  def _given_labels(self):
    p = self.params
    if p.label_list:
      return conll.check_label_list(list(p.label_list), argument="label_list")
    path = os.path.join(p.output_dir, RUN_CONFIG)
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        return list(json.load(f)["labels"])
    return None

  def _read(self, name, with_tags):
    return conll.read_conll(swag.data_path(self.params, name), with_tags=with_tags,
                            labels=self.labels, argument=name,
                            limit=self.params.max_examples)

  def _encode(self, sentences, labeled):
    ids = [[self.label_ids[t] for t in s.tags] for s in sentences] if labeled else None
    return Encoded(self.tagging_preprocessor, sentences, ids)

  def eval_at_steps(self) -> list:
    """The global steps at which each epoch ends (dev evaluation points)."""
    if not self.do_train:
      return []
    return swag.epoch_ends(self.train_encoded.num_windows, self.params.train_batch_size,
                           self.params.num_train_epochs, self.num_train_steps)

  def optimizer_spec(self) -> base.OptimizerSpec:
    p = self.params
    return base.OptimizerSpec(p.learning_rate, self.num_train_steps,
                              int(self.num_train_steps * p.warmup_proportion),
                              p.optimizer)

  def build_model(self):
    return tagging.BertTokenClassifier(self.config, len(self.labels))

  def initialize(self, model):
    if self.params.init_checkpoint:
      return tagging.load_tagging_weights(model, self.params.init_checkpoint)
    if self.do_train:
      logging.warning("no --init_checkpoint: fine-tuning from random weights")
    return None

  def write_run_files(self, output_dir: str) -> None:
    """``bert_config.json``, ``vocab.txt`` and ``ner_config.json``
    (``labels``, ``do_lower_case``, ``max_seq_length``, ``doc_stride``)."""
    self.config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    dst = os.path.join(output_dir, "vocab.txt")
    if os.path.abspath(self.vocab_file) != os.path.abspath(dst):
      with io_utils.atomic_output(dst) as tmp:
        shutil.copyfile(self.vocab_file, tmp)
    io_utils.atomic_write_text(
        os.path.join(output_dir, RUN_CONFIG),
        json.dumps({"task": "ner", "labels": self.labels,
                    "do_lower_case": self.params.do_lower_case,
                    "preserve_unused_tokens": self.params.preserve_unused_tokens,
                    "max_seq_length": self.params.max_seq_length,
                    "doc_stride": self.params.doc_stride}, indent=2) + "\n")

  # --- training ----------------------------------------------------------

  def train_dataset(self, batch_size, input_context):
    """Repeated, shuffled ``(features, label_ids)`` batches of windows."""
    del input_context
    f = self.train_encoded.features
    x = {k: f[k] for k in tagging.FEATURE_NAMES}
    ds = tf.data.Dataset.from_tensor_slices((x, f["label_ids"]))
    ds = ds.shuffle(max(1, self.train_encoded.num_windows), seed=self.params.seed,
                    reshuffle_each_iteration=True).repeat()
    return ds.batch(batch_size, drop_remainder=True).prefetch(2)

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
        os.path.basename(swag.data_path(self.params, "dev_file")), len(self.dev),
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
    pred, _ = self.predict_tags(model, self._encode(self.test, False),
                                self.params.predict_batch_size)
    return [conll.write_conll(os.path.join(output_dir, PREDICTIONS_FILE), self.test, pred)]
