"""Each setting is declared once: a serve run's settings that every run has (its model,
precision, compilation, device, seed, output) are RunConfig's, taken with `shared`, and no
command's option copies another's help."""

from __future__ import annotations

from collections import defaultdict

import pytest
import typer

from dlbench.config import SETTINGS
from dlbench.config.flags import SWEEP_OWNED
from dlbench.serve.settings import SERVE_SETTINGS, SERVE_SWEEP_OWNED, ServeSettings


def _options_by_help() -> dict[str, set[str]]:
    """Every command's options, by their help: the option names each help is written for."""
    from dlbench.cli import app

    found: dict[str, set[str]] = defaultdict(set)
    for command in typer.main.get_command(app).commands.values():
        for param in command.params:
            if param.param_type_name == "option" and param.help:
                found[param.help].add(param.opts[0])
    return found


def test_a_serve_setting_every_run_has_is_runconfigs_own():
    shared = {k for k, s in SERVE_SETTINGS.items() if s.field.metadata.get("shared")}
    assert shared == set(SERVE_SETTINGS) & set(SETTINGS)
    assert {"model", "precision", "compile", "seed", "output", "tags"} <= shared
    for key in shared:  # names and help from RunConfig; a default of serve's own may differ
        serve, run = SERVE_SETTINGS[key], SETTINGS[key]
        assert serve.flags == run.flags and serve.switch == run.switch, key
        assert serve.help.split(" (")[0].split(". Serve")[0] in run.help, key


def test_no_commands_option_copies_the_help_of_another():
    copied = {h: names for h, names in _options_by_help().items() if len(names) > 1}
    assert not copied, copied


def test_what_a_sweep_owns_is_stated_once():
    assert set(SERVE_SWEEP_OWNED) == set(SWEEP_OWNED) & set(SERVE_SETTINGS)


@pytest.mark.parametrize(
    ("given", "flag"),
    [({"seq_len": 0}, "--seq-len"), ({"width": -3}, "--width"), ({"seed": 2**70}, "--seed"),
     ({"precision": "fp4"}, "--precision"), ({"accelerator": "tpu"}, "--accelerator")],
)  # fmt: skip
def test_a_shared_setting_is_checked_where_every_runs_is(given, flag):
    """Serve refuses what infer refuses, in infer's words (a seed past 64 bits was accepted)."""
    from dlbench.config import RunConfig
    from dlbench.errors import UserError

    with pytest.raises(UserError) as serve:
        ServeSettings(scenario="offline", **given).checked()
    with pytest.raises(UserError) as infer:
        RunConfig.of(mode="infer", **given)
    assert str(serve.value) == str(infer.value) and flag in str(serve.value)
