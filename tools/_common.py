"""Flags and set-up shared by the training tools (``run_pretraining.py``,
``run_classifier.py``)."""

from absl import flags

from bert_tf import distribute

FLAGS = flags.FLAGS


def define_training_flags():
  """Strategy, TPU, optimizer and checkpoint-cadence flags (original names kept)."""
  flags.DEFINE_enum("distribution_strategy", "one_device", list(distribute.STRATEGIES),
                    "tf.distribute strategy.")
  flags.DEFINE_integer("num_cpu_devices", None,
                       "With --distribution_strategy=mirrored on CPU: logical CPU devices.")
  flags.DEFINE_bool("use_tpu", False, "Use a TPU (same as --distribution_strategy=tpu).")
  flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.")
  flags.DEFINE_enum("optimizer", "adamw_original", ["adamw_original", "adamw", "lamb"],
                    "Optimizer (default: the original AdamWeightDecay).")
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
  flags.DEFINE_integer("seed", 12345, "Shuffle seed.")


def _flag(name):
  """A flag's value, or None when this tool does not define it."""
  return FLAGS[name].value if name in FLAGS else None


def strategy_from_flags():
  """The ``tf.distribute`` strategy the flags ask for.

  ``--tpu_zone``, ``--gcp_project`` and ``--master`` (when the tool defines
  them, as ``run_pretraining.py`` does) go to the TPUClusterResolver.
  """
  return distribute.get_strategy(
      "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy,
      tpu_name=FLAGS.tpu_name or _flag("master"),
      num_cpu_devices=FLAGS.num_cpu_devices, tpu_zone=_flag("tpu_zone"),
      gcp_project=_flag("gcp_project"))
