"""A fake NVML with pynvml's function names, for machines without an NVIDIA GPU (tests, CI).

It registers through dlbench's plugin hook (tests/plugins) as a provider of a pynvml-like module,
active in a process where DLBENCH_FAKE_NVML names the state file that holds each fake GPU's
settings, so separate processes (a sweep and its
children, DDP ranks) see the same GPUs, and tests can read back what a run changed (power
limits). Power is constant per GPU; the energy counter integrates it over time, in steps of
`energy_period_s` as real counters update (0: continuously).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from dlbench.telemetry.nvml import register_nvml_provider

STATE_VARIABLE = "DLBENCH_FAKE_NVML"

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2

DEFAULT_GPU = {
    "name": "NVIDIA H100 80GB HBM3",
    "power_w": 300.0,
    "temp_c": 55,
    "util": 97,
    "mem_util": 40,
    "mem_used_mb": 20000,
    "sm_clock": 1980,
    "base_clock": 1590,
    "mem_clock": 2619,
    "throttle": 0,
    "limit_w": 700.0,
    "min_limit_w": 200.0,
    "max_limit_w": 700.0,
    "energy_counter": True,
    "energy_period_s": 0.0,
    "processes": 0,
    "compute_mode": 0,  # nvmlComputeMode: 0 Default (several processes), 3 exclusive
}


class NVMLError(Exception):
    """Same name and role as pynvml.NVMLError."""


class NVMLError_NotSupported(NVMLError):
    """The query is not supported on this GPU."""


class NVMLError_NoPermission(NVMLError):
    """Setting needs root."""


class NVMLError_NotFound(NVMLError):
    """No such object."""


class _Util:
    def __init__(self, gpu: int, memory: int) -> None:
        self.gpu, self.memory = gpu, memory


class _Memory:
    def __init__(self, used: int, total: int) -> None:
        self.used, self.total = used, total


class _Process:
    def __init__(self, pid: int, used: int | None = None) -> None:
        self.pid, self.usedGpuMemory = pid, used


def environment(state: Path) -> dict[str, str]:
    """The variable that makes dlbench (and its child processes) use this fake."""
    return {STATE_VARIABLE: str(state)}


def _provide():
    """This module in place of pynvml while a test has set the state variable."""
    return sys.modules[__name__] if os.environ.get(STATE_VARIABLE) else None


register_nvml_provider(_provide)


def write_state(path: Path, gpus: list[dict], **settings: object) -> None:
    """Create a fake-NVML state file: GPU dicts override DEFAULT_GPU's keys."""
    full = [{**DEFAULT_GPU, "uuid": f"GPU-fake-{i:04d}", **g} for i, g in enumerate(gpus)]
    state = {"gpus": full, "started": time.time(), "can_set": True, **settings}
    Path(path).write_text(json.dumps(state))


def read_state(path: Path | None = None) -> dict:
    """The current fake state (tests read power limits back from it)."""
    return json.loads(Path(path or os.environ["DLBENCH_FAKE_NVML"]).read_text())


def _state() -> dict:
    return read_state()


def _gpu(handle: int) -> dict:
    return _state()["gpus"][handle]


def nvmlInit() -> None:
    if not os.environ.get("DLBENCH_FAKE_NVML"):
        raise NVMLError("fake NVML has no state file (DLBENCH_FAKE_NVML)")


def nvmlShutdown() -> None:
    """Nothing to release."""


def nvmlSystemGetDriverVersion() -> str:
    return "999.99-fake"


def nvmlDeviceGetCount() -> int:
    return len(_state()["gpus"])


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if not 0 <= index < nvmlDeviceGetCount():
        raise NVMLError(f"no GPU {index}")
    _attach(index)
    return index


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> int:
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    for i, gpu in enumerate(_state()["gpus"]):
        if gpu["uuid"] == uuid:
            _attach(i)
            return i
    raise NVMLError(f"no GPU with UUID {uuid}")


def nvmlDeviceGetUUID(handle: int) -> str:
    return _gpu(handle)["uuid"]


def nvmlDeviceGetName(handle: int) -> str:
    return _gpu(handle)["name"]


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    return int(_gpu(handle)["power_w"] * 1000)


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    state = _state()
    gpu = state["gpus"][handle]
    if not gpu["energy_counter"]:
        raise NVMLError_NotSupported("energy counter not supported")
    elapsed = time.time() - state["started"]
    if gpu["energy_period_s"]:
        elapsed -= elapsed % gpu["energy_period_s"]
    return int(gpu["power_w"] * elapsed * 1000)


def nvmlDeviceGetTemperature(handle: int, sensor: int) -> int:
    return int(_gpu(handle)["temp_c"])


def nvmlDeviceGetUtilizationRates(handle: int) -> _Util:
    gpu = _gpu(handle)
    return _Util(gpu["util"], gpu["mem_util"])


def nvmlDeviceGetMemoryInfo(handle: int) -> _Memory:
    return _Memory(int(_gpu(handle)["mem_used_mb"] * 2**20), 80 * 2**30)


def nvmlDeviceGetComputeMode(handle: int) -> int:
    return int(_gpu(handle)["compute_mode"])


def nvmlDeviceGetClockInfo(handle: int, clock: int) -> int:
    gpu = _gpu(handle)
    return int(gpu["sm_clock"] if clock == NVML_CLOCK_SM else gpu["mem_clock"])


def nvmlDeviceGetJpgUtilization(handle: int) -> list[int]:
    """[busy %, sampling period in us]; a GPU without JPEG engines says NotSupported."""
    busy = _gpu(handle).get("jpeg_util")
    if busy is None:
        raise NVMLError_NotSupported("no JPEG engines")
    return [int(busy), 1_000_000]


def nvmlDeviceGetDefaultApplicationsClock(handle: int, clock: int) -> int:
    return int(_gpu(handle)["base_clock"])


def nvmlDeviceGetApplicationsClock(handle: int, clock: int) -> int:
    return int(_gpu(handle).get("app_clock", _gpu(handle)["base_clock"]))


def nvmlDeviceGetCurrPcieLinkGeneration(handle: int) -> int:
    return 5


def nvmlDeviceGetCurrPcieLinkWidth(handle: int) -> int:
    return 16


def nvmlDeviceGetCurrentClocksEventReasons(handle: int) -> int:
    return int(_gpu(handle)["throttle"])


def nvmlDeviceGetEnforcedPowerLimit(handle: int) -> int:
    return int(_gpu(handle)["limit_w"] * 1000)


def nvmlDeviceGetPowerManagementLimit(handle: int) -> int:
    return nvmlDeviceGetEnforcedPowerLimit(handle)


def nvmlDeviceGetPowerManagementLimitConstraints(handle: int) -> tuple[int, int]:
    gpu = _gpu(handle)
    return int(gpu["min_limit_w"] * 1000), int(gpu["max_limit_w"] * 1000)


def nvmlDeviceSetPowerManagementLimit(handle: int, limit_mw: int) -> None:
    path = Path(os.environ["DLBENCH_FAKE_NVML"])
    state = read_state(path)
    if not state["can_set"]:
        raise NVMLError_NoPermission("Insufficient Permissions")
    gpu = state["gpus"][handle]
    if not gpu["min_limit_w"] * 1000 <= limit_mw <= gpu["max_limit_w"] * 1000:
        raise NVMLError(f"limit {limit_mw} mW out of range")
    gpu["limit_w"] = limit_mw / 1000
    gpu.setdefault("limit_history", []).append(limit_mw / 1000)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def _contexts(handle: int) -> Path:
    """Where the processes that opened this GPU leave a mark each (a file per PID: DDP ranks
    open their GPUs at once, and a shared state file would race)."""
    return Path(f"{os.environ[STATE_VARIABLE]}.contexts") / str(handle)


def _attach(handle: int) -> None:
    """The caller now holds a context on this GPU, as a process that opens it does."""
    folder = _contexts(handle)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(os.getpid())).touch()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[_Process]:
    """Per GPU and per PID: the living processes that opened this GPU (a run's ranks open only
    their own), then the state's foreign ones: `processes` anonymous ones (PIDs from 100000)
    and `foreign`, each {"pid", "name", "memory_mb"}."""
    folder = _contexts(handle)
    attached = sorted(int(f.name) for f in folder.iterdir()) if folder.is_dir() else []
    gpu = _gpu(handle)
    procs = [_Process(pid) for pid in attached if _alive(pid)]
    procs += [_Process(100000 + i, 512 * 2**20) for i in range(int(gpu["processes"]))]
    procs += [_Process(int(f["pid"]), int(f["memory_mb"] * 2**20)) for f in gpu.get("foreign", [])]
    return procs


def nvmlSystemGetProcessName(pid: int) -> str:
    for gpu in _state()["gpus"]:
        for f in gpu.get("foreign", []):
            if int(f["pid"]) == pid:
                return f["name"]
    raise NVMLError_NotFound(f"no process {pid}")
