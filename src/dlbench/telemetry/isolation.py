"""The isolation check: which processes besides the job's own used the run's GPUs in the window. The
job's own are its ranks and their launchers (engine.distribution.ranks gathers their PIDs); anything
else with a context on a GPU of the run is named in the row (PID, name, memory), so a verdict of
`other_processes` says who."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from dlbench.telemetry.base import GpuBackend, GpuProcess


def own_process_ids() -> set[int]:
    """This process and the one that started it (a launcher, a sweep's worker): a job of one
    process."""
    return {os.getpid(), os.getppid()}


@dataclass
class IsolationCheck:
    """Foreign processes seen on the watched GPUs at any check, over a window."""

    job_pids: set[int] = field(default_factory=own_process_ids)
    foreign: dict[tuple[int, int], GpuProcess] = field(default_factory=dict)  # (GPU, PID)
    hidden: bool = False
    most: int = 0

    def check(self, gpu: GpuBackend, devices: Iterable[int]) -> None:
        """Look at each GPU's process list now."""
        for device in devices:
            others, hidden = foreign_processes(gpu.gpu_processes(device), self.job_pids)
            self.hidden |= hidden
            self.most = max(self.most, len(others))
            self.foreign.update({(device, p.pid): p for p in others})

    def reset(self) -> None:
        self.foreign.clear()
        self.hidden, self.most = False, 0

    def named(self) -> str:
        """`PID NAME MEMORY` of each foreign process, `; `-separated."""
        return "; ".join(p.describe() for p in self.foreign.values())


def foreign_processes(procs: list[GpuProcess], job_pids: set[int]) -> tuple[list[GpuProcess], bool]:
    """The processes on one GPU that are not the job's, and whether the list could not be
    matched at all (another PID namespace: NVML gives the host's PIDs, and none is ours). Then
    every process but one counts, as this rank's cannot be told apart."""
    if not procs or any(p.pid in job_pids for p in procs):
        return [p for p in procs if p.pid not in job_pids], False
    return procs[1:], True
