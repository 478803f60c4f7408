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
    backward a loss holds no saved tensors)."""

    def __init__(self) -> None:
        self.last: Any = None

    def watching(self, forward: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any) -> Any:
            self.last = forward(*args)
            return self.last

        return watched

    def columns(self) -> dict[str, object]:
        """`last_step_finite`, and a training step's `final_loss` (one sync, after the window)."""
        out = getattr(self.last, "logits", self.last)
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return {}
        out = out.detach()
        columns: dict[str, object] = {"last_step_finite": bool(torch.isfinite(out).all())}
        if out.numel() == 1:
            columns["final_loss"] = float(out)
        return columns
