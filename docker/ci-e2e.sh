#!/usr/bin/env bash
# The end-to-end tests (pytest -m e2e): each drives many dlbench processes (a sweep and its
# worker, a signal mid-run, DDP ranks on gloo, loader workers, the documented command lines,
# bad input through every layer) and takes 12 s or more on CI's 2 cores; and the slow ones
# (-m slow: full-size models, inductor's compiles, Triton's interpreter, 6 s or more each). They
# run here, after the unit suite (README's test command, under 6 minutes), not inside it.
# Usage: docker/ci-e2e.sh     PYTHON (default .venv/bin/python)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
started=$(date +%s)
cd "$ROOT"
# the report is tested in a real browser (tests/analysis/test_report_browser.py): Debian's
# chromium, installed here where missing; its screenshots are kept for CI's artifacts
if ! command -v chromium > /dev/null; then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium
fi
export DLBENCH_ARTIFACTS=${DLBENCH_ARTIFACTS:-$ROOT/results/ci-artifacts}
"$PYTHON" -m pytest -q -m "e2e or slow" -p no:cacheprovider
echo "[ci-e2e $(( $(date +%s) - started )) s] done"
