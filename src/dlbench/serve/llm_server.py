"""The model side of an LLM server: the native Llama on one device, its KV cache preallocated
as slots (one sequence each, prompt and output at their longest), and two steps the scheduler
(serve.continuous) calls between: prefill newcomers into their slots, and one decode step of
every running sequence, each at its own position.

Everything a step reads lives on the device in static buffers (each slot's last token and
position, the newcomers' samples, slots and prompt ends, the prompts of every sample), so each
step has static shapes: a decode step is captured as a CUDA graph per bucket of rows (1, 2, 4
... slots), its decoder blocks compiled once for every bucket and layer, a prefill per bucket of
newcomers and of prompt length, all before any load. A prefill runs in a staging cache of its
own and moves the newcomers' keys and values into their slots (padding rows into a spare slot
no request holds). The host waits once a step, for the step's tokens: that is when a token is
made, for LoadGen as for a client."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager, nullcontext

import torch

from dlbench.engine.acceleration.float8 import apply_float8
from dlbench.engine.acceleration.graphs import can_capture, capture_each
from dlbench.engine.acceleration.precision import PrecisionPlan
from dlbench.engine.scenarios.decoders import greedy_token
from dlbench.engine.scenarios.session import build_model
from dlbench.serve.continuous import Request
from dlbench.serve.kv_budget import KvBudget, cache_element_size, cache_slots, free_memory
from dlbench.serve.kv_budget import prefill_rows as prefill_rows_of
from dlbench.serve.model_server import WARM_RUNS, bucket_of, buckets
from dlbench.serve.requests import RequestLengths
from dlbench.workloads import InputShape, Workload


def length_buckets(prompts: Sequence[int]) -> list[int]:
    """The prompt lengths a prefill pads to: each prompt's next power of two, capped at the
    longest prompt (fixed lengths: the one length itself)."""
    longest = max(prompts)
    return sorted({min(1 << (p - 1).bit_length(), longest) for p in prompts})


@contextmanager
def built_in(dtype: torch.dtype):
    """Modules made inside are made in `dtype` (the served weights' own): an 8B's weights built
    in fp32 and cast after would take twice their served memory, and leave it cached."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


# inductor, for each decoder block once (a test counts the compiles with its own backend)
COMPILE_BACKEND = "inductor"


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
        KV_SHARE of the device's free memory once the weights are there). Under fp8 the
        Linear layers' weights are float8 (torchao's, a scale per row); the cache stays in the
        weights' own dtype."""
        torch.manual_seed(seed)
        self.max_len = lengths.longest
        with built_in(precision.param_dtype):
            model, _ = build_model(workload, InputShape(0, 0, self.max_len), "native", device)
        self.model = model.eval().to(dtype=precision.param_dtype)
        self.float8 = apply_float8(self.model, precision.fp8, sharded=False)
        self.device = device
        self.cache_dtype = precision.param_dtype
        most, limit = sizes
        longest_prompt = max(lengths.prompt)
        budget = KvBudget(
            workload.cache_width or 0,
            cache_element_size(precision.name),
            self.max_len,
            longest_prompt,
            prefill_rows_of(most, longest_prompt),
        )
        slots = self.slots = cache_slots(budget, most, limit, free_memory(device))
        self.kv_budget = budget
        self.dtype = precision.autocast_dtype
        self.prompt_buckets = length_buckets(lengths.prompt)
        self.prefill_rows = buckets(prefill_rows_of(slots, longest_prompt))
        self.decode_rows = buckets(slots)
        # a spare slot past the last: a padding row of a prefill writes there
        self.cache = self.model.setup_cache(slots + 1, self.max_len, self.cache_dtype)
        self.staging = self.model.setup_cache(
            self.prefill_rows[-1], self.prompt_buckets[-1], self.cache_dtype
        )
        self.lengths = lengths
        self._make_buffers(workload.vocab_size or 2, seed)
        self.graphs = graphs and can_capture(device.type)
        self.steps: dict[tuple[int, ...], Callable[[], None]] = {}
        self.fallback = ""
        # Each decoder block compiled, once for them all (regional compilation: one block's
        # graph, reused by every layer, and its rows dynamic after the second bucket, so a
        # server of many buckets compiles twice, not once a bucket;
        # docs/decisions.md#regional-serve-compile); the decode steps call them, the prefills
        # the plain blocks. Each bucket is then captured as a graph.
        self.blocks = (
            [torch.compile(b, backend=COMPILE_BACKEND) for b in self.model.layers]
            if compile
            else None
        )

    def _make_buffers(self, vocab: int, seed: int) -> None:
        """What every step reads and writes, on the device (the host's side pinned on a GPU):
        each sample's prompt, each slot's last token and position, the newcomers' table and
        their first tokens, and the host's copy of a step's tokens."""
        generator = torch.Generator().manual_seed(seed)
        shape = (len(self.lengths.prompt), self.prompt_buckets[-1])
        self.prompts = torch.randint(0, vocab, shape, generator=generator).to(self.device)
        on = {"device": self.device, "dtype": torch.long}
        slots, rows = self.slots, self.prefill_rows[-1]
        self.tokens = torch.zeros(slots + 1, 1, **on)
        self.positions = torch.zeros(slots + 1, **on)
        self.span = torch.arange(self.prompt_buckets[-1], **on)
        self.newcomers = torch.zeros(3, rows, **on)  # samples, slots, ends
        pinned = self.device.type == "cuda"
        self.newcomers_host = torch.zeros(3, rows, dtype=torch.long, pin_memory=pinned)
        self.made = torch.zeros(slots + 1, dtype=torch.long, pin_memory=pinned)
        self.fresh = torch.zeros(rows, **on)  # a prefill's first tokens, on the device

    def kv_cache_bytes(self, slots: int | None = None) -> int:
        """The served sequences' cache (the spare slot and the staging cache left out), of
        every slot or of the first `slots`."""
        return self.kv_budget.per_slot * (self.slots if slots is None else slots)

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
        blocks = None if self.model.kernel_decode(rows) else self.blocks
        with self._autocast():
            logits = self.model.logits(tokens, positions, self.cache.rows(rows), blocks=blocks)
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

    def warm(self, progress: Callable[[str], None] = lambda line: None) -> None:
        """Every step's bucket a few times (each compiles once), then each as a CUDA graph; a
        capture that fails leaves every step uncaptured (the row's `graph_fallback`).
        `progress` is told of each step warmed, in a line."""
        keys = [(0, b) for b in self.decode_rows]
        keys += [(1, r, n) for r in self.prefill_rows for n in self.prompt_buckets]
        limit = max(torch._dynamo.config.recompile_limit, len(keys) + 1)
        with torch.inference_mode(), torch._dynamo.config.patch(recompile_limit=limit):
            for k, key in enumerate(keys, 1):
                began = time.perf_counter()
                for _ in range(WARM_RUNS):
                    self._run(key)
                what = (
                    f"decode of {key[1]} rows"
                    if key[0] == 0
                    else (f"prefill of {key[1]} x {key[2]} tokens")
                )
                progress(f"warmed {k}/{len(keys)}: {what} ({time.perf_counter() - began:.1f} s)")
            if self.graphs:
                self.steps, self.fallback = capture_each(
                    {key: self._step_of(key) for key in keys}, self.device, "a serving step"
                )

    def _step_of(self, key: tuple[int, ...]) -> Callable[[], None]:
        """Step `key` called: a decode (its blocks compiled, unless its rows run the Triton
        decode kernels end to end: nothing is left for inductor, as in the generation rows), or
        a prefill."""
        if key[0] == 0:
            return lambda: self._decode(key[1])
        return lambda: self._prefill(key[1], key[2])

    def columns(self, slots: int | None = None) -> dict[str, object]:
        """What the server ran: its slots and cache (of the first `slots`, where a load used
        no more: as a server of that many would have them), and whether its steps ran as
        graphs."""
        used = self.slots if slots is None else min(slots, self.slots)
        found: dict[str, object] = {
            "serve_kv_slots": used,
            "serve_kv_cache_gb": self.kv_cache_bytes(used) / 1e9,
            "serve_prefill_rows": prefill_rows_of(used, max(self.lengths.prompt)),
        }
        if self.float8 is not None:
            found["fp8_recipe"] = self.float8.recipe.name
            found["fp8_linear_layers"] = len(self.float8.names)
        found["cuda_graphs"] = bool(self.steps)  # as run: False on a CPU, or after a failed capture
        if self.graphs:
            found["graph_fallback"] = self.fallback
        return found
