"""A finished search as a seed library: `seed_library_from_run(store, run_id)`.

The seed library is the run's valid validation Pareto front (runtime contract 10): the rows of
`store.archive(run_id, split="validation")` with `on_front` (which implies `valid`; a row whose
results equal an earlier candidate's, `same_as`, is never on the front, so each distinct
topology appears once), each as a `LibraryEntry` holding the spec stored under its
`spec_hash` and the figures the search measured on the validation split: `accuracy` (share
of problems scored right, in [0, 1]), `cost_usd` (mean USD per problem) and `latency_ms` (mean
ms per problem). The label is `"candidate <idx>"`, with `" (best)"` for the run's best
(`is_best`). Entries come in `candidate_idx` order.

Library files (`topology-studio library RUN --out lib.json`) hold `library_to_json`'s JSON and
are read back with `load_library`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from pydantic import TypeAdapter

from core.errors import TopologyStudioError
from core.ir import parse_topology
from core.runtime_design.designer import LibraryEntry
from core.storage.base import RunStore

__all__ = [
    "LIBRARY_FORMAT",
    "SeedLibraryError",
    "library_to_json",
    "load_library",
    "seed_library_from_run",
]

LIBRARY_FORMAT = "topology-studio/seed-library/v1"
"""The `format` field of a library file."""

_ENTRIES: TypeAdapter[list[LibraryEntry]] = TypeAdapter(list[LibraryEntry])


class SeedLibraryError(TopologyStudioError):
    """A run cannot be made into a seed library, or a library file cannot be read."""


def _figure(row: dict[str, Any], name: str, where: str) -> float:
    value = row.get(name)
    try:
        number = float(value)  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise SeedLibraryError(f"{where}: {name} is not a finite number ({value!r})")
    return number


def seed_library_from_run(store: RunStore, run_id: str) -> list[LibraryEntry]:
    """The validated Pareto front of run `run_id` as library entries (see the module docstring).

    Args:
        store: the run store (e.g. `DuckDBRunStore(path)`; read-only views work too).
        run_id: the run's exact id.

    Returns:
        One `LibraryEntry` per validation-front candidate, by `candidate_idx`: figures per
        problem (accuracy in [0, 1], cost in USD, latency in ms), label `"candidate N"`
        (`"candidate N (best)"` for the run's best).

    Raises:
        SeedLibraryError: the store has no such run; the run has no valid candidate on a
            validation front (not validated yet, or every candidate failed); a front
            candidate's spec is missing from the store or is not a valid spec; or its figures
            are not finite.
    """
    if store.get_run(run_id) is None:
        raise SeedLibraryError(f"no run {run_id!r} in the store")
    archive = store.archive(run_id, split="validation")
    records: list[dict[str, Any]] = (
        [] if archive.empty else cast("list[dict[str, Any]]", archive.to_dict("records"))  # pyright: ignore[reportUnknownMemberType]
    )
    rows = [r for r in records if bool(r["on_front"]) and bool(r["valid"])]
    if not rows:
        raise SeedLibraryError(
            f"run {run_id!r} has no valid candidate on a validation front (was it validated? "
            "a search validates its candidates on the validation split as it runs)"
        )
    rows.sort(key=lambda r: int(r["candidate_idx"]))
    entries: list[LibraryEntry] = []
    for r in rows:
        idx = int(r["candidate_idx"])
        where = f"run {run_id!r} candidate {idx}"
        spec_hash = str(r["spec_hash"])
        spec_json = store.get_spec(spec_hash)
        if spec_json is None:
            raise SeedLibraryError(f"{where}: its spec {spec_hash} is not in the store")
        try:
            spec = parse_topology(spec_json)
        except Exception as exc:
            raise SeedLibraryError(f"{where}: its stored spec is not valid: {exc}") from exc
        entries.append(
            LibraryEntry(
                spec=spec,
                accuracy=_figure(r, "accuracy", where),
                cost_usd=_figure(r, "cost_usd", where),
                latency_ms=_figure(r, "latency_ms", where),
                label=f"candidate {idx}" + (" (best)" if bool(r["is_best"]) else ""),
            )
        )
    return entries


def library_to_json(entries: Sequence[LibraryEntry], *, run_id: str | None = None) -> str:
    """A library file's text: `{"format": LIBRARY_FORMAT, "run_id": ..., "entries": [...]}`,
    each entry `LibraryEntry`'s JSON (`spec`, `accuracy`, `cost_usd`, `latency_ms`, `label`),
    indented by 2, ending in a newline."""
    document = {
        "format": LIBRARY_FORMAT,
        "run_id": run_id,
        "entries": _ENTRIES.dump_python(list(entries), mode="json"),
    }
    return json.dumps(document, indent=2) + "\n"


def load_library(path: str | Path) -> list[LibraryEntry]:
    """The entries of a library file written by `library_to_json` (or a bare JSON list of
    entries).

    Raises:
        SeedLibraryError: the file cannot be read, is not JSON, has another `format`, holds no
            entries, or an entry is invalid (its index and the field named).
    """
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SeedLibraryError(f"cannot read the library {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SeedLibraryError(f"the library {path} is not JSON: {exc}") from exc
    if isinstance(document, dict):
        fmt = document.get("format")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if fmt != LIBRARY_FORMAT:
            raise SeedLibraryError(
                f"the library {path} has format {fmt!r}, expected {LIBRARY_FORMAT!r}"
            )
        items = document.get("entries")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    else:
        items = document
    if not isinstance(items, list) or not items:
        raise SeedLibraryError(f"the library {path} holds no entries (a non-empty list)")
    entries: list[LibraryEntry] = []
    for i, item in enumerate(items):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        try:
            entries.append(LibraryEntry.model_validate(item))
        except Exception as exc:
            first = str(exc).splitlines()
            detail = " ".join(x.strip() for x in first[1:3]) if len(first) > 1 else str(exc)
            raise SeedLibraryError(
                f"the library {path}: entries[{i}] is invalid: {detail}"
            ) from exc
    return entries
