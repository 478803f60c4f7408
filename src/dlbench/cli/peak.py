"""`dlbench peak`: what each GPU attains beside its datasheet, a row per GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlbench.cli.app import app
from dlbench.cli.options import Output
from dlbench.config.fields import ACCELERATORS, DEFAULT_OUTPUT
from dlbench.errors import check_seconds, invalid

DEFAULT_PEAK_TIME_S = 60.0


@app.command(
    "peak",
    help="What each GPU attains (matmul per dtype, memory, host and peer copies) beside its "
    "datasheet; a row per GPU, and GPUs below their siblings named.",
)
def peak(
    accelerator: Annotated[str, typer.Option(help="auto, gpu or cpu.")] = "auto",
    devices: Annotated[str, typer.Option(help="GPU indices, e.g. 0,1, or all.")] = "all",
    max_time: Annotated[
        float, typer.Option(help="Seconds of measuring per device (the shape search's bound).")
    ] = DEFAULT_PEAK_TIME_S,
    cache_dir: Annotated[
        Path | None,
        typer.Option(help="Where later runs find these figures (default $DLBENCH_CACHE_DIR)."),
    ] = None,
    output: Output = DEFAULT_OUTPUT,
    json: Annotated[bool, typer.Option(help="Print the rows as JSON lines.")] = False,
) -> None:
    from dlbench.peak.run import run_peak, show_peaks

    if accelerator not in ACCELERATORS:
        raise invalid("--accelerator", accelerator, f"allowed: {', '.join(ACCELERATORS)}")
    check_seconds("--max-time", max_time)
    rows = run_peak(accelerator, devices, max_time, output, cache_dir)
    if json:
        import json as json_module

        for row in rows:
            print(json_module.dumps(row, default=str))
    else:
        show_peaks(rows)
