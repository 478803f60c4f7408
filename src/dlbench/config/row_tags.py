"""What a row says beyond its flags: labels (`--tag`, a sweep plan's tags) and the two facts
dlbench's own machinery adds, typed, so that no layer slips a column into a loose dict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

# How a sweep ran the point: in its worker process, or in a process of its own.
ISOLATIONS = ("worker", "process")


@dataclass(frozen=True)
class RowTags:
    """A run's tags: `labels` as given, `isolation` (sweeps) and `batch_size_mode` (`auto`
    when --batch-size auto chose the batch); empty facts write no column."""

    labels: Mapping[str, str] = field(default_factory=dict)
    isolation: str = ""
    batch_size_mode: str = ""

    @classmethod
    def of(cls, pairs: Mapping[str, str]) -> RowTags:
        """Tags from KEY=VALUE pairs as a command line carries them (`--tag isolation=process`
        to a sweep's child process): the typed facts lifted out of the labels."""
        labels = dict(pairs)
        isolation = labels.pop("isolation", "")
        if isolation and isolation not in ISOLATIONS:
            labels["isolation"] = isolation  # a user's own label of that name
            isolation = ""
        return cls(labels, isolation, labels.pop("batch_size_mode", ""))

    def with_facts(self, **facts: str) -> RowTags:
        """These tags with `isolation` or `batch_size_mode` set."""
        return replace(self, **facts)

    def columns(self) -> dict[str, str]:
        """The row's columns: the labels, then the facts that are set."""
        facts = {"isolation": self.isolation, "batch_size_mode": self.batch_size_mode}
        return {**self.labels, **{k: v for k, v in facts.items() if v}}
