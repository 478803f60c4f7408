"""A RunConfig as text and back: its command line (the processes a sweep or a batch-size search
starts), its JSON (a sweep worker's points), and a plan's YAML values in each field's type. The
command line and the YAML typing take any table of declared settings (a serve run's too)."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path

from dlbench.config import SETTINGS, RunConfig, Setting
from dlbench.config.row_tags import RowTags
from dlbench.errors import UserError

# Fields a sweep sets for each point itself; a plan that sets them is refused.
SWEEP_OWNED = ("mode", "output", "run_id", "tags")


def flag_name(key: str, table: dict[str, Setting] = SETTINGS) -> str:
    """The command-line flag of a setting: `--batch-size` for batch_size, `--workers` for
    data_workers (its first declared name)."""
    flags = table[key].flags if key in table else ()
    return flags[0] if flags else "--" + key.replace("_", "-")


def flag_args(key: str, value: object, table: dict[str, Setting] = SETTINGS) -> list[str]:
    """The command-line words that set one setting: `--batch-size 32`, `--no-compile`, a
    repeated `--ddp`, `--tag K=V` per tag column; nothing for None or an unset switch."""
    flag = flag_name(key, table)
    if value is None:
        return []
    if isinstance(value, bool):
        if table[key].switch:
            return [flag] if value else []
        return [flag if value else "--no-" + flag[2:]]
    if isinstance(value, RowTags):
        return [word for k, v in value.columns().items() for word in (flag, f"{k}={v}")]
    if isinstance(value, (list, tuple)):
        return [word for item in value for word in (flag, str(item))]
    return [flag, str(value)]


def config_args(config: RunConfig, auto_batch: bool = False) -> list[str]:
    """`MODE --flag value ...`: the `dlbench` command line that runs this config (for the
    processes a sweep or a batch-size search starts), flags left at their default left out;
    `--batch-size auto` with `auto_batch`."""
    if auto_batch:
        config = config.replace(batch_size=1)  # written out, then replaced by `auto`
    args = [config.workload.mode]
    for key, value in config.settings().items():
        if key != "mode" and (
            value != SETTINGS[key].default or (auto_batch and key == "batch_size")
        ):
            args += flag_args(key, value)
    if auto_batch:
        args[args.index("--batch-size") + 1] = "auto"
    return args


def config_to_json(config: RunConfig) -> dict[str, object]:
    """The config as plain JSON values by key (a sweep worker receives its points so)."""
    return {key: _plain(value) for key, value in config.settings().items()}


def _plain(value: object) -> object:
    """A setting's value as JSON holds it: tags as a dict, a path as text, a tuple as a list."""
    if isinstance(value, RowTags):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    return list(value) if isinstance(value, tuple) else value


def config_from_json(data: dict[str, object]) -> RunConfig:
    """`config_to_json` undone, each setting back in its declared type (a path a Path, a list
    of KEY=VALUE a tuple), whichever settings RunConfig has."""
    values: dict[str, object] = {}
    for key, value in data.items():
        kind = SETTINGS[key].kind
        kinds = typing.get_args(kind) or (kind,)
        if value is not None and Path in kinds:
            value = Path(str(value))
        elif isinstance(value, list):
            value = tuple(value)
        if key == "tags" and isinstance(value, dict):
            value = RowTags(**value)
        values[key] = value
    return RunConfig.of(**values)


def typed_value(
    name: str,
    value: object,
    where: str,
    table: dict[str, Setting] = SETTINGS,
    owned: tuple[str, ...] = SWEEP_OWNED,
) -> object:
    """A plan's value for setting `name` in the setting's type (YAML gives ints, strings, lists),
    or a UserError naming where it came from, the field and what is allowed; `owned`: the
    settings the sweep sets itself."""
    if name not in table or name in owned:
        known = sorted(set(table) - set(owned))
        raise UserError(f"{where}: unknown flag {name!r}; known: {', '.join(known)}")
    kind = table[name].kind
    union = typing.get_origin(kind) in (typing.Union, types.UnionType)
    options = [k for k in typing.get_args(kind) if k is not type(None)] if union else [kind]
    if value is None and union and type(None) in typing.get_args(kind):
        return None
    if isinstance(value, bool) and name in ON_OFF_FIELDS:  # `cudnn_search: off`, as documented
        return ON_OFF[value]
    for option in options:
        converted = _convert(option, value)
        if converted is not _NO:
            return converted
    wanted = " or ".join(getattr(o, "__name__", str(o)) for o in options)
    hint = ""
    if isinstance(value, bool):  # YAML 1.1 reads on, off, yes and no as booleans
        hint = "; YAML read it as a boolean: quote it, e.g. 'off'"
    elif isinstance(value, str):
        hint = f"; write a number without quotes, e.g. {name}: 2"
    raise UserError(f"{where}: {name}: invalid value {value!r}; expected {wanted}{hint}")


_NO = object()
ON_OFF = {True: "on", False: "off"}  # what YAML 1.1 made of a bare on/off (yes/no too)
ON_OFF_FIELDS = ("cudnn_search",)  # the fields whose values are on and off (among others)


def _number_text(text: str, kind: type) -> object:
    """A number written as text (`"2"`, `"1e-3"`) as that number; the text where it is none."""
    try:
        number = int(text) if kind is int else float(text)
    except ValueError:
        return text
    return number if kind is int or math.isfinite(number) else text


def _convert(kind: object, value: object) -> object:
    """value as `kind` when it plainly is one (no bool for a number, no text for a number)."""
    if kind is bool:
        return value if isinstance(value, bool) else _NO
    if isinstance(value, str) and kind in (int, float):  # "2" where a number is meant
        value = _number_text(value, kind)
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _NO
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok else _NO
    if kind is str:
        ok = isinstance(value, (str, int, float)) and not isinstance(value, bool)
        return str(value) if ok else _NO
    if kind is Path:
        return Path(value) if isinstance(value, str) else _NO
    if typing.get_origin(kind) is tuple:
        items = value if isinstance(value, list) else [value]
        return tuple(str(v) for v in items) if all(isinstance(v, str) for v in items) else _NO
    return _NO
