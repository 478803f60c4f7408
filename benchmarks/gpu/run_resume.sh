#!/usr/bin/env bash
# Third GPU call: resume the `default` sweep from the CSV the previous call left (out/), the 8B
# training OOM row, a longer mobilenet_v3 validate (launch-bound, noisy), and --batch-size auto.
set -uo pipefail
export PYTHONPATH="src:/tmp/site:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
cp out/default.csv "$OUT/default.csv"
start=$(date +%s)
python3 -m dlbench sweep default --output "$OUT/default.csv"
echo "resumed default plan wall time: $(( $(date +%s) - start )) s"
python3 -m dlbench train --model llm_8b --batch-size 1 --seq-len 2048 --precision bf16-mixed \
  --n-iters 5 --warmup-steps 1 --output "$OUT/extra.csv"
echo "exit code of the 8B training run (3 = out of memory, recorded): $?"
python3 -m dlbench validate --model mobilenet_v3 --mode train --batch-size 32 \
  --precision bf16-mixed --n-iters 300 --warmup-steps 30 --repeats 5 --output "$OUT/extra.csv"
start=$(date +%s)
timeout 270 python3 -m dlbench train --model resnet50 --batch-size auto --precision bf16-mixed \
  --n-iters 20 --warmup-steps 5 --output "$OUT/extra.csv"
echo "batch-size auto exit $? after $(( $(date +%s) - start )) s"
