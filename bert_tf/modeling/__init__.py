"""Keras 3 BERT layers and models (see ``layers``, ``encoder``, ``models``).

Every class is registered Keras-serializable (package ``bert_tf``): models
save to ``.keras`` and come back with ``keras.models.load_model``; the
encoder and task models also load pretrained weights with ``from_preset``
(``presets``).
"""

from bert_tf.modeling.encoder import BertEncoder
from bert_tf.modeling.layers import BertEmbeddings
from bert_tf.modeling.layers import Dropout
from bert_tf.modeling.layers import TransformerBlock
from bert_tf.modeling.models import BertClassifier
from bert_tf.modeling.models import BertPretrainer
from bert_tf.modeling.models import BertQuestionAnswerer
from bert_tf.modeling.models import DenseHead
from bert_tf.modeling.models import MaskedLMHead
from bert_tf.modeling.multiple_choice import BertMultipleChoice
from bert_tf.modeling.tagging import BertTokenClassifier

__all__ = ["BertEncoder", "BertClassifier", "BertPretrainer", "BertQuestionAnswerer",
           "BertMultipleChoice", "BertTokenClassifier",
           "BertEmbeddings",
           "TransformerBlock", "Dropout", "MaskedLMHead", "DenseHead"]
