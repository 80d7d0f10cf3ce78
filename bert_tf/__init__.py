"""bert_tf: BERT (Devlin et al., 2018) for TensorFlow 2 / Keras 3.

The public API, imported lazily (``import bert_tf`` loads no TensorFlow, so
the TF-free pretraining-data workers stay light):

  >>> import bert_tf
  >>> config = bert_tf.preset("tiny")                           # doctest: +SKIP
  >>> encoder = bert_tf.BertEncoder(config)                     # doctest: +SKIP
  >>> pre = bert_tf.BertPreprocessor("vocab.txt", True, 128)    # doctest: +SKIP

Importing the package selects the TensorFlow backend of Keras 3.
"""

import os

from bert_tf import _keras_registry  # pylint: disable=g-bad-import-order
from bert_tf import _lazy  # pylint: disable=g-bad-import-order
from bert_tf import _quiet  # pylint: disable=g-bad-import-order

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"

# keras.models.load_model finds bert_tf's classes in any process that ran
# `import bert_tf`, without this import loading Keras (see _keras_registry).
_keras_registry.install()
# TensorFlow's C++ start-up banner (cuInit, oneDNN, CPU notes) filtered when
# TensorFlow loads later, unless TF_CPP_MIN_LOG_LEVEL asks for it (see _quiet).
_quiet.install()

# public name -> module that defines it
_API = {
    "BertConfig": "bert_tf.config",
    "preset": "bert_tf.config",
    "FullTokenizer": "bert_tf.tokenization",
    "BertPreprocessor": "bert_tf.preprocessing",
    "PreprocessorLayer": "bert_tf.preprocessing",
    "BertEmbeddings": "bert_tf.modeling.layers",
    "TransformerBlock": "bert_tf.modeling.layers",
    "BertEncoder": "bert_tf.modeling.encoder",
    "MaskedLMHead": "bert_tf.modeling.models",
    "DenseHead": "bert_tf.modeling.models",
    "BertPretrainer": "bert_tf.modeling.models",
    "BertClassifier": "bert_tf.modeling.models",
    "build_pretrainer": "bert_tf.modeling.models",
    "build_classifier": "bert_tf.modeling.models",
    "BertQuestionAnswerer": "bert_tf.modeling.models",
    "build_question_answerer": "bert_tf.modeling.models",
    "BertMultipleChoice": "bert_tf.modeling.multiple_choice",
    "BertTokenClassifier": "bert_tf.modeling.tagging",
    "create_optimizer": "bert_tf.optimization",
    "AdamWeightDecay": "bert_tf.optimization",
    "load_encoder_weights": "bert_tf.modeling.presets",
    "BertTfError": "bert_tf.errors",
    "Runner": "bert_tf.runner",
    "RunnerParams": "bert_tf.runner",
    "Task": "bert_tf.tasks.base",
    "Search": "bert_tf.tuning",
    "search": "bert_tf.tuning",
}

__all__ = sorted(_API) + ["__version__"]


__getattr__ = _lazy.getattr_for(__name__, _API)


def __dir__():
  return sorted(set(globals()) | set(__all__))
