"""The DuckDB run store's events and journals: recording events, ingesting run journals (in
steps of `INGEST_CHUNK_BYTES`, refusing a damaged one) and the ingest errors
(`DuckDBRunStore` inherits `JournalsMixin`; the rules are in `core.storage.duckdb_store`)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import duckdb

from core.errors import (
    StoreCorruptError,
    StoreError,
)
from core.storage import _ingest, queries
from core.storage._journal_files import JournalRefusedError, journal_refusal, open_journal
from core.storage.journal import JOURNAL_SUFFIX, encode_event
from core.storage.records import (
    IngestError,
    IngestReport,
)
from core.vocab.events import SearchEvent

if TYPE_CHECKING:
    pass  # pyright: ignore[reportMissingTypeStubs]
from core.storage._duckdb_files import (
    CORRUPT,
    DIRECT_BYTES,
    GLOB_CHARS,
    INGEST_CHUNK_BYTES,
    corrupt_message,
    ingest_memory,
    tracked,
)

_T = TypeVar("_T")

_log = logging.getLogger("core.storage.duckdb_store")
"""The store's logger (a shrunk, rewritten or refused journal is logged there)."""


class JournalsMixin:
    """`DuckDBRunStore`'s events and journals (see `core.storage.duckdb_store`)."""

    _path: str
    _journal_dir: Path | None
    _offsets: dict[str, int]
    _write_lock: threading.RLock

    if TYPE_CHECKING:

        def _enter(self) -> None: ...

        def _leave(self) -> None: ...

        def _cur(self) -> duckdb.DuckDBPyConnection: ...

        def _writable(self) -> duckdb.DuckDBPyConnection: ...

        @staticmethod
        def _in_transaction(cur: duckdb.DuckDBPyConnection, fn: Callable[[], _T]) -> _T: ...

        def _refresh(self, journals: Sequence[str] | None = None) -> None: ...

    @tracked
    def record_events(self, events: Iterable[SearchEvent]) -> int:
        chunk = b"".join(encode_event(e) + b"\n" for e in events)
        if not chunk:
            return 0
        with self._write_lock:
            cur = self._writable()
            try:
                delta = _ingest.load_delta(cur, chunk)
                if delta.errors:
                    _, why, head = delta.errors[0]
                    raise StoreError(
                        f"recording events failed (nothing stored): {why}; the event: {head}"
                    )
                return self._in_transaction(cur, lambda: _ingest.apply_delta(cur))
            except duckdb.Error as exc:
                raise StoreError(f"recording events failed (nothing stored): {exc}") from exc

    def _journal_files(self) -> list[Path]:
        if self._journal_dir is None:
            return []
        try:
            names = sorted(os.listdir(self._journal_dir))
        except FileNotFoundError:
            return []
        return [self._journal_dir / n for n in names if n.endswith(JOURNAL_SUFFIX)]

    def _store_delta(
        self, cur: duckdb.DuckDBPyConnection, name: str, start: int, end: int, delta: _ingest.Delta
    ) -> int:
        """Store a journal's loaded delta and its new offset `end` (inside a transaction).

        Returns:
            How many events were new.
        """
        n = _ingest.apply_delta(cur, journal=name)
        _ingest.record_errors(cur, name, start, delta)
        cur.execute(
            "INSERT INTO ingest_offsets VALUES (?, ?, ?) ON CONFLICT (journal) DO UPDATE "
            "SET byte_offset = excluded.byte_offset, updated_at = excluded.updated_at",
            [name, end, time.time()],
        )
        return n

    def _journal_size(self, path: Path) -> int:
        """A journal's size now, bytes (its writer may append right after)."""
        return path.stat().st_size

    @staticmethod
    def _line_ends_at(path: Path, offset: int) -> bool:
        """Whether the byte before `offset` is a newline (where an ingest left off)."""
        with open_journal(path) as fh:
            fh.seek(offset - 1)
            return fh.read(1) == b"\n"

    def _ingest_journal(self, cur: duckdb.DuckDBPyConnection, path: Path) -> tuple[int, int]:
        """Ingest one journal's new complete lines: `(new events, skipped lines)`.

        Raises:
            JournalRefusedError: the path leads outside the journals folder or to anything but
                a regular file (never opened then; see `core.storage._journal_files`).
        """
        name = path.name
        if self._journal_dir is not None:
            given = name if path.parent == self._journal_dir else str(path)
            why = journal_refusal(self._journal_dir, given)
            if why is not None:
                raise JournalRefusedError(why)
        run_id = name.removesuffix(JOURNAL_SUFFIX)  # a journal holds the run it is named after
        size = self._journal_size(path)
        start = self._offsets.get(name, 0)
        if size == start:
            return 0, 0
        if size < start:
            _log.warning("run journal %s shrank; re-reading it from the start", name)
            start = 0
        elif start > 0 and not self._line_ends_at(path, start):
            # an offset is always a line end; not any more: the file was rewritten
            _log.warning("run journal %s was rewritten; re-reading it from the start", name)
            start = 0
        total = skipped = 0
        while start < size:  # one bounded chunk of complete lines at a time
            delta: _ingest.Delta | None = None
            chunk = b""
            end = size
            if (
                start == 0
                and DIRECT_BYTES <= size <= INGEST_CHUNK_BYTES
                and not GLOB_CHARS.search(str(path))
            ):
                with open_journal(path) as fh:
                    fh.seek(size - 1)
                    ends_complete = fh.read(1) == b"\n"
                if ends_complete and _ingest.load_delta_from_file(cur, path, run_id=run_id):
                    delta = _ingest.Delta()
            if delta is None:
                with open_journal(path) as fh:
                    fh.seek(start)
                    chunk = _ingest.split_complete_lines(
                        fh.read(min(size - start, INGEST_CHUNK_BYTES))
                    )
                    if not chunk and size - start > INGEST_CHUNK_BYTES:  # one line longer
                        fh.seek(start)
                        chunk = _ingest.split_complete_lines(fh.read(size - start))
                if not chunk:
                    break
                end = start + len(chunk)
            with ingest_memory(cur, 0 if delta is not None else end - start):
                if delta is None:
                    delta = _ingest.load_delta(cur, chunk, run_id=run_id)
                    if delta.errors:  # number the skipped lines (rare: prefix read only then)
                        delta.first_line = 1 + (_ingest.lines_before(path, start) if start else 0)
                loaded, begin = delta, start
                total += self._in_transaction(
                    cur, partial(self._store_delta, cur, name, begin, end, loaded)
                )
            skipped += len(loaded.errors)
            self._offsets[name] = start = end
        return total, skipped

    @tracked
    def ingest(self) -> IngestReport:
        report = self._ingest_paths(self._journal_files())
        self._record_damage()
        return report

    def _damaged(self, cur: duckdb.DuckDBPyConnection) -> dict[str, str]:
        """Run id -> why its stored `journal` is refused (`_journal_files.journal_refusal`:
        outside the journals folder, or not a regular file), for the runs listed `damaged`."""
        if self._journal_dir is None:
            return {}
        rows = cur.execute(
            "SELECT run_id, journal FROM runs WHERE journal IS NOT NULL ORDER BY run_id"
        ).fetchall()
        out: dict[str, str] = {}
        for run_id, journal in rows:
            why = journal_refusal(self._journal_dir, str(journal))
            if why is not None:
                out[str(run_id)] = why
        return out

    def _record_refusal(self, cur: duckdb.DuckDBPyConnection, journal: str, error: str) -> None:
        """Record a refused journal in `ingest_errors` once: byte 0, no line read."""
        seen = cur.execute(
            "SELECT 1 FROM ingest_errors WHERE journal = ? AND error = ? LIMIT 1", [journal, error]
        ).fetchone()
        if seen is None:
            cur.execute(
                "INSERT INTO ingest_errors (journal, byte_offset, error, line_head, recorded_at, "
                "line_no) VALUES (?, 0, ?, '', ?, NULL)",
                [journal, error, time.time()],
            )

    def _record_damage(self) -> None:
        """Record, once each, why a run's stored journal is refused, under the run's own
        journal name (`<run_id>.jsonl`, so `list_ingest_errors(run_id)` finds it)."""
        with self._write_lock:
            cur = self._cur()
            try:
                for run_id, why in self._damaged(cur).items():
                    self._record_refusal(cur, run_id + JOURNAL_SUFFIX, why)
            except duckdb.Error as exc:  # e.g. a read-only connection: listed damaged anyway
                _log.warning("recording a refused run journal failed: %s", exc)

    def _ingest_paths(self, paths: Iterable[Path]) -> IngestReport:
        """Ingest these journals' new complete lines (`ingest` on a list of files)."""
        n_events = n_journals = skipped = 0
        failed: list[tuple[str, str]] = []
        with self._write_lock:
            cur = self._cur()
            rows = cur.execute("SELECT journal, byte_offset FROM ingest_offsets").fetchall()
            self._offsets = {str(r[0]): int(r[1]) for r in rows}  # another store may have moved
            for path in paths:
                before = self._offsets.get(path.name)
                try:
                    n, bad = self._ingest_journal(cur, path)
                except JournalRefusedError as exc:
                    self._record_refusal(cur, path.name, str(exc))
                    failed.append((path.name, str(exc)))
                    continue
                except duckdb.Error as exc:
                    if CORRUPT.search(str(exc)):  # not this journal's fault: every one fails
                        raise StoreCorruptError(
                            corrupt_message(self._path, exc), path=self._path
                        ) from exc
                    failed.append((path.name, f"{type(exc).__name__}: {exc}"))
                    continue
                except (OSError, StoreError) as exc:
                    failed.append((path.name, f"{type(exc).__name__}: {exc}"))
                    continue
                if self._offsets.get(path.name) != before:
                    n_journals += 1
                n_events += n
                skipped += bad
        return IngestReport(
            n_events=n_events, n_journals=n_journals, skipped_lines=skipped, failed=failed
        )

    @tracked
    def list_ingest_errors(self, run_id: str | None = None) -> list[IngestError]:
        self._refresh()
        journal = None if run_id is None else run_id + JOURNAL_SUFFIX
        return [
            IngestError(
                run_id=str(name).removesuffix(JOURNAL_SUFFIX),
                journal=str(name) if self._journal_dir is None else str(self._journal_dir / name),
                line_no=None if line_no is None else int(line_no),
                byte_offset=int(offset),
                error=str(error),
                line_head=str(head),
                recorded_at=float(at),
            )
            for name, line_no, offset, error, head, at in queries.ingest_errors(
                self._cur(), journal
            )
        ]
