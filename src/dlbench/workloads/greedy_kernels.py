"""The last kernels of a batch-1 decode step: the greedy token of the logits and the position's
step, launched as programmatic dependents like the rest of the step (workloads.decode_kernels).
Imported only with Triton and CUDA."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dlbench.workloads.decode_kernels import await_inputs, dependent_launch


@triton.jit
def greedy_block_kernel(logits, values, indices, V, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """The maximum of one block of the logits and its first index."""
    await_inputs(PDL)
    block = tl.program_id(0)
    at = block * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(logits + at, mask=at < V, other=float("-inf")).to(tl.float32)
    tl.store(values + block, tl.max(x, axis=0))
    tl.store(indices + block, block * BLOCK + tl.argmax(x, axis=0, tie_break_left=True))


@triton.jit
def greedy_pick_kernel(
    values, indices, token, position, BLOCKS, BLOCK: tl.constexpr, PDL: tl.constexpr
):
    """The first block holding the maximum gives the token; the position moves on by one."""
    await_inputs(PDL)
    at = tl.arange(0, BLOCK)
    best = tl.load(values + at, mask=at < BLOCKS, other=float("-inf"))
    pick = tl.argmax(best, axis=0, tie_break_left=True)
    tl.store(token, tl.load(indices + pick))
    tl.store(position, tl.load(position) + 1)


GREEDY_BLOCK = 1024  # logits per program in the first stage (126 programs for 128k logits)


def greedy_advance(logits: torch.Tensor, token: torch.Tensor, position: torch.Tensor) -> None:
    """Batch-1 decode's last step in two kernels in place of torch's six: the greedy token of
    the one row of logits [1, vocab] (argmax's first index of the maximum) into `token`, and
    the position one on."""
    vocab = logits.shape[-1]
    blocks = triton.cdiv(vocab, GREEDY_BLOCK)
    values = torch.empty(blocks, dtype=torch.float32, device=logits.device)
    indices = torch.empty(blocks, dtype=torch.int64, device=logits.device)
    launch = dependent_launch(logits)
    greedy_block_kernel[(blocks,)](logits, values, indices, vocab, BLOCK=GREEDY_BLOCK, **launch)
    greedy_pick_kernel[(1,)](
        values, indices, token, position, blocks, BLOCK=triton.next_power_of_2(blocks), **launch
    )
