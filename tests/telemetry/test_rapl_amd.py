"""RAPL on a fake sysfs tree (real files), and amdsmi through a module with its function names."""

from __future__ import annotations

import types

import pytest

from dlbench.telemetry.amd import AmdSmiBackend
from dlbench.telemetry.rapl import RaplReader


def _zone(root, name, label, energy, max_range=1000):
    zone = root / name
    zone.mkdir()
    (zone / "name").write_text(label)
    (zone / "energy_uj").write_text(str(energy))
    (zone / "max_energy_range_uj").write_text(str(max_range))
    return zone


def test_rapl_sums_packages_and_dram_and_handles_wraparound(tmp_path):
    pkg = _zone(tmp_path, "intel-rapl:0", "package-0", 900)
    dram = _zone(tmp_path, "intel-rapl:0:1", "dram", 100)
    _zone(tmp_path, "intel-rapl:0:0", "core", 5)  # inside the package already
    reader = RaplReader(tmp_path)
    reader.begin()
    (pkg / "energy_uj").write_text("100")  # wrapped: 900 -> 1000 -> 100 is 200 uJ
    (dram / "energy_uj").write_text("400")
    assert reader.end_j() == pytest.approx((200 + 300) / 1e6)


def test_rapl_unreadable_is_refused(tmp_path):
    with pytest.raises(PermissionError):
        RaplReader(tmp_path)


def _fake_amdsmi(power=450.0, energy_ticks=1000, resolution=15.3):
    smi = types.SimpleNamespace()
    smi.AmdSmiTemperatureType = types.SimpleNamespace(HOTSPOT=1)
    smi.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT=0)
    smi.AmdSmiClkType = types.SimpleNamespace(GFX=0, MEM=1)
    smi.amdsmi_init = lambda: None
    smi.amdsmi_shut_down = lambda: None
    smi.amdsmi_get_processor_handles = lambda: ["h0", "h1"]
    smi.amdsmi_get_gpu_board_info = lambda h: {"product_name": f"MI300X {h}"}
    smi.amdsmi_get_power_info = lambda h: {
        "socket_power": "N/A",
        "current_socket_power": power,
        "power_limit": 750,
    }
    smi.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": 99, "umc_activity": 30}
    smi.amdsmi_get_gpu_vram_usage = lambda h: {"vram_used": 1024, "vram_total": 196608}
    smi.amdsmi_get_temp_metric = lambda h, kind, metric: 70
    smi.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100 if kind == 0 else 1300}
    smi.amdsmi_get_energy_count = lambda h: {
        "energy_accumulator": energy_ticks,
        "counter_resolution": resolution,
    }
    smi.amdsmi_get_gpu_process_list = lambda h: [1, 2]
    return smi


def test_amdsmi_backend_reads_the_same_fields():
    backend = AmdSmiBackend([1], amdsmi=_fake_amdsmi())
    assert backend.device_names == ["MI300X h1"]
    reading = backend.read(0, 1.0)
    assert reading.power_w == 450.0 and reading.sm_clock_mhz == 2100
    assert reading.gpu_util == 99 and reading.temp_c == 70
    assert backend.energy_j(0) == pytest.approx(1000 * 15.3 / 1e6)
    assert backend.power_limit_w(0) == 750 and len(backend.gpu_processes(0)) == 2
