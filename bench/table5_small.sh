#!/bin/bash
# The paper's Table 5 (effect of the pretraining tasks) at small scale with
# our tools (issue 25 item 3): BERT-mini (data/configs/bert_mini_config.json)
# pretrained on the whole Austen corpus with MLM+NSP and with MLM only
# (--nsp=false), and no pretraining (random init); each fine-tuned on
# movie_review_sentences (single sentence), dialog_reply_pairs (pairs, the
# full 57,637 training pairs of ../shared) and ner_wnut16 (tagging), seeds
# 1..3. Recipes: pretraining as bench/pretraining_curves.sh (batch 64, lr
# 5e-4, 100 warm-up steps, --optimizer=adamw) for STEPS steps; fine-tuning as
# the Hugging Face references of bench/hf_pretraining_reference.py (lr 1e-4,
# batch 32, 3 epochs, seq 64, warm-up 10%, --optimizer=adamw; NER seq 128).
#
#   STEPS=4000 bash bench/table5_small.sh OUT_DIR [SHARED_DATA]
#
# (a smoke run: STEPS=4 EPOCHS=0.01 SEEDS=1 ...; its figures mean nothing)
#
# SHARED_DATA defaults to ../shared/data (the whole Austen corpus and the
# full reply pairs; the project ships slices). Two queues, one per core
# (taskset); every run checkpoints and a rerun with the same OUT_DIR resumes
# or skips what is done. Prints dev accuracy (NER: entity F1) per cell, mean
# +- std over the seeds. Long: hours on 2 cores (run it in the background).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: STEPS=4000 bash bench/table5_small.sh OUT_DIR [SHARED_DATA]}
SHARED=${2:-../shared/data}
STEPS=${STEPS:-4000}
EPOCHS=${EPOCHS:-3}
SEEDS=${SEEDS:-1 2 3}
PY=$PWD/.venv/bin/python
CONFIG=data/configs/bert_mini_config.json
VOCAB=data/vocab/uncased_vocab.txt
export PYTHONUNBUFFERED=1
# This checkout's bert_tf, whatever clone the venv's editable install names.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
if [ ! -e "$OUT/records.done" ]; then
  $PY tools/create_pretraining_data.py --input_file="$SHARED/corpus/austen.txt" \
    --output_file="$OUT/austen.tfrecord" --vocab_file=$VOCAB --do_lower_case=True \
    --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 \
    --random_seed=12345 --dupe_factor=5 --num_workers=2 > "$OUT/create.log" 2>&1 \
    || { cat "$OUT/create.log"; exit 1; }
  date > "$OUT/records.done"
fi
pretrain() {  # name cpu extra-flags...
  local name=$1 cpu=$2; shift 2
  local out="$OUT/pretrain_$name"
  [ -e "$out/done" ] && return 0
  mkdir -p "$out"
  taskset -c "$cpu" $PY tools/run_pretraining.py --input_file="$OUT/austen.tfrecord-*" \
    --bert_config_file=$CONFIG --output_dir="$out" --do_train --train_batch_size=64 \
    --max_seq_length=128 --max_predictions_per_seq=20 --learning_rate=5e-4 \
    --num_train_steps="$STEPS" --num_warmup_steps=100 --optimizer=adamw \
    --iterations_per_loop=50 --save_checkpoints_steps=250 --seed=1 "$@" \
    >> "$out.log" 2>&1 && date > "$out/done"
}
finetune() {  # start task seed cpu
  local start=$1 task=$2 seed=$3 cpu=$4
  local out="$OUT/ft_${start}_${task}_s$seed" init=()
  [ -e "$out/done" ] && return 0
  if [ "$start" = random ]; then init=(--bert_config_file=$CONFIG)
  else init=(--init_checkpoint="$OUT/pretrain_$start"); fi
  local common=(--vocab_file=$VOCAB --do_lower_case=True --do_train --do_eval
                --train_batch_size=32 --learning_rate=1e-4 --num_train_epochs="$EPOCHS"
                --warmup_proportion=0.1 --optimizer=adamw --seed="$seed" --output_dir="$out")
  case $task in
    movie) taskset -c "$cpu" $PY tools/run_classifier.py --task_name=sst-2 \
             --data_dir=data/movie_review_sentences --max_seq_length=64 "${init[@]}" "${common[@]}" ;;
    pairs) taskset -c "$cpu" $PY tools/run_classifier.py --task_name=pairs \
             --data_dir="$SHARED/dialog_reply_pairs" --max_seq_length=64 "${init[@]}" "${common[@]}" ;;
    ner)   taskset -c "$cpu" $PY tools/run_ner.py --data_dir="$SHARED/ner_wnut16" \
             --max_seq_length=128 "${init[@]}" "${common[@]}" ;;
  esac > "$out.log" 2>&1 && date > "$out/done"
}
queue() {  # cpu start...
  local cpu=$1; shift
  for start in "$@"; do
    for task in movie pairs ner; do
      for seed in $SEEDS; do finetune "$start" "$task" "$seed" "$cpu"; done
    done
  done
}
( pretrain mlm_nsp 0; queue 0 mlm_nsp ) &
( pretrain mlm_only 1 --nsp=false; queue 1 mlm_only random ) &
wait
$PY - "$OUT" <<'EOF'
import glob, os, re, statistics, sys
out = sys.argv[1]
for start in ("mlm_nsp", "mlm_only", "random"):
  cells = []
  for task in ("movie", "pairs", "ner"):
    vals = []
    for d in sorted(glob.glob(os.path.join(out, "ft_%s_%s_s?" % (start, task)))):
      path = os.path.join(d, "eval_results.txt")
      if not os.path.exists(os.path.join(d, "done")) or not os.path.exists(path):
        continue
      text = open(path).read()
      key = "eval_f1" if task == "ner" else "eval_accuracy"  # NER: entity F1
      m = re.search(r"^%s = ([0-9.]+)" % key, text, re.M)
      if m:
        vals.append(100 * float(m.group(1)))
    cells.append("%s %s" % (task, "%.2f +- %.2f (n=%d)" % (
        statistics.mean(vals), statistics.stdev(vals) if len(vals) > 1 else 0, len(vals))
        if vals else "-"))
  print("%-9s %s" % (start, " | ".join(cells)))
EOF
