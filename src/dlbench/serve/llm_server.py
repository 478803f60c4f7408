"""The model side of an LLM server: the native Llama on one device, its KV cache preallocated
as slots (one sequence each, prompt and output at their longest), and two steps the scheduler
(serve.continuous) calls between: prefill newcomers into their slots, and one decode step of
every running sequence, each at its own position.

Everything a step reads lives on the device in static buffers (each slot's last token and
position, the newcomers' samples, slots and prompt ends, the prompts of every sample), so each
step has static shapes: a decode step is compiled and captured as a CUDA graph per bucket of
rows (1, 2, 4 ... slots), a prefill per bucket of newcomers and of prompt length, all before
any load. A prefill runs in a staging cache of its own and moves the newcomers' keys and values
into their slots (padding rows into a spare slot no request holds). The host waits once a
step, for the step's tokens: that is when a token is made, for LoadGen as for a client."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext

import torch

from dlbench.engine.acceleration.graphs import can_capture, capture_each
from dlbench.engine.acceleration.precision import PrecisionPlan
from dlbench.engine.scenarios.decoders import greedy_token
from dlbench.engine.scenarios.session import build_model
from dlbench.errors import UserError
from dlbench.serve.continuous import Request
from dlbench.serve.model_server import WARM_RUNS, bucket_of, buckets
from dlbench.serve.requests import RequestLengths
from dlbench.workloads import InputShape, Workload

PREFILL_ROWS = 8  # newcomers prefilled together, at most
KV_SHARE = 0.5  # of the free memory, once the weights are loaded: the rest for the steps


def length_buckets(prompts: Sequence[int]) -> list[int]:
    """The prompt lengths a prefill pads to: each prompt's next power of two, capped at the
    longest prompt (fixed lengths: the one length itself)."""
    longest = max(prompts)
    return sorted({min(1 << (p - 1).bit_length(), longest) for p in prompts})


def cache_slots(
    model: torch.nn.Module,
    positions: tuple[int, int],
    most: int,
    limit: float | None,
    device: torch.device,
) -> int:
    """How many requests the KV cache holds, `positions` being a request's longest (prompt and
    output) and the longest prompt: `most` where the memory allows, fewer where `limit` bytes
    (or KV_SHARE of the free memory) do not, counting the spare slot and the prefill's staging
    cache too; a UserError where not even one fits, or where `limit` is past the device's free
    memory (such a cache would fail to allocate, or take what the steps need)."""
    max_len, prompt = positions
    per_slot, free = slot_bytes(model, max_len), free_memory(device)
    if limit is not None and limit > free:
        raise UserError(
            f"--kv-cache-gb: {limit / 1e9:,.3g} GB is more than the device's free memory once "
            f"the weights are loaded ({free / 1e9:,.3g} GB); give less, or leave it out (half "
            "of the free memory)"
        )
    budget = limit if limit is not None else KV_SHARE * free
    staging = PREFILL_ROWS * slot_bytes(model, prompt)
    fits = slots_within(budget, per_slot, staging)
    if fits < 1:
        given = "--kv-cache-gb" if limit is not None else f"{KV_SHARE:.0%} of the free memory"
        raise UserError(
            f"{given}: the KV cache cannot hold one request ({budget / 1e9:,.3g} GB for a "
            f"request of {max_len:,} positions taking {per_slot / 1e9:,.3g} GB, a spare slot "
            f"and the prefill's staging of {staging / 1e9:,.3g} GB; shorter --prompt-len or "
            "--new-tokens, or more memory)"
        )
    return min(most, fits)


def slots_within(budget: float, per_slot: int, staging: int) -> int:
    """Requests a cache of `budget` bytes holds: what the prefill's staging leaves, less the
    spare slot a padding row writes to (the one rule, before a model is built and after)."""
    return int((budget - staging) // per_slot) - 1


def slot_bytes(model: torch.nn.Module, max_len: int) -> int:
    """The KV cache's bytes for one request of `max_len` positions: keys and values of every
    layer's kv heads, in the weights' dtype."""
    layers, heads, dims = len(model.layers), model.kv_heads, model.head_dim
    return 2 * layers * heads * dims * model.output.weight.element_size() * max_len


def free_memory(device: torch.device) -> int:
    """Bytes the device can still give: the GPU's free memory, or the host's available."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


class LlmServer:
    """`prefill(requests)` and `decode(rows)` on the device; `warm()` before any load."""

    def __init__(
        self,
        workload: Workload,
        device: torch.device,
        precision: PrecisionPlan,
        lengths: RequestLengths,
        sizes: tuple[int, float | None],
        compile: bool,
        graphs: bool,
        seed: int,
    ) -> None:
        """`sizes`: the most requests run at once, and the bytes the KV cache may take (None:
        KV_SHARE of the device's free memory once the weights are there)."""
        torch.manual_seed(seed)
        self.max_len = lengths.longest
        model, _ = build_model(workload, InputShape(0, 0, self.max_len), "native", device)
        self.model = model.eval().to(dtype=precision.param_dtype)
        self.device = device
        positions = (self.max_len, max(lengths.prompt))
        slots = self.slots = cache_slots(self.model, positions, *sizes, device)
        self.dtype = precision.autocast_dtype
        self.prompt_buckets = length_buckets(lengths.prompt)
        self.prefill_rows = buckets(min(PREFILL_ROWS, slots))
        self.decode_rows = buckets(slots)
        # a spare slot past the last: a padding row of a prefill writes there
        self.cache = self.model.setup_cache(slots + 1, self.max_len)
        self.rows_cache = {rows: self.cache.rows(rows) for rows in self.decode_rows}  # views
        self.staging = self.model.setup_cache(self.prefill_rows[-1], self.prompt_buckets[-1])
        generator = torch.Generator().manual_seed(seed)
        vocab = workload.vocab_size or 2
        shape = (len(lengths.prompt), self.prompt_buckets[-1])
        self.prompts = torch.randint(0, vocab, shape, generator=generator).to(device)
        self.lengths = lengths
        on = {"device": device, "dtype": torch.long}
        self.tokens = torch.zeros(slots + 1, 1, **on)
        self.positions = torch.zeros(slots + 1, **on)
        self.span = torch.arange(self.prompt_buckets[-1], **on)
        self.newcomers = torch.zeros(3, self.prefill_rows[-1], **on)  # samples, slots, ends
        pinned = device.type == "cuda"
        rows = self.prefill_rows[-1]
        self.newcomers_host = torch.zeros(3, rows, dtype=torch.long, pin_memory=pinned)
        self.made = torch.zeros(slots + 1, dtype=torch.long, pin_memory=pinned)
        self.fresh = torch.zeros(rows, **on)  # a prefill's first tokens, on the device
        self.graphs = graphs and can_capture(device.type)
        self.steps: dict[tuple[int, ...], Callable[[], None]] = {}
        self.fallback = ""
        self._compiled = torch.compile(self._decode, dynamic=False) if compile else self._decode

    def kv_cache_bytes(self) -> int:
        """The served sequences' cache (the spare slot and the staging cache left out)."""
        return slot_bytes(self.model, self.max_len) * self.slots

    def _autocast(self):
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def _prefill(self, rows: int, length: int) -> None:
        """Newcomers 0..rows-1 (their sample, slot and prompt end in `newcomers`): their prompts
        through the model in the staging cache, their first tokens into their slots, their keys
        and values moved there."""
        samples, slots, ends = self.newcomers[:, :rows]
        ids = self.prompts.index_select(0, samples)[:, :length]
        staged = self.staging.rows(rows)
        with self._autocast():
            logits = self.model.logits(ids, self.span[:length], staged, last=ends)
        first = greedy_token(logits[:, -1])
        self.tokens.index_copy_(0, slots, first)
        self.positions.index_copy_(0, slots, ends + 1)
        for whole, part in zip(
            (*self.cache.keys, *self.cache.values), (*staged.keys, *staged.values)
        ):
            whole[:, :, :length].index_copy_(0, slots, part[:, :, :length])
        self.fresh[:rows].copy_(first[:, 0])

    def _decode(self, rows: int) -> None:
        """One token of sequences 0..rows-1, each at its own position (slots without a request
        compute one too, unread), left in `tokens` on the device."""
        tokens, positions = self.tokens[:rows], self.positions[:rows]
        with self._autocast():
            logits = self.model.logits(tokens, positions, self.rows_cache[rows])
        tokens.copy_(greedy_token(logits[:, -1]))
        positions.add_(1).clamp_(max=self.max_len - 1)

    def _run(self, key: tuple[int, ...]) -> None:
        """Step `key` (0, rows): a decode; (1, rows, length): a prefill) as a graph's replay
        where it was captured, else called; it ends when its tokens are on the host. The copy
        to the host is outside the step, so outside any graph and compiled code: inductor
        lowers a copy into pinned memory through a buffer of its own, unpinned, which CUDA
        graph capture refuses."""
        with torch.inference_mode():
            (self.steps.get(key) or self._step_of(key))()
            made = self.tokens[: key[1], 0] if key[0] == 0 else self.fresh[: key[1]]
            self.made[: key[1]].copy_(made, non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()

    @property
    def prefill_chunk(self) -> int:
        """The most newcomers one prefill takes (serve_step hands them over a chunk at a time)."""
        return self.prefill_rows[-1]

    def prefill(self, requests: Sequence[Request]) -> list[int]:
        """Up to `prefill_chunk` requests' prompts into their slots; their first tokens, on
        the host."""
        if not 0 < len(requests) <= self.prefill_chunk:
            raise ValueError(f"a prefill takes 1 to {self.prefill_chunk} requests")
        rows = bucket_of(self.prefill_rows, len(requests))
        length = bucket_of(self.prompt_buckets, max(r.prompt_len for r in requests))
        table = self.newcomers_host
        table.zero_()
        table[1].fill_(self.slots)  # padding rows: the spare slot
        for i, r in enumerate(requests):
            table[:, i] = torch.tensor((r.sample, r.slot, r.prompt_len - 1))
        self.newcomers.copy_(table, non_blocking=True)
        self._run((1, rows, length))
        return self.made[: len(requests)].tolist()

    def decode(self, rows: int) -> list[int]:
        """One decode step of the first `rows` slots (the rows bucket's); each slot's token."""
        size = bucket_of(self.decode_rows, rows)
        self._run((0, size))
        return self.made[:size].tolist()

    def warm(self) -> None:
        """Every step's bucket a few times (each compiles once), then each as a CUDA graph; a
        capture that fails leaves every step uncaptured (the row's `graph_fallback`)."""
        keys = [(0, b) for b in self.decode_rows]
        keys += [(1, r, n) for r in self.prefill_rows for n in self.prompt_buckets]
        limit = max(torch._dynamo.config.recompile_limit, len(keys) + 1)
        with torch.inference_mode(), torch._dynamo.config.patch(recompile_limit=limit):
            for key in keys:
                for _ in range(WARM_RUNS):
                    self._run(key)
            if self.graphs:
                self.steps, self.fallback = capture_each(
                    {key: self._step_of(key) for key in keys}, self.device, "a serving step"
                )

    def _step_of(self, key: tuple[int, ...]) -> Callable[[], None]:
        """Step `key` called: a decode compiled, unless its rows run the Triton decode kernels
        end to end (nothing is left for inductor, as in the generation rows), or a prefill."""
        if key[0] == 0:
            rows = key[1]
            decode = self._decode if self.model.kernel_decode(rows) else self._compiled
            return lambda: decode(rows)
        return lambda: self._prefill(key[1], key[2])

    def columns(self) -> dict[str, object]:
        """What the server ran: its slots and cache, and whether its steps ran as graphs."""
        found: dict[str, object] = {
            "serve_kv_slots": self.slots,
            "serve_kv_cache_gb": self.kv_cache_bytes() / 1e9,
        }
        found["cuda_graphs"] = bool(self.steps)  # as run: False on a CPU, or after a failed capture
        if self.graphs:
            found["graph_fallback"] = self.fallback
        return found
