#!/usr/bin/env bash
# GPU calls of round ten (one H100 or H200); the arguments pick the parts, rows and logs go to
# $OUT, named after the GPU (h100 or h200).
# profile (issue 24): benchmarks/train_profile.py on llm_1b training, batch 8, seq 2048
#   (VARIANTS, default product,eager_loss).
# train (issue 24): llm_1b training, seq 2048, AdamW, bf16-mixed, compiled, at each batch of
#   TRAIN_BATCHES (default 8).
# jpeg (issue 27): 12,000 JPEGs of 500x375 q90; the probe's timings and checks, REPEATS
#   (default 3) pairs of synthetic / --decode gpu rows in one process (resnet50 bs256 bf16-mixed,
#   8 workers, 60 steps), the loader alone with GPU and CPU decode, the CPU-decode training row.
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
gpu_log round10.log
for part in "$@"; do
  if [ "$part" = profile ]; then
    run 150 python3 benchmarks/train_profile.py --model llm_1b --batch-size 8 --seq-len 2048 \
      --variants "${VARIANTS:-product,eager_loss}" > "$OUT/$GPU-train-profile-r10.txt" 2>&1
    grep -E "^(==|device ms|Traceback|\w+Error)" "$OUT/$GPU-train-profile-r10.txt"
  elif [ "$part" = train ]; then
    for batch in ${TRAIN_BATCHES:-8}; do
      run 110 $D train --model llm_1b --batch-size "$batch" --seq-len 2048 \
        --precision bf16-mixed --compile --n-iters 20 --warmup-steps 5 \
        --output "$OUT/$GPU-llm-train-r10.csv"
    done
  elif [ "$part" = jpeg ]; then
    jpeg_rows r10
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
ls "$OUT"/*.csv > /dev/null 2>&1 && python3 benchmarks/gpu/show_rows.py "$OUT"/*.csv
