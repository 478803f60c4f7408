#!/usr/bin/env bash
# GPU call for issue 17 (2 H200s): validate --devices 2 (bare torch DDP vs dlbench, back to
# back), a DDP step of each profiled on both ranks, scaling at 1 and 2 GPUs with the
# DDP-wrapped one-GPU baseline, and validate with other DDP settings. Results land in $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUDGET_S=575
source "$(dirname "$0")/budget.sh"
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv
nvidia-smi topo -m
V="--precision bf16-mixed --n-iters 50 --warmup-steps 10 --repeats 3 --devices 2"
run 90 $D validate --model resnet50 --mode train --batch-size 256 $V --output "$OUT/h200x2-validate.csv"
run 90 $D validate --model vit --mode train --batch-size 256 $V --output "$OUT/h200x2-validate.csv"
run 60 python3 -m torch.distributed.run --nproc-per-node 2 benchmarks/ddp_profile.py \
  --model resnet50 --batch-size 256 --out "$OUT/ddp-profile.txt"
S="--batch-size 256 --precision bf16-mixed --devices 1,2 --n-iters 50 --warmup-steps 10"
run 130 $D scaling --model resnet50 $S --output "$OUT/h200x2-scaling.csv"
run 130 $D scaling --model vit $S --output "$OUT/h200x2-scaling.csv"
run 80 $D validate --model resnet50 --mode train --batch-size 256 $V \
  --ddp gradient_as_bucket_view=true --ddp static_graph=true --output "$OUT/h200x2-validate.csv"
echo "all done: $(( $(date +%s) - t0 )) s"
