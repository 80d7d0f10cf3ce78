"""SQuAD: the exported SavedModel's answers vs the tool's ``predictions.json``
on a whole dev set, served three ways.

``tools/run_squad.py --do_predict --export_dir`` writes ``predictions.json``
(Python post-processing: the original ``write_predictions``) and a
SavedModel whose graph does the windows and the span choice. This script
asks the SavedModel every question of the predict file, with the raw
question and context strings, in

* a fresh Python process that imports only ``tensorflow`` and
  ``tensorflow_text`` (no project code), and
* the C loader ``tests/c_loader/serve.c`` (``TF_LoadSessionFromSavedModel``,
  TF Serving's loader; no Python in the process),

and counts the questions whose answer string equals the tool's (exactly;
and after the official ``normalize_answer``), listing every disagreement
with both answers; for SQuAD v2.0 also the no-answer ("") decisions of
each side. Run the tool first::

  MINILM=$(.venv/bin/python tools/minilm_dir.py)
  .venv/bin/python tools/run_squad.py --do_predict \\
      --predict_file=../shared/data/squad_v1/dev.json --init_checkpoint=$MINILM \\
      --output_dir=/tmp/sq1 --export_dir=/tmp/sq1_export
  PYTHONPATH=tests .venv/bin/python bench/squad_export_agreement.py --run_dir=/tmp/sq1 \\
      --export_dir=/tmp/sq1_export/1 --predict_file=../shared/data/squad_v1/dev.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # pylint: disable=wrong-import-position

from bert_tf import squad_metrics  # pylint: disable=wrong-import-position


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--run_dir", required=True, help="tools/run_squad.py --output_dir")
  ap.add_argument("--export_dir", required=True, help="the SavedModel version dir")
  ap.add_argument("--predict_file", required=True)
  ap.add_argument("--batch_size", type=int, default=32)
  ap.add_argument("--no_c_loader", action="store_true")
  args = ap.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    import conftest  # pylint: disable=g-import-not-at-top
    import test_export  # pylint: disable=g-import-not-at-top
  except ImportError:
    sys.exit("run with PYTHONPATH=tests (this script uses the tests' serving harness)")
  del tf

  with open(args.predict_file, encoding="utf-8") as f:
    qas = [(q["id"], q["question"], p["context"]) for a in json.load(f)["data"]
           for p in a["paragraphs"] for q in p["qas"]]
  with open(os.path.join(args.run_dir, "predictions.json"), encoding="utf-8") as f:
    want = json.load(f)
  questions = [q.encode("utf-8") for _, q, _ in qas]
  contexts = [c.encode("utf-8") for _, _, c in qas]
  batches = [(i, min(i + args.batch_size, len(qas)))
             for i in range(0, len(qas), args.batch_size)]
  answers = {}
  with tempfile.TemporaryDirectory() as work:
    jobs = [{"path": args.export_dir, "signature": "serving_default",
             "inputs": {"question": test_export._string_input(questions[a:b]),  # pylint: disable=protected-access
                        "context": test_export._string_input(contexts[a:b])}}  # pylint: disable=protected-access
            for a, b in batches]
    spec, out = os.path.join(work, "jobs.json"), os.path.join(work, "out.json")
    with open(spec, "w") as f:
      json.dump(jobs, f)
    subprocess.run([sys.executable, "-c", test_export.FRESH_PROCESS, spec, out],
                   check=True, cwd=ROOT)
    with open(out) as f:
      res = [test_export._decode(r) for r in json.load(f)]  # pylint: disable=protected-access
    answers["fresh process (tensorflow + tensorflow_text)"] = np.concatenate(
        [r["answer"] for r in res])
    if not args.no_c_loader:
      exe = conftest.compile_c_loader(work)
      libs = test_export._c_op_libraries(args.export_dir)  # pylint: disable=protected-access
      got = [test_export._c_serve(exe, args.export_dir,  # pylint: disable=protected-access
                                  {"question": questions[a:b], "context": contexts[a:b]},
                                  libs, work)["answer"] for a, b in batches]
      answers["C loader (TF_LoadSessionFromSavedModel)"] = np.concatenate(got)

  print("predict file: %s (%d questions); run: %s; export: %s" % (
      args.predict_file, len(qas), args.run_dir, args.export_dir))
  empty_want = sum(want[qid] == "" for qid, _, _ in qas)  # SQuAD v2.0: no answer
  print("| served by | same answer string | same after normalize_answer |")
  print("|---|---:|---:|")
  for name, got in answers.items():
    texts = [g.decode("utf-8") if isinstance(g, bytes) else str(g) for g in got]
    exact = [t == want[qid] for (qid, _, _), t in zip(qas, texts)]
    norm = [squad_metrics.normalize_answer(t) == squad_metrics.normalize_answer(want[qid])
            for (qid, _, _), t in zip(qas, texts)]
    print("| %s | %d / %d (%.2f%%) | %d / %d (%.2f%%) |" % (
        name, sum(exact), len(qas), 100.0 * sum(exact) / len(qas),
        sum(norm), len(qas), 100.0 * sum(norm) / len(qas)))
    if empty_want:  # the no-answer decisions on their own
      empty_got = sum(t == "" for t in texts)
      both = sum(t == "" and want[qid] == "" for (qid, _, _), t in zip(qas, texts))
      print("    no answer: predictions.json %d, served %d, both %d" % (
          empty_want, empty_got, both))
    for ok, (qid, q, _), t in zip(exact, qas, texts):
      if not ok:
        print("    differs %s: served %r, predictions.json %r (question %r)"
              % (qid, t, want[qid], q))


if __name__ == "__main__":
  main()
