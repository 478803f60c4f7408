#!/usr/bin/env bash
# The performance regression gate, as the GPU workflow (.github/workflows/gpu.yml) runs it in
# the image and as a developer runs it on a lent GPU from this tree: the quick plan, a
# comparison with a baseline CSV measured on the same GPU model, or (none given) with the
# published rows of the runner's GPU (a slowdown beyond the threshold fails the gate), and the
# report of everything in RESULTS.
# Usage: docker/regression-gate.sh [BASELINE_CSV]
#   DLBENCH    how to run dlbench (default: python3 -m dlbench, from this tree; the workflow:
#              docker run ... IMAGE)
#   RESULTS    folder for the rows and the report (default: results)
#   PLAN       the plan, a name or a YAML file (default: quick)   THRESHOLD  % slowdown that fails (default: 5)
#   SUMMARY    file the comparison's Markdown is appended to (the workflow's step summary)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=${PYTHONPATH:-src}
read -r -a dlbench <<< "${DLBENCH:-python3 -m dlbench}"
results=${RESULTS:-results}
plan=${PLAN:-quick}
rows=$results/$(basename "${plan%.y*ml}").csv  # quick -> results/quick.csv
mkdir -p "$results"
status=0
"${dlbench[@]}" sweep "$plan" --output "$rows" || status=$?
"${dlbench[@]}" compare ${1:+"$1"} "$rows" --threshold "${THRESHOLD:-5}" \
    --markdown > "$results/compare.md" || status=$?
cat "$results/compare.md"
[[ -z ${SUMMARY:-} ]] || cat "$results/compare.md" >> "$SUMMARY"
"${dlbench[@]}" report "$results" --out "$results/report" || status=$?
exit "$status"
