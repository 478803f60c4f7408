#!/usr/bin/env bash
# The performance regression gate, as the GPU workflow (.github/workflows/gpu.yml) runs it and as
# a developer runs it on a lent GPU from this tree.
# With BASE and HEAD (a pull request): `dlbench gate` measures each point of the plan on both
# sides, interleaved, ROUNDS times, on this GPU, and judges each configuration same, faster,
# slower or inconclusive (exit 1 where slower or a side failed it, 5 where only inconclusive).
# Without them (a push): the plan measured once, compared with BASELINE_CSV or, none given, with
# the published rows of this GPU model. Either way the Markdown goes to SUMMARY and a report of
# everything in RESULTS is made.
# Usage: docker/regression-gate.sh [BASELINE_CSV]
#   DLBENCH    how to run dlbench here, the gate's own process (default: python3 -m dlbench)
#   BASE, HEAD each side's dlbench command, e.g. docker run -i ... dlbench:base (both or
#              neither; -i keeps the side's worker container fed with runs)
#   ROUNDS     rounds of the gate (default: dlbench gate's)
#   RESULTS    folder for the rows and the report (default: results; a side's container must
#              mount it at the same relative path, as the workflow does)
#   PLAN       the plan, a name or a YAML file (default: quick, the CPU plan; a GPU runner: ci)
#   THRESHOLD  % (default: 5)
#   ONLY       KEY=VALUE: only the plan's runs with this tag (e.g. purpose=latency)
#   SUMMARY    file the comparison's Markdown is appended to (the workflow's step summary)
#   INCONCLUSIVE_FAILS=1  an inconclusive gate fails the job (default: a warning, exit 0)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=${PYTHONPATH:-src}
read -r -a dlbench <<< "${DLBENCH:-python3 -m dlbench}"
results=${RESULTS:-results}
plan=${PLAN:-quick}
only=()
[[ -z ${ONLY:-} ]] || only=(--only "$ONLY")
mkdir -p "$results"
status=0
if [[ -n ${BASE:-} || -n ${HEAD:-} ]]; then
    [[ -n ${BASE:-} && -n ${HEAD:-} ]] || { echo "error: BASE and HEAD: give both" >&2; exit 2; }
    "${dlbench[@]}" gate "$plan" --base "$BASE" --head "$HEAD" ${ROUNDS:+--rounds "$ROUNDS"} \
        "${only[@]}" --threshold "${THRESHOLD:-5}" --output "$results/gate.csv" --markdown \
        > "$results/compare.md" || status=$?
else
    rows=$results/$(basename "${plan%.y*ml}").csv  # quick -> results/quick.csv
    "${dlbench[@]}" sweep "$plan" "${only[@]}" --output "$rows" || status=$?
    "${dlbench[@]}" compare ${1:+"$1"} "$rows" --threshold "${THRESHOLD:-5}" \
        --markdown > "$results/compare.md" || status=$?
fi
cat "$results/compare.md"
[[ -z ${SUMMARY:-} ]] || cat "$results/compare.md" >> "$SUMMARY"
"${dlbench[@]}" report "$results" --out "$results/report" || status=$?
if ((status == 5)); then  # dlbench's EXIT_INCONCLUSIVE: nothing slower, something it cannot tell
    echo "::warning::dlbench: inconclusive (see the step summary for how much to measure again)"
    [[ ${INCONCLUSIVE_FAILS:-0} == 1 ]] && exit 1
    exit 0
fi
exit "$status"
