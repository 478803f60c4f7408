"""A way of running a point chosen by its own measurements, not by a rule of thumb.

Each run records its window's median step, by point and by which way it ran, in the cache
folder (dlbench.caches: one per GPU, driver, torch and dlbench). A point runs its default way
until the record holds one run of each way and the other won by more than MIN_GAIN_PCT; a flag
that forces either way records it too, so that one run of each decides later runs. cuDNN's
algorithm search and batch-1 compilation are chosen so (engine.acceleration.cudnn_search,
engine.acceleration.compile_choice)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from dlbench.caches import keep_record, positive_figure, read_record
from dlbench.config import CONFIG_KEY, RunConfig

# The other way is taken where its step was shorter than the default's by more than this; below
# it, switching buys less than a repeated row's spread.
MIN_GAIN_PCT = 1.0
# The settings that decide what a point measures (its row's experiment key and the generation
# and DDP settings): a choice is kept per point of them all, less the one it chooses, so that two
# points that measure different things (an --llm-impl hf run and a native one) never share one.
DECIDING = (*CONFIG_KEY, "prompt_len", "new_tokens", "ddp", "cudnn_search")


def point_key(config: RunConfig, choosing: str) -> str:
    """A short stable name for the point: every DECIDING setting of the config but `choosing`
    (the GPU and the software are the cache folder's own key)."""
    fields = [name for name in DECIDING if name != choosing]
    text = json.dumps([str(config.setting(name)) for name in fields])
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    return f"{config.workload.model}-{config.workload.mode}-bs{config.workload.batch_size}-{digest}"


@dataclass(frozen=True)
class MeasuredChoice:
    """One choice's record file and its two ways: `default` until `other` is measured to win."""

    file: str
    default: str
    other: str

    def recorded(self, folder: Path | None) -> dict[str, dict[str, float]]:
        """Each point's median step by the way it ran ({} for a cold run, or a record that
        cannot be read; a step that is no finite positive number, `true` included, is no step:
        a record is a hint, never an error)."""
        ways = (self.default, self.other)
        return {
            key: {
                k: figure
                for k, v in steps.items()
                if k in ways and (figure := positive_figure(v)) is not None
            }
            for key, steps in read_record(folder, self.file).items()
            if isinstance(steps, dict)
        }

    def gain_pct(self, steps: dict[str, float]) -> float | None:
        """How much longer the default way's step was than the other's, in %; None until
        both were measured."""
        if self.default not in steps or self.other not in steps:
            return None
        return 100.0 * (steps[self.default] / steps[self.other] - 1.0)

    def other_wins(self, steps: dict[str, float]) -> bool:
        """Whether the record says the other way pays here."""
        gain = self.gain_pct(steps)
        return gain is not None and gain > MIN_GAIN_PCT

    def record(
        self, folder: Path | None, key: str, ran: str, median_s: float, steps: dict[str, float]
    ) -> dict[str, float]:
        """The point's steps with this run's median in; written to `folder` (None: nowhere,
        a cold run or a rank other than 0)."""
        steps = dict(steps)
        if median_s > 0:
            steps[ran] = median_s
            if folder is not None:
                everything = self.recorded(folder)
                everything[key] = steps
                keep_record(folder, self.file, everything)
        return steps
