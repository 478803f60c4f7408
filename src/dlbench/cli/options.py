"""Command-line options made from RunConfig's settings, where each flag is declared once (its
default, help and names): `run_options` gives a command every run flag, `field_option` one of
them to a command that takes only a few."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer

from dlbench.config import PANELS, SETTINGS, RunConfig


def _cli_type(name: str) -> Any:
    """The type typer parses a setting as: lists for the repeated flags (--ddp, --tag)."""
    kind = SETTINGS[name].kind
    if name == "tags" or typing.get_origin(kind) is tuple:
        return list[str] | None
    return kind


def _cli_default(name: str) -> Any:
    default = SETTINGS[name].default
    return None if isinstance(default, tuple) or name == "tags" else default


def field_option(name: str, help: str | None = None, kind: Any = None) -> Any:
    """`Annotated[type, typer.Option(...)]` for one setting: its declared names (a
    `--name/--no-name` pair for an optional boolean), its help unless `help` replaces it."""
    setting = SETTINGS[name]
    kind = kind or _cli_type(name)
    names = list(setting.flags)
    if not names and kind == (bool | None):
        names = [f"--{name.replace('_', '-')}/--no-{name.replace('_', '-')}"]
    elif not names and setting.switch:
        names = [f"--{name.replace('_', '-')}"]
    option = typer.Option(*names, help=help or setting.help, rich_help_panel=setting.panel)
    return Annotated[kind, option]


def run_options(
    exclude: Iterable[str] = (), replace: dict[str, tuple[Any, Any, str]] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command every RunConfig setting as an option, but `exclude` (and `replace`d ones
    with another type, default and help: `--batch-size auto`). The command receives them as one
    dict, `flags` (key -> value as parsed), beside its own parameters."""
    replace = replace or {}
    names = [n for n in SETTINGS if n not in set(exclude)]
    names.sort(key=lambda n: PANELS.index(SETTINGS[n].panel))  # --help's groups

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
    from dlbench.config.tags import RowTags
    from dlbench.results.tags import parse_tags

    values = {**flags, **fixed}
    if "ddp" in values:
        values["ddp"] = tuple(values["ddp"] or ())
    if isinstance(values.get("tags"), list) or values.get("tags") is None:
        values["tags"] = RowTags.of(parse_tags(values.get("tags")))
    return RunConfig.of(**values)


Output = field_option("output")
Model = field_option("model")
Width = field_option("width")
Height = field_option("height")
SeqLen = field_option("seq_len")
