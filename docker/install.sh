#!/bin/sh
# Shared image steps of all three Dockerfiles, in two layers so that torch (the big one) stays
# cached while only dlbench changes:
#   dlbench-install torch   a venv at /opt/venv (it sees the base image's packages, so a base
#                           that ships torch, like ROCm's, keeps it), then TORCH_PACKAGES
#   dlbench-install app     dlbench from /opt/dlbench with EXTRAS (and the DLBENCH_COMMIT it was
#                           built from), the image user, /workdir
# A venv installs on every base, also where the system Python refuses pip (PEP 668: Debian,
# Ubuntu 24.04). Variables: TORCH_PACKAGES (e.g. "torch==2.11.0 torchvision==0.26.0"; empty:
# keep the base's torch), TORCH_INDEX (the wheel index for that build; empty: pip's configured
# index), EXTRAS (e.g. "seg", "seg,fp8" or "seg,rocm").
set -eu
case "${1:-}" in
torch)
    python3 -m venv --system-site-packages /opt/venv
    if [ -n "${TORCH_PACKAGES:-}" ]; then
        index=""
        [ -n "${TORCH_INDEX:-}" ] && index="--index-url $TORCH_INDEX"
        # shellcheck disable=SC2086  # lists of options and requirement specifiers
        /opt/venv/bin/pip install --no-cache-dir $index $TORCH_PACKAGES
    fi
    ;;
app)
    # The copy has no .git: the build's commit goes into the package (dlbench.provenance)
    printf '{"commit": "%s", "dirty": %s}\n' "${DLBENCH_COMMIT:-unknown}" "${DLBENCH_DIRTY:-null}" \
        > /opt/dlbench/src/dlbench/BUILD_INFO.json
    # the fp8 extra takes torchao at the version constraints.txt pins (the one measured)
    pins=""
    case ",${EXTRAS:-seg}," in *,fp8,*) pins=$(grep -E '^torchao==' /opt/dlbench/constraints.txt) ;; esac
    # shellcheck disable=SC2086  # an empty pin adds nothing
    /opt/venv/bin/pip install --no-cache-dir "/opt/dlbench[${EXTRAS:-seg}]" $pins
    rm -rf /opt/dlbench/build
    # uid 1000 is the image user (some bases, e.g. Ubuntu 24.04, already have one)
    id 1000 > /dev/null 2>&1 || useradd --uid 1000 --create-home --shell /usr/sbin/nologin dlbench
    mkdir -p /workdir/results
    # Any uid may write here (the mounted ./results replaces it, owned by the host user).
    chmod 1777 /workdir /workdir/results
    dlbench --help > /dev/null
    ;;
*)
    echo "usage: dlbench-install torch|app" >&2
    exit 2
    ;;
esac
