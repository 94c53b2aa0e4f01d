"""Opening the run store for a command, and `store rebuild`.

A command gets a clear error when there is no store, and a read-only view when the database
file cannot be opened for writing: another process (the studio) holds it (the view is built
from the run journals), or its file system is read-only (an in-memory copy of the file, kept
live from the journals). A note on stderr says which.
"""

from __future__ import annotations

import argparse
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from core.storage import DuckDBRunStore, RunStore, journal_dir, open_store, rebuild_store
from core.storage.duckdb_store import NOT_RESTORED
from studio.cli._common import DB_ENV, CliUsageError, ExitCode, resolve_db_path
from studio.cli._output import Output

__all__ = ["cmd_store_rebuild", "open_cli_store", "read_only_note"]


def read_only_note(store: RunStore, db_path: Path) -> str:
    """The stderr note for a read-only view of `db_path` ("" when the store is writable)."""
    if not store.read_only:
        return ""
    reason = store.read_only_reason if isinstance(store, DuckDBRunStore) else ""
    if reason and "held by another process" not in reason:
        return (
            f"note: {db_path} is read-only here ({reason}); answering from a read-only copy "
            f"of it and the run journals in {journal_dir(db_path)} (nothing is written)"
        )
    return (
        f"note: {db_path} is held by another process (the studio?); answering from the run "
        f"journals in {journal_dir(db_path)}"
    )


@contextmanager
def open_cli_store(db_path: Path, out: Output, *, must_exist: bool = True) -> Generator[RunStore]:
    """The run store at `db_path` for one command, closed afterwards.

    When another process holds the file, the store is a read-only view built from the run
    journals; when the file system refuses writes (a read-only mount), it is a read-only copy
    of the file kept live from the journals. A note on stderr says so; every run query works,
    writes raise `StoreError`.

    Raises:
        CliUsageError: `must_exist` and there is neither a database nor a journal folder.
        StoreCorruptError: the file is damaged (the message names `store rebuild`).
        StoreError: the file is not a run store (or from a newer schema version).
    """
    if must_exist and not db_path.exists() and not journal_dir(db_path).is_dir():
        raise CliUsageError(
            f"no run database at {db_path}: run 'topology-studio search PROBLEM' first, or "
            f"point --db (or ${DB_ENV}) at one"
        )
    store = open_store(db_path, on_busy="journals")
    note = read_only_note(store, db_path)
    if note:
        out.note(note)
    try:
        yield store
    finally:
        store.close()


def cmd_store_rebuild(args: argparse.Namespace, out: Output) -> int:
    """`store rebuild [--force]`: restore a damaged database from its run journals.

    The damaged file is kept as `<db>.damaged-<time>`; what cannot be restored is said.
    """
    db = resolve_db_path(args.db)
    report = rebuild_store(db, force=bool(args.force))
    out.heading(f"Rebuilt {db} from {report.n_journals} run journal(s)")
    pairs: list[tuple[str, object]] = [
        ("runs restored", f"{len(report.run_ids)}: {', '.join(report.run_ids) or '-'}"),
        ("events", report.n_events),
        ("damaged file kept as", report.kept_as or "- (there was no file)"),
        ("not restored", NOT_RESTORED),
    ]
    if report.skipped_lines:
        pairs.append(("skipped lines", f"{report.skipped_lines} (not valid events, not stored)"))
    out.kv(pairs)
    for name, why in report.failed:
        out.error(f"journal {journal_dir(db) / name} was not restored: {why}")
    return ExitCode.FAILED if report.failed else ExitCode.OK
