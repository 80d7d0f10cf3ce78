"""Planted defects: does the fast test suite catch each of 25 deliberate bugs?

Each defect is one small, plausible bug (an off-by-one in SQuAD's doc-stride
windows, 80/10/10 masking swapped to 10/80/10, erf GELU for the original's
tanh, a dropped ``##`` in WordPiece, ...). For each, one at a time: the
work tree's non-ignored files (``data/`` too; ``--ref REV``: a commit's) are
copied to a fresh temporary directory; the defect's exact ``old`` snippet
must occur ONCE in its file (else the script stops before running anything)
and is replaced there; a fresh interpreter checks that ``find_spec`` of the
patched module is the copy's file holding the defect (the editable install
maps ``bert_tf``, ``bert_tf.export``, ``bert_tf.tools`` to THIS checkout, so
every run gets ``PYTHONPATH=<shim>:<copy>`` whose ``sitecustomize.py``
re-points them, subprocesses included); then ``python -m pytest -x -q -m
"not slow" <the defect's tests>`` runs in the copy with a time limit: tests
fail = CAUGHT, pass = MISSED, anything else (none collected, time-out) =
ERROR. First, the union of the selected defects' tests must pass on an
unpatched copy (else exit 2).

Usage (from the repository root; ~15 min for all on a busy 2-core box)::

  nice -n 10 .venv/bin/python bench/planted_defects.py            # all
  .venv/bin/python bench/planted_defects.py --list                # names
  .venv/bin/python bench/planted_defects.py --only squad_doc_stride_off_by_one
  .venv/bin/python bench/planted_defects.py --only a,b --no-baseline --keep

Exit status: 0 when every selected defect is caught; 1 when one is missed or
errs; 2 when the baseline fails or a snippet is not found exactly once.
"""

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from _cpuinfo import cpu_line  # a script's own folder is first on sys.path  # pylint: disable=g-import-not-at-top,wrong-import-position


@dataclasses.dataclass(frozen=True)
class Defect:
  """One planted bug: ``old`` (exactly once in ``path``) becomes ``new``."""
  name: str
  path: str            # relative to the repository root
  old: str
  new: str
  tests: Tuple[str, ...]  # pytest node ids or files, relative to the root
  what: str            # one line: the bug, in words


T_TOK = "tests/test_tokenization.py"
T_SQUAD = "tests/test_squad_data.py"
T_GUARDS = "tests/test_defect_guards.py"

DEFECTS: List[Defect] = [
    # ------------------------------------------------------- tokenization
    Defect(
        "wordpiece_drops_hashes", "bert_tf/tokenization.py",
        '            substr = "##" + substr\n',
        '            substr = substr\n',
        (T_TOK + "::test_known_outputs", T_TOK + "::test_edge_cases_match_original"),
        "WordPiece continuation pieces looked up without the ## prefix"),
    Defect(
        "basic_tokenizer_keeps_accents", "bert_tf/tokenization.py",
        "        token = self._run_strip_accents(token)\n",
        "",
        (T_TOK + "::test_edge_cases_match_original",),
        "uncased BasicTokenizer lower-cases but no longer strips accents"),
    Defect(
        "in_graph_keeps_accents", "bert_tf/preprocessing.py",
        '      s = tf.strings.regex_replace(s, r"\\p{Mn}", "")\n',
        "",
        (T_TOK + "::test_in_graph_tokenizer_agrees_on_adversarial_strings",),
        "in-graph (tensorflow-text) normalizer: NFD without dropping Mn marks"),
    Defect(
        "in_graph_truncation_off_by_one", "bert_tf/preprocessing.py",
        "    budget = self.max_seq_length - len(segments) - 1\n",
        "    budget = self.max_seq_length - len(segments)\n",
        ("tests/test_classifier_tasks.py::test_truncation_and_packing_match_original",),
        "in-graph packing trims to one token too many (last [SEP] cut off)"),
    # ------------------------------------------------- pretraining data
    Defect(
        "faithful_masking_10_80_10", "bert_tf/data/pretraining/faithful.py",
        "          if rand() < 0.8:\n"
        "            out_ids[index] = mask_id\n"
        "          elif rand() < 0.5:\n"
        "            pass\n"
        "          else:\n"
        "            out_ids[index] = rand_ids[randbelow(num_words)]\n",
        "          if rand() < 0.8:\n"
        "            out_ids[index] = rand_ids[randbelow(num_words)]\n"
        "          elif rand() < 0.5:\n"
        "            pass\n"
        "          else:\n"
        "            out_ids[index] = mask_id\n",
        ("tests/test_pretraining_data.py::test_identical_to_original",),
        "static masking: 10% [MASK] / 80% random / 10% kept instead of 80/10/10"),
    Defect(
        "sharded_masking_10_80_10", "bert_tf/data/pretraining/sharded.py",
        "    return np.where(u < 0.8, self.mask_id, np.where(u < 0.9, labels, rnd))\n",
        "    return np.where(u < 0.1, self.mask_id, np.where(u < 0.2, labels, rnd))\n",
        ("tests/test_scalable_pretraining_data.py::test_masking_and_nsp_statistics",),
        "scalable (sharded) masking: 10% [MASK] / 80% random / 10% kept"),
    Defect(
        "dynamic_masking_10_80_10", "bert_tf/data/pretraining/dynamic.py",
        "    values = tf.where(u < mask_rate, tf.cast(self.mask_token, flat.dtype),\n"
        "                      tf.where(u < mask_rate + self.random_token_rate, rand, flat))\n",
        "    values = tf.where(u < mask_rate, rand,\n"
        "                      tf.where(u < mask_rate + self.random_token_rate,\n"
        "                               tf.cast(self.mask_token, flat.dtype), flat))\n",
        (T_GUARDS + "::test_dynamic_masking_matches_the_originals_rule",
         "tests/test_dynamic_masking.py"),
        "dynamic (tf.data) masking: 10% [MASK] / 80% random / 10% kept"),
    # ---------------------------------------------------------- modeling
    Defect(
        "gelu_erf_for_tanh", "bert_tf/modeling/layers.py",
        "    return lambda x: tf.nn.gelu(x, approximate=True)\n",
        "    return lambda x: tf.nn.gelu(x, approximate=False)\n",
        (T_GUARDS + "::test_gelu_is_the_originals_tanh_form_and_gelu_exact_is_erf",
         "tests/test_original_graph.py::test_original_checkpoint_loads_with_same_outputs"),
        'hidden_act "gelu" (the original\'s tanh form) computed with erf'),
    Defect(
        "attention_mask_on_queries", "bert_tf/modeling/layers.py",
        "  return ((1.0 - mask) * -10000.0)[:, tf.newaxis, tf.newaxis, :]\n",
        "  return ((1.0 - mask) * -10000.0)[:, tf.newaxis, :, tf.newaxis]\n",
        ("tests/test_modeling.py::test_padding_does_not_change_outputs",),
        "attention mask added along the query axis (padded keys are attended)"),
    Defect(
        "segment_embeddings_ignored", "bert_tf/modeling/layers.py",
        "    types = tf.gather(self.token_type_embeddings, segment_ids)\n",
        "    types = tf.gather(self.token_type_embeddings, tf.zeros_like(segment_ids))\n",
        ("tests/test_original_graph.py::test_original_checkpoint_loads_with_same_outputs",),
        "every token gets segment A's embedding"),
    Defect(
        "pre_layernorm_residual", "bert_tf/modeling/layers.py",
        "    attn = tf.cast(self.attention_layer_norm(attn + rows), x.dtype)\n",
        "    attn = tf.cast(self.attention_layer_norm(attn) + rows, x.dtype)\n",
        ("tests/test_modeling.py::test_minilm_matches_transformers",),
        "attention sub-layer: LayerNorm(attn) + x instead of LayerNorm(attn + x)"),
    # --------------------------------------------------------- optimizer
    Defect(
        "adamw_no_bias_correction", "bert_tf/optimization.py",
        "value=old_var - next_m * (lr / bias_1) / denom)\n",
        "value=old_var - next_m * lr / denom)\n",
        ("tests/test_lockstep_parity.py::test_adamw_step_is_torch_adamw",),
        "--optimizer=adamw: first-moment bias correction dropped"),
    Defect(
        "weight_decay_on_biases", "bert_tf/optimization.py",
        'DEFAULT_EXCLUDE = ("LayerNorm", "layer_norm", "bias")\n',
        'DEFAULT_EXCLUDE = ("LayerNorm", "layer_norm")\n',
        ("tests/test_original_optimizer.py",),
        "AdamWeightDecay decays biases (exclusion list lost 'bias')"),
    Defect(
        "no_gradient_clipping", "bert_tf/optimization.py",
        "               exclude_from_weight_decay=DEFAULT_EXCLUDE, global_clipnorm=1.0,\n",
        "               exclude_from_weight_decay=DEFAULT_EXCLUDE, global_clipnorm=None,\n",
        ("tests/test_original_optimizer.py",),
        "AdamWeightDecay without the global-norm-1.0 gradient clip"),
    Defect(
        "warmup_one_step_longer", "bert_tf/optimization.py",
        "    return tf.where(step < float(self.num_warmup_steps), warm, decayed)\n",
        "    return tf.where(step <= float(self.num_warmup_steps), warm, decayed)\n",
        ("tests/test_original_optimizer.py",),
        "learning-rate warm-up lasts one step longer than the original's"),
    Defect(
        "accumulation_divides_again", "bert_tf/training.py",
        "      for j, a in zip(used, acc):\n        grads[j] = a\n",
        "      for j, a in zip(used, acc):\n        grads[j] = a / float(k)\n",
        ("tests/test_pretraining.py::test_accumulated_gradient_is_the_big_batch_gradient",),
        "gradient accumulation: the summed gradient divided by k once more"),
    # ------------------------------------------------------------- SQuAD
    Defect(
        "squad_doc_stride_off_by_one", "bert_tf/data/squad.py",
        "      start_offset += min(length, doc_stride)\n",
        "      start_offset += min(length, doc_stride + 1)\n",
        (T_SQUAD + "::test_training_features_match_original",),
        "SQuAD windows start doc_stride + 1 tokens apart"),
    Defect(
        "squad_improve_answer_span_skipped", "bert_tf/data/squad.py",
        '  tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))\n',
        '  return (input_start, input_end)\n'
        '  tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))\n',
        (T_SQUAD + "::test_training_features_match_original",
         T_SQUAD + "::test_could_not_find_answer_is_skipped_and_counted"),
        "_improve_answer_span returns the whitespace-word span unchanged"),
    Defect(
        "squad_max_context_inverted", "bert_tf/data/squad.py",
        "  return cur_span_index == best_span_index\n",
        "  return cur_span_index != best_span_index\n",
        (T_SQUAD + "::test_predict_features_match_original",),
        "token_is_max_context flag inverted"),
    Defect(
        "squad_segment_id_off_by_one", "bert_tf/data/squad.py",
        "      segment_ids = [0] * doc_offset + [1] * (doc_span.length + 1)\n",
        "      segment_ids = [0] * (doc_offset + 1) + [1] * doc_span.length\n",
        (T_SQUAD + "::test_training_features_match_original",),
        "SQuAD features: the first context token gets segment id 0"),
    Defect(
        "squad_export_max_context_off_by_one", "export/squad.py",
        "    score = tf.minimum(i, wlen - 1.0 - i) + 0.01 * wlen\n",
        "    score = tf.minimum(i, wlen - i) + 0.01 * wlen\n",
        ("tests/test_squad_export.py::test_windows_equal_original_features",),
        "SQuAD SavedModel: right context counted one token too long"),
    # ------------------------------------------------- SWAG, NER, metrics
    Defect(
        "swag_softmax_over_batch", "export/multiple_choice.py",
        '    return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,\n',
        '    return {"probabilities": tf.nn.softmax(logits, axis=0), "logits": logits,\n',
        ("tests/test_swag.py::test_export_equals_model_on_real_rows",),
        "multiple-choice SavedModel: softmax over the batch, not the choices"),
    Defect(
        "ner_b_after_b_merges", "bert_tf/data/conll.py",
        '  if prev_tag in ("B", "I") and tag in ("B", "S", "O"):\n',
        '  if prev_tag in ("B", "I") and tag in ("S", "O"):\n',
        ("tests/test_ner.py::test_scores_equal_seqeval",),
        "IOB2 -> entities: B-X after B-X/I-X no longer ends the entity"),
    Defect(
        "glue_f1_of_class_0", "bert_tf/metrics.py",
        "def f1(preds, labels, positive=1):\n",
        "def f1(preds, labels, positive=0):\n",
        ("tests/test_classifier_tasks.py::test_metrics_against_references",),
        "MRPC/QQP F1 of the negative class"),
    Defect(
        "squad_metric_keeps_article_a", "bert_tf/squad_metrics.py",
        '_ARTICLES = re.compile(r"\\b(a|an|the)\\b", re.UNICODE)\n',
        '_ARTICLES = re.compile(r"\\b(an|the)\\b", re.UNICODE)\n',
        (T_SQUAD + "::test_normalize_answer_rules",),
        "SQuAD normalize_answer no longer drops the article 'a'"),
]

# The editable install's finder module, and the sitecustomize that re-points
# its mapping at a copy (see the module docstring).
_SITECUSTOMIZE = '''"""planted_defects.py: bert_tf, bert_tf.export, bert_tf.tools from {root!r}."""
import sys
for _name, _mod in list(sys.modules.items()):
  if _name.startswith("__editable__") and _name.endswith("_finder") and \\
      hasattr(_mod, "MAPPING"):
    _mod.MAPPING.update({mapping!r})
'''


def module_name(path: str) -> Optional[str]:
  """The import name of a repository file (``export/x.py`` ->
  ``bert_tf.export.x``), or None for a non-module."""
  if not path.endswith(".py"):
    return None
  parts = path[:-3].split("/")
  if parts[0] in ("export", "tools"):
    parts = ["bert_tf"] + parts
  if parts[-1] == "__init__":
    parts = parts[:-1]
  return ".".join(parts)


def repo_files() -> List[str]:
  """The work tree's files that ``git add -A`` would commit: tracked ones and
  untracked ones that git does not ignore (a new test file counts)."""
  out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                        "--exclude-standard"], capture_output=True, check=True).stdout
  return [p for p in out.decode("utf-8").split("\0") if p]


def make_copy(dest: str, ref: Optional[str]) -> None:
  """The repository's files (:func:`repo_files`, or commit ``ref``'s) under
  ``dest``."""
  os.makedirs(dest)
  if ref:
    archive = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", ref],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return
  for rel in repo_files():
    src = os.path.join(ROOT, rel)
    if not os.path.isfile(src):  # deleted in the work tree, or a submodule
      continue
    dst = os.path.join(dest, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(src, dst)


def read_source(rel: str, ref: Optional[str]) -> str:
  if ref:
    return subprocess.run(["git", "-C", ROOT, "show", "%s:%s" % (ref, rel)],
                          capture_output=True, check=True, text=True).stdout
  with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
    return f.read()


def check_snippets(defects: Sequence[Defect], ref: Optional[str]) -> List[str]:
  """Problems: a snippet not found exactly once, or a test file missing."""
  problems = []
  for d in defects:
    try:
      text = read_source(d.path, ref)
    except (OSError, subprocess.CalledProcessError) as e:
      problems.append("%s: cannot read %s: %s" % (d.name, d.path, e))
      continue
    n = text.count(d.old)
    if n != 1:
      problems.append("%s: the snippet occurs %d times in %s (must be once):\n%s"
                      % (d.name, n, d.path, d.old))
    if d.old == d.new:
      problems.append("%s: old == new" % d.name)
    for t in d.tests:
      f = t.split("::")[0]
      if not (ref or os.path.exists(os.path.join(ROOT, f))):
        problems.append("%s: no test file %s" % (d.name, f))
  names = [d.name for d in defects]
  dupes = sorted({n for n in names if names.count(n) > 1})
  if dupes:
    problems.append("duplicate defect names: %s" % dupes)
  return problems


def environment(copy: str, shim: str) -> dict:
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([shim, copy])
  env.pop("PYTHONHOME", None)
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  return env


def write_shim(shim: str, copy: str) -> None:
  os.makedirs(shim, exist_ok=True)
  mapping = {"bert_tf": os.path.join(copy, "bert_tf"),
             "bert_tf.export": os.path.join(copy, "export"),
             "bert_tf.tools": os.path.join(copy, "tools")}
  with open(os.path.join(shim, "sitecustomize.py"), "w", encoding="utf-8") as f:
    f.write(_SITECUSTOMIZE.format(root=copy, mapping=mapping))


_WHERE = r"""
import importlib, importlib.util, json, sys
names = json.loads(sys.argv[1])
out = {}
for n in names:
  spec = importlib.util.find_spec(n)
  out[n] = spec.origin if spec else None
print(json.dumps(out))
"""


def check_imports(python: str, copy: str, env: dict,
                  defect: Optional[Defect]) -> Tuple[bool, str]:
  """Whether the copy's packages (and the patched module) are what a fresh
  interpreter in ``copy`` with ``env`` imports; a one-line account."""
  names = ["bert_tf", "bert_tf.export", "bert_tf.tools"]
  mod = module_name(defect.path) if defect else None
  if mod and mod not in names:
    names.append(mod)
  p = subprocess.run([python, "-c", _WHERE, json.dumps(names)], cwd=copy, env=env,
                     capture_output=True, text=True, timeout=300)
  if p.returncode != 0:
    return False, "import check failed: %s" % p.stderr.strip()[-500:]
  where = json.loads(p.stdout.strip().splitlines()[-1])
  real = os.path.realpath(copy) + os.sep
  outside = {n: o for n, o in where.items()
             if not o or not os.path.realpath(o).startswith(real)}
  if outside:
    return False, "imported from outside the copy: %s" % outside
  if defect is not None and mod:
    with open(where[mod], encoding="utf-8") as f:
      if defect.new and defect.new not in f.read():
        return False, "%s (%s) lacks the defect" % (mod, where[mod])
    return True, "%s -> %s" % (mod, os.path.relpath(where[mod], os.path.dirname(copy)))
  return True, "bert_tf -> %s" % where["bert_tf"]


def run_pytest(python: str, copy: str, env: dict, tests: Sequence[str],
               timeout: float) -> Tuple[Optional[int], float, str]:
  """(pytest exit code or None on time-out, seconds, output)."""
  cmd = [python, "-m", "pytest", "-x", "-q", "-m", "not slow", "-p", "no:cacheprovider",
         "--no-header"] + list(tests)
  start = time.time()
  proc = subprocess.Popen(cmd, cwd=copy, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True)
  try:
    out, _ = proc.communicate(timeout=timeout)
    rc = proc.returncode
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, 9)  # the process group this call started
    out, _ = proc.communicate()
    rc = None
  return rc, time.time() - start, out


def first_failure(output: str) -> str:
  """The first failed test's id and the first line of its error."""
  test = next((l.split(" - ")[0] for l in output.splitlines()
               if l.startswith(("FAILED ", "ERROR "))), "")
  error = " / ".join(re.findall(r"^E[ \t]+(\S.*?)[ \t]*$", output, re.M)[:3])
  return (test + " | " + error[:220]).strip(" |")


def summary_line(output: str) -> str:
  lines = [l for l in output.splitlines() if l.strip()]
  return lines[-1].strip("= ") if lines else ""


def classify(rc: Optional[int], output: str = "") -> str:
  """The result of a run's pytest exit code (and output). Exit 2 is also
  what pytest-xdist returns when ``-x`` stops the run at a failed test: a
  ``FAILED`` line, or an ``ERROR`` line naming a test (its fixture failed on
  the defect, e.g. the original's script crashing on our features), tells
  that apart from a collection error (an ``ERROR`` line naming a file)."""
  if rc is None:
    return "ERROR (time-out)"
  if rc == 0:
    return "MISSED"
  if rc == 1:
    return "caught"
  if rc == 2:
    if re.search(r"^FAILED ", output, re.M):
      return "caught"
    if re.search(r"^ERROR \S+::", output, re.M):
      return "caught (in a fixture)"
    return "caught (collection error)"
  return "ERROR (pytest exit %d)" % rc


def union(tests_lists: Sequence[Sequence[str]]) -> List[str]:
  """The selected tests once each; a whole file makes its node ids redundant."""
  files = {t for ts in tests_lists for t in ts if "::" not in t}
  out = []
  for ts in tests_lists:
    for t in ts:
      if t not in out and (t in files or t.split("::")[0] not in files):
        out.append(t)
  return out


def print_table(rows: Sequence[Tuple[str, ...]], headers: Sequence[str]) -> None:
  widths = [max(len(str(r[i])) for r in list(rows) + [headers])
            for i in range(len(headers))]
  fmt = "  ".join("%%-%ds" % w for w in widths[:-1]) + "  %s"
  print(fmt % tuple(headers))
  print(fmt % tuple("-" * w for w in widths))
  for r in rows:
    print(fmt % tuple(r))


def short_tests(tests: Sequence[str]) -> str:
  return ", ".join(t.replace("tests/", "") for t in tests)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--list", action="store_true", help="list the defects and exit")
  ap.add_argument("--only", default="", help="comma-separated defect names")
  ap.add_argument("--ref", default=None, help="copy this commit's files (default: work tree)")
  ap.add_argument("--timeout", type=float, default=600.0, help="seconds per pytest run")
  ap.add_argument("--no-baseline", action="store_true", help="skip the unpatched run")
  ap.add_argument("--keep", action="store_true", help="keep the temporary copies")
  ap.add_argument("--python", default=None, help="default: <repo>/.venv/bin/python")
  args = ap.parse_args(argv)

  defects = DEFECTS
  if args.only:
    wanted = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in {d.name for d in DEFECTS}]
    if unknown:
      print("unknown defect(s): %s (see --list)" % ", ".join(unknown), file=sys.stderr)
      return 2
    defects = [d for d in DEFECTS if d.name in wanted]

  if args.list:
    print_table([(d.name, d.path, short_tests(d.tests), d.what) for d in defects],
                ("defect", "file", "tests", "bug"))
    return 0

  problems = check_snippets(defects, args.ref)
  if problems:
    print("planted_defects: cannot plant every defect:\n  " + "\n  ".join(problems),
          file=sys.stderr)
    return 2

  python = args.python or os.path.join(ROOT, ".venv", "bin", "python")
  if not os.path.exists(python):
    python = sys.executable
  print(cpu_line())
  print("source: %s; python: %s; %d defect(s); per-run limit %.0f s"
        % ("commit " + args.ref if args.ref else "work tree of " + ROOT, python,
           len(defects), args.timeout))
  total_start = time.time()
  work = tempfile.mkdtemp(prefix="planted_defects_")
  pristine = os.path.join(work, "pristine")
  make_copy(pristine, args.ref)
  status = 0
  try:
    if not args.no_baseline:
      tests = union([d.tests for d in defects])
      copy = os.path.join(work, "baseline", "repo")
      shutil.copytree(pristine, copy)
      shim = os.path.join(work, "baseline", "shim")
      write_shim(shim, copy)
      env = environment(copy, shim)
      ok, where = check_imports(python, copy, env, None)
      if not ok:
        print("baseline: %s" % where, file=sys.stderr)
        return 2
      print("baseline (unpatched copy, %s): %d test selection(s) ..."
            % (where, len(tests)), flush=True)
      rc, secs, out = run_pytest(python, copy, env, tests, args.timeout * 2)
      print("baseline: %s in %.0f s" % (summary_line(out), secs), flush=True)
      if rc != 0:
        print(out[-6000:], file=sys.stderr)
        print("planted_defects: the unpatched suite does not pass (exit %s): "
              "the report would mean nothing" % rc, file=sys.stderr)
        return 2
      if not args.keep:
        shutil.rmtree(os.path.join(work, "baseline"))

    rows, details = [], []
    for i, d in enumerate(defects):
      base = os.path.join(work, "d%02d_%s" % (i, d.name))
      copy = os.path.join(base, "repo")
      shutil.copytree(pristine, copy)
      target = os.path.join(copy, d.path)
      with open(target, encoding="utf-8") as f:
        text = f.read()
      assert text.count(d.old) == 1, (d.name, d.path)
      with open(target, "w", encoding="utf-8") as f:
        f.write(text.replace(d.old, d.new, 1))
      shim = os.path.join(base, "shim")
      write_shim(shim, copy)
      env = environment(copy, shim)
      ok, where = check_imports(python, copy, env, d)
      print("[%d/%d] %s: %s" % (i + 1, len(defects), d.name, where), flush=True)
      if not ok:
        rows.append((d.name, d.path, short_tests(d.tests), "ERROR (import)", "0"))
        details.append((d.name, where))
        status = 1
        continue
      rc, secs, out = run_pytest(python, copy, env, d.tests, args.timeout)
      result = classify(rc, out)
      if result not in ("caught", "caught (in a fixture)"):
        status = 1
      rows.append((d.name, d.path, short_tests(d.tests), result, "%.0f" % secs))
      details.append((d.name, first_failure(out) if rc else summary_line(out)))
      print("    -> %s in %.0f s: %s" % (result, secs, details[-1][1]), flush=True)
      if result not in ("caught", "caught (in a fixture)", "MISSED"):  # time-out, ...
        print(out[-3000:])
      if not args.keep:
        shutil.rmtree(base)
  finally:
    if args.keep:
      print("copies kept under %s" % work)
    else:
      shutil.rmtree(work, ignore_errors=True)

  print()
  print(cpu_line())
  print_table(rows, ("defect", "file", "tests run", "result", "seconds"))
  caught = sum(r[3].startswith("caught") for r in rows)
  print("\n%d of %d planted defects caught; total %.0f s (baseline included)"
        % (caught, len(rows), time.time() - total_start))
  print("\nwhat failed first:")
  for name, line in details:
    print("  %s: %s" % (name, line))
  return status


if __name__ == "__main__":
  sys.exit(main())
