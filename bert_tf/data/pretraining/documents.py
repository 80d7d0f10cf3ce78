"""The one streaming document reader of pretraining data.

Source: google-research/bert ``create_pretraining_data.py``
(``create_training_instances``' reading loop). Input format: one sentence
per line, a blank line between documents; documents continue across input
files; a line that tokenizes to nothing is dropped without splitting its
document; files are read in the order the globs give them.

Used by every mode: faithful (:mod:`bert_tf.data.pretraining.faithful`, the
whole corpus), sharded (:mod:`bert_tf.data.pretraining.sharded`, one shard
per worker), dynamic (:mod:`bert_tf.data.pretraining.dynamic`, documents to
records) and the vocab builder (:mod:`bert_tf.vocab_builder`, lines).
TF-free: worker processes load it.
"""

import glob
import importlib
import json
import os
import re
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from bert_tf import errors

InputError = errors.InputError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
MANIFEST_FORMAT = "bert_tf.shards/1"
"""The ``format`` of a shard manifest (``<output_file>.json``, written by
:mod:`bert_tf.data.pretraining.beam_runner`)."""


def is_remote(path: str) -> bool:
  """``gs://``, ``s3://``, ``hdfs://``, ``file://`` ...: a path for ``tf.io.gfile``."""
  return bool(_SCHEME.match(path))


def gfile():
  """``tf.io.gfile``, loaded by name (this module stays TF-free for local paths).

  Raises:
    InputError: TensorFlow is not installed (it reads URL-style paths).
  """
  try:
    return importlib.import_module("tensorflow").io.gfile
  except ImportError as e:
    raise InputError("URL-style paths (gs://...) are read with tf.io.gfile, "
                     "which needs tensorflow: %s" % e) from None


def _read_manifest(path: str) -> Optional[dict]:
  """A shard manifest's JSON, or None if ``path`` is not one."""
  if not path.endswith(".json"):
    return None
  try:
    with (gfile().GFile(path, "rb") if is_remote(path) else open(path, "rb")) as f:
      data = json.loads(f.read().decode("utf-8"))
  except (OSError, ValueError):
    return None
  if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
    return None
  return data


def manifest_flags(path: str) -> Optional[dict]:
  """The data tool's flags a manifest records (``vocab_file``,
  ``do_lower_case``, ...), or None if ``path`` is not a manifest."""
  data = _read_manifest(path)
  return None if data is None else dict(data.get("flags") or {})


def manifest_files(path: str) -> Optional[List[str]]:
  """The shard paths a manifest (``<output_file>.json``) lists, or None if
  ``path`` is not one. Relative shard names are relative to the manifest's
  folder."""
  data = _read_manifest(path)
  if data is None:
    return None
  base = path.rsplit("/", 1)[0] if "/" in path else "."
  return [s if (is_remote(s) or os.path.isabs(s)) else base + "/" + s
          for s in data["shards"]]


def expand_input_files(input_file: str, directory_order: bool = False,
                       manifests: bool = True) -> List[str]:
  """Comma-separated globs -> list of paths, patterns in order.

  Args:
    input_file: comma-separated paths or globs.
    directory_order: the matches of one glob come in directory (``readdir``)
      order, as the original's ``tf.gfile.Glob`` gives them on a local file
      system, instead of sorted. Faithful mode uses it: the file order
      decides the document order and so every record. Name the files
      explicitly, comma-separated, for an order that does not depend on the
      file system.
    manifests: a match that is a shard manifest (``<output_file>.json``,
      format :data:`MANIFEST_FORMAT`) stands for its shards, so every
      reader of records (``run_pretraining.py --input_file``) takes one.

  URL-style patterns (``gs://bucket/wiki-*.txt``) are globbed with
  ``tf.io.gfile`` (sorted); local ones with :func:`glob.glob`, so local
  input never loads TensorFlow.

  Returns:
    list of paths.

  Raises:
    InputError: a pattern matches nothing (names the pattern), or
      ``input_file`` names no pattern.
  """
  files = []
  for pattern in input_file.split(","):
    pattern = pattern.strip()
    if not pattern:
      continue
    if is_remote(pattern):
      try:
        matches = sorted(gfile().glob(pattern))
      except Exception as e:  # pylint: disable=broad-except
        raise InputError("--input_file: %r: %s" % (pattern, e)) from None
    else:
      matches = glob.glob(pattern)
      if not directory_order:
        matches.sort()
    if not matches:
      raise InputError("--input_file: %r matches no file" % pattern)
    for m in matches:
      listed = manifest_files(m) if manifests else None
      files.extend(listed if listed is not None else [m])
  if not files:
    raise InputError("--input_file is empty")
  return files


def read_lines(path: str, block_size: int = 1 << 20) -> Iterator[str]:
  """Yields the stripped lines of ``path`` as the original reads them.

  The original reads with ``GFile.readline()`` (lines end at ``\\n`` only)
  and ``convert_to_unicode`` (invalid UTF-8 bytes dropped), then
  ``str.strip()``. Reads in 1 MiB blocks, so memory does not grow with the
  file.

  Raises:
    InputError: the file cannot be read (names it).
  """
  try:
    f = gfile().GFile(path, "rb") if is_remote(path) else open(path, "rb")  # pylint: disable=consider-using-with
  except Exception as e:  # pylint: disable=broad-except  (OSError; tf's NotFoundError)
    raise InputError("cannot read input file %r: %s" % (path, e)) from e
  with f:
    rest = b""
    while True:
      try:
        block = f.read(block_size)
      except Exception as e:  # pylint: disable=broad-except  (OSError; tf's OpError)
        raise InputError("cannot read input file %r: %s" % (path, e)) from e
      if not block:
        break
      block = rest + block
      cut = block.rfind(b"\n") + 1
      rest = block[cut:]
      if cut:
        try:
          text = block[:cut].decode("utf-8")
        except UnicodeDecodeError:
          text = "\n".join(line.decode("utf-8", "ignore")
                           for line in block[:cut].split(b"\n"))
        lines = text.split("\n")
        lines.pop()  # the empty string after the last "\n"
        for line in lines:
          yield line.strip()
    if rest:
      yield rest.decode("utf-8", "ignore").strip()


def iter_lines(input_files: Sequence[str]) -> Iterator[str]:
  """Yields the non-blank stripped lines of ``input_files``, in order (str)."""
  for path in input_files:
    for line in read_lines(path):
      if line:
        yield line


def iter_documents(input_files: Sequence[str], tokenize: Callable[[str], list],
                   shard: Optional[Tuple[int, int]] = None,
                   on_bytes: Optional[Callable[[int], None]] = None) -> Iterator[list]:
  """Yields the tokenized documents of ``input_files`` (or of one shard), streaming.

  Memory holds one document, not the corpus.

  Args:
    input_files: paths, read in order; documents continue across files.
    tokenize: ``str -> list`` (e.g.
      :meth:`bert_tf.data.pretraining.tokens.MemoTokenizer.tokenize_to_ids`);
      a line whose list is empty is dropped.
    shard: optional ``(index, count)``: document ``k`` (0-based, counting one
      document per blank line of the stream, empty ones included) belongs to
      shard ``k % count``; only shard ``index``'s documents are yielded and
      only their lines are tokenized.
    on_bytes: optional callable ``(n)``: about ``n`` more input bytes read
      (called every 256 KiB or so, at document boundaries, and at the end).

  Yields:
    documents: non-empty lists of non-empty ``tokenize`` results, in input
    order.

  Raises:
    InputError: an input file cannot be read (names it).
  """
  index, count = (0, 1) if shard is None else shard
  if not 0 <= index < count:
    raise InputError("shard %d is not in [0, %d)" % (index, count))
  doc_index = 0
  current = []
  mine = index == 0
  pending = 0
  for path in input_files:
    for line in read_lines(path):
      if not line:
        if current:
          yield current
          current = []
        if count > 1:
          doc_index += 1
          mine = doc_index % count == index
        if on_bytes is not None:
          pending += 1
          if pending > (1 << 18):
            on_bytes(pending)
            pending = 0
        continue
      if on_bytes is not None:
        pending += len(line) + 1
      if mine:
        ids = tokenize(line)
        if ids:
          current.append(ids)
  if current:
    yield current
  if on_bytes is not None and pending:
    on_bytes(pending)


def count_documents(input_files: Sequence[str], at_most: int = 2) -> int:
  """Documents (runs of non-blank lines, blank lines between them) in
  ``input_files``, counted up to ``at_most``: reading stops there, so a
  corpus in the format costs a look at its first documents only.

  Untokenized: a run of lines that all tokenize to nothing counts here (the
  readers drop it).

  Raises:
    InputError: an input file cannot be read (names it).
  """
  count, inside = 0, False
  for path in input_files:
    for line in read_lines(path):
      if line and not inside:
        count += 1
        if count >= at_most:
          return count
      inside = bool(line)
  return count


def few_documents_warning(input_file: str) -> Optional[str]:
  """The one warning line for a corpus of ONE document, or None.

  The format wants a blank line between documents: a corpus without one is
  one document, so every "random next" segment of next-sentence prediction
  comes from the same document as its first segment (the original's
  ``create_instances_from_document`` draws from another document 10 times
  and keeps the same one when there is no other), and the tools would say
  nothing. No text at all is an error of the readers.

  Args:
    input_file: ``--input_file`` (comma-separated globs).

  Returns:
    the warning (no ``warning:`` prefix: the tools log it) naming the
    file(s) and the fix, or None.

  Raises:
    InputError: a pattern that matches nothing, an unreadable file.
  """
  files = expand_input_files(input_file, manifests=False)
  if count_documents(files) != 1:
    return None
  return ("--input_file %s holds a single document (no blank line "
          "between documents): every random-next segment would come from that "
          "same document. Put a blank line between documents (one sentence per "
          "line), as create_pretraining_data.py's format wants"
          % ",".join(files))


def read_documents(input_files: Sequence[str], tokenize: Callable[[str], list]) -> List[list]:
  """Every document of ``input_files``, exactly as the original builds ``all_documents``.

  Args:
    input_files, tokenize: as :func:`iter_documents`.

  Returns:
    list of documents (before the original's shuffle); a document is a
    non-empty list of non-empty ``tokenize`` results.

  Raises:
    InputError: an input file cannot be read (names it).
  """
  return list(iter_documents(input_files, tokenize))
