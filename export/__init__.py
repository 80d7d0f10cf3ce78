"""SavedModel export of fine-tuned BERT models for TF Serving (``bert_tf.export``).

The top-level ``export/`` folder, installed as ``bert_tf.export``. It sits
above the library (nothing in ``bert_tf`` imports it): the tools and the
runner's export hook call it.

Public API (imported lazily):

* :func:`export_classifier` - a fine-tuned classifier with its
  ``BertPreprocessor`` inside: raw strings in, probabilities/labels out.
* :func:`export_preprocessor`, :func:`export_encoder` - the TF Hub split.
* :func:`export_squad` - a SQuAD question answerer: raw question + context
  strings in, the answer span out (doc-stride windows and the original's
  best-span choice inside the graph).
* :func:`export_tagger` - token tagging (NER): raw sentences in, per-word
  tags and entity spans (code-point offsets) out (``export.tagging``).
* :func:`export_encoder_all_layers` - feature extraction: raw strings in,
  every layer's hidden states out (``export.features``).
* :func:`export_model` - the export hook of every task and caller
  (``export_model(model, output_dir, export_dir, format="saved_model")``:
  the run's default export of an in-memory model); :func:`export_run` -
  the same exporter for a run rebuilt by :func:`load_run`.
* :func:`export_litert` - a ``.tflite`` (LiteRT) export with the tokenizer
  inside (``export.litert``; ``export_model(..., format="litert")``).
* :func:`load_fine_tuned` - rebuild a ``run_classifier.py`` output dir.
* :func:`read_metadata` - an export's ``assets.extra/bert_tf_export.json``.

Modules: ``base`` (the plumbing every SavedModel export shares: variable
tracking, tracing, versioned atomic writing), ``saved_model`` (the
classifier, preprocessor and encoder exports), ``client`` (the TF-only
request/response client and the layout both sides share), ``warmup``
(``tf_serving_warmup_requests``), ``serving_ops`` (non-core ops and the
minimum TF Serving version), ``fine_tuned`` (rebuild a run directory),
``squad`` (the SQuAD serving module), ``c_api`` (a signature's tensor names
and building a C client against the wheel: serving with no Python).

Example::

  from bert_tf import export
  path = export.export_classifier(model, preprocessor, ["0", "1"], "exports/sst2",
                                  task_name="sst-2", is_pair=False)
"""

from bert_tf import _lazy

_API = {
    "export_classifier": "bert_tf.export.saved_model",
    "export_preprocessor": "bert_tf.export.saved_model",
    "export_encoder": "bert_tf.export.saved_model",
    "read_metadata": "bert_tf.export.saved_model",
    "export_squad": "bert_tf.export.squad",
    "export_encoder_all_layers": "bert_tf.export.features",
    "export_multiple_choice": "bert_tf.export.multiple_choice",
    "export_tagger": "bert_tf.export.tagging",
    "export_litert": "bert_tf.export.litert",
    "load_fine_tuned": "bert_tf.export.fine_tuned",
    "FineTuned": "bert_tf.export.fine_tuned",
    "load_run": "bert_tf.export.fine_tuned",
    "export_run": "bert_tf.export.fine_tuned",
    "export_model": "bert_tf.export.fine_tuned",
    "run_kind": "bert_tf.export.fine_tuned",
}

__all__ = sorted(_API)


__getattr__ = _lazy.getattr_for(__name__, _API)