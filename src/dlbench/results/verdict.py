"""A verdict on every row: valid or invalid, the reasons (short codes) and, apart from them, notes
that leave a row valid but are worth knowing. One function decides, from the row's own columns;
every threshold is here. `advice` turns the verdict into one line that says what to change."""

from __future__ import annotations

import math

from dlbench.config.limits import MIN_SPREAD_STEPS
from dlbench.errors import number_or_none
from dlbench.results.published import ABOVE, BELOW, LOADER_FINDINGS, outside_band
from dlbench.results.schema import is_true
from dlbench.results.stats import MAX_NOISE_PCT, Noise

LOW_CLOCK_SAMPLES_PCT = 10.0  # SM clock under its base in more than this share of samples
# Slowdowns the hardware imposes: a row measured through them measures the cooling or the
# power supply. A software power cap at the board's limit is how an H100 runs heavy GEMMs.
HARDWARE_SLOWDOWNS = ("hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake")
# A measured peak (dlbench peak) under these shares of its datasheet's dense bf16 matmul and
# memory bandwidth, or of the median of its identical siblings, names a GPU to look at; a
# healthy H100 or H200 under its power cap attains a little under three quarters of the
# datasheet's dense bf16, so the floor sits below that (docs/decisions.md#peak-floor).
MIN_DATASHEET_MATMUL_SHARE = 0.65
MIN_DATASHEET_READ_SHARE = 0.85
MIN_SIBLINGS_SHARE = 0.9
# ... and over this share of any datasheet figure is a timing fault: a GPU cannot beat it.
MAX_DATASHEET_SHARE = 1.0
# validate: a repeat whose ratio lies further than this outside the other repeats' range
# disagrees with them; the bar the harness itself is held to against a bare loop
MAX_REPEAT_GAP_PCT = 2.0

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
        "the throughput is known to +/-{throughput_interval_pct:.1f} %, its steps spread "
        "{step_time_robust_spread_pct:.1f} % and {step_outliers:.0f} outlier(s) took "
        "{step_outlier_time_pct:.1f} % of the window",
        "run on a quiet machine, or measure longer (--max-noise, --max-time)",
    ),
    "drift": (
        "the second half's steps ran {step_time_drift_pct:+.1f} % against the first half's",
        "warm up longer (--warmup-steps), or find what changed during the window",
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
    if _flag(row, "cuda_graphs"):
        return "--decode gpu without --cuda-graphs (nvJPEG waits for every queued step)"
    return "more --workers"


def _flag(row: dict, key: str) -> bool:
    return is_true(row.get(key))


def reasons_and_notes(row: dict) -> tuple[list[str], list[str]]:
    """The codes that make the row invalid, and the notes that do not."""
    reasons: list[str] = []
    if row.get("status", "ok") != "ok":
        return ["failed"], []
    window, minimum = number_or_none(row.get("window_s")), number_or_none(row.get("min_time_s"))
    if window is not None and minimum and window < minimum:
        reasons.append("short_window")
    steps = number_or_none(row.get("steps"))
    if steps is not None and steps < MIN_SPREAD_STEPS:
        reasons.append("few_steps")
    reasons += noise_reasons(row)
    if not _flag(row, "input_bound") and _flag(row, "host_bound"):  # a loader's: a note
        reasons.append("host_bound")
    slowdowns = str(row.get("throttle_reasons") or "").split()
    if any(s in HARDWARE_SLOWDOWNS for s in slowdowns):
        reasons.append("hardware_slowdown")
    if (number_or_none(row.get("other_gpu_processes")) or 0) > 0:
        reasons.append("other_processes")
    if (number_or_none(row.get("sm_clock_below_base_pct")) or 0) > LOW_CLOCK_SAMPLES_PCT:
        reasons.append("low_clock")
    if row.get("energy_quality") not in (None, "", "ok"):
        reasons.append("energy_short_window")
    reasons += _peak_reasons(row)
    if row.get("last_step_finite") is not None and not _flag(row, "last_step_finite"):
        reasons.append("non_finite_loss")
    if disagreeing_repeats(harness_ratios(row)):
        reasons.append("repeats_disagree")
    reasons += loadgen_reasons(row)
    if (number_or_none(row.get("serve_tokens_wrong")) or 0) > 0:
        reasons.append("wrong_tokens")
    outside = outside_band(row)
    if outside == BELOW:
        reasons.append(BELOW)
    notes = [ABOVE] if outside == ABOVE else []
    notes += [f for f in LOADER_FINDINGS if _flag(row, f)]
    if "sw_power_cap" in slowdowns:
        notes.append("power_capped")
    if _flag(row, "gpu_processes_hidden"):
        notes.append("processes_hidden")
    if row.get("graph_fallback"):
        notes.append("eager_fallback")
    if (
        row.get("precision") == "fp8"
        and row.get("compile") is not None
        and not _flag(row, "compile")
    ):
        notes.append("fp8_uncompiled")
    return reasons, notes


def loadgen_reasons(row: dict) -> list[str]:
    """A serve row LoadGen called INVALID: its reasons (each constraint it failed)."""
    if row.get("serve_result") != "INVALID":
        return []
    given = [r for r in str(row.get("serve_invalid_reasons") or "").split(";") if r]
    return given or ["loadgen_invalid"]


def impossible_peak(row: dict) -> str:
    """Why a peak row's figures are ones no device has ('' when they are possible): an
    attained figure that is not finite and positive, or one above its datasheet."""
    for column, value in row.items():
        if column.startswith("attained_") and column.endswith(("_tflops", "_tb_s", "_gb_s")):
            number = number_or_none(value)
            if number is not None and not (math.isfinite(number) and number > 0):
                return "impossible_figure"
    top = number_or_none(row.get("attained_datasheet_share_max"))
    return "above_datasheet" if top is not None and top > MAX_DATASHEET_SHARE else ""


def noise_reasons(row: dict) -> list[str]:
    """`noisy` and `drift` by results.stats.Noise from the row's noise columns, against its
    --max-noise. A row from before they existed is noisy when its stdev spread passes the
    limit, as it was then."""
    limit = number_or_none(row.get("max_noise_pct"))
    if row.get("throughput_interval_pct") is None and row.get("step_outliers") is None:
        spread = number_or_none(row.get("step_time_stdev_pct"))
        return ["noisy"] if spread is not None and spread > (limit or MAX_NOISE_PCT) else []
    noise = Noise(
        robust_spread_pct=number_or_none(row.get("step_time_robust_spread_pct")) or 0.0,
        outliers=int(number_or_none(row.get("step_outliers")) or 0),
        outlier_time_pct=number_or_none(row.get("step_outlier_time_pct")) or 0.0,
        drift_pct=number_or_none(row.get("step_time_drift_pct")) or 0.0,
        # no interval: few_steps says it
        interval_pct=number_or_none(row.get("throughput_interval_pct")) or 0.0,
        steps=int(number_or_none(row.get("steps")) or 0),  # units: what the noise columns are over
    )
    return noise.reasons(limit)


def _peak_reasons(row: dict) -> list[str]:
    """A measured peak its GPU cannot have, or under its datasheet or its siblings (rows of
    `dlbench peak`)."""
    impossible = impossible_peak(row)
    if impossible:
        return [impossible]
    reasons = []
    matmul = number_or_none(row.get("attained_bf16_datasheet_share"))
    read = number_or_none(row.get("attained_read_datasheet_share"))
    if (matmul is not None and matmul < MIN_DATASHEET_MATMUL_SHARE) or (
        read is not None and read < MIN_DATASHEET_READ_SHARE
    ):
        reasons.append("below_datasheet")
    siblings = number_or_none(row.get("siblings_share"))
    if siblings is not None and siblings < MIN_SIBLINGS_SHARE:
        reasons.append("below_siblings")
    return reasons


def harness_ratios(row: dict) -> list[float]:
    """validate's ratio of each repeat (none for other rows)."""
    text = row.get("harness_ratios")
    if not isinstance(text, str):
        return []
    return [r for r in (number_or_none(part) for part in text.split()) if r is not None]


def disagreeing_repeats(ratios: list[float]) -> list[int]:
    """The repeats (counted from 1) whose ratio lies more than MAX_REPEAT_GAP_PCT outside the
    range of the others' ratios: of two repeats that far apart, both."""
    gap = MAX_REPEAT_GAP_PCT / 100
    found = []
    for i, ratio in enumerate(ratios):
        others = ratios[:i] + ratios[i + 1 :]
        if others and not min(others) * (1 - gap) <= ratio <= max(others) * (1 + gap):
            found.append(i + 1)
    return found


def verdict_columns(row: dict) -> dict[str, object]:
    """`verdict`, `verdict_reasons` and `verdict_notes` for a row."""
    reasons, notes = reasons_and_notes(row)
    return {
        "verdict": "invalid" if reasons else "valid",
        "verdict_reasons": ";".join(reasons),
        "verdict_notes": ";".join(notes),
    }


def advice(row: dict) -> str:
    """One line: the verdict, what made it, and what to change."""
    reasons, notes = reasons_and_notes(row)
    values = {**row}
    for key in (
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
    ):
        values[key] = number_or_none(row.get(key)) or 0.0
    values["min_spread_steps"] = MIN_SPREAD_STEPS
    values["max_repeat_gap_pct"] = MAX_REPEAT_GAP_PCT
    ratios = harness_ratios(row)
    values["disagreeing_repeats"] = "; ".join(
        f"repeat {k} read {ratios[k - 1]:.4f}" for k in disagreeing_repeats(ratios)
    )
    values["input_fix"] = _input_fix(row)
    if not reasons:
        extra = "; ".join(NOTES[n].format(**values) for n in notes)
        return "VALID" + (f" (note: {extra})" if extra else "")
    parts = [f"{REASONS[r][0].format(**values)}: {REASONS[r][1].format(**values)}" for r in reasons]
    return "INVALID: " + "; ".join(parts)
