"""The columns of a result row, in order, with what each one means (the README lists these)."""

from __future__ import annotations

import re

from dlbench.config.fp8_recipes import recipes_help
from dlbench.config.limits import (
    COUNTER_LEAD_S,
    DEFAULT_MIN_TIME_S,
    HOST_OTHER_CPU_PCT,
    POWER_AVERAGING_S,
)
from dlbench.errors import invalid
from dlbench.results.efficiency_columns import EFFICIENCY_COLUMNS
from dlbench.results.environment_columns import ENVIRONMENT_COLUMNS
from dlbench.results.generation_columns import GENERATION_COLUMNS
from dlbench.results.label_columns import LABEL_COLUMNS
from dlbench.results.peaks.columns import PEAK_COLUMNS
from dlbench.results.serve_columns import SERVE_COLUMNS
from dlbench.results.stats import (
    DRIFT_INTERVALS,
    MAX_DRIFT_PCT,
    MAX_NOISE_PCT,
    MAX_OUTLIER_TIME_PCT,
    MAX_SPREAD_PCT,
)
from dlbench.results.telemetry_columns import TELEMETRY_COLUMNS

SCHEMA_VERSION = 1

# Columns every dlbench CSV has; a file whose header lacks them is not ours.
IDENTITY_COLUMNS = ("schema_version", "run_id", "timestamp", "status")

COLUMNS: dict[str, str] = {
    "schema_version": "version of this column layout",
    "run_id": "unique id of the run (sweeps pass their own)",
    "timestamp": "ISO-8601 UTC time the row was written",
    "status": "ok, oom, failed (a rank of a multi-process run was lost: error names it), error, "
    "timeout or interrupted",
    "error": "last error line when status is not ok",
    "run_kind": "benchmark, validate, scaling, loader (dlbench data), peak (dlbench peak), serve "
    "(dlbench serve), or per_rank (side file)",
    "model": "workload name (dlbench models)",
    "mode": "train or infer",
    "family": "vision, segmentation, text or llm",
    "sample_unit": "what one sample is: image or sequence",
    "precision": "32, tf32, 16-mixed, bf16-mixed, 16-true, bf16-true or fp8 (Linear layers in "
    "float8 through torchao, the rest bf16-mixed in training, bf16-true in inference)",
    "fp8_recipe": f"fp8: the recipe that ran: {recipes_help()}",
    "batch_size": "samples per step per device",
    "width": "image width in pixels",
    "height": "image height in pixels",
    "seq_len": "tokens per sequence (text); generation: context length, prompt + new tokens",
    "accelerator": "cuda or cpu",
    "devices": "devices per node",
    "num_nodes": "nodes",
    "world_size": "processes over all nodes",
    "strategy": "single, ddp (several processes, or --strategy ddp on one: a scaling baseline) "
    "or fsdp (FSDP2: parameters, gradients and optimizer state sharded)",
    "sharding_degree": "FSDP: devices each parameter is sharded over",
    "activation_checkpointing": "FSDP: none, selective (matmul and attention outputs kept, the "
    "rest recomputed in backward) or full (each block recomputed from its input)",
    "ddp_bucket_cap_mb": "DDP: gradient bucket size in MB (--ddp bucket_cap_mb=...)",
    "ddp_gradient_as_bucket_view": "DDP: gradients are views into the communication buckets",
    "ddp_static_graph": "DDP: static_graph (the same parameters used every step)",
    "ddp_broadcast_buffers": "DDP: buffers (batch-norm statistics) broadcast from rank 0 each step",
    "launcher": "Lightning cluster environment that set the ranks (Lightning, TorchElastic, SLURM)",
    "slurm_job_id": "the SLURM job the run belongs to (SLURM_JOB_ID), empty outside SLURM",
    "channels_last": "image tensors and weights in channels_last layout",
    "compile": "torch.compile on: the model and its loss (generation: the decode step, default "
    "on a GPU, except a batch-1 step run by the Triton decode kernels; generation_path says "
    "what ran; batch-1 inference on one GPU: default on unless compile_speedup says eager won)",
    "cuda_graphs": "steps (serve: buckets) replayed as CUDA graphs, as run (default on a GPU "
    "for inference and generation; training with --cuda-graphs; False after a failed capture)",
    "graph_fallback": "why the step could not be captured as a CUDA graph (it then ran eager)",
    "graph_choice": "checked: the replays timed against the eager step here; recorded: an "
    "earlier run's check of the point on this GPU and code (the cache folder)",
    "capture_s": "eager warm-up steps and CUDA-graph capture before the loop (inside warmup_s)",
    "llm_impl": "LLM workloads: native (fused q/k/v and gate/up, chunked loss, written for the "
    "GPU; the default) or hf (the transformers model itself)",
    "attention": "--attention: the attention kernel asked for (empty: PyTorch's choice; "
    "attention_backend says what ran)",
    "optimizer": "sgd, adamw or adam (default: adamw for transformers and LLMs, sgd for CNNs)",
    "optimizer_impl": "fused, foreach or for-loop (the optimizer's implementation)",
    "data_on": "device: batches resident; host: pinned batches copied each step",
    "data": "synthetic (batches made once, in memory), folder:PATH or text:PATH (--data)",
    "data_workers": "--data: DataLoader worker processes (--workers)",
    "data_decode": "--data folder: images decoded by the workers (cpu) or by nvJPEG (gpu)",
    "data_decoder": "--decode gpu: nvjpeg-hardware (the GPU's JPEG engines were busy in the "
    "window), nvjpeg-cuda (they were idle: decoded on the SMs), nvjpeg (NVML cannot tell)",
    "data_path": "--data: the folder or file read",
    "data_files": "--data: samples in the data set (image files, text lines or packed sequences)",
    "data_bytes": "--data: bytes of the data set (image files, or text)",
    "data_skipped": "--data: files skipped (unreadable at the scan, or failing to decode)",
    "data_files_read": "--data: samples read during the window",
    "data_bytes_read": "--data: bytes read during the window (loader rows: during the timing)",
    "data_mb_per_s": "--data: MB read per second of the window (loader rows: of the timing)",
    "data_wait_pct": "--data: share of the window the host waited for the loader's next batch",
    "data_mean_file_kb": "--data: mean size of a file (image or text) of the data set, in kB",
    "host_cpu_pct": "--data: the host's CPU use during the window, % of all its cores",
    "seed": "random seed",
    "warmup_steps": "steps run before the window (untimed; with GPU telemetry at least "
    f"{COUNTER_LEAD_S:g} s busy, {POWER_AVERAGING_S:g} s where no energy counter reads)",
    "steps": "measured steps (per rank; every rank runs the same number)",
    "last_step_finite": "whether the last measured step's loss (training) or output "
    "(inference) held only finite numbers (read after the window); False makes the row invalid",
    "final_loss": "training: the last measured step's loss (read after the window)",
    "min_time_s": "the window lasted at least this long "
    f"(--min-time; {DEFAULT_MIN_TIME_S:g} s with GPU telemetry)",
    "max_noise_pct": "--max-noise: the widest 95 % interval of the throughput (% of it) the "
    "window measures toward and the verdict allows (empty: the default, "
    f"{MAX_NOISE_PCT:g})",
    "max_host_busy_pct": "--max-host-busy: the most of the machine's CPU time (%) other "
    "processes may take in a CPU row's window before it is invalid (host_busy; empty: the "
    f"default, {HOST_OTHER_CPU_PCT:g})",
    "noise_met": "whether the window's noise settled (interval and outliers within their "
    "limits) before --max-time; empty where no target applied (the CPU without --max-noise)",
    "window_s": "device time of the measured window (CUDA events)",
    "wall_window_s": "host time between the synchronized window edges",
    "samples_per_s": "global throughput: samples over all ranks / slowest rank's window",
    "samples_per_s_per_device": "samples_per_s / world_size",
    "images_per_s": "samples_per_s for image workloads",
    "batches_per_s": "steps per second (per rank)",
    "megapixels_per_s": "width x height x samples / window / 1e6",
    "tokens_per_s": "seq_len x samples / window (text)",
    "latency_samples": "inference: steps the latency percentiles are over",
    "latency_p50_ms": "inference: median latency of one query (one step, interpolated)",
    "latency_p90_ms": "inference: 90th percentile latency of one query (as latency_p50_ms)",
    "latency_p99_ms": "inference: 99th percentile latency of one query (from >= 1,000 steps)",
    "step_time_mean_ms": "mean step time",
    "step_time_median_ms": "median step time (p50)",
    "step_time_p90_ms": "90th percentile step time",
    "step_time_p95_ms": "95th percentile step time",
    "step_time_p99_ms": "99th percentile step time",
    "step_time_min_ms": "fastest step",
    "step_time_max_ms": "slowest step",
    "step_time_stdev_ms": "standard deviation of step times",
    "step_time_stdev_pct": "stdev as % of the mean (spread; one slow step moves it)",
    "step_time_robust_spread_pct": "1.4826 x the median absolute deviation, % of the median "
    f"step (a robust spread; noisy beyond {MAX_SPREAD_PCT:g})",
    "step_outliers": "steps outside Tukey's fences (1.5 interquartile ranges past the quartiles)",
    "step_outlier_time_pct": "the outliers' time beyond a median step, % of the window (noisy "
    f"beyond {MAX_OUTLIER_TIME_PCT:g} where they are rare: they moved the number)",
    "step_time_drift_pct": "the second half's median step against the first half's, % (drift "
    f"beyond {MAX_DRIFT_PCT:g} and beyond {DRIFT_INTERVALS:g} times the interval: the halves' "
    "difference is that much wider)",
    "throughput_interval_pct": "half the width of the throughput's 95 % confidence interval, % "
    "of it (batch means; docs/timing.md#noise)",
    "throughput_interval_dof": "the degrees of freedom of Student's t the interval was drawn with "
    "(a window's batch means less one; a pooled row's processes less one), which every reader "
    "of an interval takes (results.intervals)",
    "processes": "fresh processes the point was measured in, one after another (--processes), "
    "pooled in the row (docs/timing.md#processes)",
    "process_spread_pct": "the processes' figures' standard deviation, % of their mean",
    "process_figures": "each process's figure, in the order they ran (space-separated)",
    "slowest_rank_median_step_ms": "median step time of the slowest rank",
    "slowest_rank": "global rank whose window was longest (it sets samples_per_s)",
    "per_rank_file": "side CSV beside this one with each rank's window, throughput and power",
    "rank": "per_rank rows: global rank",
    "node_rank": "per_rank rows: node of the rank",
    "device_index": "per_rank rows: the rank's device index on its node",
    "median_step_ms": "per_rank rows: the rank's median step time",
    "scaling_efficiency": "scaling rows: samples_per_s(N) / (N x samples_per_s(1))",
    "baseline_samples_per_s": "scaling rows: throughput of the world_size 1 run",
    "baseline_run_id": "scaling rows: run_id of the world_size 1 run",
    "ddp_baseline_samples_per_s": "scaling rows: throughput of the DDP-wrapped one-device run",
    "scaling_efficiency_ddp": "scaling rows: samples_per_s(N) / (N x the DDP-wrapped one): "
    "communication alone",
    "ddp_overhead": "scaling rows: 1 - DDP-wrapped / plain one-device throughput",
    "benchmark_run_id": "scaling rows: run_id of the N-device run",
    "process_wall_s": "the process's start (a sweep's or gate's point: its fork) to the row, "
    "divided by the phase columns, startup_s to finish_s (a fresh process then exits without "
    "Python's teardown; docs/time-to-result.md)",
    "startup_s": "the interpreter's start (a sweep's or gate's point: its fork) to the run's "
    "start: imports and the command line",
    "setup_s": "the run's start to the build: the plan, the environment's facts, the cache "
    "folder, Fabric, CUDA's start and telemetry",
    "build_s": "model, optimizer and synthetic batches built on the device",
    "baseline_s": "after the build, before warm-up: the device synchronized, peak memory reset, "
    "the GPU's idle power read (or taken from the cache folder: idle_power_age_s) and the "
    "step's recorded choices",
    "finish_s": "after the profiled pass to the row: the breakdown where asked, FLOP counts, "
    "the ranks' facts gathered, the row and its published ratio made",
    "warmup_s": "wall time of warm-up, up to the window's opening (compilation, autotuning and "
    "CUDA-graph capture included)",
    "compile_cache": "hit: every compiled graph came from the cache that outlives runs "
    "(--cache-dir), so warm-up compiled nothing; miss: all compiled here; partial; empty: "
    "nothing compiled",
    "cudnn_algorithms": "which cuDNN algorithms ran: heuristics (cuDNN's choice, nothing "
    "timed; --cudnn-search auto unless the cache records that the search pays here) or "
    "searched (candidates timed in warm-up); empty where no convolution runs on a GPU",
    "cudnn_search_gain_pct": "how much longer the step ran on cuDNN's heuristics than on the "
    "searched algorithms, in %, from this GPU's and software's runs of the same point (empty "
    "until one of each ran)",
    "compile_speedup": "a latency point (batch-1 inference on one GPU): eager's median step "
    "over compiled's, from this GPU's and software's runs of the same point (empty until one "
    "of each ran); above 1 compiled was faster, and a run without --compile/--no-compile runs "
    "eager only where this is below 1 by more than "
    "engine.acceleration.measured_choice.MIN_GAIN_PCT",
    "cache_dir": "the cache folder this run read and wrote (one per GPU, driver, torch and "
    "dlbench); empty with --no-cache",
    "profile_s": "the profiled pass after the window (gpu_busy_pct, attention_backend)",
    "first_step_s": "wall time of the first step (time to first step)",
    "warmup_steady": "on a GPU, warm-up ran on until two short chunks of steps agreed per step "
    "(engine.timing.warmup.STEADY_PCT); False: they had not within MAX_STEADY_WARMUP_S and the "
    "window began anyway; empty: not checked (CPU)",
    "param_count": "model parameters",
    "peak_memory_allocated_mb": "peak memory allocated by tensors on a GPU (the largest over "
    "the job's; side file: each rank's); status=oom: before it ran out",
    "peak_memory_reserved_mb": "peak memory reserved by the caching allocator on a GPU (the "
    "largest over the job's; side file: each rank's)",
    "oom_request_mb": "status=oom: the allocation the GPU refused",
    "oom_needed_mb": "status=oom: at least this much was needed on a GPU (peak allocated + the "
    "allocation refused)",
    **TELEMETRY_COLUMNS,
    "verdict": "valid or invalid: whether to trust the number (dlbench.results.verdict)",
    "verdict_reasons": "why invalid, ;-separated: failed, short_window, few_steps, noisy, "
    "host_bound, host_busy, hardware_slowdown, other_processes, low_clock, energy_short_window, "
    "non_finite_loss, below_published; validate rows: repeats_disagree; peak rows: "
    "above_datasheet, impossible_figure, below_datasheet, below_siblings; serve rows: LoadGen's "
    "(latency_bound, ttft_bound, tpot_bound, early_stopping, min_duration, min_queries, "
    "loadgen_invalid) and wrong_tokens (an LLM served a wrong token)",
    "verdict_notes": "worth knowing, the row stays valid: power_capped, processes_hidden, "
    "eager_fallback, fp8_uncompiled, above_published, input_bound (it measured its loader)",
    "published_ratio": "samples_per_s over the median of the published rows of this GPU model "
    "and configuration (dlbench/published, the reference parts: the same experiment, torch and "
    "CUDA at major.minor); empty where none was published",
    "published_rows": "how many published rows the ratio is over",
    "published_source": "the published files and commits the ratio is over (file@commit)",
    "published_band_pct": "how far published_ratio may lie from 1, in %: the regression gate's "
    "threshold, or the rows' own intervals and the published rows' spread where wider "
    "(below it: below_published, invalid; above it: the note above_published)",
    "recheck_of": "sweeps: the run_id of the row this one measured again in a fresh worker, "
    "because that row lay outside its published band",
    "usd_per_hour": "--usd-per-hour: the price given for the machine or GPU per hour",
    "usd_per_million_samples": "--usd-per-hour: cost of a million samples at this throughput "
    "(LLM rows: a million tokens)",
    "gpu_busy_pct": "share of the median step in which a kernel ran (profiled pass after window)",
    "host_bound": "True when the host held the GPU back: gpu_busy_pct < 90 (eager steps), "
    "host_issue_pct > 90 (CUDA-graph steps), or input_bound",
    "host_issue_ms": "CUDA-graph steps: host time to launch one step (timed after the window)",
    "host_issue_pct": "CUDA-graph steps: host_issue_ms / the window's median step, in %: under "
    "90 the host keeps ahead and the GPU never waits for it",
    "input_bound": "--data: True when data_wait_pct > 10 and the GPU waited (busy under 90 % "
    "of the window: gpu_busy_pct x median step x steps / window; on a CPU the host's wait "
    "alone): the number measures the loader",
    "attention_backend": "fused attention that ran: flash, efficient, cudnn, flash_cpu, math "
    "or triton_decode (dlbench's batch-1 LLM decode kernel)",
    **LABEL_COLUMNS,
    "auto_batch_probes": "--batch-size auto: every probe, batch:ok or batch:oom, in order",
    "auto_batch_s": "--batch-size auto: seconds the search took (in the run's own process)",
    "breakdown_h2d_ms": "diagnostic pass after the window: host-to-device copy per step",
    "breakdown_forward_ms": "diagnostic pass: forward (and loss) per step",
    "breakdown_backward_ms": "diagnostic pass: backward per step",
    "breakdown_optimizer_ms": "diagnostic pass: optimizer step per step",
    "breakdown_host_ms": "diagnostic pass: host time to issue one step",
    "breakdown_gpu_idle_pct": "diagnostic pass: 100 - gpu_busy_pct",
    "breakdown_hint": "diagnostic pass: input-bound, host-bound or compute-bound",
    **EFFICIENCY_COLUMNS,
    **GENERATION_COLUMNS,
    "bare_samples_per_s": "validate: throughput of the hand-written PyTorch loop",
    "harness_ratio": "validate: dlbench throughput / bare loop throughput (median of repeats)",
    "harness_ratios": "validate: the ratio of each repeat",
    **ENVIRONMENT_COLUMNS,
    **PEAK_COLUMNS,
    **SERVE_COLUMNS,
}

# Columns that arrive as --tag labels (a sweep's own, or a user's): they label a row, they do
# not measure it, so a tag may set them. Every other column is the run's to write.
TAG_COLUMNS = ("recheck_of", *LABEL_COLUMNS)


# Columns that hold a number in every finished row (analysis divides them): by their unit's
# suffix, and the counts and sizes.
_NUMBER_SUFFIXES = ("_per_s", "_ms", "_s", "_pct", "_w", "_j", "_mb", "_kb", "_mhz", "_c")
_NUMBER_SUFFIXES += ("_tflops", "_qps", "_us")
_NUMBER_NAMES = ("batch_size", "width", "height", "seq_len", "prompt_len", "new_tokens", "steps")
_NUMBER_NAMES += ("warmup_steps", "world_size", "param_count", "flops_per_sample", "mfu")
_NUMBER_NAMES += ("mfu_bf16", "fp8_linear_layers", "fp8_flops_per_sample", "fp8_flops_share")
NUMBER_COLUMNS = tuple(c for c in COLUMNS if c.endswith(_NUMBER_SUFFIXES) or c in _NUMBER_NAMES)
# Columns that hold text a number parser would change: random hex ids ("0123..." loses its
# zero, "12e45..." becomes a float) and versions ("12.10" is not 12.1).
TEXT_COLUMNS = tuple(
    c
    for c, text in COLUMNS.items()
    if (c.endswith("_id") or re.search(r"\bversion\b", text)) and c not in NUMBER_COLUMNS
)


def is_true(value: object) -> bool:
    """A boolean column's cell as written to, or read back from, a CSV: True or "True"."""
    return str(value) == "True"


def check_tag(key: str, flag: str = "--tag") -> None:
    """A tag's name: an identifier that names no measured or configured column."""
    if not key.isidentifier():
        raise invalid(flag, key, "a tag name is a Python-style identifier, e.g. purpose")
    if key in COLUMNS and key not in TAG_COLUMNS:
        raise invalid(flag, key, "names a result column; choose another tag name")


def columns_markdown() -> str:
    """The column reference (docs/columns.md): one table from COLUMNS, so the docs never drift."""
    lines = [
        "# Result columns",
        "",
        f"Generated from `dlbench.results.schema` (schema version {SCHEMA_VERSION}) by",
        "`python -m dlbench.results.schema > docs/columns.md`; a test fails when it is stale.",
        "",
        "| column | meaning |",
        "| --- | --- |",
    ]
    lines += [f"| `{name}` | {meaning.replace('|', '/')} |" for name, meaning in COLUMNS.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(columns_markdown(), end="")
