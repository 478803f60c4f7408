"""The analysis commands: report, compare (the CI regression gate), recommend-power."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlbench.cli.app import app
from dlbench.results.pairing import GATE_THRESHOLD_PCT

Csvs = Annotated[list[Path], typer.Argument(help="dlbench CSV files.")]
Baseline = Annotated[
    str | None, typer.Option(help="GPU name, CSV file or run id to compare against.")
]
MaxSlowdown = Annotated[
    float, typer.Option(help="Power: least energy within this % slowdown of the fastest limit.")
]


InconclusiveFails = Annotated[
    bool,
    typer.Option(
        "--inconclusive-fails",
        help="Exit 1 where a configuration is inconclusive too (default: exit 5 for it).",
    ),
]
SameCode = Annotated[
    bool,
    typer.Option(
        "--same-code",
        help="Pair rows only where one version of dlbench (release and commit) measured both.",
    ),
]


@app.command("report", help="HTML (self-contained), PNGs and Markdown from result CSVs.")
def report(
    csv: Csvs,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Folder for the report (default: beside the first input: FILE-report/ for a "
            "CSV, FOLDER/report/ for a folder).",
        ),
    ] = None,
    baseline: Baseline = None,
    max_slowdown: MaxSlowdown = 10.0,
    timeline: Annotated[
        list[Path] | None,
        typer.Option(help="A --telemetry-log CSV to draw over time (repeatable)."),
    ] = None,
    pdf: Annotated[bool, typer.Option("--pdf", help="Also write report.pdf.")] = False,
    pptx: Annotated[bool, typer.Option("--pptx", help="Also write report.pptx.")] = False,
    usd_per_hour: Annotated[
        list[str] | None,
        typer.Option(
            help="GPU=PRICE per hour (repeatable): rank GPUs by cost per million samples."
        ),
    ] = None,
    same_code: SameCode = False,
) -> None:
    from dlbench.analysis.cost import parse_prices
    from dlbench.analysis.report import build_report
    from dlbench.errors import check_finite

    check_finite("--max-slowdown", max_slowdown)
    prices = parse_prices(usd_per_hour)
    out = out or report_folder(csv[0])
    written = build_report(csv, out, baseline, max_slowdown, timeline, pdf, pptx, prices, same_code)
    extra = "".join(f", {path}" for path in written.documents)
    print(f"wrote {written.html} ({len(written.pngs)} plots embedded), {written.markdown}{extra}")


def report_folder(first: Path) -> Path:
    """Where a report goes unless --out says: beside its first input (`q.csv` -> `q-report/`,
    a folder -> `FOLDER/report/`)."""
    return first / "report" if first.is_dir() else first.with_name(f"{first.stem}-report")


@app.command(
    "compare",
    help="Baseline vs candidate rows, or (one file) the candidate vs the published rows of its "
    "GPUs: each configuration same, faster, slower or inconclusive; exit 1 where slower (or "
    "failed, or missing), 5 where only inconclusive.",
)
def compare(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="[BASELINE] CANDIDATE",
            help="Baseline CSV (e.g. a committed reference), then the candidate CSV (this "
            "build's run); one file alone is the candidate, held against the published rows.",
        ),
    ],
    threshold: Annotated[
        float, typer.Option(help="Allowed slowdown in % before failing.")
    ] = GATE_THRESHOLD_PCT,
    key: Annotated[
        str | None,
        typer.Option(
            help="Columns that identify a configuration (default: every field of the "
            "experiment, plus gpu_name and world_size)."
        ),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Markdown for CI summaries (every column).")
    ] = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every key column and the interval, unabridged.")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="The lines as JSON (verdict, ratio, interval).")
    ] = False,
    inconclusive_fails: InconclusiveFails = False,
    same_code: SameCode = False,
) -> None:
    from dlbench.analysis.compare import compare_runs
    from dlbench.analysis.compare_published import compare_with_published
    from dlbench.analysis.load import load_rows, require_columns
    from dlbench.errors import UserError

    columns = _compare_key(threshold, key)
    if len(files) > 2:
        raise UserError(f"[BASELINE] CANDIDATE: {len(files)} files given; one or two")
    sides = dict(zip(("BASELINE", "CANDIDATE")[2 - len(files) :], files))
    # a baseline row of no figure (a hand edit) counts for nothing; a candidate's is named
    figureless = {"BASELINE": "warn", "CANDIDATE": "refuse"}
    rows = {name: load_rows([path], name, figureless[name]) for name, path in sides.items()}
    for name, frame in rows.items():
        require_columns(frame, ("samples_per_s",), name)
    if len(files) == 1:
        if columns is not None:
            raise UserError(
                "--key: compares with a baseline file; the published rows pair on their own key "
                "(give BASELINE CANDIDATE)"
            )
        result = compare_with_published(rows["CANDIDATE"], threshold, same_code)
    else:
        result = compare_runs(rows["BASELINE"], rows["CANDIDATE"], columns, threshold, same_code)
    show_comparison(result, markdown, wide, json_out, inconclusive_fails=inconclusive_fails)
    raise typer.Exit(result.exit_code(inconclusive_fails))


def _compare_key(threshold: float, key: str | None) -> list[str] | None:
    """--threshold checked, and --key's columns (None: the default key)."""
    from dlbench.analysis.change import check_threshold
    from dlbench.errors import UserError

    check_threshold(threshold)
    columns = None if key is None else [k.strip() for k in key.split(",") if k.strip()]
    if columns == []:
        raise UserError(f"--key: invalid value {key!r}; comma-separated column names, e.g. model")
    return columns


def show_comparison(
    result,
    markdown: bool,
    wide: bool,
    json_out: bool = False,
    title: str = "compare",
    inconclusive_fails: bool = False,
) -> None:
    """The table and the verdict line: JSON (its exit code the command's), Markdown, every
    column, or fitted to the terminal."""
    import shutil
    import textwrap

    from dlbench.analysis.compare_view import (
        comparison_json,
        display_table,
        terminal_lines,
        verdict_line,
    )
    from dlbench.analysis.markdown import markdown_table
    from dlbench.console import show_frame

    table, caption = display_table(result)
    verdict = verdict_line(result)
    if json_out:
        print(comparison_json(result, verdict, inconclusive_fails))
    elif markdown:
        print(f"### dlbench {title}: {verdict}\n\n{caption}\n\n{markdown_table(table)}")
    elif wide:
        show_frame(table, "candidate vs baseline")
        print(f"{caption}\n{verdict}" if caption else verdict)
    else:
        width = shutil.get_terminal_size((100, 24)).columns
        print("\n".join([*terminal_lines(result, width), *textwrap.wrap(verdict, width)]))


@app.command("recommend-power", help="Most efficient power limit from power-sweep rows.")
def recommend_power(csv: Csvs, max_slowdown: MaxSlowdown = 10.0) -> None:
    from dlbench.analysis.load import load_rows
    from dlbench.analysis.power import require_recommendations
    from dlbench.console import show_frame
    from dlbench.errors import check_finite

    check_finite("--max-slowdown", max_slowdown)
    table = require_recommendations(load_rows(csv), max_slowdown)
    show_frame(
        table,
        "power-limit recommendations (W): least energy, least energy x delay, "
        f"least energy within {max_slowdown:g}% slowdown",
    )
