"""How many requests an LLM server's KV cache holds, by one rule before anything is built (a
serve run's settings checked, a plan read) and after (the server's slots): a request's bytes are
the workload's cache width (key and value elements a position holds, over every layer) times the
size of the dtype the cache is kept in (the weights' as served: bf16-true's 2 bytes, a mixed
precision's fp32, fp8's bf16) times its longest positions; the cache holds a spare slot (a
prefill's padding rows write there) and the prefill's staging cache beside the slots."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from dlbench.engine.acceleration.precision import param_dtype_of
from dlbench.errors import UserError

# The KV cache's share of the device's free memory once the weights are loaded (the build's
# temporaries released): the rest is for the steps' activations and each bucket's graph pool.
KV_SHARE = 0.7
PREFILL_TOKENS = 4096  # prompt tokens a step prefills at most (one request at least)


def cache_element_size(precision: str) -> int:
    """Bytes an element of the KV cache takes: the dtype the served weights are kept in."""
    return param_dtype_of(precision, "infer").itemsize


@dataclass(frozen=True)
class KvBudget:
    """What one request of a model costs the cache: `width` elements a position, of
    `element` bytes, `longest` positions (prompt and output at their longest), and the staging
    a prefill of `prefill_rows` prompts of up to `prompt` positions takes."""

    width: int
    element: int
    longest: int
    prompt: int
    prefill_rows: int

    @property
    def per_slot(self) -> int:
        return self.width * self.element * self.longest

    @property
    def staging(self) -> int:
        return self.prefill_rows * self.width * self.element * self.prompt

    def slots_within(self, budget: float) -> int:
        """Requests a cache of `budget` bytes holds, the staging and the spare slot left out."""
        return int((budget - self.staging) // self.per_slot) - 1

    def cannot_hold_one(self, budget: float, given: str) -> str:
        """Why `budget` (named `given`) holds no request, or "" where it holds one."""
        if self.slots_within(budget) >= 1:
            return ""
        return (
            f"{given}: the KV cache cannot hold one request ({budget / 1e9:,.3g} GB for a "
            f"request of {self.longest:,} positions taking {self.per_slot / 1e9:,.3g} GB, a "
            f"spare slot and the prefill's staging of {self.staging / 1e9:,.3g} GB; shorter "
            "--prompt-len or --new-tokens, or more memory)"
        )


def prefill_rows(slots: int, longest_prompt: int) -> int:
    """The most newcomers one prefill takes: as many of the longest prompts as PREFILL_TOKENS
    holds (offline's first requests arrive together), at least one, at most the slots."""
    return max(1, min(slots, PREFILL_TOKENS // max(1, longest_prompt)))


def cache_slots(budget: KvBudget, most: int, limit: float | None, free: float) -> int:
    """How many requests the cache holds: `most` where the memory allows, fewer where `limit`
    bytes (or KV_SHARE of the `free` memory) do not; a UserError where not even one fits, or
    where `limit` is past the free memory (such a cache would fail to allocate, or take what
    the steps need)."""
    if limit is not None and limit > free:
        raise UserError(
            f"--kv-cache-gb: {limit / 1e9:,.3g} GB is more than the device's free memory once "
            f"the weights are loaded ({free / 1e9:,.3g} GB); give less, or leave it out "
            f"({KV_SHARE:.0%} of the free memory)"
        )
    given = "--kv-cache-gb" if limit is not None else f"{KV_SHARE:.0%} of the free memory"
    room = limit if limit is not None else KV_SHARE * free
    problem = budget.cannot_hold_one(room, given)
    if problem:
        raise UserError(problem)
    return min(most, budget.slots_within(room))


def free_memory(device: torch.device) -> int:
    """Bytes the device can still give once what the build left behind is released: the
    GPU's free memory (its allocator's cached blocks returned first), or the host's available."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        return torch.cuda.mem_get_info(device)[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
