#!/usr/bin/env bash
# GPU calls of round eleven (one H100 or H200); the arguments pick the parts, rows and logs go to
# $OUT, named after the GPU (h100 or h200).
# stretch (issue 27): benchmarks/jpeg_stretch_probe.py on the 12,000 JPEGs of 500x375 q90 with
#   the VARIANTS given (default: synthetic, then gpu and torchvision alternating).
# jpeg (issue 27): round ten's figures again: the probe's timings, REPEATS (default 3) pairs
#   of synthetic / --decode gpu rows in one process (resnet50 bs256 bf16-mixed, 8 workers, 60
#   steps), the loader alone with GPU and CPU decode, the CPU-decode training row.
# trace (issue 27): benchmarks/jpeg_trace_probe.py, a profiler trace of synthetic and GPU-decode
#   training: the step stream's kernel time and gaps, and what ran during the longest gaps.
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
  elif [ "$part" = jpeg ]; then
    jpeg_rows r11
  elif [ "$part" = trace ]; then
    jpeg_images
    run 120 python3 benchmarks/jpeg_trace_probe.py "$IMG" "$OUT/$GPU-jpeg-trace-r11.csv" \
      synthetic gpu gpu 2>&1 | grep -vE "[┃┏┡│└━─┗┛┓]|^$"
  elif [ "$part" = engines ]; then
    jpeg_images
    run 60 python3 benchmarks/nvjpeg_engine_probe.py "$IMG"
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
ls "$OUT"/*.csv > /dev/null 2>&1 && python3 benchmarks/gpu/show_rows.py "$OUT"/*.csv
