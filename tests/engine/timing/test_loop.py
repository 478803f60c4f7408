"""The measured loop must time what the step costs, and nothing of the warm-up."""

from __future__ import annotations

import pytest
import torch

from dlbench.engine.timing.loop import next_chunk_steps, run_measured_loop
from dlbench.engine.timing.settings import LoopSettings

CPU = torch.device("cpu")


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def begin_window(self) -> None:
        self.events.append("begin")

    def end_window(self) -> None:
        self.events.append("end")


class PlantedClock:
    """The loop's clock, moved only by the steps: each step takes exactly the time planted for
    it, so no test depends on how long a sleep lasts on a busy machine."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def steps(self, seconds):
        """A step function whose step i takes `seconds(i)` on this clock."""

        def step(i: int) -> None:
            self.now += seconds(i)

        return step


def planted(settings: LoopSettings, seconds, **kwargs):
    """The measured loop over steps of planted times."""
    clock = PlantedClock()
    return run_measured_loop(clock.steps(seconds), CPU, settings, clock=clock, **kwargs)


def test_known_step_time_is_measured_exactly():
    result = planted(LoopSettings(0, 10), lambda i: 0.02)
    assert result.steps == 10
    assert result.stats.median_s == pytest.approx(0.02)
    assert result.window_s == pytest.approx(0.2)


def test_warmup_steps_are_not_counted():
    result = planted(LoopSettings(3, 8), lambda i: 0.2 if i < 3 else 0.01)
    assert result.steps == 8
    assert result.step_times_s == pytest.approx([0.01] * 8)  # no 0.2 s warm-up step
    assert result.warmup_s == pytest.approx(0.6)
    assert result.first_step_s == pytest.approx(0.2)


def test_observer_window_wraps_only_measured_steps():
    seen: list[tuple[str, int]] = []
    recorder = Recorder()

    def step(i: int) -> None:
        seen.append((recorder.events[-1] if recorder.events else "none", i))

    run_measured_loop(step, CPU, LoopSettings(2, 3), recorder)
    assert recorder.events == ["begin", "end"]
    assert [s for s in seen if s[0] == "none"] == [("none", 0), ("none", 1)]
    assert [i for state, i in seen if state == "begin"] == [2, 3, 4]


def test_a_rare_outlier_that_moved_the_number_is_measured_past_until_it_no_longer_does():
    """nvbench's rule: a 5x first step among 5 took 44 % of the window; the loop measures on
    until that one step's share is under MAX_OUTLIER_TIME_PCT, and then stops."""
    result = planted(LoopSettings(0, 5, 30.0, 60.0), lambda i: 0.1 if i == 0 else 0.02)
    assert result.noise_met is True
    assert result.steps > 5 and result.steps % 5 == 0
    assert result.noise.outliers == 1 and result.noise.outlier_time_pct <= 1.0
    assert result.steps <= 420  # it stopped once it could: 0.08 s over 1 % is 8 s, 400 steps


def test_max_time_caps_adaptive_measuring():
    import random

    draw = random.Random(0)  # wide, independent steps: the interval narrows only as sqrt(n)
    result = planted(LoopSettings(0, 4, 0.01, 0.3), lambda i: draw.uniform(0.001, 0.02))
    assert result.noise_met is False
    assert 0.3 <= result.wall_window_s < 0.3 + 4 * 0.02  # stopped at the first chunk past it


def test_min_time_keeps_stepping_until_the_window_is_long_enough():
    result = planted(LoopSettings(0, 3, min_time_s=0.4), lambda i: 0.01)
    assert result.steps > 3
    assert 0.4 <= result.wall_window_s <= 0.4 * 1.05 + 0.01  # sized from the rate, not overshot


def test_min_time_is_met_on_the_clock_the_row_reports(monkeypatch):
    """The window the row reports (device time) reaches --min-time even when reading a chunk's
    step times costs the host time (on an H100, ~11,000 CUDA events a chunk at batch 1: the
    rows stopped at 5 s on the host's clock and reported 4.92 s, short of their own minimum)."""
    from dlbench.engine.timing import loop

    clock = PlantedClock()

    class SlowToRead(loop.DeviceTimer):
        def step_times_s(self) -> list[float]:
            clock.now += 0.1  # the host's time to read the chunk, not the device's
            return super().step_times_s()

    monkeypatch.setattr(loop, "DeviceTimer", SlowToRead)
    step = clock.steps(lambda i: 0.01)
    result = run_measured_loop(step, CPU, LoopSettings(0, 3, min_time_s=0.3), clock=clock)
    assert result.window_s >= 0.3


def test_the_stop_decision_follows_the_noisiest_rank():
    # This rank is steady (its noise settles at once); another rank's has not, so every rank
    # keeps measuring until --max-time, and all of them stop together.
    def other_rank_is_noisy(values: list[float]) -> list[float]:
        return [1.0, *values[1:]] if len(values) == 2 else values

    settings = LoopSettings(0, 8, max_noise_pct=30.0, max_time_s=0.3)
    alone = planted(settings, lambda i: 0.01)
    agreed = planted(settings, lambda i: 0.01, agree=other_rank_is_noisy)
    assert alone.noise_met is True and alone.steps == 8
    assert agreed.noise_met is False and agreed.steps > 4 and agreed.wall_window_s >= 0.3


def test_chunks_hold_whole_units():
    settings = LoopSettings(0, 4, min_time_s=0.2, steps_per_unit=4)
    result = planted(settings, lambda i: 0.005)
    assert len(result.step_times_s) % 4 == 0 and len(result.step_times_s) > 4
    assert result.steps == len(result.step_times_s) // 4  # steps count whole units
    assert result.stats.count == result.steps


def test_next_chunk_is_sized_from_the_rate_and_agreed_numbers():
    settings = LoopSettings(0, 10, min_time_s=5.0)
    assert next_chunk_steps(settings, False, 1.0, 10) == 42  # 4 s more at 10 steps/s, +5 %
    assert next_chunk_steps(settings, False, 5.0, 50) == 0
    noisy = LoopSettings(0, 10, max_noise_pct=2.0, max_time_s=3.0)
    assert next_chunk_steps(noisy, True, 1.0, 10) == 10
    assert next_chunk_steps(noisy, True, 3.5, 30) == 0  # max time spent
    assert next_chunk_steps(noisy, False, 1.0, 10) == 0  # noise settled


def test_warmup_keeps_the_device_busy_for_its_minimum_time_before_the_window():
    # NVML's power reading averages the last second: the window must not open on an idle GPU
    settings = LoopSettings(2, 3, min_warmup_s=0.3, steps_per_unit=1)
    result = planted(settings, lambda i: 0.02)
    assert result.warmup_steps > 2
    assert result.warmup_s >= 0.3
    assert result.steps == 3


def test_warmup_without_a_minimum_time_runs_exactly_its_steps():
    result = planted(LoopSettings(4, 2), lambda i: 0.01)
    assert result.warmup_steps == 4


def test_the_cyclic_collector_runs_before_the_window_and_not_inside_it():
    import gc

    enabled_at: dict[int, bool] = {}
    garbage: list[object] = []

    def step(i: int) -> None:
        enabled_at[i] = gc.isenabled()
        cycle: list[object] = []
        cycle.append(cycle)  # cyclic garbage, as a long-lived sweep worker accumulates
        garbage.append(cycle)

    run_measured_loop(step, CPU, LoopSettings(2, 5))
    assert enabled_at[0] and enabled_at[1]  # warm-up as usual
    assert not any(enabled_at[i] for i in range(2, 7))  # the window: no collector pauses
    assert gc.isenabled()  # and back on after it


def test_a_signal_whose_exception_was_swallowed_still_stops_the_loop():
    import os
    import signal as signals

    from dlbench.signals import Interrupted, interruptible

    class SwallowsInDel:  # Python prints and ignores exceptions raised inside __del__
        def __del__(self) -> None:
            os.kill(os.getpid(), signals.SIGTERM)

    def step(i: int) -> None:
        if i == 3:
            SwallowsInDel()  # the handler fires inside __del__: its Interrupted is lost

    with interruptible(), pytest.raises(Interrupted) as stopped:
        run_measured_loop(step, CPU, LoopSettings(1, 1000))
    assert stopped.value.exit_code == 143


def test_warmup_runs_on_until_the_steps_settle_and_the_row_says_so():
    # the first 30 steps run slow and ever faster (a search, an allocator growing); a fixed
    # count of 2 would open the window on them
    settings = LoopSettings(2, 5, steady_pct=10.0)
    result = planted(settings, lambda i: 0.004 + (0.02 * (30 - i) / 30 if i < 30 else 0.0))
    assert result.warmup_steady is True
    assert result.warmup_steps >= 30
    assert result.step_times_s == pytest.approx([0.004] * 5)  # no slow step in the window


def test_a_point_that_never_settles_is_measured_after_the_bound_and_says_so(monkeypatch):
    import dlbench.engine.timing.warmup as warmup

    monkeypatch.setattr(warmup, "MAX_STEADY_WARMUP_S", 0.5)

    settings = LoopSettings(2, 5, steady_pct=1.0)  # every step longer: no two chunks agree
    result = planted(settings, lambda i: 0.001 * (1 + i / 50))
    assert result.warmup_steady is False
    assert 0.5 <= result.warmup_s < 0.5 + 0.3  # the bound, and the chunk it was in


def test_warmup_steadiness_is_not_checked_without_a_target():
    result = planted(LoopSettings(4, 2), lambda i: 0.002)
    assert result.warmup_steady is None and result.warmup_steps == 4


def test_the_warm_up_before_the_window_is_long_for_sampled_power_short_for_a_counter():
    from dlbench.config import RunConfig
    from dlbench.config.limits import COUNTER_LEAD_S, POWER_AVERAGING_S
    from dlbench.engine.timing.loop import loop_settings

    config = RunConfig()
    assert loop_settings(config, "cuda", energy_counter=False).min_warmup_s == POWER_AVERAGING_S
    assert loop_settings(config, "cuda", energy_counter=True).min_warmup_s == COUNTER_LEAD_S
    assert COUNTER_LEAD_S < POWER_AVERAGING_S
    assert loop_settings(config, "cpu", energy_counter=True).min_warmup_s == 0.0
    quiet = config.replace(telemetry=False)
    assert loop_settings(quiet, "cuda", energy_counter=True).min_warmup_s == 0.0


def test_every_rank_starts_the_window_together():
    """Under DDP a rank that reaches the window first waits in the first step's collective for
    the others; on 4 H100s that wait (their collection and telemetry reads before the window)
    put 64 ms into a 66 ms step, 28.8 % spread, 0.93 of a bare DDP loop. The ranks agree
    (a collective) after the window opens and before its first step."""
    events: list[str] = []

    class Watch:
        def begin_window(self) -> None:
            events.append("begin")

        def end_window(self) -> None:
            events.append("end")

    def agree(values: list[float]) -> list[float]:
        events.append("agree")
        return values

    run_measured_loop(lambda i: events.append(f"step {i}"), CPU, LoopSettings(2, 3), Watch(), agree)
    window = events[events.index("begin") :]
    assert window[:3] == ["begin", "agree", "step 2"]
