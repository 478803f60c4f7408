"""The typer app every command module registers on, and the one way a command line runs:
user errors exit 2 with one line and no traceback."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from dlbench.errors import EXIT_USER_ERROR
from dlbench.startup import fork_safe_cuda_checks, leave, set_cuda_work_queues
from dlbench.subprocesses import die_with_parent


def _plain_help() -> None:
    """typer (0.29) shows `<bool>` beside every flag, a value no flag takes, and wraps a
    required argument's own metavar in braces on the usage line (`{[BASELINE]
    CANDIDATE}...`): flags show no type, and a metavar is shown as written."""
    core = getattr(typer, "core", None)
    option, argument = (getattr(core, n, None) for n in ("TyperOption", "TyperArgument"))
    if option is not None and hasattr(option, "display_type_rich"):
        shown = option.display_type_rich

        def display_type_rich(self, ctx):
            return None if getattr(self, "is_flag", False) else shown(self, ctx)

        option.display_type_rich = display_type_rich
    if argument is not None and hasattr(argument, "_usage_display_name"):
        usage = argument._usage_display_name
        argument._usage_display_name = lambda self: self.metavar or usage(self)


_plain_help()
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="True, comparable deep-learning benchmarks: one row per run in a CSV.",
    pretty_exceptions_enable=False,
)


def _show_version(given: bool) -> None:
    if given:
        import dlbench
        from dlbench.provenance import code_identity

        print(f"dlbench {dlbench.__version__} (commit {code_identity().short})")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="The release and commit."
        ),
    ] = False,
) -> None:
    """True, comparable deep-learning benchmarks: one row per run in a CSV."""


# Parsing errors: typer up to 0.15 raises click's own exceptions, typer 0.16 and later those of
# the click it bundles; both expose ClickException as a base of the BadParameter they export.
_PARSE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_NO_ARGS = "NoArgsIsHelpError"  # `dlbench` alone: the help is the answer, not an error


def run_command(args: list[str] | None = None) -> int:
    """One command line (default: this process's) to its exit code: user errors and parse
    errors 2 with one line and no traceback, signals 128 + the signal."""
    from dlbench.startup import bad_launcher_variable, mark_command_start

    wrong = bad_launcher_variable()
    if wrong:  # before Lightning's import, which reads some of them
        print(f"error: {wrong}", file=sys.stderr)
        return EXIT_USER_ERROR
    from dlbench.guard import guarded, report

    mark_command_start(fresh_process=args is None)

    def call() -> int:
        try:
            code = app(args=args, standalone_mode=False)
        except typer.Exit as exc:
            return exc.exit_code
        except typer.Abort:
            return 130
        except _PARSE_ERROR as exc:
            if type(exc).__name__ == _NO_ARGS:
                exc.show()
                return 0
            command = " ".join(["dlbench", *_command_words(exc)])
            return report(f"{exc.format_message()} (see `{command} --help`)", EXIT_USER_ERROR)
        return code if isinstance(code, int) else 0

    return guarded(call)


def _command_words(exc: Exception) -> list[str]:
    """The command the parse error belongs to (`train`), from click's context if it has one."""
    ctx = getattr(exc, "ctx", None)
    name = getattr(ctx, "info_name", None)
    return [name] if name and getattr(ctx, "parent", None) is not None else []


def main() -> None:
    """Console entry point."""
    die_with_parent()
    set_cuda_work_queues()
    fork_safe_cuda_checks()
    for stream in (sys.stdout, sys.stderr):  # an ASCII terminal gets '?' for '·', not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    leave(run_command())
