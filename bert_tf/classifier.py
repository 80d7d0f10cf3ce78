"""Fine-tuning a sentence(-pair) classifier or regressor (original ``run_classifier.py``).

Tokenization and packing are the in-graph :class:`BertPreprocessor`, the
same object that :mod:`export.saved_model` bakes into the SavedModel.
The optimizer is the original AdamWeightDecay with linear warm-up over
``warmup_proportion`` of the steps and linear decay to 0. Classification
uses softmax cross-entropy; STS-B (regression) one output and the mean
squared error (as Hugging Face ``BertForSequenceClassification``; the
original has no regression task). With ``do_eval`` the dev set is scored
after every epoch and the best model by the task's GLUE metric
(:func:`bert_tf.metrics.main_metric`) is kept in ``<output_dir>/best/``.
"""

import dataclasses
import json
import math
import os
import shutil
import tempfile
import weakref

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import config as config_lib
from bert_tf import io_utils
from bert_tf import metrics as metrics_lib
from bert_tf import optimization
from bert_tf import preprocessing
from bert_tf import training
from bert_tf.data import classifier_data
from bert_tf.modeling import models

RUN_CONFIG = "classifier_config.json"
BEST_DIR = "best"
BEST_STATE = "best.json"
# Token-length bucket edges for --bucket_by_length training batches.
BUCKETS = (16, 24, 32, 48, 64, 96)


@dataclasses.dataclass
class ClassifierParams:
  """Flags of the original ``run_classifier.py`` (same names and defaults)."""
  task_name: str
  data_dir: str
  output_dir: str
  vocab_file: str = None
  bert_config_file: str = None
  init_checkpoint: str = None
  do_lower_case: bool = True
  max_seq_length: int = 128
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 50
  optimizer: str = "adamw_original"
  seed: int = 12345
  export_dir: str = None
  bucket_by_length: bool = True
  dtype: str = "float32"
  # Added task options (see bert_tf.data.classifier_data.get_task).
  xnli_language: str = "en"
  text_a_column: str = None
  text_b_column: str = None
  label_column: str = None
  labels: tuple = None
  tfds_name: str = None
  tfds_data_dir: str = None
  keep_best: bool = True


def resolve_config_and_vocab(params):
  """``(BertConfig, vocab_file)`` from the flags or a Hugging Face directory.

  Raises:
    config_lib.ConfigError / ValueError: naming the flag that is missing.
  """
  hf = params.init_checkpoint if (params.init_checkpoint and
                                  checkpoints.is_hf_dir(params.init_checkpoint)) else None
  if params.bert_config_file:
    config = config_lib.BertConfig.from_json_file(params.bert_config_file)
  elif hf:
    config = checkpoints.read_hf_config(hf)
  else:
    raise ValueError("--bert_config_file is required unless --init_checkpoint "
                     "is a Hugging Face BERT directory")
  vocab_file = params.vocab_file or (os.path.join(hf, "vocab.txt") if hf else None)
  if not vocab_file:
    raise ValueError("--vocab_file is required unless --init_checkpoint is a "
                     "Hugging Face BERT directory")
  return config, vocab_file


def set_dtype_policy(dtype):
  """Sets the Keras dtype policy (``float32``, ``mixed_bfloat16``, ``mixed_float16``).

  Raises:
    ValueError: naming ``--dtype`` for an unknown value.
  """
  import keras  # pylint: disable=g-import-not-at-top
  if dtype not in ("float32", "mixed_bfloat16", "mixed_float16"):
    raise ValueError("--dtype: unknown %r (float32, mixed_bfloat16, "
                     "mixed_float16)" % dtype)
  keras.config.set_dtype_policy(dtype)


build_classifier = models.build_classifier  # moved to bert_tf.modeling.models


_PREDICT_FNS = weakref.WeakKeyDictionary()


def predict_logits(model, dataset):
  """Logits float32 [N, num_outputs] over a features-only or (features, y) dataset.

  The traced step is cached per model (epochs' evaluations reuse it).
  """
  step = _PREDICT_FNS.get(model)
  if step is None:
    step = tf.function(lambda f: tf.cast(model(f, training=False), tf.float32),
                       reduce_retracing=True)
    _PREDICT_FNS[model] = step
  out = []
  for batch in dataset:
    features = batch[0] if isinstance(batch, tuple) else batch
    out.append(step(features).numpy())
  return np.concatenate(out, 0)


def softmax(logits):
  """Row-wise softmax of float [N, K] logits (numpy, float64-safe)."""
  z = logits - logits.max(-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(-1, keepdims=True)


def task_from_params(params):
  """The :class:`classifier_data.Task` the params ask for.

  Raises:
    classifier_data.TaskError: unknown task or missing generic-task flags.
  """
  labels = params.labels
  if isinstance(labels, str):
    labels = [l.strip() for l in labels.split(",") if l.strip()]
  return classifier_data.get_task(
      params.task_name, xnli_language=params.xnli_language,
      text_a_column=params.text_a_column, text_b_column=params.text_b_column,
      label_column=params.label_column, labels=labels or None)


def load_split(task, params, split):
  """:class:`classifier_data.Examples` of one split, from files or tfds.

  Raises:
    classifier_data.TaskError: naming the file and line, or the tfds dir.
  """
  if params.tfds_name:
    return classifier_data.read_tfds_split(task, params.tfds_name,
                                           params.tfds_data_dir, split)
  if not params.data_dir:
    raise classifier_data.TaskError("--data_dir (or --tfds_name) is required")
  return classifier_data.read_split(
      task, classifier_data.split_path(task, params.data_dir, split), split)


def eval_dataset(preprocessor, task, examples, batch_size):
  """The batched (features, labels) dataset of a labeled split (re-iterable)."""
  return classifier_data.examples_dataset(
      preprocessor, examples.texts_a, examples.texts_b, examples.labels,
      batch_size, label_dtype=tf.float32 if task.is_regression else tf.int32)


def evaluate(model, preprocessor, task, examples, batch_size, dataset=None):
  """Scores ``examples`` (a labeled split).

  ``dataset`` is its :func:`eval_dataset` when already built (saves
  re-tracing the preprocessing on every epoch's evaluation).

  Returns:
    ``(results, outputs)``: results maps ``loss`` (mean cross-entropy, or
    mean squared error for regression) and the task's GLUE metrics
    (:func:`bert_tf.metrics.compute`) to floats; outputs are the logits
    float [N, K] (the predictions [N, 1] for regression).
  """
  is_reg = task.is_regression
  if dataset is None:
    dataset = eval_dataset(preprocessor, task, examples, batch_size)
  logits = predict_logits(model, dataset)
  if is_reg:
    y = np.asarray(examples.labels, np.float64)
    preds = logits[:, 0].astype(np.float64)
    results = {"loss": float(np.mean((preds - y) ** 2))}
    results.update(metrics_lib.compute(task.metrics, preds, y))
  else:
    y = np.asarray(examples.labels)
    probs = softmax(logits.astype(np.float64))
    results = {"loss": float(-np.log(probs[np.arange(len(y)), y] + 1e-12).mean())}
    results.update(metrics_lib.compute(task.metrics, logits.argmax(-1), y))
  return results, logits


def _eval_prefix(split):
  """``eval_`` for the main dev split, ``eval_mismatched_`` for MNLI's other."""
  return "eval_" if split.name == "dev" else "eval_%s_" % split.name[len("dev_"):]


def _format_results(results):
  return "".join("%s = %s\n" % (k, results[k]) for k in sorted(results))


def _better(value, best):
  if best is None or (isinstance(best, float) and math.isnan(best)):
    return True
  return not math.isnan(value) and value > best


def read_best_state(output_dir):
  """The best dev model's record ``{step, metric, value, ...}``, or None."""
  path = os.path.join(output_dir, BEST_DIR, BEST_STATE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def save_best(model, output_dir, step, metric, value, results):
  """Replaces ``<output_dir>/best/`` with the current weights, atomically.

  The directory is complete before it gets its name: checkpoint
  ``ckpt-1`` (model weights, no optimizer slots; read it with
  ``tf.train.latest_checkpoint``), the run's ``bert_config.json``,
  ``vocab.txt`` and ``classifier_config.json`` (so it is a fine-tuned model
  directory on its own), its ``eval_results.txt`` and ``best.json``.
  """
  final = os.path.join(output_dir, BEST_DIR)
  tmp = tempfile.mkdtemp(prefix=".best.", suffix=".tmp", dir=output_dir)
  try:
    tf.train.Checkpoint(model=model, encoder=model.encoder).save(
        os.path.join(tmp, "ckpt"))
    for name in ("bert_config.json", "vocab.txt", RUN_CONFIG):
      shutil.copyfile(os.path.join(output_dir, name), os.path.join(tmp, name))
    with open(os.path.join(tmp, "eval_results.txt"), "w", encoding="utf-8") as f:
      f.write(_format_results(results))
    with open(os.path.join(tmp, BEST_STATE), "w", encoding="utf-8") as f:
      json.dump({"step": int(step), "metric": metric, "value": value}, f, indent=2)
    old = None
    if os.path.exists(final):
      old = tempfile.mkdtemp(prefix=".best.", suffix=".old", dir=output_dir)
      os.rmdir(old)
      os.rename(final, old)
    os.rename(tmp, final)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  if old:
    shutil.rmtree(old, ignore_errors=True)


def restore_best(model, output_dir):
  """Loads ``<output_dir>/best/`` weights into ``model``; returns its record or None."""
  state = read_best_state(output_dir)
  path = tf.train.latest_checkpoint(os.path.join(output_dir, BEST_DIR))
  if state is None or path is None:
    return None
  tf.train.Checkpoint(model=model, encoder=model.encoder).read(
      path).assert_existing_objects_matched().expect_partial()
  return state


def write_predictions(output_dir, task, split, examples, outputs):
  """Writes a test split's predictions, atomically.

  * ``test_results.tsv`` (``test_results_mismatched.tsv`` for MNLI's
    mismatched set): one line per example, tab-separated class
    probabilities, no header (the original ``run_classifier.py``); for
    regression the predicted score.
  * ``<submission>.tsv`` (``CoLA.tsv``, ``MNLI-m.tsv``, ...): the GLUE
    submission file, header ``index<TAB>prediction``, then the row id and the
    label name (regression: the score, 3 decimals).

  Returns:
    the two paths.
  """
  suffix = "" if split.name == "test" else "_" + split.name[len("test_"):]
  results_path = os.path.join(output_dir, "test_results%s.tsv" % suffix)
  if task.is_regression:
    preds = outputs[:, 0]
    io_utils.atomic_write_text(results_path, "".join("%s\n" % p for p in preds))
    answers = ["%.3f" % p for p in preds]
  else:
    probs = softmax(outputs.astype(np.float64)).astype(np.float32)
    io_utils.atomic_write_text(
        results_path,
        "".join("\t".join(str(p) for p in row) + "\n" for row in probs))
    answers = [task.labels[i] for i in probs.argmax(-1)]
  sub_path = os.path.join(output_dir, "%s.tsv" % (split.submission or task.name))
  io_utils.atomic_write_text(
      sub_path, "index\tprediction\n" + "".join(
          "%s\t%s\n" % (i, a) for i, a in zip(examples.ids, answers)))
  return results_path, sub_path


def _epoch_ends(num_examples, batch_size, epochs, total_steps):
  """Global steps at which each epoch ends (the last is ``total_steps``)."""
  per_epoch = num_examples / batch_size
  ends = sorted({min(total_steps, max(1, int(round(per_epoch * k))))
                 for k in range(1, int(math.ceil(epochs)) + 1)})
  return [e for e in ends if e < total_steps] + [total_steps]


def run_classifier(params, strategy, do_train=True, do_eval=True, do_predict=False,
                   print_fn=print):
  """Fine-tunes, evaluates, predicts and exports, as the flags ask.

  Files in ``output_dir``: checkpoints (``ckpt-N``), ``bert_config.json``,
  ``vocab.txt``, ``classifier_config.json``, ``eval_results.txt`` (the last
  evaluation: ``eval_loss``, the task's metrics with prefix ``eval_``, MNLI's
  mismatched set with ``eval_mismatched_``, ``global_step``), ``best/`` (the
  best dev model, see :func:`save_best`), ``test_results*.tsv`` and the GLUE
  submission files (:func:`write_predictions`); with ``export_dir``: a
  SavedModel version there. Prediction and export use ``best/`` when it
  exists (logged), else the final weights.

  Returns:
    dict: ``eval_*`` results and ``global_step`` (when evaluated),
    ``best_step``/``best_<metric>`` (when a best model exists),
    ``export_path`` (when exported), ``test_files`` (when predicted).

  Raises:
    ValueError subclasses naming the bad flag or file.
  """
  task = task_from_params(params)
  config, vocab_file = resolve_config_and_vocab(params)
  if params.max_seq_length > config.max_position_embeddings:
    raise ValueError("--max_seq_length %d exceeds max_position_embeddings %d" %
                     (params.max_seq_length, config.max_position_embeddings))
  preprocessor = preprocessing.BertPreprocessor(vocab_file, params.do_lower_case,
                                                params.max_seq_length)
  if preprocessor.vocab_size > config.vocab_size:
    raise ValueError("vocab %r has %d tokens but the BERT config's vocab_size is "
                     "%d" % (vocab_file, preprocessor.vocab_size, config.vocab_size))
  train = None
  if do_train or task.labels is None:
    if task.labels is None and not do_train:
      task = _labels_from_run_config(task, params.output_dir) or task
    if do_train or task.labels is None:
      train = load_split(task, params, task.train)
      task, train = classifier_data.resolve_labels(task, train)
  devs = [(s, load_split(task, params, s)) for s in task.dev] if do_eval else []
  dev_datasets = [eval_dataset(preprocessor, task, ex, params.eval_batch_size)
                  for _, ex in devs]
  tests = [(s, load_split(task, params, s)) for s in task.test] if do_predict else []

  os.makedirs(params.output_dir, exist_ok=True)
  set_dtype_policy(params.dtype)
  with strategy.scope():
    model = build_classifier(config, task.num_outputs)
  num_train_steps = 1
  if do_train:
    num_train_steps = max(1, int(len(train) / params.train_batch_size
                                 * params.num_train_epochs))
  with strategy.scope():
    optimizer = optimization.create_optimizer(
        params.learning_rate, num_train_steps,
        int(num_train_steps * params.warmup_proportion), params.optimizer)
    optimizer.build(model.trainable_variables)
  ckpt = tf.train.Checkpoint(model=model, encoder=model.encoder,
                             optimizer=optimizer)
  manager = tf.train.CheckpointManager(
      ckpt, params.output_dir, max_to_keep=2, step_counter=optimizer.iterations,
      checkpoint_interval=params.save_checkpoints_steps)
  latest = training.restore_latest(manager)
  if latest:
    print_fn("resumed from %s (step %d)" % (latest, int(optimizer.iterations.numpy())))
  elif params.init_checkpoint:
    print_fn("initialized the encoder from " +
             checkpoints.load_encoder_weights(model.encoder, params.init_checkpoint))
  elif do_train:
    logging.warning("no --init_checkpoint: fine-tuning from random weights")

  _write_run_files(params, task, config, vocab_file)
  main_key = metrics_lib.main_metric(task.metrics)
  results = {}

  def run_eval():
    """Evaluates every dev split; writes eval_results.txt; updates best/."""
    out = {}
    for (split, examples), ds in zip(devs, dev_datasets):
      res, _ = evaluate(model, preprocessor, task, examples, params.eval_batch_size,
                        dataset=ds)
      prefix = _eval_prefix(split)
      out.update({prefix + k: v for k, v in res.items()})
      print_fn("%s (%d examples): %s" % (split.name, len(examples), "  ".join(
          "%s=%.4f" % (k, v) for k, v in sorted(res.items()))))
    step = int(optimizer.iterations.numpy())
    out["global_step"] = step
    io_utils.atomic_write_text(os.path.join(params.output_dir, "eval_results.txt"),
                               _format_results(out))
    if do_train and params.keep_best:
      value = out["eval_" + main_key]
      best = read_best_state(params.output_dir)
      if _better(value, None if best is None else best["value"]):
        save_best(model, params.output_dir, step, main_key, value, out)
        print_fn("new best dev model: %s=%.4f at step %d -> %s" % (
            main_key, value, step, os.path.join(params.output_dir, BEST_DIR)))
    return out

  if do_train and int(optimizer.iterations.numpy()) < num_train_steps:
    ds = classifier_data.examples_dataset(
        preprocessor, train.texts_a, train.texts_b, train.labels,
        params.train_batch_size, shuffle=True, seed=params.seed,
        drop_remainder=True,
        bucket_boundaries=BUCKETS if params.bucket_by_length else None,
        label_dtype=tf.float32 if task.is_regression else tf.int32)
    dist = strategy.experimental_distribute_dataset(ds)
    global_batch = float(params.train_batch_size)

    def compute(batch):
      features, y = batch
      logits = tf.cast(model(features, training=True), tf.float32)
      if task.is_regression:
        loss = tf.square(logits[:, 0] - y)
        sums = {}
      else:
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y),
                          tf.float32)
        sums = {"correct": tf.reduce_sum(correct)}
      sums["loss_sum"] = tf.reduce_sum(loss)
      sums["examples"] = tf.cast(tf.shape(y)[0], tf.float32)
      return tf.reduce_sum(loss) / global_batch, sums

    def log(step, sums, seconds):
      del seconds
      acc = (" accuracy=%.4f" % (sums["correct"] / sums["examples"])
             if "correct" in sums else "")
      print_fn("step %d/%d loss=%.4f%s lr=%.3g %.1f examples/s" % (
          step, num_train_steps, sums["loss_sum"] / sums["examples"], acc,
          float(optimizer.learning_rate), sums["examples_per_second"]))

    print_fn("fine-tuning %s: %d examples, %d steps (batch %d, %.3g epochs)" % (
        task.name, len(train), num_train_steps, params.train_batch_size,
        params.num_train_epochs))
    trainer = training.Trainer(strategy, model, optimizer, compute)
    iterator = iter(dist)
    ends = (_epoch_ends(len(train), params.train_batch_size,
                        params.num_train_epochs, num_train_steps)
            if devs else [num_train_steps])
    for end in ends:
      if int(optimizer.iterations.numpy()) >= end:
        continue
      trainer.train(iterator, end, manager, steps_per_loop=params.iterations_per_loop,
                    log_fn=log, examples_per_step=params.train_batch_size)
      if devs:
        results = run_eval()
  elif devs:
    results = run_eval()

  best = None
  if (do_predict or params.export_dir) and params.keep_best:
    best = restore_best(model, params.output_dir)
    if best is not None:
      print_fn("using the best dev model for prediction/export: step %d, %s=%.4f "
               "(%s)" % (best["step"], best["metric"], best["value"],
                         os.path.join(params.output_dir, BEST_DIR)))
      results["best_step"] = best["step"]
      results["best_" + best["metric"]] = best["value"]
  if best is None and (do_predict or params.export_dir):
    print_fn("using the final model (step %d) for prediction/export" %
             int(optimizer.iterations.numpy()))

  if tests:
    files = []
    for split, examples in tests:
      ds = classifier_data.examples_dataset(preprocessor, examples.texts_a,
                                            examples.texts_b, None,
                                            params.predict_batch_size)
      files.extend(write_predictions(params.output_dir, task, split, examples,
                                     predict_logits(model, ds)))
    results["test_files"] = files
    print_fn("wrote %s" % ", ".join(files))

  if params.export_dir:
    from bert_tf.export import saved_model  # pylint: disable=g-import-not-at-top
    path = saved_model.export_classifier(
        model, preprocessor, None if task.is_regression else task.labels,
        params.export_dir, task.name, task.is_pair,
        is_regression=task.is_regression)
    results["export_path"] = path
    print_fn("exported SavedModel to %s" % path)
  return results


def _labels_from_run_config(task, output_dir):
  """A generic task with the labels a previous run recorded, or None."""
  path = os.path.join(output_dir, RUN_CONFIG)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    labels = json.load(f).get("labels")
  return dataclasses.replace(task, labels=tuple(labels)) if labels else None


def _write_run_files(params, task, config, vocab_file):
  """Config, vocab and run settings beside the checkpoints (for re-export)."""
  config.to_json_file(os.path.join(params.output_dir, "bert_config.json"))
  dst = os.path.join(params.output_dir, "vocab.txt")
  if os.path.abspath(vocab_file) != os.path.abspath(dst):
    with io_utils.atomic_output(dst) as tmp:
      shutil.copyfile(vocab_file, tmp)
  io_utils.atomic_write_text(
      os.path.join(params.output_dir, RUN_CONFIG),
      json.dumps({"task_name": task.name, "labels": list(task.labels),
                  "do_lower_case": params.do_lower_case,
                  "max_seq_length": params.max_seq_length,
                  "is_regression": task.is_regression,
                  "is_pair": task.is_pair}, indent=2) + "\n")
