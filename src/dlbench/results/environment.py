"""The environment columns: enough to tell whether two rows are comparable."""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import torch

import dlbench
from dlbench.hardware import form_factor
from dlbench.provenance import code_identity
from dlbench.startup import WORK_QUEUES_VARIABLE

_PACKAGES = ("lightning", "timm", "transformers", "segmentation-models-pytorch")
# Variables that change how CUDA queues work or keeps memory (the row's cuda_env).
CUDA_VARIABLES = (
    WORK_QUEUES_VARIABLE,
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def gpu_driver_version() -> str:
    """The NVIDIA driver through NVML, or empty where NVML is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return str(pynvml.nvmlSystemGetDriverVersion())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return ""


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nccl_version() -> str:
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except (AttributeError, RuntimeError):
        return ""


IMAGE_VARIABLE = "DLBENCH_CONTAINER_IMAGE"  # set by compose (or `docker run -e`) for Docker


def container(root: Path = Path("/"), environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The container engine the run is inside, and its image: podman writes the image id to
    /run/.containerenv; Docker exposes none inside a container, so the image reference comes
    from DLBENCH_CONTAINER_IMAGE, which the compose file sets to the image it runs."""
    podman = root / "run" / ".containerenv"
    if podman.exists():
        try:
            text = podman.read_text()
        except OSError:
            text = ""
        fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        image = fields.get("imageid", fields.get("image", "")).strip('"')
        return {"container": "podman", "container_image": image}
    if (root / ".dockerenv").exists():
        return {"container": "docker", "container_image": environ.get(IMAGE_VARIABLE, "")}
    return {"container": "", "container_image": ""}


def rank_gpu_index(environ: Mapping[str, str] = os.environ) -> int:
    """The GPU this process will run on: its local rank where a launcher set one (torchrun,
    Lightning's launcher, srun), else 0. Read before Lightning starts, so that a rank's cache
    folder and facts follow its own GPU, not GPU 0."""
    for variable in ("LOCAL_RANK", "SLURM_LOCALID"):
        value = environ.get(variable, "")
        if value.isdigit():
            return int(value)
    return 0


def gpu_facts(index: int | torch.device | None) -> dict[str, object]:
    """One GPU's model, memory, capability and form factor (empty without a GPU): a row about
    GPU 2 states GPU 2's, not those of the rank's default GPU."""
    if index is None:
        return dict.fromkeys(("gpu_name", "gpu_memory_mb", "gpu_capability", "gpu_form_factor"), "")
    name = torch.cuda.get_device_name(index)
    return {
        "gpu_name": name,
        "gpu_memory_mb": torch.cuda.get_device_properties(index).total_memory // 2**20,
        "gpu_capability": ".".join(map(str, torch.cuda.get_device_capability(index))),
        "gpu_form_factor": form_factor(name),
    }


def collect_environment(device_type: str) -> dict[str, object]:
    """Hardware and software versions of this host and of this rank's GPU, as result-row
    columns."""
    cuda = device_type == "cuda"
    gpu = rank_gpu_index() if cuda else 0
    if cuda and gpu >= torch.cuda.device_count():
        gpu = 0
    code = code_identity()
    env: dict[str, object] = {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_count": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "hip": getattr(torch.version, "hip", None) or "",
        "cudnn": str(torch.backends.cudnn.version() or "") if cuda else "",
        "dlbench": dlbench.__version__,
        "dlbench_commit": code.commit,
        "dlbench_dirty": "" if code.dirty is None else code.dirty,
        **gpu_facts(gpu if cuda else None),
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "driver": gpu_driver_version() if cuda else "",
        "nccl": _nccl_version() if cuda else "",
        "nccl_env": " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k[:5] == "NCCL_"),
        "cuda_env": " ".join(f"{k}={os.environ[k]}" for k in CUDA_VARIABLES if k in os.environ),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        **container(),
    }
    for package in _PACKAGES:
        env[package.replace("-", "_")] = _version(package)
    return env
