#!/usr/bin/env bash
# H100 calls of round eight; the arguments pick the parts, the log goes to $OUT/round8.log.
# decode (issue 24): llm_1b batch-1 decode step variants in one process
#   (benchmarks/decode_profile.py: the Triton GEMV against torch's matmul,
#   coordinate-descent tuning off), VARIANTS overrides the list; SWEEP=1 also times every GEMV
#   launch shape per weight shape.
# llm (issue 24): the decode rows through the CLI, as the plan runs them (LLM_ROWS: a comma-
#   separated list of 'model batch', default llm_1b 1, llm_1b 32, llm_8b 1).
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
log_to "round8.log"
for part in "$@"; do
  if [ "$part" = decode ]; then
    run 120 python3 benchmarks/decode_profile.py --model llm_1b --batch-size 1 \
      --variants "${VARIANTS:-product,linear,nocdt}" ${SWEEP:+--gemv-sweep}
  elif [ "$part" = llm ]; then
    IFS=, read -ra specs <<< "${LLM_ROWS:-llm_1b 1,llm_1b 32,llm_8b 1}"
    for spec in "${specs[@]}"; do
      set -- $spec
      run 120 $D infer --model "$1" --batch-size "$2" --precision bf16-true --n-iters 5 \
        --warmup-steps 2 --output "$OUT/h100-llm-r8.csv"
    done
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
ls "$OUT"/*.csv > /dev/null 2>&1 && python3 benchmarks/gpu/show_rows.py "$OUT"/*.csv
