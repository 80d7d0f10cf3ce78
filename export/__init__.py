"""SavedModel export of fine-tuned BERT models for TF Serving.

``saved_model`` (classifier / preprocessor / encoder exports), ``warmup``
(``tf_serving_warmup_requests``), ``serving_ops`` (non-core ops and the
minimum TF Serving version), ``fine_tuned`` (rebuild a run_classifier.py
output directory for ``tools/export_saved_model.py``).
"""
