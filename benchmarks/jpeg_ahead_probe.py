"""On a GPU: resnet50 bs256 bf16 training from a JPEG folder with GPU decode, for several depths
of the staged-batch queue (DataFeed's `ahead`), alternating with the synthetic row, in one
process (cuDNN autotunes once), REPEATS times (default 2). Rows go to OUTPUT; the printout
gives each run's img/s.
Usage: PYTHONPATH=src python3 benchmarks/jpeg_ahead_probe.py DIR OUTPUT AHEAD [AHEAD...]"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.data import pipeline
from dlbench.run import execute
from dlbench.startup import set_cuda_work_queues


def run(output: Path, ahead: int | None, folder: Path, iters: int) -> None:
    data = {} if ahead is None else {"data": f"folder:{folder}", "data_workers": 8,
                                     "data_decode": "gpu"}  # fmt: skip
    if ahead is not None:
        pipeline.DataFeed.__init__.__defaults__ = (ahead,)
    config = RunConfig(model="resnet50", batch_size=256, precision="bf16-mixed", n_iters=iters,
                       warmup_steps=5, output=output, extra={"staged_ahead": str(ahead)},
                       **data)  # fmt: skip
    print(f"=== ahead {ahead}", flush=True)
    execute(config)


if __name__ == "__main__":
    set_cuda_work_queues()  # as the CLI does, before CUDA starts
    folder, output, *depths = sys.argv[1:]
    iters = 60
    for _ in range(int(os.environ.get("REPEATS", "2"))):
        for ahead in [None, *[int(d) for d in depths]]:
            run(Path(output), ahead, Path(folder), iters)
