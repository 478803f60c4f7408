"""dlbench on a real SLURM cluster (tests/slurm_cluster.py: munged, slurmctld and two slurmd on
this host), CPU and gloo: the repository's own sbatch file submitted as a user submits it (bare:
no image, DLBENCH_PYTHON), `dlbench validate` and `dlbench scaling` under srun, and a rank lost
in the measured window. Skipped, with the reason, where SLURM's programs are not installed
(docker/ci-cluster.sh installs them on CI)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests import slurm_cluster
from tests.conftest import ROOT, cli_env, read_rows

pytestmark = pytest.mark.cluster
RUN = ["--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32", "--height", "32",
       "--batch-size", "4", "--n-iters", "20", "--warmup-steps", "1"]  # fmt: skip
# What the tests' sbatch asks for instead of the file's GPUs: one CPU task per node
CPU_JOB = ["--ntasks-per-node=1", "--gpus-per-node=0", "--cpus-per-task=1"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = slurm_cluster.missing_programs()
    if missing:
        pytest.skip(f"SLURM is not installed here (missing {', '.join(missing)}); "
                    "apt-get install slurmctld slurmd slurm-client munge")  # fmt: skip
    folder = tmp_path_factory.mktemp("slurm")
    running = slurm_cluster.start(folder)
    yield running
    slurm_cluster.stop(folder)
    assert slurm_cluster.leftovers(folder) == [], "a process outlived the cluster"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's folder: the repository's docker/ files (the sbatch script and the cluster
    files it reads), and results/ beside them."""
    (tmp_path / "docker").symlink_to(ROOT / "docker")
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = cli_env()
    return {"PYTHONPATH": env["PYTHONPATH"], "OMP_NUM_THREADS": "1",
            "DLBENCH_PYTHON": sys.executable, **extra}  # fmt: skip


def _sbatch(cluster, project: Path, *args: str, **env: str) -> tuple[str, str, str]:
    """Submit the repository's sbatch file from `project`; (job id, final state, its log)."""
    nodes = str(len(cluster.nodes))
    submitted = cluster.run(
        "sbatch", "--parsable", f"--nodes={nodes}", *CPU_JOB, f"--chdir={project}",
        f"--output={project}/job-%j.log", "docker/slurm/dlbench.sbatch", *RUN, *args,
        **_env(**env),
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    state = cluster.wait_for_job(job, timeout=240)
    return job, state, (project / f"job-{job}.log").read_text()


def _srun(cluster, project: Path, *args: str) -> str:
    out = cluster.run("srun", f"--chdir={project}", *args, timeout=300, **_env())
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_sbatch_of_the_repository_file_writes_one_row_from_rank_0(cluster, project):
    job, state, log = _sbatch(cluster, project)
    assert state == "COMPLETED", log
    [row] = read_rows(project / "results" / "cluster.csv")
    nodes = len(cluster.nodes)
    assert (row["status"], row["launcher"], row["world_size"]) == ("ok", "SLURM", str(nodes))
    assert row["num_nodes"] == str(nodes) and row["slurm_job_id"] == job
    ranks = read_rows(project / "results" / "cluster.per_rank.csv")
    assert [r["rank"] for r in ranks] == [str(r) for r in range(nodes)]


def test_validate_under_srun_runs_both_loops_on_two_ranks(cluster, project):
    csv = project / "results" / "validate.csv"
    _srun(cluster, project, "--nodes=1", "--ntasks=2", "--ntasks-per-node=2", sys.executable,
          "-m", "dlbench", "validate", *RUN, "--devices", "2", "--repeats", "1", "--output",
          str(csv))  # fmt: skip
    rows = read_rows(csv)
    assert rows and {r["world_size"] for r in rows} == {"2"}
    assert {r["slurm_job_id"] for r in rows} != {""} and {r["status"] for r in rows} == {"ok"}


def test_scaling_under_one_srun_task_starts_its_own_ranks(cluster, project):
    csv = project / "results" / "scaling.csv"
    _srun(cluster, project, "--nodes=1", "--ntasks=1", "--cpus-per-task=2", sys.executable,
          "-m", "dlbench", "scaling", *RUN, "--devices", "1,2", "--invalid-ok",
          "--output", str(csv))  # fmt: skip  # the launchers are tried, not a shared host's rows
    rows = [r for r in read_rows(csv) if r["run_kind"] == "benchmark" and r["status"] == "ok"]
    assert sorted((r["world_size"], r["launcher"]) for r in rows) == [
        ("1", "SLURM"), ("1", "single"), ("2", "Lightning")
    ]  # fmt: skip


@pytest.mark.parametrize("signal_name", ["KILL", "STOP"])
def test_a_lost_rank_under_sbatch_fails_the_job_with_one_row_naming_it(
    cluster, project, signal_name
):
    if len(cluster.nodes) < 2:
        pytest.skip("one SLURM node on this host: the rank would share its node")
    began = time.monotonic()
    job, state, log = _sbatch(
        cluster, project, "--model", "fault_lost_rank", "--n-iters", "30", "--warmup-steps",
        "2", "--collective-timeout", "15", DLBENCH_FAULT_SIGNAL=signal_name,
        DLBENCH_STEP_WAIT_S="5",
    )  # fmt: skip
    assert state == "FAILED", log
    assert time.monotonic() - began < 120
    [row] = read_rows(project / "results" / "cluster.csv")
    assert row["status"] == "failed" and row["error"].startswith("rank 1 lost: "), row
    assert row["slurm_job_id"] == job
    assert "error: rank 1 lost" in log
    still = cluster.run("squeue", "--noheader", "--jobs", job)
    assert still.stdout.strip() == ""
    assert [p for p in slurm_cluster.leftovers(cluster.folder) if _is_dlbench(p)] == []


def _is_dlbench(pid: int) -> bool:
    try:
        return b"dlbench" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
