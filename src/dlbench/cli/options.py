"""Command-line options made from RunConfig's fields, where each flag is declared once (its
default, help and names): `run_options` gives a command every run flag, `field_option` one of
them to a command that takes only a few."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer

from dlbench.config import PANELS, RunConfig

_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}
_HINTS = typing.get_type_hints(RunConfig)


def _cli_type(name: str) -> Any:
    """The type typer parses a field as: lists for the repeated flags (--ddp, --tag)."""
    if name == "tags" or typing.get_origin(_HINTS[name]) is tuple:
        return list[str] | None
    return _HINTS[name]


def _cli_default(name: str) -> Any:
    field = _FIELDS[name]
    if field.default is dataclasses.MISSING or isinstance(field.default, tuple):
        return None
    return field.default


def field_option(name: str, help: str | None = None, kind: Any = None) -> Any:
    """`Annotated[type, typer.Option(...)]` for one RunConfig field: its declared names (a
    `--name/--no-name` pair for an optional boolean), its help unless `help` replaces it."""
    meta = _FIELDS[name].metadata
    kind = kind or _cli_type(name)
    names = list(meta["flags"])
    if not names and kind == (bool | None):
        names = [f"--{name.replace('_', '-')}/--no-{name.replace('_', '-')}"]
    elif not names and meta["switch"]:
        names = [f"--{name.replace('_', '-')}"]
    option = typer.Option(*names, help=help or meta["help"], rich_help_panel=meta["panel"])
    return Annotated[kind, option]


def run_options(
    exclude: Iterable[str] = (), replace: dict[str, tuple[Any, Any, str]] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command every RunConfig field as an option, but `exclude` (and `replace`d ones
    with another type, default and help: `--batch-size auto`). The command receives them as one
    dict, `flags` (field name -> value as parsed), beside its own parameters."""
    replace = replace or {}
    names = [n for n in _FIELDS if n not in set(exclude)]
    names.sort(key=lambda n: PANELS.index(_FIELDS[n].metadata["panel"]))  # --help's groups

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(command).parameters.values() if p.name != "flags"]
        params = []
        for name in names:
            kind, default, help = replace.get(name, (None, _cli_default(name), None))
            params.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=default,
                    annotation=field_option(name, help, kind),
                )
            )

        def with_flags(**given: Any) -> Any:
            flags = {name: given.pop(name) for name in names}
            return command(**given, flags=flags)

        signature = inspect.Signature([*own, *params])
        with_flags.__signature__ = signature  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        with_flags.__name__, with_flags.__doc__ = command.__name__, command.__doc__
        with_flags.__module__ = command.__module__
        return with_flags

    return decorate


def config_from_flags(flags: dict[str, Any], **fixed: Any) -> RunConfig:
    """A RunConfig from a command's run flags (repeated flags as tuples, --tag as columns)."""
    from dlbench.cli.tags import parse_tags
    from dlbench.config.tags import RowTags

    values = {**flags, **fixed}
    if "ddp" in values:
        values["ddp"] = tuple(values["ddp"] or ())
    if isinstance(values.get("tags"), list) or values.get("tags") is None:
        values["tags"] = RowTags.of(parse_tags(values.get("tags")))
    return RunConfig(**values)


Output = field_option("output")
Model = field_option("model")
Width = field_option("width")
Height = field_option("height")
SeqLen = field_option("seq_len")
