"""Data: pretraining instances, TFRecord pipelines, task readers."""
