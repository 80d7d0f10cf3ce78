"""SavedModel export of fine-tuned BERT models (see ``saved_model``)."""
