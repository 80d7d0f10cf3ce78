"""The distribution and the tools as a user meets them.

* ``pip wheel .`` builds a wheel holding ``bert_tf``, the top-level
  ``export/`` as ``bert_tf.export``, ``tools/`` as ``bert_tf.tools``, and a
  console script for every tool.
* The console scripts and ``python tools/X.py`` both run.
* Tools are quiet on a CPU machine: no TensorFlow C++ start-up banner and no
  CUDA probe error unless ``--verbosity`` asks; real errors still show.
"""

import configparser
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT, run_tool

TOOLS = ["build_vocab", "convert_checkpoint", "create_pretraining_data",
         "create_pretraining_documents", "extract_features", "export_saved_model", "predict_saved_model",
         "run_classifier", "run_ner", "run_pretraining", "run_squad", "run_swag", "tune"]
HELPFULL_TOOLS = ("run_classifier", "create_pretraining_data")
NOISE = ("cuInit", "absl::InitializeLog", "cpu_feature_guard", "cudart_stub")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  out = tmp_path_factory.mktemp("wheel")
  subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                  "--no-build-isolation", "-q", "-w", str(out), ROOT],
                 check=True, capture_output=True, text=True)
  wheels = [f for f in os.listdir(out) if f.endswith(".whl")]
  assert len(wheels) == 1, wheels
  return zipfile.ZipFile(os.path.join(out, wheels[0]))


def test_wheel_holds_the_package_the_exporter_and_the_tools(wheel):
  names = set(wheel.namelist())
  for path in ("bert_tf/__init__.py", "bert_tf/errors.py", "bert_tf/runner.py",
               "bert_tf/modeling/encoder.py", "bert_tf/tasks/classification.py",
               "bert_tf/export/saved_model.py", "bert_tf/export/warmup.py",
               "bert_tf/tools/run_classifier.py", "bert_tf/tools/_startup.py"):
    assert path in names, path
  assert not [n for n in names if n.startswith(("tests/", "export/", "tools/"))]
  entry = [n for n in names if n.endswith("entry_points.txt")][0]
  cfg = configparser.ConfigParser()
  cfg.read_string(wheel.read(entry).decode())
  scripts = dict(cfg["console_scripts"])
  for tool in TOOLS:
    name = "bert-" + tool.replace("_", "-")
    assert scripts.get(name) == "bert_tf.tools.%s:run" % tool, (name, scripts)
  meta = [n for n in names if n.endswith("METADATA")][0]
  text = wheel.read(meta).decode()
  assert "Requires-Dist: tensorflow==" in text and "Requires-Dist: tqdm==" in text
  assert "Provides-Extra: test" in text and 'pytest==' in text


def test_import_of_the_installed_package_needs_no_checkout_path(tmp_path):
  code = ("import bert_tf, bert_tf.export.saved_model as s, bert_tf.tools._common; "
          "print(bert_tf.__version__, sorted(bert_tf.__all__)[:2])")
  p = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path),
                     capture_output=True, text=True)
  assert p.returncode == 0, p.stderr[-2000:]
  assert p.stdout.startswith("0.1.0")


@pytest.mark.slow  # 9-16 s (process start-ups / a reference run): full suite only, keeps the fast loop < 5 min
def test_tools_are_quiet_on_cpu_unless_asked(tmp_path):
  args = ["tools/convert_checkpoint.py", "--input=" + str(tmp_path / "nothing"),
          "--output=" + str(tmp_path / "out")]
  quiet = run_tool(args, check=False, fresh=True)
  assert quiet.returncode != 0
  lines = [l for l in quiet.stderr.splitlines() if l.strip()]
  assert lines == ["convert_checkpoint: error: --bert_config_file is required for %r"
                   % str(tmp_path / "nothing")], quiet.stderr[-3000:]
  assert not any(n in quiet.stderr for n in NOISE)
  loud = run_tool(args + ["--verbosity=0"], check=False)
  assert loud.returncode != 0 and "convert_checkpoint: error:" in loud.stderr
  # TensorFlow's own start-up lines come back with --verbosity=0.
  assert len(loud.stderr.splitlines()) > len(lines), loud.stderr[-3000:]


def _help_flags(text):
  """The ``--flag`` names listed in an absl help text."""
  import re  # pylint: disable=g-import-not-at-top
  return set(re.findall(r"^\s+--(?:\[no\])?([a-z_0-9]+):", text, re.M))


@pytest.mark.slow  # 28 tool runs forked from the warm tool server (~30 s)
@pytest.mark.parametrize("tool", TOOLS)
def test_console_script_help_is_the_tools_help(tool):
  """``bert-X --help`` prints the tool's description and its own flags, as
  ``python tools/X.py --helpshort`` does (absl looked them up under
  ``__main__``, which is pip's wrapper in a console script). absl's
  ``--helpshort`` is an alias of ``--help`` (``absl.app.HelpshortFlag``), so
  one of the two is run each way; ``--helpfull`` (every module's flags) is
  run through the scripts of two tools."""
  import importlib  # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec("bert_tf.tools." + tool)
  with open(spec.origin, encoding="utf-8") as f:
    import ast  # pylint: disable=g-import-not-at-top
    first_line = ast.get_docstring(ast.parse(f.read())).splitlines()[0]
  script = os.path.join(os.path.dirname(sys.executable), "bert-" + tool.replace("_", "-"))
  assert os.path.exists(script), script
  by_file = run_tool(["tools/%s.py" % tool, "--helpshort"], check=False)
  expected = _help_flags(by_file.stdout)
  assert first_line in by_file.stdout
  assert len(expected) >= 2, by_file.stdout[-2000:]
  for flag in ["--help"] + (["--helpfull"] if tool in HELPFULL_TOOLS else []):
    # (pip's wrapper run as __main__ in a child of the warm server, as its
    # #! interpreter runs it: conftest.run_tool)
    p = run_tool([script, flag], check=False)
    # (absl exits 1 after printing help, both ways)
    assert p.returncode == by_file.returncode, (flag, p.stderr[-2000:])
    assert first_line in p.stdout, (flag, p.stdout[:2000])
    assert _help_flags(p.stdout) >= expected, (flag, expected - _help_flags(p.stdout))
    # --helpfull also lists the flags of other modules, which --help leaves out
    assert ("\nabsl.logging:" in p.stdout) == (flag == "--helpfull"), (flag, p.stdout[-2000:])


USER_SCRIPT = """
import numpy as np
import bert_tf
cfg = bert_tf.BertConfig.from_json_file(%r)
enc = bert_tf.BertEncoder(cfg)
x = {k: np.ones((2, 8), "int32") for k in ("input_ids", "input_mask")}
x["segment_ids"] = np.zeros((2, 8), "int32")
print(tuple(enc(x)["pooled_output"].shape))
"""


@pytest.mark.slow  # two TensorFlow start-ups
def test_a_script_importing_bert_tf_prints_no_tensorflow_banner():
  """``import bert_tf`` then build and call a model: stdout is the script's
  own line and stderr is empty (no ``I0000``/``E0000`` oneDNN, CUDA or cuInit
  lines); ``TF_CPP_MIN_LOG_LEVEL=0`` brings TensorFlow's lines back."""
  from conftest import TINY_CONFIG  # pylint: disable=g-import-not-at-top
  code = USER_SCRIPT % TINY_CONFIG
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                     env=env, timeout=300)
  assert p.returncode == 0, p.stderr[-3000:]
  assert p.stdout.strip() == "(2, 128)"
  assert p.stderr == "", p.stderr
  loud = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=dict(env, TF_CPP_MIN_LOG_LEVEL="0"), timeout=300)
  assert loud.returncode == 0 and any(n in loud.stderr for n in NOISE + ("oneDNN",)), loud.stderr
