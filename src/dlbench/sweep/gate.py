"""Base against head on one GPU (`dlbench gate`): each point of a plan measured by two sides (two
images, two checkouts, two commands that start a dlbench), each run a fresh process, in rounds:
in every round each point runs once on each side, the two in a random order (seeded), so that a
host's drift falls on both sides alike (Google Benchmark's interleaved repetitions; pyperf's
fresh processes). Every row is tagged with its side, round and place in the order; the verdict
per configuration is analysis.compare's over the rounds, with the same exit codes.

Each side keeps one worker (its own `dlbench sweep-worker`, a container of its image where the
side is `docker run -i ...`) that imported once and forks each of its runs from it, as a sweep's
points are (sweep.worker): a fresh process for the run, without a fresh process's imports. The
other side's worker waits, holding no GPU, while one measures. A side whose dlbench has no such
worker (an older release), and points that start processes of their own (DDP ranks, a batch-size
search, serving), run as a fresh `dlbench` command each. Every run's output is kept in
`<output stem>.logs/RUN_ID.log`.

A side that cannot start is refused before anything is measured; a side that fails a point
leaves its failure row, which that point's verdict names."""

from __future__ import annotations

import random
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlbench.config.limits import DEFAULT_POINT_TIMEOUT_S
from dlbench.config.row_tags import RowTags
from dlbench.console import stderr
from dlbench.errors import UserError
from dlbench.results.label_columns import GATE_POINT, gate_point
from dlbench.results.row import failure_row, new_run_id
from dlbench.results.store import CsvStore
from dlbench.subprocesses import ChildResult, child_environment, run_child
from dlbench.sweep.containers import container_name, engine_of, named, stop_container
from dlbench.sweep.launcher import Worker, needs_own_process, point_log
from dlbench.sweep.messages import PROTOCOL
from dlbench.sweep.plan import ServePoint, SweepPlan, SweepPoint
from dlbench.sweep.worker_queue import Task, WorkerQueue

SIDES = ("base", "head")
START_TIMEOUT_S = 300.0  # a side's `--version`: an image's first start may pull nothing, but load
Point = SweepPoint | ServePoint


@dataclass(frozen=True)
class Side:
    """One side: its name and the command that starts its dlbench (`python -m dlbench`, a
    checkout's venv, `docker run ... IMAGE`)."""

    name: str
    command: tuple[str, ...]

    @classmethod
    def parse(cls, name: str, text: str) -> Side:
        """`--base TEXT` as a command; a UserError naming the flag where it is none."""
        try:
            words = tuple(shlex.split(text))
        except ValueError as exc:
            raise UserError(f"--{name}: {text!r} is no command ({exc})") from None
        if not words:
            raise UserError(f"--{name}: empty; give the command that starts its dlbench")
        return cls(name, words)

    def check(self) -> str:
        """The side's `--version` line, or a UserError where it cannot start (nothing is
        measured then)."""
        try:
            done = subprocess.run(
                [*self.command, "--version"],
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                env=child_environment(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UserError(
                f"--{self.name}: {shlex.join(self.command)} cannot start ({exc})"
            ) from None
        said = (done.stdout or done.stderr).strip().splitlines()
        if done.returncode != 0 or not said or not said[-1].startswith("dlbench"):
            why = said[-1] if said else f"exit {done.returncode}"
            raise UserError(
                f"--{self.name}: {shlex.join(self.command)} does not start a dlbench ({why})"
            )
        return said[-1]


@dataclass(frozen=True)
class Run:
    """One run of the gate: a point (and its place in the plan), a side, its round and its
    place in the order."""

    point: Point
    side: Side
    round: int
    order: int
    index: int = 0

    @property
    def tags(self) -> dict[str, str]:
        return {
            **self.point.all_tags,
            "side": self.side.name,
            "round": str(self.round),
            "gate_order": str(self.order),
            GATE_POINT: gate_point(self.index),
        }


def interleaved(
    points: Sequence[Point], sides: Sequence[Side], rounds: int, seed: int
) -> list[Run]:
    """Every point on every side, `rounds` times: round by round, point by point, the sides in
    an order drawn anew each time (A B, then B A or A B ...)."""
    draw = random.Random(seed)
    runs: list[Run] = []
    for k in range(rounds):
        for index, point in enumerate(points):
            order = list(sides)
            draw.shuffle(order)
            runs += [Run(point, side, k, len(runs) + 1 + i, index) for i, side in enumerate(order)]
    return runs


Launch = Callable[[list[str], float, list[str], Path], ChildResult]


def fresh_process(args: list[str], timeout_s: float, command: list[str], log: Path) -> ChildResult:
    """A run as a `dlbench` command of its own, its output kept in `log`; a container side's
    run in a container of its own name, killed in its engine where the run timed out."""
    engine = engine_of(command)
    if engine is None:
        return run_child(args, timeout_s, command=command, keep=log)
    name = container_name("run")
    result = run_child(args, timeout_s, command=named(command, name), keep=log)
    if result.timed_out:
        stop_container(engine, name)
    return result


def side_worker(side: Side, timeout_s: float) -> WorkerQueue:
    """The side's worker: its own dlbench's `sweep-worker`, runs forked from it one at a time;
    a container side's in a named container, killed in its engine whenever it is stopped."""

    def worker() -> Worker:
        engine = engine_of(side.command)
        if engine is None:
            return Worker(list(side.command))
        name = container_name(side.name)
        return Worker(named(side.command, name), lambda: stop_container(engine, name))

    return WorkerQueue(timeout_s, new_worker=worker)


@dataclass
class GateRun:
    """The gate's runs, one after another, each row appended to its side's CSV."""

    plan: SweepPlan
    sides: tuple[Side, Side]
    rounds: int
    output: Path
    seed: int = 0
    launch: Launch = fresh_process
    workers: Callable[[Side, float], WorkerQueue] = side_worker

    @property
    def timeout_s(self) -> float:
        return self.plan.timeout_s or DEFAULT_POINT_TIMEOUT_S

    def side_csv(self, side: Side) -> Path:
        """Where a side's rows go: `<output stem>.<side>.csv` beside the output."""
        return self.output.with_name(f"{self.output.stem}.{side.name}.csv")

    def run_log(self, run_id: str) -> Path:
        """Where a run's output is kept: `<output stem>.logs/RUN_ID.log`."""
        return point_log(self.output, run_id)

    def check_outputs(self) -> None:
        """Each side's CSV can be written and holds no rows (an earlier gate's rounds would be
        counted with this one's); a UserError naming it."""
        for side in self.sides:
            csv = self.side_csv(side)
            if csv.exists() and csv.stat().st_size > 0:
                raise UserError(
                    f"--output: {csv} holds an earlier gate's rows; give another --output, or "
                    "remove it"
                )
            CsvStore(csv, flag="--output").check_writable()

    def run(self) -> list[ChildResult]:
        """Every run of `interleaved`, in order; a run that wrote no row gets a failure row."""
        runs = interleaved(self.plan.points(), self.sides, self.rounds, self.seed)
        queues = self._start_workers()
        results = []
        try:
            for run in runs:
                began = time.monotonic()
                result, wrote = self._one(run, queues.get(run.side.name))
                outcome = "ok" if result.returncode in (0, 4) else f"failed: {result.last_line}"
                if not wrote and outcome == "ok":
                    outcome = f"failed: it wrote no row to {self.side_csv(run.side)}"
                stderr.print(
                    f"{run.order:4d}/{len(runs)} round {run.round} {run.side.name}: "
                    f"{run.point.label} ({time.monotonic() - began:.0f} s) {outcome}"
                )
                results.append(result)
        finally:
            for queue in queues.values():
                queue.close()
        return results

    def _start_workers(self) -> dict[str, WorkerQueue]:
        """Each side's worker, ready, where its dlbench has one that takes command lines; a
        side without one runs each point as a fresh process (said once)."""
        queues = {}
        for side in self.sides:
            queue = self.workers(side, self.timeout_s)
            try:
                protocol = queue.start()
            except BaseException:  # interrupted: the other side's worker goes too
                for started in [queue, *queues.values()]:
                    started.close()
                raise
            if protocol >= PROTOCOL:
                queues[side.name] = queue
                continue
            queue.close()
            stderr.print(
                f"{side.name}: its dlbench forks no runs from a worker here (an older release, or "
                "a container without stdin: docker run -i); each run starts a fresh process"
            )
        return queues

    def _one(self, run: Run, queue: WorkerQueue | None) -> tuple[ChildResult, bool]:
        """The run, and whether it wrote its row (where it wrote none: a failure row in its
        place, since a run that exited 0 without a row measured nothing the gate can read)."""
        csv, run_id = self.side_csv(run.side), new_run_id()
        args = run.point.cli_args(output=csv, run_id=run_id, tags=_as_tags(run))
        store = CsvStore(csv)
        before = len(store.rows()) if csv.exists() else 0
        log = self.run_log(run_id)
        if queue is not None and _forks(run.point):
            queue.submit(Task(run_id, args=args, log=log))
            [ended] = queue.wait()
            result = ended.result
        else:
            result = self.launch(args, self.timeout_s, list(run.side.command), log)
        wrote = (len(store.rows()) if csv.exists() else 0) > before
        if not wrote:
            columns = {**run.point.flags, "mode": run.point.mode, "run_id": run_id, **run.tags}
            status = "timeout" if result.timed_out else "error"
            why = result.last_line if result.returncode else f"it wrote no row to {csv}"
            store.append(failure_row(columns, status, why or "no row", {}))
        return result, wrote


def _forks(point: Point) -> bool:
    """Whether a point can run forked from a side's worker: a benchmark point of one process
    (serve points, DDP ranks and a batch-size search start processes of their own)."""
    if not isinstance(point, SweepPoint) or point.auto_batch:
        return False
    return not needs_own_process(point.config())


def _as_tags(run: Run) -> object:
    """The run's tags as a point's cli_args takes them (a benchmark point: RowTags; serve: a
    mapping)."""
    if isinstance(run.point, ServePoint):
        return run.tags
    return RowTags.of(run.tags)
