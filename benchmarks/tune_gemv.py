"""Tunes the batch-1 decode GEMV's launch shape per matrix for the GPU it runs on, inside the whole
decode step, and writes the table dlbench ships (src/dlbench/workloads/launch_shapes/<gpu>.json,
one section per Triton release; other sections of the file are kept).

Why the step and not each matrix alone: timed alone (Triton's autotuner) the small matrices'
shapes lie within a few % of each other and their order changes between cold runs, and the order
alone is not the order inside a step whose kernels start while the one before finishes
(docs/decisions.md#gemv-launch-shapes). The step here is dlbench's own: the generator a run opens,
its decode captured as a CUDA graph, timed by the shared measured loop (whole rounds: reset,
prefill, the decode steps). From the shapes a run takes now (the table's, or Triton's picks where
it has none), each matrix in turn (largest first) takes every
candidate shape, one round each, then its best three again over three rounds; twice over.

    PYTHONPATH=src python3 benchmarks/tune_gemv.py --model llm_1b
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import triton

from dlbench.config import RunConfig
from dlbench.engine.distribution.fabric import fabric_for
from dlbench.engine.plan import make_plan
from dlbench.engine.scenarios.generation import open_generator, prepare_steps
from dlbench.engine.timing.loop import LoopSettings, run_measured_loop
from dlbench.provenance import code_identity
from dlbench.workloads import decode_kernels, launch_shapes
from dlbench.workloads.launch_shapes import LaunchShape, trying

PASSES = 2
FINALISTS, FINAL_ROUNDS = 3, 3


def round_ms(generator, device: torch.device, rounds: int) -> float:
    """The median round (reset, prefill, the decode steps) with the current shapes, its decode
    captured anew as a CUDA graph."""
    per_round = generator.steps_per_round
    settings = LoopSettings(warmup_steps=per_round, n_iters=rounds * per_round,
                            steps_per_unit=per_round)  # fmt: skip
    with torch.inference_mode():
        steps = prepare_steps(generator, compile=False, cuda_graphs=True)
        loop = run_measured_loop(steps.round_step(per_round), device, settings)
    return loop.stats.median_s * 1e3


def tune(model: str, precision: str) -> tuple[dict[str, str], dict[str, float]]:
    """The shapes found for one model's decode matrices, and the round's time before (with the
    packaged table's shapes, or Triton's picks where it has none) and with them."""
    config = RunConfig.of(model=model, mode="infer", batch_size=1, precision=precision,
                          prompt_len=128, new_tokens=128, cuda_graphs=True)  # fmt: skip
    plan = make_plan(config)
    fabric = fabric_for(plan)
    generator, _ = open_generator(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    if not generator.decoder.kernel_decode:
        raise SystemExit(f"{model} at {precision}: batch-1 decode does not run the GEMV kernels")
    device = fabric.device
    launch_shapes.forget_launches()
    before = round_ms(generator, device, FINAL_ROUNDS)  # the table's shapes, or Triton's picks
    source = launch_shapes.launch_columns()["gemv_tuning"]
    picks = {key: LaunchShape.parse(name) for key, name in launch_shapes.ran_shapes().items()}
    largest = sorted(picks, key=lambda key: -_elements(key))
    candidates = decode_kernels.candidate_shapes()
    for _ in range(PASSES):
        for key in largest:
            quick = {}
            for shape in candidates:
                with trying({**picks, key: shape}):
                    quick[shape] = round_ms(generator, device, 1)
            finalists = sorted(quick, key=quick.get)[:FINALISTS]
            final = {}
            for shape in finalists:
                with trying({**picks, key: shape}):
                    final[shape] = round_ms(generator, device, FINAL_ROUNDS)
            picks[key] = min(final, key=final.get)
            print(f"{key}: {picks[key].name} ({final[picks[key]]:.3f} ms a round)", flush=True)
    with trying(picks):
        tuned = statistics.median(round_ms(generator, device, FINAL_ROUNDS) for _ in range(3))
    shapes = {key: shape.name for key, shape in sorted(picks.items())}
    return shapes, {f"before ({source})": before, "tuned": tuned}


def _elements(key: str) -> int:
    n, k = key.split()[0].split("x")
    return int(n) * int(k)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, help="repeatable")
    parser.add_argument("--precision", default="bf16-true")
    parser.add_argument("--out", type=Path, help="default: the package's table for this GPU")
    args = parser.parse_args()
    gpu = torch.cuda.get_device_name()
    out = args.out or launch_shapes.table_path(gpu)
    table = json.loads(out.read_text()) if out.is_file() else {"gpu_name": gpu, "triton": {}}
    release = launch_shapes.triton_release(triton.__version__)
    section = table["triton"].setdefault(release, {"matrices": {}, "round_ms": {}})
    for model in args.model:
        shapes, times = tune(model, args.precision)
        section["matrices"].update(shapes)
        section["round_ms"][f"{model} {args.precision}"] = times
        print(f"{model}: a round's ms {times}")
    code = code_identity().short
    section["tuned_by"] = f"benchmarks/tune_gemv.py at {code}, torch {torch.__version__}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
