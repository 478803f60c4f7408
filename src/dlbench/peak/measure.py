"""What one device attains, each on the device's own clock: dense matmul per dtype, device
memory read and copy, host-device copies (pinned) and copies to each peer GPU. Every rate is
the best of a bounded shape search (peak.search); nothing here changes a GPU setting."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import contextmanager

import torch

from dlbench.engine.timing.timer import on_device, seconds_of, synchronize
from dlbench.peak.search import Shape, matmul_shapes, search_best

MIB = 2**20
MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
# Share of the time budget each measurement gets (bf16 first: MFU's usual denominator).
BUDGET_SHARES = {
    "bf16": 0.24,
    "fp16": 0.12,
    "fp8": 0.12,
    "tf32": 0.1,
    "fp32": 0.08,
    "read": 0.1,
    "copy": 0.08,
    "h2d": 0.06,
    "d2h": 0.06,
    "p2p": 0.04,
}
PROBE_S = 0.1  # each candidate timed about this long (a hundred 8192-cubed bf16 products)
SUSTAIN_SHARE = 0.3  # of a measurement's budget: the best shape again, for longer
MAX_SUSTAIN_S = 1.5
BF16_SUSTAIN_S = 5.0  # bf16's longer measurement: the power cap's averaging settles well inside
GPU_LARGEST_SIDE, CPU_LARGEST_SIDE = 16384, 256
GPU_BUFFER_MIB = (2048, 1024, 4096, 512, 256)  # memory, host and peer copies, likely best first
CPU_BUFFER_MIB = (64, 16)
_TORCH_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


def seconds_per_call(op: Callable[[], object], device: torch.device, seconds: float) -> float:
    """Mean seconds of one call of `op` over about `seconds`, after two untimed calls, on the
    clock of the device that does the work (engine.timing.timer)."""
    op()
    op()
    synchronize(device)
    began = time.perf_counter()
    op()
    synchronize(device)
    calls = max(1, math.ceil(seconds / max(time.perf_counter() - began, 1e-6)))
    return seconds_of(calls, lambda _: op(), device) / calls


@contextmanager
def _tf32(allowed: bool):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def fp8_supported(device: torch.device) -> bool:
    """A GPU whose tensor cores take FP8 (compute capability 8.9 or newer) and a torch with
    the e4m3 dtype."""
    if device.type != "cuda" or not hasattr(torch, "float8_e4m3fn"):
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def matmul_rate(dtype: str, device: torch.device) -> Callable[[Shape, float], float]:
    """TFLOP/s of one (m, k) @ (k, n) product in `dtype` (fp32 without TF32; fp8: e4m3 inputs
    through torch._scaled_mm, bf16 out)."""

    def rate(shape: Shape, seconds: float) -> float:
        m, n, k = shape
        gen = torch.Generator(device=device).manual_seed(0)
        if dtype == "fp8":
            a = torch.randn(m, k, device=device, generator=gen).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=device, generator=gen).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=device)

            def op():
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            kind = _TORCH_DTYPES[dtype]
            a = torch.randn(m, k, device=device, generator=gen, dtype=kind)
            b = torch.randn(k, n, device=device, generator=gen, dtype=kind)
            out = torch.empty(m, n, device=device, dtype=kind)

            def op():
                return torch.mm(a, b, out=out)

        with _tf32(dtype == "tf32"):
            per_call = seconds_per_call(op, device, seconds)
        return 2.0 * m * n * k / per_call / 1e12

    return rate


def memory_rate(kind: str, device: torch.device) -> Callable[[Shape, float], float]:
    """TB/s of device memory: `read` (a sum over the buffer reads each byte once) or `copy`
    (each byte read once and written once)."""

    def rate(shape: Shape, seconds: float) -> float:
        (mib,) = shape
        x = torch.ones(mib * MIB // 4, device=device)
        if kind == "read":
            per_call = seconds_per_call(lambda: x.sum(), device, seconds)
            return x.numel() * 4 / per_call / 1e12
        y = torch.empty_like(x)
        per_call = seconds_per_call(lambda: y.copy_(x), device, seconds)
        return 2 * x.numel() * 4 / per_call / 1e12

    return rate


def host_copy_rate(direction: str, device: torch.device) -> Callable[[Shape, float], float]:
    """GB/s between pinned host memory and the device: `h2d` or `d2h`."""

    def rate(shape: Shape, seconds: float) -> float:
        (mib,) = shape
        host = torch.ones(mib * MIB, dtype=torch.uint8).pin_memory()
        dev = torch.empty(mib * MIB, dtype=torch.uint8, device=device)
        if direction == "h2d":
            per_call = seconds_per_call(lambda: dev.copy_(host, non_blocking=True), device, seconds)
        else:
            per_call = seconds_per_call(lambda: host.copy_(dev, non_blocking=True), device, seconds)
        return mib * MIB / per_call / 1e9

    return rate


def peer_copy_gb_s(source: torch.device, target: torch.device, mib: int, seconds: float) -> float:
    """GB/s of a copy of `mib` MiB from one GPU's memory to another's (NVLink or PCIe, as the
    host has it), on the host's clock with both GPUs drained at the edges."""
    src = torch.ones(mib * MIB, dtype=torch.uint8, device=source)
    dst = torch.empty(mib * MIB, dtype=torch.uint8, device=target)

    def drained() -> None:
        synchronize(source)
        synchronize(target)

    dst.copy_(src)
    drained()
    began = time.perf_counter()
    dst.copy_(src)
    drained()
    calls = max(1, math.ceil(seconds / max(time.perf_counter() - began, 1e-6)))
    began = time.perf_counter()
    for _ in range(calls):
        dst.copy_(src)
    drained()
    return mib * MIB * calls / (time.perf_counter() - began) / 1e9


def peer_label(device: torch.device) -> str:
    """A peer's name in `attained_p2p_pairs`: its index, or `cpu` for the host as a peer."""
    return str(device.index) if device.type == "cuda" else device.type


def _budgets(total_s: float) -> dict[str, tuple[float, float]]:
    """(search budget, sustained seconds) per measurement."""
    out = {}
    for name, share in BUDGET_SHARES.items():
        budget = total_s * share
        longest = BF16_SUSTAIN_S if name == "bf16" else MAX_SUSTAIN_S
        out[name] = (budget, min(longest, budget * SUSTAIN_SHARE))
    return out


def measure_device(
    device: torch.device, total_s: float, peers: list[torch.device]
) -> dict[str, object]:
    """Every attainable rate of one device within about `total_s` seconds, measured inside the
    device's own context: matmul per dtype (`fp8` only where supported), `read`, `copy`, on a
    GPU `h2d` and `d2h` (each a Best), and `p2p`: (peer label, GB/s) for each peer."""
    with on_device(device):
        return _measure_device(device, total_s, peers)


def _measure_device(
    device: torch.device, total_s: float, peers: list[torch.device]
) -> dict[str, object]:
    gpu = device.type == "cuda"
    budgets = _budgets(total_s)
    largest = GPU_LARGEST_SIDE if gpu else CPU_LARGEST_SIDE
    buffers = [(m,) for m in (GPU_BUFFER_MIB if gpu else CPU_BUFFER_MIB)]
    found: dict[str, object] = {}
    for dtype in MATMUL_DTYPES:
        if dtype == "fp8" and not fp8_supported(device):
            found[dtype] = None
            continue
        if dtype in ("tf32", "fp16") and not gpu:
            found[dtype] = None  # a CPU has no TF32, and its fp16 matmul is emulated
            continue
        budget, sustain = budgets[dtype]
        shapes = matmul_shapes(largest)
        found[dtype] = search_best(shapes, matmul_rate(dtype, device), budget, PROBE_S, sustain)
        _release(device)
    for kind in ("read", "copy"):
        budget, sustain = budgets[kind]
        found[kind] = search_best(buffers, memory_rate(kind, device), budget, PROBE_S, sustain)
        _release(device)
    for direction in ("h2d", "d2h"):
        budget, sustain = budgets[direction]
        found[direction] = (
            search_best(buffers[:2], host_copy_rate(direction, device), budget, PROBE_S, sustain)
            if gpu
            else None
        )
        _release(device)
    mib, seconds = buffers[1][0], budgets["p2p"][1]
    found["p2p"] = [(peer_label(p), peer_copy_gb_s(device, p, mib, seconds)) for p in peers]
    _release(device)
    return found


def _release(device: torch.device) -> None:
    """Give the buffers of one measurement back before the next allocates its own."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
