"""Whether an LLM server served the right tokens: a sample of a load's requests generated again,
greedily, by the same model without any cache (the whole sequence so far through the model for
each token), held token for token against what the server answered. A served path that writes
a cache row to the wrong slot, reads a stale position or mixes rows answers fast and wrong;
only this check sees it, and a row that fails it is invalid (`wrong_tokens`).

The requests checked are the load's first finished ones whose slot another request held before
(`CheckedSample`): a stale cache row, the fault this check exists for, shows only there; a load
too short to reuse a slot has its first finished requests checked instead.

Where the two paths' arithmetic differs (batched kernels, a CUDA graph, bf16 rounding), two
tokens whose logits tie within rounding may swap: as vLLM's tests compare logprobs, the first
difference is a near tie where the served token is among the reference's TOP_K and its
log-probability is within NEAR_TIE_NATS of the best's, and the request is compared no further
(its sequences differ from there); any other difference is a wrong token."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from dlbench.serve.continuous import Request

CHECKED_REQUESTS = 4  # a load's requests generated again
TOP_K = 5  # a first difference whose served token is among the reference's best TOP_K ...
NEAR_TIE_NATS = 0.5  # ... and whose log-probability is this close to the best's: a near tie


@dataclass
class CheckedSample:
    """The requests a load's token check takes, offered as they finish: the first
    CHECKED_REQUESTS that reused a slot, else (a short load) the first finished."""

    reused: list[Request] = field(default_factory=list)
    first: list[Request] = field(default_factory=list)

    def offer(self, finished: Sequence[Request]) -> None:
        for request in finished:
            if not request.done:
                continue
            kept = self.reused if request.reused_slot else self.first
            if len(kept) < CHECKED_REQUESTS:
                kept.append(request)

    def requests(self) -> list[Request]:
        return [*self.reused, *self.first][:CHECKED_REQUESTS]


@dataclass(frozen=True)
class TokenCheck:
    """Requests checked, those whose first difference was a near tie, and those served wrong."""

    checked: int = 0
    near_ties: int = 0
    wrong: int = 0

    def columns(self) -> dict[str, int]:
        return {
            "serve_tokens_checked": self.checked,
            "serve_tokens_near_ties": self.near_ties,
            "serve_tokens_wrong": self.wrong,
        }


def check_tokens(
    model: torch.nn.Module,
    prompts: torch.Tensor,
    requests: Sequence[Request],
    autocast_dtype: torch.dtype | None,
) -> TokenCheck:
    """Each request's served tokens against the model's greedy tokens without a cache, from its
    prompt (`prompts[sample, :prompt_len]`)."""
    near = wrong = 0
    for request in requests:
        verdict = _compare(model, prompts, request, autocast_dtype)
        near += verdict == "near"
        wrong += verdict == "wrong"
    return TokenCheck(len(requests), near, wrong)


def _compare(model, prompts, request: Request, dtype: torch.dtype | None) -> str:
    """'same', 'near' (a near tie, then no further) or 'wrong'."""
    ids = prompts[request.sample, : request.prompt_len][None]
    device = ids.device
    cast = torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()
    with torch.inference_mode(), cast:
        for served in request.tokens:
            logits = model.output(model.norm(model.hidden_states(ids)))[0, -1].float()
            best = int(logits.argmax())
            if served != best:
                return "near" if near_tie(logits, served) else "wrong"
            ids = torch.cat([ids, torch.tensor([[served]], device=device)], dim=1)
    return "same"


def near_tie(logits: torch.Tensor, served: int) -> bool:
    """Whether `served`, not the reference's best, is a near tie: among its TOP_K and within
    NEAR_TIE_NATS of the best's log-probability."""
    if not 0 <= served < logits.numel():
        return False
    top = logits.topk(min(TOP_K, logits.numel())).indices.tolist()
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    return served in top and float(logprobs.max() - logprobs[served]) <= NEAR_TIE_NATS
