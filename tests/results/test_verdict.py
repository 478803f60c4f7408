"""A verdict on every row: each reason from the row's own columns, notes kept apart, the advice
line, --strict's exit code, and the hardware reasons read through the fake NVML."""

from __future__ import annotations

import pytest

from dlbench.config import RunConfig
from dlbench.results.advice import advice
from dlbench.results.verdict import reasons_and_notes, verdict_columns
from dlbench.run import execute
from tests import fake_nvml
from tests.conftest import read_rows, tiny_run

CLEAN = {
    "status": "ok",
    "window_s": 5.2,
    "min_time_s": 5.0,
    "step_time_stdev_pct": 1.0,
    "host_bound": False,
    "throttle_reasons": "",
    "other_gpu_processes": 0,
    "sm_clock_below_base_pct": 0.0,
    "energy_quality": "ok",
}
# the reasons a busy host (the suite's other workers) gives a CPU row, none of them the GPU's
HOST_NOISE = {"noisy", "drift", "host_busy"}


@pytest.mark.parametrize(
    ("change", "reason", "hint"),
    [
        ({"status": "oom"}, "failed", "error column"),
        ({"window_s": 3.0}, "short_window", "--min-time"),
        ({"step_time_stdev_pct": 7.5}, "noisy", "--max-noise"),
        ({"step_time_stdev_pct": 2.0, "max_noise_pct": 1.0}, "noisy", "--max-noise"),
        ({"throughput_interval_pct": 7.0, "step_outliers": 0, "steps": 40}, "noisy",
         "--max-time"),
        ({"throughput_interval_pct": 2.0, "step_outliers": 0, "steps": 40, "max_noise_pct": 1.0},
         "noisy", "--max-noise"),
        ({"throughput_interval_pct": 0.5, "step_outliers": 1, "step_outlier_time_pct": 4.0,
          "steps": 40}, "noisy", "quiet machine"),
        ({"throughput_interval_pct": 0.5, "step_outliers": 0, "step_time_drift_pct": -6.0,
          "steps": 40}, "drift", "warm up longer"),
        ({"host_bound": True}, "host_bound", "--cuda-graphs"),
        ({"throttle_reasons": "hw_thermal sw_power_cap"}, "hardware_slowdown", "cooling"),
        ({"other_gpu_processes": 2}, "other_processes", "alone"),
        ({"sm_clock_below_base_pct": 30.0}, "low_clock", "clocks"),
        ({"energy_quality": "short window: 0.30 s < 4.00 s"}, "energy_short_window",
         "--min-time"),
        ({"harness_ratios": "0.9989 0.4930 1.0011"}, "repeats_disagree", "repeat 2 read 0.4930"),
        ({"accelerator": "cpu", "host_other_cpu_pct": 35.0}, "host_busy", "used 35 % of this"),
    ],
)  # fmt: skip
def test_each_reason_makes_a_row_invalid_and_says_what_to_change(change, reason, hint):
    row = {**CLEAN, **change}
    reasons, _ = reasons_and_notes(row)
    assert reasons == [reason]
    columns = verdict_columns(row)
    assert columns["verdict"] == "invalid" and columns["verdict_reasons"] == reason
    line = advice(row)
    assert line.startswith("INVALID:") and hint in line


def test_a_row_that_passes_every_check_is_valid_and_notes_stay_apart():
    assert verdict_columns(CLEAN) == {
        "verdict": "valid",
        "verdict_reasons": "",
        "verdict_notes": "",
    }
    capped = {**CLEAN, "throttle_reasons": "sw_power_cap", "throttle_pct": 64.0,
              "graph_fallback": "RuntimeError: x", "gpu_processes_hidden": True}  # fmt: skip
    columns = verdict_columns(capped)
    assert columns["verdict"] == "valid"
    assert columns["verdict_notes"] == "power_capped;processes_hidden;eager_fallback"
    assert advice(capped).startswith("VALID (note: ran at its software power cap in 64 %")


@pytest.mark.parametrize(
    ("ratios", "named"),
    [
        ("1.0030 0.4984 0.9959", [2]),  # issue 63's FSDP row: the median read 0.9959
        ("0.9989 0.4930 1.0011", [2]),
        ("1.0084 1.0023 1.0029", []),  # a valid 2-GPU row of 505e587
        ("1.000 1.015 0.990", []),  # within 2 % of the others' range
        ("1.000 1.050", [1, 2]),  # two repeats 5 % apart: neither can be trusted
        ("1.0 1.0 1.0 0.9", [4]),
        ("1.0002", []),
    ],
)
def test_a_repeat_outside_the_others_ratios_is_named_and_no_median_hides_it(ratios, named):
    from dlbench.results.verdict import disagreeing_repeats, harness_ratios

    row = {**CLEAN, "harness_ratios": ratios, "harness_ratio": 1.0}
    assert disagreeing_repeats(harness_ratios(row)) == named
    assert (verdict_columns(row)["verdict"] == "invalid") == bool(named)
    for k in named:
        assert f"repeat {k} read" in advice(row)


@pytest.mark.e2e
def test_strict_exits_4_on_an_invalid_row_and_keeps_it(csv_path):
    out = tiny_run("--strict", "--max-noise", "0.0001", "--max-time", "0.5", output=csv_path)
    assert out.returncode == 4, out.stderr
    [row] = read_rows(csv_path)
    assert row["verdict"] == "invalid" and "noisy" in row["verdict_reasons"]
    assert out.stdout.startswith("INVALID:")


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    def make(**gpu: object) -> None:
        path = tmp_path / "nvml.json"
        fake_nvml.write_state(path, [gpu])
        for key, value in fake_nvml.environment(path).items():
            monkeypatch.setenv(key, value)

    return make


def _row(tmp_path) -> dict[str, str]:
    """A run of `steady` (20 ms steps, a test workload) whose noise target a quiet CPU meets
    at once; on a busy one it measures for at most --max-time."""
    config = RunConfig.of(
        model="steady", accelerator="cpu", batch_size=2, n_iters=10, warmup_steps=1,
        min_time=0.3, max_noise=50.0, max_time=3.0, output=tmp_path / "rows.csv",
    )  # fmt: skip
    assert execute(config) == 0
    return read_rows(tmp_path / "rows.csv")[-1]


@pytest.mark.parametrize(
    ("gpu", "reason"),
    [
        ({"throttle": 0x40}, "hardware_slowdown"),
        ({"processes": 1}, "other_processes"),
        ({"sm_clock": 1000, "base_clock": 1590}, "low_clock"),
    ],
)
def test_the_hardware_reasons_come_from_the_gpus_telemetry(fake_gpu, tmp_path, gpu, reason):
    fake_gpu(**gpu)
    row = _row(tmp_path)
    assert row["verdict"] == "invalid" and reason in row["verdict_reasons"].split(";")


def test_a_power_capped_gpu_is_a_note_and_idle_power_is_the_baseline(fake_gpu, tmp_path):
    fake_gpu(throttle=0x4, power_w=250.0)
    row = _row(tmp_path)
    assert row["verdict_notes"] == "power_capped", row
    assert set(filter(None, row["verdict_reasons"].split(";"))) <= HOST_NOISE, row
    assert float(row["idle_power_w"]) == pytest.approx(250.0)  # the fake draws it always
    energy, above = float(row["energy_j"]), float(row["energy_above_idle_j"])
    assert abs(above) < 0.1 * energy  # constant power: almost nothing above idle
    assert row["energy_scope"].startswith("gpu_board")
    assert row["gpu_pcie_link"] == "gen5 x16" and row["gpu_app_clocks_locked"] == "False"


def test_application_clocks_moved_from_their_default_are_recorded(fake_gpu, tmp_path):
    fake_gpu(app_clock=1410, base_clock=1590)
    assert _row(tmp_path)["gpu_app_clocks_locked"] == "True"


def test_a_clock_a_step_under_the_default_is_no_low_clock_and_one_far_under_is():
    """On Hopper the default application clock is the highest: a sample one clock step under
    it with no reason set (the power cap stepped between samples) is no low clock."""
    from dlbench.telemetry.base import Reading
    from dlbench.telemetry.window import below_base_pct

    def at(mhz: float) -> Reading:
        return Reading(0.0, 0, 600.0, 50, 99, 40, 1000.0, mhz, 2619)

    assert below_base_pct([at(1980), at(1965), at(1965)], 1980.0) == 0.0
    assert below_base_pct([at(1980), at(1500), at(1965), at(1410)], 1980.0) == 50.0


def test_a_clock_under_the_default_at_the_power_cap_is_no_low_clock(fake_gpu, tmp_path):
    fake_gpu(sm_clock=1755, base_clock=1980, throttle=0x4)  # an H100 at its cap: boost default
    row = _row(tmp_path)
    assert float(row["sm_clock_below_base_pct"]) == 0.0
    assert set(filter(None, row["verdict_reasons"].split(";"))) <= HOST_NOISE


@pytest.mark.parametrize(
    ("fed", "hint", "not_said"),
    [
        ({}, "more --workers, or --decode gpu", None),
        ({"data_decode": "cpu"}, "more --workers, or --decode gpu", None),
        ({"data_decode": "gpu"}, "more --workers", "--decode gpu"),
        ({"data_decode": "gpu", "cuda_graphs": "True"}, "without --cuda-graphs", "--workers"),
    ],
)  # fmt: skip
def test_an_input_bound_row_is_told_what_feeds_it_faster_given_how_it_was_fed(fed, hint, not_said):
    line = advice({**CLEAN, "input_bound": "True", "data_wait_pct": 96, **fed})
    assert hint in line
    assert not_said is None or not_said not in line


def test_a_row_that_waited_for_its_loader_is_valid_and_says_it_measured_the_loader():
    """Being bound by its input is what a row fed by a real pipeline measures (issue 88): a
    note, not a fault; the GPU's own idle time (host_bound) under it is no fault either."""
    row = {**CLEAN, "host_bound": "True", "input_bound": "True", "data_wait_pct": 40}
    assert verdict_columns(row) == {
        "verdict": "valid", "verdict_reasons": "", "verdict_notes": "input_bound",
    }  # fmt: skip
    line = advice(row)
    assert (
        line.startswith("VALID (note: the GPU waited for its loader 40 %") and "--workers" in line
    )


def test_a_busy_host_invalidates_a_cpu_row_from_just_past_its_limit_and_never_a_gpu_row():
    from dlbench.config.limits import HOST_OTHER_CPU_PCT

    cpu = {**CLEAN, "accelerator": "cpu"}
    assert verdict_columns({**cpu, "host_other_cpu_pct": HOST_OTHER_CPU_PCT})["verdict"] == "valid"
    busy = {**cpu, "host_other_cpu_pct": HOST_OTHER_CPU_PCT + 0.1}
    assert verdict_columns(busy)["verdict_reasons"] == "host_busy"
    gpu = {**CLEAN, "accelerator": "cuda", "host_other_cpu_pct": 90.0}  # the GPU's figure
    assert verdict_columns(gpu)["verdict"] == "valid"
    assert verdict_columns({**cpu, "host_other_cpu_pct": ""})["verdict"] == "valid"  # unknown
    assert verdict_columns({**busy, "world_size": 2})["verdict"] == "valid"  # a rank beside it
    # --max-host-busy: the row's own limit, 0 included (any other load)
    assert verdict_columns({**busy, "max_host_busy_pct": 50.0})["verdict"] == "valid"
    quiet = {**cpu, "host_other_cpu_pct": 0.4, "max_host_busy_pct": 0.0}
    assert verdict_columns(quiet)["verdict_reasons"] == "host_busy"
