#!/usr/bin/env bash
# Probe (leaves the tree once its finding is in docs/decisions.md#ddp-gap): where dlbench's DDP
# rows lose against a bare torch DDP loop on one host of 4 GPUs; peak per device as a check.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=src PYTHONUNBUFFERED=1 DLBENCH_CACHE_DIR=/tmp/dlbench-cache
O=${OUT:-/tmp/out}
log() { echo "=== $(date +%T) $*" | tee -a "$O/log.txt"; }
nvidia-smi -L | tee -a "$O/log.txt"
nvidia-smi topo -m | tee -a "$O/log.txt"
log peak
python3 -m dlbench peak --max-time 3 --output "$O/peak.csv" 2>&1 | tail -12 | tee -a "$O/log.txt"
log bare 4
torchrun --nproc-per-node 4 benchmarks/bare_ddp.py --model resnet50 --output "$O/bare.csv" 2>&1 | grep -v Warn | tail -2 | tee -a "$O/log.txt"
common=(train --model resnet50 --batch-size 256 --precision bf16-mixed --devices 4 --output "$O/train.csv")
( sleep 25; nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv > "$O/smi.txt" ) &
for variant in default no_telemetry ddp_torch_defaults queues8; do
    log "dlbench $variant"
    case $variant in
        default) python3 -m dlbench "${common[@]}" --tag variant=$variant ;;
        no_telemetry) python3 -m dlbench "${common[@]}" --tag variant=$variant --no-telemetry ;;
        ddp_torch_defaults) python3 -m dlbench "${common[@]}" --tag variant=$variant --ddp static_graph=false --ddp gradient_as_bucket_view=false ;;
        queues8) CUDA_DEVICE_MAX_CONNECTIONS=8 python3 -m dlbench "${common[@]}" --tag variant=$variant ;;
    esac 2>&1 | grep -E "VALID|INVALID|images/s|error|Error" | head -5 | tee -a "$O/log.txt"
done
log bare 4 again
torchrun --nproc-per-node 4 benchmarks/bare_ddp.py --model resnet50 --output "$O/bare.csv" 2>&1 | grep -v Warn | tail -2 | tee -a "$O/log.txt"
python3 - "$O" <<'PY' | tee -a "$O/log.txt"
import sys, pandas as pd
o = sys.argv[1]
t = pd.read_csv(f"{o}/train.csv")
print(t[["variant", "samples_per_s", "window_s", "steps", "step_time_stdev_pct", "verdict", "verdict_reasons", "other_gpu_processes", "other_gpu_process_list", "warmup_s", "startup_s"]].to_string())
print(pd.read_csv(f"{o}/bare.csv")[["world_size", "images_per_s", "window_s"]].to_string())
p = pd.read_csv(f"{o}/peak.csv")
print(p[["gpu_index", "attained_bf16_tflops", "attained_read_tb_s", "attained_h2d_gb_s", "attained_p2p_gb_s", "attained_p2p_min_gb_s", "attained_p2p_pairs", "verdict", "verdict_reasons"]].to_string())
PY
