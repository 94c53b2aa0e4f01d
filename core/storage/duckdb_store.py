"""`DuckDBRunStore`: the run store on one DuckDB file (or in memory).

Concurrency (the storage decision in `architecture.md`; field cases F9, F10):

- **One owner process per file.** DuckDB lets one process open a database file, and blocks even
  read-only opens from other processes while it is held. Opening a held file raises
  `StoreBusyError` naming the holder; `open_store(path, on_busy="journals")` then gives a
  read-only view built from the run journals instead (see `from_journals`), so the command
  line's `runs` and `show` still work while the studio holds the file.
- **A search never holds the file.** It writes its run journal (`core.storage.journal`) beside
  the database; the owner ingests journals (`ingest`), by default before every query
  (`auto_ingest`), so a search in another process is visible live and loses nothing.
- **Interrupted means the writer is gone.** A run stored as `running` whose journal no process
  holds (`journal_is_live`) is reported `interrupted`. The lock is probed after the query's
  ingest, so a search that wrote its `run_finished` and let go in between would look
  interrupted: a journal found free is read once more, and the run is interrupted only if it
  still reads `running` with its journal free (never for a run that is finishing).
- **A cursor per thread.** One DuckDB connection per store; each thread gets its own cursor
  (`connection.cursor()`, kept thread-locally), because a DuckDB connection must not be shared
  across threads. Writes are short transactions, one at a time (a lock per database file, shared
  by every store of this process on that file), so two threads never conflict on a row; reads
  run concurrently.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar, cast

import duckdb

from core.errors import (
    SchemaVersionError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreReadOnlyError,
)
from core.storage import _ingest, queries
from core.storage._journal_files import JournalRefusedError, journal_refusal, open_journal
from core.storage._schema import CURRENT_VERSION, ensure_schema, read_version
from core.storage.base import RunStore
from core.storage.journal import JOURNAL_SUFFIX, encode_event
from core.storage.journal import journal_dir as default_journal_dir
from core.storage.records import (
    IngestError,
    IngestReport,
    ProposalRecord,
    RunRecord,
    RunStatus,
    TopologyVersion,
)
from core.vocab.events import SearchEvent
from core.vocab.pareto import DEFAULT_OBJECTIVES, Objective

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

__all__ = ["NOT_RESTORED", "DuckDBRunStore", "corrupt_message"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

_DIRECT_BYTES = 1 << 20
"""A first ingest of a journal at least this big reads the file directly (no copy), even while
its writer appends: lines written after the file's size was taken are stored as well, and the
next ingest, which starts at that size, finds them already stored (the `(run_id, seq)` gate)."""
INGEST_CHUNK_BYTES = 1 << 20
"""The most of a journal one ingest step reads (whole lines; a single longer line is read
whole): DuckDB's memory for an ingest grows with what one `read_json` reads, so a journal of
any size is read in steps of this size (see `DUCKDB_CONFIG`). Ingesting a default search's
5.7 MB journal into a fresh store took, above the open store, +64 MiB of RSS in 4 MB steps,
+52 MiB in 1 MB steps and +45 MiB in 256 kB steps (0.7, 0.7 and 1.9 s; about 40 MiB of it is
the stored rows and their keys, whatever the step); at the end of a warm default search, +74
to +77 MiB in 4 MB steps against +59 to +62 in 1 MB steps. Measured 2026-12-05."""

_GLOB_CHARS = re.compile(r"[*?\[\]{}]")
"""Characters DuckDB's `read_json` takes as a glob pattern: such a path is never read directly."""

_HOLDER = re.compile(r"held in (?P<prog>.+?) \(PID (?P<pid>\d+)\)")


def _busy_message(path: str, exc: BaseException) -> str:
    m = _HOLDER.search(str(exc))
    who = f"process {m['pid']} ({m['prog']})" if m else "another process"
    return (
        f"the run store {path} is held by {who}: DuckDB lets only one process open a database "
        "file, even read-only. Close that process (the studio, or another topology-studio "
        "command) or use another --db file; to read its runs meanwhile, open a read-only view "
        "from the run journals with open_store(path, on_busy='journals') (the CLI's `runs` and "
        f"`show` do this). A search does not need the file: it writes its journal under "
        f"{default_journal_dir(path)} and the holder picks it up."
    )


_BUSY = re.compile(r"Could not set lock|Conflicting lock", re.IGNORECASE)
"""DuckDB's words for a file another process holds (a corrupt "block" is not a "lock")."""

_CORRUPT = re.compile(r"Corrupt database file|does not match stored checksum", re.IGNORECASE)
"""DuckDB's words for a damaged database file (a bad block checksum). A file that is not a
DuckDB file at all ("not a valid DuckDB database file") is reported as such instead: it may be
any file a `--db` pointed at by mistake."""

_READ_ONLY = re.compile(r"Read-only file system|Permission denied", re.IGNORECASE)
"""DuckDB's words for a file (or folder) the file system will not let it write."""


NOT_RESTORED = (
    "proposals, approvals and topology versions saved in the editor (they lived only in the "
    "database; each applied version and its approval is still in the topology registry's "
    "v*.meta.json files)"
)
"""What a rebuild from the journals cannot bring back (`core.storage.rebuild`)."""


def corrupt_message(path: str, exc: BaseException | str) -> str:
    """The one line for a damaged database file: what DuckDB said, and how to recover."""
    return (
        f"the run store {path} is damaged ({exc}). The run journals in "
        f"{default_journal_dir(path)} are intact: 'topology-studio store rebuild --db {path}' "
        f"keeps the damaged file aside and restores every journaled run from them. Not "
        f"restored: {NOT_RESTORED}"
    )


def _store_error(path: str, exc: duckdb.Error, doing: str) -> StoreError:
    """A DuckDB error of the store at `path` as the `StoreError` to raise."""
    text = str(exc)
    if _CORRUPT.search(text):
        return StoreCorruptError(corrupt_message(path, text), path=path)
    return StoreError(f"the run store {path}: {doing} failed: {text}")


_P = ParamSpec("_P")
_R = TypeVar("_R")

_CLOSE_WAIT_S = 30.0
"""How long `close()` waits for calls in flight in other threads before closing anyway."""


_FILE_LOCKS: dict[str, threading.RLock] = {}
"""The write lock of each database file this process opened (by real path)."""
_FILE_LOCKS_GUARD = threading.Lock()


def _write_lock_for(path: str) -> threading.RLock:
    """One write lock per database file in this process, shared by every store on it: DuckDB
    lets a process open a file twice, and two stores writing at once conflict."""
    if path == ":memory:":
        return threading.RLock()
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(os.path.realpath(path), threading.RLock())


def _file_id(path: str) -> tuple[int, int] | None:
    """`(device, inode)` of a file, or None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _timestamp(when: datetime | float | None) -> float:
    if when is None:
        return time.time()
    if isinstance(when, datetime):
        return when.timestamp()
    return float(when)


def _proposal_source(row: dict[str, Any]) -> str:
    run = row.get("run_id")
    return "no run" if run is None else f"run {run!r}"


def _none_if_na(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and value != value) else value


DUCKDB_CONFIG: Mapping[str, str] = {"threads": "1"}
"""DuckDB settings of every store connection. The store's tables are small and its queries scan
thousands of rows, not millions, so one thread costs nothing measurable and each thread's own
buffers are saved: with the ingest read in `INGEST_CHUNK_BYTES` chunks, the end-of-run ingest
of a default search's journal took +63 MiB instead of +104 MiB (a thread per core and the
whole file at once), measured 2026-12-02. No `memory_limit`: a 40 MB line (a huge trace) needs
about 512 MiB of DuckDB's memory to be stored, and must still go in."""


INGEST_MEMORY_MB = 64
"""DuckDB's memory limit while an ingest step reads and stores a chunk of a journal, MB (put
back to DuckDB's default after each step; larger intermediates spill to a temporary file). A
default search's 4.6 MB journal then took +31 MiB instead of +63 MiB. A chunk bigger than
`INGEST_CHUNK_BYTES` (one very long line) gets 16 MB per MB of it: a 40 MB line needs that."""


@contextmanager
def _ingest_memory(cur: duckdb.DuckDBPyConnection, chunk_bytes: int) -> Generator[None]:
    """`INGEST_MEMORY_MB` (more for an oversize chunk) as DuckDB's memory limit for one ingest
    step; the default again after it, also when it fails."""
    mb = max(INGEST_MEMORY_MB, 16 * chunk_bytes // (1 << 20) + 1)
    cur.execute(f"SET memory_limit = '{mb}MB'")
    try:
        yield
    finally:
        cur.execute("RESET memory_limit")


class DuckDBRunStore(RunStore):
    """The run store on a DuckDB file, or in memory (`":memory:"`); see the module docstring.

    Args:
        path: the database file (created with its parent folders if missing), or `":memory:"`.
        journal_dir: the folder of run journals to ingest. None: `<path>.journals` for a file,
            no journals for `":memory:"`.
        read_only: refuse every write except `ingest` (the journal view uses it; the file
            itself is still opened normally).
        auto_ingest: ingest new journal lines before every query, so a search running in
            another process shows up live. An ingest failure there is logged, never raised:
            the query answers from what is stored.

    Raises:
        StoreBusyError: another process holds the file.
        SchemaVersionError: the file was written by a newer schema version.
        StoreError: the file is not a run store or cannot be opened.
    """

    @staticmethod
    def _tracked(  # a decorator for the methods below
        fn: Callable[Concatenate[DuckDBRunStore, _P], _R],
    ) -> Callable[Concatenate[DuckDBRunStore, _P], _R]:
        """Count a public method's calls in flight, so `close()` waits for them to end."""

        @functools.wraps(fn)
        def call(self: DuckDBRunStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            self._enter()
            try:
                return fn(self, *args, **kwargs)
            except duckdb.Error as exc:  # never a raw duckdb.Error from the store API
                raise _store_error(self._path, exc, fn.__name__) from exc
            finally:
                self._leave()

        return call

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        journal_dir: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        auto_ingest: bool = True,
    ) -> None:
        self._path = os.fspath(path)
        in_memory = self._path == ":memory:"
        if journal_dir is not None:
            self._journal_dir: Path | None = Path(journal_dir)
        else:
            self._journal_dir = None if in_memory else default_journal_dir(self._path)
        self._read_only = read_only
        self._auto_ingest = auto_ingest
        self.read_only_reason: str = ""
        """Why this store is a read-only view ("" when it was not opened as one): e.g. the
        database file is held by another process, or its file system is read-only."""
        if not in_memory:
            try:
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                    raise StoreReadOnlyError(
                        f"cannot create the run store {self._path}: {exc.strerror}"
                    ) from exc
                raise StoreError(f"cannot create the run store {self._path}: {exc}") from exc
        self._write_lock = _write_lock_for(self._path)
        with self._write_lock:  # two stores of this process opening one file migrate once
            con = self._connect(self._path)
            try:
                self.schema_version: int = ensure_schema(con)
                """The database's schema version (after migrating)."""
                rows = con.execute("SELECT journal, byte_offset FROM ingest_offsets").fetchall()
            except duckdb.Error as exc:
                con.close()
                raise _store_error(self._path, exc, "opening") from exc
            except BaseException:
                con.close()
                raise
        self._con: duckdb.DuckDBPyConnection | None = con
        self._file = None if in_memory else os.path.abspath(self._path)
        self._file_id = None if self._file is None else _file_id(self._file)
        self._offsets: dict[str, int] = {str(r[0]): int(r[1]) for r in rows}
        self._local = threading.local()
        self._cursors: weakref.WeakKeyDictionary[threading.Thread, duckdb.DuckDBPyConnection] = (
            weakref.WeakKeyDictionary()
        )
        self._cursors_lock = threading.Lock()
        self._calls = 0
        self._calls_done = threading.Condition()

    @staticmethod
    def _connect(path: str, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """`duckdb.connect` with `DUCKDB_CONFIG`, its failures as the store's errors (busy,
        read-only, damaged)."""
        try:
            return duckdb.connect(path, read_only=read_only, config=dict(DUCKDB_CONFIG))
        except duckdb.Error as exc:
            text = str(exc)
            if _BUSY.search(text):
                raise StoreBusyError(_busy_message(path, exc)) from exc
            if _CORRUPT.search(text):
                raise StoreCorruptError(corrupt_message(path, text), path=path) from exc
            if _READ_ONLY.search(text):
                raise StoreReadOnlyError(f"cannot open the run store {path}: {text}") from exc
            raise StoreError(f"cannot open the run store {path}: {text}") from exc

    @classmethod
    def read_only_copy(cls, path: str | os.PathLike[str], *, reason: str = "") -> Self:
        """A read-only, in-memory copy of a database file that cannot be written, kept live
        from its journals.

        For a database on a read-only file system (or one this user may not write): the file
        is opened read-only and copied into memory once (runs, proposals, approvals, topology
        versions and the journals' read offsets), then the journals' newer lines are ingested
        into the copy, by `auto_ingest` as usual. The file itself is never written. A missing
        file gives the journals-only view (`from_journals`).

        Args:
            path: the database file.
            reason: why it is read-only, kept in `read_only_reason`.

        Raises:
            StoreBusyError: another process holds the file.
            StoreCorruptError: the file is damaged.
            SchemaVersionError: the file is of a newer schema version.
            StoreError: the file is not a run store, or is of an older schema version (it
                cannot be migrated without writing it).
        """
        path = os.fspath(path)
        if not os.path.exists(path):
            store = cls.from_journals(default_journal_dir(path))
            store.read_only_reason = reason
            return store
        src = cls._connect(path, read_only=True)
        try:
            version = read_version(src)
        except duckdb.Error as exc:
            src.close()
            raise _store_error(path, exc, "opening") from exc
        except BaseException:
            src.close()
            raise
        src.close()
        if version is not None and version != CURRENT_VERSION:
            if version > CURRENT_VERSION:
                raise SchemaVersionError(
                    f"the run store {path} has schema version {version}, newer than this "
                    f"Topology Studio understands ({CURRENT_VERSION}); upgrade topology-studio"
                )
            raise StoreError(
                f"the run store {path} has schema version {version} and cannot be migrated to "
                f"{CURRENT_VERSION} without writing it ({reason or 'it is read-only'})"
            )
        store = cls(":memory:", journal_dir=default_journal_dir(path), read_only=True)
        store.read_only_reason = reason
        try:
            with store._write_lock:
                cur = store._cur()
                quoted = path.replace("'", "''")
                cur.execute(f"ATTACH '{quoted}' AS ro_src (READ_ONLY)")
                try:
                    # the fresh in-memory schema is the file's own (same version): copy the rows
                    for (table,) in cur.execute(
                        "SELECT table_name FROM information_schema.tables "
                        "WHERE table_catalog = 'ro_src' AND table_schema = 'main'"
                    ).fetchall():
                        cur.execute(f'DELETE FROM memory.main."{table}"')
                        cur.execute(
                            f'INSERT INTO memory.main."{table}" SELECT * FROM ro_src.main."{table}"'
                        )
                finally:
                    cur.execute("DETACH ro_src")
                rows = cur.execute("SELECT journal, byte_offset FROM ingest_offsets").fetchall()
                store._offsets = {str(r[0]): int(r[1]) for r in rows}
        except duckdb.Error as exc:
            store.close()
            raise _store_error(path, exc, "reading") from exc
        except BaseException:
            store.close()
            raise
        store._path = path
        store.ingest()
        return store

    @classmethod
    def from_journals(cls, journals: str | os.PathLike[str]) -> Self:
        """A read-only, in-memory view of the runs in a journal folder.

        For when another process holds the database file: it answers every run query from the
        journals (ingested into an in-memory DuckDB, and kept live by `auto_ingest`). What
        exists only in the database (proposals, approvals, topology versions, runs recorded
        without a journal) is not in it.
        """
        store = cls(":memory:", journal_dir=journals, read_only=True)
        store.ingest()
        return store

    # ---- plumbing ---------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The database file, or `":memory:"`."""
        return self._path

    @property
    def journal_dir(self) -> Path | None:
        """The folder of run journals this store ingests, if any."""
        return self._journal_dir

    @property
    def read_only(self) -> bool:
        return self._read_only

    def _cur(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (created on first use).

        Raises:
            StoreError: the store is closed, or its file was deleted or replaced meanwhile.
        """
        con = self._con
        if con is None:
            raise StoreError(f"the run store {self._path} is closed")
        if self._file is not None and _file_id(self._file) != self._file_id:
            raise StoreError(
                f"the run store file {self._path} was deleted or replaced while this store had "
                "it open: what it wrote since then went to the old file and would be lost. "
                "Close this store and open it again (runs come back from their journals)"
            )
        cur = cast(duckdb.DuckDBPyConnection | None, getattr(self._local, "cur", None))
        if cur is None:
            cur = con.cursor()
            self._local.cur = cur
            with self._cursors_lock:
                self._cursors[threading.current_thread()] = cur
        return cur

    def _writable(self) -> duckdb.DuckDBPyConnection:
        if self._read_only:
            why = self.read_only_reason or "the database file is held by another process"
            raise StoreError(f"this run store is a read-only view ({why}); nothing was written")
        return self._cur()

    @_tracked
    def check(self) -> None:
        """Read every row of every table, so a damaged file is found now, not half-way
        through a command (DuckDB checks a block's checksum when it reads the block).

        Raises:
            StoreCorruptError: a block of the file is damaged (the message says how to
                rebuild the store from its journals).
            StoreError: the store is closed.
        """
        cur = self._cur()
        tables = [
            str(r[0])
            for r in cur.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_catalog = current_database() AND table_schema = 'main'"
            ).fetchall()
        ]
        for table in tables:
            cur.execute(f'SELECT count(*), sum(hash(t)) FROM main."{table}" AS t').fetchall()

    @staticmethod
    def _in_transaction(cur: duckdb.DuckDBPyConnection, fn: Callable[[], _T]) -> _T:
        cur.execute("BEGIN TRANSACTION")
        try:
            out = fn()
            cur.execute("COMMIT")
        except BaseException:
            try:
                cur.execute("ROLLBACK")
            except duckdb.Error:  # a failed COMMIT already rolled back
                pass
            raise
        return out

    def _refresh(self, journals: Sequence[str] | None = None) -> None:
        """`auto_ingest`: ingest the journals (these file names only, if given) before a query."""
        if not self._auto_ingest or self._journal_dir is None:
            return
        try:
            if journals is None:
                report = self.ingest()
            else:
                report = self._ingest_paths([self._journal_dir / name for name in journals])
        except StoreError:
            raise
        except Exception as exc:  # never let a background refresh break a query (F10)
            _log.warning("ingesting run journals failed: %s", exc)
            return
        for name, err in report.failed:
            _log.warning("ingesting run journal %s failed (will retry): %s", name, err)

    def _interrupted(self, cur: duckdb.DuckDBPyConnection) -> list[str]:
        """The runs stored as `running` whose journal no live process holds, read again first.

        The query's ingest ran before the lock was probed: a writer that appended its
        `run_finished` and let go of its journal in between looks interrupted (stored
        `running`, journal free). Whatever a writer wrote is in the file once its lock is
        free, so each journal found free is ingested once more, and its run is interrupted
        only if it still reads `running` with a free journal (field case F10).
        """
        found = queries.interrupted_journals(cur, self._journal_dir)
        if found and self._auto_ingest:
            self._refresh([journal for _, journal in found])
            found = queries.interrupted_journals(cur, self._journal_dir)
        return [run_id for run_id, _ in found]

    def _enter(self) -> None:
        with self._calls_done:
            if self._con is None:
                raise StoreError(f"the run store {self._path} is closed")
            self._calls += 1

    def _leave(self) -> None:
        with self._calls_done:
            self._calls -= 1
            if self._calls == 0:
                self._calls_done.notify_all()

    def close(self) -> None:
        """Release the database (idempotent); later calls raise `StoreError`.

        Calls in flight in other threads are waited for (up to 30 s): closing a DuckDB
        connection while one of its cursors runs a query fails and would leave the file held.
        """
        with self._calls_done:
            con, self._con = self._con, None  # new calls are refused from here on
            if con is None:
                return
            if not self._calls_done.wait_for(lambda: self._calls == 0, _CLOSE_WAIT_S):
                _log.warning("closing the run store %s with calls still running", self._path)
        with self._write_lock:
            with self._cursors_lock:
                cursors = list(self._cursors.values())
                self._cursors.clear()
            for cur in cursors:
                try:
                    cur.close()
                except duckdb.Error:
                    pass
            con.close()

    def __repr__(self) -> str:
        state = "closed" if self._con is None else "open"
        return f"DuckDBRunStore({self._path!r}, {state}, read_only={self._read_only})"

    # ---- events and journals -----------------------------------------------------------------

    @_tracked
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
                and _DIRECT_BYTES <= size <= INGEST_CHUNK_BYTES
                and not _GLOB_CHARS.search(str(path))
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
            with _ingest_memory(cur, 0 if delta is not None else end - start):
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

    @_tracked
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
                    if _CORRUPT.search(str(exc)):  # not this journal's fault: every one fails
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

    @_tracked
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

    # ---- runs ---------------------------------------------------------------------------------

    def _run_row(self, run_id: str) -> tuple[Any, ...] | None:
        return (
            self._cur()
            .execute(
                "SELECT run_id, problem, strategy, seed, status, reason, config::VARCHAR, "
                "problem_config::VARCHAR, started_at, finished_at, last_event_at, n_events, "
                "n_resumes, best_idx, budget_used::VARCHAR, journal FROM runs WHERE run_id = ?",
                [run_id],
            )
            .fetchone()
        )

    @_tracked
    def get_run(self, run_id: str) -> RunRecord | None:
        self._refresh()
        row = self._run_row(run_id)
        if row is None:
            return None
        status = queries.effective_status(str(row[4]), row[15], self._journal_dir)
        if status == "interrupted" and self._auto_ingest:
            # its journal may have been let go after the ingest above: read it once more
            # (see `_interrupted`)
            self._refresh([str(row[15])])
            row = self._run_row(run_id) or row
            status = queries.effective_status(str(row[4]), row[15], self._journal_dir)
        if row[15] is not None and self._journal_dir is not None:
            if journal_refusal(self._journal_dir, str(row[15])) is not None:
                status = "damaged"
        return RunRecord(
            run_id=str(row[0]),
            problem=row[1],
            strategy=row[2],
            seed=row[3],
            status=cast(RunStatus, status),
            reason=row[5],
            config=json.loads(row[6]) if row[6] else {},
            problem_config=json.loads(row[7]) if row[7] else {},
            started_at=row[8],
            finished_at=row[9],
            last_event_at=row[10],
            n_events=int(row[11]),
            n_resumes=int(row[12]),
            best_idx=row[13],
            budget_used=json.loads(row[14]) if row[14] else {},
        )

    @_tracked
    def phase_two_run(self, run_id: str) -> str | None:
        self._refresh()
        row = (
            self._cur()
            .execute(
                "SELECT run_id FROM runs WHERE json_extract_string(config, '$.phase') = 'prompts' "
                "AND json_extract_string(config, '$.parent_run_id') = ? "
                "ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT 1",
                [run_id],
            )
            .fetchone()
        )
        return None if row is None else str(row[0])

    @_tracked
    def list_runs(self) -> pd.DataFrame:
        self._refresh()
        cur = self._cur()
        runs = queries.list_runs(cur, self._journal_dir, interrupted=self._interrupted(cur))
        damaged = self._damaged(cur)
        if damaged:
            ids = cast(list[Any], runs["run_id"].tolist())  # pyright: ignore[reportUnknownMemberType]
            status = cast(list[Any], runs["status"].tolist())  # pyright: ignore[reportUnknownMemberType]
            label = cast(list[Any], runs["status_label"].tolist())  # pyright: ignore[reportUnknownMemberType]
            for i, run_id in enumerate(ids):
                if str(run_id) in damaged:
                    status[i], label[i] = "damaged", f"damaged: {damaged[str(run_id)]}"
            runs["status"] = status
            runs["status_label"] = label
        return runs

    # ---- specs --------------------------------------------------------------------------------

    @_tracked
    def put_spec(self, spec_hash: str, spec_json: str) -> bool:
        if not spec_hash:
            raise StoreError("a spec needs its canonical hash (got an empty one)")
        with self._write_lock:
            cur = self._writable()
            row = cur.execute(
                "INSERT INTO specs VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING spec_hash",
                [spec_hash, spec_json, time.time()],
            ).fetchall()
            return bool(row)

    @_tracked
    def get_spec(self, spec_hash: str) -> str | None:
        row = (
            self._cur()
            .execute("SELECT spec_json FROM specs WHERE spec_hash = ?", [spec_hash])
            .fetchone()
        )
        return None if row is None else str(row[0])

    # ---- queries ------------------------------------------------------------------------------

    @_tracked
    def archive(
        self,
        run_id: str,
        *,
        split: str | None = None,
        objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
        include_unevaluated: bool = False,
    ) -> pd.DataFrame:
        self._refresh()
        return queries.archive(
            self._cur(),
            run_id,
            split=split,
            objectives=objectives,
            include_unevaluated=include_unevaluated,
        )

    @_tracked
    def archive_records(
        self,
        run_id: str,
        *,
        split: str | None = None,
        objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
        include_unevaluated: bool = False,
    ) -> list[dict[str, Any]]:
        self._refresh()
        return queries.archive_records(
            self._cur(),
            run_id,
            split=split,
            objectives=objectives,
            include_unevaluated=include_unevaluated,
        )

    @_tracked
    def candidate_examples(
        self, run_id: str, candidate_idx: int, *, split: str | None = None, with_trace: bool = False
    ) -> pd.DataFrame:
        self._refresh()
        return queries.candidate_examples(
            self._cur(), run_id, candidate_idx, split=split, with_trace=with_trace
        )

    @_tracked
    def example_accuracies(
        self, run_id: str, candidate_idx: int, *, split: str | None = None
    ) -> list[tuple[str, int, float | None]]:
        self._refresh()
        return queries.example_accuracies(self._cur(), run_id, candidate_idx, split=split)

    @_tracked
    def example_trace(
        self, run_id: str, candidate_idx: int, example_id: str, *, trial: int = 0
    ) -> list[dict[str, Any]] | None:
        self._refresh()
        return queries.example_trace(self._cur(), run_id, candidate_idx, example_id, trial)

    @_tracked
    def compare_candidates(
        self,
        run_id: str,
        a: int,
        b: int,
        *,
        run_id_b: str | None = None,
        threshold: float = 0.5,
    ) -> pd.DataFrame:
        self._refresh()
        return queries.compare_candidates(
            self._cur(), run_id, a, b, run_id_b=run_id_b, threshold=threshold
        )

    @_tracked
    def progress(self, run_id: str) -> pd.DataFrame:
        self._refresh()
        return queries.progress(self._cur(), run_id)

    @_tracked
    def snapshots(self, run_id: str) -> pd.DataFrame:
        self._refresh()
        return queries.snapshots(self._cur(), run_id)

    @_tracked
    def logs(self, run_id: str) -> pd.DataFrame:
        self._refresh()
        return queries.logs(self._cur(), run_id)

    # ---- proposals, approvals, topology versions ----------------------------------------------

    @_tracked
    def record_proposal(
        self,
        target: str,
        spec_json: str,
        *,
        spec_hash: str | None = None,
        run_id: str | None = None,
        candidate_idx: int | None = None,
        base_version: int | None = None,
        diff: str = "",
        proposed_by: str = "",
        when: datetime | float | None = None,
    ) -> int:
        if not target:
            raise StoreError("a proposal needs a target")
        with self._write_lock:
            row = (
                self._writable()
                .execute(
                    "INSERT INTO proposals (target, spec_json, spec_hash, run_id, candidate_idx, "
                    "base_version, diff, proposed_by, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING proposal_id",
                    [
                        target,
                        spec_json,
                        spec_hash,
                        run_id,
                        candidate_idx,
                        base_version,
                        diff,
                        proposed_by,
                        _timestamp(when),
                    ],
                )
                .fetchone()
            )
        if row is None:  # pragma: no cover - RETURNING always yields the row
            raise StoreError("recording the proposal returned no id")
        return int(row[0])

    @_tracked
    def record_approval(
        self,
        proposal_id: int,
        *,
        who: str,
        when: datetime | float | None = None,
        comment: str = "",
        base_version: int | None = None,
        applied_version: int | None = None,
        decision: str = "approved",
    ) -> int:
        if decision not in ("approved", "rejected"):
            raise StoreError(f"decision must be 'approved' or 'rejected', got {decision!r}")
        if not who:
            raise StoreError("an approval needs who made it")
        with self._write_lock:
            cur = self._writable()

            def go() -> int:
                found = cur.execute(
                    "SELECT 1 FROM proposals WHERE proposal_id = ?", [proposal_id]
                ).fetchone()
                if found is None:
                    raise StoreError(f"no proposal {proposal_id}")
                row = cur.execute(
                    "INSERT INTO approvals (proposal_id, decision, who, decided_at, comment, "
                    "base_version, applied_version) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "RETURNING approval_id",
                    [
                        proposal_id,
                        decision,
                        who,
                        _timestamp(when),
                        comment,
                        base_version,
                        applied_version,
                    ],
                ).fetchone()
                return int(row[0]) if row else 0

            return self._in_transaction(cur, go)

    @_tracked
    def list_proposals(self, target: str | None = None) -> pd.DataFrame:
        return queries.list_proposals(self._cur(), target)

    @_tracked
    def get_proposal(self, run_id: str | None, proposal_id: int) -> ProposalRecord:
        row = queries.proposal(self._cur(), proposal_id)
        if row is None or (run_id is not None and row["run_id"] != run_id):
            of_run = "" if run_id is None else f" of run {run_id!r}"
            have = "" if row is None else f" (proposal {proposal_id} is of {_proposal_source(row)})"
            raise StoreError(f"no proposal {proposal_id}{of_run}{have}")
        return ProposalRecord.model_validate(row)

    @_tracked
    def save_topology_version(
        self, target: str, spec_json: str, *, spec_hash: str | None = None, note: str = ""
    ) -> int:
        if not target:
            raise StoreError("a topology version needs a target")
        try:
            json.loads(spec_json)
        except ValueError as exc:
            raise StoreError(f"a topology version must be JSON: {exc}") from exc
        with self._write_lock:
            cur = self._writable()

            def go() -> int:
                row = cur.execute(
                    "SELECT coalesce(max(version), 0) + 1 FROM topology_versions WHERE target = ?",
                    [target],
                ).fetchone()
                version = int(row[0]) if row else 1
                cur.execute(
                    "INSERT INTO topology_versions VALUES (?, ?, ?, ?, ?, ?)",
                    [target, version, spec_json, spec_hash, time.time(), note],
                )
                return version

            return self._in_transaction(cur, go)

    @_tracked
    def list_topology_versions(self, target: str) -> pd.DataFrame:
        return queries.list_topology_versions(self._cur(), target)

    @_tracked
    def get_topology_version(self, target: str, version: int | None = None) -> TopologyVersion:
        cur = self._cur()
        row = cur.execute(
            "SELECT version, spec_json, spec_hash, created_at, note FROM topology_versions "
            "WHERE target = $target AND ($version IS NULL OR version = $version) "
            "ORDER BY version DESC LIMIT 1",
            {"target": target, "version": version},
        ).fetchone()
        if row is None:
            have = [
                int(r[0])
                for r in cur.execute(
                    "SELECT version FROM topology_versions WHERE target = ? ORDER BY version",
                    [target],
                ).fetchall()
            ]
            which = "any version" if version is None else f"version {version}"
            raise StoreError(f"target {target!r} has no {which}; saved versions: {have or 'none'}")
        return TopologyVersion(
            target=target,
            version=int(row[0]),
            spec_json=str(row[1]),
            spec_hash=_none_if_na(row[2]),
            created_at=float(row[3]),
            note=str(row[4]),
        )
