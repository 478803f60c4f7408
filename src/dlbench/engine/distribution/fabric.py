"""How a run's processes come to be: Lightning Fabric with the device plan, DDP's settings and
its collective timeout, and which launcher set the ranks: srun's tasks, torchrun's workers, or
Lightning's own launcher (docs/clusters.md)."""

from __future__ import annotations

import os
import subprocess
import threading
import warnings
from datetime import timedelta
from typing import Any

from dlbench.config.limits import DEFAULT_COLLECTIVE_TIMEOUT_S
from dlbench.engine.distribution.devices import DevicePlan
from dlbench.engine.distribution.lightning_import import import_fabric
from dlbench.engine.distribution.sharding import ShardingPlan, shard_model

# Lightning asks for srun wherever SLURM's commands are installed (a login node, a CI runner with
# a test cluster), though a run without it is what the user asked for: one process, or
# Lightning's own launcher. Under srun Lightning takes the ranks from SLURM, as it should.
warnings.filterwarnings("ignore", "The `srun` command is available on your system but is not used")


def own_processes_in_allocation(world_size: int) -> Any:
    """Lightning's own environment where SLURM allocated the job but did not start this run's
    processes (a batch script running dlbench itself, a sweep point, `scaling` under one srun
    task): Lightning would take SLURM's task count for the run's. None elsewhere: Lightning
    finds srun's tasks (as many as the run's processes), torchrun, or a plain machine."""
    tasks = os.environ.get("SLURM_NTASKS")
    if tasks is None or "TORCHELASTIC_RUN_ID" in os.environ:
        return None
    if "SLURM_STEP_ID" in os.environ and tasks.isdigit() and int(tasks) == world_size:
        return None
    import_fabric()
    from lightning.fabric.plugins.environments import LightningEnvironment

    return LightningEnvironment()


def create_fabric(
    devices: DevicePlan,
    precision: str,
    strategy: str = "single",
    ddp=None,
    collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
    sharding: ShardingPlan | None = None,
):
    """Lightning Fabric for the device plan and Lightning's `precision`: DDP with the given
    settings (DdpSettings) when the strategy is 'ddp' (several processes, or a DDP-wrapped
    single one for scaling baselines); FSDP2 by `sharding` when it is 'fsdp'; collectives
    failing after `collective_timeout_s` (docs/clusters.md)."""
    import_fabric()
    from lightning.fabric import Fabric
    from lightning.fabric.strategies import DDPStrategy, ModelParallelStrategy

    from dlbench.config import DdpSettings

    chosen = "auto"
    timeout = timedelta(seconds=collective_timeout_s)
    if strategy == "ddp":
        chosen = DDPStrategy(timeout=timeout, **(ddp or DdpSettings()).kwargs())
    if strategy == "fsdp":
        chosen = ModelParallelStrategy(
            lambda model, mesh: shard_model(model, mesh["data_parallel"], sharding),
            data_parallel_size=devices.world_size,
            tensor_parallel_size=1,
            timeout=timeout,
        )
    environment = own_processes_in_allocation(devices.world_size)
    fabric = Fabric(
        accelerator=devices.accelerator,
        devices=devices.count,
        num_nodes=devices.num_nodes,
        precision=precision,
        strategy=chosen,
        plugins=[environment] if environment else None,
    )
    fabric.launch()
    _leave_failures_to_rank_0()
    return fabric


def _leave_failures_to_rank_0() -> None:
    """Lightning's own launcher watches the ranks it started and, seconds after one fails, SIGKILLs
    every process, rank 0 too, before it can record which rank was lost. Rank 0 finds a lost rank
    through its collectives (engine.distribution.lost_ranks) and ends the ranks it started itself
    once the row is written (`started_ranks`), so the watcher is stood down."""
    for thread in threading.enumerate():
        if type(thread).__name__ == "_ChildProcessObserver":
            thread._run = lambda: True  # its next look finds nothing to do, and it ends


def started_ranks(fabric: Any) -> list[subprocess.Popen]:
    """The rank processes this process started (Lightning's launcher on rank 0), none else."""
    launcher = getattr(fabric.strategy, "launcher", None)
    return list(getattr(launcher, "procs", []) or [])


def fabric_for(plan) -> Any:
    """`create_fabric` with everything the plan says about devices and DDP."""
    config = plan.config
    return create_fabric(
        plan.devices,
        plan.fabric_precision,
        config.devices.strategy,
        plan.ddp,
        config.devices.collective_timeout,
        plan.sharding,
    )


def launcher(fabric: Any) -> str:
    """Who set the ranks: Lightning's own launcher, torchrun (TorchElastic) or SLURM."""
    environment = getattr(fabric.strategy, "cluster_environment", None)
    if environment is None:
        return "single"
    return type(environment).__name__.removesuffix("Environment")
