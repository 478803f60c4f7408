"""nvJPEG's hardware batched decode, called directly (ctypes) for the GPU decode path.

torchvision's batched call decodes on its own stream at default priority, allocates a tensor per
image, and holds the GIL for parts of the call, stalling a Python thread beside it. Here a batch
decodes into one buffer, laid out as interleaved RGB (what the crop kernel reads), and ctypes
releases the GIL for the call. The call returns only when the batch is decoded: the hardware
path runs its copies and colour conversions on streams of its own. It synchronises the device
once a call, so it waits for all work queued before it, the step's included: a step replayed as
a graph, far ahead of the host, leaves no decode beside it (docs/decisions.md#nvjpeg-direct).

Only for GPUs with JPEG engines (A100, H100, ...): elsewhere `HardwareJpeg` raises
`Unavailable` and torchvision's call decodes."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import torch

BACKEND_HARDWARE = 3  # nvjpegBackend_t
CREATE_FLAGS = 0  # nvjpegCreateEx's flags (1: no hardware pipelining, 2: memory pools)
OUTPUT_RGBI = 5  # nvjpegOutputFormat_t: interleaved RGB, written to channel[0]
MAX_COMPONENT = 4
IMAGE_INT64S = 8  # nvjpegImage_t: 4 channel pointers, then 4 size_t pitches (64 bytes)
STATUS = {
    1: "not initialized",
    2: "invalid parameter",
    3: "bad JPEG",
    4: "JPEG not supported",
    5: "allocator failure",
    6: "execution failed",
    7: "no JPEG engine on this GPU",
    8: "internal error",
    9: "not implemented",
    10: "incomplete bitstream",
}


class Unavailable(RuntimeError):
    """No nvJPEG library, or no JPEG engine on this GPU."""


def library_path() -> str | None:
    """The nvJPEG that torchvision ships (or links), else the system's."""
    import torchvision

    root = Path(torchvision.__file__).parent
    for folder in (
        root.parent / "torchvision.libs",
        root,
        root.parent / "nvidia" / "nvjpeg" / "lib",
    ):
        found = sorted(folder.glob("libnvjpeg*.so*")) if folder.is_dir() else []
        if found:
            return str(found[0])
    return ctypes.util.find_library("nvjpeg")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"nvJPEG {what}: {STATUS.get(status, f'status {status}')}")


class HardwareJpeg:
    """One nvJPEG handle and decode state on the JPEG engines (states are not thread-safe:
    one object per decoding thread)."""

    def __init__(self) -> None:
        path = library_path()
        if path is None:
            raise Unavailable("no nvJPEG library")
        lib = ctypes.CDLL(path)
        for name in (
            "nvjpegCreateEx",
            "nvjpegJpegStateCreate",
            "nvjpegDecodeBatchedInitialize",
            "nvjpegDecodeBatched",
        ):
            getattr(lib, name).restype = ctypes.c_int
        lib.nvjpegDecodeBatched.argtypes = [ctypes.c_void_p] * 6
        self._lib = lib
        self._handle, self._state = ctypes.c_void_p(), ctypes.c_void_p()
        status = lib.nvjpegCreateEx(
            BACKEND_HARDWARE, None, None, CREATE_FLAGS, ctypes.byref(self._handle)
        )
        if status != 0:
            raise Unavailable(f"nvJPEG's hardware backend: {STATUS.get(status, status)}")
        _check(lib.nvjpegJpegStateCreate(self._handle, ctypes.byref(self._state)), "state")
        self._batch = 0

    def decode(
        self,
        flat: torch.Tensor,
        lengths: torch.Tensor,
        sizes: torch.Tensor,
        device: torch.device,
        stream: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queue the decode of the files packed end to end in `flat` (host memory, which must
        outlive the work queued on `stream`) into one uint8 buffer on `device`: image k as
        (height, width, 3) at offset `starts[k]`. Returns (buffer, starts); raises
        RuntimeError when a file cannot be decoded this way (the caller decodes otherwise)."""
        count = len(lengths)
        if count != self._batch:
            status = self._lib.nvjpegDecodeBatchedInitialize(
                self._handle, self._state, count, 1, OUTPUT_RGBI
            )
            _check(status, "batch set-up")
            self._batch = count
        heights, widths = sizes[:, 0].long(), sizes[:, 1].long()
        bytes_out = heights * widths * 3
        starts = torch.cumsum(bytes_out, 0) - bytes_out
        buffer = torch.empty(int(bytes_out.sum()), dtype=torch.uint8, device=device)
        sources = flat.data_ptr() + torch.cumsum(lengths, 0) - lengths
        images = torch.zeros(count, IMAGE_INT64S, dtype=torch.int64)
        images[:, 0] = buffer.data_ptr() + starts  # channel[0]
        images[:, MAX_COMPONENT] = widths * 3  # pitch[0]
        sizes_t = lengths.to(torch.int64).contiguous()
        status = self._lib.nvjpegDecodeBatched(
            self._handle,
            self._state,
            sources.data_ptr(),
            sizes_t.data_ptr(),
            images.data_ptr(),
            stream,
        )
        _check(status, "batched decode")
        return buffer, starts
