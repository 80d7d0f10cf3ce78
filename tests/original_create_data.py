"""Runs the ORIGINAL google-research/bert ``create_pretraining_data.py``.

Usage: python original_create_data.py WORKDIR JOBS_JSON

JOBS_JSON holds a list of jobs, each a ``{flag: value}`` dict of the
original's command-line flags (``input_file``, ``output_file``,
``vocab_file``, ``random_seed``, ``do_whole_word_mask``, ...). Every job runs
the original ``main()`` in this one process (one TensorFlow import for all of
them), exactly as ``python -m bert.create_pretraining_data --flag=value ...``
would.

The code is PyPI ``bert-tensorflow==1.0.4``, copied to WORKDIR/pkg/bert and
patched, never vendored. 1.0.4 predates whole-word masking, so the copy gets
the upstream change, verbatim, from google-research/bert master
``create_pretraining_data.py`` (the "Whole Word Masking" commit of
2019-05-31), which reads:

    flags.DEFINE_bool(
        "do_whole_word_mask", False,
        "Whether to use whole word masking rather than per-WordPiece masking.")
    ...
      cand_indexes = []
      for (i, token) in enumerate(tokens):
        if token == "[CLS]" or token == "[SEP]":
          continue
        # Whole Word Masking means that if we mask all of the wordpieces
        # corresponding to an original word. [...]
        if (FLAGS.do_whole_word_mask and len(cand_indexes) >= 1 and
            token.startswith("##")):
          cand_indexes[-1].append(i)
        else:
          cand_indexes.append([i])
      rng.shuffle(cand_indexes)
      [...]
      for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
          break
        # If adding a whole-word mask would exceed the maximum number of
        # predictions, then just skip this candidate.
        if len(masked_lms) + len(index_set) > num_to_predict:
          continue
        is_any_index_covered = False
        for index in index_set:
          if index in covered_indexes:
            is_any_index_covered = True
            break
        if is_any_index_covered:
          continue
        for index in index_set:
          covered_indexes.add(index)
          masked_token = None
          [... the 80/10/10 body of 1.0.4, indented one level ...]
          masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
      assert len(masked_lms) <= num_to_predict

With ``--do_whole_word_mask=False`` (the default) the patched code draws the
same random numbers as 1.0.4 (one-element index sets), so every job without
the flag runs the released 1.0.4 behaviour.

Single functions of the released, unpatched 1.0.4 (its document reader,
``truncate_seq_pair``) run through ``tests/original_subprocess.py``.
"""

import importlib.util
import json
import os
import shutil
import sys

WWM_FLAG = '''
flags.DEFINE_bool(
    "do_whole_word_mask", False,
    "Whether to use whole word masking rather than per-WordPiece masking.")
'''

OLD_CANDIDATES = '''    if token == "[CLS]" or token == "[SEP]":
      continue
    cand_indexes.append(i)
'''

NEW_CANDIDATES = '''    if token == "[CLS]" or token == "[SEP]":
      continue
    if (FLAGS.do_whole_word_mask and len(cand_indexes) >= 1 and
        token.startswith("##")):
      cand_indexes[-1].append(i)
    else:
      cand_indexes.append([i])
'''

OLD_LOOP_HEAD = '''  for index in cand_indexes:
    if len(masked_lms) >= num_to_predict:
      break
    if index in covered_indexes:
      continue
    covered_indexes.add(index)
'''

NEW_LOOP_HEAD = '''  for index_set in cand_indexes:
    if len(masked_lms) >= num_to_predict:
      break
    # If adding a whole-word mask would exceed the maximum number of
    # predictions, then just skip this candidate.
    if len(masked_lms) + len(index_set) > num_to_predict:
      continue
    is_any_index_covered = False
    for index in index_set:
      if index in covered_indexes:
        is_any_index_covered = True
        break
    if is_any_index_covered:
      continue
    for index in index_set:
      covered_indexes.add(index)
'''

LOOP_END = "    masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))\n"


def _replace_once(code, old, new):
  assert code.count(old) == 1, "patch target not found exactly once:\n" + old
  return code.replace(old, new)


def patch_whole_word_mask(code):
  """1.0.4 ``create_pretraining_data.py`` source -> the same with master's WWM."""
  code = _replace_once(code, 'flags.DEFINE_integer("max_seq_length"',
                       WWM_FLAG.lstrip() + '\nflags.DEFINE_integer("max_seq_length"')
  code = _replace_once(code, OLD_CANDIDATES, NEW_CANDIDATES)
  start = code.index(OLD_LOOP_HEAD)
  body_start = start + len(OLD_LOOP_HEAD)
  end = code.index(LOOP_END, body_start) + len(LOOP_END)
  body = code[body_start:end]
  # The 80/10/10 body moves one level in, under "for index in index_set:".
  body = "".join(("  " + line) if line.strip() else line
                 for line in body.splitlines(True))
  return (code[:start] + NEW_LOOP_HEAD + body +
          "  assert len(masked_lms) <= num_to_predict\n" + code[end:])


def patched_package(workdir):
  """Copies bert-tensorflow 1.0.4 to WORKDIR/pkg/bert with master's WWM."""
  src = os.path.dirname(importlib.util.find_spec("bert").origin)
  dst = os.path.join(workdir, "pkg", "bert")
  if not os.path.exists(dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    path = os.path.join(dst, "create_pretraining_data.py")
    with open(path, encoding="utf-8") as f:
      code = f.read()
    with open(path, "w", encoding="utf-8") as f:
      f.write(patch_whole_word_mask(code))
  sys.path.insert(0, os.path.join(workdir, "pkg"))


def main(workdir, jobs_json):
  patched_package(workdir)
  from bert import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
  assert cpd.__file__.startswith(os.path.abspath(workdir)), cpd.__file__
  with open(jobs_json, encoding="utf-8") as f:
    jobs = json.load(f)
  for job in jobs:
    cpd.FLAGS.unparse_flags()
    cpd.FLAGS(["create_pretraining_data"] +
              ["--%s=%s" % (k, v) for k, v in sorted(job.items())])
    cpd.main(None)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
