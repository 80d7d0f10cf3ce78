"""Atomic file output: write to a temporary name, rename when whole; and
reading back the small JSON settings files that runs and models carry.

A killed job never leaves a file that looks complete: readers only ever see
either nothing or the finished file under its final name.
"""

import contextlib
import json
import os
import shutil
import tempfile
from typing import Callable, Optional


def read_json_object(path: str, error: Callable[[str], Exception],
                     missing_ok: bool = False) -> Optional[dict]:
  """The JSON object in ``path`` (``config.json``, a run's settings file...).

  Args:
    path: the file.
    error: makes the exception to raise from a one-line message that names
      ``path`` (the caller's error class and flag).
    missing_ok: a missing file gives None instead of an error.

  Returns:
    the dict; None when ``path`` is missing and ``missing_ok``.

  Raises:
    ``error("<path>: unreadable (<reason>)")``: missing (unless
    ``missing_ok``), unreadable or not JSON; ``error("<path>: not a JSON
    object")``: valid JSON of another type.
  """
  if missing_ok and not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      value = json.load(f)
  except (OSError, ValueError) as e:
    raise error("%s: unreadable (%s)" % (path, e)) from e
  if not isinstance(value, dict):
    raise error("%s: not a JSON object" % path)
  return value


def temp_name(path):
  """A unique temporary sibling of ``path`` (same directory, so rename is atomic)."""
  d, base = os.path.split(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix=".%s." % base, suffix=".tmp", dir=d)
  os.close(fd)
  # mkstemp makes the file 0600; the finished file gets the mode a plain
  # open() would give it (0666 less the umask).
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(tmp, 0o666 & ~umask)
  return tmp


@contextlib.contextmanager
def atomic_output(path):
  """Yields a temporary path; renames it to ``path`` if the block succeeds.

  On an exception the temporary file is removed and ``path`` is untouched.
  """
  d = os.path.dirname(os.path.abspath(path))
  os.makedirs(d, exist_ok=True)
  tmp = temp_name(path)
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


@contextlib.contextmanager
def atomic_outputs(paths):
  """Yields temporary paths for ``paths`` (list); renames them all when the
  block succeeds, so no output appears under its final name before every
  one is whole. On an exception the temporaries are removed and ``paths``
  are untouched. Parent directories are created.
  """
  for path in paths:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmps = [temp_name(p) for p in paths]
  try:
    yield tmps
    for tmp, path in zip(tmps, paths):
      os.replace(tmp, path)
  finally:
    for tmp in tmps:
      if os.path.exists(tmp):
        os.remove(tmp)


def keep_previous(path):
  """Moves an existing ``path`` aside instead of overwriting it: to
  ``<stem>.<N><ext>`` with the smallest free N >= 1 (``test_results.tsv`` ->
  ``test_results.1.tsv``). Returns the new name, or None when ``path`` did
  not exist."""
  if not os.path.exists(path):
    return None
  stem, ext = os.path.splitext(path)
  n = 1
  while os.path.exists("%s.%d%s" % (stem, n, ext)):
    n += 1
  kept = "%s.%d%s" % (stem, n, ext)
  os.rename(path, kept)
  return kept


def format_results(results: dict) -> str:
  """``key = value`` lines, sorted: the original's ``eval_results.txt``."""
  return "".join("%s = %s\n" % (k, results[k]) for k in sorted(results))


def atomic_write_text(path, text):
  """Writes ``text`` (UTF-8) to ``path`` atomically."""
  with atomic_output(path) as tmp:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)


@contextlib.contextmanager
def atomic_directory(path):
  """Yields a temporary directory that is renamed to ``path`` when whole.

  ``path`` must not exist yet (a directory cannot be atomically replaced);
  on an exception the temporary directory is removed.

  Raises:
    FileExistsError: ``path`` exists.
  """
  if os.path.exists(path):
    raise FileExistsError("refusing to overwrite existing directory %r" % path)
  parent = os.path.dirname(os.path.abspath(path))
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".%s." % os.path.basename(path), suffix=".tmp",
                         dir=parent)
  try:
    yield tmp
    os.rename(tmp, path)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise


# --- text that is not UTF-8 ----------------------------------------------------

REENCODE_HINT = "re-encode it as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8)"


def not_utf8_error(path, line: int, done: str = "replaced by U+FFFD"):
  """The ``--strict_utf8`` refusal: :class:`bert_tf.errors.InputError`
  naming ``path`` and ``line`` (1-based); ``done``: what reading without
  ``--strict_utf8`` does to the bad bytes."""
  from bert_tf import errors  # pylint: disable=g-import-not-at-top
  return errors.InputError(
      "%s line %d: not valid UTF-8 (--strict_utf8 refuses such text); %s, or drop "
      "--strict_utf8 to read it with the bad bytes %s" % (
          os.fspath(path), line, REENCODE_HINT, done))


def warn_not_utf8(path, count: int, first: int, done: str) -> None:
  """Logs the one warning about ``count`` lines of ``path`` that are not
  valid UTF-8 (the first is ``first``); ``done`` says what happened to their
  bad bytes (``replaced by U+FFFD``, ``dropped``)."""
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.warning(
      "%s: %d line%s not valid UTF-8 (first: line %d); the undecodable bytes were "
      "%s, as the original does. %s, or pass --strict_utf8 to refuse such "
      "files", os.fspath(path), count, " is" if count == 1 else "s are", first, done,
      REENCODE_HINT[0].upper() + REENCODE_HINT[1:])


def decode_lines(binary_lines, path, strict: bool = False):
  """Yields the lines of a binary file (an iterable of ``bytes`` lines)
  decoded as UTF-8, line ends kept; bytes that are not UTF-8 are replaced by
  U+FFFD (``errors="replace"``, what ``open(path, encoding="utf-8",
  errors="replace")`` gives: the same text).

  When the iteration ends, one warning names ``path``, the first such line
  and how many there were (:func:`warn_not_utf8`).

  Args:
    binary_lines: e.g. a file opened ``"rb"``.
    path: the file's name, for the messages.
    strict: refuse the first such line instead (:func:`not_utf8_error`).

  Raises:
    bert_tf.errors.InputError: with ``strict``, naming the file and line.
  """
  count, first = 0, 0
  for number, raw in enumerate(binary_lines, 1):
    try:
      yield raw.decode("utf-8")
    except UnicodeDecodeError:
      if strict:
        raise not_utf8_error(path, number) from None
      count += 1
      first = first or number
      yield raw.decode("utf-8", "replace")
  if count:
    warn_not_utf8(path, count, first, "replaced by U+FFFD")


def count_not_utf8_lines(path, block_size: int = 1 << 20) -> tuple:
  """``(count, first)``: how many lines (split at ``\\n``) of ``path`` are not
  valid UTF-8, and the first one's number (1-based; 0 when none). Reads in
  ``block_size`` blocks (memory does not grow with the file)."""
  count, first, seen, rest = 0, 0, 0, b""
  with open(path, "rb") as f:
    while True:
      block = f.read(block_size)
      if not block:
        break
      block = rest + block
      cut = block.rfind(b"\n") + 1
      whole, rest = block[:cut], block[cut:]
      try:
        whole.decode("utf-8")
      except UnicodeDecodeError:
        for i, line in enumerate(whole.split(b"\n")[:-1]):
          try:
            line.decode("utf-8")
          except UnicodeDecodeError:
            count += 1
            first = first or seen + i + 1
      seen += whole.count(b"\n")
  if rest:
    try:
      rest.decode("utf-8")
    except UnicodeDecodeError:
      count += 1
      first = first or seen + 1
  return count, first
