"""Shared pieces of the command line: exit codes, the database path, `--set` overrides."""

from __future__ import annotations

import os
import tomllib
from enum import IntEnum
from pathlib import Path
from typing import Any

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "CliInterrupted",
    "CliUsageError",
    "ExitCode",
    "parse_overrides",
    "resolve_db_path",
]

DB_ENV = "TOPOLOGY_STUDIO_DB"
"""Environment variable naming the run database when `--db` is not given."""

DEFAULT_DB = Path("data") / "runs.duckdb"
"""The default run database, relative to the current directory (git-ignored)."""


class ExitCode(IntEnum):
    """The command line's exit codes."""

    OK = 0
    """Success."""
    FAILED = 1
    """A search or evaluation ran and failed, or an unexpected internal error."""
    USAGE = 2
    """A bad input: arguments, problem, dataset, spec, budget, store."""
    INTERRUPTED = 130
    """Ctrl-C."""


class CliUsageError(Exception):
    """A bad command line (printed as one line, exit code 2)."""


class CliInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a command that left something to continue: printed as the usual
    `error: interrupted` line, then `hint` (e.g. how to resume the run), exit code 130.

    Args:
        hint: one line saying what to do next.
    """

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


def resolve_db_path(db: str | None) -> Path:
    """`--db`, else `$TOPOLOGY_STUDIO_DB`, else `data/runs.duckdb` in the current directory."""
    if db:
        return Path(db).expanduser()
    env = os.environ.get(DB_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return DEFAULT_DB


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`["gold.validation_size=50", "search.strategy=random"]` -> `{"gold.validation_size": 50,
    "search.strategy": "random"}`. A value is read as a TOML value (numbers, booleans, quoted
    strings, arrays), else taken as plain text.

    Raises:
        CliUsageError: an item without `=` or with an empty field.
    """
    out: dict[str, Any] = {}
    for item in items:
        field, sep, value = item.partition("=")
        field = field.strip()
        if not sep or not field:
            raise CliUsageError(f"--set expects FIELD=VALUE, got {item!r}")
        out[field] = _toml_value(value.strip())
    return out
