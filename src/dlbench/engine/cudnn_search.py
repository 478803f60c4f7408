"""cuDNN's algorithm search, chosen per point: run it only where it was measured to buy time.

With `torch.backends.cudnn.benchmark` on, the first call of each convolution shape times cuDNN's
candidate algorithms; for a network of many small convolutions (mobilenet_v3, efficientnet_v2
training) that search is most of the warm-up, and cuDNN keeps what it found in the process only.
Its heuristics choose without timing anything, and on the GPUs measured they chose as well
(docs/decisions.md#cudnn-search). One process cannot measure both: PyTorch keeps the
first algorithm it used for a shape, searched or not, for the process's life.

So each run records its window's median step, by point and by which algorithms ran, in the
cache folder (dlbench.caches: one per GPU, driver, torch and dlbench). Under `--cudnn-search
auto` a point runs on the heuristics unless both have been measured for it and the search won by
more than SEARCH_MIN_GAIN_PCT; `on` and `off` force either (and record it, so that one run of
each decides later auto runs)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from dlbench.caches import read_record, write_json
from dlbench.config import RunConfig

# The search is kept where the searched algorithms' step was shorter than the heuristics' by
# more than this; below it, its cost buys less than a repeated row's spread.
SEARCH_MIN_GAIN_PCT = 1.0
CHOICES_FILE = "cudnn_search.json"
SEARCHED, HEURISTICS = "searched", "heuristics"

# The settings that make one point's convolutions what they are (shapes, dtypes, layout and
# what runs them); the GPU and software are the cache folder's own key.
_POINT_FIELDS = (
    "model", "mode", "batch_size", "width", "height", "seq_len", "precision",
    "channels_last", "compile", "cuda_graphs", "optimizer", "data_on", "data", "devices",
)  # fmt: skip


def point_key(config: RunConfig) -> str:
    """A short stable name for the point's convolutions."""
    text = json.dumps([str(getattr(config, name)) for name in _POINT_FIELDS])
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    return f"{config.model}-{config.mode}-bs{config.batch_size}-{digest}"


def recorded_steps(folder: Path | None) -> dict[str, dict[str, float]]:
    """Each point's median step by the algorithms that ran ({} for a cold run, or a record
    that cannot be read)."""
    return {
        key: {
            k: float(v)
            for k, v in steps.items()
            if k in (SEARCHED, HEURISTICS) and isinstance(v, int | float) and v > 0
        }
        for key, steps in read_record(folder, CHOICES_FILE).items()
        if isinstance(steps, dict)
    }


def search_gain_pct(steps: dict[str, float]) -> float | None:
    """How much longer the heuristics' step was than the searched one, in %; None until both
    were measured."""
    if SEARCHED not in steps or HEURISTICS not in steps:
        return None
    return 100.0 * (steps[HEURISTICS] / steps[SEARCHED] - 1.0)


@dataclass
class CudnnSearch:
    """What one point does about cuDNN's search, and what its row says of it."""

    search: bool | None  # None: not a point where cuDNN's choice matters (no GPU, no conv)
    key: str = ""
    recorded: dict[str, float] | None = None
    folder: Path | None = None  # where this run's step is recorded (rank 0 with a cache)

    def apply(self) -> None:
        """Set cuDNN's search for the point's steps."""
        if self.search is not None:
            torch.backends.cudnn.benchmark = self.search

    def finish(self, window_median_s: float) -> dict[str, object]:
        """Record this run's median step; the row's columns."""
        if self.search is None:
            return {"cudnn_algorithms": ""}
        ran = SEARCHED if self.search else HEURISTICS
        steps = dict(self.recorded or {})
        if window_median_s > 0:
            steps[ran] = window_median_s
            if self.folder is not None:
                everything = recorded_steps(self.folder)
                everything[self.key] = steps
                write_json(self.folder / CHOICES_FILE, everything)
        return {"cudnn_algorithms": ran, "cudnn_search_gain_pct": search_gain_pct(steps)}


def plan_cudnn_search(
    config: RunConfig, device: torch.device, convolutions: bool, folder: Path | None, rank: int
) -> CudnnSearch:
    """The point's choice: --cudnn-search on or off as given; auto runs the heuristics unless
    this folder's record says the search won by more than SEARCH_MIN_GAIN_PCT here."""
    if device.type != "cuda" or not convolutions:
        return CudnnSearch(None)
    key = point_key(config)
    recorded = recorded_steps(folder).get(key, {})
    if config.cudnn_search == "auto":
        gain = search_gain_pct(recorded)
        search = gain is not None and gain > SEARCH_MIN_GAIN_PCT
    else:
        search = config.cudnn_search == "on"
    return CudnnSearch(search, key, recorded, folder if rank == 0 else None)
