#!/usr/bin/env bash
# GPU call for issues 24 and 23 (one H100 or H200; GPU=h100|h200): the native decode path at
# batch 1 and 32 (1B, 8B), the transformers path beside it, native training compiled, a decode
# profile; then the graph check and the batch-1 latency rows. Results land in $OUT.
set -uo pipefail
source benchmarks/gpu/budget.sh
GPU=${GPU:-h100}
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
G="--precision bf16-true --prompt-len 128 --new-tokens 128 --n-iters 5 --warmup-steps 2"
L="$OUT/$GPU-llm-native.csv"
run 100 $D infer --model llm_1b --batch-size 1 $G --output "$L"
run 60 $D infer --model llm_1b --batch-size 32 $G --output "$L"
run 110 $D infer --model llm_8b --batch-size 1 $G --output "$L"
if [[ ${TRAIN:-1} == 1 ]]; then
  run 100 $D train --model llm_1b --batch-size 4 --seq-len 2048 --precision bf16-mixed --compile \
    --n-iters 20 --warmup-steps 5 --output "$L"
  run 60 $D infer --model llm_1b --batch-size 1 $G --llm-impl hf --output "$L"
  run 60 python3 benchmarks/decode_profile.py --model llm_1b --batch-size 1 > "$OUT/$GPU-decode-profile-native.txt" 2>&1
fi
run 40 python3 benchmarks/graph_check.py
run 100 $D sweep default --only purpose=latency --output "$OUT/$GPU-latency.csv"
python3 - "$L" "$OUT/$GPU-latency.csv" <<'PY'
import sys, pandas as pd
cols = ["model", "mode", "batch_size", "llm_impl", "generation_path", "decode_tokens_per_s",
        "hbm_bandwidth_share", "tokens_per_s", "mfu", "cuda_graphs", "samples_per_s",
        "gpu_busy_pct", "device_bound_pct", "host_bound", "latency_p50_ms", "latency_p99_ms"]
for path in sys.argv[1:]:
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        continue
    print(frame[[c for c in cols if c in frame]].to_string(index=False))
PY
grep -E "^(ITL|path)" "$OUT/$GPU-decode-profile-native.txt" 2>/dev/null
