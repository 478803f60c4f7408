"""Each run flag is declared once, on RunConfig: train, infer, validate and scaling take their
options from it (same names, help and defaults), and `--help` lists every one of them."""

from __future__ import annotations

import pytest
import typer.main

from dlbench.cli import app
from dlbench.cli.bench import GENERATION_ONLY, NOT_VALIDATED
from dlbench.cli.sweeps import SCALED
from dlbench.config import SETTINGS
from dlbench.config.flags import flag_name
from tests.conftest import cli_env, run_cli

FIELDS = SETTINGS
REPLACED = {("train", "batch_size"), ("scaling", "devices")}  # 'auto'; counts '1,2,4'


def _options(command: str) -> dict[str, object]:
    click_command = typer.main.get_command(app).commands[command]
    return {p.name: p for p in click_command.params}


@pytest.mark.parametrize(
    ("command", "fields"),
    [
        ("train", set(FIELDS) - {"mode", *GENERATION_ONLY}),
        ("infer", set(FIELDS) - {"mode"}),
        ("validate", set(FIELDS) - set(NOT_VALIDATED)),
        ("scaling", set(SCALED)),
    ],
)
def test_run_commands_take_their_options_from_run_config(command, fields):
    options = _options(command)
    assert fields <= set(options), fields - set(options)
    for name in fields:
        option, setting = options[name], FIELDS[name]
        assert flag_name(name) in option.opts, (name, option.opts)
        if (command if command != "infer" else "train", name) in REPLACED:
            continue
        if name == "fp8_recipe" and command in ("train", "infer"):  # the mode's own default
            from dlbench.config.fp8_recipes import recipe_help

            assert option.help == recipe_help(command), name
            continue
        assert option.help == setting.help, name
        default = setting.default
        if not isinstance(default, tuple) and name != "tags":
            assert option.default == default or str(option.default) == str(default), name
    extras = set(options) - fields - {"repeats", "timeout", "invalid_ok"}
    assert not extras, f"{command} declares flags of its own that RunConfig lacks: {extras}"


def test_help_lists_every_run_flag():
    env = {**cli_env(), "COLUMNS": "250", "TERM": "dumb"}
    out, infer = (run_cli(command, "--help", env=env) for command in ("train", "infer"))
    assert out.returncode == 0 and infer.returncode == 0
    for name in set(FIELDS) - {"mode"}:
        assert flag_name(name) in infer.stdout, name
        assert (flag_name(name) in out.stdout) is (name not in GENERATION_ONLY), name
    assert "--workers" in out.stdout and "--data-workers" in out.stdout
    assert "--no-compile" in out.stdout and "--json" in out.stdout and "--tag" in out.stdout


def test_row_tags_keep_labels_apart_from_the_facts_dlbench_adds():
    """Typed tags (issue 56): a sweep's isolation and a searched batch size are facts of their
    own, labels stay labels, and a command line's pairs give the same tags back."""
    from dlbench.config.row_tags import RowTags

    tags = RowTags({"purpose": "latency"}).with_facts(isolation="worker", batch_size_mode="auto")
    facts = {"isolation": "worker", "batch_size_mode": "auto"}
    assert tags.columns() == {"purpose": "latency", **facts}
    assert RowTags.of(tags.columns()) == tags
    assert RowTags({"purpose": "x"}).columns() == {"purpose": "x"}  # no empty fact columns
    own = RowTags.of({"isolation": "rack-3"})  # a user's label of that name, not a sweep's fact
    assert own.isolation == "" and own.columns() == {"isolation": "rack-3"}
