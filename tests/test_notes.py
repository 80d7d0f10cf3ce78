"""The notes say what is true now, and every figure cited points to a place that holds it.

``BUILD_NOTES.md`` keeps the current state (at most 600 lines); the dated
measurement log lives in ``docs/log/YYYY-MM.md``. README.md, ARCHITECTURE.md
and BUILD_NOTES.md cite figures as "log DATE (N)" (the log entry whose
heading starts with that date and number) and as ``BUILD_NOTES.md``,
"Section". These tests resolve every such citation, check that each row of
BUILD_NOTES' "Current figures" names a log entry and a command whose scripts
exist in the tree, and that the benchmarks it calls retired are gone from
``bench/`` and imported by no package code. Plain Python, no TensorFlow.
"""

import ast
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTES = os.path.join(ROOT, "BUILD_NOTES.md")
CITING = ("README.md", "ARCHITECTURE.md", "BUILD_NOTES.md")
MAX_NOTES_LINES = 600

DATE = r"(\d{4}-\d{2}-\d{2})(?:\s+\((\d+)\))?"
# "log 2026-11-27 (6)", "logs 2026-11-27 (5) and (6)", "log 2026-11-27 and
# 2026-11-27 (3)", "log 2026-11-28 (9), 2026-11-28 (10)"; line breaks allowed.
_LOG_CITATION = re.compile(r"\blogs?\s+" + DATE + r"((?:(?:,\s*|\s+and\s+)(?:" + DATE
                           + r"|\(\d+\)))*)")
_MORE = re.compile(r"(?:,\s*|\s+and\s+)(?:" + DATE + r"|\((\d+)\))")
_SECTION_CITATION = re.compile(r"BUILD_NOTES\.md`?,\s+\"([^\"]+)\"")


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def log_entries() -> set:
  """``{(date, number or None)}`` of every ``### DATE[ (N)]:`` heading in
  ``docs/log/*.md``."""
  entries = set()
  for path in glob.glob(os.path.join(ROOT, "docs", "log", "*.md")):
    for m in re.finditer(r"^### " + DATE + r":", _read(path), re.M):
      entries.add((m.group(1), m.group(2)))
  return entries


def log_citations(text: str) -> list:
  """``[(date, number or None, the cited text)]`` of every log citation."""
  out = []
  for m in _LOG_CITATION.finditer(text):
    date = m.group(1)
    out.append((date, m.group(2), m.group(0)))
    for more in _MORE.finditer(m.group(3)):
      if more.group(1):
        date = more.group(1)
        out.append((date, more.group(2), m.group(0)))
      else:  # "and (6)": the same date
        out.append((date, more.group(3), m.group(0)))
  return out


def resolves(date: str, number, entries: set) -> bool:
  """A citation names an entry: "DATE (N)" that entry, a bare "DATE" any
  entry of that day."""
  if number is not None:
    return (date, number) in entries
  return any(d == date for d, _ in entries)


def headings(text: str) -> set:
  return {m.group(1).strip() for m in re.finditer(r"^#{2,4} (.+)$", text, re.M)}


def section(text: str, title: str) -> str:
  """The body of the ``## title`` section of ``text``."""
  m = re.search(r"^## " + re.escape(title) + r"\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
  assert m, "BUILD_NOTES.md has no section %r" % title
  return m.group(1)


def table_rows(body: str) -> list:
  """The cells of each data row of the first markdown table in ``body``."""
  rows = [l for l in body.splitlines() if l.startswith("|")]
  assert len(rows) > 2, "no table"
  return [[c.strip() for c in r.strip().strip("|").split(" | ")] for r in rows[2:]]


def test_notes_within_600_lines():
  n = len(_read(NOTES).splitlines())
  assert n <= MAX_NOTES_LINES, "BUILD_NOTES.md has %d lines (at most %d): move dated detail " \
      "to docs/log/" % (n, MAX_NOTES_LINES)


def test_the_checker_parses_and_rejects():
  text = ("as measured (log 2026-11-27 (5) and (6)); see log\n2026-11-27 and "
          "2026-11-28 (10), and logs 2026-11-26 (2), 2026-11-26 (3)")
  got = [(d, n) for d, n, _ in log_citations(text)]
  assert got == [("2026-11-27", "5"), ("2026-11-27", "6"), ("2026-11-27", None),
                 ("2026-11-28", "10"), ("2026-11-26", "2"), ("2026-11-26", "3")]
  entries = {("2026-11-27", "5"), ("2026-11-27", None)}
  assert resolves("2026-11-27", "5", entries)
  assert resolves("2026-11-27", None, entries)
  assert not resolves("2026-11-27", "6", entries)
  assert not resolves("2026-11-29", None, entries)
  assert _SECTION_CITATION.findall('(`BUILD_NOTES.md`,\n"Retired benchmarks")') == [
      "Retired benchmarks"]


@pytest.mark.parametrize("name", CITING)
def test_log_citations_name_entries_that_exist(name):
  entries = log_entries()
  assert len(entries) >= 10, "docs/log/*.md holds %d dated entries" % len(entries)
  bad = ["%s: %r names no heading '### %s%s:' in docs/log/" % (
      name, cited, date, " (%s)" % number if number else "")
         for date, number, cited in log_citations(_read(os.path.join(ROOT, name)))
         if not resolves(date, number, entries)]
  assert not bad, "\n".join(bad)


def test_notes_cite_the_log():
  """BUILD_NOTES' figures point into the log (the checker above is not idle)."""
  assert len(log_citations(_read(NOTES))) >= 10


@pytest.mark.parametrize("name", CITING)
def test_section_citations_name_sections_that_exist(name):
  have = headings(_read(NOTES))
  bad = ["%s: BUILD_NOTES.md has no section %r" % (name, s)
         for s in _SECTION_CITATION.findall(_read(os.path.join(ROOT, name)))
         if s not in have]
  assert not bad, "\n".join(bad)


def test_docs_log_paths_cited_exist():
  bad = []
  for name in CITING:
    for path in set(re.findall(r"docs/log/\d{4}-\d{2}\.md", _read(os.path.join(ROOT, name)))):
      if not os.path.exists(os.path.join(ROOT, path)):
        bad.append("%s cites %s, which does not exist" % (name, path))
  assert not bad, "\n".join(bad)


def test_current_figures_name_a_log_entry_and_an_existing_command():
  rows = table_rows(section(_read(NOTES), "Current figures"))
  assert len(rows) >= 10
  entries = log_entries()
  bad = []
  for cells in rows:
    assert len(cells) == 5, "Current figures: a row without 5 cells: %s" % cells
    figure, _, date_cell, cpu, command = cells
    dates = re.findall(DATE, date_cell)
    if not dates or not all(resolves(d, n or None, entries) for d, n in dates):
      bad.append("%s: date %r names no log entry" % (figure, date_cell))
    if not cpu:
      bad.append("%s: no CPU" % figure)
    scripts = re.findall(r"(?:bench|tools)/[\w./-]+\.(?:py|sh)", command)
    if not scripts:
      bad.append("%s: command %r names no script of bench/ or tools/" % (figure, command))
    bad += ["%s: %s does not exist" % (figure, s) for s in scripts
            if not os.path.exists(os.path.join(ROOT, s))]
  assert not bad, "\n".join(bad)


def test_retired_benchmarks_are_gone_and_their_entries_exist():
  body = section(_read(NOTES), "Retired benchmarks")
  commit = re.search(r"git show ([0-9a-f]{7,40}):bench/", body)
  assert commit, "Retired benchmarks: no `git show <commit>:bench/<file>`"
  entries = log_entries()
  bad = []
  for cells in table_rows(body):
    files = re.findall(r"`([\w./]+\.(?:py|sh|c))", cells[0])
    assert files, "Retired benchmarks: a row names no file: %s" % cells[0]
    for f in files:
      if "--" not in cells[0] and os.path.exists(os.path.join(ROOT, "bench", f)):
        bad.append("bench/%s is listed as retired but is still there" % f)
    dates = re.findall(DATE, cells[-1])
    if not dates or not all(resolves(d, n or None, entries) for d, n in dates):
      bad.append("%s: %r names no log entry" % (cells[0], cells[-1]))
  assert not bad, "\n".join(bad)


def test_package_code_imports_no_benchmark():
  bench = {os.path.splitext(os.path.basename(p))[0]
           for p in glob.glob(os.path.join(ROOT, "bench", "**", "*.py"), recursive=True)}
  bench.add("bench")
  bad = []
  for folder in ("bert_tf", "export", "tools"):
    for path in glob.glob(os.path.join(ROOT, folder, "**", "*.py"), recursive=True):
      for node in ast.walk(ast.parse(_read(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        bad += ["%s imports %s" % (os.path.relpath(path, ROOT), n) for n in names
                if n.split(".")[0] in bench]
  assert not bad, "\n".join(bad)
