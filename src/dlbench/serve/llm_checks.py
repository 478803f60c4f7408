"""What an LLM's serve settings must be, checked before anything is built (each refusal one
line naming the flag): the flags only an LLM takes, those it does not (an image's size and
layout, a text model's sequence, the p99 bound of whole queries), its batching and lengths,
and its requests against the model's context and LoadGen's least output."""

from __future__ import annotations

from typing import Protocol

from dlbench.config import SETTINGS, Setting
from dlbench.config.flags import flag_name
from dlbench.config.sections import check_choice
from dlbench.errors import UserError, invalid
from dlbench.serve.continuous import BATCHINGS
from dlbench.serve.requests import LENGTHS, MIN_OUTPUT, longest_request


class LlmRequests(Protocol):
    """What of a serve run's settings an LLM's checks read (serve.settings.ServeSettings)."""

    model: str
    batching: str
    lengths: str
    prompt_len: int
    new_tokens: int
    kv_cache_gb: float | None
    precision: str
    max_batch: int
    scenario: str
    sweep_concurrency: bool
    run_id: str | None


# what an LLM does not take, and what it takes in its place
_NOT_FOR_LLM = {
    "width": "an image's size",
    "height": "an image's size",
    "channels_last": "an image's layout",
    "seq_len": "a sequence length: an LLM's requests have --prompt-len and --new-tokens",
    "slo_p99_ms": "a bound on whole queries: an LLM's are --ttft-p99-ms and --tpot-p99-ms",
}


def llm_only_flags(settings: dict[str, Setting]) -> dict[str, str]:
    """The flags only an LLM takes (declared `only="llm"` among serve's `settings`), by their
    name on the command line."""
    return {
        flag_name(key, settings): key
        for key, setting in settings.items()
        if setting.field.metadata.get("only") == "llm"
    }


def check_llm_settings(s: LlmRequests, given: set[str]) -> None:
    """A UserError naming the first flag an LLM's serve run cannot take or be given."""
    for key, what in _NOT_FOR_LLM.items():
        if key in given:
            name = "--no-channels-last" if key == "channels_last" else flag_name(key, SETTINGS)
            raise UserError(f"{name}: {what}; {s.model} is an LLM")
    check_choice("--batching", s.batching, BATCHINGS)
    check_choice("--lengths", s.lengths, LENGTHS)
    if "batch_timeout_ms" in given and s.batching == "continuous":
        raise UserError(
            "--batch-timeout-ms: continuous batching holds no request for company (static "
            "batching does: --batching static)"
        )
    if s.new_tokens < MIN_OUTPUT:
        raise invalid(
            "--new-tokens", s.new_tokens, f"LoadGen's time per output token needs {MIN_OUTPUT}"
        )
    _check_context(s)
    _check_cache(s)
    _check_frontier(s)


def _check_context(s: LlmRequests) -> None:
    """A request longer than the model takes, refused: its prompt and output at their longest
    against the model's context."""
    from dlbench.workloads import get_workload

    context = get_workload(s.model).context_len
    longest = longest_request(s.prompt_len, s.new_tokens, s.lengths)
    if context is not None and longest > context:
        drawn = " at their longest (--lengths uniform)" if s.lengths == "uniform" else ""
        raise UserError(
            f"--prompt-len and --new-tokens: a request of {longest:,} positions{drawn} is "
            f"longer than {s.model}'s context of {context:,}"
        )


def _check_cache(s: LlmRequests) -> None:
    """A --kv-cache-gb that cannot hold one request (with the spare slot and the prefill's
    staging, by the server's own rule: serve.kv_budget) refused before anything is built, as a
    plan's entries are checked when it is read."""
    from dlbench.serve.kv_budget import KvBudget, cache_element_size, prefill_rows
    from dlbench.workloads import get_workload

    width = get_workload(s.model).cache_width
    if s.kv_cache_gb is None or width is None:
        return
    longest = longest_request(s.prompt_len, s.new_tokens, s.lengths)
    prompt = longest_request(s.prompt_len, 0, s.lengths)
    element = cache_element_size(s.precision)
    budget = KvBudget(width, element, longest, prompt, prefill_rows(s.max_batch, prompt))
    problem = budget.cannot_hold_one(s.kv_cache_gb * 1e9, "--kv-cache-gb")
    if problem:
        raise UserError(problem)


def _check_frontier(s: LlmRequests) -> None:
    """--sweep-concurrency: offline, where each point holds as many requests at once as its
    concurrency, and a row an id of its own."""
    if not s.sweep_concurrency:
        return
    if s.scenario != "offline":
        raise UserError(
            "--sweep-concurrency: offline only (each point as many requests at once as its "
            f"concurrency; {s.scenario} was given)"
        )
    if s.run_id is not None:
        raise UserError("--run-id: one row's id; --sweep-concurrency writes a row a point")
