"""`dlbench gate`: base against head, interleaved, fresh processes. The order is drawn per
round and every row says where it ran; a side that cannot start is refused before anything runs;
e2e with real processes on the CPU: a plugin workload against itself reads `same`, against a
copy whose step sleeps 10 % longer `slower`, and a side that fails a point is named."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from dlbench.analysis.gate_verdicts import gate_comparison
from dlbench.errors import UserError
from dlbench.results.store import CsvStore
from dlbench.sweep.gate import Side, interleaved
from dlbench.sweep.plan_file import parse_plan
from tests.conftest import read_rows, run_cli

PLAN = """name: gate-test
runs:
  - models: [steady]
    modes: [infer]
    batch_sizes: [2]
    precisions: ["32"]
    fixed: {accelerator: cpu, n_iters: 20, warmup_steps: 1}
    tags: {purpose: latency}
"""
DLBENCH = f"{sys.executable} -m dlbench"


def test_each_round_runs_every_point_on_both_sides_in_an_order_drawn_anew():
    plan = parse_plan(PLAN.replace("[2]", "[2, 4]"))
    sides = (Side("base", ("a",)), Side("head", ("b",)))
    runs = interleaved(plan.points(), sides, rounds=6, seed=3)
    assert [r.order for r in runs] == list(range(1, 25))
    pairs = Counter((r.point.label, r.side.name, r.round) for r in runs)
    assert set(pairs.values()) == {1} and len(pairs) == 2 * 2 * 6  # each once a round
    firsts = [runs[i].side.name for i in range(0, 24, 2)]
    assert {"base", "head"} <= set(firsts)  # A B and B A both occur
    assert interleaved(plan.points(), sides, 6, seed=3) == runs  # seeded: the same again
    assert runs[0].tags["side"] in ("base", "head") and runs[5].tags["round"] == "1"


@pytest.mark.parametrize("text", ["", "   ", "python -c 'unclosed"])
def test_a_side_that_is_no_command_is_refused_naming_the_flag(text):
    with pytest.raises(UserError, match="--head: "):
        Side.parse("head", text)


def test_a_side_that_does_not_start_a_dlbench_is_refused():
    with pytest.raises(UserError, match="--base: /nonexistent/python .*cannot start"):
        Side.parse("base", "/nonexistent/python -m dlbench").check()
    with pytest.raises(UserError, match="does not start a dlbench"):
        Side.parse("base", f"{sys.executable} -c pass").check()
    assert Side.parse("base", DLBENCH).check().startswith("dlbench ")


def _gate(tmp_path, head: str, *extra: str, rounds: int = 5):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    out = tmp_path / "gate.csv"
    done = run_cli("gate", plan, "--base", DLBENCH, "--head", head, "--rounds", str(rounds),
                   "--output", out, *extra, timeout=900)  # fmt: skip
    return done, [read_rows(tmp_path / f"gate.{side}.csv") for side in ("base", "head")]


@pytest.mark.e2e
def test_a_workload_against_itself_reads_same_and_the_rows_show_their_order(tmp_path):
    done, (base, head) = _gate(tmp_path, DLBENCH)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "none slower beyond 5%" in done.stdout and " same" in done.stdout
    assert len(base) == len(head) == 5
    order = sorted(int(r["gate_order"]) for r in base + head)
    assert order == list(range(1, 11))
    assert {r["round"] for r in base} == {str(k) for k in range(5)}
    assert {r["side"] for r in base} == {"base"} and {r["side"] for r in head} == {"head"}


@pytest.mark.e2e
def test_a_copy_whose_step_sleeps_10_pct_longer_reads_slower_and_is_named(tmp_path):
    slower = f"env DLBENCH_TEST_STEP_SCALE=1.1 {DLBENCH}"
    done, _ = _gate(tmp_path, slower, "--markdown")
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = [x for x in done.stdout.splitlines() if "| steady" in x]
    cells = [c.strip() for c in line.strip("|").split("|")]
    change, low, high = (float(c) for c in cells[5:8])
    # 20 ms against 22 ms a step: -9.1 %, inside the change's interval (a loaded host's own
    # overhead moves the point figure a little: -8.5 % on CI's 2 cores)
    assert "slower" in cells and low <= -100 / 11 <= high and -12 < change < -6, line
    assert "1 slower beyond 5%" in done.stdout


@pytest.mark.e2e
def test_a_side_that_cannot_start_ends_in_one_line_and_nothing_is_measured(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    out = tmp_path / "gate.csv"
    done = run_cli("gate", plan, "--base", DLBENCH, "--head", "/nonexistent/dlbench",
                   "--output", out)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") <= 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: --head: /nonexistent/dlbench")
    assert not list(tmp_path.glob("gate.*.csv")) or all(
        not CsvStore(p).rows() for p in tmp_path.glob("gate.*.csv")
    )
    (tmp_path / "gate.base.csv").write_text("earlier,rows\n1,2\n")
    again = run_cli("gate", plan, "--base", DLBENCH, "--head", DLBENCH, "--output", out)
    assert again.returncode == 2 and "holds an earlier gate's rows" in again.stderr


def test_a_point_a_side_failed_is_that_sides_failure_not_a_slowdown(tmp_path):
    from tests.analysis.rows import benchmark_row, write_rows

    ok = [benchmark_row(model="vit", samples_per_s=1000.0 + k, round=k) for k in range(3)]
    failed = {**benchmark_row(model="vit"), "status": "error", "error": "boom", "samples_per_s": ""}
    base = write_rows(tmp_path / "g.base.csv", [failed])
    head = write_rows(tmp_path / "g.head.csv", ok)
    [line] = gate_comparison(base, head, 5.0).table.to_dict("records")
    assert line["verdict"].startswith("failed (error, base)")
    both = write_rows(tmp_path / "h.base.csv", ok)
    head_failed = write_rows(tmp_path / "h.head.csv", [failed])
    result = gate_comparison(both, head_failed, 5.0)
    assert result.table["verdict"].item().startswith("failed (error, head)")
    assert result.exit_code() == 1


@pytest.mark.e2e
def test_each_side_forks_its_runs_from_one_worker_and_one_killed_mid_run_is_replaced(tmp_path):
    """A forked run starts without imports (startup_s near 0, where a fresh process pays
    seconds); the head's worker killed during its first run leaves that run's failure row, named,
    and a fresh worker runs the rest. Every run's output is kept."""
    killed = tmp_path / "killed-once"
    head = f"env DLBENCH_TEST_KILL_PARENT_ONCE={killed} {DLBENCH}"
    done, (base, head_rows) = _gate(tmp_path, head, rounds=3)
    assert killed.exists(), done.stdout + done.stderr
    [failed] = [r for r in head_rows if r["status"] != "ok"]
    assert "killed by SIGKILL" in failed["error"]
    fine = [r for r in base + head_rows if r["status"] == "ok"]
    assert len(fine) == 5 and all(float(r["startup_s"]) < 0.5 for r in fine)
    assert all(float(r["process_wall_s"]) < 30 for r in fine)
    assert len(list((tmp_path / "gate.logs").glob("*.log"))) == 6


class _FakeQueue:
    """A side's worker as the gate sees it (sweep.worker_queue.WorkerQueue's face)."""

    def __init__(self, protocol: int) -> None:
        self.protocol, self.tasks, self.closed = protocol, [], False

    def start(self) -> int:
        return self.protocol

    def submit(self, task) -> None:
        self.tasks.append(task)

    def wait(self):
        from dlbench.subprocesses import ChildResult
        from dlbench.sweep.worker_queue import Ended

        task = self.tasks[-1]
        _write_row(task.args)
        return [Ended(task, ChildResult(0, "ok"), 0.1)]

    def close(self) -> None:
        self.closed = True


def _write_row(args: list[str]) -> None:
    from tests.analysis.rows import benchmark_row

    output = args[args.index("--output") + 1]
    CsvStore(Path(output)).append(benchmark_row(model="steady"))


def test_a_side_whose_dlbench_has_no_command_line_worker_runs_fresh_processes(tmp_path, capsys):
    from dlbench.sweep.gate import GateRun

    launched, queues = [], {}

    def launch(args, timeout_s, command, log):
        launched.append(command[0])
        _write_row(args)
        from dlbench.subprocesses import ChildResult

        return ChildResult(0, "ok")

    def workers(side, timeout_s):
        queues[side.name] = _FakeQueue(2 if side.name == "head" else 1)  # base: an old release
        return queues[side.name]

    sides = (Side("base", ("old",)), Side("head", ("new",)))
    gate = GateRun(parse_plan(PLAN), sides, 2, tmp_path / "g.csv", launch=launch, workers=workers)
    gate.run()
    assert launched == ["old", "old"]  # the base side's runs, each a fresh process
    assert len(queues["head"].tasks) == 2 and queues["head"].closed
    assert queues["base"].closed  # stopped once it said it takes no command lines
    assert "base: its dlbench forks no runs" in capsys.readouterr().err
    assert all(t.log.parent == tmp_path / "g.logs" for t in queues["head"].tasks)
