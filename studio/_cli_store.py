"""Opening the run store for a command: a clear error when there is none, and a read-only
view from the run journals when another process (the studio) holds the database file."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from core.storage import RunStore, journal_dir, open_store
from studio._cli_common import DB_ENV, CliUsageError
from studio._cli_output import Output

__all__ = ["open_cli_store"]


@contextmanager
def open_cli_store(db_path: Path, out: Output, *, must_exist: bool = True) -> Generator[RunStore]:
    """The run store at `db_path` for one command, closed afterwards.

    When another process holds the file, the store is a read-only view built from the run
    journals (a note on stderr says so): every run query works, writes raise `StoreError`.

    Raises:
        CliUsageError: `must_exist` and there is neither a database nor a journal folder.
        StoreError: the file is not a run store (or from a newer schema version).
    """
    if must_exist and not db_path.exists() and not journal_dir(db_path).is_dir():
        raise CliUsageError(
            f"no run database at {db_path}: run 'topology-studio search PROBLEM' first, or "
            f"point --db (or ${DB_ENV}) at one"
        )
    store = open_store(db_path, on_busy="journals")
    if store.read_only:
        out.note(
            f"note: {db_path} is held by another process (the studio?); answering from the run "
            f"journals in {journal_dir(db_path)}"
        )
    try:
        yield store
    finally:
        store.close()
