#!/bin/bash
# Domain-adaptive (task-adaptive) continued pretraining, Gururangan et al.
# 2020 ("Don't Stop Pretraining"), with this project's tools (issue 25 item 4):
#
#   1. the movie-review TRAIN sentences, labels dropped, one sentence per
#      document -> create_pretraining_data (seq 64: sentence [SEP] random
#      sentence, ~50 tokens)
#   2. run_pretraining --init_checkpoint=all-MiniLM-L6-v2 --nsp=false
#      (masked LM only; MiniLM has no masked-LM head: it starts random and the
#      log says so), 1,000 steps, batch 32, lr 1e-4, 100 warm-up steps,
#      --optimizer=adamw
#   3. run_classifier on movie_review_sentences from that run and from the
#      start model directly, the same recipe, seeds 1..3 each; dev accuracy
#      of the final model in OUT/ft_*/eval_results.txt
#
#   bash bench/domain_adaptive_pretraining.sh OUT_DIR
#
# Two queues, one per core (taskset); each step is skipped when its result
# exists, so a rerun with the same OUT_DIR resumes. ~1 h on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash bench/domain_adaptive_pretraining.sh OUT_DIR}
PY=$PWD/.venv/bin/python
MINILM=$($PY tools/minilm_dir.py)
export PYTHONUNBUFFERED=1
# This checkout's bert_tf, whatever clone the venv's editable install names.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
if [ ! -s "$OUT/corpus.txt" ]; then
  tail -n +2 data/movie_review_sentences/train.tsv | cut -f1 | awk 'NF{print; print ""}' \
    > "$OUT/corpus.tmp" && mv "$OUT/corpus.tmp" "$OUT/corpus.txt"
fi
if [ ! -s "$OUT/mr.tfrecord" ]; then
  $PY tools/create_pretraining_data.py --input_file="$OUT/corpus.txt" --output_file="$OUT/mr.tfrecord" \
    --vocab_file="$MINILM/vocab.txt" --do_lower_case=True --max_seq_length=64 \
    --max_predictions_per_seq=10 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5 \
    --short_seq_prob=0.1 > "$OUT/create.log" 2>&1 || { cat "$OUT/create.log"; exit 1; }
fi
finetune() {  # name init seed cpu
  local out="$OUT/ft_$1_s$3"
  [ -e "$out/done" ] && return 0  # (eval_results.txt is written after every epoch)
  taskset -c "$4" $PY tools/run_classifier.py --task_name=sst-2 --do_train --do_eval \
    --data_dir=data/movie_review_sentences --init_checkpoint="$2" \
    --vocab_file="$MINILM/vocab.txt" --do_lower_case=True \
    --max_seq_length=64 --train_batch_size=32 --eval_batch_size=64 \
    --learning_rate=5e-5 --num_train_epochs=3 --warmup_proportion=0.1 --seed="$3" \
    --output_dir="$out" > "$out.log" 2>&1 && date > "$out/done"
}
pretrain() {
  [ -e "$OUT/pretrain/done" ] && return 0
  taskset -c 0 $PY tools/run_pretraining.py --input_file="$OUT/mr.tfrecord" --output_dir="$OUT/pretrain" \
    --init_checkpoint="$MINILM" --do_train --do_eval --nsp=false \
    --train_batch_size=32 --max_seq_length=64 --max_predictions_per_seq=10 \
    --learning_rate=1e-4 --num_train_steps=1000 --num_warmup_steps=100 --optimizer=adamw \
    --save_checkpoints_steps=250 --iterations_per_loop=50 --eval_batch_size=64 --max_eval_steps=50 \
    --seed=1 >> "$OUT/pretrain.log" 2>&1 && date > "$OUT/pretrain/done"
}
( pretrain; finetune dapt "$OUT/pretrain" 1 0; finetune dapt "$OUT/pretrain" 2 0 ) &
Q0=$!
( finetune direct "$MINILM" 1 1; finetune direct "$MINILM" 2 1; finetune direct "$MINILM" 3 1
  while [ ! -e "$OUT/pretrain/done" ] && kill -0 $Q0 2>/dev/null; do sleep 30; done
  [ -e "$OUT/pretrain/done" ] && finetune dapt "$OUT/pretrain" 3 1 ) &
wait
[ -e "$OUT/pretrain/done" ] || { echo "run_pretraining failed: see $OUT/pretrain.log"; exit 1; }
for f in "$OUT"/ft_*/done; do  # the final model's dev accuracy (as the comparison reports)
  d=$(dirname "$f"); echo "$(basename "$d") $(grep -h '^eval_accuracy' "$d/eval_results.txt")"
done
