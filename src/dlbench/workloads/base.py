"""What a workload is: a model, its synthetic batch, its loss and what one sample counts as."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from dlbench.errors import invalid


@dataclass(frozen=True)
class InputShape:
    """The size of one sample: pixels for images, tokens for text."""

    width: int
    height: int
    seq_len: int


@dataclass
class Batch:
    """One synthetic batch: model inputs and the targets the loss compares against."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        """Apply a tensor transform (move, pin, cast) to both parts."""
        return Batch(fn(self.inputs), fn(self.targets))


@dataclass(frozen=True)
class SizeRule:
    """Which image sizes a model accepts: a minimum and a multiple, per side."""

    minimum: int = 32
    multiple: int = 1
    reason: str = ""

    def check(self, width: int, height: int) -> None:
        """Raise a UserError naming the flag when a side breaks the rule."""
        for flag, value in (("--width", width), ("--height", height)):
            if value < self.minimum or value % self.multiple:
                rule = f"at least {self.minimum}"
                if self.multiple > 1:
                    rule += f" and a multiple of {self.multiple}"
                raise invalid(flag, value, f"this model needs {rule}{self.reason}")


@dataclass(frozen=True)
class Workload:
    """A named benchmark target; adding a model is one of these, not a branch in the engine."""

    name: str
    summary: str
    family: str  # "vision", "segmentation", "text", "llm"
    sample_unit: str  # "image" or "sequence"
    build: Callable[[InputShape], nn.Module]
    # draws on the generator's device (`device=gen.device`); a batch made elsewhere is moved
    make_batch: Callable[[int, InputShape, torch.Generator], Batch]
    loss: Callable[[Any, torch.Tensor], torch.Tensor]
    default_width: int = 224
    default_height: int = 224
    size_rule: SizeRule = field(default_factory=SizeRule)
    generative: bool = False
    default_optimizer: str = "sgd"  # transformers train with AdamW, CNNs with SGD + momentum
    analytic_flops: Callable[[InputShape, str], Any] | None = None
    vocab_size: int | None = None  # text: token ids lie below this (a tokenizer sizes to it)
    num_classes: int | None = None  # classifiers: labels lie below this (None: token targets)
    # --llm-impl native: the built model rewritten (same weights) and the loss it trains with
    native: Callable[[nn.Module], nn.Module] | None = None
    native_loss: Callable[[Any, torch.Tensor], torch.Tensor] | None = None
    context_len: int | None = None  # decoders: the most positions a sequence may take
    # decoders: key and value elements one position of the KV cache holds (keys and values of
    # every layer's kv heads), so a cache can be sized before the model is built
    cache_width: int | None = None

    @property
    def is_image(self) -> bool:
        """Images have pixels (megapixels/s) and a memory layout (channels_last)."""
        return self.family in ("vision", "segmentation")

    def shape(self, width: int | None, height: int | None, seq_len: int) -> InputShape:
        """Resolve the default size and check it against the model's rule."""
        shape = InputShape(width or self.default_width, height or self.default_height, seq_len)
        if self.is_image:
            self.size_rule.check(shape.width, shape.height)
        return shape

    def tokens_per_sample(self, shape: InputShape) -> int | None:
        """Tokens in one sample for text workloads, None for images."""
        return None if self.is_image else shape.seq_len

    def pixels_per_sample(self, shape: InputShape) -> int | None:
        """Pixels in one sample for image workloads, None for text."""
        return shape.width * shape.height if self.is_image else None

    def shape_columns(self, shape: InputShape) -> dict[str, object]:
        """A row's input as it ran: an image's width and height, a sequence's length."""
        image = self.is_image
        return {
            "width": shape.width if image else None,
            "height": shape.height if image else None,
            "seq_len": None if image else shape.seq_len,
        }


def cross_entropy(outputs: Any, targets: torch.Tensor) -> torch.Tensor:
    """Classification and per-pixel loss; HF outputs carry their logits in `.logits`."""
    logits = outputs.logits if hasattr(outputs, "logits") else outputs
    if logits.dim() == 3:  # (batch, tokens, vocab): flatten tokens for causal-LM loss
        return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return nn.functional.cross_entropy(logits, targets)
