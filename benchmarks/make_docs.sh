#!/usr/bin/env bash
# Rebuild docs/report (HTML, Markdown, PNGs, PDF, PPTX) from the committed reference rows, the
# PDF's first page as docs/report-pdf-page1.png (pdftoppm) and the HTML's screenshot
# (headless chromium) where those tools are installed. Prices are examples, not quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
R=benchmarks/reference
rm -rf docs/report
PYTHONPATH=src .venv/bin/python -m dlbench report "$R/h100-default-verdict.csv" \
  "$R/h100-latency.csv" "$R/h200-latency.csv" "$R/h100-llm-native.csv" "$R/h200-llm-native.csv" \
  "$R/h100-jpeg-staged.csv" "$R/h100-jpeg-loader-staged.csv" "$R/h100-jpeg-side-stream.csv" \
  "$R/h100-jpeg-loader-side-stream.csv" "$R/h200x2-scaling.csv" \
  --timeline "$R/telemetry/h100-resnet50-train.csv" --baseline H100 \
  --usd-per-hour "NVIDIA H100 80GB HBM3=3.00" --usd-per-hour "NVIDIA H200=4.00" \
  --pdf --pptx -o docs/report
if command -v pdftoppm > /dev/null; then
  pdftoppm -png -r 80 -f 1 -l 1 -singlefile docs/report/report.pdf docs/report-pdf-page1
else
  echo "pdftoppm not installed: docs/report-pdf-page1.png not rebuilt"
fi
if command -v chromium > /dev/null; then
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1800 \
    --screenshot=docs/report-screenshot.png "file://$PWD/docs/report/report.html" 2>/dev/null
else
  echo "chromium not installed: docs/report-screenshot.png not rebuilt"
fi
