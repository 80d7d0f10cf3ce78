"""Pretraining data: creation (faithful, sharded, dynamic) and tf.data reading.

Modules (import them by name; this package imports none, so the TF-free
ones stay TF-free):

* ``documents``: the one streaming, shard-aware document reader;
  ``expand_input_files``.
* ``tokens``: ``MemoTokenizer``, the exact memoized ``FullTokenizer``.
* ``records``: the record schema, encoder, varints, TFRecord writer.
* ``faithful``: the original's records, record for record (one process).
* ``sharded``: streaming, multi-process, bounded memory.
* ``dynamic``: document records; pairs and masks made in tf.data (TensorFlow).
* ``input``: tf.data reading of the static records (TensorFlow).
"""
