"""Caches that outlive the process and the container: what torch.compile (inductor's graphs and
kernels, AOTAutograd) and Triton (its kernels and the decode kernels' autotuned launch shapes)
find once per GPU and software, kept under one folder (--cache-dir, DLBENCH_CACHE_DIR; a volume
in compose) in a subfolder named by the GPU, driver, torch and dlbench that made it, so that a
cache from any other is never read. `--no-cache` runs cold: a fresh folder, removed after."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dlbench.errors import warn
from dlbench.startup import at_exit

CACHE_VARIABLE = "DLBENCH_CACHE_DIR"


def default_cache_root() -> Path:
    """DLBENCH_CACHE_DIR, else the user's cache folder (XDG)."""
    given = os.environ.get(CACHE_VARIABLE)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dlbench"


def cache_root_problem(root: Path) -> str | None:
    """Why `root` cannot hold the caches (a control character in its name, a file, a folder
    no file can go in), made where it is missing; None where it can."""
    if any(ord(c) < 32 or ord(c) == 127 for c in str(root)):
        return "its name holds a control character"
    if root.exists() and not root.is_dir():
        return "it is a file, not a folder"
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".dlbench-probe.", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def shown_path(path: Path) -> str:
    """A path on one line, as a message names it (a newline as \\n)."""
    return str(path).encode("unicode_escape").decode()


def slug(text: str) -> str:
    """A GPU's or a version's name as a file name: `NVIDIA H200` -> `nvidia-h200`."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def cache_key(environment: Mapping[str, object]) -> str:
    """`<gpu>-<driver>-torch<version>-dlbench<version>-<commit>[-dirty]` from the row's
    environment columns (results.environment): what a cached kernel or tuned choice depends on;
    a tree with local changes is code of its own (results.pairing.same_code says so too)."""
    dirty = str(environment.get("dlbench_dirty")) == "True"  # its own code, apart (pairing)
    parts = [
        environment.get("gpu_name") or "cpu",
        environment.get("driver"),
        f"torch{environment.get('torch')}",
        f"dlbench{environment.get('dlbench')}",
        str(environment.get("dlbench_commit") or "")[:7] + ("-dirty" if dirty else ""),
    ]
    return "-".join(slug(str(p)) for p in parts if p)


def use_caches(root: Path | None, environment: Mapping[str, object], enabled: bool = True) -> Path:
    """Point torch.compile's and Triton's caches (Triton's autotuning results too) at this
    GPU's and software's folder under `root` (default: `default_cache_root`), or with
    `enabled=False` at a fresh folder removed at exit: every later compile in this process and
    its children reads and writes there. Returns the folder."""
    if enabled:
        folder = (root or default_cache_root()) / cache_key(environment)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="dlbench-cold-"))
        at_exit(functools.partial(shutil.rmtree, folder, ignore_errors=True))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    os.environ["TRITON_CACHE_AUTOTUNING"] = "1"
    if environment.get("gpu_name"):  # Triton compiles for a GPU alone; a CPU's import is spared
        _same_ptxas_for_every_kernel()
    return folder


def _same_ptxas_for_every_kernel() -> None:
    """Choose now the ptxas that inductor would switch Triton to the first time it compiles
    (torch's own): Triton's cache keys name the ptxas, so a sweep worker whose earlier point
    compiled nothing, its graphs served from the cache, built and tuned the decode kernels with
    Triton's and never found what a cold worker had stored."""
    try:
        from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path
    except ImportError:  # another torch: inductor picks no ptxas of its own there
        return
    _set_triton_ptxas_path()


def read_record(folder: Path | None, name: str) -> dict:
    """A small JSON record kept in a cache folder: {} for a cold run (no folder), a missing
    file, one that is not a regular file (a FIFO would hang the read), one nested too deep to
    parse, or one that is not a JSON object (a record is only ever a hint, never an error)."""
    if folder is None:
        return {}
    path = folder / name
    try:
        if not path.is_file():
            return {}
        loaded = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def keep_record(folder: Path | None, name: str, data: object) -> bool:
    """A record written into the cache folder, or (the folder or the file refuses it: a folder
    in its place, a full disk, no permission) one warning and nothing more: a record is a hint,
    and a measured row must never be lost to it. Whether it was kept."""
    if folder is None:
        return False
    try:
        write_json(folder / name, data)
    except OSError as exc:
        if name not in _REFUSED:
            _REFUSED.add(name)
            warn(
                f"the cache folder would not keep {name} ({exc.strerror or exc}): the row is "
                "kept, and the next run decides again"
            )
        return False
    return True


_REFUSED: set[str] = set()  # records already warned of, once a process


def positive_figure(value: object) -> float | None:
    """A figure read back from a record: a finite positive number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def write_json(path: Path, data: object) -> None:
    """Write a small record whole, then rename it into place: a killed run leaves the old
    record or the new one, never half of one, and a failed write leaves no temporary file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(data, out, indent=1, sort_keys=True)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
