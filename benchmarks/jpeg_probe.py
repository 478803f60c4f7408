"""On a GPU: where a GPU-decoded batch's time goes (nvJPEG batched decode, the fused crop,
flip and normalise kernel against the matrix-product crop and normalise it replaced, the side
stream), and whether the GPU path's pixels match the CPU path's. Prints one line per
figure; exits 1 if a check fails. Usage: PYTHONPATH=src python3 benchmarks/jpeg_probe.py DIR"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torchvision.io import ImageReadMode, decode_jpeg

from dlbench.data.crop import batched_crop, draw_crop, jpeg_frame, jpeg_size

BATCH = 256


def timed(fn, repeats: int = 5) -> float:
    """Median wall seconds of fn() with the device synchronized at both edges."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        began = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    return sorted(times)[len(times) // 2]


def staged_equals_direct(datas: list[bytes], crops: list) -> bool:
    """The feed's staging (side stream, another thread) gives the pixels a direct call does."""
    import threading
    from types import SimpleNamespace

    from dlbench.config import DataSource
    from dlbench.data.images import EncodedBatch
    from dlbench.data.pipeline import OnDevice

    raws = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
    packed = EncodedBatch(
        torch.cat(raws),
        torch.tensor([r.numel() for r in raws]),
        torch.arange(len(raws)),
        torch.tensor([c[0] for c in crops]),
        torch.tensor([c[1] for c in crops]),
        torch.tensor([jpeg_size(d) for d in datas]),
        torch.tensor([jpeg_frame(d).engine_ready for d in datas]),
    )
    pipeline = SimpleNamespace(decode="gpu", source=DataSource("folder", Path(".")))
    shape = SimpleNamespace(height=224, width=224)
    fmt = torch.channels_last
    on_device = OnDevice(pipeline, shape, torch.device("cuda"), torch.bfloat16, fmt)
    direct = on_device.images.decode(packed)
    staged: list = []
    thread = threading.Thread(
        target=lambda: staged.append(on_device.stage(packed, torch.zeros(len(raws))))
    )
    thread.start()
    thread.join()
    inputs, _targets = on_device.hand_over(staged[0])
    return bool(torch.equal(inputs, direct))


def main(folder: Path) -> int:
    files = sorted(folder.rglob("*.jpg"))[:BATCH]
    datas = [f.read_bytes() for f in files]
    raws = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
    decode_jpeg(raws[:8], mode=ImageReadMode.RGB, device="cuda")  # nvJPEG's first call
    decode_s = timed(lambda: decode_jpeg(raws, mode=ImageReadMode.RGB, device="cuda"))
    print(f"nvJPEG batched decode, {BATCH} files: {decode_s * 1e3:.1f} ms "
          f"({BATCH / decode_s:,.0f} img/s)")  # fmt: skip
    began = time.perf_counter()
    crops = [draw_crop(*jpeg_size(d)) for d in datas]
    draw_s = time.perf_counter() - began
    print(f"header + crop draw (one worker): {draw_s / BATCH * 1e6:.1f} us per file")
    images = decode_jpeg(raws, mode=ImageReadMode.RGB, device="cuda")
    boxes = torch.tensor([c[0] for c in crops])
    flips = torch.tensor([c[1] for c in crops])
    from dlbench.data.crop_kernel import crop_normalise, image_table
    from dlbench.data.images import DeviceImages

    device_images = DeviceImages(torch.device("cuda"), torch.bfloat16, torch.channels_last,
                                 (224, 224))  # fmt: skip
    scale, shift = device_images.scale.view(-1), device_images.shift.view(-1)
    out = torch.empty(BATCH, 3, 224, 224, dtype=torch.bfloat16, device="cuda",
                      memory_format=torch.channels_last)  # fmt: skip
    fused_s = timed(lambda: crop_normalise(image_table(images), boxes, flips, out, scale, shift))
    crop_s = timed(lambda: batched_crop(images, boxes, flips, (224, 224)))
    cropped = batched_crop(images, boxes, flips, (224, 224))
    normalise_s = timed(lambda: device_images.normalise(cropped))
    print(
        f"crop + flip + normalise of {BATCH}: one kernel {fused_s * 1e3:.2f} ms; matrix "
        f"products {crop_s * 1e3:.2f} ms + normalise {normalise_s * 1e3:.2f} ms"
    )
    wide = DeviceImages(torch.device("cuda"), torch.float32, torch.contiguous_format, (224, 224))
    wide_out = torch.empty_like(out, dtype=torch.float32)
    fused = crop_normalise(image_table(images), boxes, flips, wide_out, scale, shift)
    apart = wide.normalise(cropped.round())
    level = float(((fused - apart).abs() / scale.view(1, 3, 1, 1)).max())  # in grey levels
    print(f"one kernel vs matrix products: max |difference| {level:.2f} grey levels")
    on_gpu = batched_crop(images[:16], boxes[:16], flips[:16], (224, 224)).cpu()
    on_cpu_images = [decode_jpeg(r, mode=ImageReadMode.RGB) for r in raws[:16]]
    on_cpu = batched_crop(on_cpu_images, boxes[:16], flips[:16], (224, 224))
    difference = float((on_gpu - on_cpu).abs().mean())
    print(f"GPU decode + crop vs CPU decode + crop: mean |difference| {difference:.2f} grey levels")
    staged = staged_equals_direct(datas[:16], crops[:16])
    print(f"staged on the side stream (thread) equals decoded in place: {staged}")
    ok = difference < 3.0 and staged and level <= 1.01
    print("check:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
