"""The flags several commands share, each with its help text, as typer annotations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Model = Annotated[str, typer.Option(help="Workload name (see `dlbench models`) or timm:NAME.")]
BatchSize = Annotated[int, typer.Option(help="Samples per step per device.")]
AutoBatchSize = Annotated[
    str, typer.Option(help="Samples per step per device, or 'auto' (largest that fits).")
]
Tags = Annotated[
    list[str] | None, typer.Option("--tag", help="KEY=VALUE recorded as an extra column.")
]
NIters = Annotated[int, typer.Option(help="Measured steps (at least; see --max-noise).")]
Warmup = Annotated[int, typer.Option(help="Untimed steps first (autotune, compile, allocator).")]
Precision = Annotated[
    str, typer.Option(help="32, tf32, 16-mixed, bf16-mixed, 16-true or bf16-true.")
]
Width = Annotated[int | None, typer.Option(help="Image width (default: the model's, 224).")]
Height = Annotated[int | None, typer.Option(help="Image height (default: the model's, 224).")]
SeqLen = Annotated[int, typer.Option(help="Tokens per sequence for text workloads.")]
PromptLen = Annotated[int, typer.Option(help="LLM generation: prompt tokens per sequence.")]
NewTokens = Annotated[int, typer.Option(help="LLM generation: new tokens, no early stop.")]
Accelerator = Annotated[str, typer.Option(help="auto, gpu or cpu.")]
Devices = Annotated[str, typer.Option(help="Devices per node: a number or 'all'.")]
NumNodes = Annotated[int, typer.Option(help="Nodes (torchrun or SLURM set the ranks).")]
Strategy = Annotated[
    str, typer.Option(help="auto (DDP for several processes) or ddp (DDP even for one).")
]
Ddp = Annotated[
    list[str] | None,
    typer.Option(
        "--ddp",
        help="KEY=VALUE for DistributedDataParallel: bucket_cap_mb, gradient_as_bucket_view, "
        "static_graph, broadcast_buffers.",
    ),
]
ChannelsLast = Annotated[bool, typer.Option(help="channels_last layout for image models.")]
Compile = Annotated[
    bool | None,
    typer.Option(
        "--compile/--no-compile",
        help="torch.compile the model (default: on for LLM generation on a GPU, else off).",
    ),
]
CudaGraphs = Annotated[
    bool | None,
    typer.Option(
        "--cuda-graphs/--no-cuda-graphs",
        help="Replay each step as a CUDA graph, captured in warm-up (default on a GPU for "
        "inference and generation; training: on when given).",
    ),
]
Optimizer = Annotated[
    str | None,
    typer.Option(help="sgd, adamw or adam (default: adamw for transformers, sgd for CNNs)."),
]
DataOn = Annotated[str, typer.Option(help="device (resident) or host (pinned, copied per step).")]
Output = Annotated[Path, typer.Option(help="CSV to append the row to.")]
Json = Annotated[bool, typer.Option("--json", help="Print the row as JSON instead of a table.")]
Seed = Annotated[int, typer.Option(help="Random seed for weights and synthetic data.")]
MaxNoise = Annotated[
    float | None, typer.Option(help="Keep measuring until the step-time spread is under PCT %.")
]
MaxTime = Annotated[float, typer.Option(help="Cap in seconds for --max-noise measuring.")]
MinTime = Annotated[
    float | None,
    typer.Option(
        help="Measure at least this many seconds (default: 5 with GPU telemetry, else 0)."
    ),
]
RunId = Annotated[str | None, typer.Option(help="Run id for the row (sweeps set it).")]
Telemetry = Annotated[bool, typer.Option(help="Sample GPU power, clocks, heat; window energy.")]
SampleInterval = Annotated[float, typer.Option(help="Telemetry sampling period in seconds.")]
TelemetryLog = Annotated[Path | None, typer.Option(help="Write every telemetry sample here.")]
Nvtx = Annotated[bool, typer.Option("--nvtx", help="NVTX ranges for Nsight Systems.")]
Breakdown = Annotated[
    bool, typer.Option("--breakdown", help="After the window: time copy/fwd/bwd/optimizer apart.")
]
Data = Annotated[
    str,
    typer.Option(
        help="synthetic (batches in memory), folder:PATH (JPEG/PNG in class folders) or "
        "text:PATH (.txt, a sample per line, or .jsonl with a text field)."
    ),
]
DataWorkers = Annotated[
    int | None,
    typer.Option(
        "--workers", "--data-workers", help="--data loader processes (default: CPUs, at most 8)."
    ),
]
DataDecode = Annotated[
    str, typer.Option("--decode", "--data-decode", help="Images: cpu (workers) or gpu (nvJPEG).")
]
LlmImpl = Annotated[
    str | None,
    typer.Option(
        help="LLM workloads: native (fused projections, static cache, chunked loss; default) "
        "or hf (the transformers model, to benchmark transformers itself)."
    ),
]
