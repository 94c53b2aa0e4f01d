"""`DuckDBMemoryStore`: memory as tables in the run store's DuckDB file (runtime contract 5).

The tables live beside the runs, in the same file (`memory_entries`, and `memory_schema` with
their own schema version, `MEMORY_SCHEMA_VERSION`), so a project has one database. The run
store's rules hold: the same connection settings (`DUCKDB_CONFIG`, so a run store and a memory
store of one process share the open database), one process owns the file while it is open (opening a file another process
holds raises `StoreBusyError`), a cursor per thread, short write transactions under one lock.
So open the store when you need it and `close()` it after: the next process (the `roster`
command, the next `solve`) then finds what this one remembered.

Embeddings are stored as `FLOAT[]`; recall computes DuckDB's built-in
`array_cosine_similarity` against the query's vector (cast to `FLOAT[d]`, over the entries of
that dimension), with no extension to download.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import duckdb

from core.errors import SchemaVersionError, StoreBusyError, StoreError
from core.memory.base import (
    Embedder,
    HashedNgramEmbedder,
    MemoryEntry,
    MemoryHit,
    MemoryType,
    entry_from_row,
    next_reliability,
)
from core.storage.duckdb_store import DUCKDB_CONFIG

__all__ = ["MEMORY_SCHEMA_VERSION", "DuckDBMemoryStore"]

MEMORY_SCHEMA_VERSION = 1
"""The memory tables' schema version (independent of the run store's)."""

_DDL = (
    """
    CREATE TABLE IF NOT EXISTS memory_schema (version INTEGER NOT NULL, applied_at DOUBLE)
    """,
    """
    CREATE TABLE IF NOT EXISTS memory_entries (
        id VARCHAR PRIMARY KEY,
        memory_type VARCHAR NOT NULL,
        key VARCHAR NOT NULL,
        content VARCHAR NOT NULL,
        metadata VARCHAR NOT NULL,
        embedding FLOAT[],
        dim INTEGER NOT NULL,
        reliability DOUBLE NOT NULL,
        uses INTEGER NOT NULL,
        successes INTEGER NOT NULL,
        created_at DOUBLE NOT NULL,
        updated_at DOUBLE NOT NULL,
        UNIQUE (memory_type, key)
    )
    """,
)

_COLUMNS = (
    "id, memory_type, key, content, metadata, reliability, uses, successes, created_at, updated_at"
)


class DuckDBMemoryStore:
    """The `MemoryStore` on a DuckDB file (usually the run store's), or in memory.

    Args:
        path: the database file (e.g. `data/topology_studio.duckdb`), or `":memory:"`.
        embedder: how texts become vectors; default `HashedNgramEmbedder()`.

    Raises:
        StoreBusyError: another process holds the file.
        SchemaVersionError: the memory tables were written by a newer version.
        StoreError: the file cannot be opened.
    """

    def __init__(
        self, path: str | os.PathLike[str] = ":memory:", *, embedder: Embedder | None = None
    ) -> None:
        self._path = os.fspath(path)
        self.embedder: Embedder = embedder if embedder is not None else HashedNgramEmbedder()
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(
                self._path, config=dict(DUCKDB_CONFIG)
            )
        except duckdb.Error as exc:
            text = str(exc)
            if "lock" in text.lower():
                raise StoreBusyError(
                    f"the database {self._path} is held by another process ({text}); memory "
                    "is in the same file as the runs, one process at a time"
                ) from exc
            raise StoreError(f"cannot open the memory store {self._path}: {text}") from exc
        self._lock = threading.RLock()
        self._local = threading.local()
        with self._lock:
            cur = self._con.cursor()
            for ddl in _DDL:
                cur.execute(ddl)
            row = cur.execute("SELECT max(version) FROM memory_schema").fetchone()
            version = None if row is None else row[0]
            if version is None:
                cur.execute(
                    "INSERT INTO memory_schema VALUES (?, ?)", [MEMORY_SCHEMA_VERSION, time.time()]
                )
            elif int(version) > MEMORY_SCHEMA_VERSION:
                self.close()
                raise SchemaVersionError(
                    f"the memory tables of {self._path} have schema version {version}, newer "
                    f"than this version's {MEMORY_SCHEMA_VERSION}"
                )

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def _cur(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise StoreError(f"the memory store {self._path} is closed")
        cur = cast(duckdb.DuckDBPyConnection | None, getattr(self._local, "cur", None))
        if cur is None:
            cur = self._con.cursor()
            self._local.cur = cur
        return cur

    def close(self) -> None:
        """Close the database (releases the file for other processes); idempotent."""
        con, self._con = self._con, None
        if con is not None:
            con.close()

    def __enter__(self) -> DuckDBMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self._cur()
        result = cur.execute(sql, list(params))
        names = [d[0] for d in result.description or []]
        return [dict(zip(names, r, strict=True)) for r in result.fetchall()]

    async def remember(self, entry: MemoryEntry) -> MemoryEntry:
        """Store `entry`, replacing the entry of the same `(memory_type, key)` but keeping its
        id, creation time, reliability and counts; returns the stored entry."""
        (vector,) = await self.embedder.embed([entry.content])
        now = time.time()
        with self._lock:
            cur = self._cur()
            cur.execute("BEGIN TRANSACTION")
            try:
                old = self.get(entry.memory_type, entry.key)
                stored = entry.model_copy(
                    update={
                        "id": old.id if old is not None else (entry.id or uuid.uuid4().hex),
                        "created_at": old.created_at if old is not None else now,
                        "updated_at": now,
                        "reliability": old.reliability if old is not None else entry.reliability,
                        "uses": old.uses if old is not None else entry.uses,
                        "successes": old.successes if old is not None else entry.successes,
                    }
                )
                cur.execute(
                    "DELETE FROM memory_entries WHERE memory_type = ? AND key = ?",
                    [entry.memory_type, entry.key],
                )
                cur.execute(
                    "INSERT INTO memory_entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        stored.id,
                        stored.memory_type,
                        stored.key,
                        stored.content,
                        json.dumps(stored.metadata, sort_keys=True),
                        vector,
                        len(vector),
                        stored.reliability,
                        stored.uses,
                        stored.successes,
                        stored.created_at,
                        stored.updated_at,
                    ],
                )
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        return stored

    async def recall(
        self,
        query: str,
        *,
        memory_type: MemoryType | None = None,
        k: int = 5,
        min_reliability: float = 0.0,
        min_similarity: float = 0.0,
    ) -> list[MemoryHit]:
        """The `k` entries most similar to `query` (cosine of embeddings), best first, ties
        by key; only entries with reliability >= `min_reliability` and similarity >=
        `min_similarity`."""
        (vector,) = await self.embedder.embed([query])
        dim = len(vector)
        sql = (
            f"SELECT {_COLUMNS}, coalesce(array_cosine_similarity("
            f"embedding::FLOAT[{dim}], ?::FLOAT[{dim}]), 0.0) AS similarity "
            "FROM memory_entries WHERE dim = ? AND reliability >= ?"
        )
        params: list[Any] = [vector, dim, min_reliability]
        if memory_type is not None:
            sql += " AND memory_type = ?"
            params.append(memory_type)
        sql += " ORDER BY similarity DESC, key LIMIT ?"
        params.append(max(0, k))
        with self._lock:
            rows = self._rows(sql, params)
        return [
            MemoryHit(entry=entry_from_row(r), similarity=float(r["similarity"]))
            for r in rows
            if float(r["similarity"]) >= min_similarity
        ]

    def get(self, memory_type: MemoryType, key: str) -> MemoryEntry | None:
        """The entry of that type and key, or None."""
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM memory_entries WHERE memory_type = ? AND key = ?",
            [memory_type, key],
        )
        return entry_from_row(rows[0]) if rows else None

    def entries(self, memory_type: MemoryType | None = None) -> list[MemoryEntry]:
        """Every entry (of one type), by type then key."""
        if memory_type is None:
            rows = self._rows(f"SELECT {_COLUMNS} FROM memory_entries ORDER BY memory_type, key")
        else:
            rows = self._rows(
                f"SELECT {_COLUMNS} FROM memory_entries WHERE memory_type = ? ORDER BY key",
                [memory_type],
            )
        return [entry_from_row(r) for r in rows]

    def update_reliability(self, entry_id: str, success: bool) -> MemoryEntry:
        """Record one outcome: reliability by `next_reliability`, `uses` + 1, `successes` + 1
        on success.

        Raises:
            KeyError: no entry has that id.
        """
        with self._lock:
            rows = self._rows(f"SELECT {_COLUMNS} FROM memory_entries WHERE id = ?", [entry_id])
            if not rows:
                raise KeyError(f"no memory entry with id {entry_id!r}")
            old = entry_from_row(rows[0])
            new = old.model_copy(
                update={
                    "reliability": next_reliability(old.reliability, success),
                    "uses": old.uses + 1,
                    "successes": old.successes + (1 if success else 0),
                    "updated_at": time.time(),
                }
            )
            self._cur().execute(
                "UPDATE memory_entries SET reliability = ?, uses = ?, successes = ?, "
                "updated_at = ? WHERE id = ?",
                [new.reliability, new.uses, new.successes, new.updated_at, entry_id],
            )
        return new
