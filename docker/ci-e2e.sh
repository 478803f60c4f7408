#!/usr/bin/env bash
# The end-to-end tests (pytest -m e2e): each drives many dlbench processes (a sweep and its
# worker, a signal mid-run, DDP ranks on gloo, loader workers, the documented command lines,
# bad input through every layer) and takes 12 s or more on CI's 2 cores, so they run here,
# after the unit suite (README's test command, under 10 minutes), not inside it.
# Usage: docker/ci-e2e.sh     PYTHON (default .venv/bin/python)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
started=$(date +%s)
cd "$ROOT"
"$PYTHON" -m pytest -q -m e2e -p no:cacheprovider
echo "[ci-e2e $(( $(date +%s) - started )) s] done"
