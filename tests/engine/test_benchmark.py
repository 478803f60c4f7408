"""The whole engine (real Lightning Fabric) on a workload whose step cost is known."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from dlbench.config import RunConfig
from dlbench.engine.benchmark import run_benchmark
from dlbench.engine.plan import make_plan
from dlbench.errors import UserError
from dlbench.workloads import Batch, InputShape, Workload, register_workload
from dlbench.workloads.base import cross_entropy

STEP_S = 0.1
WARMUP_S = 0.8
OVERHEAD_S = 0.06  # the tiny model's own step on a busy 2-core CI machine (seen: 23 ms)


class SlowModel(nn.Module):
    """A model whose forward takes a known time; slower while warming up."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        time.sleep(WARMUP_S if self.calls <= 2 else STEP_S)
        return self.fc(x.flatten(1)[:, :4])


def _batch(batch_size: int, shape: InputShape, gen: torch.Generator) -> Batch:
    return Batch(torch.randn(batch_size, 3, 2, 2, generator=gen), torch.zeros(batch_size).long())


register_workload(
    Workload(
        name="test_sleep",
        summary="known step time",
        family="vision",
        sample_unit="image",
        build=lambda shape: SlowModel(),
        make_batch=_batch,
        loss=cross_entropy,
    )
)


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_engine_measures_known_step_time_and_skips_warmup(mode):
    config = RunConfig.of(
        model="test_sleep", mode=mode, accelerator="cpu", batch_size=6, n_iters=8, warmup_steps=2
    )
    m = run_benchmark(make_plan(config))
    assert m.loop.steps == 8
    assert STEP_S <= m.loop.stats.median_s < STEP_S + OVERHEAD_S  # a sleep is never shorter
    assert max(m.loop.step_times_s) < WARMUP_S - 0.3  # no warm-up step counted
    assert m.samples == 6 * 8
    assert m.loop.warmup_s >= 2 * WARMUP_S


def test_plan_refuses_what_the_device_cannot_run():
    with pytest.raises(UserError, match="--precision"):
        make_plan(RunConfig.of(model="resnet50", accelerator="cpu", precision="16-mixed"))
    with pytest.raises(UserError, match="--devices"):
        make_plan(RunConfig.of(model="resnet50", accelerator="cpu", devices="100000"))
    with pytest.raises(UserError, match="--width"):
        make_plan(RunConfig.of(model="vit", accelerator="cpu", width=200))
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="--accelerator"):
            make_plan(RunConfig.of(model="resnet50", accelerator="gpu"))


def test_synthetic_batches_are_made_on_the_device_that_holds_them(monkeypatch):
    """A batch drawn by the host's generator, then copied, cost seconds at the sizes that
    --batch-size auto probes: resident batches are drawn by a generator on the run's device."""
    from types import SimpleNamespace

    from dlbench.engine.scenarios import session

    asked: list[str] = []
    real = torch.Generator

    def generator(device="cpu"):
        asked.append(str(device))
        return real()  # no other device here: draw on the host, keep what was asked for

    plan = make_plan(RunConfig.of(model="timm:test_resnet", accelerator="cpu", batch_size=2))
    fabric = SimpleNamespace(device=torch.device("cuda", 0), to_device=lambda t: t)
    fmt = torch.contiguous_format
    monkeypatch.setattr(torch, "Generator", generator)
    made = session.synthetic_batches(
        plan.config, plan.workload, plan.shape, plan.precision, fmt, fabric
    )
    assert asked == ["cuda:0"] and len(made) == session.DISTINCT_BATCHES
    asked.clear()
    session.make_batches(plan.workload, plan.shape, 2, 0, fmt)  # --data-on host, the bare loop's
    assert asked == ["cpu"]


class DivergedModel(nn.Module):
    """A model whose outputs are NaN: arithmetic gone wrong (an FP8 scale, an fp16 overflow)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1)[:, :4]) * float("nan")


register_workload(
    Workload(
        name="test_diverged",
        summary="NaN outputs",
        family="vision",
        sample_unit="image",
        build=lambda shape: DivergedModel(),
        make_batch=_batch,
        loss=cross_entropy,
    )
)


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_a_row_whose_last_step_is_not_finite_is_invalid_whatever_its_speed(mode, csv_path):
    from dlbench.run import execute
    from tests.conftest import read_rows

    config = RunConfig.of(model="test_diverged", mode=mode, accelerator="cpu", batch_size=2,
                          n_iters=10, warmup_steps=1, output=csv_path)  # fmt: skip
    assert execute(config) == 0
    [row] = read_rows(csv_path)
    assert row["last_step_finite"] == "False" and row["verdict"] == "invalid"
    assert "non_finite_loss" in row["verdict_reasons"].split(";")
    assert (row.get("final_loss") == "nan") == (mode == "train")
    fine = csv_path.with_name("ok.csv")
    finite = RunConfig.of(model="test_sleep", mode=mode, accelerator="cpu", batch_size=2,
                          n_iters=3, warmup_steps=1, output=fine)  # fmt: skip
    assert execute(finite) == 0
    [ok] = read_rows(fine)
    assert ok["last_step_finite"] == "True"
