"""On a GPU (skipped elsewhere; run by the device script): `dlbench peak`'s measurements on real
hardware finish within their budget and give rates a GPU can have: matmul under the datasheet's
dense figure and memory read under its bandwidth, fp8 where the GPU has it, host copies over a
PCIe link's lowest speed."""

from __future__ import annotations

import time

import pytest
import torch

from dlbench.hardware import peak_bandwidth_tb_s, peak_tflops
from dlbench.peak.measure import fp8_supported, measure_device
from dlbench.peak.search import Best

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_bounded_peak_measurement_on_this_gpu():
    device = torch.device("cuda", 0)
    began = time.perf_counter()
    found = measure_device(device, total_s=12.0, peers=[])
    assert time.perf_counter() - began < 12.0 * 1.5
    name = torch.cuda.get_device_name(device)
    for dtype in ("fp32", "tf32", "fp16", "bf16"):
        assert isinstance(found[dtype], Best) and found[dtype].rate > 1.0, dtype
    assert isinstance(found["fp8"], Best) == fp8_supported(device)
    assert found["bf16"].rate >= found["bf16"].sustained > 0
    sheet = peak_tflops(name, "bf16-mixed")
    if sheet:
        assert found["bf16"].rate < sheet[0]
    bandwidth = peak_bandwidth_tb_s(name)
    if bandwidth:
        assert 0.3 * bandwidth < found["read"].rate < bandwidth
    assert found["h2d"].rate > 4.0 and found["d2h"].rate > 4.0  # GB/s: PCIe gen3 x4 or better
    assert found["p2p"] == []  # no peer given, no pair measured
