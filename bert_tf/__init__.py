"""bert_tf: BERT (Devlin et al., 2018) for TensorFlow 2 / Keras 3.

Importing the package selects the TensorFlow backend of Keras 3.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
