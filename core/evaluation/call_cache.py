"""The call-level model cache kept across runs of the same problem, in a DuckDB file.

The cache itself (key, record, counters, where it sits) is `core.agents.call_cache`; this module
adds `DuckDBCallCache`, which keeps the records in one table of a DuckDB file, by convention
beside the run store: `call_cache_path(db)` is `<db>.calls.duckdb`.

Table `calls(namespace VARCHAR, key VARCHAR, record VARCHAR, PRIMARY KEY (namespace, key))`:
`namespace` is the problem's name and its `config_hash` (`f"{name}:{config_hash}"`, so a changed
config, seed, split or problem code never answers from an old recording), `key` the
`call_key` digest, `record` `CallRecord.to_json()`.

Every record of the namespace is read into memory when the cache is opened; new records are
kept in memory and written in one batch by `flush()` (the evaluator flushes at the end of every
`evaluate`), then the file is closed again, so the file is never held between flushes. A file
that cannot be read (damaged, not DuckDB, held by another process) is never fatal: a warning is
logged and the cache works in memory only for this process, and a damaged record is skipped
with a warning. The run store is another file, so no run data is ever lost through this one.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from core.agents.call_cache import CallRecord, InMemoryCallCache
from core.errors import is_query_interrupt, raise_if_interrupt

__all__ = ["DuckDBCallCache", "call_cache_path"]

_log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS calls (namespace VARCHAR NOT NULL, key VARCHAR NOT NULL, "
    "record VARCHAR NOT NULL, PRIMARY KEY (namespace, key))"
)


_LOAD_BATCH = 1000
"""Rows read from the file at a time when the cache is opened."""

_FLUSH_BATCH = 1000
"""Rows written by one statement of a flush (all of a flush's statements in one transaction).
A statement's list parameters are materialised whole by DuckDB: 10,000 records (a cold default
search's held-out test writes about that many at once) in one statement raised the process's
RSS by 80 MiB for the moment of the write, in 1,000-row statements by 41 MiB (the same 0.2 s),
measured 2026-12-07 on a 38,733-record cache; that moment was a cold search's peak."""


def call_cache_path(db: Path) -> Path:
    """`<db>.calls.duckdb`: where the call cache of a run store at `db` is kept."""
    return db.with_name(db.name + ".calls.duckdb")


class DuckDBCallCache(InMemoryCallCache):
    """A `CallCache` persisted in a DuckDB file (see the module docstring).

    Args:
        path: the DuckDB file (created with its table on the first flush if missing).
        namespace: e.g. `f"{problem.name}:{problem.config_hash}"`.

    Attributes:
        usable: False when the file could not be read or written (then memory only).
    """

    def __init__(self, path: Path, namespace: str) -> None:
        super().__init__()
        self.path = Path(path)
        self.namespace = namespace
        self.usable = True
        self._pending: dict[str, CallRecord] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        bad = 0
        try:
            con = duckdb.connect(str(self.path), read_only=True)
            try:
                cursor = con.execute(
                    "SELECT key, record FROM calls WHERE namespace = ?", [self.namespace]
                )
                # in batches, not `fetchall`: the whole result as Python strings next to the
                # records made from it was 23 MiB more of a warm default search's peak RSS
                # (11,373 records; malloc keeps the freed memory)
                while rows := cursor.fetchmany(_LOAD_BATCH):
                    for key, text in rows:
                        try:
                            super().put(str(key), CallRecord.from_json(str(text)))
                        except ValueError:
                            bad += 1
            finally:
                con.close()
        except duckdb.Error as exc:
            raise_if_interrupt(exc)  # a Ctrl-C while loading: the user's, not a bad file
            self._disable(f"cannot read it ({type(exc).__name__}: {exc})")
            return
        if bad:
            _log.warning("call cache %s: %d damaged records skipped", self.path, bad)

    def _disable(self, why: str) -> None:
        self.usable = False
        _log.warning(
            "call cache %s: %s; this process keeps its call cache in memory only", self.path, why
        )

    def put(self, key: str, record: CallRecord) -> None:
        super().put(key, record)
        if self.usable:
            self._pending[key] = record

    def flush(self) -> None:
        """Write the records put since the last flush in one batch (nothing if none, or if the
        file is unusable: then a warning was logged once and the records stay in memory).

        Raises:
            KeyboardInterrupt: a Ctrl-C arrived while DuckDB wrote the batch (DuckDB reports it
                as `RuntimeError('Query interrupted')`); nothing of the batch was stored.
        """
        if not self._pending or not self.usable:
            return
        keys = list(self._pending)
        records = [r.to_json() for r in self._pending.values()]
        try:
            con = duckdb.connect(str(self.path), config={"threads": "1"})
            try:
                con.execute(_SCHEMA)
                # Statements over two list parameters zipped by `unnest`, `_FLUSH_BATCH` rows
                # each, in one transaction (all or nothing); not `executemany` (it binds and
                # runs the statement once per row, 2.6 ms each: 27 s of a cold 146 s default
                # search, 10,480 rows) and not a DataFrame scan (pandas and pyarrow add 75 MiB
                # to a search's peak RSS; 10,480 rows take 0.15 s here)
                con.execute("BEGIN TRANSACTION")
                for i in range(0, len(keys), _FLUSH_BATCH):
                    con.execute(
                        "INSERT OR REPLACE INTO calls "
                        "SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
                        [self.namespace, keys[i : i + _FLUSH_BATCH], records[i : i + _FLUSH_BATCH]],
                    )
                con.execute("COMMIT")
            finally:
                con.close()
        except duckdb.Error as exc:
            raise_if_interrupt(exc)  # InterruptException: the batch stays pending
            self._disable(f"cannot write it ({type(exc).__name__}: {exc})")
            return
        except RuntimeError as exc:
            # DuckDB checks for Ctrl-C while it scans the batch and raises a bare
            # RuntimeError('Query interrupted'): it is the user's interrupt, not a failure
            # (the batch is not stored; its records stay pending in memory)
            if not is_query_interrupt(exc):
                raise
            raise KeyboardInterrupt from exc
        self._pending.clear()

    @property
    def n_pending(self) -> int:
        """Records put but not yet flushed."""
        return len(self._pending)
