"""Triton kernels for batch-1 LLM decode: the matrix-vector products, and how each is launched.

At batch 1 every decode projection reads a whole weight matrix to make a few thousand outputs, so a
token's time is how fast the weights stream from memory. cuBLAS and inductor's own reduction for `x
@ W.T` with one row leave the smaller matrices well under the bandwidth
(docs/decisions.md#decode-kernels): each output row's program re-reads the input vector, and
inductor recomputes a fused SiLU for every row. Here one program makes `BLOCK_N` outputs from one
pass over the input, and the gated form applies SiLU(gate) * up to each input chunk once for all of
its rows. Launch shapes per matrix come from the tables dlbench ships for a GPU model
(workloads.launch_shapes), elsewhere from Triton's autotuner on first use (warm-up); the kernel is a
`torch.library` op, so inductor compiles around it and a CUDA graph captures it. The GEMV also takes
the RMSNorm before it and the residual add after it, which would otherwise be a kernel each.

The attention (workloads.decode_attention), the greedy token and the position's step
(workloads.greedy_kernels) are kernels of their own, so a batch-1 step is these kernels and one
lookup.

On sm_90 and later each kernel is launched as a programmatic dependent of the one before
(PDL): it starts while that one finishes, reads what no kernel of the step writes (weights,
the cache before the position) and waits only for its input. Inductor (torch 2.11) launches
user kernels without that attribute, so this step is captured as called, never compiled
(`NativeDecoder.kernel_decode`). Imported only with Triton and CUDA."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import is_fake
from torch.library import triton_op, wrap_triton
from triton.testing import do_bench

from dlbench.host import available_cpus
from dlbench.workloads.launch_shapes import (
    AUTOTUNED_SOURCE,
    LaunchShape,
    matrix_key,
    note_launch,
    shape_for,
)

# launch shapes tried per matrix shape: outputs per program, inputs per loop step, warps
CONFIGS = [
    triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w)
    for n in (1, 2, 4, 8, 16)
    for k in (256, 512, 1024, 2048)
    for w in (4, 8)
    if 1024 <= n * k <= 8192
]


@triton.jit
def await_inputs(PDL: tl.constexpr):
    """Launched as a programmatic dependent (PDL): wait until the kernel before has finished
    and its writes are visible, then let the kernel after start. Reads before this call may
    only touch what no kernel of the step writes; stores come after it."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _gemv_chunk(x, block, cols, col_ok, norm_weight, K, acc, squares, GATED, NORM):
    """One step of the GEMV: the input chunk at `cols` (gated or with RMSNorm's gain) times
    the weight block, added to the per-element sums."""
    v = tl.load(x + cols, mask=col_ok, other=0.0).to(tl.float32)
    if GATED:
        up = tl.load(x + K + cols, mask=col_ok, other=0.0).to(tl.float32)
        v = (v * tl.sigmoid(v) * up).to(x.dtype.element_ty).to(tl.float32)
    if NORM:  # RMSNorm's gain now, its scalar scale once the sums are done
        squares += v * v
        v = v * tl.load(norm_weight + cols, mask=col_ok, other=0.0).to(tl.float32)
    return acc + block.to(tl.float32) * v[None, :], squares


@triton.jit
def _weight_block(w, rows, row_ok, cols, col_ok, K):
    return tl.load(
        w + rows[:, None].to(tl.int64) * K + cols[None, :],
        mask=row_ok[:, None] & col_ok[None, :],
        other=0.0,
        eviction_policy="evict_first",
    )


def _bench(kernel_call, quantiles):
    """Time one launch shape for the autotuner, a fifth as long as Triton's default (a launch
    takes microseconds, so still hundreds of runs): a cold batch-1 decode tries every shape in
    CONFIGS for each of its matrices (docs/decisions.md#gemv-autotune)."""
    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


@triton.autotune(
    configs=CONFIGS, key=["N", "K", "GATED", "NORM", "RESIDUAL", "SCALED"], do_bench=_bench
)
@triton.jit
def gemv_kernel(
    x,
    w,
    y,
    norm_weight,
    residual,
    scale,
    N,
    K,
    eps,
    GATED: tl.constexpr,
    NORM: tl.constexpr,
    RESIDUAL: tl.constexpr,
    SCALED: tl.constexpr,
    PDL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """y[n] = sum_k w[n, k] * v[k] (+ residual[n]); v is x (K values), or GATED silu(x[:K]) *
    x[K:2K], or NORM x scaled to unit root mean square and by norm_weight (RMSNorm: the sum of
    squares is formed in the same pass, the scale applied to the sums). SCALED: w is float8,
    each row's sum times its scale (a weight quantized per output row). Rounded to x's dtype
    where torch's unfused ops would store a tensor, except the normalised input.
    PDL (launched as a programmatic dependent, sm_90+): the first weight block is read while
    the kernel before still runs (weights are never written in a step), the input only after
    it completes; the kernel after may then start."""
    dtype = x.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    cols = tl.arange(0, BLOCK_K)
    first = _weight_block(w, rows, row_ok, cols, cols < K, K)
    await_inputs(PDL)
    squares = tl.zeros((BLOCK_K,), dtype=tl.float32)  # NORM: x's, summed as read
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc, squares = _gemv_chunk(x, first, cols, cols < K, norm_weight, K, acc, squares, GATED, NORM)
    for start in range(BLOCK_K, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        col_ok = cols < K
        block = _weight_block(w, rows, row_ok, cols, col_ok, K)
        acc, squares = _gemv_chunk(
            x, block, cols, col_ok, norm_weight, K, acc, squares, GATED, NORM
        )
    out = tl.sum(acc, axis=1)
    if SCALED:
        out = out * tl.load(scale + rows, mask=row_ok, other=0.0)
    if NORM:
        out = out * tl.rsqrt(tl.sum(squares, axis=0) / K + eps).to(tl.float32)
    if RESIDUAL:
        out = out.to(dtype).to(tl.float32) + tl.load(residual + rows, mask=row_ok).to(tl.float32)
    tl.store(y + rows, out.to(dtype), mask=row_ok)


@triton_op("dlbench::gemv", mutates_args=())
def gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    gated: bool,
    norm_weight: torch.Tensor | None,
    eps: float,
    residual: torch.Tensor | None,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """weight @ v for one input vector x: v = x, silu(x[:K]) * x[K:] when gated, or
    RMSNorm(x) with norm_weight; plus residual when given; a float8 weight's rows times their
    `scale` (fp32, one per row). (N,) outputs in x's dtype."""
    n, k = weight.shape
    y = torch.empty(n, dtype=x.dtype, device=x.device)
    args = (
        x,
        weight,
        y,
        x if norm_weight is None else norm_weight,
        x if residual is None else residual,
        x if scale is None else scale,
        n,
        k,
        eps,
    )
    flags = {"GATED": gated, "NORM": norm_weight is not None, "RESIDUAL": residual is not None}
    key = matrix_key(n, k, str(weight.dtype), gated, flags["NORM"], flags["RESIDUAL"])
    flags.update(SCALED=scale is not None, **dependent_launch(x))
    chosen = _chosen_shape(x.device, key)
    if chosen is None:
        _compile_launch_shapes(args, flags)
        kernel, launch = gemv_kernel, {}
    else:
        kernel, launch = gemv_kernel.fn, chosen[0].launch()

    def grid(meta):
        return (triton.cdiv(n, meta["BLOCK_N"]),)

    # the autotuner times each shape on a matrix's first call: a choice, made as it would be
    # alone (later calls find its pick)
    tuning = chosen is None and not is_fake(x) and not torch.cuda.is_current_stream_capturing()
    tuning = tuning and (key, *flags.items()) not in _TUNED
    wrap_triton(kernel)[grid](*args, **flags, **launch)
    if tuning:
        _TUNED.add((key, *flags.items()))
    if not is_fake(x):
        shape, source = chosen or (_shape_of(gemv_kernel.best_config), AUTOTUNED_SOURCE)
        note_launch(key, shape.name, source)
    return y


def _chosen_shape(device: torch.device, key: str) -> tuple[LaunchShape, str] | None:
    """The launch shape this matrix takes on this GPU model and Triton release, and where it
    came from (workloads.launch_shapes), or None: the autotuner's turn (a CPU has no table)."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    return shape_for(gpu, triton.__version__, key)


def _shape_of(config: triton.Config) -> LaunchShape:
    """The autotuner's pick in the tables' own form."""
    return LaunchShape(config.kwargs["BLOCK_N"], config.kwargs["BLOCK_K"], config.num_warps)


def candidate_shapes() -> list[LaunchShape]:
    """Every launch shape the autotuner tries (CONFIGS): what a tuning chooses among."""
    return [_shape_of(config) for config in CONFIGS]


_COMPILED_SHAPES: set[tuple] = set()
_TUNED: set[tuple] = set()  # the matrices the autotuner has timed in this process


def _compile_launch_shapes(args: tuple, flags: dict) -> None:
    """A matrix shape's first call compiles the GEMV at every launch shape the autotuner will
    time at once, in threads (Triton's compiler leaves Python's lock), not one by one as it
    times them (docs/decisions.md#gemv-autotune); warm, each is found in the disk cache."""
    x, weight = args[0], args[1]
    shape = (*weight.shape, weight.dtype, x.dtype, *flags.items())  # gemv orders its flags
    if shape in _COMPILED_SHAPES:  # every later call: one lookup (an eager step's host time)
        return
    if is_fake(x) or not x.is_cuda or torch.cuda.is_current_stream_capturing():
        return
    _COMPILED_SHAPES.add(shape)

    def compile_one(config: triton.Config) -> None:
        with torch.cuda.device(x.device):
            gemv_kernel.fn.warmup(*args, grid=(1,), **config.all_kwargs(), **flags)

    try:
        compile_one(CONFIGS[0])  # the first alone: it sets up the kernel's per-device cache
        with ThreadPoolExecutor(max_workers=available_cpus()) as pool:
            list(pool.map(compile_one, CONFIGS[1:]))
    except Exception:  # the autotuner compiles what failed here
        return


# programmatic dependent launch of these kernels where the GPU and the launcher allow it
USE_PDL = True


def dependent_launch(x: torch.Tensor) -> dict[str, bool]:
    """The kernel's PDL switch and Triton's launch option: on sm_90 and later, and only where
    these kernels are launched as called (eager, or replayed from a CUDA graph captured so):
    inductor launches the user kernels it compiles without the launch attribute, and its
    analysis of a kernel's writes stops at the wait's inline assembly (then assumes every
    input written, and copies them). Traced, `x` is a fake tensor."""
    on = (
        USE_PDL
        and not torch.compiler.is_compiling()
        and not is_fake(x)
        and x.is_cuda
        and torch.cuda.get_device_capability(x.device)[0] >= 9
    )
    return {"PDL": True, "launch_pdl": True} if on else {"PDL": False}
