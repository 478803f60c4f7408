"""A fake of several CUDA devices behind torch.cuda's own interface (Event, current_stream,
synchronize, device, current_device), for machines without a GPU: each device has its own clock,
which only work queued on that device moves; an event stamps the clock of the stream it is
recorded on, and two events of different devices cannot be compared (as in CUDA). Code that
times GPU 3's work with GPU 0's events reads zero, or fails."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FakeStream:
    device: int


class FakeCuda:
    """`count` devices; install() patches torch.cuda for one test (pytest's monkeypatch)."""

    def __init__(self, count: int) -> None:
        self.clocks_ms = [0.0] * count
        self.current = 0

    def queue(self, device: torch.device | int, ms: float) -> None:
        """Work of `ms` milliseconds queued on one device: only its clock moves."""
        self.clocks_ms[_index(device)] += ms

    def install(self, monkeypatch) -> FakeCuda:
        fake = self

        class Event:
            def __init__(self, enable_timing: bool = False, blocking: bool = False) -> None:
                self.device: int | None = None
                self.at_ms = 0.0

            def record(self, stream: FakeStream | None = None) -> None:
                stream = stream or fake.current_stream()
                self.device, self.at_ms = stream.device, fake.clocks_ms[stream.device]

            def synchronize(self) -> None:
                assert self.device is not None, "an event waited on before it was recorded"

            def elapsed_time(self, end: Event) -> float:
                if self.device != end.device:
                    raise RuntimeError("events of different devices cannot be compared")
                return end.at_ms - self.at_ms

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "current_stream", self.current_stream)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(torch.cuda, "device", self.device)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: self.current)
        return self

    def current_stream(self, device: torch.device | int | None = None) -> FakeStream:
        return FakeStream(self.current if device is None else _index(device))

    @contextmanager
    def device(self, device: torch.device | int):
        before, self.current = self.current, _index(device)
        try:
            yield
        finally:
            self.current = before


def _index(device: torch.device | int) -> int:
    return device if isinstance(device, int) else device.index or 0
