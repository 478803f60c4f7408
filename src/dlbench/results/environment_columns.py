"""The columns of where a row was measured (results.environment): the host, the software that
measured it, the GPU and the container."""

from __future__ import annotations

ENVIRONMENT_COLUMNS: dict[str, str] = {
    "hostname": "environment: host name (the container's, under Docker)",
    "os": "environment: operating system and kernel",
    "python": "environment: Python version",
    "cpu": "environment: CPU",
    "cpu_count": "environment: threads torch uses",
    "torch": "environment: torch version",
    "cuda": "environment: CUDA version torch was built with",
    "hip": "environment: HIP (ROCm) version torch was built with",
    "cudnn": "environment: cuDNN version",
    "dlbench": "environment: dlbench version (the release)",
    "dlbench_commit": "environment: the git commit of the dlbench version that measured the "
    "row (unknown: neither a checkout nor a build said)",
    "dlbench_dirty": "environment: True when the dlbench version had changes beyond "
    "dlbench_commit (empty: unknown)",
    "gpu_name": "environment: GPU model (a host of mixed GPUs: each model with its count)",
    "gpu_mixed": "True when the job's GPUs are of more than one model (then no MFU)",
    "gpu_uuid": "the GPU's UUID (torch's form, NVML's without GPU-); cpu for the host; several "
    "ranks: each rank's, in rank order, space-separated",
    "gpu_count": "environment: GPUs visible",
    "gpu_memory_mb": "environment: memory of the run's GPU (several: the smallest of the job's; "
    "the side file has each rank's)",
    "gpu_capability": "environment: compute capability (several GPUs of different ones: each, "
    "comma-separated)",
    "gpu_form_factor": "environment: SXM, PCIe, NVL or OAM (known GPU names only)",
    "gpu_pcie_link": "the GPU's current PCIe link, e.g. gen5 x16 (telemetry)",
    "gpu_app_clocks_locked": "True when the GPU's application clocks differ from the default "
    "(someone locked them); empty where unknown",
    "container": "environment: the container engine the run was inside (docker, podman)",
    "container_image": "environment: the image id (podman), or DLBENCH_CONTAINER_IMAGE (Docker: "
    "compose sets it to the image it runs)",
    "driver": "environment: NVIDIA driver version",
    "nccl": "environment: NCCL version torch was built with",
    "nccl_env": "environment: NCCL_* variables set for the run (they change collectives)",
    "cuda_env": "environment: variables set for the run that change how CUDA queues work or "
    "keeps memory (dlbench sets CUDA_DEVICE_MAX_CONNECTIONS=32 unless given)",
    "lightning": "environment: Lightning version",
    "timm": "environment: timm version",
    "transformers": "environment: transformers version",
    "segmentation_models_pytorch": "environment: segmentation-models-pytorch version",
}
