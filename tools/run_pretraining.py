r"""Masked-LM + next-sentence pretraining over original-format TFRecords.

Flags follow google-research/bert ``run_pretraining.py`` (same names and
defaults; ``--tpu_zone``, ``--gcp_project``, ``--master`` feed the
TPUClusterResolver, ``--num_tpu_cores`` is accepted for compatibility: the
strategy finds the cores itself). Added: ``--distribution_strategy``
(one_device, mirrored, multi_worker_mirrored with TF_CONFIG, tpu),
``--optimizer`` (adamw_original, adamw, lamb), ``--num_accumulation_steps``,
``--dtype`` (float32, mixed_bfloat16, mixed_float16 with dynamic loss
scaling, auto: mixed_bfloat16 where the CPU has bf16 units), ``--jit_compile``, ``--nsp`` (false: the paper's No-NSP
ablation), ``--dynamic`` (mask on the fly from tokenized-document records),
``--deterministic`` (op determinism: bit-identical resume), ``--vocab_file``.
Restarting with the same ``--output_dir`` resumes from the latest
checkpoint, data position and dropout state included.

  python tools/run_pretraining.py --input_file=out.tfrecord --output_dir=/tmp/pt \
    --bert_config_file=bert_config.json --do_train --num_train_steps=300
"""

from bert_tf.tools import _startup
_startup.setup(tensorflow=True)

from absl import flags

from bert_tf.tools import _common
from bert_tf import jobs
from bert_tf.tasks import pretraining
from bert_tf.data.pretraining import documents

FLAGS = flags.FLAGS
_common.define_flags(pretraining.PretrainingParams,
                     required=("input_file", "output_dir"))
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to train (default: the config that came with --init_checkpoint: a Hugging Face directory's config.json, or bert_config.json beside the checkpoint).")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the input files.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU (TPUClusterResolver).")
flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU (TPUClusterResolver).")
flags.DEFINE_string("master", None, "TPU master address (used when --tpu_name is unset).")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; TPUStrategy finds the cores.")
_common.define_training_flags()
flags.adopt_module_key_flags(_common)  # --helpshort lists them too


def model_files():
  """:func:`bert_tf.tasks.pretraining.model_files` of the flags: the config
  (``--bert_config_file``, else the ``--init_checkpoint``'s; one that
  differs from the checkpoint's is refused) and the vocab."""
  return pretraining.model_files(FLAGS)


def prepare():
  """Checks the model config and ``--input_file`` before anything runs;
  the vocab file found for the params."""
  pretraining.check_schedule(FLAGS)  # the flags bear the params' field names
  files = model_files()
  documents.expand_input_files(FLAGS.input_file)
  return {"vocab_file": files.vocab_file}


def pretrain(params, strategy, do_train, do_eval):
  """:func:`bert_tf.jobs.run_pretraining` with the model of :func:`model_files`."""
  jobs.run_pretraining(model_files().config, params, strategy, do_train=do_train,
                       do_eval=do_eval)


main = _common.task_main("run_pretraining", pretraining.PretrainingParams, pretrain,
                         ("do_train", "do_eval"), prepare=prepare,
                         job_flags=("do_train", "do_eval"))


def run():
  """Console-script entry point."""
  _startup.run_app(main, __name__)


if __name__ == "__main__":
  run()
