"""The CUDA-graph policy: capture the step after its eager warm-up, keep the graph only where its
replays are not slower than the eager step (a capture can change what a step computes), and
account capture as warm-up, never as window time."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from dlbench import gpu_turn
from dlbench.console import stderr
from dlbench.engine.acceleration.graphs import GraphedStep
from dlbench.engine.timing.loop import LoopResult, LoopSettings
from dlbench.engine.timing.timer import DeviceTimer, synchronize
from dlbench.signals import raise_if_interrupted


@dataclass(frozen=True)
class GraphWarmup:
    """What capturing the step cost before the loop: eager warm-up and capture, in seconds and
    steps, added to the loop's warm-up; and what the row says ran."""

    seconds: float = 0.0
    steps: int = 0
    graphed: bool | None = None
    fallback: str = ""

    def merge(self, loop: LoopResult) -> LoopResult:
        """The loop's result with this warm-up in its warm-up columns."""
        return dataclasses.replace(
            loop,
            warmup_s=loop.warmup_s + self.seconds,
            warmup_steps=loop.warmup_steps + self.steps,
        )

    def columns(self) -> dict[str, object]:
        """Why capture failed, and what it cost."""
        if self.graphed is None:
            return {}
        return {"graph_fallback": self.fallback, "capture_s": self.seconds}

    def as_run(self) -> dict[str, object]:
        """`cuda_graphs` as it ran (False after a failed capture), over the setting asked for."""
        return {} if self.graphed is None else {"cuda_graphs": self.graphed}


GRAPHED_LOOP_WARMUP = 2  # replays before the window, after capture (and the power pre-roll)
GRAPH_CHECK_STEPS = 5  # eager steps and replays timed against each other after capture
GRAPH_CHECK_ROUNDS = 3  # the replays must lose every round to be dropped
# Replays slower than the eager step by more than this (a different computation, not noise):
# the run measures the eager step.
GRAPH_SLOWER_PCT = 20.0


def _seconds_per_step(step, device: torch.device, first: int) -> float:
    """Fastest of GRAPH_CHECK_STEPS steps on the loop's own step timer (warm-up, never in the
    window): contention only adds time, a different computation slows every step."""
    timer = DeviceTimer(device, GRAPH_CHECK_STEPS + 1)
    synchronize(device)
    timer.mark()
    for i in range(first, first + GRAPH_CHECK_STEPS):
        step(i)
        timer.mark()
    return min(timer.step_times_s())


def faster_of(session, graphed: GraphedStep, first: int) -> tuple[GraphedStep, int]:
    """The graphed step, unless its replays run slower than the eager step, and how many
    steps the check ran. A capture can change what a step computes (transformers builds a full
    attention mask while a stream captures, where eager passes none, and halves distilbert's
    throughput), and a graph that costs time is no way to measure the GPU. A different
    computation is slower in every round; a burst of contention on a shared host (two CI
    cores under a parallel test suite) in one."""
    if not graphed.graphed:
        return graphed, 0
    graphed.step(first)  # the first replay after capture, untimed
    ran = 1
    for _ in range(GRAPH_CHECK_ROUNDS):
        replay = _seconds_per_step(graphed.step, session.device, first + ran)
        eager = _seconds_per_step(session.step, session.device, first + ran + GRAPH_CHECK_STEPS)
        ran += 2 * GRAPH_CHECK_STEPS
        if replay <= eager * (1 + GRAPH_SLOWER_PCT / 100):
            return graphed, ran
    reason = (
        f"the eager step ran faster ({eager * 1e3:.2f} ms against {replay * 1e3:.2f} ms replayed)"
    )
    stderr.print(f"[yellow]warning:[/yellow] {reason}; the step runs eager (cuda_graphs=False)")
    return GraphedStep(session.step, False, reason), ran


def prepare_step(session, settings: LoopSettings, cuda_graphs: bool):
    """The step the loop times: eager, or (--cuda-graphs) captured after the run's warm-up
    steps ran eager (cuDNN autotuning, lazy optimizer state); capture stays out of the window
    and its time goes into warm-up."""
    if not cuda_graphs:
        return session.step, settings, GraphWarmup()
    began = time.perf_counter()
    for i in range(settings.warmup_steps):
        raise_if_interrupted()
        gpu_turn.checkpoint()  # where another worker's turn may have this one give way
        session.step(i)
    synchronize(session.device)
    captured = session.graphed()
    # A choice by timing, made as it would be alone, in the turn the window runs in (the
    # region around the loop keeps it): the others give way once a point, not twice.
    gpu_turn.hold(gpu_turn.MEASURE)
    graphed, checked = faster_of(session, captured, settings.warmup_steps)
    synchronize(session.device)
    warm = GraphWarmup(
        time.perf_counter() - began,
        settings.warmup_steps + checked,
        graphed.graphed,
        graphed.fallback,
    )
    settings = dataclasses.replace(settings, warmup_steps=GRAPHED_LOOP_WARMUP)
    return graphed.step, settings, warm
