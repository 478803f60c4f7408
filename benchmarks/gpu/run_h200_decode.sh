#!/usr/bin/env bash
# Issue 12 on one H200: the decode rows of benchmarks/gpu/run_llm.sh (same flags), so that the
# H200/H100 ratio of decode tokens/s can be set beside the ratio of peak bandwidths (4.8/3.35).
set -uo pipefail
export PYTHONPATH="src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
D="python3 -m dlbench"
G="--precision bf16-true --prompt-len 128 --new-tokens 128 --n-iters 5 --warmup-steps 2 --output $OUT/h200-llm.csv"
timeout 150 $D infer --model llm_1b --batch-size 1 $G; echo "exit $?"
timeout 150 $D infer --model llm_8b --batch-size 1 $G; echo "exit $?"
timeout 100 $D infer --model llm_1b --batch-size 32 $G; echo "exit $?"
timeout 100 $D infer --model llm_8b --batch-size 32 $G; echo "exit $?"
