"""The GEMV's launch shapes: the tables dlbench ships per GPU model and Triton release, a
tuning's candidates before them, and what each matrix ran, named in the row."""

from __future__ import annotations

import json

import pytest

from dlbench.workloads import launch_shapes
from dlbench.workloads.launch_shapes import LaunchShape, matrix_key
from tests.workloads.test_decode_kernels import interpreted


def test_a_launch_shape_reads_and_writes_its_name():
    assert LaunchShape.parse("N4K2048w8") == LaunchShape(4, 2048, 8)
    assert LaunchShape(16, 256, 4).name == "N16K256w4"
    assert LaunchShape(2, 512, 4).launch() == {"BLOCK_N": 2, "BLOCK_K": 512, "num_warps": 4}
    for junk in ("", "N4K2048", "4K2048w8", "NxK2048w8", "N4K2048w8x"):
        with pytest.raises(ValueError):
            LaunchShape.parse(junk)


def test_a_matrix_is_named_by_its_shape_dtype_and_what_is_fused():
    assert matrix_key(2048, 8192, "torch.bfloat16", True, False, True) == (
        "2048x8192 bfloat16 gated+residual"
    )
    assert matrix_key(37, 300, "float16", False, False, False) == "37x300 float16 plain"


def test_every_packaged_table_names_matrices_and_shapes_the_kernel_can_launch():
    """A shipped table is read as a run reads it: each section a Triton release, each shape one
    of the autotuner's candidates (a shape outside them was never compiled or timed)."""
    pytest.importorskip("triton")
    from dlbench.workloads.decode_kernels import candidate_shapes

    tables = sorted(launch_shapes.PACKAGED.glob("*.json"))
    assert tables, "no packaged table"
    for path in tables:
        table = json.loads(path.read_text())
        assert launch_shapes.table_path(table["gpu_name"]) == path
        for release, section in table["triton"].items():
            assert launch_shapes.triton_release(release) == release
            shapes = launch_shapes.packaged_shapes(table["gpu_name"], f"{release}.0")
            assert shapes and set(shapes.values()) <= set(candidate_shapes())
            assert set(shapes) == set(section["matrices"])
            assert section["tuned_by"].startswith("benchmarks/tune_gemv.py at ")


def test_a_run_takes_the_packaged_shape_of_its_gpu_and_triton_release_only():
    key = "3072x2048 bfloat16 norm"
    assert launch_shapes.shape_for("NVIDIA H200", "3.6.0", key) == (
        LaunchShape(4, 512, 4),
        "packaged",
    )
    assert launch_shapes.shape_for("NVIDIA H200", "3.7.1", key) is None  # another code generator
    assert launch_shapes.shape_for("NVIDIA A100-SXM4-80GB", "3.6.0", key) is None
    assert launch_shapes.shape_for("", "3.6.0", key) is None  # a CPU
    tried = LaunchShape(1, 256, 4)
    with launch_shapes.trying({key: tried}):  # a tuning's candidate comes before the table
        assert launch_shapes.shape_for("NVIDIA H200", "3.6.0", key) == (tried, "tuning")
    assert launch_shapes.shape_for("NVIDIA H200", "3.6.0", key)[1] == "packaged"


def test_the_row_names_each_matrixs_shape_and_where_the_shapes_came_from():
    launch_shapes.forget_launches()
    assert launch_shapes.launch_columns() == {}
    launch_shapes.note_launch("3072x2048 bfloat16 norm", "N4K512w4", "packaged")
    launch_shapes.note_launch("2048x2048 bfloat16 residual", "N1K1024w4", "autotuned")
    assert launch_shapes.launch_columns() == {
        "gemv_tuning": "packaged+autotuned",
        "gemv_launch_shapes": "2048x2048 bfloat16 residual=N1K1024w4; "
        "3072x2048 bfloat16 norm=N4K512w4",
    }
    launch_shapes.forget_launches()  # the next run of a sweep worker starts empty
    assert launch_shapes.ran_shapes() == {}


GEMV_WITH_A_CHOSEN_SHAPE = """
import torch
from dlbench.workloads import decode_kernels, launch_shapes
torch.manual_seed(0)
w = torch.randn(37, 300, dtype=torch.float16) / 300**0.5
x = torch.randn(300, dtype=torch.float16)
with launch_shapes.trying({"37x300 float16 plain": launch_shapes.LaunchShape(16, 256, 4)}):
    y = decode_kernels.gemv(x, w, False, None, 1e-6, None, None)
assert launch_shapes.launch_columns() == {"gemv_tuning": "tuning",
                                          "gemv_launch_shapes": "37x300 float16 plain=N16K256w4"}
print(float((y.float() - w.float() @ x.float()).abs().max()))
"""


@pytest.mark.slow
def test_the_gemv_op_launches_the_chosen_shape_and_records_it():
    """The op itself (Triton's interpreter on the CPU): a matrix with a chosen shape is
    launched with it, not timed by the autotuner, computes the product and says what ran."""
    assert interpreted(GEMV_WITH_A_CHOSEN_SHAPE) < 2e-2
