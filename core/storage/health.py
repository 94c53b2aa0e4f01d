"""A run's latest worker-health snapshot, beside its journal.

While a search runs on a remote executor, its driver snapshots the workers' health every few
seconds and after each evaluated candidate (`core.search.subscribers.HealthRecorder`); the
studio's Runs page shows the latest for a running run. The search and the studio are often
different processes, and the studio may hold the database file (DuckDB: one process per file),
so the driver writes a file, as it writes its journal, never the database:
`<db path>.journals/<run_id>.health.json` (`health_path`), one `HealthSnapshot` as JSON.

Bounded: each snapshot replaces the last (written to a temporary file, then `os.replace`d, so a
reader sees the old or the new one whole, never half); a run keeps one file, not a log. The
journal stays the run's history: health is live state, it is not replayed on resume and it does
not enter the database. The store's readers look only at `*.jsonl` in that folder, so the file
is no journal to them.

Reading is as careful as reading a journal (`core.storage._journal_files`): the run id is
checked, the file must be a regular file in the journals folder, opened without blocking, at most
`MAX_HEALTH_BYTES`; an unreadable or damaged file reads as no snapshot.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pydantic

from core.storage._journal_files import JournalRefusedError, journal_refusal, open_journal
from core.storage.journal import check_run_id, journal_dir
from core.vocab.health import HealthSnapshot

__all__ = ["HEALTH_SUFFIX", "MAX_HEALTH_BYTES", "health_path", "read_health", "write_health"]

HEALTH_SUFFIX = ".health.json"
"""A health file's suffix; its name is the run id and this."""

MAX_HEALTH_BYTES = 1_000_000
"""A larger health file is not read (about 5,000 workers' rows)."""


def health_path(db_path: str | os.PathLike[str], run_id: str) -> Path:
    """`<db path>.journals/<run_id>.health.json`.

    Raises:
        StoreError: `run_id` is not a valid run id (`core.storage.journal.check_run_id`).
    """
    return journal_dir(db_path) / f"{check_run_id(run_id)}{HEALTH_SUFFIX}"


def write_health(db_path: str | os.PathLike[str], snapshot: HealthSnapshot) -> Path:
    """Replace the run's health file with `snapshot` (atomically); returns its path.

    Raises:
        StoreError: an invalid run id.
        OSError: the journals folder cannot be written.
    """
    path = health_path(db_path, snapshot.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(snapshot.model_dump_json(), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def read_health(db_path: str | os.PathLike[str], run_id: str) -> HealthSnapshot | None:
    """The run's latest health snapshot, or None when there is none (a local run, a run that
    has not taken one yet) or it cannot be read (not a regular file, too large, damaged, for
    another run).

    Raises:
        StoreError: `run_id` is not a valid run id.
    """
    path = health_path(db_path, run_id)
    if journal_refusal(path.parent, path.name) is not None:
        return None
    try:
        with open_journal(path) as fh:
            data = fh.read(MAX_HEALTH_BYTES + 1)
    except (OSError, JournalRefusedError):  # missing, or not a regular file
        return None
    if len(data) > MAX_HEALTH_BYTES:
        return None
    try:
        snapshot = HealthSnapshot.model_validate_json(data)
    except pydantic.ValidationError:
        return None
    return snapshot if snapshot.run_id == run_id else None
