"""What a step computed, kept to be read after the window: its loss in training, its output in
inference. A row whose last step's loss is not finite measured arithmetic that no longer means
anything (an FP8 scale gone wrong, an overflow in fp16): it is invalid, whatever its speed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class OutputWatch:
    """Keeps the last step's loss (training) or output (inference), so that whether it was
    finite is read after the window, never inside it: a reference, no copy and no sync (after
    backward a loss holds no saved tensors). A step captured as a CUDA graph writes its output
    into the same memory at each replay: those outputs, one per captured graph, are kept as
    captured, and nothing is let go while a capture runs (a tensor freed then, one an eager
    warm-up step made on another stream, failed the capture)."""

    def __init__(self) -> None:
        self.last: Any = None
        self.captured: list[Any] = []

    def watching(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any) -> Any:
            out = forward(*args)
            if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                self.captured.append(out)
            else:
                self.last = out
            return out

        return watched

    def columns(self) -> dict[str, object]:
        """`last_step_finite`, and a training step's `final_loss` (one sync, after the window):
        of the graphs' outputs where the step was captured, else of the last step's."""
        outputs = [getattr(o, "logits", o) for o in (self.captured or [self.last])]
        tensors = [o.detach() for o in outputs if isinstance(o, torch.Tensor)]
        if not tensors or not all(t.is_floating_point() for t in tensors):
            return {}
        finite = all(bool(torch.isfinite(t).all()) for t in tensors)
        columns: dict[str, object] = {"last_step_finite": finite}
        if tensors[-1].numel() == 1:
            columns["final_loss"] = float(tensors[-1])
        return columns
