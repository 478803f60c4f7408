"""A verdict's words (results.verdict decides it): for each reason a row is invalid, what happened
and what to change, each note's meaning, and `advice`, the one line a console prints first."""

from __future__ import annotations

from collections.abc import Mapping

from dlbench.config.limits import MIN_SPREAD_STEPS
from dlbench.errors import number_or_none
from dlbench.results.schema import is_true
from dlbench.results.stats import (
    CPU_NOISE_PCT,
    MAX_OUTLIER_TIME_PCT,
    MAX_SPREAD_PCT,
    noise_limit_pct,
)
from dlbench.results.verdict import (
    MAX_REPEAT_GAP_PCT,
    disagreeing_repeats,
    gpu_rules,
    harness_ratios,
    noise_of,
    reasons_and_notes,
)

# code: (what happened, what to change)
REASONS = {
    "failed": ("the run did not finish ({status})", "see its error column"),
    "short_window": (
        "the window lasted {window_s:.2f} s, under {min_time_s:g} s",
        "raise --min-time",
    ),
    "few_steps": (
        "{steps:.0f} measured steps, under the {min_spread_steps} a spread needs",
        "raise --n-iters or --min-time",
    ),
    "noisy": (
        "{noisy_parts}",
        "run on a quiet machine, or measure longer (--max-noise, --max-time)",
    ),
    "drift": (
        "a step took {step_time_drift_pct:+.1f} % longer in the window's second half than in its "
        "first: the machine changed speed while it measured",
        "warm up longer (--warmup-steps), or measure when nothing else runs on the machine",
    ),
    "host_busy": (
        "other processes used {host_other_cpu_pct:.0f} % of this machine's CPU time during the "
        "window: the figure is of a shared machine, and the next run's will differ",
        "run it when the machine is quiet (close what else runs, or use a machine of your own), "
        "or accept a shared machine's load with --max-host-busy",
    ),
    "host_bound": ("the host held the GPU back", "a bigger batch, or --cuda-graphs"),
    "hardware_slowdown": ("the GPU slowed down ({throttle_reasons})", "check cooling and power"),
    "other_processes": ("{other_gpu_processes} other process(es) used the GPU", "run it alone"),
    "low_clock": (
        "the SM clock was under its base in {sm_clock_below_base_pct:.0f} % of samples",
        "check clocks and cooling",
    ),
    "energy_short_window": ("no energy figure ({energy_quality})", "raise --min-time"),
    "below_datasheet": (
        "it attains {attained_bf16_datasheet_share:.0%} of its datasheet's bf16 matmul and "
        "{attained_read_datasheet_share:.0%} of its memory bandwidth",
        "check clocks, power limit and cooling",
    ),
    "above_datasheet": (
        "it measured {attained_datasheet_share_max:.2f}x its datasheet, which no GPU attains",
        "a timing fault: report it, and trust no figure of this row",
    ),
    "impossible_figure": (
        "a figure is not a finite positive rate",
        "a timing fault: report it, and trust no figure of this row",
    ),
    "non_finite_loss": (
        "the last measured step's loss or output was not finite (NaN or Inf)",
        "the arithmetic diverged: a wider precision, a smaller learning rate, another recipe",
    ),
    "repeats_disagree": (
        "{disagreeing_repeats} outside the other repeats' ratios by over {max_repeat_gap_pct:g} %"
        " ({harness_ratios})",
        "a median would hide it: run validate again on a quiet GPU",
    ),
    "latency_bound": (
        "LoadGen: the p99 latency ({serve_latency_p99_ms:.2f} ms) passed the bound "
        "({serve_slo_p99_ms:g} ms)",
        "a lower --qps (--find-qps finds the highest valid rate), or a faster server",
    ),
    "ttft_bound": (
        "LoadGen: the p99 time to first token ({serve_ttft_p99_ms:.2f} ms) passed the bound "
        "({serve_ttft_p99_bound_ms:g} ms)",
        "a lower --qps (--find-qps finds the highest valid rate), or more KV cache slots "
        "(serve_kv_slots: --max-batch caps them, memory and the longest request size them)",
    ),
    "tpot_bound": (
        "LoadGen: the p99 time per output token ({serve_tpot_p99_ms:.2f} ms) passed the bound "
        "({serve_tpot_p99_bound_ms:g} ms)",
        "a lower --qps, or a smaller --max-batch (fewer requests a decode step)",
    ),
    "wrong_tokens": (
        "{serve_tokens_wrong:.0f} of {serve_tokens_checked:.0f} requests checked were served a "
        "wrong token (generated again without a cache)",
        "a fault of the served path: report it, and trust no figure of this row",
    ),
    "early_stopping": (
        "LoadGen: its early-stopping estimate failed ({serve_early_stopping})",
        "a longer load (--min-duration, --queries) or a lower --qps",
    ),
    "min_duration": (
        "LoadGen: the load lasted under {serve_min_duration_s:g} s",
        "offline: the server outran its expected rate; measure again",
    ),
    "min_queries": (
        "LoadGen: under {serve_min_queries:.0f} queries answered",
        "a longer --min-duration, or fewer --queries",
    ),
    "loadgen_invalid": (
        "LoadGen called the load INVALID",
        "read its summary log (serve_loadgen_log)",
    ),
    "below_published": (
        "it measured {published_ratio:.2f}x the median of the published rows of this GPU model "
        "and configuration, outside +/-{published_band_pct:.1f} %",
        "measure it again (a sweep does); if it stays low, set it beside the published row "
        "(dlbench compare FILE) and check clocks, power and driver",
    ),
    "below_siblings": (
        "it attains {siblings_share:.0%} of its {siblings:.0f} siblings' median ({siblings_low})",
        "check this GPU's clocks, power and memory",
    ),
}
NOTES = {
    "input_bound": "the GPU waited for its loader {data_wait_pct:.0f} % of the window: the row "
    "measures the input pipeline (faster: {input_fix})",
    "power_capped": "ran at its software power cap in {throttle_pct:.0f} % of samples",
    "processes_hidden": "another PID namespace: NVML's process list could not be matched",
    "eager_fallback": "the step could not be captured as a CUDA graph and ran eager",
    "fp8_uncompiled": "fp8 ran uncompiled (--no-compile): its casts run as kernels of their own",
    "above_published": "it measured {published_ratio:.2f}x the median of the published rows of "
    "this GPU model and configuration, above +/-{published_band_pct:.1f} % (newer code or "
    "software than theirs?)",
}


def _input_fix(row: dict) -> str:
    """What feeds the step faster, given how the row was fed. nvJPEG's call synchronises the
    device: under --cuda-graphs each decode waits for every step the host queued ahead."""
    if row.get("data_decode") != "gpu":
        return "more --workers, or --decode gpu"
    if is_true(row.get("cuda_graphs")):
        return "--decode gpu without --cuda-graphs (nvJPEG waits for every queued step)"
    return "more --workers"


# What each failed noise check says (results.stats.Noise.noisy_parts): only the checks that failed
NOISY_PARTS = {
    "interval": "the throughput is known only to +/-{throughput_interval_pct:.1f} % (over the "
    "{noise_limit_pct:g} % allowed)",
    "spread": "its steps spread {step_time_robust_spread_pct:.1f} % (over {max_spread_pct:g})",
    "outliers": "{step_outliers:.0f} outlier step(s) took {step_outlier_time_pct:.1f} % of the "
    "window (over {max_outlier_time_pct:g})",
}


def verdict_label(row: Mapping[str, object]) -> str:
    """The verdict in a few words beside a figure, the one way every console, report and table
    prints it: `valid`, or `INVALID (noisy, drift)` (a row from before verdicts existed: "")."""
    reasons = [r for r in str(row.get("verdict_reasons") or "").split(";") if r]
    if reasons:
        return f"INVALID ({', '.join(reasons)})"
    return "valid" if row.get("verdict") not in (None, "") or "verdict" not in row else ""


# The columns the words above format as numbers (an empty cell as 0)
NUMBERS = (
    "window_s",
    "min_time_s",
    "step_time_stdev_pct",
    "data_wait_pct",
    "throughput_interval_pct",
    "step_time_robust_spread_pct",
    "step_outliers",
    "step_outlier_time_pct",
    "step_time_drift_pct",
    "sm_clock_below_base_pct",
    "throttle_pct",
    "steps",
    "siblings_share",
    "siblings",
    "attained_bf16_datasheet_share",
    "attained_read_datasheet_share",
    "attained_datasheet_share_max",
    "published_ratio",
    "published_band_pct",
    "serve_latency_p99_ms",
    "serve_slo_p99_ms",
    "serve_ttft_p99_ms",
    "serve_ttft_p99_bound_ms",
    "serve_tpot_p99_ms",
    "serve_tpot_p99_bound_ms",
    "serve_min_duration_s",
    "serve_min_queries",
    "serve_tokens_wrong",
    "serve_tokens_checked",
    "host_other_cpu_pct",
)


def _cpu_word(row: Mapping[str, object]) -> str:
    """What a valid CPU row's figure is good for: its machine's, to within what the next run
    on it gives (results.stats.CPU_RUN_SPREAD_PCT), not a hardware figure to rank."""
    if row.get("accelerator") != "cpu":
        return ""
    return (
        f"; a CPU's figure: this machine's, and the next run on it may read up to about "
        f"{CPU_NOISE_PCT:.0f} % either way (compare allows for it)"
    )


def advice(row: dict) -> str:
    """One line: the verdict, what made it, and what to change."""
    reasons, notes = reasons_and_notes(row)
    values = {**row}
    for key in NUMBERS:
        values[key] = number_or_none(row.get(key)) or 0.0
    values["min_spread_steps"] = MIN_SPREAD_STEPS
    values["max_repeat_gap_pct"] = MAX_REPEAT_GAP_PCT
    ratios = harness_ratios(row)
    values["disagreeing_repeats"] = "; ".join(
        f"repeat {k} read {ratios[k - 1]:.4f}" for k in disagreeing_repeats(ratios)
    )
    values["input_fix"] = _input_fix(row)
    values.update(
        noise_limit_pct=noise_limit_pct(number_or_none(row.get("max_noise_pct")), gpu_rules(row)),
        max_spread_pct=MAX_SPREAD_PCT,
        max_outlier_time_pct=MAX_OUTLIER_TIME_PCT,
    )
    limit = number_or_none(row.get("max_noise_pct"))
    parts = noise_of(row).noisy_parts(limit, gpu_rules(row))
    values["noisy_parts"] = "; ".join(NOISY_PARTS[p].format(**values) for p in parts) or (
        "its steps' standard deviation was {step_time_stdev_pct:.1f} % (a row from before the "
        "noise columns)".format(**values)
    )
    if not reasons:
        extra = "; ".join(NOTES[n].format(**values) for n in notes)
        return "VALID" + (f" (note: {extra})" if extra else "") + _cpu_word(row)
    parts = [f"{REASONS[r][0].format(**values)}: {REASONS[r][1].format(**values)}" for r in reasons]
    return "INVALID: " + "; ".join(parts)
