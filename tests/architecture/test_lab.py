"""The product stays apart from the lab: no probes or round-named files in the tree, no measured
figure in a comment or docstring under src/ (figures live once, in docs/decisions.md, with the
command that measures them again), every decision link resolves, and modules stay small."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "dlbench"
DECISIONS = ROOT / "docs" / "decisions.md"
MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 60
# A number with a unit of time, size, rate or share, or a ratio "0.95 of": what a measurement
# reads. Versions (torchvision 0.29) and GPU names (H100s) are not figures.
FIGURE = re.compile(
    r"(?<![A-Za-z\d.])\d(?:[\d,]*\d)?(?:\.\d+)?\s?"
    r"(?:%|x\b|ms\b|µs|us\b|ns\b|s\b|min\b|tokens/s|images/s|sequences/s|GB\b|MB\b|kB\b|GiB"
    r"|MiB|TB/s|GB/s|TFLOP|W\b)"
    r"|(?<![\d.])\d\.\d+\s+of\b"
)
LINK = re.compile(r"docs/decisions\.md#([a-z0-9-]+)")
LAB_NAME = re.compile(r"(_probe\.py$|run_round|(^|[/_-])round\d|\bround[-_ ]?\d)")
OUTSIDE = {".git", ".venv", "node_modules", "__pycache__", ".whl", "results", ".pytest_cache"}


def _source_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)
        if isinstance(node, kinds) and (doc := ast.get_docstring(node, clean=False)):
            found.append((node.body[0].lineno, doc))
    return found


def _tree_files() -> list[Path]:
    files = []
    for path in ROOT.rglob("*"):
        parts = set(path.relative_to(ROOT).parts)
        built = any(p.endswith(".egg-info") for p in parts)
        if path.is_file() and not parts & OUTSIDE and not built:
            files.append(path.relative_to(ROOT))
    return files


def test_no_measured_figure_in_a_comment_or_docstring() -> None:
    figures = [
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}"
        for path in _source_files()
        for line, text in _comments_and_docstrings(path)
        for match in [FIGURE.search(text)]
        if match
    ]
    assert figures == [], "measured figures belong in docs/decisions.md:\n" + "\n".join(figures)


def test_the_figure_pattern_finds_figures_and_spares_versions() -> None:
    for figure in ("took 22 ms", "0.948 of synthetic", "1.7 TB/s", "5 %", "732.6 tokens/s"):
        assert FIGURE.search(figure), figure
    for text in ("torchvision 0.29 deprecates", "H100s did not", "typer 0.16", "sm_90"):
        assert not FIGURE.search(text), text


def test_every_decision_link_resolves_and_every_entry_is_linked() -> None:
    entries = set(re.findall(r"^## ([a-z0-9-]+)$", DECISIONS.read_text(), flags=re.MULTILINE))
    linked = {name for path in _source_files() for name in LINK.findall(path.read_text())}
    assert linked - entries == set(), "links to no entry"
    assert entries - linked == set(), "entries no constant links to"


def test_no_probe_or_round_named_file_in_the_tree() -> None:
    lab = [str(p) for p in _tree_files() if LAB_NAME.search(str(p).lower())]
    assert lab == []


def test_modules_and_functions_stay_small() -> None:
    too_long = []
    for path in _source_files():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.name}: {lines} lines")
    assert too_long == []


def test_no_module_is_kept_small_by_compacted_literals() -> None:
    """A module under its cap because the formatter was told to skip it is over its cap."""
    skipped = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _source_files()
        if "src" in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.rstrip().endswith("# fmt: skip")
    ]
    assert skipped == []
