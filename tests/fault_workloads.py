"""Workloads that fail on purpose, registered through dlbench's plugin hook (tests/plugins)
in the tests' processes.

fault_oom raises torch's real OutOfMemoryError above DLBENCH_FAULT_MAX_BATCH (default 16), as a
GPU would; fault_crash kills its process; fault_hang never finishes a step; steady takes 20 ms a
step, so its throughput is known whichever process runs it (and, where
DLBENCH_TEST_KILL_PARENT_ONCE names a file not there yet, makes it and kills its parent: a gate's
or a sweep's worker killed mid-run); fault_lost_rank sends its own
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
        if self.kind == "steady":  # DLBENCH_TEST_STEP_SCALE: a copy whose step is that much longer
            _kill_parent_once()
            time.sleep(0.02 * float(os.environ.get("DLBENCH_TEST_STEP_SCALE", "1")))
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


def _kill_parent_once() -> None:
    flag = os.environ.get("DLBENCH_TEST_KILL_PARENT_ONCE")
    if flag:
        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)  # its parent's death ends it (the fork asked for that)


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


class ServeFailModel(nn.Module):
    """Answers the model server's warm-up and references (the main thread and the references'
    own), then raises on the DLBENCH_FAULT_AFTER-th batch (default 10) served in a load (another
    thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.served = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import threading

        if threading.current_thread().name not in ("MainThread", "dlbench-references"):
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


def _failing_native(model: nn.Module) -> nn.Module:
    """The tiny Llama, natively, raising inside its decode loop at the DLBENCH_FAULT_AFTER-th
    step (default 10) served in a load (not at warm-up or the references)."""
    import threading

    from dlbench.workloads.llama import NativeLlama

    class FailingLlama(NativeLlama):
        served = 0

        def logits(self, *args, **kwargs):
            if threading.current_thread().name not in ("MainThread", "dlbench-references"):
                FailingLlama.served += 1
                if FailingLlama.served >= int(os.environ.get("DLBENCH_FAULT_AFTER", "10")):
                    raise RuntimeError("injected failure of the decode loop mid-load")
            return super().logits(*args, **kwargs)

    return FailingLlama.from_transformers(model)


def _wrong_native(model: nn.Module) -> nn.Module:
    """The tiny Llama, natively, whose served decode steps (a load's, on the serving thread)
    answer token 0 whatever the logits say: fast and wrong, as a served path that reads the
    wrong cache row would be; the model without a cache (the token check's) is untouched."""
    import threading

    from dlbench.workloads.llama import NativeLlama

    class WrongLlama(NativeLlama):
        def logits(self, ids, positions, cache=None, last=None, blocks=None):
            out = super().logits(ids, positions, cache, last, blocks)
            if threading.current_thread().name == "dlbench-llm" and ids.shape[1] == 1:
                out = out.clone()
                out[..., 0] = out.max() + 1.0
            return out

    return WrongLlama.from_transformers(model)


def _register_llm(name: str, summary: str, native) -> None:
    from dlbench.workloads.text import LLAMA_SIZES, llama_builder

    size = LLAMA_SIZES["llm_tiny"]
    register_workload(
        Workload(
            name=name,
            summary=summary,
            family="llm",
            sample_unit="sequence",
            build=llama_builder(size),
            make_batch=_batch,
            loss=cross_entropy,
            generative=True,
            vocab_size=size.vocab,
            native=native,
            context_len=size.context,
            cache_width=size.cache_width,
        )
    )


_register_llm(
    "llm_serve_fail", "test LLM whose decode loop fails mid-load when served", _failing_native
)
_register_llm(
    "llm_serve_wrong", "test LLM that serves a wrong token in each decode step", _wrong_native
)
