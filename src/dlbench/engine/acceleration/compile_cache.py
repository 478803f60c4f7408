"""The run's cache that outlives it (dlbench.caches), and whether its compiled graphs came from
there: inductor counts, per process, the graphs it found in its cache and those it compiled."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dlbench.caches import use_caches
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
    """`dlbench.caches.use_caches` for the run: a --cache-dir that cannot be made is the user's
    error (one line, exit 2); the default folder that cannot (a container user without a home)
    costs only a warning and a cold run. The folder, or None for a cold run."""
    try:
        folder = use_caches(config.acceleration.cache_dir, environment, config.acceleration.cache)
        return folder if config.acceleration.cache else None
    except OSError as exc:
        if config.acceleration.cache_dir is not None:
            why = exc.strerror or exc
            raise UserError(
                f"--cache-dir: cannot use {config.acceleration.cache_dir}: {why}"
            ) from None
        stderr.print(
            f"[yellow]warning:[/yellow] no cache folder ({exc.strerror or exc}): this run "
            "compiles and tunes cold; set --cache-dir or DLBENCH_CACHE_DIR"
        )
        use_caches(None, environment, enabled=False)
        return None
