"""Telemetry over time from `--telemetry-log` files: power, SM clock, utilisation and
temperature per sample, with the samples where the GPU throttled marked."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlbench.errors import UserError
from dlbench.telemetry.base import throttle_names

FIELDS = ("power_w", "sm_clock_mhz", "gpu_util", "temp_c")


def load_timeline(paths: list[Path]) -> pd.DataFrame:
    """The samples of the logs, time in seconds from each file's first sample; a UserError for
    a file that is not a telemetry log."""
    frames = []
    for path in paths:
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.EmptyDataError):
            raise UserError(f"--timeline: cannot read {path} as a CSV") from None
        missing = [c for c in ("t", "device", *FIELDS) if c not in frame]
        if missing or frame.empty:
            raise UserError(
                f"--timeline: {path} is not a dlbench --telemetry-log file "
                f"(missing {', '.join(missing) or 'samples'})"
            )
        for column in ("t", "device", *FIELDS, "throttle_bits"):
            if column not in frame:
                continue
            numbers = pd.to_numeric(frame[column], errors="coerce")
            if numbers.isna().any() and column in ("t", "device"):
                raise UserError(f"--timeline: {path}: column {column} holds text, not numbers")
            frame[column] = numbers
        frame = frame.assign(
            seconds=frame["t"] - frame["t"].min(),
            source=Path(path).name,
            throttled=frame.get("throttle_bits", 0).fillna(0).astype(int) != 0,
        )
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def throttle_summary(samples: pd.DataFrame) -> str:
    """Which slowdown reasons occurred, and in what share of the samples."""
    if not samples["throttled"].any():
        return "No throttling in any sample."
    bits = samples.loc[samples["throttled"], "throttle_bits"].astype(int)
    names = sorted({name for b in bits for name in throttle_names(b)})
    share = 100 * samples["throttled"].mean()
    return f"Throttled in {share:.0f} % of samples ({', '.join(names)}), shaded red."
