"""The typer app every command module registers on, and the one way a command line runs:
user errors exit 2 with one line and no traceback."""

from __future__ import annotations

import sys
from contextvars import ContextVar

import typer

from dlbench.console import stderr
from dlbench.errors import UserError
from dlbench.signals import Interrupted, interruptible

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="True, comparable deep-learning benchmarks: one row per run in a CSV.",
    pretty_exceptions_enable=False,
)

# The command line being run (a sweep worker runs many in one process, so not sys.argv).
COMMAND_LINE: ContextVar[tuple[str, ...]] = ContextVar("command_line", default=())


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
        return _report(str(exc), 2)
    except Interrupted as exc:
        return _report(f"{exc}; no row was written for the run in flight", exc.exit_code)
    except typer.Exit as exc:
        return exc.exit_code
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return 2
        if isinstance(exc, click.exceptions.Abort):
            return 130
        raise


def main() -> None:
    """Console entry point."""
    sys.exit(run_command())


def _report(message: str, code: int) -> int:
    stderr.print(f"[red]error:[/red] {message}")
    return code
