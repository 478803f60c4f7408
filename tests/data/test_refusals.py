"""Bad input to input data: make-data, text labels and image folders the model cannot take: one
`error:` line and exit 2 (1 for a sweep with failed points), no traceback, and the CSV it names
keeps every earlier byte."""

from __future__ import annotations

import os

import pytest

from tests.conftest import refused

S = ["--accelerator", "cpu", "--model", "mobilenet_v3", "--batch-size", "2", "--width", "32"]
S += ["--height", "32", "--n-iters", "2", "--warmup-steps", "1"]


# make-data.
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--size", "99999999x99999999"], "--size"),
        (["--size", "0x10"], "--size"),
        (["--size", "big"], "--size"),
        (["--images", "0"], "nothing to make"),
        (["--images", "-1"], "--images"),
        (["--images", "100000000000"], "--images"),
        (["--quality", "0"], "--quality"),
        (["--classes", "0"], "--classes"),
        (["--format", "gif"], "--format"),
    ],
)
def test_make_data_refuses_bad_sizes_and_counts(dlbench, tmp_path, args, needle):
    refused(dlbench("make-data", tmp_path / "set", *args), needle)
    assert not (tmp_path / "set").exists()


def test_make_data_into_a_read_only_place_is_refused(dlbench, tmp_path):
    refused(dlbench("make-data", "/proc/self/set", "--images", "2"), "/proc/self")
    afile = tmp_path / "afile"
    afile.write_text("x")
    refused(dlbench("make-data", afile, "--images", "2"), "not a folder")


def test_make_data_with_text_only_says_only_what_it_wrote(dlbench, tmp_path):
    code, out, err = dlbench("make-data", tmp_path / "set", "--images", "0", "--text-lines", "5")
    assert code == 0, err
    assert "images" not in out and "5 lines" in out
    assert not (tmp_path / "set" / "images").exists()


# text labels are checked against the model's classes before the first step.
@pytest.mark.parametrize(
    ("label", "needle"),
    [
        ("1e999", "not an integer"),
        ("7", "outside"),
        ('"x"', "not an integer"),
        ("-1", "outside"),
        ("[" * 100_000 + "]" * 100_000, "nests too deeply"),  # a RecursionError traceback
    ],
)
def test_text_labels_outside_the_model_are_refused(dlbench, kept, tmp_path, label, needle):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "a b c", "label": 0}\n' + f'{{"text": "d e", "label": {label}}}\n')
    args = ["--model", "distilbert", "--data", f"text:{corpus}", "--seq-len", "8"]
    text = [a for a in S if a not in ("--width", "--height", "32")]  # no image flags for text
    line = refused(dlbench("train", *text, *args, "--workers", "0", "--output", kept), needle)
    assert "corpus.jsonl:2" in line


def test_an_image_folder_with_more_classes_than_the_model_is_refused(dlbench, kept, tmp_path):
    from dlbench.data.make import ImageSpec, make_images

    root = tmp_path / "many"
    make_images(root, ImageSpec(1, 8, 8, classes=1), workers=1)
    jpeg = next(root.rglob("*.jpg")).read_bytes()
    for k in range(1001):
        (root / f"c{k:04d}").mkdir()
        (root / f"c{k:04d}" / "x.jpg").write_bytes(jpeg)
    refused(
        dlbench("train", *S, "--data", f"folder:{root}", "--workers", "0", "--output", kept),
        "class folders",
    )


def test_a_named_pipe_among_the_images_is_skipped_not_waited_for(tmp_path):
    from dlbench.data.images import scan_images
    from dlbench.data.make import ImageSpec, make_images

    root = tmp_path / "set"
    make_images(root, ImageSpec(4, 16, 16, classes=1), workers=1)
    os.mkfifo(root / "class_00" / "x.jpg")
    index = scan_images(root)
    assert len(index.files) == 4 and [p.name for p in index.unreadable] == ["x.jpg"]
