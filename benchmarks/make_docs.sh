#!/usr/bin/env bash
# Rebuild docs/report (HTML, Markdown, PNGs, PDF, PPTX) from the committed reference rows, the
# PDF's first page as docs/report-pdf-page1.png (pdftoppm) and the HTML's screenshot
# (headless chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
R=benchmarks/reference
rm -rf docs/report
PYTHONPATH=src .venv/bin/python -m dlbench report "$R/h100-default.csv" "$R/h100-llm.csv" \
  "$R/h200-llm.csv" "$R/h100-data.csv" "$R/h100-loader.csv" "$R/h200x2-scaling.csv" \
  --timeline "$R/telemetry/h100-resnet50-train.csv" --baseline H100 --pdf --pptx -o docs/report
pdftoppm -png -r 80 -f 1 -l 1 -singlefile docs/report/report.pdf docs/report-pdf-page1
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1800 \
  --screenshot=docs/report-screenshot.png "file://$PWD/docs/report/report.html" 2>/dev/null
