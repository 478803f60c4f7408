"""Which code measured a row: the release, the commit and whether the tree had changes.

A checkout answers from git; a wheel or an image, which have no `.git`, from BUILD_INFO.json,
written beside this module when the package is built (setup.py, from git) or when the image is
built (its DLBENCH_COMMIT build argument). Standard library only: setup.py loads this file
before anything is installed."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

BUILD_INFO = Path(__file__).with_name("BUILD_INFO.json")
UNKNOWN = "unknown"
GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CodeIdentity:
    """The code that runs: `commit` is a full git hash or UNKNOWN; `dirty` whether the tree
    differed from it (None where nobody could tell)."""

    commit: str = UNKNOWN
    dirty: bool | None = None

    @property
    def short(self) -> str:
        """`1a2b3c4`, `1a2b3c4+dirty`, or `unknown`: what a person reads beside a number."""
        if self.commit == UNKNOWN:
            return UNKNOWN
        return self.commit[:7] + ("+dirty" if self.dirty else "")


def _git(folder: Path, *args: str) -> str | None:
    """git about the tree that holds `folder`, whatever git's variables say (GIT_DIR or
    GIT_WORK_TREE set for another repository would name that one's commit)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env=environ,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def from_git(folder: Path) -> CodeIdentity | None:
    """The identity of the git work tree holding `folder`, where this module is tracked there
    (a virtual environment inside a checkout is not the checkout's code)."""
    if _git(folder, "ls-files", "--error-unmatch", Path(__file__).name) is None:
        return None
    commit = _git(folder, "rev-parse", "HEAD")
    if not commit:
        return None
    status = _git(folder, "status", "--porcelain")
    return CodeIdentity(commit, None if status is None else bool(status))


def from_build_info(path: Path = BUILD_INFO) -> CodeIdentity | None:
    """The identity baked in at build time, None where there is none or it is unreadable."""
    try:
        data = json.loads(path.read_text())
        dirty = data.get("dirty")
        return CodeIdentity(
            str(data["commit"]) or UNKNOWN, dirty if isinstance(dirty, bool) else None
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@functools.cache
def code_identity() -> CodeIdentity:
    """This process's code: git where it runs from a checkout, else the build's record."""
    return from_git(Path(__file__).parent) or from_build_info() or CodeIdentity()


def write_build_info(path: Path, identity: CodeIdentity) -> None:
    """BUILD_INFO.json for a build that will have no `.git`."""
    path.write_text(json.dumps(asdict(identity)) + "\n")


def one_commit_problem(identity: CodeIdentity) -> str:
    """Why rows measured by this code could not name one commit ('' where they can): a part
    of the published rows is made by one commit, whole (benchmarks/reference.sh)."""
    if identity.commit == UNKNOWN:
        return "the code's commit is unknown (no git checkout, no BUILD_INFO.json)"
    if identity.dirty is not False:
        state = "differs from" if identity.dirty else "may differ from"
        return (
            f"the code {state} its commit {identity.commit[:7]} (commit first; a copy of the "
            "tree holding an older .git reads as that commit: move it aside and carry "
            "BUILD_INFO.json)"
        )
    return ""


def main(argv: list[str]) -> int:
    """`python src/dlbench/provenance.py [PATH]`: write this checkout's identity to PATH
    (default: BUILD_INFO.json beside this file), for a tree copied without `.git`;
    `--check`: exit 2 with one line where rows of this code could not name one commit."""
    if argv == ["--check"]:
        problem = one_commit_problem(code_identity())
        if problem:
            print(f"error: {problem}", file=sys.stderr)
        return 2 if problem else 0
    identity = from_git(Path(__file__).parent)
    if identity is None:
        print("error: not a git checkout of dlbench", file=sys.stderr)
        return 2
    write_build_info(Path(argv[0]) if argv else BUILD_INFO, identity)
    print(identity.short)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
