#!/bin/sh
# Shared image step for all three Dockerfiles: install the given PyTorch build, then dlbench
# from /opt/dlbench, and prepare /workdir for any user id (`docker run --user $(id -u):$(id -g)`).
#   TORCH_PACKAGES  e.g. "torch==2.11.0 torchvision==0.26.0" (empty: keep the base image's torch)
#   TORCH_INDEX     the PyTorch wheel index for that build (cu128, cu118, rocm...)
#   EXTRAS          dlbench extras, e.g. "seg" or "seg,rocm"
set -eu
if [ -n "${TORCH_PACKAGES:-}" ]; then
    # shellcheck disable=SC2086  # a list of requirement specifiers
    python3 -m pip install --no-cache-dir --index-url "$TORCH_INDEX" $TORCH_PACKAGES
fi
python3 -m pip install --no-cache-dir "/opt/dlbench[${EXTRAS:-seg}]"
# uid 1000 is the image user (some bases, e.g. Ubuntu 24.04, already have one)
id 1000 > /dev/null 2>&1 || useradd --uid 1000 --create-home --shell /usr/sbin/nologin dlbench
mkdir -p /workdir/benchmarks
# Any uid may write here (the mounted ./benchmarks replaces it, owned by the host user).
chmod 1777 /workdir /workdir/benchmarks
dlbench --help > /dev/null
