"""cuDNN's algorithm search, chosen per point: run it only where it was measured to buy time.

With `torch.backends.cudnn.benchmark` on, the first call of each convolution shape times cuDNN's
candidate algorithms; for a network of many small convolutions (mobilenet_v3, efficientnet_v2
training) that search is most of the warm-up, and cuDNN keeps what it found in the process only.
Its heuristics choose without timing anything, and on the GPUs measured they chose as well
(docs/decisions.md#cudnn-search). One process cannot measure both: PyTorch keeps the
first algorithm it used for a shape, searched or not, for the process's life.

So the choice is measured (engine.acceleration.measured_choice): under `--cudnn-search auto` a point
runs on the heuristics unless the cache's record says the search won there; `on` and `off` force
either (and record it, so that one run of each decides later auto runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from dlbench.config import RunConfig
from dlbench.engine.acceleration.measured_choice import MeasuredChoice, point_key

SEARCHED, HEURISTICS = "searched", "heuristics"
CUDNN_CHOICE = MeasuredChoice("cudnn_search.json", default=HEURISTICS, other=SEARCHED)


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
        steps = CUDNN_CHOICE.record(
            self.folder, self.key, ran, window_median_s, self.recorded or {}
        )
        return {"cudnn_algorithms": ran, "cudnn_search_gain_pct": CUDNN_CHOICE.gain_pct(steps)}


def plan_cudnn_search(
    config: RunConfig, device: torch.device, convolutions: bool, folder: Path | None, rank: int
) -> CudnnSearch:
    """The point's choice: --cudnn-search on or off as given; auto runs the heuristics unless
    this folder's record says the search won by more than MIN_GAIN_PCT here."""
    if device.type != "cuda" or not convolutions:
        return CudnnSearch(None)
    key = point_key(config, "cudnn_search")
    recorded = CUDNN_CHOICE.recorded(folder).get(key, {})
    if config.acceleration.cudnn_search == "auto":
        search = CUDNN_CHOICE.other_wins(recorded)
    else:
        search = config.acceleration.cudnn_search == "on"
    return CudnnSearch(search, key, recorded, folder if rank == 0 else None)
