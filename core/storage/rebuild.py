"""`rebuild_store`: a new database file restored from the run journals, the old one kept aside.

The run journals (`<db>.journals/<run_id>.jsonl`) hold every event of every search, so a damaged
database (a bad block checksum: `StoreCorruptError`) loses no run: the rebuild moves the
damaged file (and its write-ahead log) aside, never deleting it, creates a fresh store at the
same path and ingests every journal into it. A journal is ingested in full (the fresh store has
no read offsets), so the rebuilt store holds the same runs, candidates, per-example results and
fronts as before.

What a rebuild cannot restore, because it lived only in the database: proposals, approvals and
the topology versions the editor saved (`RunStore.record_proposal`, `record_approval`,
`save_topology_version`), and runs recorded without a journal (`record_events` called directly).
Every version an `apply` wrote is still in its topology registry, with its approval in
`v*.meta.json`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from core.errors import (
    SchemaVersionError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreReadOnlyError,
)
from core.storage.duckdb_store import NOT_RESTORED, DuckDBRunStore
from core.storage.journal import JOURNAL_SUFFIX, journal_dir

__all__ = ["NOT_RESTORED", "RebuildReport", "rebuild_store"]


@dataclass(frozen=True, slots=True)
class RebuildReport:
    """What `rebuild_store` did.

    Attributes:
        path: the rebuilt database file.
        kept_as: where the old file was moved (None when there was no file).
        run_ids: the runs the rebuilt store holds, sorted.
        n_journals: journal files found.
        n_events: events ingested.
        failed: `(journal file name, error)` for each journal that could not be ingested.
        skipped_lines: journal lines that were not valid events (not stored, as in `ingest`).
    """

    path: str
    kept_as: str | None
    run_ids: tuple[str, ...]
    n_journals: int
    n_events: int
    failed: tuple[tuple[str, str], ...]
    skipped_lines: int


def _healthy(path: str) -> bool:
    """Whether the store at `path` opens and every row of it reads back.

    Raises:
        StoreBusyError: another process holds the file (a rebuild would lose its writes).
        StoreReadOnlyError: the file cannot be written (neither can a rebuilt one).
        SchemaVersionError: a newer schema (a newer Topology Studio can open it: keep it).
    """
    try:
        store = DuckDBRunStore(path, auto_ingest=False)
    except (StoreBusyError, StoreReadOnlyError, SchemaVersionError):
        raise
    except StoreError:  # damaged, or not a run store at all: rebuild it
        return False
    try:
        store.check()
    except StoreCorruptError:
        return False
    finally:
        store.close()
    return True


def rebuild_store(path: str | os.PathLike[str], *, force: bool = False) -> RebuildReport:
    """Rebuild the database file at `path` from its run journals.

    The old file is renamed to `<path>.damaged-<YYYYmmdd-HHMMSS>` (its `.wal` beside it too),
    a fresh store is created at `path`, and every journal in `<path>.journals` is ingested.

    Args:
        path: the database file.
        force: rebuild even a store that opens and reads fine (it loses what a rebuild cannot
            restore, `NOT_RESTORED`); without it such a store is refused.

    Returns:
        The report (runs restored, where the old file went, journals that failed).

    Raises:
        StoreError: the store is healthy and `force` is False, or there are no journals to
            rebuild from (nothing is moved then).
        StoreBusyError: another process holds the file (close it first; nothing is moved).
        StoreReadOnlyError: the file or its folder cannot be written.
        SchemaVersionError: the file is of a newer schema version (nothing is moved).
    """
    db = os.fspath(path)
    journals = journal_dir(db)
    names = (
        sorted(n for n in os.listdir(journals) if n.endswith(JOURNAL_SUFFIX))
        if journals.is_dir()
        else []
    )
    if not names:
        raise StoreError(f"no run journals in {journals} to rebuild {db} from; nothing was changed")
    kept_as: str | None = None
    if os.path.exists(db):
        if _healthy(db) and not force:
            raise StoreError(
                f"the run store {db} opens and reads fine: a rebuild would drop its "
                f"{NOT_RESTORED.split(' (', 1)[0]}; nothing was changed (add --force to "
                "rebuild it anyway)"
            )
        kept_as = f"{db}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        n = 1
        while os.path.exists(kept_as):
            n += 1
            kept_as = f"{db}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{n}"
        try:
            os.replace(db, kept_as)
            if os.path.exists(f"{db}.wal"):
                os.replace(f"{db}.wal", f"{kept_as}.wal")
        except OSError as exc:
            raise StoreError(f"cannot move the damaged run store {db} aside: {exc}") from exc
    store = DuckDBRunStore(db, auto_ingest=False)
    try:
        report = store.ingest()
        # a journal holds the run it is named after
        candidates = (n.removesuffix(JOURNAL_SUFFIX) for n in names)
        run_ids = tuple(r for r in candidates if store.get_run(r) is not None)
    finally:
        store.close()
    return RebuildReport(
        path=db,
        kept_as=kept_as,
        run_ids=run_ids,
        n_journals=len(names),
        n_events=report.n_events,
        failed=tuple(report.failed),
        skipped_lines=report.skipped_lines,
    )
