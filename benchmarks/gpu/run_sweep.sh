#!/usr/bin/env bash
# Second GPU call: the `default` sweep plan (issue 5, and issue 2's nine workloads), and an
# 8B training run that must end as a recorded OOM row (issue 4). Results land in $OUT.
set -uo pipefail
export PYTHONPATH="src:/tmp/site:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
start=$(date +%s)
python3 -m dlbench sweep default --output "$OUT/default.csv"
echo "default plan wall time: $(( $(date +%s) - start )) s"
python3 -m dlbench train --model llm_8b --batch-size 1 --seq-len 2048 --precision bf16-mixed \
  --n-iters 5 --warmup-steps 1 --output "$OUT/oom.csv"
echo "exit code of the 8B training run (3 = out of memory, recorded): $?"
