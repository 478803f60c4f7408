#!/usr/bin/env bash
# GPU call for issue 23 (one H100 or H200): replay equals eager, the graphed latency and
# launch-bound rows, and validate for mobilenet_v3 bs32 train against a bare graphed loop.
# Run from the repository root on the device machine; results land in $OUT (GPU=h100|h200).
set -uo pipefail
source benchmarks/gpu/budget.sh
GPU=${GPU:-h100}
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
run 60 python3 benchmarks/graph_check.py
run 300 $D sweep benchmarks/gpu/graphs.yaml --output "$OUT/$GPU-graphs.csv"
run 120 $D validate --model mobilenet_v3 --batch-size 32 --precision bf16-mixed --cuda-graphs \
  --n-iters 200 --warmup-steps 20 --repeats 5 --output "$OUT/$GPU-graphs-validate.csv"
python3 - "$OUT/$GPU-graphs.csv" "$OUT/$GPU-graphs-validate.csv" <<'PY'
import sys, pandas as pd
cols = ["model", "mode", "batch_size", "cuda_graphs", "samples_per_s", "gpu_busy_pct",
        "host_bound", "latency_p50_ms", "latency_p99_ms", "capture_s", "warmup_s"]
for path in sys.argv[1:]:
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        continue
    shown = [c for c in cols + ["harness_ratio", "harness_ratios"] if c in frame]
    print(frame[shown].to_string(index=False))
    if "capture_s" in frame:
        graphed = frame[frame["cuda_graphs"] == True]  # noqa: E712
        print("capture inside warm-up:", bool((graphed["capture_s"] <= graphed["warmup_s"]).all()))
PY
