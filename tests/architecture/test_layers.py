"""Imports point one way: cli -> sweep, peak -> run, serve -> engine -> workloads, data, telemetry,
results -> config -> errors and the base utilities; analysis reads results beside them. Every
import of a dlbench module counts, those inside functions too."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

SRC = ROOT / "src" / "dlbench"
BASE = {
    "errors",
    "console",
    "hardware",
    "host",
    "signals",
    "subprocesses",
    "startup",
    "plugins",
    "provenance",
    "caches",
    "guard",
}
# What each part may import (besides itself and BASE).
ALLOWED: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {
        "run",
        "sweep",
        "peak",
        "serve",
        "analysis",
        "engine",
        "data",
        "workloads",
        "results",
        "config",
    },
    "run": {"engine", "data", "workloads", "telemetry", "results", "config"},
    "sweep": {"run", "serve", "engine", "workloads", "results", "config", "telemetry"},
    "peak": {"engine", "telemetry", "results", "config"},
    "serve": {"engine", "workloads", "telemetry", "results", "config"},
    "analysis": {"results", "telemetry", "config"},
    "engine": {"workloads", "data", "telemetry", "results", "config"},
    "data": {"workloads", "results", "config"},
    "workloads": {"config"},
    "telemetry": {"config"},
    "results": {"config"},
    "config": set(),
    **{name: set() for name in BASE},
    "subprocesses": {"signals"},  # a child is stopped when a signal interrupts its parent
    "guard": {"console", "signals"},  # one error line, and a signal's exit code
    "caches": {"startup"},  # a cold run's folder goes as the process leaves
}


def _part(module: str) -> str:
    """dlbench.engine.timing.loop -> engine; dlbench.config -> config."""
    return module.split(".")[1] if module.count(".") else ""


def imports_by_part() -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).with_suffix("")
        part = relative.parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.startswith("dlbench.") and _part(name) != part:
                    found.setdefault(part, set()).add((_part(name), str(relative)))
    return found


def test_imports_follow_the_layers():
    wrong = [
        f"{where} imports dlbench.{target}"
        for part, targets in imports_by_part().items()
        for target, where in targets
        if target not in ALLOWED[part] | BASE - {part}
        or (part in BASE and target not in ALLOWED[part] | {"errors"})
    ]
    assert not wrong, "\n".join(sorted(wrong))


def test_no_cycles_between_parts():
    edges = {p: {t for t, _ in ts} for p, ts in imports_by_part().items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(p for p in edges if reaches(p, p, {p}))
    assert not cycles, f"parts on an import cycle: {cycles}"


def test_nothing_but_main_imports_the_cli():
    users = {where for part, ts in imports_by_part().items() for t, where in ts if t == "cli"}
    assert users == {"__main__"}


ENGINE_ROOMS = {"timing", "acceleration", "distribution", "scenarios"}
# What runs a whole measurement and makes its rows: built on the rooms, never below them.
ENGINE_RUNNERS = {"benchmark", "validate", "autobatch", "rows"}


def test_the_engine_is_in_rooms_that_do_not_reach_up_to_its_runners():
    engine = SRC / "engine"
    rooms = {p.name for p in engine.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == ENGINE_ROOMS
    loose = {p.stem for p in engine.glob("*.py")} - {"__init__", "plan"}
    assert loose == ENGINE_RUNNERS, "a module of one job belongs in a room"
    upward = [
        f"{path.relative_to(SRC)} imports {node.module}"
        for room in ENGINE_ROOMS
        for path in (engine / room).glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.removeprefix("dlbench.engine.") in ENGINE_RUNNERS
    ]
    assert not upward, "\n".join(upward)


# engine/'s floors, lowest first: a module imports from its own floor or those below it.
ENGINE_FLOORS = (("timing",), ("acceleration",), ("distribution",), ("scenarios",), ("plan",),
                 tuple(sorted(ENGINE_RUNNERS)))  # fmt: skip


def test_no_import_climbs_inside_the_engine():
    engine = SRC / "engine"
    floor = {name: level for level, names in enumerate(ENGINE_FLOORS) for name in names}
    climbs = []
    for path in engine.rglob("*.py"):
        rel = path.relative_to(engine)
        mine = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if mine == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("dlbench.engine."):
                other = module.removeprefix("dlbench.engine.").split(".")[0]
                if floor[other] > floor[mine]:
                    climbs.append(f"{rel} imports {module}")
    assert not climbs, "\n".join(climbs)


def test_the_runner_keeps_no_branch_on_the_mode():
    """engine/benchmark.py calls the plan's scenario (engine.scenarios.kinds); what differs
    between train, infer and generate lives in their classes."""
    from dlbench.engine.scenarios.kinds import SCENARIOS

    tree = ast.parse((SRC / "engine" / "benchmark.py").read_text())
    compared = {
        leaf.value
        for node in ast.walk(tree)
        if isinstance(node, (ast.Compare, ast.If, ast.IfExp))
        for leaf in ast.walk(node.test if isinstance(node, (ast.If, ast.IfExp)) else node)
        if isinstance(leaf, ast.Constant)
    }
    assert not compared & {"train", "infer", "generate"}, compared
    assert set(SCENARIOS) == {"train", "infer", "generate"}
    assert all(name == s.name for name, s in SCENARIOS.items())


def test_the_tests_mirror_the_rooms():
    """A newcomer finds a room's tests where its code is: tests/engine/<room>, tests/cli."""
    tests = ROOT / "tests"
    assert {p.name for p in (tests / "engine").iterdir() if p.is_dir()} >= ENGINE_ROOMS
    assert (tests / "cli" / "test_cli.py").exists()
    refusals = {p.parent.name for p in tests.glob("*/test_refusals.py")}
    assert refusals >= {"cli", "engine", "results", "analysis", "data", "sweep", "peak"}


def _module_imports() -> dict[str, set[str]]:
    """Each dlbench module's dlbench imports (module level, inside functions, for typing alike),
    by module name; `from package import module` names the module."""
    names = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    found: dict[str, set[str]] = {}
    for name, path in names.items():
        targets = found.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in names)
            elif isinstance(node, ast.ImportFrom) and node.module in names and node.level == 0:
                for alias in node.names:
                    whole = f"{node.module}.{alias.name}"
                    targets.add(whole if whole in names else node.module)
        targets.discard(name)
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_module_imports_its_way_back_to_itself():
    """A circle of imports (loop and warm-up, the sweep's runner and execution, the registry
    and the models that fill it were three) means two modules that are one."""
    assert _circles(_module_imports()) == []
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_takes_another_modules_private_names():
    """What another module needs is public, or it moves to where it is used: no `from
    dlbench.x import _name`, and no `_name` reached through an object another module made
    (`self.runner._status`)."""
    taken = []
    for path in SRC.rglob("*.py"):
        where = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dlbench"):
                taken += [f"{where}: {a.name}" for a in node.names if _private(a.name)]
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "self"
            ):
                taken.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert taken == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")
