#!/bin/bash
# Issue 24 item 3 (accuracy half): bf16 vs fp32 fine-tuning, 3 seeds each,
# movie reviews (main job recipe) and NER (bench_ner full recipe). Rerunnable:
# finished runs are skipped.
cd /work/main
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
O=/work/runs/bf16acc
MINILM=$(.venv/bin/python tools/minilm_dir.py 2>/dev/null)
for seed in 1 2 3; do
  for dt in bfloat16 float32; do
    f=$O/ner_${dt}_s$seed.json
    if [ ! -s $f ]; then
      echo "$(date +%T) NER $dt seed $seed"
      .venv/bin/python bench/bench_ner.py --which ours --seeds $seed --threads 2 \
        --ours_optimizer adamw --dtype $dt --output $f.tmp > $O/ner_${dt}_s$seed.log 2>&1 && mv $f.tmp $f
    fi
    pdt=$([ $dt = bfloat16 ] && echo mixed_bfloat16 || echo float32)
    d=$O/movie_${dt}_s$seed
    if [ ! -e $d.done ]; then
      echo "$(date +%T) movie $dt seed $seed"
      rm -rf $d
      .venv/bin/python tools/run_classifier.py --task_name=sst-2 --do_train --do_eval \
        --data_dir=data/movie_review_sentences --init_checkpoint="$MINILM" \
        --max_seq_length=128 --train_batch_size=32 --eval_batch_size=64 \
        --learning_rate=5e-5 --num_train_epochs=3 --warmup_proportion=0.1 \
        --seed=$seed --dtype=$pdt --output_dir=$d > $O/movie_${dt}_s$seed.log 2>&1 && touch $d.done
    fi
  done
done
echo "$(date +%T) all done"
