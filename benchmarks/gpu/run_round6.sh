#!/usr/bin/env bash
# H100 calls of round six; the arguments pick the parts, the log goes to $OUT/round6.log.
# ahead (issue 27): GPU-decode training (12,000 JPEGs of 500x375, q90; resnet50 bs256 bf16, 8
# workers) at several staged-queue depths, alternating with the synthetic row, in one process.
# warmup (issue 23's plan time): first-step time and throughput of the plan's slowest warm-ups
# with cuDNN's benchmark limit at PyTorch's default (10) and at 3, and llm_1b decode at batch 32
# with and without inductor's coordinate-descent tuning. connections: `ahead` with
# CUDA_DEVICE_MAX_CONNECTIONS=32 (nvJPEG's stream on a hardware queue of its own). cdt1: llm_1b
# decode at batch 1 with and without the tuning. jpeg: issue 27's rows as the code stands (the
# probe's checks, 5 x synthetic / GPU decode in one process, the GPU loader, CPU decode).
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
log_to "round6.log"
P="python3 benchmarks/warmup_probe.py"
for part in "$@"; do
  if [ "$part" = ahead ]; then
    jpeg_images
    run 150 python3 benchmarks/jpeg_ahead_probe.py "$IMG" "$OUT/h100-jpeg-ahead-r6.csv" \
      ${AHEAD:-3 8}
  elif [ "$part" = warmup ]; then
    W="$OUT/h100-warmup-r6.csv"
    for limit in 10 3; do
      run 70 $P $limit on train --model mobilenet_v3 --batch-size 512 --precision bf16-mixed \
        --tag cudnn_limit=$limit --output "$W"
      run 60 $P $limit on train --model efficientnet_v2 --batch-size 128 --precision bf16-mixed \
        --cuda-graphs --tag cudnn_limit=$limit --output "$W"
      run 45 $P $limit on train --model resnet50 --batch-size 256 --precision bf16-mixed \
        --tag cudnn_limit=$limit --output "$W"
    done
    for cdt in on off; do
      run 80 $P 10 $cdt infer --model llm_1b --batch-size 32 --precision bf16-true \
        --n-iters 5 --warmup-steps 2 --tag cdt=$cdt --output "$W"
    done
  elif [ "$part" = connections ]; then  # the same probe with 32 hardware work queues
    jpeg_images
    run 100 env CUDA_DEVICE_MAX_CONNECTIONS=32 python3 benchmarks/jpeg_ahead_probe.py \
      "$IMG" "$OUT/h100-jpeg-connections-r6.csv" ${AHEAD:-8}
  elif [ "$part" = jpeg ]; then  # the rows of issue 27 with the code as it stands
    jpeg_images
    run 40 python3 benchmarks/jpeg_probe.py "$IMG"
    REPEATS=${REPEATS:-5} run 200 python3 benchmarks/jpeg_ahead_probe.py "$IMG" \
      "$OUT/h100-jpeg-r6.csv" 8
    run 30 $D data "$IMG" --model resnet50 --batch-size 256 --workers 8 --decode gpu \
      --min-time 4 --output "$OUT/h100-jpeg-loader-r6.csv"
    run 50 $D train --model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 60 \
      --warmup-steps 5 --data "folder:$IMG" --workers 8 --output "$OUT/h100-jpeg-r6.csv"
  elif [ "$part" = vit1 ]; then  # vit batch 1 compiled, with and without the tuning, twice
    for _ in 1 2; do
      for cdt in on force; do
        run 40 $P 10 $cdt infer --model vit --batch-size 1 --precision bf16-mixed --compile \
          --n-iters 1000 --tag cdt=$cdt --output "$OUT/h100-vit1-r6.csv"
      done
    done
  elif [ "$part" = cdt1 ]; then  # llm_1b decode at batch 1 with and without the tuning
    for cdt in on off; do
      run 80 $P 10 $cdt infer --model llm_1b --batch-size 1 --precision bf16-true \
        --n-iters 5 --warmup-steps 2 --tag cdt=$cdt --output "$OUT/h100-cdt1-r6.csv"
    done
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/show_rows.py "$OUT"/h100-*r6.csv
