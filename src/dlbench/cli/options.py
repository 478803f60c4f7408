"""Command-line options made from declared settings, where each flag is declared once (its
default, help and names): `options_of` gives a command every setting of a table (RunConfig's
with `run_options`, a serve run's), `field_option` one of them to a command that takes a few."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer

from dlbench.config import SETTINGS, RunConfig, Setting


def _cli_type(setting: Setting) -> Any:
    """The type typer parses a setting as: lists for the repeated flags (--ddp, --tag)."""
    kind = setting.kind
    if setting.key == "tags" or typing.get_origin(kind) is tuple:
        return list[str] | None
    return kind


def _cli_default(setting: Setting) -> Any:
    default = setting.default
    return None if isinstance(default, tuple) or setting.key == "tags" else default


def field_option(
    name: str, help: str | None = None, kind: Any = None, table: dict[str, Setting] = SETTINGS
) -> Any:
    """`Annotated[type, typer.Option(...)]` for one setting: its declared names (a
    `--name/--no-name` pair for an optional boolean), its help unless `help` replaces it."""
    setting = table[name]
    kind = kind or _cli_type(setting)
    names = list(setting.flags)
    if not names and kind == (bool | None):
        names = [f"--{name.replace('_', '-')}/--no-{name.replace('_', '-')}"]
    elif not names and setting.switch:
        names = [f"--{name.replace('_', '-')}"]
    hidden = bool(setting.field.metadata.get("hidden"))
    option = typer.Option(
        *names, help=help or setting.help, rich_help_panel=setting.panel, hidden=hidden
    )
    return Annotated[kind, option]


def run_options(
    exclude: Iterable[str] = (),
    replace: dict[str, tuple[Any, Any, str]] | None = None,
    mode: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command every RunConfig setting as an option, but `exclude` (and `replace`d ones
    with another type, default and help: `--batch-size auto`); a command of one `mode` shows
    that mode's defaults where they differ by mode (fp8's recipe)."""
    from dlbench.config.fp8_recipes import recipe_help

    replace = dict(replace or {})
    if "fp8_recipe" not in set(exclude) and "fp8_recipe" not in replace:
        fp8 = SETTINGS["fp8_recipe"]
        replace["fp8_recipe"] = (None, _cli_default(fp8), recipe_help(mode))
    return options_of(SETTINGS, exclude, replace)


def options_of(
    table: dict[str, Setting],
    exclude: Iterable[str] = (),
    replace: dict[str, tuple[Any, Any, str]] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command every setting of `table` as an option, but `exclude`d and `replace`d
    ones. The command receives them as one dict, `flags` (key -> value as parsed), beside its
    own parameters."""
    replace = replace or {}
    names = [n for n in table if n not in set(exclude)]
    panels = list(dict.fromkeys(s.panel for s in table.values()))
    names.sort(key=lambda n: panels.index(table[n].panel))  # --help's groups

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        # the command's own annotations read in its module (with_flags lives in this one)
        own = inspect.signature(command, eval_str=True).parameters.values()
        own = [p for p in own if p.name != "flags"]
        params = []
        for name in names:
            kind, default, help = replace.get(name, (None, _cli_default(table[name]), None))
            params.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=default,
                    annotation=field_option(name, help, kind, table),
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
    from dlbench.config.row_tags import RowTags
    from dlbench.results.tag_columns import parse_tags

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
