"""Probe (issue 73): why one cold llm_1b batch-1 decode in nine read 0.77 of the published row.

One process on one GPU: the batch-1 decode step of llm_1b (dlbench's Triton GEMVs, captured as a
CUDA graph, as the measured run replays it), and
1. every launch shape of each GEMV matrix timed alone, ROUNDS times interleaved (Triton's
   do_bench at its default length): the isolated ranking and how stable it is;
2. COLD cold autotunes (the autotuner's cache emptied, one eager step tunes every matrix as a
   cold run does): the shapes each picks and the step's inter-token latency with them;
3. LOADED more of them with every host core busy (a host that compiles while a point tunes);
4. a coordinate search over each matrix's best isolated shapes for the step's own latency
   (chained, launched as programmatic dependents): the assignment worth keeping per GPU.
Writes one JSON to --out. Not part of dlbench: it leaves the tree once its finding is in docs."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time

import torch
import triton
from triton.testing import do_bench

from dlbench.workloads import decode_kernels as dk
from dlbench.workloads import get_workload
from dlbench.workloads.base import InputShape
from dlbench.workloads.greedy_kernels import greedy_advance

PROMPT, CONTEXT, ROUND = 128, 256, 127


def build(device: torch.device):
    workload = get_workload("llm_1b")
    torch.manual_seed(0)
    with torch.device(device):
        hf = workload.build(InputShape(0, 0, CONTEXT))
    hf = hf.to(torch.bfloat16).eval()
    native = workload.native(hf).eval()
    del hf
    native.setup_cache(1, CONTEXT)
    token = torch.zeros(1, 1, dtype=torch.long, device=device)
    position = torch.full((1,), PROMPT, dtype=torch.long, device=device)
    return native, token, position


def save(result: dict, path: str, phase: str) -> None:
    with open(path, "w") as out:
        json.dump(result, out, indent=1)
    print(f"[probe] {phase} done at {time.strftime('%H:%M:%S')}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", type=int, default=10)
    parser.add_argument("--loaded", type=int, default=5)
    parser.add_argument("--candidates", type=int, default=6)
    args = parser.parse_args()
    device = torch.device("cuda", torch.cuda.current_device())
    result: dict = {
        "gpu": torch.cuda.get_device_name(device),
        "triton": triton.__version__,
        "torch": torch.__version__,
    }
    native, token, position = build(device)

    calls: dict[tuple, tuple] = {}
    original = dk._compile_launch_shapes

    def record(call_args, flags):
        n, k = call_args[1].shape
        shape = (n, k, *(flags[f] for f in ("GATED", "NORM", "RESIDUAL", "SCALED")))
        calls.setdefault(shape, (call_args, {f: v for f, v in flags.items() if f != "launch_pdl"}))
        original(call_args, flags)

    dk._compile_launch_shapes = record

    def step() -> None:
        logits = native.logits(token, position)
        greedy_advance(logits[:, -1], token, position)

    def eager_step() -> None:
        with torch.inference_mode():
            position.fill_(PROMPT)
            step()
        torch.cuda.synchronize(device)

    started = time.perf_counter()
    eager_step()  # compiles every launch shape and tunes once
    result["first_step_s"] = time.perf_counter() - started
    shapes = sorted(calls)
    result["shapes"] = [list(s) for s in shapes]

    def key_of(shape):
        return next(k for k in dk.gemv_kernel.cache if tuple(k[:6]) == shape)

    keys = {s: key_of(s) for s in shapes}

    def name(config) -> str:
        return f"N{config.kwargs['BLOCK_N']}K{config.kwargs['BLOCK_K']}w{config.num_warps}"

    def choices() -> dict[str, str]:
        return {str(s): name(dk.gemv_kernel.cache[keys[s]]) for s in shapes}

    def itl_ms(repeats: int = 8) -> float:
        """The step replayed from a CUDA graph, rounds of ROUND tokens from the prompt's end."""
        with torch.inference_mode():
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(3):
                    position.fill_(PROMPT)
                    step()
            torch.cuda.current_stream(device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            position.fill_(PROMPT)
            with torch.cuda.graph(graph):
                step()
            times = []
            for _ in range(repeats):
                position.fill_(PROMPT)
                begin = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                begin.record()
                for _ in range(ROUND):
                    graph.replay()
                end.record()
                end.synchronize()
                times.append(begin.elapsed_time(end) / ROUND)
            del graph
        return statistics.median(times)

    def assign(picks: dict) -> None:
        for s, config in picks.items():
            dk.gemv_kernel.cache[keys[s]] = config

    # 1. every launch shape alone
    table: dict[tuple, dict[str, list[float]]] = {s: {} for s in shapes}
    by_name = {name(c): c for c in dk.CONFIGS}
    for _ in range(args.rounds):
        for s in shapes:
            call_args, flags = calls[s]
            n = call_args[1].shape[0]
            for config in dk.CONFIGS:
                grid = (triton.cdiv(n, config.kwargs["BLOCK_N"]),)

                def launch(config=config, grid=grid, call_args=call_args, flags=flags):
                    dk.gemv_kernel.fn[grid](
                        *call_args, **flags, **config.all_kwargs(), launch_pdl=flags["PDL"]
                    )

                ms = do_bench(launch, warmup=25, rep=100, quantiles=(0.5,))
                ms = ms[0] if isinstance(ms, (list, tuple)) else ms
                table[s].setdefault(name(config), []).append(ms * 1e3)
    result["isolated_us"] = {str(s): v for s, v in table.items()}
    ranked = {s: sorted(table[s], key=lambda c: statistics.median(table[s][c])) for s in shapes}
    result["isolated_best"] = {str(s): ranked[s][0] for s in shapes}
    best_isolated = {s: by_name[ranked[s][0]] for s in shapes}
    assign(best_isolated)
    result["itl_isolated_best_ms"] = [itl_ms() for _ in range(3)]
    save(result, args.out, "isolated")

    # 2. cold autotunes as a cold run tunes (the default quiet host)
    def cold_tunes(count: int) -> list[dict]:
        found = []
        for _ in range(count):
            dk.gemv_kernel.cache.clear()
            begin = time.perf_counter()
            eager_step()
            tune_s = time.perf_counter() - begin
            picks = choices()
            found.append({"picks": picks, "tune_s": tune_s, "itl_ms": itl_ms()})
        return found

    result["cold"] = cold_tunes(args.cold)
    save(result, args.out, "cold")

    # 3. the same with every host core busy
    def spin() -> None:
        while True:
            pass

    spinners = [
        multiprocessing.Process(target=spin, daemon=True)
        for _ in range(multiprocessing.cpu_count())
    ]
    for p in spinners:
        p.start()
    try:
        loaded = []
        for _ in range(args.loaded):
            dk.gemv_kernel.cache.clear()
            eager_step()
            loaded.append(choices())
    finally:
        for p in spinners:
            p.terminate()
    result["loaded"] = []
    for picks in loaded:
        assign({s: by_name[picks[str(s)]] for s in shapes})
        result["loaded"].append({"picks": picks, "itl_ms": itl_ms()})
    save(result, args.out, "loaded")

    # 4. a coordinate search for the chained step's latency
    current = dict(best_isolated)
    search = []
    for s in shapes:
        scores = {}
        for candidate in ranked[s][: args.candidates]:
            assign({**current, s: by_name[candidate]})
            scores[candidate] = statistics.median(itl_ms() for _ in range(2))
        winner = min(scores, key=scores.get)
        current[s] = by_name[winner]
        search.append({"shape": str(s), "scores_ms": scores, "winner": winner})
    result["search"] = search
    result["searched"] = {str(s): name(c) for s, c in current.items()}
    final = {"searched": current, "isolated_best": best_isolated}
    result["final_itl_ms"] = {}
    for _ in range(3):  # interleaved
        for label, picks in final.items():
            assign(picks)
            result["final_itl_ms"].setdefault(label, []).append(itl_ms())
    save(result, args.out, "search")
    print(json.dumps({k: result[k] for k in ("isolated_best", "searched", "final_itl_ms")}))
    for run in result["cold"]:
        print("cold", f"{run['itl_ms']:.4f} ms", run["picks"])
    for run in result["loaded"]:
        print("loaded", f"{run['itl_ms']:.4f} ms", run["picks"])


if __name__ == "__main__":
    main()
