"""Multiple-choice SavedModel: a context and its candidate endings in, the
probability of each ending out (paper section 4.4, SWAG).

The graph is the fine-tuning computation: the project's
:class:`bert_tf.preprocessing.BertPreprocessor` with text pairs (the same
object, the vocab a SavedModel asset) packs ``[CLS] context [SEP] ending
[SEP]`` for every choice, :func:`bert_tf.preprocessing.trim_to_longest`
drops padding columns (exact: padding is masked), the
:class:`bert_tf.modeling.multiple_choice.BertMultipleChoice` scores every
choice and a softmax over the choices gives the probabilities.

Signature ``serving_default``:

* inputs: ``context`` string [B] and ``endings`` string [B, N] (one row of
  N endings per context; N = the export's ``num_choices``). The ending text
  is what the tool builds from a SWAG row: ``sent2 + " " + ending<i>`` (or
  the ending alone). Chosen over ``ending0`` .. ``ending{N-1}`` inputs
  because one input keeps the signature the same for every N and a request
  is one JSON row per example (``{"context": "...", "endings": [...]}``).
  Another rank is flattened in row-major order: ``endings`` may also come
  flat [B*N]; its size must be ``num_choices`` times ``context``'s, else
  ``INVALID_ARGUMENT`` (nothing else is a serving error).
* outputs: ``probabilities`` float32 [B, N] (softmax over the choices),
  ``logits`` float32 [B, N], ``label_id`` int32 [B] (the argmax choice;
  ties to the lower index).

Every string is valid input: invalid UTF-8 is replaced by U+FFFD and then
deleted (the preprocessor's ``sanitize``, as ``export.squad`` does), empty
and whitespace-only strings give an empty segment (``[CLS] [SEP] [SEP]``),
a 1 MB string is tokenized whole and truncated to ``max_seq_length`` by the
round-robin trimmer, as a long classifier input is.

The export holds ``assets.extra/tf_serving_warmup_requests`` and the
metadata file (``bert_tf_export.json``: ``num_choices``, inputs, ops, the
minimum TF Serving version), written by
:func:`bert_tf.export.base.write_export`.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.export import base
from bert_tf.export import serving
from bert_tf.export import spec as spec_lib

WARMUP_CONTEXTS = ("The most reasonable step of 'Bake Bread' is", "")
WARMUP_ENDINGS = (("Knead the dough", "Paint the fence", "Wash the car", ""),
                  ("", "yes", "Mix flour and water. " * 40, "no"))


class MultipleChoiceServing(serving.ServingModule):
  """Preprocessor + :class:`BertMultipleChoice` behind a string signature
  (kind ``swag``; see the module doc).

  Args:
    model: a built :class:`bert_tf.modeling.multiple_choice.BertMultipleChoice`.
    preprocessor: the :class:`bert_tf.preprocessing.BertPreprocessor` used
      to fine-tune it.
    spec: a ``swag`` :class:`ServingSpec` (``num_choices`` N).
    ops: the format's ops (default the SavedModel's).

  Raises:
    SpecError: a model that is not a multiple-choice model.

  Example::

    spec = ServingSpec.create("swag", 128, num_choices=4)
    module = MultipleChoiceServing(model, task.preprocessor, spec)
    out = module.serve(tf.constant(["He opens the door."]),
                       tf.constant([["and walks in.", "a", "b", "c"]]))
  """

  kind = "swag"
  defaults = {"num_choices": 4}  # SWAG's four endings

  @classmethod
  def settings_from_run(cls, run_config) -> dict:
    """``swag_config.json``: ``num_choices``."""
    return {"num_choices": run_config.get("num_choices")}

  @classmethod
  def settings_from_model(cls, model, *, is_pair=False, num_choices=None) -> dict:
    del model, is_pair
    return {"num_choices": num_choices}

  def __init__(self, model, preprocessor, spec: spec_lib.ServingSpec, ops=None):
    if not hasattr(model, "classifier") or getattr(model.classifier, "num_outputs", 1) != 1:
      raise spec_lib.SpecError("the model is not a BertMultipleChoice (one score per "
                               "choice)", argument="what")
    super().__init__(model, preprocessor, spec, ops)

  @property
  def num_choices(self) -> int:
    return int(self.spec.num_choices)

  def build_signatures(self):
    n = self.num_choices if getattr(self.ops, "fixed_shapes", False) else None
    return tf.function(self._serve, autograph=False, input_signature=[
        self.ops.string_spec("context"),
        tf.TensorSpec([None, n], tf.string, name="endings")]), None

  def predict(self, context, endings):
    """The serving computation on ``context`` [B] and ``endings`` [B, N]
    (already flattened / shaped); returns the signature's output dict."""
    features = self.ops.choice_features(context, endings, self.num_choices)
    logits = self.ops.logits(self, features)
    return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
            "label_id": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def _serve(self, context, endings):
    context = self.ops.batch(context)
    endings = self.ops.batch(endings)
    context, endings = self.ops.gate(
        tf.size(endings), tf.size(context) * self.num_choices,
        "endings must hold num_choices=%d strings per context" % self.num_choices,
        context, endings)
    return self.predict(context, tf.reshape(endings, [-1, self.num_choices]))

  def metadata(self) -> dict:
    out = super().metadata()
    out.update(task="swag", is_pair=True, num_choices=self.num_choices)
    return out

  def warmup_requests(self):
    n = self.num_choices
    endings = [[(list(row) * n)[k] for k in range(n)] for row in WARMUP_ENDINGS]
    return [("serving_default", {
        "context": list(WARMUP_CONTEXTS),
        "endings": np.array([[e.encode() for e in row] for row in endings], dtype=object)})]


def export_multiple_choice(model, preprocessor: preprocessing.BertPreprocessor,
                           export_dir: str, num_choices: int = 4,
                           version: Optional[int] = None) -> str:
  """Writes ``export_dir/<version>/`` (a multiple-choice SavedModel); returns
  its path. See the module docstring for the signature.

  Args:
    model: a built :class:`bert_tf.modeling.multiple_choice.BertMultipleChoice`.
    preprocessor: the :class:`BertPreprocessor` used to fine-tune it.
    export_dir: the model's base directory (TF Serving ``model_base_path``).
    num_choices: N, endings per context.
    version: integer version; default
      :func:`bert_tf.export.base.next_version`.

  Returns:
    the path of the version directory (written under a temporary name and
    renamed when whole).

  Raises:
    FileExistsError: that version already exists.
    SpecError (a ValueError): ``num_choices`` < 1, or a model that is not a
      multiple-choice model.

  Example::

    from bert_tf import export
    path = export.export_multiple_choice(model, task.preprocessor, "exports/swag")
  """
  spec = spec_lib.ServingSpec.create(
      "swag", preprocessor.max_seq_length, num_choices=num_choices,
      do_lower_case=preprocessor.do_lower_case,
      preserve_unused_tokens=preprocessor.preserve_unused_tokens)
  return base.write_module(MultipleChoiceServing(model, preprocessor, spec),
                           export_dir, version)
