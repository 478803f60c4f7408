"""RunConfig in typed sections (issue 56): each flag is declared once, in one section, under the
key it always had; `--help` groups the flags by section; command lines, plan files (the
packaged ones and one written for 0.2.0) and worker JSON give the same config as before."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import typer.main

from dlbench.cli import app
from dlbench.config import PANELS, SETTINGS, RunConfig
from dlbench.config.flags import config_args, config_from_json, config_to_json, flag_name
from dlbench.config.row_tags import RowTags
from dlbench.errors import UserError
from dlbench.sweep.plan import ServePoint
from dlbench.sweep.plan_file import check_points, load_plan, packaged_plans
from tests.conftest import cli_env, run_cli

OLD_PLAN = Path(__file__).parents[1] / "sweep" / "plans" / "written-for-0.2.0.yaml"
# Every flag of a run at 0.2.0, by the key its flag, plan files and columns used then.
KEYS_AT_0_2_0 = {
    "model", "mode", "batch_size", "n_iters", "warmup_steps", "precision", "width", "height",
    "seq_len", "prompt_len", "new_tokens", "accelerator", "devices", "num_nodes", "strategy",
    "activation_checkpointing", "ddp", "collective_timeout", "channels_last", "compile",
    "cache_dir", "cache", "cudnn_search", "cuda_graphs", "llm_impl", "attention", "optimizer",
    "data_on", "data", "data_workers", "data_decode", "output", "json", "seed", "max_noise",
    "max_time", "min_time", "run_id", "telemetry", "sample_interval", "telemetry_log", "strict",
    "usd_per_hour", "nvtx", "breakdown", "tags",
}  # fmt: skip
ADDED_SINCE = {"fp8_recipe", "processes", "max_host_busy"}  # issues 64, 87, 102


def test_every_flag_lives_in_one_section_under_the_key_it_always_had():
    assert set(SETTINGS) == KEYS_AT_0_2_0 | ADDED_SINCE
    config = RunConfig()
    for key, setting in SETTINGS.items():
        section = getattr(config, setting.section)
        assert dataclasses.is_dataclass(section), setting.section
        assert getattr(section, setting.name) == config.setting(key) == setting.default, key
    titles = [getattr(config, f.name).TITLE for f in dataclasses.fields(RunConfig)]
    assert list(PANELS) == titles  # --help's groups, one a section, in RunConfig's order


def test_a_section_checks_its_own_flags_and_names_the_flag():
    with pytest.raises(UserError, match="--workers"):
        RunConfig.of(data_workers=-1)
    with pytest.raises(UserError, match="--devices"):
        RunConfig.of(devices="0")
    with pytest.raises(UserError, match="--sample-interval"):
        RunConfig.of(sample_interval=0.0)
    with pytest.raises(TypeError, match="no setting batch"):
        RunConfig.of(batch=2)  # a key that is not a flag is a programming error, not input


def test_replace_changes_settings_by_key_and_checks_them_again():
    config = RunConfig.of(model="vit", data_workers=3, telemetry=False)
    changed = config.replace(batch_size=4, devices="2")
    assert (changed.workload.model, changed.workload.batch_size) == ("vit", 4)
    assert (changed.devices.per_node, changed.data.workers, changed.telemetry.enabled) == (
        "2",
        3,
        False,
    )
    with pytest.raises(UserError, match="--batch-size"):
        config.replace(batch_size=0)


def test_help_groups_the_flags_by_section_in_the_sections_order():
    command = typer.main.get_command(app).commands["infer"]
    panels = {p.name: p.rich_help_panel for p in command.params if p.name in SETTINGS}
    for key, panel in panels.items():
        assert panel == SETTINGS[key].panel, key
    out = run_cli("infer", "--help", env={**cli_env(), "COLUMNS": "200", "TERM": "dumb"})
    shown = re.findall(r"╭─ (.+?) ─", out.stdout)
    assert [p for p in shown if p in PANELS] == list(PANELS)
    assert PANELS[-1] == "Cost" and flag_name("usd_per_hour") in out.stdout


@pytest.mark.parametrize("name", [*packaged_plans(), str(OLD_PLAN)])
def test_packaged_plans_and_a_plan_written_for_0_2_0_still_load(name):
    plan = load_plan(name)
    points = plan.points()
    check_points(points)  # every point resolves as its run would
    for point in points:
        if isinstance(point, ServePoint):
            continue  # a serve run's settings: tests/sweep/test_serve_plan.py
        config = point.config()
        settings = config.settings()
        assert config_from_json(config_to_json(config)) == config
        for key, value in point.flags.items():
            if key != "batch_size" or value != "auto":
                assert settings[key] == value, (name, key)


def test_the_old_plan_sets_every_section():
    configs = [p.config() for p in load_plan(str(OLD_PLAN)).points()]
    first, llm = configs[0], configs[-1]
    assert (first.workload.width, first.workload.height) == (32, 48)
    assert first.acceleration.cudnn_search == "off" and first.acceleration.attention == "math"
    assert (first.measurement.n_iters, first.measurement.min_time) == (7, 0.5)
    assert first.devices.ddp == ("bucket_cap_mb=50", "static_graph=false")
    assert (first.data.location, first.data.workers) == ("host", 2)
    assert first.output.json and first.output.tags == RowTags(
        {"purpose": "old-plan", "repeat": "0"}
    )
    assert (first.telemetry.enabled, first.telemetry.sample_interval) == (False, 0.25)
    assert first.cost.usd_per_hour == 2.5
    assert (llm.workload.llm_impl, llm.devices.activation_checkpointing) == ("hf", "none")
    words = config_args(first)  # the command line a sweep's own process gets
    for flag in ("--data-on", "--workers", "--no-telemetry", "--sample-interval", "--json"):
        assert flag in words, flag
