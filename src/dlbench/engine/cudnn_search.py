"""cuDNN's algorithm search, chosen per point: run it only where it buys something.

With `torch.backends.cudnn.benchmark` on, the first call of each convolution shape times
cuDNN's candidate algorithms; for a network of many small convolutions (mobilenet_v3,
efficientnet_v2 training) that search is most of the warm-up, and cuDNN keeps what it found in
the process only. Its heuristics choose without timing anything. Under `--cudnn-search auto` a
point without a record first times a few steps on the heuristics' choice, then searches as
before; after the window the gain (heuristics' step over the searched window's median) is
recorded in the run's cache folder (dlbench.caches: one folder per GPU, driver, torch and
dlbench). A later run of the same point searches only where the recorded gain is above
SEARCH_MIN_GAIN_PCT, and its row says which ran and what the search was measured to buy
(docs/time-to-result.md)."""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from dlbench.caches import write_json
from dlbench.config import RunConfig
from dlbench.engine.timer import StepTimer, synchronize
from dlbench.signals import raise_if_interrupted

# Where the searched algorithms run faster than the heuristics' by more than this, the search
# is kept; below it, its cost buys less than a repeated row's spread.
SEARCH_MIN_GAIN_PCT = 1.0
PROBE_UNTIMED, PROBE_TIMED = 2, 3  # heuristics' steps before the search: first calls, then timed
CHOICES_FILE = "cudnn_search.json"

# The settings that make one point's convolutions what they are (shapes, dtypes, layout and
# what runs them); the GPU and software are the cache folder's own key.
_POINT_FIELDS = (
    "model", "mode", "batch_size", "width", "height", "seq_len", "precision",
    "channels_last", "compile", "cuda_graphs", "optimizer", "data_on", "data",
)  # fmt: skip


def point_key(config: RunConfig) -> str:
    """A short stable name for the point's convolutions."""
    text = json.dumps([str(getattr(config, name)) for name in _POINT_FIELDS])
    return (
        f"{config.model}-{config.mode}-bs{config.batch_size}-"
        + hashlib.sha1(text.encode()).hexdigest()[:12]
    )


def recorded_gains(folder: Path | None) -> dict[str, float]:
    """The gains recorded in a cache folder (none for a cold run or an unreadable file)."""
    if folder is None:
        return {}
    try:
        loaded = json.loads((folder / CHOICES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in loaded.items() if isinstance(v, int | float)}


def record_gain(folder: Path, key: str, gain_pct: float) -> None:
    """Add one point's gain to the folder's record."""
    gains = recorded_gains(folder)
    gains[key] = round(gain_pct, 2)
    write_json(folder / CHOICES_FILE, gains)


@dataclass
class CudnnSearch:
    """What one point does about cuDNN's search, and what the row says of it."""

    search: bool | None  # None: not a point where cuDNN's choice matters (no GPU, no conv)
    key: str = ""
    recorded_gain_pct: float | None = None
    heuristics_step_s: float | None = None  # timed in this run, before the search
    folder: Path | None = None

    @property
    def probe(self) -> bool:
        """Time the heuristics first: auto, searching, and nothing recorded for this point."""
        return bool(self.search) and self.recorded_gain_pct is None and self.folder is not None

    def apply(self) -> None:
        """Set cuDNN's search for the point's steps."""
        if self.search is not None:
            torch.backends.cudnn.benchmark = self.search

    def time_heuristics(self, step, device: torch.device) -> None:
        """A few steps on the heuristics' algorithms (warm-up, never the window), then the
        search back on for the warm-up proper."""
        torch.backends.cudnn.benchmark = False
        for i in range(PROBE_UNTIMED):
            raise_if_interrupted()
            step(i)
        timer = StepTimer(device, PROBE_TIMED)
        synchronize(device)
        timer.mark()
        for i in range(PROBE_UNTIMED, PROBE_UNTIMED + PROBE_TIMED):
            step(i)
            timer.mark()
        self.heuristics_step_s = statistics.median(timer.step_times_s())
        torch.backends.cudnn.benchmark = True

    def finish(self, window_median_s: float) -> dict[str, object]:
        """The row's columns; records the gain measured in this run."""
        if self.search is None:
            return {"cudnn_algorithms": ""}
        gain = self.recorded_gain_pct
        if self.heuristics_step_s is not None and window_median_s > 0:
            gain = 100.0 * (self.heuristics_step_s / window_median_s - 1.0)
            if self.folder is not None:
                record_gain(self.folder, self.key, gain)
        return {
            "cudnn_algorithms": "searched" if self.search else "heuristics",
            "cudnn_search_gain_pct": gain,
        }


def plan_cudnn_search(
    config: RunConfig, device: torch.device, convolutions: bool, folder: Path | None, ranks: int
) -> CudnnSearch:
    """The point's choice: --cudnn-search on or off as given; auto searches unless this
    folder records that the search bought at most SEARCH_MIN_GAIN_PCT for the same point.
    Several ranks search as before (each would have to agree on every probe step)."""
    if device.type != "cuda" or not convolutions:
        return CudnnSearch(None)
    if config.cudnn_search != "auto":
        return CudnnSearch(config.cudnn_search == "on")
    if ranks > 1:
        return CudnnSearch(True)
    key = point_key(config)
    recorded = recorded_gains(folder).get(key)
    search = recorded is None or recorded > SEARCH_MIN_GAIN_PCT
    return CudnnSearch(search, key, recorded, folder=folder)
