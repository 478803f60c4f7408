# Sourced by the GPU scripts: `run ESTIMATE_S COMMAND...` runs a command only while enough of
# the call's BUDGET_S (default 570 s) is left, cut at what is left, and logs its exit code;
# `log_to NAME` copies the rest of the call's output to $OUT/NAME; `carry_wheels` installs
# the wheels carried in .whl/ (segmentation-models-pytorch for unet, which the lent machine's
# image lacks) and puts them on PYTHONPATH; `gpu_log NAME_SUFFIX` names the GPU (h100 or h200)
# in $GPU, logs to $OUT/$GPU-NAME_SUFFIX and prints the GPU's name, driver and limits;
# `jpeg_images` makes issue 27's JPEG set once per machine and names its folder in $IMG;
# `jpeg_rows SUFFIX` measures issue 27's rows on it into $OUT/$GPU-jpeg[-loader]-SUFFIX.csv.
export PYTHONPATH="src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
D="python3 -m dlbench"
t0=$(date +%s)
run() {
  local need=$1; shift
  local left=$(( ${BUDGET_S:-570} - ($(date +%s) - t0) ))
  if (( left < need )); then echo "skipped (needs ${need} s, ${left} s left): $*"; return; fi
  timeout "$left" "$@"; local rc=$?
  echo "[$(( $(date +%s) - t0 )) s] exit $rc: $*"
}
carry_wheels() {
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
  fi
}
log_to() {
  exec > >(tee -a "$OUT/$1") 2>&1
}
gpu_log() {
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h100|h200' \
    | tr A-Z a-z)
  log_to "$GPU-$1"
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
}
jpeg_images() {  # issue 27's set in $IMG: 12,000 JPEGs of 500x375 q90, made once per machine
  IMG=/tmp/dlbench-jpeg/images
  [ -d "$IMG" ] || run 90 $D make-data /tmp/dlbench-jpeg --images 12000 --size 500x375 --quality 90
}
jpeg_rows() {  # the probe's checks, REPEATS (default 3) synthetic / --decode gpu pairs in one
  # process, the loader alone with GPU and CPU decode, and the CPU-decode training row
  jpeg_images
  run 40 python3 benchmarks/jpeg_probe.py "$IMG"
  REPEATS=${REPEATS:-3} run 220 python3 benchmarks/jpeg_ahead_probe.py "$IMG" \
    "$OUT/$GPU-jpeg-$1.csv" 8
  for decode in gpu cpu; do
    run 30 $D data "$IMG" --model resnet50 --batch-size 256 --workers 8 --decode $decode \
      --min-time 4 --output "$OUT/$GPU-jpeg-loader-$1.csv"
  done
  run 50 $D train --model resnet50 --batch-size 256 --precision bf16-mixed --n-iters 60 \
    --warmup-steps 5 --data "folder:$IMG" --workers 8 --output "$OUT/$GPU-jpeg-$1.csv"
}
