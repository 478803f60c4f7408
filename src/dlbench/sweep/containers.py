"""A gate's side given as a container engine's `run` (`docker run ... IMAGE`, podman's): each of
its containers is named and started with an init (`--init`: the image's dlbench is not PID 1,
so signals reach it and its children are reaped), so that a run that times out, or a side's
worker the gate stops, is stopped in the engine too (`kill`): stopping the engine's client
leaves its container, and a GPU with it, running."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

ENGINES = ("docker", "podman")
STOP_TIMEOUT_S = 60.0


def engine_of(command: Sequence[str]) -> str | None:
    """The container engine a side's command runs (its program, where its next word is
    `run`), else None."""
    if len(command) < 2 or Path(command[0]).name not in ENGINES or command[1] != "run":
        return None
    return command[0]


def container_name(side: str) -> str:
    """A fresh name for one of a side's containers."""
    return f"dlbench-gate-{side}-{uuid.uuid4().hex[:10]}"


def named(command: Sequence[str], name: str) -> list[str]:
    """The engine's `run` with the container's name and an init added (kept where given)."""
    added = ["--name", name] + ([] if "--init" in command else ["--init"])
    return [command[0], command[1], *added, *command[2:]]


def stop_container(engine: str, name: str) -> None:
    """Kill the container (gone already, or never started: nothing to say)."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([engine, "kill", name], capture_output=True, timeout=STOP_TIMEOUT_S)
