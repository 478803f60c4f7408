"""Map dlbench precision names onto Lightning's, and refuse what the device cannot run."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dlbench.config.fp8_recipes import Fp8Recipe
from dlbench.engine.acceleration.float8 import check_fp8_device
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
    """What Lightning gets, plus the TF32 switches that plain fp32 must set explicitly. `fp8`
    runs its Linear layers in float8 (engine.acceleration.float8) and the rest in `base`:
    bf16-mixed in training, bf16-true in inference."""

    name: str
    lightning: str
    allow_tf32: bool
    base: str = ""  # the precision everything but fp8's Linear layers runs in ("": `name`)
    fp8: Fp8Recipe | None = None  # fp8: the recipe the plan resolved

    @property
    def float8(self) -> bool:
        """Whether the Linear layers run in float8."""
        return self.fp8 is not None

    @property
    def base_name(self) -> str:
        """The precision of everything but fp8's Linear layers: the precision itself otherwise."""
        return self.base or self.name

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The autocast dtype of a mixed precision, None for the others."""
        return {"16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}.get(self.base_name)

    @property
    def input_dtype(self) -> torch.dtype:
        """The dtype floating-point inputs are cast to once, before timing (as Lightning's
        mixed precision does): the autocast dtype, else the weights' dtype."""
        return self.autocast_dtype or self.param_dtype

    @property
    def param_dtype(self) -> torch.dtype:
        """The dtype the weights live in."""
        return _PARAM_DTYPES.get(self.base_name, torch.float32)

    def apply_matmul_settings(self) -> None:
        """TF32 on only for `tf32`: torch enables it for cuDNN by default, which `32` must undo."""
        torch.backends.cuda.matmul.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.allow_tf32


# what the rest of an fp8 run computes in: mixed in training (fp32 weights and optimizer
# state, as torchtitan trains), the weights' bf16 in inference (as a served model holds them)
FP8_BASE = {"train": "bf16-mixed", "infer": "bf16-true"}
_PARAM_DTYPES = {"16-true": torch.float16, "bf16-true": torch.bfloat16}


def param_dtype_of(name: str, mode: str) -> torch.dtype:
    """The dtype a run of `--precision name` keeps its weights in (PrecisionPlan.param_dtype),
    known before any device is asked: a serve run's cache is sized from it beforehand."""
    base = FP8_BASE[mode] if name == "fp8" else name
    return _PARAM_DTYPES.get(base, torch.float32)


def plan_precision(
    name: str, device_type: str, mode: str = "train", fp8: Fp8Recipe | None = None
) -> PrecisionPlan:
    """Resolve `--precision` for a device type ('cuda' or 'cpu') and mode, or raise a
    UserError; fp8 runs under `fp8`, the recipe the plan resolved."""
    if name == "fp8":
        if fp8 is None:
            raise ValueError("fp8 needs the recipe the plan resolved")
        check_fp8_device(device_type)
        base = FP8_BASE[mode]
        return PrecisionPlan(name, _LIGHTNING[base], allow_tf32=False, base=base, fp8=fp8)
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


# Layers whose stock forward autocast runs in its lower dtype, casting weight and bias each call.
_AUTOCAST_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def hold_autocast_weights(model: nn.Module, precision: PrecisionPlan) -> int:
    """For inference under autocast (nothing otherwise): keep the weights and biases of Linear
    and Conv layers in the autocast dtype, cast once here, instead of autocast casting them
    again on every call. A served model is cast once; recasting ViT-B's 86 M weights per query
    is a sizeable share of a batch-1 step on an H100, time a bare loop in one autocast context
    does not spend. The outputs are bit for bit the same (autocast casts these very tensors to
    this dtype). Left as they are: layers whose forward is their own (a standardised conv), and
    any parameter another module also holds (tied embeddings, which autocast never casts).
    Returns how many were cast."""
    dtype = precision.autocast_dtype
    if dtype is None:
        return 0
    chosen: dict[int, nn.Parameter] = {}
    shared: set[int] = set()
    for module in model.modules():
        stock = isinstance(module, _AUTOCAST_LAYERS) and _stock_forward(module)
        for param in module.parameters(recurse=False):
            if stock and param.is_floating_point() and param.dtype != dtype:
                chosen[id(param)] = param
            else:
                shared.add(id(param))
    cast = [p for key, p in chosen.items() if key not in shared]
    with torch.no_grad():
        for param in cast:
            param.data = param.data.to(dtype)
    return sum(p.numel() for p in cast)


def _stock_forward(module: nn.Module) -> bool:
    """True when the layer runs torch's own forward (a subclass may transform its weight)."""
    base = next(b for b in _AUTOCAST_LAYERS if isinstance(module, b))
    kind = type(module)
    conv = getattr(kind, "_conv_forward", None) is getattr(base, "_conv_forward", None)
    return kind.forward is base.forward and conv
