#!/usr/bin/env bash
# GPU call for issues 14 and 15 (one H100): resnet50 bs256 bf16 training from a generated
# 20k-image JPEG folder at 0/4/8/16 workers and with GPU decode, the loader alone at the same
# counts, the synthetic figure in the same session (with a telemetry log for the timeline);
# then --batch-size auto (fast probes + autotuned confirmation) and the mobilenet_v3 validate
# ratio. Commands run while enough of the 570 s budget is left; rows go to $OUT as they finish.
set -uo pipefail
source "$(dirname "$0")/budget.sh"
nproc; df -h /dev/shm | tail -1; python3 -c "import torchvision; print('torchvision', torchvision.__version__)"
IMAGES=/tmp/dlbench-data
run 60 $D make-data $IMAGES --images 20000 --size 224x224 --quality 90
IMG="$IMAGES/images"
du -sh "$IMG"
T="--model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 30 --warmup-steps 5"
run 40 $D train $T --telemetry-log "$OUT/h100-telemetry-log.csv" --output "$OUT/h100-data.csv"
run 60 $D data "$IMG" --model resnet50 --batch-size 256 --workers 0,4,8,16 --min-time 3 \
  --output "$OUT/h100-loader.csv"
for w in 16 8 4; do
  run 45 $D train $T --data "folder:$IMG" --workers $w --output "$OUT/h100-data.csv"
done
run 45 $D train $T --data "folder:$IMG" --workers 8 --decode gpu --output "$OUT/h100-data.csv"
run 30 $D data "$IMG" --model resnet50 --batch-size 256 --workers 8 --decode gpu --min-time 3 \
  --output "$OUT/h100-loader.csv"
run 110 $D train --model resnet50 --batch-size auto --precision bf16-mixed --output "$OUT/h100-auto.csv"
run 60 $D train $T --data "folder:$IMG" --workers 0 --n-iters 5 --warmup-steps 2 \
  --output "$OUT/h100-data.csv"
run 90 $D validate --model mobilenet_v3 --mode train --batch-size 32 --precision bf16-mixed \
  --n-iters 200 --warmup-steps 30 --repeats 5 --output "$OUT/h100-validate.csv"
echo "all done: $(( $(date +%s) - t0 )) s"
