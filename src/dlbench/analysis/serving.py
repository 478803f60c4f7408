"""The report's serving rows (`dlbench serve`): per model, machine and scenario, the rate found
or asked for, its latencies beside the bound (an LLM's: its tokens a second, time to first
token and per output token beside theirs), and the same model's offline throughput and
batch-1 latency; each rate a search tried with its p99, for latency against rate; and the
serving frontier, an LLM's offline rows at several concurrencies (`dlbench serve
--sweep-concurrency`): output tokens a second per GPU against each user's, as InferenceMAX
plots its rows."""

from __future__ import annotations

import math

import pandas as pd

from dlbench.analysis.load import finished_rows, machine_labels
from dlbench.errors import number_or_none
from dlbench.results.search_points import parse_point

SERVE_TABLE = {
    "model": "model",
    "machine": "machine",
    "serve_scenario": "scenario",
    "serve_result": "LoadGen",
    "serve_scheduled_qps": "scheduled /s",
    "serve_achieved_qps": "answered /s",
    "serve_latency_p50_ms": "p50 ms",
    "serve_latency_p90_ms": "p90 ms",
    "serve_latency_p99_ms": "p99 ms",
    "serve_slo_p99_ms": "p99 bound ms",
    "serve_batching": "batching",
    "serve_output_tokens_per_s": "output tokens/s",
    "serve_ttft_p99_ms": "TTFT p99 ms",
    "serve_ttft_p99_bound_ms": "TTFT bound ms",
    "serve_tpot_p99_ms": "TPOT p99 ms",
    "serve_tpot_p99_bound_ms": "TPOT bound ms",
    "serve_offline_samples_per_s": "offline /s",
    "of_offline": "served / offline",
    "serve_batch1_p50_ms": "batch-1 p50 ms",
    "verdict": "verdict",
}


def serve_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The finished serve rows, each with its machine."""
    found = finished_rows(rows, "serve")
    found["machine"] = machine_labels(found)
    return found


def serve_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per serve row: what it answered, how fast, against its bound and references."""
    found = serve_rows(rows)
    if found.empty:
        return found
    found["of_offline"] = found["serve_achieved_qps"] / found["serve_offline_samples_per_s"]
    columns = [c for c in SERVE_TABLE if c in found]
    return found[columns].rename(columns=SERVE_TABLE).reset_index(drop=True)


def search_points(rows: pd.DataFrame) -> pd.DataFrame:
    """Each rate a search tried (`serve_points`, results.search_points) with its model,
    machine, its first figure (a query's p99, or an LLM's TTFT p99) and that figure's bound; a
    point that is no such text (a hand edit) is left out."""
    found = serve_rows(rows)
    points = []
    if "serve_points" in found:
        for r in found.dropna(subset=["serve_points"]).to_dict("records"):
            llm = _number(r.get("serve_ttft_p99_bound_ms")) is not None
            bound = r.get("serve_ttft_p99_bound_ms") if llm else r.get("serve_slo_p99_ms")
            for text in str(r["serve_points"]).replace(";", " ").split():
                point = parse_point(text)
                if point is None or (len(point.figures) == 2) != llm:
                    continue
                points.append(
                    {
                        "model": r["model"],
                        "machine": r["machine"],
                        "qps": point.qps,
                        "p99_ms": point.figures[0],
                        "passed": point.passed,
                        "bound_ms": bound,
                    }
                )
    return pd.DataFrame(points)


# What a frontier's line holds the same: its points differ by concurrency alone
FRONTIER_LINE = [
    "model",
    "machine",
    "precision",
    "prompt_len",
    "new_tokens",
    "serve_lengths",
    "serve_batching",
    "compile",
    "cuda_graphs",
]
FRONTIER_TABLE = {
    "model": "model",
    "machine": "machine",
    "precision": "precision",
    "serve_max_batch": "concurrency",
    "tokens_per_s_per_gpu": "output tokens/s per GPU",
    "serve_tokens_per_s_per_user": "tokens/s per user",
    "energy_per_token_j": "J/token",
    "verdict": "verdict",
}


def frontier_points(rows: pd.DataFrame) -> pd.DataFrame:
    """An LLM's offline rows at a concurrency (`serve_max_batch`) with their tokens a second
    per GPU and per user, each in a line (`line`, FRONTIER_LINE's values) of two points or
    more: a frontier, not a lone throughput figure."""
    found = serve_rows(rows)
    needed = ["serve_tokens_per_s_per_user", "serve_output_tokens_per_s", "serve_max_batch"]
    if found.empty or any(c not in found for c in needed):
        return pd.DataFrame()
    found = found[found["serve_scenario"] == "offline"].dropna(subset=needed)
    if found.empty:
        return pd.DataFrame()
    devices = pd.to_numeric(found.get("devices", 1), errors="coerce").fillna(1)
    found["tokens_per_s_per_gpu"] = pd.to_numeric(found["serve_output_tokens_per_s"]) / devices
    keys = [c for c in FRONTIER_LINE if c in found]
    found["line"] = found[keys].astype(str).agg(" ".join, axis=1)
    found["concurrencies"] = found.groupby("line")["serve_max_batch"].transform("nunique")
    found = found[found["concurrencies"] > 1]
    return found.sort_values(["line", "serve_max_batch"]).reset_index(drop=True)


def frontier_table(points: pd.DataFrame) -> pd.DataFrame:
    """A line a frontier's point, as the report shows it."""
    columns = [c for c in FRONTIER_TABLE if c in points]
    return points[columns].rename(columns=FRONTIER_TABLE)


def _number(value: object) -> float | None:
    number = number_or_none(value)
    return number if number is not None and math.isfinite(number) else None
