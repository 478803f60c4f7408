"""The run's cache that outlives it (dlbench.caches), and whether its compiled graphs came from
there: inductor counts, per process, the graphs it found in its cache and those it compiled."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dlbench.caches import (
    CACHE_VARIABLE,
    cache_root_problem,
    default_cache_root,
    shown_path,
    use_caches,
)
from dlbench.config import RunConfig
from dlbench.console import stderr
from dlbench.errors import UserError


def compile_counts() -> tuple[int, int]:
    """(graphs served from the cache, graphs compiled) so far in this process."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"]
    return inductor["fxgraph_cache_hit"], inductor["fxgraph_cache_miss"]


def compile_cache_column(before: tuple[int, int]) -> dict[str, str]:
    """`compile_cache` since `before`: hit (every graph from the cache), miss (none), partial,
    or empty where nothing was compiled."""
    hits, misses = (now - then for now, then in zip(compile_counts(), before))
    if not hits and not misses:
        return {"compile_cache": ""}
    return {"compile_cache": "partial" if hits and misses else "hit" if hits else "miss"}


def open_caches(config: RunConfig, environment: Mapping[str, object]) -> Path | None:
    """`dlbench.caches.use_caches` for the run: a --cache-dir that cannot hold the caches is
    the user's error (one line, exit 2); DLBENCH_CACHE_DIR or the default folder that cannot
    (a container user without a home, a mount the user may not write) costs one warning line
    naming it and a cold run. The folder, or None for a cold run."""
    if not config.acceleration.cache:
        use_caches(None, environment, enabled=False)
        return None
    given = config.acceleration.cache_dir
    root = given or default_cache_root()
    problem = cache_root_problem(root)
    if problem and given is not None:
        raise UserError(f"--cache-dir: cannot use {shown_path(root)}: {problem}")
    if not problem:
        try:
            return use_caches(root, environment)
        except OSError as exc:  # the subfolder of this GPU and software
            problem = exc.strerror or type(exc).__name__
    stderr.print(f"[yellow]warning:[/yellow] {cold_cache_warning(root, problem)}")
    use_caches(None, environment, enabled=False)
    return None


def cold_cache_warning(root: Path, problem: str) -> str:
    """One line: which cache folder cannot be used, who named it, why, and what follows."""
    named = (
        f"{CACHE_VARIABLE}={shown_path(root)}"
        if os.environ.get(CACHE_VARIABLE)
        else (f"the default cache folder {shown_path(root)}")
    )
    return f"{named} cannot hold the caches ({problem}): this run compiles and tunes cold"


def cache_variable_warning() -> str | None:
    """The warning every run would give for an unusable DLBENCH_CACHE_DIR (a sweep says it
    once, before its points); None where it is unset or usable."""
    if not os.environ.get(CACHE_VARIABLE):
        return None
    root = default_cache_root()
    problem = cache_root_problem(root)
    return cold_cache_warning(root, problem) if problem else None
