#!/usr/bin/env bash
# GPU calls of round twelve (one H100 or H200); the arguments pick the parts, rows and logs go to
# $OUT, named after the GPU (h100 or h200).
# contention (issue 27): benchmarks/nvjpeg_contention_probe.py, nvJPEG's decode in a thread
#   beside a bare resnet50 step: eager or graph, legacy or own stream, RGBI or YUV output.
# stretch (issue 27): benchmarks/jpeg_stretch_probe.py with the VARIANTS given.
# trace (issue 27): benchmarks/jpeg_trace_probe.py on synthetic and GPU-decode training.
# process (issue 27): benchmarks/nvjpeg_process_probe.py, the decode in a process of its own.
# jpeg (issue 27): the issue's rows (budget.sh jpeg_rows), REPEATS pairs.
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
gpu_log round12.log
for part in "$@"; do
  if [ "$part" = contention ]; then
    jpeg_images
    run 150 python3 benchmarks/nvjpeg_contention_probe.py "$IMG"
  elif [ "$part" = process ]; then
    jpeg_images
    run 150 python3 benchmarks/nvjpeg_process_probe.py "$IMG"
  elif [ "$part" = stretch ]; then
    jpeg_images
    run 200 python3 benchmarks/jpeg_stretch_probe.py "$IMG" "$OUT/$GPU-jpeg-stretch-r12.csv" \
      ${VARIANTS:-synthetic gpu cached gpu cached} 2>&1 | grep -vE "[┃┏┡│└━─┗┛┓]|^$"
  elif [ "$part" = trace ]; then
    jpeg_images
    run 120 python3 benchmarks/jpeg_trace_probe.py "$IMG" "$OUT/$GPU-jpeg-trace-r12.csv" \
      synthetic gpu 2>&1 | grep -vE "[┃┏┡│└━─┗┛┓]|^$"
  elif [ "$part" = jpeg ]; then
    jpeg_rows r12
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
ls "$OUT"/*.csv > /dev/null 2>&1 && python3 benchmarks/gpu/show_rows.py "$OUT"/*.csv
