"""A RunConfig as text and back: its command line (the processes a sweep or a batch-size search
starts), its JSON (a sweep worker's points), and a plan's YAML values in each field's type."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.config.tags import RowTags
from dlbench.errors import UserError

# Fields a sweep sets for each point itself; a plan that sets them is refused.
SWEEP_OWNED = ("mode", "output", "run_id", "tags")


def flag_name(field_name: str) -> str:
    """The command-line flag of a RunConfig field: `--batch-size` for batch_size, `--workers`
    for data_workers (its first declared name)."""
    flags = _FIELDS[field_name].metadata.get("flags") if field_name in _FIELDS else None
    return flags[0] if flags else "--" + field_name.replace("_", "-")


def flag_args(field_name: str, value: object) -> list[str]:
    """The command-line words that set one field: `--batch-size 32`, `--no-compile`, a
    repeated `--ddp`, `--tag K=V` per tag column; nothing for None or an unset switch."""
    flag = flag_name(field_name)
    if value is None:
        return []
    if isinstance(value, bool):
        if _FIELDS[field_name].metadata.get("switch"):
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
    args = [config.mode]
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        if f.name != "mode" and (value != default or (auto_batch and f.name == "batch_size")):
            args += flag_args(f.name, value)
    if auto_batch:
        args[args.index("--batch-size") + 1] = "auto"
    return args


def config_to_json(config: RunConfig) -> dict[str, object]:
    """The config as plain JSON values (a sweep worker receives its points so)."""
    return {
        k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
        for k, v in dataclasses.asdict(config).items()
    }


def config_from_json(data: dict[str, object]) -> RunConfig:
    """`config_to_json` undone, each field back in its declared type (a path a Path, a list
    of KEY=VALUE a tuple), whichever fields RunConfig has."""
    hints = typing.get_type_hints(RunConfig)
    values: dict[str, object] = {}
    for name, value in data.items():
        kinds = typing.get_args(hints[name]) or (hints[name],)
        if value is not None and (Path in kinds or hints[name] is Path):
            value = Path(str(value))
        elif isinstance(value, list):
            value = tuple(value)
        if name == "tags" and isinstance(value, dict):
            value = RowTags(**value)
        values[name] = value
    return RunConfig(**values)  # type: ignore[arg-type]


def typed_value(name: str, value: object, where: str) -> object:
    """A plan's value for field `name` in the field's type (YAML gives ints, strings, lists),
    or a UserError naming where it came from, the field and what is allowed."""
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    if name not in fields or name in SWEEP_OWNED:
        known = sorted(set(fields) - set(SWEEP_OWNED))
        raise UserError(f"{where}: unknown flag {name!r}; known: {', '.join(known)}")
    kind = typing.get_type_hints(RunConfig)[name]
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


_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}


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
