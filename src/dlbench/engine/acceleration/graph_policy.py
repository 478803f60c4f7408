"""The CUDA-graph policy: capture the step after its eager warm-up, keep the graph only where its
replays are not slower than the eager step (a capture can change what a step computes), and
account capture as warm-up, never as window time. The check's outcome is kept in the cache
folder (one per GPU, driver, torch and dlbench commit; dlbench.caches) by point: a later run of
the point takes it (`graph_choice` recorded), so a point whose eager step won captures nothing
and a graphed one is not checked again."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from dlbench.caches import keep_record, read_record
from dlbench.config import RunConfig
from dlbench.console import stderr
from dlbench.engine.acceleration.graphs import GraphedStep
from dlbench.engine.acceleration.measured_choice import point_key
from dlbench.engine.timing.loop import LoopResult
from dlbench.engine.timing.settings import LoopSettings
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
    choice: str = ""  # CHECKED here, or RECORDED by an earlier run (GraphRecord)

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
        return {
            "graph_fallback": self.fallback,
            "capture_s": self.seconds,
            "graph_choice": self.choice,
        }

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


CHECKED, RECORDED = "checked", "recorded"
GRAPH_CHOICE_FILE = "graph_choice.json"


@dataclass(frozen=True)
class GraphRecord:
    """Where a point's graph-or-eager outcome is kept: the cache folder (None: a cold run,
    nothing kept) and the point's key; only `writes` (rank 0) records."""

    folder: Path | None
    key: str
    writes: bool = True

    @classmethod
    def of(cls, config: RunConfig, folder: Path | None, rank: int = 0) -> GraphRecord:
        return cls(folder, point_key(config, "cuda_graphs"), rank == 0)

    def recalled(self) -> GraphedStep | None:
        """The outcome an earlier run of this point recorded (its step is not set), or None."""
        kept = read_record(self.folder, GRAPH_CHOICE_FILE).get(self.key)
        if not isinstance(kept, dict) or not isinstance(kept.get("graphed"), bool):
            return None
        return GraphedStep(None, kept["graphed"], str(kept.get("fallback") or ""))

    def remember(self, graphed: GraphedStep) -> None:
        if self.folder is None or not self.writes:
            return
        everything = read_record(self.folder, GRAPH_CHOICE_FILE)
        everything[self.key] = {"graphed": graphed.graphed, "fallback": graphed.fallback}
        keep_record(self.folder, GRAPH_CHOICE_FILE, everything)


def prepare_step(session, settings: LoopSettings, cuda_graphs: bool, record: GraphRecord | None):
    """The step the loop times: eager, or (--cuda-graphs) captured after the run's warm-up
    steps ran eager (cuDNN autotuning, lazy optimizer state) and checked against the eager step
    (`faster_of`), unless `record` holds an earlier run's outcome: then eager without a
    capture, or the graph unchecked. Capture stays out of the window; its time goes into
    warm-up."""
    if not cuda_graphs:
        return session.step, settings, GraphWarmup()
    began = time.perf_counter()
    for i in range(settings.warmup_steps):
        raise_if_interrupted()
        session.step(i)
    synchronize(session.device)
    recalled = record.recalled() if record is not None else None
    if recalled is not None and not recalled.graphed:
        graphed, checked = GraphedStep(session.step, False, recalled.fallback), 0
    else:
        graphed, checked = session.graphed(), 0
        if recalled is None:
            graphed, checked = faster_of(session, graphed, settings.warmup_steps)
            if record is not None and checked:  # a timed choice (a failed capture says why anew)
                record.remember(graphed)
    synchronize(session.device)
    warm = GraphWarmup(
        time.perf_counter() - began,
        settings.warmup_steps + checked,
        graphed.graphed,
        graphed.fallback,
        RECORDED if recalled is not None else CHECKED,
    )
    settings = dataclasses.replace(settings, warmup_steps=GRAPHED_LOOP_WARMUP)
    return graphed.step, settings, warm
