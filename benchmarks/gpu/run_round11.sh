#!/usr/bin/env bash
# GPU calls of round eleven (one H100 or H200); the arguments pick the parts, rows and logs go to
# $OUT, named after the GPU (h100 or h200).
# stretch (issue 27): benchmarks/jpeg_stretch_probe.py on the 12,000 JPEGs of 500x375 q90 with
#   the VARIANTS given (default: synthetic, then gpu and torchvision alternating).
# engines (issue 27): benchmarks/nvjpeg_engine_probe.py, the direct nvJPEG call against
#   torchvision's on the same set.
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
gpu_log round11.log
for part in "$@"; do
  if [ "$part" = stretch ]; then
    jpeg_images
    run 200 python3 benchmarks/jpeg_stretch_probe.py "$IMG" "$OUT/$GPU-jpeg-stretch-r11.csv" \
      ${VARIANTS:-synthetic gpu torchvision gpu torchvision} 2>&1 | grep -vE "[┃┏┡│└━─┗┛┓]|^$"
  elif [ "$part" = engines ]; then
    jpeg_images
    run 60 python3 benchmarks/nvjpeg_engine_probe.py "$IMG"
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
