"""The scalable data modes on Apache Beam (``--runner=beam``), shard for shard
the bytes of the local worker pool.

``tools/create_pretraining_data.py --num_workers=N`` and
``tools/create_pretraining_documents.py --num_workers=N`` split the corpus
into ``--num_shards`` shards (document ``k`` -> shard ``k % num_shards``),
each with its own seeded random stream. Here the same shards are the
elements of a Beam pipeline::

  Create(range(num_shards)) -> Reshuffle -> Map(make one shard) -> ToList
    -> Map(write the manifest <output_file>.json)

and each element calls :func:`bert_tf.data.pretraining.sharded.write_shard`,
the function the local workers call, with the same shard, seed and flags:
every shard's bytes equal the local run's, whatever the runner or the number
of Beam workers (tests/test_beam.py hashes them).

Safe to retry: a shard is written under a unique temporary name and renamed
when whole (an atomic rename on a local or POSIX file system; a copy of the
whole object on ``tf.io.gfile`` URLs), so a bundle that Beam retries or runs
twice renames identical bytes over identical bytes and never leaves a
partial or duplicate shard. A rerun of the same command (after a crash or a
SIGKILL) skips the shards that are already whole and says so; a rerun with
other flags is refused (``<output_file>.json.partial`` records the flags of
the run in progress).

``runner=DirectRunner`` (the default) runs on Beam's Python engine, the
FnApiRunner (``direct_num_workers``, ``direct_running_mode=in_memory |
multi_threading | multi_processing``): Beam's own DirectRunner first tries its
Prism engine, which downloads a binary at run time, so it is never asked.
Other runners (``DataflowRunner``, ``FlinkRunner``, ``SparkRunner``,
``PortableRunner``) are Beam's, named through ``--beam_pipeline_options``.

Imports apache_beam only inside functions (``bert_tf`` loads without it);
TF-free except where a path is a URL (``tf.io.gfile``, loaded by name).
"""

import contextlib
import io
import json
import logging
import os
import re
import tempfile
from typing import Callable, List, Optional, Sequence, Tuple

from bert_tf import errors
from bert_tf import io_utils
from bert_tf.data.pretraining import documents as documents_lib
from bert_tf.data.pretraining import records as records_lib
from bert_tf.data.pretraining import sharded

InputError = errors.InputError

BEAM_VERSION = "2.77.0"
INSTALL = ('pip install "bert_tf[beam]" (in a checkout: .venv/bin/python -m pip '
           'install apache-beam==%s protobuf==6.33.6)' % BEAM_VERSION)
KNOWN_RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner",
                 "PortableRunner", "PrismRunner", "BundleBasedDirectRunner")
_OPTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(=.*)?$")


class _DropApitoolsNote(logging.Filter):
  """Beam's import logs "apitools not found ..." on the root logger where the
  GCP extras are absent: a note for BigQuery users, noise for everyone else."""

  def filter(self, record):
    return "apitools not found" not in record.getMessage()


def import_beam():
  """``apache_beam``, or InputError naming the install command (one line).

  Beam's own INFO and WARNING lines in this process (worker start-up,
  channels, "Discarding unparseable args", which this module turns into
  its own one-line error) are turned off: the tool prints its own summary.
  """
  note = _DropApitoolsNote()
  logging.getLogger().addFilter(note)
  try:
    import apache_beam  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise InputError("--runner=beam needs Apache Beam, which is not installed (%s): %s"
                     % (e, INSTALL)) from None
  finally:
    logging.getLogger().removeFilter(note)
  logging.getLogger("apache_beam").setLevel(logging.ERROR)
  return apache_beam


def parse_pipeline_options(text: str):
  """``--beam_pipeline_options`` (tensorflow-datasets' convention) -> Beam options.

  Args:
    text: comma-separated ``name=value`` (or ``name`` for a switch), e.g.
      ``"runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"``.

  Returns:
    ``(PipelineOptions, runner name)``; the runner defaults to ``DirectRunner``.

  Raises:
    InputError: an item that is not ``name[=value]``, an option Beam does not
      know, a value its parser refuses, an unknown runner (one line each).
  """
  import_beam()
  from apache_beam.options import pipeline_options as po  # pylint: disable=g-import-not-at-top
  argv = []
  for item in (text or "").split(","):
    item = item.strip()
    if not item:
      continue
    if not _OPTION.match(item.lstrip("-")):
      raise InputError("--beam_pipeline_options: %r is not name=value (comma-separated "
                       "Beam options, e.g. runner=DirectRunner,direct_num_workers=2)" % item)
    argv.append("--" + item.lstrip("-"))
  options = po.PipelineOptions(argv)
  # Beam's argparse prints usage and exits on a bad value: keep its last line.
  err = io.StringIO()
  try:
    with contextlib.redirect_stderr(err):
      known = options.get_all_options(retain_unknown_options=False)
      everything = options.get_all_options(retain_unknown_options=True)
  except SystemExit:
    last = (err.getvalue().strip().splitlines() or ["cannot parse"])[-1]
    raise InputError("--beam_pipeline_options: %s" % last.split("error: ")[-1]) from None
  unknown = sorted(set(everything) - set(known))
  if unknown:
    raise InputError("--beam_pipeline_options: Beam knows no option %s" %
                     ", ".join(repr(u) for u in unknown))
  runner = options.view_as(po.StandardOptions).runner or "DirectRunner"
  if runner not in KNOWN_RUNNERS:
    raise InputError("--beam_pipeline_options: unknown runner %r (Beam's: %s)"
                     % (runner, ", ".join(KNOWN_RUNNERS)))
  return options, runner


def _make_runner(name: str, options):
  """The runner object: the FnApiRunner for DirectRunner (no Prism download)."""
  if name == "DirectRunner":
    from apache_beam.options import pipeline_options as po  # pylint: disable=g-import-not-at-top
    from apache_beam.portability.api import beam_provision_api_pb2  # pylint: disable=g-import-not-at-top
    from apache_beam.runners.portability import portable_runner  # pylint: disable=g-import-not-at-top
    from apache_beam.runners.portability.fn_api_runner import fn_runner  # pylint: disable=g-import-not-at-top
    options.view_as(po.StandardOptions).runner = None
    harness = options.view_as(po.WorkerOptions)
    if harness.default_sdk_harness_log_level is None:
      harness.default_sdk_harness_log_level = "WARNING"  # workers: no INFO chatter
    # As Beam's DirectRunner builds it when Prism is skipped: the workers get
    # the pipeline options (their log level among them).
    encoded = portable_runner.JobServiceHandle.encode_pipeline_options(
        options.get_all_options())
    return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))
  from apache_beam.runners import runner as runner_lib  # pylint: disable=g-import-not-at-top
  try:
    return runner_lib.create_runner(name)
  except (ImportError, ValueError) as e:
    raise InputError("--beam_pipeline_options: runner=%s cannot start here: %s "
                     "(DataflowRunner needs apache-beam[gcp])" % (name, e)) from None


def check_output_writable(output_file: str) -> None:
  """Creates the output folder and a test file in it, before any work.

  Raises:
    InputError: the folder cannot be made or written (one line).
  """
  if documents_lib.is_remote(output_file):
    folder = output_file.rsplit("/", 1)[0]
    try:
      documents_lib.gfile().makedirs(folder)
    except Exception as e:  # pylint: disable=broad-except
      raise InputError("--output_file: cannot write to %r: %s" % (folder, e)) from None
    return
  folder = os.path.dirname(os.path.abspath(output_file))
  try:
    os.makedirs(folder, exist_ok=True)
    os.remove(io_utils.temp_name(output_file))
  except OSError as e:
    raise InputError("--output_file: cannot write to %r: %s" % (folder, e.strerror or e)) \
        from None


def _exists(path):
  return (documents_lib.gfile().exists(path) if documents_lib.is_remote(path)
          else os.path.exists(path))


def _write_text(path: str, text: str) -> None:
  """Writes ``text`` atomically (temporary sibling, then rename)."""
  if documents_lib.is_remote(path):
    gf = documents_lib.gfile()
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with gf.GFile(tmp, "w") as f:
      f.write(text)
    gf.rename(tmp, path, overwrite=True)
    return
  with io_utils.atomic_output(path) as tmp:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)


def _count(path):
  """Records of a whole shard (local: its length headers; URL: tf.data)."""
  if not documents_lib.is_remote(path):
    return records_lib.count_tfrecords(path)
  import importlib  # pylint: disable=g-import-not-at-top
  tf = importlib.import_module("tensorflow")
  return sum(1 for _ in tf.data.TFRecordDataset(path))


# Per Beam worker process: {key: (tokenizer, encoder)}, built on first use.
_PREPARED = {}


def make_shard(shard: int, job: dict) -> dict:
  """One pipeline element: writes shard ``shard`` (or finds it whole).

  Args:
    shard: the shard index.
    job: plain values: ``input_files``, ``paths``, ``num_shards``,
      ``params`` (:func:`~bert_tf.data.pretraining.sharded.shard_params`),
      ``vocab`` (:func:`~bert_tf.data.pretraining.sharded.prepare`'s args).

  Returns:
    dict: ``shard``, ``count`` (records), ``skipped`` (bool: already whole),
    ``pid``, ``peak_rss_mb`` (this worker process, MiB).
  """
  path = job["paths"][shard]
  if _exists(path):  # renamed only when whole: a rerun or a retried bundle
    return dict(shard=shard, count=_count(path), skipped=True, pid=os.getpid(),
                peak_rss_mb=sharded.peak_rss_mb())
  key = json.dumps(job["vocab"], sort_keys=True)
  if key not in _PREPARED:
    _PREPARED[key] = sharded.prepare(**job["vocab"])
  tok, encoder = _PREPARED[key]
  remote = documents_lib.is_remote(path)
  # A URL output is written locally first, then copied whole.
  local = (os.path.join(tempfile.gettempdir(), "bert_tf_shard_%d_%d"
                        % (os.getpid(), shard)) if remote else path)
  tmp, count = sharded.write_shard(job["input_files"], tok, encoder, shard,
                                   job["num_shards"], local, job["params"])
  try:
    if remote:
      gf = documents_lib.gfile()
      staged = "%s.tmp-%d" % (path, os.getpid())
      gf.copy(tmp, staged, overwrite=True)
      gf.rename(staged, path, overwrite=True)
      os.remove(tmp)
    else:
      # Atomic: a twin attempt renames the same bytes over the same name.
      os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  return dict(shard=shard, count=count, skipped=False, pid=os.getpid(),
              peak_rss_mb=sharded.peak_rss_mb())


def manifest(kind: str, paths: Sequence[str], counts: Sequence[int], flags: dict,
             random_seed: Optional[int]) -> dict:
  """The manifest ``<output_file>.json``: what ``run_pretraining.py`` reads.

  Keys: ``format`` (:data:`bert_tf.data.pretraining.documents.MANIFEST_FORMAT`),
  ``kind`` (``instances`` | ``documents``), ``shards`` (names relative to the
  manifest's folder), ``counts`` (records per shard), ``num_records``,
  ``flags`` (the tool's data flags), ``seeds`` (``random_seed`` and each
  shard's Python seed, from
  :func:`~bert_tf.data.pretraining.sharded.shard_seeds`; none for documents).
  """
  seeds = None
  if random_seed is not None:
    seeds = dict(random_seed=random_seed,
                 shard_python_seeds=[sharded.shard_seeds(random_seed, s)[0]
                                     for s in range(len(paths))])
  return dict(format=documents_lib.MANIFEST_FORMAT, kind=kind,
              shards=[p.rsplit("/", 1)[-1] for p in paths], counts=list(counts),
              num_records=int(sum(counts)), flags=flags, seeds=seeds)


def _finish(results: List[dict], job: dict) -> int:
  """The pipeline's last step: every shard is whole; writes the manifest."""
  by_shard = {r["shard"]: r for r in results}
  missing = [s for s in range(job["num_shards"]) if s not in by_shard]
  if missing:
    raise InputError("shards %s were not written" % missing)
  counts = [by_shard[s]["count"] for s in range(job["num_shards"])]
  out = manifest(job["kind"], job["paths"], counts, job["flags"], job["random_seed"])
  _write_text(job["manifest"], json.dumps(out, indent=1, sort_keys=True) + "\n")
  _write_text(job["manifest"] + ".stats", json.dumps(results) + "\n")
  return len(counts)


def _spec(job):
  return dict(kind=job["kind"], flags=job["flags"], num_shards=job["num_shards"],
              input_files=job["input_files"])


def run(kind: str, input_files: Sequence[str], output_file: str, vocab_file: str,
        num_shards: int, pipeline_options: str, flags: dict,
        do_lower_case: bool = True, preserve_unused_tokens: bool = False,
        log: Callable[[str], None] = print, **instance_flags) -> dict:
  """Runs one scalable mode on Beam; shards ``<output_file>-%05d-of-%05d``.

  Args:
    kind: ``"instances"`` (create_pretraining_data) or ``"documents"``
      (create_pretraining_documents).
    input_files: expanded paths (local or ``tf.io.gfile`` URLs), in order.
    num_shards: output shards (>= 1).
    pipeline_options: ``--beam_pipeline_options``.
    flags: the tool's data flags, recorded in the manifest and compared on a
      rerun.
    log: where the rerun's "skipped" line goes.
    instance_flags: :func:`~bert_tf.data.pretraining.sharded.shard_params`'
      keyword arguments (``random_seed``, ``max_seq_length``, ...).

  Returns:
    dict: ``files``, ``counts``, ``num_instances``, ``skipped`` (shards found
    whole), ``worker_peak_rss_mb`` (per Beam worker process), ``manifest``.

  Raises:
    InputError: bad options, an unknown runner, an unwritable output, a
      rerun with other flags (before any work); a failed pipeline.
  """
  options, runner_name = parse_pipeline_options(pipeline_options)
  _check_sizes(num_shards, instance_flags)
  check_output_writable(output_file)
  job = _job(kind, input_files, output_file, vocab_file, num_shards, flags,
             do_lower_case, preserve_unused_tokens, instance_flags)
  spec = json.dumps(_spec(job), sort_keys=True)
  partial = job["manifest"] + ".partial"
  _check_unfinished_run(partial, spec, output_file)
  if not documents_lib.is_remote(output_file):
    _remove_stale_temps(job["paths"])
  whole = [s for s in range(num_shards) if _exists(job["paths"][s])]
  if whole:
    log("rerun: %d of %d shards already whole, skipped (shard%s %s)" % (
        len(whole), num_shards, "s" if len(whole) > 1 else "",
        ",".join(str(s) for s in whole)))
  _write_text(partial, spec + "\n")
  _run_pipeline(runner_name, options, job)
  return _results(job, partial, whole)


def _check_sizes(num_shards: int, instance_flags: dict) -> None:
  """``--num_shards``, ``--max_seq_length`` and ``--window_tokens`` in range.

  Raises:
    InputError: one of them is not (naming the flag and its value).
  """
  if num_shards < 1:
    raise InputError("--num_shards must be >= 1, got %d" % num_shards)
  if instance_flags.get("max_seq_length", 128) < 5:
    raise InputError("--max_seq_length must be at least 5, got %d"
                     % instance_flags["max_seq_length"])
  if instance_flags.get("window_tokens", 1) < 1:
    raise InputError("--window_tokens must be >= 1")


def _job(kind: str, input_files: Sequence[str], output_file: str, vocab_file: str,
         num_shards: int, flags: dict, do_lower_case: bool,
         preserve_unused_tokens: bool, instance_flags: dict) -> dict:
  """What every shard's :func:`make_shard` is given (a JSON-able dict: the
  shard paths, the shard parameters, the vocab arguments, the manifest path).

  Raises:
    InputError: the vocab does not load (before the pipeline starts).
  """
  vocab_args = dict(vocab_file=vocab_file, do_lower_case=do_lower_case,
                    max_seq_length=instance_flags.get("max_seq_length", 128),
                    max_predictions_per_seq=instance_flags.get("max_predictions_per_seq",
                                                               20),
                    preserve_unused_tokens=preserve_unused_tokens)
  sharded.prepare(**vocab_args)
  return dict(kind=kind, input_files=list(input_files),
              paths=sharded.shard_paths(output_file, num_shards), num_shards=num_shards,
              params=sharded.shard_params(kind, **instance_flags), vocab=vocab_args,
              flags=flags, manifest=output_file + ".json",
              random_seed=instance_flags.get("random_seed") if kind == "instances" else None)


def _check_unfinished_run(partial: str, spec: str, output_file: str) -> None:
  """Refuses to go on from an unfinished run (its ``.json.partial``, local
  only) that had other flags or inputs.

  Raises:
    InputError: naming ``--output_file`` and the ``.partial`` file.
  """
  if not _exists(partial) or documents_lib.is_remote(partial):
    return
  with open(partial, encoding="utf-8") as f:
    if f.read().strip() != spec:
      raise InputError(
          "--output_file %s: an unfinished run with other flags or inputs left shards "
          "there (%s): rerun it with the same command, or delete its shards" %
          (output_file, partial))


def _run_pipeline(runner_name: str, options, job: dict) -> None:
  """The Beam pipeline: one element per shard, then the manifest.

  Raises:
    InputError: a shard's own error, or the pipeline's (its last line).
  """
  beam = import_beam()
  runner = _make_runner(runner_name, options)
  try:
    with beam.Pipeline(runner=runner, options=options) as p:
      _ = (p | "Shards" >> beam.Create(list(range(job["num_shards"])))
           | "Spread" >> beam.Reshuffle()
           | "MakeShard" >> beam.Map(make_shard, job=job)
           | "All" >> beam.combiners.ToList()
           | "Manifest" >> beam.Map(_finish, job=job))
  except InputError:
    raise
  except Exception as e:  # pylint: disable=broad-except  (a worker's error, wrapped by Beam)
    message = str(e).strip().splitlines()
    raise InputError("the Beam pipeline failed: %s" % (message[-1] if message else
                                                       type(e).__name__)) from None


def _results(job: dict, partial: str, whole: List[int]) -> dict:
  """:func:`run`'s dict, from the manifest and the per-shard stats (local
  runs: the stats file and ``partial`` are removed)."""
  with (documents_lib.gfile().GFile(job["manifest"], "r")
        if documents_lib.is_remote(job["manifest"])
        else open(job["manifest"], encoding="utf-8")) as f:
    out = json.load(f)
  stats_path = job["manifest"] + ".stats"
  stats = []
  if not documents_lib.is_remote(stats_path):
    with open(stats_path, encoding="utf-8") as f:
      stats = json.load(f)
    os.remove(stats_path)
    if os.path.exists(partial):
      os.remove(partial)
  rss = {}
  for r in stats:
    if not r["skipped"]:
      rss[r["pid"]] = max(rss.get(r["pid"], 0.0), r["peak_rss_mb"])
  return dict(files=job["paths"], counts=out["counts"], num_instances=out["num_records"],
              skipped=whole, worker_peak_rss_mb=sorted(rss.values()),
              manifest=job["manifest"], peak_rss_mb=sharded.peak_rss_mb())


def _remove_stale_temps(paths: Sequence[str]) -> None:
  """Deletes temporary siblings of ``paths`` left by a killed run (before the
  pipeline starts, so no live attempt owns them)."""
  for path in paths:
    folder, base = os.path.split(os.path.abspath(path))
    if not os.path.isdir(folder):
      continue
    prefix = ".%s." % base
    for name in os.listdir(folder):
      if name.startswith(prefix) and name.endswith(".tmp"):
        with contextlib.suppress(OSError):
          os.remove(os.path.join(folder, name))


def refuse_faithful() -> InputError:
  """The one-line refusal of ``--runner=beam`` in a one-stream mode."""
  return InputError(
      "--runner=beam needs the scalable mode: the default mode (--num_workers=0) draws "
      "every record from one random stream over the whole corpus, which cannot be split "
      "across workers; pass --num_workers=N (and --num_shards=S: the output depends on "
      "--random_seed and --num_shards only)")

