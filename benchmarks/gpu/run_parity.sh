#!/usr/bin/env bash
# Issue 15 on one H100: ten default-plan points in a sweep worker, then four of them each in its
# own process; per-point wall time and time outside the window are in the sweep summaries.
set -uo pipefail
export PYTHONPATH="src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
D="python3 -m dlbench"
t0=$(date +%s)
timeout 300 $D sweep benchmarks/gpu/parity.yaml --isolation worker --output "$OUT/h100-parity-worker.csv"
echo "[$(( $(date +%s) - t0 )) s] worker sweep done"
timeout 240 $D sweep benchmarks/gpu/parity-process.yaml --isolation process --output "$OUT/h100-parity-process.csv"
echo "[$(( $(date +%s) - t0 )) s] process sweep done"
