#!/usr/bin/env bash
# GPU call for issue 27 (one H100, 16 host cores): 12,000 JPEGs of 500x375 (quality 90), where a
# GPU-decoded batch's time goes, resnet50 bs256 bf16 training synthetic / --decode gpu / CPU
# decode at 8 workers, and the loader alone both ways. Rows go to $OUT.
set -uo pipefail
source "$(dirname "$0")/budget.sh"
jpeg_images
du -sh "$IMG"
run 30 python3 benchmarks/jpeg_probe.py "$IMG" 2>&1 | grep -v -i warn
T="--model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 30 --warmup-steps 5"
run 40 $D train $T --output "$OUT/h100-jpeg.csv"
run 50 $D train $T --data "folder:$IMG" --workers 8 --decode gpu --output "$OUT/h100-jpeg.csv"
run 30 $D data "$IMG" --model resnet50 --batch-size 256 --workers 4,8 --decode gpu --min-time 4 \
  --output "$OUT/h100-jpeg-loader.csv"
run 50 $D train $T --data "folder:$IMG" --workers 8 --output "$OUT/h100-jpeg.csv"
run 30 $D data "$IMG" --model resnet50 --batch-size 256 --workers 8 --min-time 4 \
  --output "$OUT/h100-jpeg-loader.csv"
run 50 $D train $T --data "folder:$IMG" --workers 4 --decode gpu --output "$OUT/h100-jpeg.csv"
run 50 $D train $T --data "folder:$IMG" --workers 8 --decode gpu --cuda-graphs \
  --output "$OUT/h100-jpeg-graphs.csv"
echo "all done: $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/show_rows.py "$OUT"/h100-jpeg*.csv
