#!/usr/bin/env bash
# H100 call for issues 11 and 15: the default plan in worker mode (the re-measured reference and
# its wall time), every 9th point of it again with a process per point (overhead before/after),
# mobilenet_v3 validate, and --batch-size auto for resnet50. Results land in $OUT.
set -uo pipefail
BUDGET_S=580
source "$(dirname "$0")/budget.sh"
carry_wheels
run 300 $D sweep default --output "$OUT/h100-default.csv"
run 100 $D sweep default --shard 0/9 --isolation process --output "$OUT/h100-process.csv"
run 80 $D validate --model mobilenet_v3 --mode train --batch-size 32 --precision bf16-mixed \
  --n-iters 200 --warmup-steps 30 --repeats 5 --output "$OUT/h100-validate.csv"
run 60 $D train --model resnet50 --batch-size auto --precision bf16-mixed --output "$OUT/h100-auto.csv"
echo "all done: $(( $(date +%s) - t0 )) s"
