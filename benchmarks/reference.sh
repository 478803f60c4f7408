#!/usr/bin/env bash
# Regenerates every published reference figure on this machine's GPU, from one commit: what the
# GPU attains (dlbench peak; first, so that the default plan's rows carry mfu_attained), the
# default plan (throughput, batch-1 latency, llm_1b training and decode), the 8B decode,
# GPU-decode training against synthetic data, and the harness check (validate). Each part writes one CSV
# named by what it measured, as timm names its result files:
#   src/dlbench/published/<part>-<torch>-<cuda>-<gpu>.csv   e.g. default-pt2.11-cu13.0-h100-80gb-hbm3.csv
# A part that is cut short resumes where it stopped when run again (sweeps skip points with an ok
# row). `docs` (on any machine, once the CSVs are here) regenerates what is made from them: the
# README's table (benchmarks/readme_table.py) and the example report (benchmarks/example_report.sh);
# provenance: docs/reference.md. Every GPU setting is only read.
# `multi` is the reference of a host of several GPUs (4 here; run it where it is the point):
# peak on every GPU (the fleet check), `scaling` at 1, 2, 4 ... GPUs for resnet50, vit and
# llm_1b training beside a bare torch DDP loop under torchrun (benchmarks/bare_ddp.py) at the
# same counts, `validate` on every GPU, and one run of two torchrun launchers as two nodes of
# half the GPUs each; its CSVs are named multi-<what>-<torch>-<cuda>-<gpu>x<count>.csv.
# `validate` there checks DDP (resnet50, vit) and the sharded loop against a bare FSDP2 loop
# (llm_1b: two 8B models, the measured one and the bare one, do not fit one 80 GB GPU
# together); on a host of more than 2 GPUs both also run on 2 of them, the 2-GPU check.
# `fsdp`: llm_8b training sharded over every GPU (FSDP2) at 2,048 and 8,192 tokens (two of its
# shapes in fp8 too, the second also with the output head in float8).
# MULTI_PARTS (default: peak bare scaling validate nodes fsdp) and MULTI_MODELS (resnet50 vit
# llm_1b) run some of it, for a lease too short for all (a rerun of scaling skips the points it has).
# `fp8`: the fp8 plan (each point in bf16 and in fp8, compiled) and `validate` of fp8 training
# against a bare torchao loop (a GPU of compute capability 8.9 or newer).
# `serve`: the serve plan (dlbench serve under LoadGen): for resnet50, vit and distilbert the highest
# rate whose p99 meets MLPerf's bound (--find-qps), and resnet50 single stream and offline.
# `serve-llm`: the serve-llm plan (llm_1b in the three scenarios under MLPerf's token bounds,
# offline as memory allows; llm_8b offline in bf16 and fp8) and the serve-llm-batching plan
# (continuous against static batching on one grid of rates, three repeats) and llm_8b's serving
# frontier (offline at each concurrency from 1 to what memory holds), into one CSV.
# Usage: benchmarks/reference.sh [peak] [default] [decode] [jpeg] [validate] [fp8] [serve] [serve-llm] [multi] [docs]
#   (the eight single-GPU parts by default)
#   DLBENCH (default: python3 -m dlbench, from this tree)
#   REFERENCE_DIR (default results/reference): where the parts are written. Not the published
#   rows' own folder (src/dlbench/published), which every new row is held against: a part
#   written there would be held against itself as it grew. Copy a finished part there.
#   JPEG_DIR (where the JPEG set is made; default /tmp/dlbench-jpeg)
#   DRY_RUN=1: print each dlbench command instead of running it (tests/test_reference_script.py
#   parses every one with dlbench's own options)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=${PYTHONPATH:-src} PYTHONUNBUFFERED=1
read -r -a DLBENCH <<< "${DLBENCH:-python3 -m dlbench}"
OUT=${REFERENCE_DIR:-results/reference}
JPEG_DIR=${JPEG_DIR:-/tmp/dlbench-jpeg}
DRY_RUN=${DRY_RUN:-0}
PARTS=(peak default decode jpeg validate fp8 serve serve-llm multi docs)
usage="usage: $0 [peak] [default] [decode] [jpeg] [validate] [fp8] [serve] [serve-llm] [multi] [docs]"
for part in "$@"; do  # every part named is checked before anything runs
    [[ " ${PARTS[*]} " == *" $part "* ]] || { echo "$usage" >&2; exit 2; }
done
parts=("$@")
((${#parts[@]})) || parts=(peak default decode jpeg validate fp8 serve serve-llm)
gpu=dry-run software=dry-run gpus=4
if [[ $DRY_RUN != 1 && " ${parts[*]} " != " docs " ]]; then  # docs alone needs no GPU
    python3 src/dlbench/provenance.py --check || exit 2  # a part names one commit, clean
    command -v nvidia-smi > /dev/null || {
        echo "error: benchmarks/reference.sh measures NVIDIA GPUs, and this machine has no nvidia-smi" >&2
        exit 2
    }
    mkdir -p "$OUT"  # only once the code and the machine can make a part
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr 'A-Z ' 'a-z-' | sed 's/^nvidia-//')
    gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
    software=$(python3 -c 'import torch; v = torch.__version__.split("+")[0].rsplit(".", 1)[0]; print(f"pt{v}-cu{torch.version.cuda}")')
fi
csv() { echo "$OUT/$1-$software-$gpu.csv"; }
failed=()  # a command that fails is named at the end; the others still run (their rows count)
run() {
    echo "+ dlbench $*" >&2
    local code=0
    [[ $DRY_RUN == 1 ]] || "${DLBENCH[@]}" "$@" || code=$?
    ((code == 0 || code == 3)) || failed+=("dlbench $1 ($code)")  # 3: did not fit, an oom row
}
launch() {  # torchrun, with NVLink multicast off (a lent host's rule; docs/clusters.md)
    echo "+ torchrun $*" >&2
    [[ $DRY_RUN == 1 ]] || NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} python3 -m torch.distributed.run "$@" \
        || failed+=("torchrun ($?)")
}

peak() {  # matmul per dtype, memory, host copies: what MFU against the attained peak divides by
    run peak --max-time 60 --output "$(csv peak)"
}

default() {  # its launch-bound points in three processes each (docs/decisions.md)
    run sweep default --processes 3 --output "$(csv default)"
}

decode() {  # the 8B model at batch 1: decode reads its 16 GB of weights per token
    run infer --model llm_8b --batch-size 1 --precision bf16-true --prompt-len 128 \
        --new-tokens 128 --n-iters 12 --warmup-steps 2 --output "$(csv decode)"
}

jpeg() {  # 12,000 JPEGs of 500x375 at q90, made here; resnet50 fed by them against synthetic
    [[ -d $JPEG_DIR/images && $DRY_RUN != 1 ]] || run make-data "$JPEG_DIR" --images 12000 --size 500x375 --quality 90
    # 240 steps: five passes over the set (47 batches each), so that a loader that falls behind
    # waits in proportion to a whole pass, not in one lucky or unlucky stretch (docs/input-pipelines.md)
    local common=(--model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 240
        --warmup-steps 5 --output "$(csv jpeg)")
    run train "${common[@]}"
    run train "${common[@]}" --data "folder:$JPEG_DIR/images" --workers 8 --decode gpu
    run train "${common[@]}" --data "folder:$JPEG_DIR/images" --workers 8 --decode cpu
    run data "$JPEG_DIR/images" --model resnet50 --batch-size 256 --workers 8 --decode gpu \
        --output "$(csv jpeg-loader)"
}

validate() {  # the harness against a hand-written loop on the same inputs
    run validate --model resnet50 --batch-size 256 --precision bf16-mixed --repeats 3 \
        --output "$(csv validate)"
    run validate --model vit --batch-size 256 --precision bf16-mixed --repeats 3 \
        --output "$(csv validate)"
}

fp8() {  # where FP8 pays on this GPU, and the harness with torchao's float8 training
    run sweep fp8 --output "$(csv fp8)"
    run validate --model llm_1b --seq-len 2048 --batch-size 4 --precision fp8 --compile \
        --repeats 3 --n-iters 20 --output "$(csv validate)"
}

serve() {  # requests a second under a p99 bound, beside offline throughput and batch-1 latency
    run sweep serve --output "$(csv serve)"  # the packaged plan: resnet50, vit, distilbert
}

serve_llm() {  # an LLM's tokens a second by memory, its edge under its bounds, static beside
    run sweep serve-llm --output "$(csv serve-llm)"
    run sweep serve-llm-batching --output "$(csv serve-llm)"
    run serve --model llm_8b --scenario offline --prompt-len 128 --new-tokens 128 \
        --sweep-concurrency --output "$(csv serve-llm)"  # the serving frontier, 1 to by memory
}

multi() {  # a host of several GPUs: is each GPU right, and is dlbench's DDP a bare loop's?
    export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
    local mcsv counts=1 half=$((gpus / 2)) port=${MULTI_PORT:-29512}
    local want=" ${MULTI_PARTS:-peak bare scaling validate nodes fsdp} " models=" ${MULTI_MODELS:-resnet50 vit llm_1b} "
    mcsv() { echo "$OUT/multi-$1-$software-${gpu}x$gpus.csv"; }
    for ((k = 2; k <= gpus; k *= 2)); do counts+=",$k"; done
    [[ $want != *" peak "* ]] || run peak --max-time 10 --output "$(mcsv peak)"
    if [[ $want == *" bare "* ]]; then  # the yardstick at each count: plain torch DDP, timm's models
        for k in ${counts//,/ }; do
            launch --standalone --nproc-per-node "$k" benchmarks/bare_ddp.py \
                --model resnet50,vit_base_patch16_224 --output "$(mcsv bare-ddp)"
        done
    fi
    if [[ $want == *" scaling "* ]]; then
        # 100 measured steps at least, as the bare loop times: DDP's slow steps weigh alike in both
        local image=(--batch-size 256 --precision bf16-mixed --devices "$counts" --n-iters 100
            --output "$(mcsv scaling)")
        [[ $models != *" resnet50 "* ]] || run scaling --model resnet50 "${image[@]}"
        [[ $models != *" vit "* ]] || run scaling --model vit --optimizer sgd "${image[@]}"  # the bare loop's
        [[ $models != *" llm_1b "* ]] || run scaling --model llm_1b --batch-size 4 --seq-len 2048 \
            --precision bf16-mixed --devices "$counts" --output "$(mcsv scaling)"  # the plan's
    fi
    local pair=()  # on a host of more than two, the 2-GPU harness check too (DDP, FSDP)
    ((gpus <= 2)) || pair=(2)
    if [[ $want == *" validate "* ]]; then  # the harness checks: DDP, then the sharded loop
        for model in resnet50 vit; do
            run validate --model "$model" --batch-size 256 --precision bf16-mixed --devices "$gpus" \
                --repeats 3 --n-iters 40 --output "$(mcsv validate)"
        done
        for k in "${pair[@]}"; do
            run validate --model resnet50 --batch-size 256 --precision bf16-mixed --devices "$k" \
                --repeats 3 --n-iters 40 --output "$(mcsv validate)"
        done
        for k in "$gpus" "${pair[@]}"; do  # llm_1b: an 8B model, measured and bare, fits no GPU
            run validate --model llm_1b --seq-len 2048 --batch-size 4 --repeats 3 --n-iters 20 \
                --precision bf16-mixed --compile --strategy fsdp --devices "$k" --output "$(mcsv fsdp)"
        done
    fi
    if [[ $want == *" fsdp "* ]]; then  # sharded training: what the node gives an 8B model
        local fsdp=(--precision bf16-mixed --compile --strategy fsdp --devices "$gpus" --output "$(mcsv fsdp)")
        run train --model llm_8b --seq-len 2048 --batch-size 2 "${fsdp[@]}"
        run train --model llm_8b --seq-len 2048 --batch-size 4 --activation-checkpointing selective "${fsdp[@]}"
        run train --model llm_8b --seq-len 8192 --batch-size 1 --activation-checkpointing selective "${fsdp[@]}"
        run train --model llm_8b --seq-len 8192 --batch-size 2 --activation-checkpointing full "${fsdp[@]}"
        # FP8 beside bf16 at the first and third shapes (the third torchtitan's: 8,192 tokens,
        # selective checkpointing): float8 all-gather of the weights (tensorwise)
        run train --model llm_8b --seq-len 2048 --batch-size 2 "${fsdp[@]/bf16-mixed/fp8}"
        run train --model llm_8b --seq-len 8192 --batch-size 1 --activation-checkpointing selective \
            "${fsdp[@]/bf16-mixed/fp8}"
        # and the third shape with the output head's GEMMs in float8 too (the loss's)
        run train --model llm_8b --seq-len 8192 --batch-size 1 --activation-checkpointing selective \
            --fp8-recipe tensorwise_with_head "${fsdp[@]/bf16-mixed/fp8}"
    fi
    [[ $want == *" nodes "* ]] || return 0
    # two launchers on this host as two nodes of half the GPUs each (one row, world size $gpus)
    local nodes=(--nnodes 2 --nproc-per-node "$half" --rdzv-backend c10d
        --rdzv-endpoint "localhost:$port" --rdzv-id dlbench-multi -m dlbench train
        --model resnet50 --batch-size 256 --precision bf16-mixed --devices "$half" --num-nodes 2
        --output "$(mcsv nodes)")
    local visible_first visible_second
    visible_first=$(seq -s, 0 $((half - 1))) visible_second=$(seq -s, "$half" $((gpus - 1)))
    CUDA_VISIBLE_DEVICES=$visible_first launch "${nodes[@]}" &
    local first=$!
    CUDA_VISIBLE_DEVICES=$visible_second launch "${nodes[@]}"
    wait "$first" || failed+=("the first launcher ($?)")
}

docs() {  # what is made from the CSVs: the README's table and the example report
    echo "+ python3 benchmarks/readme_table.py --write" >&2
    [[ $DRY_RUN == 1 ]] || python3 benchmarks/readme_table.py --write
    echo "+ bash benchmarks/example_report.sh" >&2
    [[ $DRY_RUN == 1 ]] || bash benchmarks/example_report.sh
}

for part in "${parts[@]}"; do
    "${part//-/_}"
done
if ((${#failed[@]})); then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi
