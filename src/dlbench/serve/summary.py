"""What `dlbench serve` prints of its rows: a row's serving figures, a line each, and the
serving frontier's table (--sweep-concurrency) after its rows."""

from __future__ import annotations

from pathlib import Path

from dlbench.console import shown_number
from dlbench.results.advice import advice
from dlbench.results.published import published_line


def show_serve(row: dict[str, object], output: Path | None = None) -> None:
    """The row's serving figures, a line each (LoadGen's logs named from where the user stands:
    the row keeps them relative to its CSV, `output`)."""

    def n(key: str) -> float:
        return float(row[key])  # type: ignore[arg-type]

    lines = [
        advice(row),  # the verdict first, in words (LoadGen's among its reasons): once
        f"{row['model']} {row['serve_scenario']} under LoadGen: {_queries(row)}, "
        f"{n('serve_achieved_qps'):,.1f}/s answered, mean batch {n('serve_mean_batch'):.1f}",
        f"latency p50 {n('serve_latency_p50_ms'):.3f} ms, p90 {n('serve_latency_p90_ms'):.3f} ms, "
        f"p99 {n('serve_latency_p99_ms'):.3f} ms",
        f"offline {n('serve_offline_samples_per_s'):,.1f}/s, batch-1 p50 "
        f"{n('serve_batch1_p50_ms'):.3f} ms",
    ]
    lines += _token_lines(row)
    if row.get("serve_points_tried"):
        found, tried = row.get("serve_qps_found"), row["serve_points_tried"]
        what = f"found {float(found):,.1f}/s" if found else "found no rate LoadGen called VALID"  # type: ignore[arg-type]
        lines.append(f"{what} in {tried} points")
    log = Path(str(row["serve_loadgen_log"]))
    lines.append(f"LoadGen's logs: {output.parent / log if output is not None else log}")
    lines.append(published_line(row))
    print("\n".join(lines))


FRONTIER_COLUMNS = {  # the frontier's table: a row's column, its heading
    "serve_max_batch": "concurrency",
    "serve_output_tokens_per_s": "output tokens/s",
    "serve_tokens_per_s_per_user": "tokens/s per user",
    "energy_per_token_j": "J/token",
    "verdict": "verdict",
}


def show_frontier(rows: list[dict[str, object]]) -> None:
    """The serving frontier (--sweep-concurrency), a line a concurrency: output tokens a second
    (one GPU's) against each user's, and the energy of a token."""
    lines = [list(FRONTIER_COLUMNS.values())]
    for row in rows:
        lines.append([_cell(row.get(key)) for key in FRONTIER_COLUMNS])
    widths = [max(len(line[i]) for line in lines) for i in range(len(FRONTIER_COLUMNS))]
    print(f"the serving frontier of {rows[0]['model']} ({len(rows)} concurrencies):")
    for line in lines:
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths)))


def _cell(value: object) -> str:
    """A figure as the frontier's table shows it (console.shown_number); text as it is;
    nothing as a dash."""
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        return value
    return shown_number(float(value))  # type: ignore[arg-type]


def _queries(row: dict[str, object]) -> str:
    """The queries the load answered, and why where they are more than asked: LoadGen issues
    enough to last --min-duration at the rate it expects (an offline query's samples too)."""
    answered = int(float(str(row["serve_queries"])))
    asked, seconds = row.get("serve_min_queries"), row.get("serve_min_duration_s")
    if asked in (None, "") or answered <= int(float(str(asked))):
        return f"{answered:,} queries"
    return (
        f"{answered:,} queries ({int(float(str(asked))):,} asked: LoadGen issues as many as last "
        f"{float(str(seconds)):g} s at the rate it expects)"
    )


def _token_lines(row: dict[str, object]) -> list[str]:
    """An LLM row's token figures, as LoadGen gave them (no latencies in offline)."""
    if not row.get("serve_output_tokens_per_s"):
        return []
    lines = [f"output {float(row['serve_output_tokens_per_s']):,.1f} tokens/s"]  # type: ignore[arg-type]
    if row.get("serve_ttft_p99_ms"):
        ms = {
            f"{f}{q}": float(row[f"serve_{f}_p{q}_ms"]) for f in ("ttft", "tpot") for q in (50, 99)
        }  # type: ignore[arg-type]
        lines.append(
            f"time to first token p50 {ms['ttft50']:.3f} ms, p99 {ms['ttft99']:.3f} ms; per "
            f"output token p50 {ms['tpot50']:.3f} ms, p99 {ms['tpot99']:.3f} ms"
        )
    return lines
