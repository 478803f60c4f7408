#!/usr/bin/env bash
# First GPU call: evidence for issues 2, 3 and 4 (validate ratios, telemetry, text + MFU).
# Run from the repository root on the device machine; results land in $OUT.
set -uo pipefail
export PYTHONPATH="src:/tmp/site:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
D="python3 -m dlbench"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv
python3 -c "import torch,timm,transformers,lightning,segmentation_models_pytorch as s; print(torch.__version__, timm.__version__, transformers.__version__, lightning.__version__, s.__version__)"
V="--precision bf16-mixed --n-iters 50 --warmup-steps 10 --repeats 3 --output $OUT/validate.csv --json"
$D validate --model resnet50 --mode train --batch-size 256 $V
$D validate --model resnet50 --mode infer --batch-size 256 $V
$D validate --model vit --mode train --batch-size 256 $V
$D validate --model vit --mode infer --batch-size 256 $V
$D validate --model mobilenet_v3 --mode train --batch-size 32 $V
python3 benchmarks/telemetry_check.py | tee $OUT/telemetry.json
T="--output $OUT/text.csv"
$D train --model resnet50 --batch-size 256 --precision bf16-mixed --breakdown $T
$D train --model distilbert --batch-size 64 --seq-len 128 --precision bf16-mixed $T
$D infer --model distilbert --batch-size 64 --seq-len 128 --precision bf16-mixed $T
$D train --model llm_1b --batch-size 4 --seq-len 2048 --precision bf16-mixed --n-iters 20 --warmup-steps 5 $T
G="--precision bf16-true --prompt-len 128 --new-tokens 128 --n-iters 5 --warmup-steps 2 $T"
$D infer --model llm_1b --batch-size 1 $G
$D infer --model llm_1b --batch-size 32 $G
$D infer --model llm_8b --batch-size 1 $G
$D infer --model llm_8b --batch-size 32 $G
$D train --model llm_8b --batch-size 1 --seq-len 2048 --precision bf16-mixed --n-iters 5 --warmup-steps 1 $T
echo "exit code of the 8B training run (3 = out of memory, recorded): $?"
