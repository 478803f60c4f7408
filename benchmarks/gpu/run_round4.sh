#!/usr/bin/env bash
# Second H100 call of round four (issues 23 and 27): the rest of the default plan ($1: the CSV the
# first call left, resumed), the graph and held-weight checks, then issue 27's rows: 12,000
# JPEGs of 500x375 (quality 90), where a GPU-decoded batch's time goes, resnet50 bs256 bf16
# training synthetic / --decode gpu / CPU decode at 8 workers, the GPU loader alone.
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
carry_wheels
if [ -n "${1:-}" ]; then
  began=$(date +%s)
  cp "$1" "$OUT/h100-default-r4.csv"
  run 30 $D sweep default --resume --output "$OUT/h100-default-r4.csv"
  echo "plan wall time in this call: $(( $(date +%s) - began )) s"
fi
run 60 python3 benchmarks/graph_check.py
jpeg_images
run 30 python3 benchmarks/jpeg_probe.py "$IMG" 2>&1 | grep -v -i warn
T="--model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 30 --warmup-steps 5"
J="$OUT/h100-jpeg-r4.csv"
run 40 $D train $T --output "$J"
run 50 $D train $T --data "folder:$IMG" --workers 8 --decode gpu --output "$J"
run 30 $D data "$IMG" --model resnet50 --batch-size 256 --workers 8 --decode gpu --min-time 4 \
  --output "$OUT/h100-jpeg-loader-r4.csv"
run 50 $D train $T --data "folder:$IMG" --workers 8 --output "$J"
echo "all done: $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/show_rows.py "$OUT"/h100-*r4.csv
