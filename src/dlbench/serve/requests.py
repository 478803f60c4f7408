"""The synthetic requests an LLM server is sent: for each of LoadGen's samples a prompt length
and an output length, fixed (every request the same, the default), drawn uniformly around the
given lengths (`uniform`: from half to one and a half times each, by a seeded generator so that
a run can be repeated), or shaped like real chat traffic (`chat`: the Azure trace's pairs,
serve.chat_traffic, scaled so that their means are the lengths given); and the prompts' token
ids, random below the vocabulary's size."""

from __future__ import annotations

import random
from dataclasses import dataclass

from dlbench.serve.chat_traffic import CHAT_PAIRS

LENGTHS = ("fixed", "uniform", "chat")
SPREAD = 0.5  # uniform: lengths drawn from (1 - SPREAD) to (1 + SPREAD) times the given
MIN_OUTPUT = 2  # LoadGen's time per output token divides by the tokens after the first


@dataclass(frozen=True)
class RequestLengths:
    """Each sample's prompt and output length, by LoadGen's sample index."""

    prompt: tuple[int, ...]
    output: tuple[int, ...]

    @property
    def longest(self) -> int:
        """The most positions one request takes in the cache: prompt and output."""
        return max(p + o for p, o in zip(self.prompt, self.output))


def request_lengths(
    samples: int, prompt_len: int, new_tokens: int, kind: str, seed: int
) -> RequestLengths:
    """`samples` requests' lengths: all `prompt_len` and `new_tokens` (fixed), or each drawn
    uniformly within SPREAD of them (uniform), outputs never under MIN_OUTPUT."""
    if kind == "fixed":
        return RequestLengths((prompt_len,) * samples, (new_tokens,) * samples)
    if kind == "chat":
        pairs = chat_pairs(prompt_len, new_tokens)
        chosen = [pairs[k % len(pairs)] for k in range(samples)]
        return RequestLengths(tuple(p for p, _ in chosen), tuple(o for _, o in chosen))
    draw = random.Random(seed)

    def around(length: int, least: int) -> int:
        low = max(least, round(length * (1 - SPREAD)))
        return draw.randint(low, max(low, round(length * (1 + SPREAD))))

    pairs = [(around(prompt_len, 1), around(new_tokens, MIN_OUTPUT)) for _ in range(samples)]
    return RequestLengths(tuple(p for p, _ in pairs), tuple(o for _, o in pairs))


def longest_request(prompt_len: int, new_tokens: int, kind: str) -> int:
    """The most positions any request of these settings may take (checked before anything is
    built): prompt and output at their longest."""
    if kind == "fixed":
        return prompt_len + new_tokens
    if kind == "chat":
        return max(p + o for p, o in chat_pairs(prompt_len, new_tokens))
    return round(prompt_len * (1 + SPREAD)) + round(new_tokens * (1 + SPREAD))


def chat_pairs(prompt_len: int, new_tokens: int) -> list[tuple[int, int]]:
    """The chat trace's (prompt, output) pairs scaled so that their means are `prompt_len` and
    `new_tokens` (its shape kept: a long prompt stays long), at least one prompt token and
    MIN_OUTPUT output tokens each."""
    prompts, outputs = (sum(pair[i] for pair in CHAT_PAIRS) / len(CHAT_PAIRS) for i in (0, 1))
    return [
        (max(1, round(p * prompt_len / prompts)), max(MIN_OUTPUT, round(o * new_tokens / outputs)))
        for p, o in CHAT_PAIRS
    ]
