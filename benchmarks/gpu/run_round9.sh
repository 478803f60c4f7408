#!/usr/bin/env bash
# GPU calls of round nine (one H100 or H200); the arguments pick the parts, rows and logs go to
# $OUT, named after the GPU (h100 or h200).
# llm (issue 24): the decode rows through the CLI (LLM_ROWS: comma-separated 'model batch',
#   default llm_1b 1, llm_8b 1, llm_1b 32), bf16, prompt 128, 128 new tokens.
# train (issue 24): llm_1b training, seq 2048, AdamW, bf16-mixed, compiled, at each batch of
#   TRAIN_BATCHES (default 4 8).
# decode (issue 24): benchmarks/decode_profile.py variants (VARIANTS, default product).
# probe: what this torch's inductor does with Triton launch options (PDL).
set -uo pipefail
BUDGET_S=${BUDGET_S:-585}
source "$(dirname "$0")/budget.sh"
gpu_log round9.log
for part in "$@"; do
  if [ "$part" = llm ]; then
    IFS=, read -ra specs <<< "${LLM_ROWS:-llm_1b 1,llm_8b 1,llm_1b 32}"
    for spec in "${specs[@]}"; do
      set -- $spec
      run 120 $D infer --model "$1" --batch-size "$2" --precision bf16-true --prompt-len 128 \
        --new-tokens 128 --n-iters 5 --warmup-steps 2 --output "$OUT/$GPU-llm-r9.csv"
    done
  elif [ "$part" = train ]; then
    for batch in ${TRAIN_BATCHES:-4 8}; do
      run 110 $D train --model llm_1b --batch-size "$batch" --seq-len 2048 \
        --precision bf16-mixed --compile --n-iters 20 --warmup-steps 5 \
        --output "$OUT/$GPU-llm-train-r9.csv"
    done
  elif [ "$part" = decode ]; then
    run 120 python3 benchmarks/decode_profile.py --model llm_1b --batch-size 1 \
      --variants "${VARIANTS:-product}" > "$OUT/$GPU-decode-profile-r9.txt" 2>&1
    grep -E "^(==|GEMV|error)" "$OUT/$GPU-decode-profile-r9.txt"
  elif [ "$part" = probe ]; then
    python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
    T=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__))")
    grep -n "enable_pdl =\|backend_option_candidates\|launch_pdl" \
      "$T/_inductor/config.py" "$T/_inductor/codegen/wrapper.py" \
      "$T/_higher_order_ops/triton_kernel_wrap.py" | head -20
  fi
done
echo "all done: $(( $(date +%s) - t0 )) s"
ls "$OUT"/*.csv > /dev/null 2>&1 && python3 benchmarks/gpu/show_rows.py "$OUT"/*.csv
