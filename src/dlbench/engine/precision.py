"""Map dlbench precision names onto Lightning's, and refuse what the device cannot run."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dlbench.errors import invalid

_LIGHTNING = {
    "32": "32-true",
    "tf32": "32-true",
    "16-mixed": "16-mixed",
    "bf16-mixed": "bf16-mixed",
    "16-true": "16-true",
    "bf16-true": "bf16-true",
}


@dataclass(frozen=True)
class PrecisionPlan:
    """What Lightning gets, plus the TF32 switches that plain fp32 must set explicitly."""

    name: str
    lightning: str
    allow_tf32: bool

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The autocast dtype of a mixed precision, None for the others."""
        return {"16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}.get(self.name)

    @property
    def input_dtype(self) -> torch.dtype:
        """The dtype floating-point inputs are cast to once, before timing (as Lightning's
        mixed precision does): the autocast dtype, else the weights' dtype."""
        return self.autocast_dtype or self.param_dtype

    @property
    def param_dtype(self) -> torch.dtype:
        """The dtype the weights live in."""
        return {"16-true": torch.float16, "bf16-true": torch.bfloat16}.get(self.name, torch.float32)

    def apply_matmul_settings(self) -> None:
        """TF32 on only for `tf32`: torch enables it for cuDNN by default, which `32` must undo."""
        torch.backends.cuda.matmul.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.allow_tf32


def plan_precision(name: str, device_type: str) -> PrecisionPlan:
    """Resolve `--precision` for a device type ('cuda' or 'cpu'), or raise a UserError."""
    allowed_cpu = "on the CPU use 32, bf16-mixed or bf16-true"
    if device_type == "cpu":
        if name in ("16-mixed", "16-true", "tf32"):
            raise invalid("--precision", name, f"not supported on the CPU; {allowed_cpu}")
    elif device_type == "cuda":
        major, _ = torch.cuda.get_device_capability()
        if name.startswith("bf16") and not torch.cuda.is_bf16_supported(including_emulation=False):
            raise invalid("--precision", name, "this GPU has no bf16; use 32 or 16-mixed")
        if name == "tf32" and major < 8:
            raise invalid("--precision", name, "TF32 needs compute capability 8.0 or newer")
    return PrecisionPlan(name=name, lightning=_LIGHTNING[name], allow_tf32=name == "tf32")
