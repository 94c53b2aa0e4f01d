"""Turning Pydantic validation errors into `ProblemError`s that name the file and the field."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from core.agents.rate_budget import ProviderLimit
from core.errors import ProblemError

__all__ = ["field_name", "problem_error_from_validation"]

_MAX_INPUT_CHARS = 60

_RATE_LIMIT_FIELDS = tuple(ProviderLimit.model_fields)
"""The keys of a `[rate_limits.<provider>]` table, named when an unknown one is refused."""


def field_name(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """A Pydantic error location as a dotted field name: `("search", "seed")` -> `"search.seed"`,
    list positions as `[i]`: `("search", "allowed_step_kinds", 0)` ->
    `"search.allowed_step_kinds[0]"`."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_INPUT_CHARS else text[:_MAX_INPUT_CHARS] + "…"


def problem_error_from_validation(
    exc: ValidationError,
    *,
    file: Path | str,
    prefix: str = "",
    overridden: frozenset[str] = frozenset(),
) -> ProblemError:
    """One `ProblemError` for a validation failure: the first error's field names the field, and
    the message lists every error (`field: message (got value)`).

    Args:
        exc: the validation error.
        file: the file the data came from.
        prefix: dotted prefix for the locations (e.g. `"params"`).
        overridden: dotted fields whose value came from overrides, marked as such in the message.
    """
    items: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        name = field_name(tuple(err["loc"]), prefix)
        msg = err["msg"]
        if err["type"] not in ("missing", "extra_forbidden"):
            msg += f" (got {_show(err.get('input'))})"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field (not part of the format; check the spelling)"
            if len(err["loc"]) == 3 and err["loc"][0] == "rate_limits":
                msg += f"; a rate limit's fields are {', '.join(_RATE_LIMIT_FIELDS)}"
        if name in overridden:
            msg += " [value from overrides]"
        items.append((name, msg))
    first_field = items[0][0] if items else (prefix or None)
    if len(items) == 1:
        message = items[0][1]
    else:
        message = f"{len(items)} invalid fields: " + "; ".join(f"{f}: {m}" for f, m in items)
    return ProblemError(message, file=str(file), field=first_field or None)
