"""A throw-away SLURM cluster on this host: munged, slurmctld and two slurmd (nodes n1 and n2,
one port each), config, keys, state and logs in one folder, all stopped with nothing left
running. Debian's slurmd runs several daemons on one host (`slurmd -N NAME`); where a build
does not, `start` falls back to one node. Used by tests/test_slurm.py; by hand:

    python3 -m tests.slurm_cluster start /tmp/dlbench-slurm   # prints the SLURM_CONF to export
    python3 -m tests.slurm_cluster stop /tmp/dlbench-slurm
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "squeue", "scancel")
START_TIMEOUT_S = 30.0


def missing_programs() -> list[str]:
    """The SLURM and munge programs this host lacks (Debian: slurmctld slurmd slurm-client
    munge)."""
    return [p for p in DAEMONS if shutil.which(p) is None]


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@dataclass
class Cluster:
    """A running cluster: its folder, config and node names."""

    folder: Path
    nodes: list[str]

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment SLURM's commands need to find this cluster. MASTER_ADDR: both
        nodes are this host, and their names resolve nowhere."""
        return {**os.environ, "SLURM_CONF": str(self.conf), "MASTER_ADDR": "127.0.0.1", **extra}

    def run(self, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        """A SLURM command (srun, sbatch, squeue ...) against this cluster."""
        return subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, env=self.env(**env)
        )

    def wait_for_job(self, job_id: str, timeout: float = 300) -> str:
        """Block until the job has left the queue; its final state from the controller."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            queued = self.run("squeue", "--noheader", "--jobs", job_id, "--format", "%T")
            if queued.returncode != 0 or not queued.stdout.strip():
                break
            time.sleep(0.5)
        else:
            self.run("scancel", job_id)
            raise TimeoutError(f"job {job_id} still queued after {timeout} s")
        shown = self.run("scontrol", "show", "job", job_id)
        state = [w for w in shown.stdout.split() if w.startswith("JobState=")]
        return state[0].split("=", 1)[1] if state else "GONE"


def _config(folder: Path, nodes: list[str], ports: list[int]) -> str:
    host = socket.gethostname()
    lines = [
        "ClusterName=dlbench",
        f"SlurmctldHost={host}(127.0.0.1)",
        "SlurmUser=root" if os.geteuid() == 0 else f"SlurmUser={os.environ.get('USER', 'root')}",
        f"SlurmctldPort={ports[0]}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={folder}/munge.socket",
        "CredType=cred/munge",
        f"StateSaveLocation={folder}/state",
        f"SlurmdSpoolDir={folder}/spool/%n",
        f"SlurmctldPidFile={folder}/slurmctld.pid",
        f"SlurmdPidFile={folder}/slurmd-%n.pid",
        f"SlurmctldLogFile={folder}/slurmctld.log",
        f"SlurmdLogFile={folder}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "KillWait=5",
        "InactiveLimit=0",
    ]
    cpus = max(2, os.cpu_count() or 2)
    lines += [
        f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p} CPUs={cpus} State=UNKNOWN"
        for n, p in zip(nodes, ports[1:])
    ]
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _daemon(args: list[str], folder: Path, name: str) -> None:
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"{name} did not start: {out.stderr.strip() or out.stdout.strip()}")


def start(folder: Path, nodes: int = 2) -> Cluster:
    """munged, slurmctld and `nodes` slurmd in `folder` (created); ready to take jobs."""
    folder.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool"):
        (folder / sub).mkdir(exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    names = [f"n{i + 1}" for i in range(nodes)]
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, names, _free_ports(nodes + 1)))
    _daemon(
        ["munged", "--force", f"--socket={folder}/munge.socket", f"--key-file={key}",
         f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
         f"--seed-file={folder}/munged.seed"],
        folder, "munged",
    )  # fmt: skip
    _daemon(["slurmctld", "-f", str(conf)], folder, "slurmctld")
    cluster = Cluster(folder, [])
    _wait_for(lambda: "UP" in cluster.run("scontrol", "ping").stdout, "slurmctld", folder)
    started = []
    for name in names:
        (folder / "spool" / name).mkdir(exist_ok=True)
        try:
            _daemon(["slurmd", "-f", str(conf), "-N", name], folder, f"slurmd {name}")
            started.append(name)
        except RuntimeError:
            if not started:
                raise
            break  # a build without several slurmd per host: one node
    cluster.nodes = started

    def idle() -> bool:
        shown = cluster.run("sinfo", "--noheader", "--states=idle", "--format=%N %D")
        return sum(int(line.split()[1]) for line in shown.stdout.splitlines()) >= len(started)

    _wait_for(idle, "the nodes", folder)
    return cluster


def _wait_for(ready, what: str, folder: Path) -> None:
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        if ready():
            return
        time.sleep(0.3)
    stop(folder)
    raise RuntimeError(f"{what} did not come up; see the logs in {folder}")


def _pids(folder: Path) -> list[int]:
    return [
        int(p.read_text().split()[0])
        for p in folder.glob("*.pid")
        if p.read_text().strip().split()[0].isdigit()
    ]


def stop(folder: Path) -> None:
    """Cancel every job, stop the daemons (slurmd, slurmctld, munged) and what they started."""
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    subprocess.run(["scancel", "--full", "--user", str(os.geteuid())], env=env,
                   capture_output=True, timeout=30, check=False)  # fmt: skip
    pids = _pids(folder)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 10
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in [p for p in pids if _alive(p)] + _strays(folder):  # and what a daemon left
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat")
    return not (state.exists() and state.read_text().split(")")[-1].split()[0] == "Z")


def _strays(folder: Path) -> list[int]:
    """Processes whose command line or environment names this cluster's folder."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            seen = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:
            continue
        if str(folder).encode() in seen:
            found.append(int(proc.name))
    return found


def leftovers(folder: Path) -> list[int]:
    """Living processes still tied to this cluster's folder (none after `stop`)."""
    return [p for p in _strays(folder) if _alive(p)]


if __name__ == "__main__":
    command, where = sys.argv[1], Path(sys.argv[2])
    if command == "start":
        running = start(where)
        print(f"export SLURM_CONF={running.conf} MASTER_ADDR=127.0.0.1  # nodes: {running.nodes}")
    elif command == "stop":
        stop(where)
    else:
        sys.exit("usage: python3 -m tests.slurm_cluster start|stop FOLDER")
