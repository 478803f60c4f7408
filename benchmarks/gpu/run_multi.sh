#!/usr/bin/env bash
# GPU call on 4 H200s: DDP scaling (issue 6), the `default` plan on an H200 (issue 8, one shard
# per GPU for three GPUs) and `--batch-size auto` for resnet50 train on the fourth (issue 5).
# Run from the repository root on the device machine; results land in $OUT.
set -uo pipefail
export PYTHONPATH="src:/tmp/site:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D="python3 -m dlbench"
W=/tmp/dlbench-results && mkdir -p "$W"   # lock files stay here; $OUT gets 8 files at most
save() { cp "$W"/*.csv "$OUT"/ 2>/dev/null; }
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv
nvidia-smi topo -m
t0=$(date +%s)
for model in resnet50 vit; do
  $D scaling --model "$model" --batch-size 256 --precision bf16-mixed --devices 1,2,4 \
    --n-iters 60 --warmup-steps 15 --output "$W/h200-scaling.csv"
done
save
echo "scaling wall time: $(( $(date +%s) - t0 )) s"
t1=$(date +%s)
for k in 0 1 2; do
  CUDA_VISIBLE_DEVICES=$k timeout 330 $D sweep default --shard "$k/3" \
    --output "$W/h200-default.csv" > "$W/shard$k.log" 2>&1 &
done
CUDA_VISIBLE_DEVICES=3 timeout 330 $D train --model resnet50 --batch-size auto \
  --precision bf16-mixed --n-iters 30 --warmup-steps 10 --output "$W/h200-auto.csv" \
  > "$W/auto.log" 2>&1
echo "batch-size auto exit $? after $(( $(date +%s) - t1 )) s"
wait
echo "default plan (3 shards in parallel, one GPU each) wall time: $(( $(date +%s) - t1 )) s"
save
cat "$W"/shard*.log "$W/auto.log" > "$OUT/logs.txt"
tail -n 40 "$W"/shard*.log "$W/auto.log"
