#!/usr/bin/env bash
# The example report from the committed reference rows (HTML, Markdown, figures, PDF), built into
# REPORT_DIR (results/example-report, not committed), and its screenshot, the one generated file
# the docs keep (docs/report-screenshot.png), where headless chromium is installed. Run by
# `benchmarks/reference.sh docs`. Prices are examples, not quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
REPORT_DIR=${REPORT_DIR:-results/example-report}
PYTHON=${PYTHON:-python3}
rm -rf "$REPORT_DIR"
shopt -s extglob  # the single-GPU reference: the several-GPU one has its own README table
PYTHONPATH=${PYTHONPATH:-src} "$PYTHON" -m dlbench report src/dlbench/published/!(multi-*).csv --baseline H100 \
  --usd-per-hour "NVIDIA H100 80GB HBM3=3.00" --usd-per-hour "NVIDIA H200=4.00" \
  --pdf -o "$REPORT_DIR"
if [[ ${SCREENSHOT:-1} == 1 ]] && command -v chromium > /dev/null; then
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1800 \
    --screenshot=docs/report-screenshot.png "file://$PWD/$REPORT_DIR/report.html" 2>/dev/null
else
  echo "docs/report-screenshot.png not rebuilt (chromium not installed, or SCREENSHOT=0)"
fi
