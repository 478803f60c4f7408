#!/usr/bin/env bash
# Last H100 call of the session: GPU-decode training and the loader alone after the staging
# thread's fix (issue 27), then the default plan's remaining points (--resume, issue 26).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
D="python3 -m dlbench"
timeout 30 $D make-data /tmp/j --images 12000 --size 500x375 --quality 90 > /dev/null 2>&1; echo "make-data $?"
T="--model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 30 --warmup-steps 5"
timeout 45 $D train $T --data folder:/tmp/j/images --workers 8 --decode gpu \
  --output "$OUT/h100-jpeg.csv" 2>&1 | grep -E "VALID|images/s "; echo "train $?"
timeout 25 $D data /tmp/j/images --model resnet50 --batch-size 256 --workers 8 --decode gpu \
  --min-time 4 --output "$OUT/h100-jpeg-loader.csv" 2>&1 | grep "workers "; echo "data $?"
BUDGET_S=110 bash benchmarks/gpu/run_verdict_plan.sh benchmarks/reference/h100-default-verdict.csv \
  2>&1 | grep -E "^\[|plan wall|Traceback|rror" | tail -5
