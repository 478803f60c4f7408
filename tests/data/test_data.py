"""Real input pipelines on generated data: loader rows, the data-wait share, corrupt and short
folders, text files; all through the real CLI in subprocesses where a user would go."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from dlbench.config import DataSource
from dlbench.data.feed import AsLoaded, DataFeed
from dlbench.data.images import scan_images
from dlbench.data.make import ImageSpec, make_images, make_text
from dlbench.data.pipeline import Pipeline
from dlbench.data.throughput import worker_counts
from dlbench.engine.timing.loop import run_measured_loop
from dlbench.engine.timing.settings import LoopSettings
from dlbench.errors import UserError
from tests.conftest import read_rows, run_cli

TINY_IMAGE = ["--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32"]
TINY_IMAGE += ["--height", "32", "--n-iters", "4", "--warmup-steps", "1"]


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """48 JPEGs (40x40) in 3 class folders."""
    root = tmp_path_factory.mktemp("data") / "images"
    make_images(root, ImageSpec(48, 40, 40, classes=3), workers=1)
    return root


def test_make_data_writes_class_folders_of_decodable_jpegs(tmp_path):
    out = run_cli(
        "make-data",
        tmp_path / "set",
        "--images",
        "20",
        "--size",
        "48x32",
        "--classes",
        "4",
        "--text-lines",
        "10",
    )
    assert out.returncode == 0, out.stderr
    index = scan_images(tmp_path / "set" / "images")
    assert len(index.files) == 20 and len(index.classes) == 4 and index.formats == {"jpeg"}
    from torchvision.io import decode_image

    assert decode_image(str(index.files[0])).shape == (3, 32, 48)
    assert len((tmp_path / "set" / "corpus.jsonl").read_text().splitlines()) == 10


@pytest.mark.e2e
def test_loader_alone_gives_a_row_per_worker_count(images, csv_path):
    out = run_cli(
        "data",
        images,
        "--model",
        "timm:test_resnet",
        "--width",
        "32",
        "--height",
        "32",
        "--batch-size",
        "8",
        "--workers",
        "0,2",
        "--min-time",
        "0.5",
        "--output",
        csv_path,
    )
    assert out.returncode == 0, out.stderr
    rows = read_rows(csv_path)
    assert [r["data_workers"] for r in rows] == ["0", "2"]
    for row in rows:
        assert row["run_kind"] == "loader" and row["data"] == f"folder:{images}"
        assert float(row["images_per_s"]) > 0 and float(row["data_mb_per_s"]) > 0
        assert float(row["window_s"]) >= 0.5 and row["data_files"] == "48"
    assert worker_counts(6) == [0, 1, 2, 4, 6] and worker_counts(8) == [0, 1, 2, 4, 8]


@pytest.mark.e2e
def test_training_from_a_folder_records_reads_and_waits(images, csv_path):
    out = run_cli(
        "train",
        *TINY_IMAGE,
        "--batch-size",
        "8",
        "--data",
        f"folder:{images}",
        "--workers",
        "2",
        "--output",
        csv_path,
    )
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert row["data"] == f"folder:{images}" and row["data_workers"] == "2"
    assert row["data_on"] == "host" and row["data_decode"] == "cpu"
    assert int(row["data_files_read"]) == 8 * int(row["steps"])
    assert int(row["data_bytes_read"]) > 0 and 0 <= float(row["data_wait_pct"]) <= 100
    assert row["data_skipped"] == "0" and float(row["images_per_s"]) > 0
    assert float(row["data_mean_file_kb"]) > 0 and 0 <= float(row["host_cpu_pct"]) <= 100
    assert row["input_bound"] == str(float(row["data_wait_pct"]) > 10)


@pytest.mark.e2e
def test_the_gpu_decode_path_trains_end_to_end_where_it_can_run_here(images, csv_path):
    """`--decode gpu` through the CLI on this host's CPU: workers pack the files and crops, the
    step's side decodes them with torchvision and crops them in one pass; the row says so. The
    step keeps the device's usual stream here: only with nvJPEG on a GPU does it get its own."""
    from types import SimpleNamespace

    from dlbench.engine.scenarios.streams import needs_own_stream

    out = run_cli("train", *TINY_IMAGE, "--batch-size", "8", "--data", f"folder:{images}",
                  "--workers", "2", "--decode", "gpu", "--output", csv_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert row["data_decode"] == "gpu" and int(row["data_files_read"]) == 8 * int(row["steps"])
    gpu_decode = SimpleNamespace(prepare=SimpleNamespace(gpu_decode=True))
    cpu_decode = SimpleNamespace(prepare=SimpleNamespace(gpu_decode=False))
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert needs_own_stream(gpu_decode, cuda)
    assert not needs_own_stream(cpu_decode, cuda) and not needs_own_stream(None, cuda)
    assert not needs_own_stream(gpu_decode, cpu)


class _Slow:
    """An iterable loader whose every batch takes `delay` seconds to arrive; the batch after
    `fail_after` batches raises the error a DataLoader worker would."""

    def __init__(self, delay: float, fail_after: int | None = None) -> None:
        self.delay = delay
        self.fail_after = fail_after

    def __iter__(self):
        k = 0
        while True:
            time.sleep(self.delay)
            if k == self.fail_after:
                raise UserError("Caught UserError in DataLoader worker process 0.\nTraceback:\n"
                                "dlbench.errors.UserError: --data: x.jpg is broken")  # fmt: skip
            k += 1
            yield torch.zeros(2, 3), torch.zeros(2), torch.tensor([10, 10]), torch.tensor([0, 0])


def _feed(loader: _Slow) -> DataFeed:
    pipeline = Pipeline(loader, DataSource("folder", Path(".")), 0, "cpu", 2, 0, 20)
    return DataFeed(pipeline, AsLoaded())


def _wait_share(loader_delay: float, step_delay: float) -> float:
    feed = _feed(_Slow(loader_delay))

    def step(i: int) -> None:
        feed.fetch(i)
        time.sleep(step_delay)

    settings = LoopSettings(warmup_steps=1, n_iters=8)
    run_measured_loop(step, torch.device("cpu"), settings, feed)
    return feed.columns()


def test_data_wait_share_tells_a_starved_step_from_a_fed_one():
    starved = _wait_share(loader_delay=0.05, step_delay=0.005)
    assert starved["data_wait_pct"] > 80 and starved["input_bound"] is True
    fed = _wait_share(loader_delay=0.0, step_delay=0.05)
    assert fed["data_wait_pct"] < 10 and fed["input_bound"] is False


def test_a_host_that_waits_while_the_gpu_stays_busy_is_not_input_bound():
    """Under CUDA graphs the host waits inside nvJPEG's device synchronisation, which the feed
    counts as waiting for data; the GPU never starved (busy 100 % in the profiled pass). The row
    is input-bound only where the GPU waited for input, as the profile says."""
    feed = _feed(_Slow(0.05))

    def step(i: int) -> None:
        feed.fetch(i)
        time.sleep(0.005)

    run_measured_loop(step, torch.device("cpu"), LoopSettings(warmup_steps=1, n_iters=8), feed)
    waited = feed.columns(gpu_idle=False)
    assert waited["data_wait_pct"] > 80 and waited["input_bound"] is False
    assert feed.columns(gpu_idle=True)["input_bound"] is True


def test_the_feed_stages_the_next_batches_while_the_step_runs():
    """A loader as slow as most of a step costs the step nothing: the staging thread draws
    batch i+1 while step i runs (drawn between the steps, the host would wait ~40 %)."""
    overlapped = _wait_share(loader_delay=0.02, step_delay=0.03)
    assert overlapped["data_wait_pct"] < 15 and overlapped["input_bound"] is False


def test_a_loader_error_reaches_the_step_and_close_stops_the_staging_thread():
    feed = _feed(_Slow(0.0, fail_after=3))
    for i in range(3):
        feed.fetch(i)
    with pytest.raises(UserError, match="^--data: x.jpg is broken$"):
        feed.fetch(3)
    feed.close()
    assert feed._thread is not None and not feed._thread.is_alive()


def test_a_staging_thread_that_cannot_start_fails_the_step_instead_of_hanging_it():
    """The thread takes the step's GPU first; where that fails (here: no CUDA at all) the
    error reaches the step (an H100 run once waited forever for a thread that had died)."""

    class OnAMissingGpu(AsLoaded):
        device = torch.device("cuda", 0)

    pipeline = Pipeline(_Slow(0.0), DataSource("folder", Path(".")), 0, "cpu", 2, 0, 20)
    feed = DataFeed(pipeline, OnAMissingGpu())
    began = time.monotonic()
    with pytest.raises((RuntimeError, AssertionError)):
        feed.fetch(0)
    assert time.monotonic() - began < 5
    feed.close()


def test_a_gpu_decode_feed_shortens_the_switch_interval_while_it_runs():
    """nvJPEG's call takes the GIL back many times; while a GPU-decode feed runs, a thread
    running Python (the step's) hands it over sooner; closing the feed restores the setting."""
    import sys

    from dlbench.data.feed import GPU_DECODE_SWITCH_S

    class DecodingOnGpu(AsLoaded):
        gpu_decode = True

    before = sys.getswitchinterval()
    plain = _feed(_Slow(0.0))
    plain.fetch(0)
    assert sys.getswitchinterval() == before  # a CPU-decode feed leaves it alone
    plain.close()
    pipeline = Pipeline(_Slow(0.0), DataSource("folder", Path(".")), 0, "gpu", 2, 0, 20)
    feed = DataFeed(pipeline, DecodingOnGpu())
    feed.fetch(0)
    assert sys.getswitchinterval() == pytest.approx(GPU_DECODE_SWITCH_S)
    feed.close()
    assert sys.getswitchinterval() == before


def test_closing_the_feed_does_not_wait_for_a_loader_that_hangs(monkeypatch):
    from dlbench.data import feed

    monkeypatch.setattr(feed, "CLOSE_WAIT_S", 0.5)
    hung = _feed(_Slow(2.0))  # its first batch is still coming when the run ends
    hung.start()
    began = time.monotonic()
    hung.close()
    assert time.monotonic() - began < 1.5
    hung._thread.join(timeout=5)  # the batch in progress arrives; the thread sees the stop
    assert not hung._thread.is_alive()


@pytest.mark.e2e
def test_each_bad_file_is_counted_once_however_often_it_is_tried(tmp_path, csv_path):
    import os

    folder = tmp_path / "mixed"
    make_images(folder, ImageSpec(16, 40, 40, classes=1), workers=1)
    jpeg = next(folder.rglob("*.jpg")).read_bytes()
    (folder / "class_00" / "garbage.jpg").write_bytes(b"not an image at all")
    for k in range(3):
        (folder / "class_00" / f"truncated{k}.jpg").write_bytes(jpeg[: 200 + k])
    os.mkfifo(folder / "class_00" / "pipe.jpg")  # a scan that opened it would wait forever
    bomb = _claiming(jpeg, 60_000, 60_000)  # refused from its header, before any allocation
    (folder / "class_00" / "bomb.jpg").write_bytes(bomb)
    out = run_cli(
        "train",
        *TINY_IMAGE,
        "--batch-size",
        "16",
        "--n-iters",
        "6",  # 20 files, one batch an epoch: every truncated file is tried several times
        "--data",
        f"folder:{folder}",
        "--workers",
        "2",
        "--output",
        csv_path,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert "skipped 2 unreadable" in out.stderr
    [row] = read_rows(csv_path)
    assert row["data_files"] == "20"  # the truncated files and the bomb pass the scan
    assert row["data_skipped"] == "6"  # garbage and pipe at the scan, 3 truncated, the bomb


@pytest.mark.e2e
def test_a_folder_nothing_in_which_decodes_ends_in_one_line_from_the_workers(tmp_path, csv_path):
    folder = tmp_path / "undecodable" / "a"
    folder.mkdir(parents=True)
    for k in range(20):  # JPEG magic bytes, then nothing a decoder can use
        (folder / f"{k}.jpg").write_bytes(b"\xff\xd8\xff" + bytes(200))
    out = run_cli(
        "train",
        *TINY_IMAGE,
        "--batch-size",
        "4",
        "--data",
        f"folder:{folder.parent}",
        "--workers",
        "2",
        "--output",
        csv_path,
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("error: --data:"), out.stderr
    assert "failed to read or decode" in lines[0] and "Traceback" not in out.stderr
    assert not csv_path.exists()


@pytest.mark.e2e
def test_bad_folders_exit_2_with_one_line_and_earlier_rows_intact(images, tmp_path, csv_path):
    first = run_cli("infer", *TINY_IMAGE, "--batch-size", "4", "--output", csv_path)
    assert first.returncode == 0, first.stderr
    before = csv_path.read_bytes()
    for make, message in [
        ("empty", "no JPEG, PNG or TIFF files"),
        ("garbage", "none of the 2 image files"),
        ("small", "fewer than one batch"),
        ("missing", "is not a folder"),
    ]:
        folder = tmp_path / make
        if make != "missing":
            (folder / "a").mkdir(parents=True)
        if make == "garbage":
            for name in ("x.jpg", "y.png"):
                (folder / "a" / name).write_bytes(b"\0" * 64)
        if make == "small":
            make_images(folder, ImageSpec(3, 40, 40, classes=1), workers=1)
        out = run_cli(
            "train",
            *TINY_IMAGE,
            "--batch-size",
            "8",
            "--data",
            f"folder:{folder}",
            "--output",
            csv_path,
        )
        assert out.returncode == 2, make
        lines = out.stderr.strip().splitlines()
        assert message in lines[-1] and "Traceback" not in out.stderr, make
        assert csv_path.read_bytes() == before, make


def test_a_line_of_any_length_reaches_the_tokenizer_in_bounded_pieces(monkeypatch):
    """The tokenizer keeps a map entry per character it is given: one 25 MB line exhausted
    8 GB. Pieces keep it bounded, and byte-level BPE loses nothing at their edges."""
    from dlbench.data import text

    monkeypatch.setattr(text, "PIECE_CHARS", 64)
    line = " ".join(f"w{k % 97}ord" for k in range(500))  # 3,500 characters
    samples = text.TextSamples([line, "short"], [0, 0], [len(line), 5])
    tokenizer = text.train_tokenizer(samples, 300)
    given: list[int] = []
    encode_batch = tokenizer.encode_batch

    class Spy:  # the real tokenizer, its inputs' lengths noted
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def encode_batch(self, texts):
            given.extend(map(len, texts))
            return encode_batch(texts)

    ids = text.encode(Spy(), samples.texts)
    assert max(given) <= 64 and len(given) == -(-len(line) // 64) + 1
    assert tokenizer.decode(ids[0]) == line and tokenizer.decode(ids[1]) == "short"


@pytest.mark.e2e
def test_text_corpus_trains_a_causal_lm_and_classifiers_read_a_line_per_sample(tmp_path, csv_path):
    from dlbench.data.text import TokenSet, read_samples, train_tokenizer

    corpus = tmp_path / "corpus.jsonl"
    make_text(corpus, 200)
    out = run_cli(
        "train",
        "--accelerator",
        "cpu",
        "--model",
        "llm_tiny",
        "--seq-len",
        "16",
        "--batch-size",
        "4",
        "--n-iters",
        "2",
        "--warmup-steps",
        "1",
        "--data",
        f"text:{corpus}",
        "--workers",
        "0",
        "--output",
        csv_path,
    )
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert int(row["data_bytes_read"]) > 0 and row["data"] == f"text:{corpus}"
    samples = read_samples(corpus)
    tokenizer = train_tokenizer(samples, 1000)
    packed = TokenSet(samples, tokenizer, 16, causal=True)
    assert packed[0][0].shape == (16,) and packed[0][1].shape == (16,)
    assert torch.equal(packed[0][0][1:], packed[0][1][:-1])  # targets: the next tokens
    lines = TokenSet(samples, tokenizer, 16, causal=False)
    assert len(lines) == 200 and lines[0][1].item() == samples.labels[0]
    assert max(int(x.max()) for x, *_ in lines) < 1000  # ids below the model's vocabulary
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n[1, 2]\n')
    out = run_cli(
        "train",
        "--accelerator",
        "cpu",
        "--model",
        "llm_tiny",
        "--data",
        f"text:{bad}",
        "--output",
        csv_path,
    )
    assert out.returncode == 2 and "bad.jsonl:2 is not a JSON object" in out.stderr


def test_encoded_batches_travel_packed_and_decode_like_the_cpu_path(images):
    """The GPU-decode path's packing through real worker processes (bytes and the crop each
    worker drew from the JPEG header), decoded here on the CPU."""
    from torch.utils.data import DataLoader

    from dlbench.data.device_images import DeviceImages
    from dlbench.data.images import EncodedBatch, ImageFolderSet, collate_encoded

    index = scan_images(images)
    dataset = ImageFolderSet(index, (32, 32), decode_on_gpu=True)
    loader = DataLoader(dataset, batch_size=16, num_workers=2, collate_fn=collate_encoded)
    packed, labels, _sizes, failed = next(iter(loader))
    assert isinstance(packed, EncodedBatch) and packed.flat.dtype == torch.uint8
    assert int(packed.lengths.sum()) == packed.flat.numel() and packed.files.shape == (16,)
    assert packed.boxes.shape == (16, 4) and packed.flips.dtype == torch.bool
    assert bool((packed.boxes[:, 2:] <= 40).all()) and bool((packed.boxes >= 0).all())
    assert packed.sizes.tolist() == [[40, 40]] * 16 and bool(packed.engine_ready.all())
    assert labels.shape == (16,) and failed.numel() == 0
    device = DeviceImages(torch.device("cpu"), torch.float32, torch.contiguous_format, (32, 32))
    batch = device.decode(packed)
    assert batch.shape == (16, 3, 32, 32) and batch.dtype == torch.float32
    assert -3 < float(batch.mean()) < 3


def test_the_jpeg_header_gives_the_size_nvjpeg_decodes(tmp_path):
    """Workers draw each crop from the size in the file's header: it must be the decoded size
    (baseline and progressive, with EXIF before the frame), and no header is a ValueError."""
    from PIL import Image
    from torchvision.io import decode_jpeg

    from dlbench.data.crop import jpeg_size

    for progressive in (False, True):
        path = tmp_path / f"p{progressive}.jpg"
        exif = Image.Exif()
        exif[0x010E] = "x" * 300  # an APP1 segment before the frame header
        Image.new("RGB", (37, 23), (9, 99, 199)).save(
            path, quality=90, progressive=progressive, exif=exif
        )
        data = path.read_bytes()
        decoded = decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        assert jpeg_size(data) == (23, 37) == tuple(decoded.shape[1:])
    for bad in (b"", b"\x89PNG\r\n", b"\xff\xd8\xff\xe0\x00\x10" + bytes(8), data[:40]):
        with pytest.raises(ValueError):
            jpeg_size(bad)


def test_the_jpeg_engines_are_offered_baseline_colour_files_only(tmp_path):
    """Workers flag the files nvJPEG's hardware batched decode takes (baseline, three
    components); a batch with any other file goes to torchvision's call, which sorts them."""
    from PIL import Image

    from dlbench.data.crop import jpeg_frame

    cases = {"baseline": ("RGB", False, True), "progressive": ("RGB", True, False),
             "grey": ("L", False, False)}  # fmt: skip
    for name, (mode, progressive, ready) in cases.items():
        path = tmp_path / f"{name}.jpg"
        Image.new(mode, (37, 23), 99).save(path, quality=90, progressive=progressive)
        frame = jpeg_frame(path.read_bytes())
        assert (frame.height, frame.width, frame.engine_ready) == (23, 37, ready), name


def test_the_direct_nvjpeg_call_says_unavailable_where_there_is_no_gpu():
    """Without a GPU with JPEG engines, creating the hardware decoder is a clean Unavailable
    (the feed then uses torchvision's call), not a crash in the library."""
    from dlbench.data import nvjpeg

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    with pytest.raises(nvjpeg.Unavailable):
        nvjpeg.HardwareJpeg()


def _claiming(data: bytes, width: int, height: int) -> bytes:
    """A real image's bytes with its header patched to claim another size."""
    out = bytearray(data)
    if data.startswith(b"\x89PNG"):
        out[16:24] = width.to_bytes(4, "big") + height.to_bytes(4, "big")
    else:
        at = out.index(b"\xff\xc0")
        out[at + 5 : at + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(out)


def test_a_header_that_claims_a_bomb_of_pixels_is_a_bad_file(tmp_path):
    """A 60,000 x 60,000 header in a 2 kB JPEG made a CPU worker allocate 10.8 GB before the
    decode failed (and the run recorded the model as out of memory)."""
    from PIL import Image

    from dlbench.data.crop import MAX_IMAGE_PIXELS, header_size

    for kind in ("JPEG", "PNG"):
        path = tmp_path / f"small.{kind.lower()}"
        Image.new("RGB", (37, 23), (9, 99, 199)).save(path, kind)
        data = path.read_bytes()
        assert header_size(data) == (23, 37)
        with pytest.raises(ValueError, match="60000x60000 pixels claimed"):
            header_size(_claiming(data, 60_000, 60_000))
        assert 60_000**2 > MAX_IMAGE_PIXELS >= 13_000**2  # a 169-megapixel scan still reads


def test_the_batched_crop_draws_torchvisions_boxes_and_matches_its_output():
    """The GPU path's crop of a whole batch against the CPU path's per-image augmentation,
    from the same seed: same boxes and flips, pixels within interpolation tolerance."""
    from torchvision.transforms import RandomResizedCrop

    from dlbench.data.crop import batched_crop, draw_crop
    from dlbench.data.images import augmentation

    gen = torch.Generator().manual_seed(3)
    shapes = [(375, 500), (300, 280), (500, 375), (224, 224)]
    coarse = [torch.randint(0, 256, (1, 3, 6, 8), generator=gen).float() for _ in shapes]
    images = [
        F.interpolate(c, size=s, mode="bicubic").clamp(0, 255).round().to(torch.uint8)[0]
        for c, s in zip(coarse, shapes)
    ]
    torch.manual_seed(11)
    boxes, flips = zip(*(draw_crop(*shape) for shape in shapes))
    torch.manual_seed(11)
    for (height, width), box in zip(shapes, boxes):
        top, left, h, w = RandomResizedCrop.get_params(torch.empty(1, height, width),
                                                       (0.08, 1.0), (3 / 4, 4 / 3))  # fmt: skip
        assert box == (left, top, left + w, top + h)
        torch.rand(1)  # the flip's draw
    torch.manual_seed(11)
    cpu = torch.stack([augmentation((224, 224))(img) for img in images]).float()
    ours = batched_crop(images, torch.tensor(boxes), torch.tensor(flips), (224, 224))
    difference = (ours - cpu).abs()
    assert ours.shape == (4, 3, 224, 224)
    assert float(difference.mean()) < 0.3 and float(difference.max()) <= 1.0  # grey levels
    for k, ((x0, y0, x1, y1), flip) in enumerate(zip(boxes, flips)):  # the filter, unrounded
        crop = images[k][None, :, y0:y1, x0:x1].float()
        exact = F.interpolate(crop, size=(224, 224), mode="bilinear", antialias=True)[0]
        exact = exact.flip(-1) if flip else exact
        assert float((ours[k] - exact).abs().max()) < 0.01
    same = [images[0]] * 3  # a batch of one size takes the stacked path: the same pixels
    stacked = batched_crop(same, torch.tensor(boxes[:1] * 3), torch.tensor(flips[:1] * 3),
                           (224, 224))  # fmt: skip
    assert torch.allclose(stacked[0], ours[0], atol=0.5)


CROP_CHECK = """
import torch
from torchvision.transforms.functional import normalize
from dlbench.data.crop import draw_crop
from dlbench.data.crop_kernel import crop_normalise, image_table, interleaved_table
from dlbench.data.device_images import DeviceImages
from dlbench.data.images import IMAGENET_MEAN, IMAGENET_STD, augmentation
gen = torch.Generator().manual_seed(5)
shapes = [(60, 80), (45, 40), (80, 60), (24, 32), (30, 90)]
images = [torch.randint(0, 256, (3, h, w), generator=gen, dtype=torch.uint8) for h, w in shapes]
images[1] = images[1].permute(1, 2, 0).contiguous().permute(2, 0, 1)  # HWC storage, CHW view
size = (22, 32)  # rows: two whole tiles of the kernel and a part of one
torch.manual_seed(7)
boxes, flips = zip(*(draw_crop(*shape) for shape in shapes))
torch.manual_seed(7)
cpu = torch.stack([augmentation(size)(img) for img in images]).float() / 255
expected = normalize(cpu, IMAGENET_MEAN, IMAGENET_STD)
step = 1 / (255 * min(IMAGENET_STD))  # one grey level, normalised
for dtype, fmt in ((torch.float32, torch.contiguous_format), (torch.bfloat16, torch.channels_last)):
    at = DeviceImages(torch.device("cpu"), dtype, fmt, size)
    out = torch.empty(len(images), 3, *size, dtype=dtype, memory_format=fmt)
    crop_normalise(image_table(images), torch.tensor(boxes), torch.tensor(flips), out,
                   at.scale.view(-1), at.shift.view(-1))
    difference = (out.float() - expected).abs()
    slack = 0.02 if dtype == torch.bfloat16 else 1e-4
    assert float(difference.max()) <= step + slack, float(difference.max())
    assert float(difference.mean()) < 0.3 * step, float(difference.mean())
    # the same images end to end in one buffer, as the JPEG engines write them
    stored = [img.permute(1, 2, 0).reshape(-1) for img in images]
    lengths = torch.tensor([len(pixels) for pixels in stored])
    buffer = torch.cat(stored)
    table = interleaved_table(buffer, torch.cumsum(lengths, 0) - lengths, torch.tensor(shapes))
    packed = torch.empty_like(out)
    crop_normalise(table, torch.tensor(boxes), torch.tensor(flips), packed, at.scale.view(-1),
                   at.shift.view(-1))
    assert torch.equal(packed, out)
print("same")
"""


@pytest.mark.e2e
def test_the_gpu_crop_kernel_gives_the_cpu_paths_normalised_crops():
    """The Triton kernel that crops, flips and normalises the GPU path's decoded batch (run by
    Triton's interpreter on the CPU: a subprocess, as the interpreter is chosen at import),
    against the CPU path's torchvision augmentation and Normalize from the same seed: images
    of several sizes, one stored HWC, into float32 NCHW and bf16 channels_last; within one
    grey level (rounding), and on average within a third of one; and the same output from the
    images end to end in one interleaved buffer, as the JPEG engines write them."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": "src"}
    done = subprocess.run([sys.executable, "-c", CROP_CHECK], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]


def test_a_corrupt_file_inside_a_gpu_batch_is_counted_and_skipped(images):
    """The GPU path's decode (run here on the CPU): a file that fails inside a batch is
    counted once and its place and crop taken by another image; the batch keeps its size."""
    from dlbench.data.device_images import DeviceImages
    from dlbench.data.images import EncodedBatch

    files = sorted(images.rglob("*.jpg"))[:4]
    raws = [torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8) for f in files]
    raws[2] = torch.frombuffer(bytearray(b"\xff\xd8\xff" + bytes(300)), dtype=torch.uint8)
    lengths = torch.tensor([r.numel() for r in raws])
    boxes = torch.tensor([[0.0, 0.0, 40.0, 40.0]] * 4)
    flips = torch.tensor([False, False, True, False])
    sizes, ready = torch.tensor([[40, 40]] * 4), torch.ones(4, dtype=torch.bool)
    files = torch.tensor([10, 11, 12, 13])
    decoded = torch.zeros(4, dtype=torch.bool)
    packed = EncodedBatch(torch.cat(raws), lengths, files, boxes, flips, sizes, ready, decoded)
    device = DeviceImages(torch.device("cpu"), torch.float32, torch.contiguous_format, (32, 32))
    batch = device.decode(packed)
    assert batch.shape == (4, 3, 32, 32) and device.failed_files == {12}
    device.decode(packed)
    assert device.failed_files == {12}  # tried twice, counted once


def test_a_file_without_a_frame_header_is_skipped_by_the_gpu_path_workers(tmp_path):
    """With GPU decode the worker reads the header to draw the crop: a file that has none is
    counted as failed there and the next readable file takes its place."""
    from dlbench.data.images import ImageFolderSet

    root = tmp_path / "imgs"
    make_images(root, ImageSpec(4, 40, 40, classes=1), workers=1)
    first = sorted(root.rglob("*.jpg"))[0]
    first.write_bytes(first.read_bytes()[:30])  # the start marker survives, no frame header
    index = scan_images(root)
    dataset = ImageFolderSet(index, (32, 32), decode_on_gpu=True)
    at = index.files.index(first)
    (raw, file, *_crop_and_frame), _label, size, failed = dataset[at]
    assert failed == [at] and file == (at + 1) % len(index.files) and size == raw.numel()


def _processes_naming(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (forked DataLoader workers keep the run's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.e2e
def test_sigterm_stops_a_data_fed_run_its_staging_thread_and_its_workers(images, tmp_path):
    """Stopped mid-window, a run fed by loader workers and the staging thread exits 143 with
    one line, writes no row, and leaves no worker process behind."""
    import signal
    import subprocess
    import sys

    from tests.conftest import cli_env

    csv = tmp_path / "stopped-run.csv"
    args = [sys.executable, "-m", "dlbench", "train", *TINY_IMAGE, "--batch-size", "8"]
    args += ["--n-iters", "100000", "--warmup-steps", "0", "--data", f"folder:{images}"]
    args += ["--workers", "2", "--output", str(csv)]
    proc = subprocess.Popen(args, env=cli_env(), stderr=subprocess.PIPE, text=True)
    try:
        # the run and its two workers, once they exist: a loaded host takes its time to start them
        deadline = time.monotonic() + 120
        while len(_processes_naming(str(csv))) < 3 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        assert len(_processes_naming(str(csv))) >= 3
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "SIGTERM" in err and "Traceback" not in err and not csv.exists()
    deadline = time.monotonic() + 10
    while _processes_naming(str(csv)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_naming(str(csv))


@pytest.mark.parametrize(
    ("dtype", "fmt"),
    [(torch.float32, torch.contiguous_format), (torch.bfloat16, torch.channels_last)],
)
def test_images_are_normalised_into_the_models_dtype_and_layout(dtype, fmt):
    """One kernel from 0-255 pixels (uint8 from the workers, float from the crop) to the model's
    input: ImageNet's mean and deviation, as torchvision's Normalize after ToTensor."""
    from torchvision.transforms.functional import normalize

    from dlbench.data.device_images import DeviceImages
    from dlbench.data.images import IMAGENET_MEAN, IMAGENET_STD

    pixels = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    device = DeviceImages(torch.device("cpu"), dtype, fmt, (8, 8))
    expected = normalize(pixels.float() / 255, IMAGENET_MEAN, IMAGENET_STD)
    for given in (pixels, pixels.float()):
        got = device.normalise(given)
        assert got.dtype == dtype and got.is_contiguous(memory_format=fmt)
        tolerance = 1e-5 if dtype == torch.float32 else 2e-2
        assert torch.allclose(got.float(), expected, atol=tolerance)


def test_a_loader_row_has_a_verdict_on_its_window_like_every_row():
    """The published H100 loader row had none: a loader's window is judged as a model's is
    (long enough, enough batches), with its reasons."""
    from dlbench.data.loader_rows import loader_row
    from dlbench.data.throughput import LoaderResult
    from dlbench.workloads import InputShape

    shape = InputShape(224, 224, 0)

    def judged(batches: int, seconds: float) -> dict:
        result = LoaderResult(8, batches, 256 * batches, 10**6 * batches, seconds, 1.0)
        return loader_row("folder:/x", "resnet50", 256, shape, "gpu", result, 2.0).row()

    assert judged(260, 3.0)["verdict"] == "valid"
    short = judged(260, 1.0)
    assert (short["verdict"], short["verdict_reasons"]) == ("invalid", "short_window")
    assert judged(5, 3.0)["verdict_reasons"] == "few_steps"
