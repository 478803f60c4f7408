"""Probe: where `dlbench train --batch-size auto` spent its time before and in the search
(H100, commit c8c0161): imports, plan, environment, caches, Fabric, then each probe's session
and steps. Run from the tree: PYTHONPATH=src python3 benchmarks/probe_auto_phases.py"""

import gc
import time

t0 = time.perf_counter()


def lap(name: str) -> None:
    print(f"{time.perf_counter() - t0:7.2f} {name}", flush=True)


import torch  # noqa: E402

lap("import torch")
import lightning  # noqa: E402,F401

lap("import lightning")
import timm  # noqa: E402,F401

lap("import timm")
from dlbench.config import RunConfig  # noqa: E402
from dlbench.engine.compile_cache import open_caches  # noqa: E402
from dlbench.engine.fabric import fabric_for  # noqa: E402
from dlbench.engine.plan import make_plan  # noqa: E402
from dlbench.engine.session import open_session  # noqa: E402
from dlbench.results.environment import collect_environment  # noqa: E402

lap("import dlbench")
config = RunConfig(model="resnet50", batch_size=8, precision="bf16-mixed", cache=False)
plan = make_plan(config)
lap("make_plan")
env = collect_environment(plan.devices.device_type)
lap("collect_environment")
open_caches(config, env)
lap("open_caches")
fabric = fabric_for(plan)
lap("fabric_for")
for n in (2, 8, 1450, 1450, 1536):
    lap(f"probe {n} begins")
    try:
        s = open_session(
            plan.config.replace(batch_size=n),
            plan.workload,
            plan.shape,
            plan.precision,
            fabric,
            False,
        )
        torch.cuda.synchronize()
        lap("  open_session")
        with s.context():
            for i in range(2):
                s.step(i)
                torch.cuda.synchronize()
                lap(f"  step {i}")
    except torch.OutOfMemoryError:
        lap("  oom")
    s = None
    gc.collect()
    torch.cuda.empty_cache()
    lap("  freed")
