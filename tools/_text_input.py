"""What the tools that read raw text share (TF-free: no TensorFlow import).

The input flags of ``create_pretraining_data.py`` and
``create_pretraining_documents.py`` (the original's names and help), and a
progress bar that draws only on a terminal, so piped output holds complete
lines only.
"""

import sys
from typing import Optional

from absl import flags

from bert_tf.tools import _startup

FLAGS = flags.FLAGS


def define_text_input_flags(tool_module: str, output_help: str) -> None:
  """``--input_file``, ``--output_file``, ``--vocab_file``, ``--do_lower_case``,
  ``--preserve_unused_tokens`` and ``--progress`` (the first three required),
  key flags of the tool (``--helpshort`` lists them).

  Args:
    tool_module: the tool's ``__name__``.
    output_help: the help of ``--output_file`` (it differs per tool).
  """
  flags.DEFINE_string("input_file", None,
                      "Input raw text file (or comma-separated list of globs).")
  flags.DEFINE_string("output_file", None, output_help)
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on.")
  flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
  flags.DEFINE_bool("preserve_unused_tokens", False,
                    "If True, Wordpiece tokenization will not be applied to words in "
                    "the vocab (the original's flag: vocab entries [unusedN] in the "
                    "text stay whole).")
  flags.DEFINE_bool("strict_utf8", False,
                    "Refuse an input file with bytes that are not UTF-8 (naming the "
                    "file and line). Default: such bytes are dropped, as the original "
                    "reads them, with one warning per file naming the first such line "
                    "and their count.")
  flags.DEFINE_bool("progress", True,
                    "Show a progress bar (elapsed, rate, ETA) on stderr when it is "
                    "a terminal.")
  flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
  _startup.register_key_flags(__name__, tool_module)


def define_scalable_flags(tool_module: str, default_shards_help: str) -> None:
  """``--num_workers``, ``--num_shards``, ``--runner`` and
  ``--beam_pipeline_options``: the scalable (sharded) mode and where it runs.

  Args:
    tool_module: the tool's ``__name__``.
    default_shards_help: what ``--num_workers=0`` means for this tool.
  """
  flags.DEFINE_integer("num_workers", 0, default_shards_help)
  flags.DEFINE_integer("num_shards", None,
                       "Scalable mode: number of output shards (default: num_workers).")
  flags.DEFINE_enum("runner", "local", ["local", "beam"],
                    "Scalable mode: local (a pool of --num_workers processes) or beam "
                    "(an Apache Beam pipeline, one element per shard, byte-identical "
                    "shards; pip install \"bert_tf[beam]\").")
  flags.DEFINE_string("beam_pipeline_options", "",
                      "With --runner=beam: comma-separated Beam options, e.g. "
                      "runner=DirectRunner,direct_num_workers=2,direct_running_mode="
                      "multi_processing or runner=DataflowRunner,project=P,region=R,"
                      "temp_location=gs://B/tmp (tensorflow-datasets' convention).")
  _startup.register_key_flags(__name__, tool_module)


def check_runner_flags() -> None:
  """Refuses ``--beam_pipeline_options`` without ``--runner=beam`` and
  ``--runner=beam`` without the scalable mode, and parses the Beam options
  (so bad ones fail in one line before any input is read).

  Raises:
    bert_tf.errors.InputError: one line naming the flag and the fix.
  """
  from bert_tf import errors  # pylint: disable=g-import-not-at-top
  if FLAGS.runner != "beam":
    if FLAGS.beam_pipeline_options:
      raise errors.InputError("--beam_pipeline_options needs --runner=beam")
    return
  from bert_tf.data.pretraining import beam_runner  # pylint: disable=g-import-not-at-top
  if FLAGS.num_workers == 0:
    raise beam_runner.refuse_faithful()
  beam_runner.parse_pipeline_options(FLAGS.beam_pipeline_options)


def check_input_encoding() -> None:
  """Reads every ``--input_file`` once for bytes that are not UTF-8: one
  warning per such file (its first bad line and their count; the readers
  drop those bytes, as the original), or with ``--strict_utf8`` an
  :class:`bert_tf.errors.InputError` naming the file and line.

  Raises:
    bert_tf.errors.InputError: a pattern that matches nothing; with
      ``--strict_utf8``, a file that is not UTF-8.
  """
  from bert_tf import io_utils  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pretraining import documents  # pylint: disable=g-import-not-at-top
  for path in documents.expand_input_files(FLAGS.input_file):
    try:
      count, first = io_utils.count_not_utf8_lines(path)
    except OSError:
      continue  # the reader names the file it cannot read
    if count and FLAGS.strict_utf8:
      raise io_utils.not_utf8_error(path, first, "dropped")
    if count:
      io_utils.warn_not_utf8(path, count, first, "dropped")


class ProgressBar:
  """A tqdm bar on stderr, made on the first update; off with ``--noprogress``
  or when stderr is not a terminal (no half-drawn lines in a log file).

  Example::

    bar = ProgressBar("tokenizing", "doc")
    bar.update(done=10, total=None)   # total None: a counter with rate
    bar.close()
  """

  def __init__(self, desc: str, unit: str):
    self.desc, self.unit, self.bar = desc, unit, None
    self.enabled = FLAGS.progress and sys.stderr.isatty()

  def update(self, done: int, total: Optional[int]) -> None:
    if not self.enabled:
      return
    if self.bar is None:
      try:
        from tqdm import tqdm  # pylint: disable=g-import-not-at-top
      except ImportError:
        self.enabled = False
        return
      self.bar = tqdm(total=total, desc=self.desc, unit=self.unit, unit_scale=True,
                      file=sys.stderr, leave=True)
    self.bar.update(done - self.bar.n)

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()
