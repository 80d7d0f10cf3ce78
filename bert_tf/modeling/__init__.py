"""Keras 3 BERT layers and models (see ``layers``, ``encoder``, ``models``)."""

from bert_tf.modeling.encoder import BertEncoder
from bert_tf.modeling.models import BertClassifier
from bert_tf.modeling.models import BertPretrainer

__all__ = ["BertEncoder", "BertClassifier", "BertPretrainer"]
