#!/usr/bin/env bash
# The tests of real launchers and schedulers (pytest -m cluster): a SLURM cluster on this host
# (tests/slurm_cluster.py) taking the repository's sbatch file, srun of `validate` and
# `scaling`, and a rank lost (SIGKILL, SIGSTOP) under srun, torchrun and Lightning's launcher.
# SLURM and munge are Debian packages, installed here when missing; where they cannot be,
# the SLURM tests skip with one line saying so and the torchrun ones still run.
# Usage: docker/ci-cluster.sh     PYTHON (default .venv/bin/python)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
started=$(date +%s)
say() { echo "[ci-cluster $(( $(date +%s) - started )) s] $*"; }

missing=()
for tool in slurmctld slurmd srun munged; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    say "installing slurmctld slurmd slurm-client munge (missing ${missing[*]})"
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo=sudo
    { $sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq slurmctld slurmd \
            slurm-client munge > /dev/null; } ||
        say "SLURM could not be installed here: its tests skip (the others still run)"
fi
cd "$ROOT"
"$PYTHON" -m pytest -q -m cluster -p no:cacheprovider
say "done"
