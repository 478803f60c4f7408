"""Workloads that fail on purpose, registered through dlbench's plugin hook (tests/plugins)
in the tests' processes.

fault_oom raises torch's real OutOfMemoryError above DLBENCH_FAULT_MAX_BATCH (default 16), as a
GPU would; fault_crash kills its process; fault_hang never finishes a step; steady takes 20 ms a
step, so its throughput is known whichever process runs it; fault_lost_rank sends its own
process DLBENCH_FAULT_SIGNAL (KILL or STOP) on rank DLBENCH_FAULT_RANK (default 1) at forward
DLBENCH_FAULT_AFTER (default 8: inside the measured window after two warm-up steps)."""

from __future__ import annotations

import os
import signal
import time

import torch
from torch import nn

from dlbench.workloads import Batch, InputShape, Workload, register_workload
from dlbench.workloads.base import cross_entropy


class FaultModel(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(8, 4)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        limit = int(os.environ.get("DLBENCH_FAULT_MAX_BATCH", "16"))
        if self.kind == "oom" and x.shape[0] > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {x.shape[0]} GiB")
        if self.kind == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "hang":
            time.sleep(3600)
        if self.kind == "steady":
            time.sleep(0.02)
        if self.kind == "lost_rank":
            self._lose_this_rank()
        return self.fc(x)

    def _lose_this_rank(self) -> None:
        self.calls += 1
        time.sleep(0.02)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        target = int(os.environ.get("DLBENCH_FAULT_RANK", "1"))
        if rank == target and self.calls == int(os.environ.get("DLBENCH_FAULT_AFTER", "8")):
            sent = getattr(signal, "SIG" + os.environ.get("DLBENCH_FAULT_SIGNAL", "KILL"))
            os.kill(os.getpid(), sent)


def _batch(batch_size: int, shape: InputShape, gen: torch.Generator) -> Batch:
    return Batch(torch.randn(batch_size, 8, generator=gen), torch.zeros(batch_size).long())


for _kind in ("oom", "crash", "hang", "steady", "lost_rank"):
    register_workload(
        Workload(
            name=_kind if _kind == "steady" else f"fault_{_kind}",
            summary=f"test workload that fails by {_kind}",
            family="text",
            sample_unit="sequence",
            build=lambda shape, kind=_kind: FaultModel(kind),
            make_batch=_batch,
            loss=cross_entropy,
            analytic_flops=lambda shape, mode: None,
        )
    )


class HostSyncModel(nn.Module):
    """Reads a value back to the host in its forward, as some models do: a CUDA graph cannot
    capture that (the host would wait on a stream that is only being recorded)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(x.abs().max().item()) or 1.0
        return self.fc(x / scale)


register_workload(
    Workload(
        name="host_sync",
        summary="test workload whose forward syncs with the host (cannot be graph-captured)",
        family="text",
        sample_unit="sequence",
        build=lambda shape: HostSyncModel(),
        make_batch=_batch,
        loss=cross_entropy,
        analytic_flops=lambda shape, mode: None,
    )
)


class WatchAloneModel(nn.Module):
    """Takes 20 ms a step; whenever its process holds the GPU's turn (a sweep that prepares points
    ahead), appends to DLBENCH_ALONE_LOG the CPU time (clock ticks) the sweep's other workers
    have used so far: while one point measures, the others give way and use none. Its build
    keeps the host busy for DLBENCH_ALONE_BUILD_S (default 1.5), as a compilation would."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        end = time.monotonic() + float(os.environ.get("DLBENCH_ALONE_BUILD_S", "1.5"))
        while time.monotonic() < end:
            pass

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from dlbench import gpu_turn
        from dlbench.telemetry.isolation import _SWEEP_PROCESSES

        time.sleep(0.02)
        log = os.environ.get("DLBENCH_ALONE_LOG")
        if log and gpu_turn._state.held:
            ticks = sum(_cpu_ticks(pid) for pid in _SWEEP_PROCESSES)
            with open(log, "a") as f:
                f.write(f"{os.getpid()}:{id(self)} {len(_SWEEP_PROCESSES)} {ticks}\n")
        return self.fc(x)


def _cpu_ticks(pid: int) -> int:
    """User and system clock ticks a process has used (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


register_workload(
    Workload(
        name="watch_alone",
        summary="test workload that checks the sweep's other workers give way while it measures",
        family="text",
        sample_unit="sequence",
        build=lambda shape: WatchAloneModel(),
        make_batch=_batch,
        loss=cross_entropy,
        analytic_flops=lambda shape, mode: None,
    )
)


class ServeFailModel(nn.Module):
    """Answers the model server's warm-up and references (the main thread), then raises on
    the DLBENCH_FAULT_AFTER-th batch (default 10) served in a load (another thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.served = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import threading

        if threading.current_thread() is not threading.main_thread():
            self.served += 1
            if self.served >= int(os.environ.get("DLBENCH_FAULT_AFTER", "10")):
                raise RuntimeError("injected failure of the model mid-load")
        return self.fc(x)


register_workload(
    Workload(
        name="serve_fail",
        summary="test workload whose model fails mid-load when served",
        family="text",
        sample_unit="sequence",
        build=lambda shape: ServeFailModel(),
        make_batch=_batch,
        loss=cross_entropy,
        analytic_flops=lambda shape, mode: None,
    )
)
