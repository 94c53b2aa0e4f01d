"""`DuckDBRunStore`: the run store on one DuckDB file (or in memory).

The store's plumbing, runs, specs and queries are here; its events and journals are in
`core.storage._duckdb_journals`, its proposals and topology versions in
`core.storage._duckdb_proposals` (mixins it inherits), its file messages, locks and the
`tracked` decorator in `core.storage._duckdb_files`.

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
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

import duckdb

from core.errors import (
    SchemaVersionError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreReadOnlyError,
    raise_if_interrupt,
)
from core.storage import queries
from core.storage._duckdb_files import (
    BUSY,
    CLOSE_WAIT_S,
    CORRUPT,
    DUCKDB_CONFIG,
    INGEST_CHUNK_BYTES,
    NOT_RESTORED,
    READ_ONLY,
    busy_message,
    corrupt_message,
    file_id,
    store_error,
    tracked,
    write_lock_for,
)
from core.storage._duckdb_journals import JournalsMixin
from core.storage._duckdb_proposals import ProposalsMixin
from core.storage._journal_files import journal_refusal
from core.storage._schema import CURRENT_VERSION, ensure_schema, read_version
from core.storage.base import RunStore
from core.storage.journal import journal_dir as default_journal_dir
from core.storage.records import (
    RunRecord,
    RunStatus,
)
from core.vocab.pareto import DEFAULT_OBJECTIVES, Objective

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

__all__ = [
    "DUCKDB_CONFIG",
    "INGEST_CHUNK_BYTES",
    "NOT_RESTORED",
    "DuckDBRunStore",
    "corrupt_message",
]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")


class DuckDBRunStore(JournalsMixin, ProposalsMixin, RunStore):
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
        self._write_lock = write_lock_for(self._path)
        with self._write_lock:  # two stores of this process opening one file migrate once
            con = self._connect(self._path)
            try:
                self.schema_version: int = ensure_schema(con)
                """The database's schema version (after migrating)."""
                rows = con.execute("SELECT journal, byte_offset FROM ingest_offsets").fetchall()
            except duckdb.Error as exc:
                con.close()
                raise store_error(self._path, exc, "opening") from exc
            except BaseException:
                con.close()
                raise
        self._con: duckdb.DuckDBPyConnection | None = con
        self._file = None if in_memory else os.path.abspath(self._path)
        self._file_id = None if self._file is None else file_id(self._file)
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
            if BUSY.search(text):
                raise StoreBusyError(busy_message(path, exc)) from exc
            if CORRUPT.search(text):
                raise StoreCorruptError(corrupt_message(path, text), path=path) from exc
            if READ_ONLY.search(text):
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
            raise store_error(path, exc, "opening") from exc
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
            raise store_error(path, exc, "reading") from exc
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
        if self._file is not None and file_id(self._file) != self._file_id:
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

    @tracked
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
            # but a Ctrl-C that lands in it is the user's (DuckDB reports it as
            # `RuntimeError('Query interrupted')`): a second Ctrl-C while the command line
            # printed its report was logged as a failed ingest and the report went on
            raise_if_interrupt(exc)
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
            if not self._calls_done.wait_for(lambda: self._calls == 0, CLOSE_WAIT_S):
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

    @tracked
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

    @tracked
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

    @tracked
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

    @tracked
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

    @tracked
    def get_spec(self, spec_hash: str) -> str | None:
        row = (
            self._cur()
            .execute("SELECT spec_json FROM specs WHERE spec_hash = ?", [spec_hash])
            .fetchone()
        )
        return None if row is None else str(row[0])

    # ---- queries ------------------------------------------------------------------------------

    @tracked
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

    @tracked
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

    @tracked
    def candidate_examples(
        self, run_id: str, candidate_idx: int, *, split: str | None = None, with_trace: bool = False
    ) -> pd.DataFrame:
        self._refresh()
        return queries.candidate_examples(
            self._cur(), run_id, candidate_idx, split=split, with_trace=with_trace
        )

    @tracked
    def example_accuracies(
        self, run_id: str, candidate_idx: int, *, split: str | None = None
    ) -> list[tuple[str, int, float | None]]:
        self._refresh()
        return queries.example_accuracies(self._cur(), run_id, candidate_idx, split=split)

    @tracked
    def example_trace(
        self, run_id: str, candidate_idx: int, example_id: str, *, trial: int = 0
    ) -> list[dict[str, Any]] | None:
        self._refresh()
        return queries.example_trace(self._cur(), run_id, candidate_idx, example_id, trial)

    @tracked
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

    @tracked
    def progress(self, run_id: str) -> pd.DataFrame:
        self._refresh()
        return queries.progress(self._cur(), run_id)

    @tracked
    def snapshots(self, run_id: str) -> pd.DataFrame:
        self._refresh()
        return queries.snapshots(self._cur(), run_id)

    @tracked
    def logs(self, run_id: str) -> pd.DataFrame:
        self._refresh()
        return queries.logs(self._cur(), run_id)
