#!/bin/bash
# Pretraining curves, ours beside Hugging Face's (issue 25 item 1): BERT-mini
# (L=4 H=256 A=4, data/configs/bert_mini_config.json) from scratch on the
# whole Austen corpus, the recipe of the Hugging Face references in
# bench/results/pretraining/hf_gpu/ (bench/hf_pretraining_reference.py):
# records from create_pretraining_data --dupe_factor=5 --num_workers=2
# (seq 128, 20 predictions, seed 12345: 45,280 instances), batch 64, lr 5e-4,
# 100 warm-up steps, 1,000 steps, --optimizer=adamw (bias-corrected, torch
# AdamW's semantics), masked-LM accuracy per 50-step window
# (--iterations_per_loop=50: the progress lines and TensorBoard train/), in
# float32 and mixed_bfloat16, seeds 1..3.
#
#   bash bench/pretraining_curves.sh OUT_DIR [CORPUS]
#
# (a smoke run: STEPS=8 ...; its figures mean nothing). SEEDS="1 2" runs only
# those seeds (default "1 2 3"): a run's checkpoints live in OUT_DIR, outside
# the work tree, and do not outlast the session, so give a session only runs
# it can finish (~1 h each on one core) and keep their logs. DTYPES picks
# ours' queues (default "float32 mixed_bfloat16"). HF_SEEDS="3" also runs
# the Hugging Face reference (bench/hf_pretraining_reference.py, the
# original's schedule, torch on this CPU, one thread) for those seeds after
# the mixed_bfloat16 queue on core 1 (or alone there), writing
# OUT_DIR/hf_original_s<seed>.log/.json; e.g. the last seed of everything:
#   SEEDS=3 DTYPES=float32 HF_SEEDS=3 bash bench/pretraining_curves.sh OUT_DIR
# and compare with bench/compare_pretraining_curves.py OUT_DIR --hf ...
#
# CORPUS defaults to ../shared/data/corpus/austen.txt (4 MB; the project ships
# a slice only). Two queues, one per core (taskset: float32 on core 0,
# mixed_bfloat16 on core 1); checkpoints every 250 steps; a rerun with the
# same OUT_DIR resumes each run from its newest checkpoint and skips finished
# ones. Prints the masked-LM accuracy of every run at steps 250 / 500 / 1,000.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash bench/pretraining_curves.sh OUT_DIR [CORPUS]}
CORPUS=${2:-../shared/data/corpus/austen.txt}
PY=$PWD/.venv/bin/python
STEPS=${STEPS:-1000}
SEEDS=${SEEDS:-1 2 3}
DTYPES=${DTYPES:-float32 mixed_bfloat16}
HF_SEEDS=${HF_SEEDS:-}
export PYTHONUNBUFFERED=1
# This checkout's bert_tf, whatever clone the venv's editable install names.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
if [ ! -e "$OUT/records.done" ]; then
  $PY tools/create_pretraining_data.py --input_file="$CORPUS" --output_file="$OUT/austen.tfrecord" \
    --vocab_file=data/vocab/uncased_vocab.txt --do_lower_case=True --max_seq_length=128 \
    --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5 \
    --num_workers=2 > "$OUT/create.log" 2>&1 || { cat "$OUT/create.log"; exit 1; }
  date > "$OUT/records.done"
fi
one() {  # dtype seed cpu
  local out="$OUT/$1_s$2"
  [ -e "$out/done" ] && return 0
  mkdir -p "$out"
  taskset -c "$3" $PY tools/run_pretraining.py --input_file="$OUT/austen.tfrecord-*" \
    --bert_config_file=data/configs/bert_mini_config.json --output_dir="$out" --do_train \
    --train_batch_size=64 --max_seq_length=128 --max_predictions_per_seq=20 \
    --learning_rate=5e-4 --num_train_steps="$STEPS" --num_warmup_steps=100 --optimizer=adamw \
    --iterations_per_loop=50 --save_checkpoints_steps=250 --seed="$2" --dtype="$1" \
    >> "$out.log" 2>&1 && date > "$out/done"
}
hf() {  # seed cpu
  local out="$OUT/hf_original_s$1"
  [ -e "$out.json" ] && return 0
  if [ ! -e "$OUT/austen_pt.npz" ]; then
    $PY bench/hf_pretraining_reference.py --to_npz "$(ls "$OUT"/austen.tfrecord-* | paste -sd,)" \
      "$OUT/austen_pt.tmp.npz" > "$OUT/npz.log" 2>&1 && mv "$OUT/austen_pt.tmp.npz" "$OUT/austen_pt.npz" \
      || { cat "$OUT/npz.log"; return 1; }
  fi
  OMP_NUM_THREADS=1 taskset -c "$2" $PY bench/hf_pretraining_reference.py --npz "$OUT/austen_pt.npz" \
    --seeds "$1" --num_train_steps "$STEPS" --schedule original --output "$out.tmp.json" \
    > "$out.log" 2>&1 && mv "$out.tmp.json" "$out.json"
}
case " $DTYPES " in *" float32 "*)
  ( for s in $SEEDS; do one float32 "$s" 0; done ) & ;;
esac
(
  case " $DTYPES " in *" mixed_bfloat16 "*) for s in $SEEDS; do one mixed_bfloat16 "$s" 1; done ;; esac
  for s in $HF_SEEDS; do hf "$s" 1; done
) &
wait
for f in "$OUT"/*_s?.log; do
  case $f in */hf_*) continue ;; esac  # compare_pretraining_curves.py reads those
  printf "%-22s" "$(basename "$f" .log)"
  for step in 250 500 1000; do
    grep -o "^step $step/$STEPS .*masked_lm_accuracy=[0-9.]*" "$f" | tail -1 | grep -o "masked_lm_accuracy=[0-9.]*" \
      | sed "s/masked_lm_accuracy=/ @$step /" | tr -d '\n'
  done
  echo
done
