#!/usr/bin/env bash
# GPU call for issue 12 (one H100): decode paths, the 1B and 8B at batch 1 and 32, and a decode
# profile. Run from the repository root on the device machine; results land in $OUT.
set -uo pipefail
export PYTHONPATH="src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
D="python3 -m dlbench"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv
python3 -c "import torch,timm,transformers,lightning; print(torch.__version__, timm.__version__, transformers.__version__, lightning.__version__)"
t0=$(date +%s)
G="--precision bf16-true --prompt-len 128 --new-tokens 128 --n-iters 5 --warmup-steps 2 --output $OUT/h100-llm.csv"
timeout 140 $D infer --model llm_1b --batch-size 1 $G
echo "llm_1b bs1 compiled+graph: $(( $(date +%s) - t0 )) s"
timeout 80 python3 benchmarks/decode_profile.py --model llm_1b --batch-size 1 2>&1 | tee "$OUT/decode-profile.txt"
timeout 90 $D infer --model llm_1b --batch-size 32 $G
timeout 110 $D infer --model llm_8b --batch-size 1 $G
timeout 80 $D infer --model llm_8b --batch-size 32 $G
echo "compiled generation done: $(( $(date +%s) - t0 )) s"
timeout 50 $D infer --model llm_1b --batch-size 1 --no-compile --no-cuda-graphs $G
timeout 40 $D infer --model llm_1b --batch-size 1 --no-compile --cuda-graphs $G
echo "all done: $(( $(date +%s) - t0 )) s"
