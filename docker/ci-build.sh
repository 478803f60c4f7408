#!/usr/bin/env bash
# Build Dockerfile.cuda12 as dlbench:cuda12 without a Docker daemon and run it as a user would.
#
# podman, buildah and runc (Debian packages, installed here when missing) build and run OCI
# images as root without a daemon. As in a company CI behind a proxy, the base image is made
# locally (debootstrap of Debian bookworm with python3, imported once) and pip inside the build
# uses this machine's own pip configuration (written to one pip.conf, mounted read-only with the
# CA bundle and every local folder it names). The Dockerfile is not edited: only its build
# arguments BASE, TORCH_INDEX (empty: pip's configuration) and TORCH_PACKAGES change.
#
# Then the image tests (tests/image, pytest -m image) run the built image: train, inference, a
# two-point sweep and a report as a non-root user with --network none, the README's `docker
# run` lines with the engine swapped, compose's sweep and report services, and Dockerfiles
# broken on purpose, which this script must refuse.
#
# Storage (vfs: this machine has no overlay) and the base stay in $DLBENCH_CI_STATE, so a second
# run reuses the base and the torch layer.
# Usage: docker/ci-build.sh [--build-only | --smoke]    (--smoke: build, then one run)
#   DOCKERFILE (default Dockerfile.cuda12)   IMAGE (default dlbench:cuda12)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${DLBENCH_CI_STATE:-/var/tmp/dlbench-ci}
DOCKERFILE=${DOCKERFILE:-Dockerfile.cuda12}
IMAGE=${IMAGE:-dlbench:cuda12}
BASE_IMAGE=localhost/dlbench-base:bookworm
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
started=$(date +%s)
say() { echo "[ci-build $(( $(date +%s) - started )) s] $*"; }

install_tools() {
    local missing=()
    for tool in podman buildah runc debootstrap fuse-overlayfs; do
        command -v "$tool" > /dev/null || missing+=("$tool")
    done
    ((${#missing[@]} == 0)) && return
    say "installing ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq podman buildah runc debootstrap \
        fuse-overlayfs
}

configure_engine() {
    # Private configuration: nothing under /etc changes. Layers as diffs through fuse-overlayfs
    # (this VM's kernel has no overlay for containers); where FUSE is missing, vfs, which copies
    # the whole file system per layer, so then nothing but the final image is kept. The
    # machine's hard ulimits are below podman's defaults; runc works where crun does not.
    mkdir -p "$STATE"
    if [[ -e /dev/fuse ]] && command -v fuse-overlayfs > /dev/null; then
        STORAGE=overlay
        LAYERS=--layers
    else
        STORAGE=vfs
        LAYERS=--layers=false
    fi
    cat > "$STATE/storage.conf" <<EOF
[storage]
driver = "$STORAGE"
runroot = "$STATE/run-$STORAGE"
graphroot = "$STATE/graph-$STORAGE"
[storage.options.overlay]
mount_program = "/usr/bin/fuse-overlayfs"
EOF
    cat > "$STATE/containers.conf" <<EOF
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
    export CONTAINERS_STORAGE_CONF=$STATE/storage.conf CONTAINERS_CONF=$STATE/containers.conf
}

make_base() {
    if podman image exists "$BASE_IMAGE"; then
        say "base $BASE_IMAGE cached"
        return
    fi
    local mirror
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2> /dev/null || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    if [[ ! -s $STATE/base.tar ]]; then
        say "debootstrap bookworm from $mirror"
        rm -rf "$STATE/rootfs"
        debootstrap --variant=minbase --include=python3,python3-venv bookworm "$STATE/rootfs" \
            "$mirror" > "$STATE/debootstrap.log"
        tar -C "$STATE/rootfs" -cf "$STATE/base.tar" .
        rm -rf "$STATE/rootfs"
    fi
    podman import --quiet "$STATE/base.tar" "$BASE_IMAGE" > /dev/null
}

pip_mounts() {
    # One pip.conf from this machine's configuration, and the local folders it names.
    "$PYTHON" - "$STATE/pip.conf" <<'EOF'
import configparser, os, re, subprocess, sys
conf = configparser.ConfigParser()
listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                        text=True).stdout
for line in listed.splitlines():
    key, _, value = line.partition("=")
    section, _, name = key.partition(".")
    section = "global" if section.startswith(":env:") else section
    conf.setdefault(section, {})[name] = value.strip("'\"")
for name in ("find-links", "extra-index-url", "index-url", "cert", "constraint"):
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        conf.setdefault("global", {})[name] = env
conf.remove_option("global", "user") if conf.has_option("global", "user") else None
with open(sys.argv[1], "w") as out:
    conf.write(out)
paths = set()
for section in conf.sections():
    for value in conf[section].values():
        for word in value.split():
            path = re.sub(r"^file://", "", word)
            if not (path.startswith("/") and os.path.exists(path)):
                continue
            if word.startswith("file://"):  # an index's pages may link beside it (../files)
                path = os.path.dirname(path.rstrip("/"))
            paths.add(path if os.path.isdir(path) else os.path.dirname(path))
print("\n".join(sorted(paths)))
EOF
}

build() {
    local mounts=(--volume "$STATE/pip.conf:/etc/pip.conf:ro")
    local path
    while read -r path; do
        [[ -n $path ]] && mounts+=(--volume "$path:$path:ro")
    done < <(pip_mounts)
    if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
        mounts+=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
    fi
    local torch
    torch=$(grep -E '^(torch|torchvision)==' "$ROOT/constraints.txt" | tr '\n' ' ')
    say "building $IMAGE from $DOCKERFILE ($torch from pip's configured index, $STORAGE)"
    # --force-rm: a failed build leaves no working container behind (it would pin its layers).
    buildah bud --isolation chroot --pull=never --force-rm "$LAYERS" "${mounts[@]}" \
        --build-arg BASE="$BASE_IMAGE" --build-arg TORCH_INDEX= \
        --build-arg TORCH_PACKAGES="$torch" \
        --build-arg DLBENCH_COMMIT="$(git -C "$ROOT" rev-parse HEAD)" \
        --build-arg DLBENCH_DIRTY="$(git_dirty)" \
        -f "$DOCKERFILE" -t "$IMAGE" "$ROOT" > "$STATE/build.log" 2>&1 || {
        tail -n 30 "$STATE/build.log"
        say "build of $DOCKERFILE failed"
        return 1
    }
    say "built $IMAGE: $(podman image inspect "$IMAGE" --format '{{.Size}}') bytes"
}

git_dirty() {
    # true when the tree that goes into the image differs from HEAD (the rows say so)
    if [[ -n $(git -C "$ROOT" status --porcelain) ]]; then echo true; else echo false; fi
}

smoke() {
    # The issue's first command, as uid 1000 into a folder it owns: a row must land.
    local out
    out=$(mktemp -d)
    chown 1000:1000 "$out"
    if podman run --rm --pull=never --network none --user 1000:1000 \
        -v "$out:/workdir/results" "$IMAGE" src.train --accelerator cpu --model mobilenet_v3 \
        --batch-size 2 --width 64 --height 64 --n-iters 2 --warmup-steps 1 \
        > "$STATE/smoke.log" 2>&1 && grep -q ',ok,' "$out/benchmark.csv"; then
        rm -rf "$out"
        say "smoke run ok"
    else
        rm -rf "$out"
        tail -n 20 "$STATE/smoke.log"
        say "smoke run failed"
        return 1
    fi
}

install_tools
configure_engine
make_base
build
[[ ${1:-} == --build-only ]] && exit 0
smoke
[[ ${1:-} == --smoke ]] && exit 0
say "image tests"
DLBENCH_IMAGE=$IMAGE "$PYTHON" -m pytest -q -m image -n 0 -p no:cacheprovider \
    "$ROOT/tests/image"
podman image prune -f > /dev/null
say "done"
