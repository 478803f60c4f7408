"""The telemetry columns of a result row (results.schema lists them in its order): what the
hardware did in the window, for the job's GPUs (a multi-process row sums or bounds its ranks'
figures: results.job)."""

from __future__ import annotations

from dlbench.config.limits import CLOCK_MARGIN_PCT

TELEMETRY_COLUMNS: dict[str, str] = {
    "telemetry_backend": "nvml, amdsmi or empty when no GPU telemetry could be read",
    "telemetry_samples": "sampler readings taken in the window",
    "telemetry_window_s": "host time between the two energy-counter reads",
    "energy_j": "GPU energy over the window, all GPUs",
    "energy_source": "<backend>_counter_timed (the energy counter's steps timed inside the window, "
    "scaled to it), <backend>_counter (its delta between the edges) or power_integral (sampled "
    "power)",
    "energy_quality": "ok, or why the window was too short to trust an energy figure (then none)",
    "energy_counter_j": "energy from the GPUs' counters between the window's edges (every GPU "
    "of the job, summed), where they have one",
    "energy_counter_period_s": "how often the energy counter changes (measured before the window)",
    "energy_integral_j": "energy from integrating sampled power (every GPU of the job, summed)",
    "energy_per_sample_j": "energy_j / samples (per image or per sequence)",
    "energy_per_token_j": "energy_j / tokens (text)",
    "avg_power_w": "energy / window time (the job's: every GPU's, summed)",
    "peak_power_w": "highest sampled power (several GPUs: each one's highest, summed)",
    "power_limit_w": "enforced power limit of each GPU (empty where the job's GPUs differ; the "
    "side file has each)",
    "temp_max_c": "highest GPU temperature sampled (the hottest of the job's GPUs)",
    "gpu_util_avg": "mean GPU utilisation % (NVML's busy share)",
    "mem_util_avg": "mean memory-controller utilisation %",
    "mem_used_max_mb": "highest device memory in use (all processes; the fullest of the job's "
    "GPUs)",
    "sm_clock_avg_mhz": "mean SM clock",
    "sm_clock_min_mhz": "lowest SM clock sampled",
    "mem_clock_avg_mhz": "mean memory clock",
    "jpeg_decoder_busy_pct": "mean busy share of the GPU's hardware JPEG decoders (NVML, NVJPG)",
    "throttle_pct": "% of samples with a power or thermal slowdown reason set",
    "throttle_reasons": "slowdown reasons seen (sw_power_cap, hw_thermal, ...)",
    "other_gpu_processes": "processes besides the job's own (its ranks, their launchers) on a GPU "
    "of the run during the window (isolation check; most on any one GPU)",
    "other_gpu_process_list": "who they were: PID NAME MEMORY for each, ;-separated",
    "cpu_energy_j": "CPU package + DRAM energy over the window (RAPL), when readable (summed "
    "over the job's hosts)",
    "energy_scope": "what energy_j covers: gpu_board, and +cpu_package where RAPL was readable "
    "(cpu_energy_j)",
    "idle_power_w": "GPU power while idle, sampled 2 s before warm-up (every GPU of the job, "
    "summed); "
    "a sweep worker reuses its sample of the same GPU for 10 minutes",
    "idle_power_age_s": "seconds since idle_power_w was sampled (0: sampled for this row)",
    "energy_above_idle_j": "energy_j minus idle_power_w over the window",
    "energy_above_idle_per_sample_j": "energy_above_idle_j / samples",
    "sm_clock_base_mhz": "the SM clock the GPU guarantees (its default application clock)",
    "sm_clock_below_base_pct": f"% of samples with the SM clock more than {CLOCK_MARGIN_PCT:g} % "
    "under sm_clock_base_mhz that neither the power cap nor idling explains",
    "gpu_processes_hidden": "True when NVML's process list could not be matched with this "
    "process (another PID namespace, e.g. a container): other_gpu_processes counts all but one",
    "host_other_cpu_pct": "% of the machine's CPU time (every core's) that processes other than "
    "this run's (its process and those it started) used during the window (a CPU row of one "
    "process over its max_host_busy_pct: host_busy)",
}


def decoder_column(decode: str | None, jpeg_busy_pct: float | None) -> dict[str, str]:
    """Which JPEG decoder ran, from what the GPU says its hardware decoders did: nvJPEG on
    them (A100, H100, H200 have some; torchvision asks for them first), on the SMs (a GPU
    without them, or files they cannot take, progressive ones say), or `nvjpeg` where NVML
    cannot tell."""
    if decode != "gpu":
        return {}
    if jpeg_busy_pct is None:
        return {"data_decoder": "nvjpeg"}
    return {"data_decoder": "nvjpeg-hardware" if jpeg_busy_pct > 0 else "nvjpeg-cuda"}
