"""When two rows measured the same thing: the key columns rows are paired on, a value's form that
compares equal across files, the software release a figure depends on, the code that measured a
row, and which rows are finished runs of a kind. A run holding its row against the published
ones (results.published), a sweep resuming, `compare` and the report all pair rows this way."""

from __future__ import annotations

import math
from collections.abc import Mapping

from dlbench.config import CONFIG_KEY
from dlbench.config.serve_scenarios import serve_figure
from dlbench.results.schema import TEXT_COLUMNS
from dlbench.results.serve_columns import SERVE_KEY

# What makes two benchmark rows measure the same thing (a GPU column is added for comparisons).
RUN_KEY = (
    *(k for k in CONFIG_KEY if k not in ("devices", "num_nodes")),
    "prompt_len",
    "new_tokens",
)
# Everything that decides what a row measured, plus the GPU model and the process count: rows
# with equal values are the same experiment (the regression gate's default key).
EXPERIMENT_KEY = (*CONFIG_KEY, "prompt_len", "new_tokens", "gpu_name", "world_size")
# A served model: what was served and how (results.serve_columns.SERVE_KEY), on which GPU.
SERVE_EXPERIMENT_KEY = (
    "model",
    "precision",
    "width",
    "height",
    "seq_len",
    "channels_last",
    "compile",
    "cuda_graphs",
    *SERVE_KEY,
    "gpu_name",
)
# The key of each kind of row (results.pairing.kind_of): two rows of one kind are the same
# experiment where these agree. compare (one file or two), the published columns a row carries,
# ranks and the report pair rows by it.
EXPERIMENT_KEYS: dict[str, tuple[str, ...]] = {
    "benchmark": EXPERIMENT_KEY,
    "serve": SERVE_EXPERIMENT_KEY,
}
COMPARED_KINDS = tuple(EXPERIMENT_KEYS)  # the kinds a regression gate holds (by their figure)
# The workload and its input, without layout or optimizer: what a speed-up or power curve is of.
SHAPE_KEY = ("model", "mode", "precision", "batch_size", "width", "height", "seq_len")
# The regression gate's default: a slowdown beyond this % fails `dlbench compare`, and no row is
# held to a narrower band around the published rows of its GPU (results.published).
GATE_THRESHOLD_PCT = 5.0
UNKNOWN_CODE = "(commit unknown)"  # rows from before rows named their commit


def key_text(value: object, column: str = "") -> str:
    """A cell as text that compares equal across files and readers: a run's own 700.0 and True,
    a CSV's "700.0" and "True", and the 64.0 pandas reads from a column with a gap all give
    what one of them wrote ("700", "True", "64"); NaN and None give "". A version or id column
    (results.schema.TEXT_COLUMNS, `column`) keeps its text: "13.0" stays, "12.10" is not 12.1."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value)
    if column in TEXT_COLUMNS:
        return text
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() and math.isfinite(number) else text


def release(version: object) -> str:
    """A version at major.minor (`2.11.0+cu130` -> `2.11`, `13.0` -> `13.0`): what a published
    row's software must share with a new row's; empty where none is known."""
    text = "" if version is None or version != version else str(version)  # NaN: unknown
    return ".".join(text.split("+")[0].split(".")[:2])


def machine(row: Mapping[str, object]) -> str:
    """What ran the row: the GPU model, or `CPU <processor>` for a CPU run."""
    return key_text(row.get("gpu_name")) or f"CPU {key_text(row.get('cpu'))}".strip()


def code_label(row: Mapping[str, object]) -> str:
    """The code that measured a row: `0.2.0 1a2b3c4` (`+dirty` with changes), or the release
    alone with `(commit unknown)` for rows from before rows named their commit."""
    version = key_text(row.get("dlbench"), "dlbench")
    commit = key_text(row.get("dlbench_commit"), "dlbench_commit")
    dirty = key_text(row.get("dlbench_dirty"), "dlbench_dirty")
    if commit in ("", "unknown") or dirty not in ("True", "False"):
        return f"{version} {UNKNOWN_CODE}"
    return f"{version} {commit[:7]}{'+dirty' if dirty == 'True' else ''}"


def same_code(a: str, b: str) -> bool:
    """Whether two code labels name one known commit: unknown is never the same, nor is an
    aggregate of several (`a, b`). The report and `compare --same-code` both ask this."""
    return a == b and "," not in a and UNKNOWN_CODE not in a


def kind_of(row: Mapping[str, object]) -> str:
    """A row's kind (`run_kind`: benchmark, validate, scaling, loader, peak, serve, per_rank;
    results.upgrade names a row from before the column a benchmark)."""
    return key_text(row.get("run_kind"))


def experiment_key(kind: str) -> tuple[str, ...]:
    """The columns that make two rows of `kind` the same experiment (EXPERIMENT_KEYS)."""
    return EXPERIMENT_KEYS.get(kind, EXPERIMENT_KEY)


def figure_of(row: Mapping[str, object]) -> tuple[str, bool]:
    """The column a row of its kind is compared on, and whether lower is better: samples/s,
    or a serve row's own (config.serve_scenarios.serve_figure)."""
    return serve_figure(row) if kind_of(row) == "serve" else ("samples_per_s", False)


def finished(row: Mapping[str, object], kind: str) -> bool:
    """Whether a row is a finished run of `kind` (benchmark, validate, scaling, loader, peak,
    serve)."""
    return row.get("status") == "ok" and kind_of(row) == kind
