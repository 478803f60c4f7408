#!/usr/bin/env bash
# H100 calls of round seven; the arguments pick the parts, the log goes to $OUT/round7.log.
# pdl (issues 23, 24): vit batch 1 compiled and llm_1b decode at batch 1, with inductor's
# Triton kernels launched with and without programmatic dependent launch (TORCHINDUCTOR_ENABLE_PDL:
# a kernel's prologue overlaps the previous kernel's tail, on Hopper), alternating, in separate
# processes. autotune (issue 23): vit batch 1 compiled with TORCHINDUCTOR_MAX_AUTOTUNE=1 (GEMMs
# may become Triton templates with their bias and GELU fused: fewer kernels in the graph).
# base: vit batch 1 compiled with inductor's defaults, for the same call. The first line printed
# says whether this torch has inductor's PDL switch (2.11 has not: there the pdl pairs are two
# runs of the same code).
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
log_to "round7.log"
python3 -c "import torch, torch._inductor.config as c; print(torch.__version__,
  'enable_pdl' in dir(c.triton), torch.cuda.get_device_name())"
for part in "$@"; do
  if [ "$part" = pdl ]; then
    for _ in 1 2; do
      for pdl in 0 1; do
        run 40 env TORCHINDUCTOR_ENABLE_PDL=$pdl $D infer --model vit --batch-size 1 \
          --precision bf16-mixed --compile --n-iters 1000 --tag pdl=$pdl \
          --output "$OUT/h100-vit1-r7.csv"
      done
    done
    for pdl in 0 1; do
      run 80 env TORCHINDUCTOR_ENABLE_PDL=$pdl $D infer --model llm_1b --batch-size 1 \
        --precision bf16-true --n-iters 5 --warmup-steps 2 --tag pdl=$pdl \
        --output "$OUT/h100-llm1-r7.csv"
    done
  elif [ "$part" = autotune ]; then
    run 150 env TORCHINDUCTOR_MAX_AUTOTUNE=1 $D infer --model vit --batch-size 1 \
      --precision bf16-mixed --compile --n-iters 1000 --tag autotune=1 \
      --output "$OUT/h100-vit1-autotune-r7.csv"
  elif [ "$part" = base ]; then
    run 40 $D infer --model vit --batch-size 1 --precision bf16-mixed --compile --n-iters 1000 \
      --tag autotune=0 --output "$OUT/h100-vit1-autotune-r7.csv"
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/show_rows.py "$OUT"/h100-*r7.csv
