"""The batch-1 decode GEMV's launch shape for each matrix: tuned for the whole decode step on one
GPU model and Triton version and shipped with dlbench, as vLLM ships its kernels' tuned
configurations (`launch_shapes/<gpu>.json`, written by `benchmarks/tune_gemv.py`); elsewhere
Triton's autotuner times each shape alone in warm-up. Timed alone, the small matrices' shapes lie
within a few % of each other, so the autotuner's pick changed from one cold run to the next, and
the ranking alone is not the ranking inside the step (docs/decisions.md#gemv-launch-shapes). What
each matrix ran is kept for the row (`gemv_tuning`, `gemv_launch_shapes`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dlbench.caches import slug

PACKAGED = Path(__file__).with_name("launch_shapes")
PACKAGED_SOURCE, AUTOTUNED_SOURCE = "packaged", "autotuned"


@dataclass(frozen=True)
class LaunchShape:
    """Outputs per program, inputs per loop step, warps: `N4K2048w8`."""

    block_n: int
    block_k: int
    warps: int

    @property
    def name(self) -> str:
        return f"N{self.block_n}K{self.block_k}w{self.warps}"

    @classmethod
    def parse(cls, name: str) -> LaunchShape:
        """The shape a name gives (`N4K2048w8`); ValueError for any other text."""
        n, _, rest = name.removeprefix("N").partition("K")
        k, _, warps = rest.partition("w")
        if not (name.startswith("N") and n.isdigit() and k.isdigit() and warps.isdigit()):
            raise ValueError(f"not a launch shape: {name!r}")
        return cls(int(n), int(k), int(warps))

    def launch(self) -> dict[str, int]:
        """The kernel's keyword arguments for this shape."""
        return {"BLOCK_N": self.block_n, "BLOCK_K": self.block_k, "num_warps": self.warps}


def matrix_key(n: int, k: int, dtype: str, gated: bool, norm: bool, residual: bool) -> str:
    """A GEMV's identity in the tables: `2048x8192 bfloat16 gated+residual` (the weight's
    shape and dtype, what is fused into it)."""
    fused = [name for name, on in (("gated", gated), ("norm", norm), ("residual", residual)) if on]
    return f"{n}x{k} {dtype.removeprefix('torch.')} {'+'.join(fused) or 'plain'}"


def triton_release(version: str) -> str:
    """Triton's major.minor: the code generator a tuned table holds for."""
    return ".".join(version.split(".")[:2])


def table_path(gpu_name: str) -> Path:
    """The packaged table of a GPU model (one file a model, a section per Triton release)."""
    return PACKAGED / f"{slug(gpu_name)}.json"


@functools.cache
def packaged_shapes(gpu_name: str, triton_version: str) -> dict[str, LaunchShape]:
    """The matrices tuned for this GPU model and Triton release ({} where none were: the
    autotuner's turn). A table that cannot be read is a packaging fault, raised."""
    path = table_path(gpu_name)
    if not gpu_name or not path.is_file():
        return {}
    table = json.loads(path.read_text())
    tuned = table.get("triton", {}).get(triton_release(triton_version), {})
    return {key: LaunchShape.parse(name) for key, name in tuned.get("matrices", {}).items()}


_TRIED: dict[str, LaunchShape] = {}  # a tuning's candidates (benchmarks/tune_gemv.py)
TUNING_SOURCE = "tuning"


@contextmanager
def trying(shapes: dict[str, LaunchShape]) -> Iterator[None]:
    """Launch these shapes for their matrices, before any table: how a tuning measures a
    candidate inside the whole decode step."""
    _TRIED.clear()
    _TRIED.update(shapes)
    try:
        yield
    finally:
        _TRIED.clear()


def shape_for(gpu_name: str, triton_version: str, key: str) -> tuple[LaunchShape, str] | None:
    """The shape a matrix launches with and where it came from (a tuning's candidate, or the
    packaged table); None: the autotuner's turn."""
    if key in _TRIED:
        return _TRIED[key], TUNING_SOURCE
    shape = packaged_shapes(gpu_name, triton_version).get(key)
    return None if shape is None else (shape, PACKAGED_SOURCE)


_RAN: dict[str, tuple[str, str]] = {}  # matrix key -> (launch shape, where it came from)


def note_launch(key: str, shape: str, source: str) -> None:
    """What a matrix's GEMV launched with (the last call wins: one run, one choice)."""
    _RAN[key] = (shape, source)


def forget_launches() -> None:
    """A new run starts (a sweep worker runs several in one process)."""
    _RAN.clear()


def ran_shapes() -> dict[str, str]:
    """Each matrix run since `forget_launches` and the shape it launched with."""
    return {key: shape for key, (shape, _) in _RAN.items()}


def launch_columns() -> dict[str, str]:
    """`gemv_tuning` (packaged, autotuned, or both joined) and `gemv_launch_shapes` (each
    matrix and its shape) for the GEMVs run since `forget_launches`; {} where none ran."""
    if not _RAN:
        return {}
    sources = sorted({source for _, source in _RAN.values()}, reverse=True)
    shapes = "; ".join(f"{key}={shape}" for key, (shape, _) in sorted(_RAN.items()))
    return {"gemv_tuning": "+".join(sources), "gemv_launch_shapes": shapes}
