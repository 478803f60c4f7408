"""The native LLM's training loss: cross-entropy that never materialises the whole batch's
logits over a large vocabulary in fp32; logits are formed chunk by chunk, and each chunk's
gradient in the forward. Under `--fp8-recipe tensorwise_with_head` its three GEMMs (logits,
and the gradients of the hidden states and of the head) run in float8 with one scale a tensor,
as torchao's tensorwise recipe runs a Linear layer's: e4m3 for the hidden states and the
head, e5m2 for the logits' gradient."""

from __future__ import annotations

from typing import NamedTuple

import torch

LOSS_CHUNK_TOKENS = 2048  # logits of this many tokens at a time in the training loss
FLOAT8_MULTIPLE = 16  # a scaled matmul's inner dimension: the tokens of a chunk, padded to it
AMAX_FLOOR = 1e-12  # an all-zero tensor's scale stays finite (torchao's EPS)


class LogitsInLoss:
    """A model whose training loss forms the logits from its output head's weight (the native
    LLM: its forward hands the loss `Hidden`), so its head layer is never called: an FP8 recipe
    with the head runs the loss's GEMMs in float8 by setting `head_float8`."""

    head_float8: bool = False


class Hidden(NamedTuple):
    """The last layer's normalised output and the output weight: the training loss forms the
    logits from these chunk by chunk (in float8 where `float8`)."""

    hidden: torch.Tensor
    head: torch.Tensor
    float8: bool = False


class Float8(NamedTuple):
    """A tensor in float8 and the factor that undoes its scaling."""

    data: torch.Tensor
    inverse_scale: torch.Tensor


def to_float8(x: torch.Tensor, dtype: torch.dtype) -> Float8:
    """`x` scaled so that its largest magnitude meets `dtype`'s largest, then cast (one scale
    for the tensor, torchao's tensorwise scaling)."""
    top = torch.finfo(dtype).max
    amax = x.detach().abs().max().float().clamp(min=AMAX_FLOOR)
    scale = top / amax
    return Float8((x.float() * scale).clamp(-top, top).to(dtype), scale.reciprocal())


def float8_mm(a: Float8, b_t: Float8, out_dtype: torch.dtype) -> torch.Tensor:
    """`a @ b` from `a` and the transpose of `b`, both row-major float8: the scaled matmul
    takes its second operand column-major."""
    return torch._scaled_mm(
        a.data, b_t.data.t(), a.inverse_scale, b_t.inverse_scale, out_dtype=out_dtype
    )


def _rows_padded(x: torch.Tensor) -> torch.Tensor:
    """`x` with zero rows up to a multiple of FLOAT8_MULTIPLE (the head's gradient sums over
    the chunk's tokens, and zero rows add nothing)."""
    short = -x.shape[0] % FLOAT8_MULTIPLE
    return torch.nn.functional.pad(x, (0, 0, 0, short)) if short else x


def _first(x: Float8, rows: int) -> Float8:
    return Float8(x.data[:rows], x.inverse_scale)


def _transposed(x: Float8) -> Float8:
    """`x` transposed, row-major (a copy of its bytes; the scale is the tensor's)."""
    return Float8(x.data.t().contiguous(), x.inverse_scale)


def _chunk_loss(h: torch.Tensor, head, y: torch.Tensor, count: int, wide, h8=None):
    """One chunk's summed cross-entropy and the gradient of the mean loss for its logits
    (softmax minus the one-hot target, over `count`), in `h`'s dtype. The target's one is
    taken off after the cast, in place: compiled, the softmax, scale and cast are one pass
    and the subtraction touches one element a row; eager, no one-hot is ever built. With
    `h8`, the chunk in float8, the logits come from it and `head` in float8."""
    logits = float8_mm(h8, head, wide) if h8 is not None else (h @ head.t()).to(wide)
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
    def forward(ctx, hidden: torch.Tensor, head: torch.Tensor, targets: torch.Tensor, float8):
        flat, labels = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)
        count = flat.shape[0]
        wide = torch.promote_types(flat.dtype, torch.float32)  # softmax and sums: fp32 at least
        grad_hidden = torch.empty_like(flat)
        grad_head = torch.zeros(head.shape, dtype=wide, device=head.device)
        total = torch.zeros((), dtype=wide, device=flat.device)
        # the head in float8 once a step, row-major both ways (the logits read it as it is,
        # the hidden states' gradient transposed)
        head8 = to_float8(head, torch.float8_e4m3fn) if float8 else None
        head8_t = _transposed(head8) if head8 is not None else None
        for start in range(0, count, LOSS_CHUNK_TOKENS):
            h = flat[start : start + LOSS_CHUNK_TOKENS]
            y = labels[start : start + LOSS_CHUNK_TOKENS]
            if head8 is None:
                loss, grad = _chunk_loss(h, head, y, count, wide)
                grad_hidden[start : start + LOSS_CHUNK_TOKENS] = grad @ head
                grad_head += (grad.t() @ h).to(wide)
            else:  # each chunk cast once; the head's gradient reads both transposed
                rows = h.shape[0]
                h8 = to_float8(_rows_padded(h), torch.float8_e4m3fn)
                loss, grad = _chunk_loss(h, head8, y, count, wide, _first(h8, rows))
                grad8 = to_float8(_rows_padded(grad), torch.float8_e5m2)
                part = float8_mm(_first(grad8, rows), head8_t, flat.dtype)
                grad_hidden[start : start + LOSS_CHUNK_TOKENS] = part
                grad_head += float8_mm(_transposed(grad8), _transposed(h8), wide)
            total += loss
        ctx.save_for_backward(grad_hidden.view_as(hidden), grad_head.to(head.dtype))
        return total / count

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_hidden, grad_head = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_head * grad_loss, None, None


def chunked_cross_entropy(outputs: Hidden, targets: torch.Tensor) -> torch.Tensor:
    """The native model's training loss (a workload loss: outputs, targets -> scalar)."""
    return _ChunkedCrossEntropy.apply(outputs.hidden, outputs.head, targets, outputs.float8)
