"""``tf.distribute`` strategy from a flag value.

``one_device`` (first GPU, else CPU), ``mirrored`` (all local devices),
``multi_worker_mirrored`` (machines listed in ``TF_CONFIG``), ``tpu``
(``TPUClusterResolver(tpu_name, zone, project)``).

Every strategy runs the same :class:`bert_tf.training.Trainer` step
(per-replica gradients, one all-reduce, global-norm clipping, update). The
input differs only for TPU: there the pretraining tool feeds per-replica
batches through ``strategy.distribute_datasets_from_function`` (TPU infeed),
whose iterator cannot be checkpointed, so a resumed TPU run restarts the
data order (weights, optimizer and step are restored); elsewhere each worker
reads a plain ``tf.data`` iterator (saved in the checkpoint) that the step
splits over the worker's replicas. The TPU path is built but cannot be run
here (no TPU).
"""

import tensorflow as tf

from bert_tf import errors

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(name="one_device", tpu_name=None, num_cpu_devices=None,
                 tpu_zone=None, gcp_project=None):
  """Creates the strategy named by ``--distribution_strategy``.

  Args:
    name: one of ``STRATEGIES``.
    tpu_name: ``--tpu_name`` (or ``--master``) for ``tpu``.
    tpu_zone, gcp_project: ``--tpu_zone``, ``--gcp_project`` for ``tpu``.
    num_cpu_devices: with ``mirrored`` on a machine without accelerators,
      split the CPU into this many logical devices (tests, demos). Must be
      called before TensorFlow initializes its devices.

  Raises:
    ValueError: unknown name (lists the known ones).
  """
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  if name == "mirrored":
    if num_cpu_devices and not tf.config.list_physical_devices("GPU"):
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(
          cpu, [tf.config.LogicalDeviceConfiguration()] * num_cpu_devices)
      devices = [d.name for d in tf.config.list_logical_devices("CPU")]
      return tf.distribute.MirroredStrategy(devices)
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu_name, zone=tpu_zone, project=gcp_project)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise errors.ParamsError("distribution_strategy: unknown strategy %r; choose "
                           "one of %s" % (name, ", ".join(STRATEGIES)),
                           argument="distribution_strategy")
