"""The DuckDB run store's file handling: the messages of a busy, damaged or read-only file, the
per-file write lock, the memory an ingest step may use, and the `tracked` decorator that makes
`close()` wait for calls in flight (`core.storage.duckdb_store` uses them)."""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import duckdb

from core.errors import (
    StoreCorruptError,
    StoreError,
    raise_if_interrupt,
)
from core.storage.journal import journal_dir as default_journal_dir

DIRECT_BYTES = 1 << 20
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

GLOB_CHARS = re.compile(r"[*?\[\]{}]")
"""Characters DuckDB's `read_json` takes as a glob pattern: such a path is never read directly."""

HOLDER = re.compile(r"held in (?P<prog>.+?) \(PID (?P<pid>\d+)\)")


def busy_message(path: str, exc: BaseException) -> str:
    m = HOLDER.search(str(exc))
    who = f"process {m['pid']} ({m['prog']})" if m else "another process"
    return (
        f"the run store {path} is held by {who}: DuckDB lets only one process open a database "
        "file, even read-only. Close that process (the studio, or another topology-studio "
        "command) or use another --db file; to read its runs meanwhile, open a read-only view "
        "from the run journals with open_store(path, on_busy='journals') (the CLI's `runs` and "
        f"`show` do this). A search does not need the file: it writes its journal under "
        f"{default_journal_dir(path)} and the holder picks it up."
    )


BUSY = re.compile(r"Could not set lock|Conflicting lock", re.IGNORECASE)
"""DuckDB's words for a file another process holds (a corrupt "block" is not a "lock")."""

CORRUPT = re.compile(r"Corrupt database file|does not match stored checksum", re.IGNORECASE)
"""DuckDB's words for a damaged database file (a bad block checksum). A file that is not a
DuckDB file at all ("not a valid DuckDB database file") is reported as such instead: it may be
any file a `--db` pointed at by mistake."""

READ_ONLY = re.compile(r"Read-only file system|Permission denied", re.IGNORECASE)
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


def store_error(path: str, exc: duckdb.Error, doing: str) -> StoreError:
    """A DuckDB error of the store at `path` as the `StoreError` to raise."""
    text = str(exc)
    if CORRUPT.search(text):
        return StoreCorruptError(corrupt_message(path, text), path=path)
    return StoreError(f"the run store {path}: {doing} failed: {text}")


_P = ParamSpec("_P")
_R = TypeVar("_R")

CLOSE_WAIT_S = 30.0
"""How long `close()` waits for calls in flight in other threads before closing anyway."""


FILE_LOCKS: dict[str, threading.RLock] = {}
"""The write lock of each database file this process opened (by real path)."""
FILE_LOCKS_GUARD = threading.Lock()


def write_lock_for(path: str) -> threading.RLock:
    """One write lock per database file in this process, shared by every store on it: DuckDB
    lets a process open a file twice, and two stores writing at once conflict."""
    if path == ":memory:":
        return threading.RLock()
    with FILE_LOCKS_GUARD:
        return FILE_LOCKS.setdefault(os.path.realpath(path), threading.RLock())


def file_id(path: str) -> tuple[int, int] | None:
    """`(device, inode)` of a file, or None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def timestamp(when: datetime | float | None) -> float:
    if when is None:
        return time.time()
    if isinstance(when, datetime):
        return when.timestamp()
    return float(when)


def proposal_source(row: dict[str, Any]) -> str:
    run = row.get("run_id")
    return "no run" if run is None else f"run {run!r}"


def none_if_na(value: Any) -> Any:
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
def ingest_memory(cur: duckdb.DuckDBPyConnection, chunk_bytes: int) -> Generator[None]:
    """`INGEST_MEMORY_MB` (more for an oversize chunk) as DuckDB's memory limit for one ingest
    step; the default again after it, also when it fails."""
    mb = max(INGEST_MEMORY_MB, 16 * chunk_bytes // (1 << 20) + 1)
    cur.execute(f"SET memory_limit = '{mb}MB'")
    try:
        yield
    finally:
        cur.execute("RESET memory_limit")


class Tracked(Protocol):
    """What `tracked` needs of a store: the path (for error messages) and the in-flight count."""

    _path: str

    def _enter(self) -> None: ...

    def _leave(self) -> None: ...


_S = TypeVar("_S", bound=Tracked)


def tracked(fn: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Count a public method's calls in flight, so `close()` waits for them to end; a
    `duckdb.Error` becomes a `StoreError` naming the file and the method."""

    @functools.wraps(fn)
    def call(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        self._enter()  # pyright: ignore[reportPrivateUsage]
        try:
            return fn(self, *args, **kwargs)
        except duckdb.Error as exc:  # never a raw duckdb.Error from the store API
            raise_if_interrupt(exc)  # a Ctrl-C is an interrupt, not a store failure
            raise store_error(self._path, exc, fn.__name__) from exc  # pyright: ignore[reportPrivateUsage]
        finally:
            self._leave()  # pyright: ignore[reportPrivateUsage]

    return call
