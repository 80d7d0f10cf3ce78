"""Atomic file output: write to a temporary name, rename when whole.

A killed job never leaves a file that looks complete: readers only ever see
either nothing or the finished file under its final name.
"""

import contextlib
import os
import shutil
import tempfile


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
