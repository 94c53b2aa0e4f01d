"""`open_store`: one resolver from a path or URL to a run store."""

from __future__ import annotations

import os
from typing import Literal

from core.errors import StoreBusyError, StoreError, StoreReadOnlyError
from core.storage.base import RunStore
from core.storage.duckdb_store import DuckDBRunStore
from core.storage.journal import journal_dir

__all__ = ["open_store"]


def open_store(
    target: str | os.PathLike[str] | RunStore,
    *,
    on_busy: Literal["raise", "journals"] = "raise",
) -> RunStore:
    """Resolve a store from a path, a URL or a store.

    Accepted: a `RunStore` (returned as is); `":memory:"` or `"duckdb://:memory:"` (in
    memory); `"duckdb:///abs/path.duckdb"` or `"duckdb://rel/path.duckdb"`; any other string
    or path is a DuckDB file path.

    Args:
        target: what to open.
        on_busy: when the file cannot be opened for writing: `"raise"` (`StoreBusyError`,
            `StoreReadOnlyError`) or `"journals"`, a read-only view. When another process
            holds the file, the view is answered from the run journals (runs, archives,
            per-example results; no proposals or topology versions); when the file system
            refuses writes (a read-only mount, no permission), it is an in-memory copy of the
            file kept live from the journals (`DuckDBRunStore.read_only_copy`: everything the
            file holds), or the journals alone when there is no file. `read_only_reason` says
            which. Use `"journals"` for read-only commands such as the CLI's `runs` and `show`.

    Raises:
        StoreBusyError: the file is held by another process and `on_busy="raise"`.
        StoreReadOnlyError: the file (or its folder) cannot be written and `on_busy="raise"`.
        StoreCorruptError: the file is damaged (the message says how to rebuild it).
        SchemaVersionError: the file is from a newer schema version.
        StoreError: an unknown URL scheme, or a file that is not a run store.
    """
    if isinstance(target, RunStore):
        return target
    text = os.fspath(target)
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme != "duckdb":
            raise StoreError(
                f"unknown run store URL scheme {scheme!r} in {text!r}; use a file path or "
                "duckdb://<path>"
            )
        text = rest
    if text in ("", ":memory:"):
        return DuckDBRunStore(":memory:")
    try:
        return DuckDBRunStore(text)
    except StoreBusyError:
        if on_busy == "journals":
            store = DuckDBRunStore.from_journals(journal_dir(text))
            store.read_only_reason = "the database file is held by another process"
            return store
        raise
    except StoreReadOnlyError as exc:
        if on_busy == "journals":
            return DuckDBRunStore.read_only_copy(text, reason=str(exc))
        raise
