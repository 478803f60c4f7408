"""Telemetry evidence on a real GPU, in one process (issue 3):

1. throughput with the sampler on vs off, alternating windows on one model (overhead),
2. energy from NVML's counter vs the integral of sampled power over one long window.

Read only: nothing here changes a limit or a clock.
Usage: PYTHONPATH=src python3 benchmarks/telemetry_check.py [--steps 100] [--long-steps 200]
"""

from __future__ import annotations

import argparse
import json
import statistics

from dlbench.config import RunConfig
from dlbench.engine.loop import LoopSettings, run_measured_loop
from dlbench.engine.plan import loop_settings, make_plan
from dlbench.engine.session import create_fabric, open_session
from dlbench.telemetry.monitor import open_monitor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--long-steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = RunConfig(
        model=args.model,
        batch_size=args.batch_size,
        precision="bf16-mixed",
        n_iters=args.steps,
        warmup_steps=10,
        accelerator="gpu",
    )
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.precision)
    session = open_session(config, plan.workload, plan.shape, plan.precision, fabric)
    monitor = open_monitor(session.device, 0.1, None)
    settings = loop_settings(config.replace(min_time=0.0), session.device.type)
    rates: dict[str, list[float]] = {"on": [], "off": []}
    with session.context():
        for r in range(args.repeats):
            for variant in ("on", "off") if r % 2 == 0 else ("off", "on"):
                observer = monitor if variant == "on" else None
                loop = run_measured_loop(session.step, session.device, settings, observer)
                rates[variant].append(args.batch_size * loop.steps / loop.window_s)
        long = run_measured_loop(
            session.step, session.device, LoopSettings(10, args.long_steps), monitor
        )
    summary = monitor.summary()
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    counter, integral = summary["energy_counter_j"], summary["energy_integral_j"]
    result = {
        "gpu": summary.get("telemetry_backend"),
        "images_per_s_sampler_on": rates["on"],
        "images_per_s_sampler_off": rates["off"],
        "sampler_overhead_pct": 100 * (off - on) / off,
        "long_window_s": long.window_s,
        "energy_counter_j": counter,
        "energy_integral_j": integral,
        "counter_vs_integral_pct": None if not counter else 100 * (integral - counter) / counter,
        "avg_power_w": summary["avg_power_w"],
        "energy_per_image_j": counter / (args.batch_size * long.steps) if counter else None,
        "samples": summary["telemetry_samples"],
        "power_limit_w": summary["power_limit_w"],
        "throttle_pct": summary["throttle_pct"],
        "sm_clock_avg_mhz": summary["sm_clock_avg_mhz"],
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
