"""SavedModel export: raw strings in, probabilities and labels out.

The serving graph is ``BertPreprocessor`` (tensorflow-text tokenizer with the
vocab as a SavedModel asset) -> ``trim_to_longest`` -> ``BertClassifier`` ->
softmax, exactly the preprocessing used while fine-tuning. The export is
written in TF Serving's ``<export_dir>/<version>/`` layout: under a
temporary name first, renamed to the numeric version when whole (TF Serving
ignores non-numeric directories).

Signature ``serving_default``:
  inputs: ``text`` string [B] (single-sentence tasks) or ``text_a``,
    ``text_b`` string [B] (pair tasks);
  outputs: ``probabilities`` float32 [B, num_labels], ``logits`` float32
    [B, num_labels], ``label_ids`` int32 [B], ``labels`` string [B].

Loading needs ``import tensorflow_text`` (registers the tokenizer ops).
"""

import json
import os
import re

import tensorflow as tf

from bert_tf import io_utils
from bert_tf import preprocessing

METADATA_FILE = "bert_tf_export.json"


class ClassifierServingModule(tf.Module):
  """Preprocessor + classifier behind a string signature.

  Args:
    model: a built :class:`bert_tf.modeling.BertClassifier`.
    preprocessor: the :class:`bert_tf.preprocessing.BertPreprocessor` used to
      fine-tune it.
    labels: list of label names (str), index = label id.
    is_pair: two string inputs (``text_a``, ``text_b``) instead of ``text``.
  """

  def __init__(self, model, preprocessor, labels, is_pair=False):
    super().__init__(name="bert_classifier_serving")
    self.model = model
    self.preprocessor = preprocessor
    self.label_names = tf.constant([str(l) for l in labels])
    self.is_pair = is_pair

  def predict(self, text_a, text_b=None):
    """The serving computation; returns the signature's output dict."""
    features = preprocessing.trim_to_longest(self.preprocessor(text_a, text_b))
    logits = self.model(features, training=False)
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
            "label_ids": label_ids,
            "labels": tf.gather(self.label_names, label_ids)}

  def signature(self):
    """The concrete ``serving_default`` function."""
    if self.is_pair:
      fn = tf.function(lambda text_a, text_b: self.predict(text_a, text_b))
      return fn.get_concrete_function(tf.TensorSpec([None], tf.string, "text_a"),
                                      tf.TensorSpec([None], tf.string, "text_b"))
    fn = tf.function(lambda text: self.predict(text))
    return fn.get_concrete_function(tf.TensorSpec([None], tf.string, "text"))


def next_version(export_dir):
  """1 + the largest numeric version directory in ``export_dir`` (1 if none)."""
  if not os.path.isdir(export_dir):
    return 1
  versions = [int(d) for d in os.listdir(export_dir) if re.fullmatch(r"\d+", d)]
  return max(versions, default=0) + 1


def export_classifier(model, preprocessor, labels, export_dir, task_name="",
                      is_pair=False, version=None):
  """Writes ``export_dir/<version>/`` (a SavedModel) and returns its path.

  Args:
    model, preprocessor, labels, is_pair: see :class:`ClassifierServingModule`.
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    task_name: recorded in the metadata file.
    version: integer version; default :func:`next_version`.

  Returns:
    the path of the version directory.

  Raises:
    FileExistsError: that version already exists.
  """
  version = next_version(export_dir) if version is None else int(version)
  final = os.path.join(export_dir, str(version))
  module = ClassifierServingModule(model, preprocessor, labels, is_pair)
  with io_utils.atomic_directory(final) as tmp:
    tf.saved_model.save(module, tmp,
                        signatures={"serving_default": module.signature()})
    extra = os.path.join(tmp, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    metadata = {
        "task_name": task_name, "labels": [str(l) for l in labels],
        "inputs": ["text_a", "text_b"] if is_pair else ["text"],
        "max_seq_length": preprocessor.max_seq_length,
        "do_lower_case": preprocessor.do_lower_case,
        "requires": "import tensorflow_text (tensorflow-text %s ops)" %
                    _tf_text_version(),
    }
    with open(os.path.join(extra, METADATA_FILE), "w", encoding="utf-8") as f:
      json.dump(metadata, f, indent=2)
  return final


def _tf_text_version():
  import tensorflow_text  # pylint: disable=g-import-not-at-top
  return tensorflow_text.__version__
