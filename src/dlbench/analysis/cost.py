"""What a million samples cost on each machine, at the price per hour the user gives (report
--usd-per-hour GPU=PRICE): price / 3600 / samples per second x 1e6; tokens for LLM rows."""

from __future__ import annotations

import pandas as pd

from dlbench.errors import UserError, check_finite

COLUMNS = [
    "model",
    "mode",
    "precision",
    "batch_size",
    "machine",
    "samples/s",
    "usd/hour",
    "usd per million",
]


def parse_prices(items: list[str] | None) -> dict[str, float]:
    """`GPU=PRICE` pairs (GPU: any part of the machine's name, e.g. H100) to prices."""
    prices = {}
    for item in items or []:
        name, sep, price = item.rpartition("=")
        try:
            value = float(price)
        except ValueError:
            value = float("nan")
        if not sep or not name:
            raise UserError(f"--usd-per-hour: invalid value {item!r}; GPU=PRICE, e.g. H100=2.5")
        check_finite("--usd-per-hour", value)
        if value <= 0:
            raise UserError(f"--usd-per-hour: invalid value {item!r}; a positive price")
        prices[name] = value
    return prices


def cost_table(runs: pd.DataFrame, prices: dict[str, float]) -> pd.DataFrame:
    """One line per workload and priced machine (its best row), cheapest first per workload."""
    lines = []
    for _, row in runs.iterrows():
        machine = str(row["machine"])
        price = next((p for name, p in prices.items() if name.lower() in machine.lower()), None)
        llm = str(row.get("family")) == "llm" and pd.notna(row.get("tokens_per_s"))
        rate = float(row["tokens_per_s"] if llm else row["samples_per_s"])
        if price is None or not rate > 0:
            continue
        lines.append(
            {
                "model": row["model"],
                "mode": row["mode"],
                "precision": row["precision"],
                "batch_size": row["batch_size"],
                "machine": machine,
                "samples/s": rate,
                "usd/hour": price,
                "usd per million": price / 3600 / rate * 1e6,
            }
        )
    if not lines:
        return pd.DataFrame(columns=COLUMNS)
    table = pd.DataFrame(lines).sort_values("usd per million")
    key = ["model", "mode", "precision", "batch_size", "machine"]
    table = table.groupby(key, sort=False).head(1)
    return table.sort_values(["model", "mode", "batch_size", "usd per million"]).reset_index(
        drop=True
    )
