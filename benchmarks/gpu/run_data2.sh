#!/usr/bin/env bash
# Second GPU call for issues 14/15/11 (one H100): GPU decode after the packing fix, 12 workers,
# 0 workers, --batch-size auto for resnet50 (fast probes + autotuned confirmation), and the
# mobilenet_v3 validate ratio. Same 570 s guard as run_data.sh.
set -uo pipefail
source "$(dirname "$0")/budget.sh"
IMAGES=/tmp/dlbench-data
run 60 $D make-data $IMAGES --images 20000 --size 224x224 --quality 90
IMG="$IMAGES/images"
T="--model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 30 --warmup-steps 5"
run 45 timeout 120 $D train $T --data "folder:$IMG" --workers 8 --decode gpu --output "$OUT/h100-data.csv"
run 30 timeout 90 $D data "$IMG" --model resnet50 --batch-size 256 --workers 4,8 --decode gpu \
  --min-time 3 --output "$OUT/h100-loader.csv"
run 45 $D train $T --data "folder:$IMG" --workers 12 --output "$OUT/h100-data.csv"
run 110 $D train --model resnet50 --batch-size auto --precision bf16-mixed --output "$OUT/h100-auto.csv"
run 60 $D train $T --data "folder:$IMG" --workers 0 --n-iters 5 --warmup-steps 2 \
  --output "$OUT/h100-data.csv"
run 90 $D validate --model mobilenet_v3 --mode train --batch-size 32 --precision bf16-mixed \
  --n-iters 200 --warmup-steps 30 --repeats 5 --output "$OUT/h100-validate.csv"
echo "all done: $(( $(date +%s) - t0 )) s"
