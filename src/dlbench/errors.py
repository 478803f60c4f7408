"""One exception type for every mistake a user can make, so the CLI can print it and exit 2."""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Iterable

EXIT_OK = 0
EXIT_FAILED = 1  # a sweep with failed points, a regression in compare: CI must see it
EXIT_USER_ERROR = 2
EXIT_OOM = 3  # the run did not fit; a row with status=oom was recorded
EXIT_INVALID = 4  # --strict: the row was recorded, and its verdict is invalid
EXIT_INCONCLUSIVE = 5  # compare, gate: the evidence cannot tell a change (none is slower)


def exception_line(exc: BaseException) -> str:
    """`TypeName: first line of its message`: an exception as a row's `error` or a warning."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def one_line(message: str) -> str:
    """A message on one line: whatever a layer below wrote over several, joined."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def warn(message: str) -> None:
    """One `warning:` line on stderr: something that does not stop the command (a row that
    does not count), said where it was found."""
    print(f"warning: {one_line(message)}", file=sys.stderr, flush=True)


class UserError(Exception):
    """A bad flag, value or file that the user can fix; printed without a traceback, exit code 2."""


def invalid(flag: str, value: object, allowed: str) -> UserError:
    """Build the standard message: the flag, the bad value and what is allowed."""
    return UserError(f"{flag}: invalid value {value!r}; {allowed}")


def unknown_choice(flag: str, value: str, choices: Iterable[str]) -> UserError:
    """Unknown name: suggest the nearest valid ones and list them all."""
    choices = sorted(choices)
    near = difflib.get_close_matches(value, choices, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    listing = (
        ", ".join(choices) if len(choices) <= 40 else f"{len(choices)} names, see `dlbench models`"
    )
    return UserError(f"{flag}: unknown value {value!r}.{hint} Valid: {listing}")


# The longest stretch of time any flag may give: a week (a collective timeout of a googol of
# seconds overflowed below with a traceback; a negative timeout wrote rows that said so).
MAX_SECONDS = 7 * 24 * 3600.0


def check_seconds(flag: str, value: float | None, zero: bool = False) -> None:
    """A number of seconds: finite, positive (or 0 where `zero`), at most MAX_SECONDS."""
    if value is None:
        return
    check_finite(flag, value)
    if value < 0 or (value == 0 and not zero):
        raise invalid(flag, value, f"must be {'0 or more' if zero else 'positive'} seconds")
    if value > MAX_SECONDS:
        raise invalid(flag, value, f"must be at most {MAX_SECONDS:,.0f} seconds (a week)")


def check_finite(flag: str, value: float | None) -> None:
    """NaN and infinity pass every `<` and `>` test the wrong way: refuse them by name."""
    if value is not None and not math.isfinite(value):
        raise invalid(flag, value, "must be a finite number")


def check_in_range(flag: str, value: float | None, most: float, zero: bool = False) -> None:
    """A finite number over 0 (or 0 itself, with `zero`) and at most `most` (None: not
    given)."""
    if value is None:
        return
    check_finite(flag, value)
    if not (value >= 0.0 if zero else value > 0.0) or value > most:
        floor = "0 or more" if zero else "over 0"
        raise invalid(flag, value, f"must be {floor} and at most {most:,g}")


def number_or_none(value: object) -> float | None:
    """A cell or a value read as a float, or None for a missing one (NaN included)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number
