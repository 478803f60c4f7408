"""The typer app every command module registers on, and the one way a command line runs:
user errors exit 2 with one line and no traceback."""

from __future__ import annotations

import sys
from contextvars import ContextVar

import typer
from rich.markup import escape

from dlbench.console import stderr
from dlbench.errors import EXIT_USER_ERROR, UserError, one_line
from dlbench.signals import Interrupted, die_with_parent, interruptible

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="True, comparable deep-learning benchmarks: one row per run in a CSV.",
    pretty_exceptions_enable=False,
)

# The command line being run (a sweep worker runs many in one process, so not sys.argv).
COMMAND_LINE: ContextVar[tuple[str, ...]] = ContextVar("command_line", default=())

# Parsing errors: typer up to 0.15 raises click's own exceptions, typer 0.16 and later those of
# the click it bundles; both expose ClickException as a base of the BadParameter they export.
_PARSE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_NO_ARGS = "NoArgsIsHelpError"  # `dlbench` alone: the help is the answer, not an error


def run_command(args: list[str] | None = None) -> int:
    """One command line (default: this process's) to its exit code: user errors 2 with one
    line and no traceback, signals 128 + the signal. A sweep worker runs points through here."""
    from dlbench.startup import mark_command_start

    mark_command_start(fresh_process=args is None)
    COMMAND_LINE.set(tuple(sys.argv[1:] if args is None else args))
    try:
        with interruptible():
            code = app(args=args, standalone_mode=False)
        return code if isinstance(code, int) else 0
    except UserError as exc:
        return _report(str(exc), EXIT_USER_ERROR)
    except Interrupted as exc:
        return _report(f"{exc}; no row was written for the run in flight", exc.exit_code)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return 130
    except _PARSE_ERROR as exc:
        if type(exc).__name__ == _NO_ARGS:
            exc.show()
            return 0
        command = " ".join(["dlbench", *_command_words(exc)])
        return _report(f"{exc.format_message()} (see `{command} --help`)", EXIT_USER_ERROR)


def _command_words(exc: Exception) -> list[str]:
    """The command the parse error belongs to (`train`), from click's context if it has one."""
    ctx = getattr(exc, "ctx", None)
    name = getattr(ctx, "info_name", None)
    return [name] if name and getattr(ctx, "parent", None) is not None else []


def main() -> None:
    """Console entry point."""
    die_with_parent()
    sys.exit(run_command())


def _report(message: str, code: int) -> int:
    stderr.print(f"[red]error:[/red] {escape(one_line(message))}")
    return code
