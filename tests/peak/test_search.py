"""The shape search on a fake device: it finds the best shape, measures it again for longer,
stays within its time budget, and skips shapes that cannot run."""

from __future__ import annotations

import pytest

from dlbench.peak.search import matmul_shapes, search_best


class FakeDevice:
    """Rates by shape, and a clock that each measurement advances by its own length."""

    def __init__(self, rates: dict[tuple, float], fails: tuple = ()) -> None:
        self.rates, self.fails, self.now, self.calls = rates, fails, 0.0, []

    def clock(self) -> float:
        return self.now

    def rate(self, shape: tuple, seconds: float) -> float:
        self.now += seconds + 0.01  # allocation and the untimed calls cost a little too
        self.calls.append((shape, seconds))
        if shape in self.fails:
            raise RuntimeError("CUDA out of memory")
        capped = 0.85 if seconds >= 1.0 else 1.0  # a long measurement runs at the power cap
        return self.rates.get(shape, 100.0) * capped


def test_the_best_shape_wins_and_is_measured_again_for_longer():
    shapes = [(8192,) * 3, (4096,) * 3, (16384, 16384, 8192)]
    fake = FakeDevice({(4096,) * 3: 700.0, (8192,) * 3: 650.0})
    best = search_best(shapes, fake.rate, budget_s=10.0, probe_s=0.1, sustain_s=1.0,
                       clock=fake.clock)  # fmt: skip
    assert best.shape == (4096, 4096, 4096) and best.rate == 700.0  # the best rate measured
    assert best.sustained == pytest.approx(0.85 * 700.0)  # the longer one, beside it
    assert best.tried == 3 and best.shape_text == "4096x4096x4096"
    assert fake.calls[-1] == ((4096,) * 3, 1.0)  # the sustained measurement, on the best shape


def test_the_search_stops_within_its_budget():
    shapes = matmul_shapes(16384)
    fake = FakeDevice({})
    best = search_best(shapes, fake.rate, budget_s=0.6, probe_s=0.1, sustain_s=0.2,
                       clock=fake.clock)  # fmt: skip
    assert fake.now <= 0.6 + 0.11  # one probe may end at the edge, never a second
    assert 1 <= best.tried < len(shapes)


def test_a_budget_too_small_for_any_probe_still_measures_one_shape():
    fake = FakeDevice({})
    best = search_best([(64, 64, 64), (128, 128, 128)], fake.rate, 0.0, 0.1, 0.1, fake.clock)
    assert best.tried == 1 and best.shape == (64, 64, 64)


def test_shapes_that_cannot_run_are_skipped_and_none_runs_means_no_figure():
    fake = FakeDevice({(1024,) * 3: 300.0}, fails=((16384,) * 3,))
    best = search_best([(16384,) * 3, (1024,) * 3], fake.rate, 10.0, 0.1, 0.5, fake.clock)
    assert best.shape == (1024, 1024, 1024) and best.tried == 1
    assert search_best([(16384,) * 3], fake.rate, 10.0, 0.1, 0.5, fake.clock) is None


@pytest.mark.parametrize("largest", [64, 512, 16384])
def test_candidate_shapes_fit_the_largest_side(largest):
    shapes = matmul_shapes(largest)
    assert shapes and all(max(s) <= largest for s in shapes)
    assert len(set(shapes)) == len(shapes)
