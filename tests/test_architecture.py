"""The layers of ARCHITECTURE.md, enforced on the source (an AST walk).

1. A module imports only modules of its own layer or of lower layers
   (so no library module imports ``bert_tf.export`` or ``bert_tf.tools``).
2. No import cycle between bert_tf modules.
3. The TF-free modules (what pretraining-data worker processes and the
   bottom layer load) import neither TensorFlow, tensorflow-text nor Keras,
   directly or through another bert_tf module.
4. No ``sys.path`` edits in the package, the tools or the tests.
5. The serving client (``TF_ONLY``) imports only TensorFlow, tensorflow-text,
   numpy, the standard library and the TF-free modules it is allowed.
6. No export module reads a private name of another (the shared plumbing
   is public, in ``bert_tf.export.base``).
"""

import ast
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Bottom to top. A module belongs to the first layer with a matching prefix.
LAYERS = [
    ("base", ["bert_tf._lazy", "bert_tf._import_hooks", "bert_tf._keras_registry",
              "bert_tf._quiet", "bert_tf.errors", "bert_tf.params", "bert_tf.config",
              "bert_tf.io_utils", "bert_tf.task_kinds", "bert_tf.run_dir", "bert_tf.precision", "bert_tf.tokenization",
              "bert_tf.metrics", "bert_tf.squad_metrics", "bert_tf.huggingface"]),
    ("modeling", ["bert_tf.modeling", "bert_tf.checkpoints", "bert_tf.optimization",
                  "bert_tf.preprocessing", "bert_tf.convert"]),
    ("data", ["bert_tf.data", "bert_tf.vocab_builder"]),
    ("tasks", ["bert_tf.tasks"]),
    ("runner", ["bert_tf.training", "bert_tf.distribute", "bert_tf.runner",
                "bert_tf.jobs", "bert_tf.tuning"]),
    ("export", ["bert_tf.export"]),
    ("tools", ["bert_tf.tools"]),
]

# Modules that must load without TensorFlow (data workers fork from them).
TF_FREE = [
    "bert_tf._import_hooks", "bert_tf._keras_registry", "bert_tf._quiet", "bert_tf.errors", "bert_tf.params", "bert_tf.config", "bert_tf.io_utils", "bert_tf.task_kinds", "bert_tf.run_dir",
    "bert_tf.precision", "bert_tf.tokenization", "bert_tf.metrics", "bert_tf.squad_metrics",
    "bert_tf.data.squad", "bert_tf.data.swag", "bert_tf.data.conll", "bert_tf.data.extract", "bert_tf.data.pretraining.tokens", "bert_tf.data.pretraining.documents",
    "bert_tf.data.pretraining.records",
    "bert_tf.data.pretraining.faithful", "bert_tf.data.pretraining.sharded",
    "bert_tf.data.pretraining.beam_runner", "bert_tf.huggingface",
]
TF_MODULES = ("tensorflow", "tensorflow_text", "keras", "tf_keras")

# Modules that run in a serving client's process (TF-only): they may import
# TensorFlow, tensorflow-text, numpy (and protobuf, TensorFlow's own
# dependency, for saved_model.pb) and the standard library, and of this
# package only the TF-free modules named here; nothing else, directly or
# through another module.
TF_ONLY = {"bert_tf.export.client": ()}
# ai_edge_litert: the LiteRT runtime, imported only to serve a .tflite.
TF_ONLY_THIRD_PARTY = ("tensorflow", "tensorflow_text", "numpy", "google", "ai_edge_litert")

SOURCE_DIRS = {"bert_tf": "bert_tf", "bert_tf.export": "export", "bert_tf.tools": "tools"}


def module_files():
  """``{module name: path}`` of every module of the distribution."""
  out = {}
  for package, folder in SOURCE_DIRS.items():
    base = os.path.join(ROOT, folder)
    for dirpath, dirnames, filenames in os.walk(base):
      dirnames[:] = [d for d in dirnames if d != "__pycache__"]
      rel = os.path.relpath(dirpath, base)
      if package == "bert_tf" and rel.split(os.sep)[0] in ("export", "tools"):
        continue
      prefix = package if rel == "." else package + "." + rel.replace(os.sep, ".")
      for f in filenames:
        if f.endswith(".py"):
          name = prefix if f == "__init__.py" else prefix + "." + f[:-3]
          out[name] = os.path.join(dirpath, f)
  return out


def imports_of(name, path, modules):
  """``[(imported module, line)]``: absolute names, resolved to known modules
  where the import names a module's attribute (``from bert_tf import x``)."""
  tree = ast.parse(open(path, encoding="utf-8").read(), path)
  package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
  out = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      out.extend((a.name, node.lineno) for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parts = package.split(".")
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
      for a in node.names:
        full = base + "." + a.name
        out.append((full if full in modules else base, node.lineno))
  return out


def layer_of(module):
  for i, (_, prefixes) in enumerate(LAYERS):
    if any(module == p or module.startswith(p + ".") for p in prefixes):
      return i
  return None


@pytest.fixture(scope="module")
def graph():
  modules = module_files()
  return modules, {m: imports_of(m, p, modules) for m, p in modules.items()}


def test_every_module_has_a_layer(graph):
  modules, _ = graph
  missing = [m for m in modules if m not in SOURCE_DIRS and layer_of(m) is None]
  assert not missing, "modules in no layer of ARCHITECTURE.md: %s" % missing


def test_imports_go_down_the_layers(graph):
  modules, imports = graph
  bad = []
  for m, deps in imports.items():
    mine = layer_of(m)
    for dep, line in deps:
      theirs = layer_of(dep)
      if mine is not None and theirs is not None and theirs > mine:
        bad.append("%s:%d imports %s (%s layer above %s)" % (
            modules[m], line, dep, LAYERS[theirs][0], LAYERS[mine][0]))
  assert not bad, "\n".join(bad)


def test_no_import_cycles(graph):
  modules, imports = graph
  edges = {m: sorted({d for d, _ in deps if d in modules and d != m})
           for m, deps in imports.items()}
  state, stack, cycles = {}, [], []

  def visit(m):
    state[m] = 1
    stack.append(m)
    for d in edges.get(m, ()):
      if state.get(d) == 1:
        cycles.append(stack[stack.index(d):] + [d])
      elif d not in state:
        visit(d)
    stack.pop()
    state[m] = 2

  for m in sorted(edges):
    if m not in state:
      visit(m)
  # A package's __init__ importing its own submodules is not a cycle.
  cycles = [c for c in cycles if not all(
      x == c[0] or x.startswith(c[0] + ".") or c[0].startswith(x + ".") for x in c)]
  assert not cycles, " ; ".join(" -> ".join(c) for c in cycles)


def test_tf_free_modules_load_no_tensorflow(graph):
  modules, imports = graph
  bad = []
  for start in TF_FREE:
    if start not in modules:
      bad.append("%s: no such module" % start)
      continue
    seen, todo = {start}, [start]
    while todo:
      m = todo.pop()
      for dep, line in imports[m]:
        if dep.split(".")[0] in TF_MODULES:
          bad.append("%s (via %s:%d) imports %s" % (start, modules[m], line, dep))
        elif dep in modules and dep not in seen:
          seen.add(dep)
          todo.append(dep)
        elif dep not in modules and dep.rsplit(".", 1)[0] in modules:
          parent = dep.rsplit(".", 1)[0]
          if parent not in seen:
            seen.add(parent)
            todo.append(parent)
  assert not bad, "\n".join(bad)


def test_no_sys_path_edits():
  bad = []
  for folder in ("bert_tf", "export", "tools", "tests", "bench"):
    for dirpath, _, filenames in os.walk(os.path.join(ROOT, folder)):
      for f in filenames:
        if not f.endswith(".py") or f == "test_architecture.py":
          continue
        path = os.path.join(dirpath, f)
        for i, line in enumerate(open(path, encoding="utf-8"), 1):
          if "sys.path.insert" in line or "sys.path.append" in line:
            # The original BERT package's patched copy (tests only) is put on
            # the path of a subprocess on purpose.
            if '"pkg"' in line:
              continue
            bad.append("%s:%d: %s" % (path, i, line.strip()))
  assert not bad, "\n".join(bad)


def test_import_bert_tf_loads_no_tensorflow():
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  code = ("import sys, bert_tf, bert_tf.errors, bert_tf.config; "
          "print(sorted(m for m in sys.modules if m.split('.')[0] in %r))" % (TF_MODULES,))
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True).stdout
  assert out.strip() == "[]", out


BENCH_MAX_LINES = 4100  # issue 41, item 2; + bench/litert_delegation.py (issue 68), bench/bench_long_document.py (issue 69)


def test_bench_stays_within_its_line_budget():
  """``bench/`` (all but ``results/``) holds at most 3,500 lines: the
  benchmarks a user reruns; a probe whose finding is recorded leaves it
  (BUILD_NOTES.md, "Retired benchmarks")."""
  sizes = {}
  for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "bench")):
    dirnames[:] = [d for d in dirnames if d not in ("results", "__pycache__")]
    for f in filenames:
      with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
        sizes[os.path.relpath(os.path.join(dirpath, f), ROOT)] = sum(1 for _ in fh)
  assert sum(sizes.values()) <= BENCH_MAX_LINES, sorted(sizes.items(), key=lambda kv: -kv[1])


def test_tf_only_client_imports_only_tensorflow_and_the_standard_library(graph):
  """The serving client (``bert_tf.export.client``) loads as TF Serving
  would: TensorFlow, tensorflow-text, numpy, the standard library, and only
  the TF-free package modules it names; no model, task or export code."""
  modules, imports = graph
  bad = []
  for start, allowed in TF_ONLY.items():
    assert start in modules, start
    for dep, line in imports[start]:
      root = dep.split(".")[0]
      if dep in modules or root in ("bert_tf", "export", "tools"):
        package_ok = dep in allowed or dep in ("bert_tf", "bert_tf.export")
        if not package_ok:
          bad.append("%s:%d imports %s (not one of %s)" % (modules[start], line, dep,
                                                         list(allowed)))
        elif dep in allowed and dep not in TF_FREE:
          bad.append("%s:%d imports %s, which is not TF-free" % (modules[start], line, dep))
      elif root not in TF_ONLY_THIRD_PARTY and root not in sys.stdlib_module_names:
        bad.append("%s:%d imports %s (not TensorFlow, tensorflow-text, numpy or the "
                   "standard library)" % (modules[start], line, dep))
  assert not bad, "\n".join(bad)


def test_export_modules_use_no_private_name_of_another(graph):
  """The shared plumbing is public (``bert_tf.export.base``): no export module
  reads ``other_module._name`` of another export module."""
  modules, _ = graph
  bad = []
  for name, path in modules.items():
    if not name.startswith("bert_tf.export."):
      continue
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    aliases = {}
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and node.module == "bert_tf.export":
        aliases.update({a.asname or a.name: a.name for a in node.names})
      elif isinstance(node, ast.Import):
        aliases.update({a.asname: a.name for a in node.names
                        if a.asname and a.name.startswith("bert_tf.export.")})
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and
          node.value.id in aliases and node.attr.startswith("_") and
          not node.attr.startswith("__")):
        bad.append("%s:%d: %s.%s" % (path, node.lineno, node.value.id, node.attr))
  assert not bad, "\n".join(bad)
