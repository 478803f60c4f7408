#!/usr/bin/env bash
# H100 calls of round five; the arguments pick the parts (`jpeg`, `latency`), the log goes to
# $OUT/round5.log. stage (issue 27): the probes of where a GPU-decoded batch's time goes.
# jpeg (issue 27): 12,000 JPEGs of 500x375 (quality 90), the probe (where a
# GPU-decoded batch's time goes), resnet50 bs256 bf16 training synthetic / --decode gpu at 8
# workers, twice each, the GPU loader alone, CPU decode once. latency (issue 23): the three
# batch-1 rows short of 90 % GPU busy when eager, compiled (graphs as in the plan).
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
log_to "round5.log"
for part in "$@"; do
  if [ "$part" = jpeg ]; then
    jpeg_images
    run 30 python3 benchmarks/jpeg_probe.py "$IMG"
    T="--model resnet50 --batch-size 256 --precision bf16-mixed --n-iters ${ITERS:-30} --warmup-steps 5"
    J="$OUT/h100-jpeg-r5.csv"
    for _ in 1 2; do
      run 40 $D train $T --output "$J"
      run 50 $D train $T --data "folder:$IMG" --workers 8 --decode gpu --output "$J"
    done
    run 30 $D data "$IMG" --model resnet50 --batch-size 256 --workers 8 --decode gpu \
      --min-time 4 --output "$OUT/h100-jpeg-loader-r5.csv"
    run 50 $D train $T --data "folder:$IMG" --workers 8 --output "$J"
  elif [ "$part" = stage ]; then  # where the staging thread's time goes beside training
    jpeg_images
    run 30 python3 benchmarks/jpeg_probe.py "$IMG"
    run 60 python3 benchmarks/nvjpeg_probe.py "$IMG"
    run 90 python3 benchmarks/jpeg_stage_probe.py "$IMG" 8
  elif [ "$part" = latency ]; then
    L="--batch-size 1 --precision bf16-mixed --n-iters 1000 --warmup-steps 10 --compile"
    C="$OUT/h100-latency-compiled-r5.csv"
    run 60 $D infer --model distilbert --seq-len 128 $L --output "$C"
    run 60 $D infer --model vit $L --output "$C"
    run 80 $D infer --model resnet50 $L --output "$C"
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/show_rows.py "$OUT"/h100-*r5.csv
