"""`dlbench gate`: base against head, interleaved, fresh processes. The order is drawn per
round and every row says where it ran; a side that cannot start is refused before anything runs;
e2e with real processes on the CPU: a plugin workload against itself reads `same`, against a
copy whose step sleeps 10 % longer `slower`, and a side that fails a point is named."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from dlbench.analysis.gate_verdicts import gate_comparison
from dlbench.errors import UserError
from dlbench.results.store import CsvStore
from dlbench.sweep.gate import Side, interleaved
from dlbench.sweep.plan_file import parse_plan
from tests.conftest import ROOT, cli_env, read_rows, run_cli

PLAN = """name: gate-test
runs:
  - models: [steady]
    modes: [infer]
    batch_sizes: [2]
    precisions: ["32"]
    fixed: {accelerator: cpu, n_iters: 20, warmup_steps: 1, max_host_busy: 100}
    tags: {purpose: latency}
"""  # steady's step is a sleep: the suite's other workers' load is not what the gate is tried on
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


def _runs(side: str, figures, point: str = "p0", **columns) -> list[dict[str, object]]:
    """A side's rounds of one point, as the gate tags them."""
    from tests.analysis.rows import benchmark_row

    tags = {"side": side, "gate_point": point}
    return [
        benchmark_row(model="vit", samples_per_s=f, round=k, **tags, **columns)
        for k, f in enumerate(figures)
    ]


def _verdicts(tmp_path, base, head, labels=("vit train",)):
    from tests.analysis.rows import write_rows

    folder = tmp_path / f"gate{len(list(tmp_path.glob('gate*')))}"
    folder.mkdir()
    result = gate_comparison(
        write_rows(folder / "g.base.csv", base),
        write_rows(folder / "g.head.csv", head),
        5.0,
        list(labels),
    )
    return result, list(result.table["verdict"])


def _failed(side: str, point: str = "p0", error: str = "boom") -> dict[str, object]:
    from tests.analysis.rows import benchmark_row

    return {**benchmark_row(model="vit", side=side, gate_point=point), "status": "error",
            "error": error, "samples_per_s": ""}  # fmt: skip


def test_a_point_a_side_failed_is_that_sides_failure_not_a_slowdown(tmp_path):
    ok = _runs("head", [1000.0, 1001.0, 1002.0])
    result, [verdict] = _verdicts(tmp_path, [_failed("base")], ok)
    assert verdict.startswith("failed (error, base): boom")
    result, [verdict] = _verdicts(tmp_path, _runs("base", [1000.0, 1001.0, 1002.0]),
                                  [_failed("head")])  # fmt: skip
    assert verdict.startswith("failed (error, head)") and result.exit_code() == 1


def test_one_failed_run_among_good_rounds_fails_the_gate_naming_its_side(tmp_path):
    """A head that crashed once in three rounds is not compared on the two that finished."""
    head = [*_runs("head", [1000.0, 1001.0]), _failed("head", error="killed by SIGKILL")]
    result, [verdict] = _verdicts(tmp_path, _runs("base", [1000.0, 1001.0, 1002.0]), head)
    assert verdict == "failed (error, head): killed by SIGKILL" and result.exit_code() == 1


def test_a_gate_whose_every_run_failed_fails_with_a_line_a_point(tmp_path):
    """Every point of the plan has its line, whatever its rows: none left out as unmatched."""
    labels = ("vit train", "resnet50 infer")
    base = [_failed("base", "p0"), _failed("base", "p1")]
    head = [_failed("head", "p0"), _failed("head", "p1")]
    result, verdicts = _verdicts(tmp_path, base, head, labels)
    assert verdicts == ["failed (error, base): boom"] * 2 and result.exit_code() == 1
    assert list(result.table["point"]) == list(labels)
    result, verdicts = _verdicts(tmp_path, [], _runs("head", [1000.0]), labels)
    assert verdicts == ["failed (error, base): no row"] * 2 and result.exit_code() == 1


def test_a_side_invalid_for_more_than_noise_is_a_line_naming_why_and_which(tmp_path):
    bound = _runs("base", [900.0, 905.0], verdict="invalid", verdict_reasons="host_bound")
    result, [verdict] = _verdicts(tmp_path, bound, _runs("head", [1000.0, 1001.0]))
    assert verdict == "invalid (host_bound, base)" and result.exit_code() == 1
    noisy = _runs("base", [1000.0, 1004.0], verdict="invalid", verdict_reasons="noisy")
    result, [verdict] = _verdicts(tmp_path, noisy, _runs("head", [1000.0, 1002.0]))
    assert verdict in ("same", "inconclusive") and "base noisy" in result.table["note"].item()


def test_a_head_that_ran_eager_is_the_heads_one_line_not_a_missing_base(tmp_path):
    """cuda_graphs as run is part of a row's experiment: compare would split the point into a
    head line nobody measured on the base and a base line the head is missing."""
    base = _runs("base", [1000.0, 1001.0, 999.0], cuda_graphs=True)
    head = _runs("head", [700.0, 701.0, 699.0], cuda_graphs=False, graph_fallback="a host sync")
    result, [verdict] = _verdicts(tmp_path, base, head)
    assert verdict == "slower"
    note = result.table["note"].item()
    assert "head ran cuda_graphs False where base ran True" in note
    assert "head ran graph_fallback a host sync" in note


def test_a_run_whose_child_exited_0_without_a_row_is_that_sides_failure(tmp_path, capsys):
    """A docker side that does not mount --output's folder writes its rows in its container:
    the child exits 0 and the gate's side file gets nothing. That run failed."""
    from dlbench.subprocesses import ChildResult
    from dlbench.sweep.gate import GateRun

    def nothing(args, timeout_s, command, log):
        return ChildResult(0, "one row appended to /workdir/results/g.head.csv")

    sides = (Side("base", ("a",)), Side("head", ("b",)))
    gate = GateRun(parse_plan(PLAN), sides, 2, tmp_path / "g.csv", launch=nothing,
                   workers=lambda side, t: _FakeQueue(0))  # fmt: skip
    gate.run()
    rows = read_rows(tmp_path / "g.base.csv")
    assert [r["status"] for r in rows] == ["error", "error"]
    assert "wrote no row" in rows[0]["error"]
    assert "failed: it wrote no row" in capsys.readouterr().err
    result = gate_comparison(gate.side_csv(sides[0]), gate.side_csv(sides[1]), 5.0, ["steady"])
    assert result.table["verdict"].item().startswith("failed (error, base)")
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
    assert done.returncode == 1 and "failed (error, head)" in done.stdout, done.stdout
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


class _InterruptedQueue(_FakeQueue):
    """A worker whose start is interrupted (Ctrl-C while its imports run)."""

    def start(self) -> int:
        raise KeyboardInterrupt


def test_an_interrupt_while_the_second_side_starts_stops_the_first_sides_worker(tmp_path):
    from dlbench.sweep.gate import GateRun

    queues = {}

    def workers(side, timeout_s):
        queues[side.name] = (_InterruptedQueue if side.name == "head" else _FakeQueue)(2)
        return queues[side.name]

    sides = (Side("base", ("old",)), Side("head", ("new",)))
    gate = GateRun(parse_plan(PLAN), sides, 1, tmp_path / "g.csv", workers=workers)
    with pytest.raises(KeyboardInterrupt):
        gate.run()
    assert queues["base"].closed and queues["head"].closed


@pytest.mark.e2e
def test_a_timed_out_container_side_leaves_no_container_running(tmp_path):
    """A side given as `docker run ... IMAGE` whose run hangs past the plan's timeout, in a
    container that ignores SIGTERM: the gate stops the client and kills the container by the
    name it gave it; nothing of it is left (a GPU would be)."""
    import stat

    state = tmp_path / "containers"
    state.mkdir()
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir()
    docker.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                      "runpy.run_module('tests.fake_docker', run_name='__main__')\n")  # fmt: skip
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("name: gate-test", "name: gate-test\ntimeout_s: 3"))
    side = f"{docker} run -i --rm fake:image"
    env = {**cli_env(), "FAKE_DOCKER_STATE": str(state)}
    done = run_cli("gate", plan, "--base", side, "--head", side, "--rounds", "1",
                   "--output", tmp_path / "gate.csv", env=env, timeout=300)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # both sides' runs timed out
    assert "failed (timeout" in done.stdout
    left = [p for p in state.glob("*.pid") if _alive(int(p.read_text()))]
    for pid_file in left:  # the test's own clean-up, where the gate failed to
        os.kill(int(pid_file.read_text()), 9)
    assert left == [] and not list(state.glob("*.pid"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
