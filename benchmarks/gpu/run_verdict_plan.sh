#!/usr/bin/env bash
# H100 call for issue 26 (and issue 23's plan time): the default plan with verdicts, idle
# baselines and energy above idle, one worker process, into a CSV that a second call can
# --resume (pass its path as $1; default $OUT/h100-default-verdict.csv). The plan's wall time is
# printed at the end when it finished inside the call.
set -uo pipefail
BUDGET_S=${BUDGET_S:-560}
source "$(dirname "$0")/budget.sh"
carry_wheels
CSV=${1:-$OUT/h100-default-verdict.csv}
began=$(date +%s)
run 30 $D sweep default --resume --output "$CSV"
echo "plan wall time in this call: $(( $(date +%s) - began )) s"
[ "$CSV" = "$OUT/h100-default-verdict.csv" ] || cp "$CSV" "$OUT/"
