"""--tag KEY=VALUE: labels recorded as columns of their own, never over a column the run
writes."""

from __future__ import annotations

from dlbench.errors import UserError
from dlbench.results.schema import check_tag


def parse_tags(tags: list[str] | None) -> dict[str, str]:
    """--tag KEY=VALUE pairs as row columns."""
    pairs = {}
    for item in tags or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--tag: invalid value {item!r}; expected KEY=VALUE")
        check_tag(key)
        if key in pairs:  # the row would keep one value and lose the other without a word
            raise UserError(f"--tag: {key} given twice ({pairs[key]!r} and {value!r})")
        pairs[key] = value
    return pairs
