"""A verdict on every row: valid or invalid, the reasons (short codes) and, apart from them, notes
that leave a row valid but are worth knowing. One function decides, from the row's own columns;
every threshold is here. `advice` turns the verdict into one line that says what to change."""

from __future__ import annotations

import math

from dlbench.config.limits import HOST_OTHER_CPU_PCT, MIN_SPREAD_STEPS
from dlbench.errors import number_or_none
from dlbench.results.published import ABOVE, BELOW, LOADER_FINDINGS, outside_band
from dlbench.results.schema import is_true
from dlbench.results.stats import MAX_NOISE_PCT, SPREAD_SHOWN_ONLY, Noise

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
    if host_busy(row):
        reasons.append("host_busy")
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


def host_busy(row: dict) -> bool:
    """A CPU row whose window other processes took more of the machine's CPU time than its
    --max-host-busy allows (HOST_OTHER_CPU_PCT where not given). Not a GPU row (its figure is
    the GPU's), nor one of several processes (a rank torchrun started beside this one reads as
    another process), nor an unknown share (no /proc/stat)."""
    other = number_or_none(row.get("host_other_cpu_pct"))
    ranks = number_or_none(row.get("world_size")) or 1
    if row.get("accelerator") != "cpu" or other is None or ranks > 1:
        return False
    limit = number_or_none(row.get("max_host_busy_pct"))
    return other > (HOST_OTHER_CPU_PCT if limit is None else limit)


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
    return noise_of(row).reasons(limit, gpu_rules(row))


def gpu_rules(row: dict) -> bool:
    """Whether the row's noise is judged by a GPU's rules: its spread and rare outliers, its
    limit; a CPU's is not (results.stats.SPREAD_SHOWN_ONLY)."""
    return row.get("accelerator") not in SPREAD_SHOWN_ONLY


def noise_of(row: dict) -> Noise:
    """The row's noise as its columns recorded it (results.stats.Noise)."""
    return Noise(
        robust_spread_pct=number_or_none(row.get("step_time_robust_spread_pct")) or 0.0,
        outliers=int(number_or_none(row.get("step_outliers")) or 0),
        outlier_time_pct=number_or_none(row.get("step_outlier_time_pct")) or 0.0,
        drift_pct=number_or_none(row.get("step_time_drift_pct")) or 0.0,
        # no interval: few_steps says it
        interval_pct=number_or_none(row.get("throughput_interval_pct")) or 0.0,
        steps=int(number_or_none(row.get("steps")) or 0),  # units: what the noise columns are over
    )


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
