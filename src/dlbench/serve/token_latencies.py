"""An LLM load's latencies on the server's own clock, request by request, as `vllm bench serve`
reports them: time to first token (TTFT), time per output token after the first (TPOT), every
gap between two tokens of a request (ITL) and a request's whole latency (E2EL), each from the
moment LoadGen handed the request over to when its token reached the host; and goodput
(DistServe's: the requests that met every bound, a second, and their output tokens a second).

LoadGen measures TTFT and TPOT itself in the server and single-stream scenarios (from each
query's scheduled issue), and those stay the row's; in offline it measures neither, and the row
takes the server's (`serve_token_clock` says which). ITL, E2EL and goodput are the server's in
every scenario."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from dlbench.results.stats import percentile
from dlbench.serve.continuous import Request

PERCENTILES = (50, 90, 99)


@dataclass
class TokenLatencies:
    """Each finished request's latencies, in seconds, and the load's span on the server's
    clock (its first hand-over to its last token)."""

    ttft: list[float] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # each TTFT's request's hand-over
    tpot: list[float] = field(default_factory=list)
    e2el: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    began: float = math.inf
    ended: float = -math.inf

    def add(self, requests: Sequence[Request]) -> None:
        """Requests answered with every token (one abandoned unfinished is no latency)."""
        for r in requests:
            if len(r.times) < 2 or len(r.times) != len(r.tokens) or not r.done:
                continue
            self.ttft.append(r.times[0] - r.arrived)
            self.arrivals.append(r.arrived)
            self.tpot.append((r.times[-1] - r.times[0]) / (len(r.times) - 1))
            self.e2el.append(r.times[-1] - r.arrived)
            self.itl += [b - a for a, b in zip(r.times, r.times[1:])]
            self.outputs.append(len(r.tokens))
            self.began, self.ended = min(self.began, r.arrived), max(self.ended, r.times[-1])

    def columns(self, bounds_ms: tuple[float, float], loadgen_tokens: bool) -> dict[str, object]:
        """The row's columns: ITL (mean and percentiles), E2EL, goodput against `bounds_ms`
        (TTFT, TPOT), and TTFT and TPOT themselves where LoadGen measured none."""
        if not self.e2el:
            return {}
        columns: dict[str, object] = {
            "serve_token_clock": "loadgen" if loadgen_tokens else "server"
        }
        if not loadgen_tokens:
            columns |= _percentiles("serve_ttft", self.ttft) | _percentiles("serve_tpot", self.tpot)
        tpot = statistics.median(self.tpot)
        columns["serve_tokens_per_s_per_user"] = 1 / tpot if tpot > 0 else None
        columns["serve_itl_mean_ms"] = 1e3 * statistics.fmean(self.itl)
        columns |= _percentiles("serve_itl", self.itl) | _percentiles("serve_e2el", self.e2el)
        return columns | self.goodput(bounds_ms)

    def goodput(self, bounds_ms: tuple[float, float]) -> dict[str, object]:
        """Requests that met both bounds (their TTFT and TPOT on this clock), a second over the
        load's span, their output tokens a second, and their share of the requests."""
        ttft_s, tpot_s = (b / 1e3 for b in bounds_ms)
        met = [a <= ttft_s and b <= tpot_s for a, b in zip(self.ttft, self.tpot)]
        span = self.ended - self.began
        if span <= 0:
            return {}
        tokens = sum(n for n, ok in zip(self.outputs, met) if ok)
        return {
            "serve_goodput_qps": sum(met) / span,
            "serve_goodput_tokens_per_s": tokens / span,
            "serve_goodput_pct": 100.0 * sum(met) / len(met),
        }


def _percentiles(prefix: str, seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {f"{prefix}_p{q}_ms": 1e3 * percentile(ordered, q) for q in PERCENTILES}
