#!/usr/bin/env bash
# Second GPU call (one H100): issue 11's validate ratios after the parity fix and the energy
# window; issue 12's LLM training with and without --compile, the 8B at batch 32, eager decode,
# and a max-autotune decode experiment. Commands run while enough of the 570 s budget is left.
set -uo pipefail
BUDGET_S=570
source "$(dirname "$0")/budget.sh"
V="--precision bf16-mixed --n-iters 50 --warmup-steps 10 --repeats 3 --output $OUT/h100-validate.csv"
run 40 $D validate --model resnet50 --mode train --batch-size 256 $V
run 30 $D validate --model resnet50 --mode infer --batch-size 256 $V
run 50 $D validate --model vit --mode train --batch-size 256 $V
run 30 $D validate --model vit --mode infer --batch-size 256 $V
run 40 $D infer --model resnet50 --batch-size 256 --precision bf16-mixed --output "$OUT/h100-energy.csv"
T="--precision bf16-mixed --seq-len 2048 --n-iters 20 --warmup-steps 5 --output $OUT/h100-llm.csv"
run 50 $D train --model llm_1b --batch-size 4 $T
run 110 $D train --model llm_1b --batch-size 4 --compile $T
G="--precision bf16-true --prompt-len 128 --new-tokens 128 --n-iters 5 --warmup-steps 2 --output $OUT/h100-llm.csv"
run 120 $D infer --model llm_8b --batch-size 32 $G
run 70 python3 benchmarks/decode_profile.py --model llm_1b --compile-mode max-autotune-no-cudagraphs
run 70 $D infer --model llm_1b --batch-size 1 --no-compile --no-cuda-graphs $G
run 90 $D validate --model mobilenet_v3 --mode train --batch-size 32 --precision bf16-mixed \
  --n-iters 200 --warmup-steps 30 --repeats 5 --output "$OUT/h100-validate.csv"
echo "all done: $(( $(date +%s) - t0 )) s"
