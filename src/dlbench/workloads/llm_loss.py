"""The native LLM's training loss: cross-entropy that never materialises the whole batch's
logits over a large vocabulary in fp32; logits are formed chunk by chunk, and each chunk's
gradient in the forward."""

from __future__ import annotations

from typing import NamedTuple

import torch

LOSS_CHUNK_TOKENS = 2048  # logits of this many tokens at a time in the training loss


class Hidden(NamedTuple):
    """The last layer's normalised output and the output weight: the training loss forms the
    logits from these chunk by chunk."""

    hidden: torch.Tensor
    head: torch.Tensor


def _chunk_loss(h: torch.Tensor, head: torch.Tensor, y: torch.Tensor, count: int, wide):
    """One chunk's summed cross-entropy and the gradient of the mean loss for its logits
    (softmax minus the one-hot target, over `count`), in `h`'s dtype. The target's one is
    taken off after the cast, in place: compiled, the softmax, scale and cast are one pass
    and the subtraction touches one element a row; eager, no one-hot is ever built."""
    logits = (h @ head.t()).to(wide)
    lse = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(1, y[:, None]).squeeze(1)
    grad = (torch.exp(logits - lse[:, None]) / count).to(h.dtype)
    grad[torch.arange(len(y), device=y.device), y] -= 1.0 / count
    return (lse - picked).sum(), grad


class _ChunkedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of `hidden @ head.T` against `targets`, LOSS_CHUNK_TOKENS tokens at a
    time: each chunk's logits (fp32 for the softmax) exist only while it is processed, and its
    gradients for `hidden` and `head` are formed right then (backward only scales them)."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, head: torch.Tensor, targets: torch.Tensor):
        flat, labels = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)
        count = flat.shape[0]
        wide = torch.promote_types(flat.dtype, torch.float32)  # softmax and sums: fp32 at least
        grad_hidden = torch.empty_like(flat)
        grad_head = torch.zeros(head.shape, dtype=wide, device=head.device)
        total = torch.zeros((), dtype=wide, device=flat.device)
        for start in range(0, count, LOSS_CHUNK_TOKENS):
            h = flat[start : start + LOSS_CHUNK_TOKENS]
            y = labels[start : start + LOSS_CHUNK_TOKENS]
            loss, grad = _chunk_loss(h, head, y, count, wide)
            total += loss
            grad_hidden[start : start + LOSS_CHUNK_TOKENS] = grad @ head
            grad_head += (grad.t() @ h).to(wide)
        ctx.save_for_backward(grad_hidden.view_as(hidden), grad_head.to(head.dtype))
        return total / count

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_hidden, grad_head = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_head * grad_loss, None


def chunked_cross_entropy(outputs: Hidden, targets: torch.Tensor) -> torch.Tensor:
    """The native model's training loss (a workload loss: outputs, targets -> scalar)."""
    return _ChunkedCrossEntropy.apply(outputs.hidden, outputs.head, targets)
