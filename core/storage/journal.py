"""The run journal: a search's events as JSON lines, written by the search, read by the store.

A search writes every event it emits to its run's journal, one JSON object per line. The run
store ingests journals (`RunStore.ingest`), so a search running in another process (the
command line) is visible live in the studio, which holds the database file, and nothing is lost
when that process dies: every line is flushed to the operating system as it is written, and
fsynced at the points a resume restarts from (see `FSYNC_TYPES`).

Location: beside the database, `<db path>.journals/<run_id>.jsonl`, e.g.
`data/runs.duckdb.journals/20250101-120000-3f9a1c.jsonl` (`journal_dir`, `journal_path`). A
search needs only the database *path*, never the open database, so it can run while the studio
holds the file.

Encoding: `encode_event(event)`, i.e. the event's fields as JSON (UTF-8, a lone surrogate
written as U+FFFD) with NaN and infinities as the bare constants `NaN`, `Infinity`, `-Infinity` (pydantic's own `model_dump_json` turns them into
`null`, which `parse_event` then rejects for required floats; an invalid result must keep its
NaN so the store can mark it invalid, field case F7). `parse_event` and DuckDB's `read_json`
both read these constants.

Per-example lines are compact (measured: a default 48-evaluation gsm8k_replay search
wrote 31.8 MB, 3.1 KB a line, mostly traces; without traces a line is now about 150 bytes).
`RunJournal` writes an `ExampleEvaluated` with short keys (`COMPACT_KEYS`), leaving out what
the journal already holds: `run_id` (the journal's run), `split` when it is `COMPACT_SPLIT`,
`spec_hash` when it is the hash its candidate was proposed with (the first `CandidateProposed`
of that `candidate_idx`), fields at their defaults (an empty trace, status `ok`, ...), and an
`output_summary` that an earlier line already holds in full (`sr`: that line's `seq`; on
gsm8k_replay one problem's summary is the same for most candidates); whole floats are written
as integers (`1200` for 1200.0). `read_journal`, `scan_journal` and the store's ingest put
them back, so the events read are the events written. The first line of a journal, and every
event `encode_event` writes on its own, is in the full form, which every reader accepts.

Crash tolerance: a process killed mid-write leaves at most one torn last line (no newline).
`read_journal` drops it (or keeps it, if it happens to be a complete event), and
`RunJournal.resume` cuts it off before appending, continuing `seq` after the last recorded
event. One writer at a time: a writer holds an exclusive `flock` on its journal for as long as
it is open, so resuming a run that is still running fails with `StoreBusyError`, and
`journal_is_live` tells a running search from a crashed one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Self, cast

import pydantic
import pydantic_core

from core.errors import JournalWriteError, StoreBusyError, StoreError
from core.storage import _filelock
from core.vocab.events import CandidateProposed, ExampleEvaluated, SearchEvent, parse_event

__all__ = [
    "COMPACT_KEYS",
    "COMPACT_SPLIT",
    "FSYNC_TYPES",
    "JOURNAL_SUFFIX",
    "JournalScan",
    "RunJournal",
    "check_run_id",
    "encode_event",
    "journal_dir",
    "journal_is_live",
    "journal_path",
    "new_run_id",
    "read_journal",
    "scan_journal",
]

JOURNAL_SUFFIX: Final = ".jsonl"
"""A journal file's suffix; its stem is the run id."""

FSYNC_TYPES: Final[frozenset[str]] = frozenset(
    {"run_started", "candidate_evaluated", "archive_snapshot", "run_finished"}
)
"""Event types after which the journal is fsynced (the points a resume restarts from). Every
line is flushed anyway, which survives a killed process; fsync also survives a machine crash."""

COMPACT_KEYS: Final[dict[str, str]] = {
    "e": "seq",
    "t": "ts",
    "c": "candidate_idx",
    "h": "spec_hash",
    "s": "split",
    "x": "example_id",
    "n": "trial",
    "a": "accuracy",
    "u": "cost_usd",
    "l": "latency_ms",
    "i": "input_tokens",
    "o": "output_tokens",
    "r": "requests",
    "st": "status",
    "er": "error",
    "os": "output_summary",
    "k": "cached",
    "tr": "trace",
}
"""Short key of a compact per-example line -> the `ExampleEvaluated` field it holds. A line
with the key `e` is one; `sr` (not a field) is the `seq` of the earlier line whose
`output_summary` it repeats."""

COMPACT_SPLIT: Final = "validation"
"""The split a compact line without `s` is of (most lines are)."""

_FIELD_KEYS: Final = {field: key for key, field in COMPACT_KEYS.items()}

_COMPACT_START: Final = b'{"e":'
"""How every compact per-example line begins."""

_SUMMARY_REF_MIN: Final = 16
"""Summaries shorter than this are written out again (a reference would not be shorter)."""

_MAX_INTERNED: Final = 100_000
"""Distinct summaries a writer remembers for references (bounds its memory; later ones are
written in full)."""

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_run_id(run_id: str) -> str:
    """Return `run_id` if it is usable as a file name, else raise.

    A run id is 1 to 128 characters of letters, digits, `.`, `_` and `-`, not starting with
    `.`, `_` or `-` (so it can never name a path outside the journal folder).

    Raises:
        StoreError: the id is not usable.
    """
    if not _RUN_ID.fullmatch(run_id):
        raise StoreError(
            f"invalid run id {run_id!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return run_id


def new_run_id(now: float | None = None) -> str:
    """A fresh run id that sorts by start time, e.g. `"20250101-120000-3f9a1c"` (UTC)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def journal_dir(db_path: str | os.PathLike[str]) -> Path:
    """The folder of run journals that belongs to a database file: `<db path>.journals`."""
    return Path(f"{os.fspath(db_path)}.journals")


def journal_path(db_path: str | os.PathLike[str], run_id: str) -> Path:
    """The journal of run `run_id` for a database file: `<db path>.journals/<run_id>.jsonl`.

    Raises:
        StoreError: `run_id` is not a valid run id (see `check_run_id`).
    """
    return journal_dir(db_path) / f"{check_run_id(run_id)}{JOURNAL_SUFFIX}"


def journal_is_live(path: str | os.PathLike[str]) -> bool | None:
    """Whether a live process is writing this journal right now.

    Returns:
        True: a writer holds it. False: no writer (finished, or crashed: resume it). None: the
        platform has no file locks (Windows), so nobody can tell.
    """
    return _filelock.is_locked(path)


def encode_event(event: SearchEvent) -> bytes:
    """One journal line for an event (JSON, NaN and infinities kept), without the newline.

    Text that cannot be UTF-8 (a lone surrogate, e.g. half an emoji from a broken escape in a
    model's output) is written with U+FFFD in its place (a proper surrogate pair becomes its
    character), so one odd output never stops a search from recording.
    """
    return _to_json(event.model_dump())


def _utf8_safe(value: Any) -> Any:
    """`value` with every string's lone surrogates replaced by U+FFFD (dicts, lists, keys too)."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        items = cast(dict[Any, Any], value).items()
        return {_utf8_safe(k): _utf8_safe(v) for k, v in items}
    if isinstance(value, list | tuple):
        return [_utf8_safe(v) for v in cast(list[Any] | tuple[Any, ...], value)]
    return value


def _to_json(data: Any) -> bytes:
    try:
        return pydantic_core.to_json(data, inf_nan_mode="constants")
    except pydantic_core.PydanticSerializationError:
        return pydantic_core.to_json(_utf8_safe(data), inf_nan_mode="constants")


_EXAMPLE_DEFAULTS: Final[dict[str, Any]] = {
    name: info.get_default(call_default_factory=True)
    for name, info in ExampleEvaluated.model_fields.items()
    if not info.is_required()
}
"""`ExampleEvaluated`'s defaults, which a compact line leaves out (`model_dump`'s
`exclude_defaults`, without building the dump: a default search writes 41,000 such lines)."""

_NOT_COMPACT: Final = frozenset(("seq", "type", "run_id"))


def _compact(event: ExampleEvaluated, spec_hash: str | None, summary_ref: int | None) -> bytes:
    """The compact line of a per-example event (see the module docstring): `spec_hash` is the
    hash its candidate was proposed with (left out when equal), `summary_ref` the seq of an
    earlier line holding the same summary (then it is left out)."""
    out: dict[str, Any] = {"e": event.seq}
    defaults = _EXAMPLE_DEFAULTS
    for field, value in event.__dict__.items():  # (the fields, in order; all plain data)
        if field in _NOT_COMPACT or (field in defaults and value == defaults[field]):
            continue
        if field == "spec_hash" and value == spec_hash:
            continue
        if field == "output_summary" and summary_ref is not None:
            out["sr"] = summary_ref
            continue
        if field == "split" and value == COMPACT_SPLIT:
            continue
        if isinstance(value, float) and value.is_integer() and math.copysign(1.0, value) > 0:
            value = int(value)  # 1200.0 as 1200: read back as the same float
        out[_FIELD_KEYS[field]] = value
    return _to_json(out)


class _Context:
    """What a journal's earlier lines say that a compact line leaves out."""

    def __init__(self, run_id: str | None) -> None:
        self.run_id = run_id
        self.hashes: dict[int, str] = {}
        self.summaries: dict[int, str] = {}

    def learn(self, event: SearchEvent) -> None:
        if self.run_id is None:
            self.run_id = event.run_id
        if isinstance(event, CandidateProposed):
            self.hashes.setdefault(event.candidate_idx, event.spec_hash)
        elif isinstance(event, ExampleEvaluated) and len(event.output_summary) >= _SUMMARY_REF_MIN:
            self.summaries.setdefault(event.seq, event.output_summary)

    def expand(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The event fields of a compact line."""
        data: dict[str, Any] = {"type": "example_evaluated", "run_id": self.run_id}
        for key, value in raw.items():
            if key == "sr":
                if not isinstance(value, int) or value not in self.summaries:
                    raise ValueError(f"sr: no earlier line with seq {value!r} holds a summary")
                data["output_summary"] = self.summaries[value]
            elif key in COMPACT_KEYS:
                data[COMPACT_KEYS[key]] = value
            else:
                raise ValueError(f"unknown key {key!r} in a compact per-example line")
        data.setdefault("split", COMPACT_SPLIT)
        if "spec_hash" not in data:
            candidate = data.get("candidate_idx")
            data["spec_hash"] = self.hashes.get(candidate, "") if isinstance(candidate, int) else ""
        return data


def _parse_line(line: bytes, ctx: _Context) -> SearchEvent:
    """One journal line as its event (full or compact form), learning what later lines need.

    Raises:
        ValueError: not a valid event (`pydantic.ValidationError` naming the field, or a
            compact line that is not JSON, has an unknown key or refers to no earlier line).
    """
    if line.lstrip().startswith(_COMPACT_START):
        raw: Any = json.loads(line)
        if not isinstance(raw, dict):
            raise ValueError("a compact per-example line is not a JSON object")
        event: SearchEvent = ExampleEvaluated.model_validate(ctx.expand(cast(dict[str, Any], raw)))
    else:
        event = parse_event(line)
    ctx.learn(event)
    return event


def _why(exc: ValueError) -> str:
    if isinstance(exc, pydantic.ValidationError) and exc.errors():
        first = exc.errors()[0]
        return f"{first['loc']}: {first['msg']}"
    return str(exc)


@dataclass(frozen=True, slots=True)
class JournalScan:
    """What a journal file holds, read up to its last complete line.

    Attributes:
        events: the events, in file order.
        good_bytes: the byte length of the part that holds them (where appending continues).
        torn: the bytes after it that are not a complete event (a torn last line), else b"".
        complete_tail: True when the last line was a complete event missing only its newline.
    """

    events: list[SearchEvent]
    good_bytes: int
    torn: bytes
    complete_tail: bool


def _iter_lines(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """(start offset, line without newline, has newline) for each line of `data`."""
    pos = 0
    n = len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        if end < 0:
            yield pos, data[pos:], False
            return
        yield pos, data[pos:end], True
        pos = end + 1


def scan_journal(path: str | os.PathLike[str]) -> JournalScan:
    """Read a journal, tolerating a torn last line.

    Blank lines are skipped. A last line without a newline is kept when it parses as a complete
    event (`complete_tail`), else it is the torn part.

    Raises:
        FileNotFoundError: there is no such file.
        StoreError: a line other than the last is not a valid event (the file is damaged; the
            message names the line).
    """
    data = Path(path).read_bytes()
    events: list[SearchEvent] = []
    ctx = _Context(None)
    lineno = 0
    for start, line, has_newline in _iter_lines(data):
        lineno += 1
        if not has_newline:
            if not line.strip():
                return JournalScan(events, start, data[start:], False)
            try:
                last = _parse_line(line, ctx)
            except ValueError:
                return JournalScan(events, start, data[start:], False)
            events.append(last)
            return JournalScan(events, len(data), b"", True)
        if line.strip():
            try:
                events.append(_parse_line(line, ctx))
            except ValueError as exc:  # pydantic.ValidationError, bad JSON, a bad reference
                raise StoreError(
                    f"{path}: line {lineno} is not a valid search event (the journal is "
                    f"damaged): {_why(exc)}"
                ) from exc
    return JournalScan(events, len(data), b"", False)


def read_journal(path: str | os.PathLike[str]) -> list[SearchEvent]:
    """The events of a journal, in order; a torn last line (a killed writer) is dropped.

    Raises:
        FileNotFoundError: there is no such file.
        StoreError: a line other than the last is not a valid event.
    """
    return scan_journal(path).events


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (`os.write` may write less than asked).

    Raises:
        OSError: the write failed (part of `data` may be in the file).
    """
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:  # pragma: no cover - a regular file never returns 0 for a non-empty write
            raise OSError(errno.EIO, "the journal write made no progress")
        view = view[n:]


class RunJournal:
    """Append-only writer of one run's journal. Use `create`, `resume` or `open`.

    `append(event)` writes one line and flushes it (readers in other processes see it at once);
    after the event types in `FSYNC_TYPES`, and at `close`, the file is also fsynced. Events
    must come in order: `event.seq == journal.next_seq` and one `run_id` per journal, so a
    resumed run continues its numbering. Thread-safe. A journal holds an exclusive file lock
    while open (see the module docstring); use it as a context manager or call `close`.

    Attributes:
        path: the journal file.
        run_id: the run it records (None for a new journal until the first event).
        next_seq: the `seq` the next event must carry.
        recorded: the events already in the file when it was opened (empty for a new one).
    """

    def __init__(
        self,
        path: Path,
        fh: IO[bytes],
        *,
        run_id: str | None,
        next_seq: int,
        recorded: tuple[SearchEvent, ...],
    ) -> None:
        self.path = path
        self.run_id = run_id
        self.next_seq = next_seq
        self.recorded = recorded
        self._fh: IO[bytes] | None = fh
        self._good_bytes = os.fstat(fh.fileno()).st_size
        """The file's size after the last line written in full (where a failed write is cut)."""
        self._failed: JournalWriteError | None = None
        self._lock = threading.Lock()
        self._hashes: dict[int, str] = {}
        self._summary_seq: dict[str, int] = {}
        for event in recorded:
            self._learn(event)

    def _learn(self, event: SearchEvent) -> None:
        """Remember what later compact lines may leave out (the readers' `_Context` rules)."""
        if isinstance(event, CandidateProposed):
            self._hashes.setdefault(event.candidate_idx, event.spec_hash)
        elif (
            isinstance(event, ExampleEvaluated)
            and len(event.output_summary) >= _SUMMARY_REF_MIN
            and len(self._summary_seq) < _MAX_INTERNED
        ):
            self._summary_seq.setdefault(event.output_summary, event.seq)

    def _encode(self, event: SearchEvent) -> bytes:
        if not isinstance(event, ExampleEvaluated) or self.run_id is None:
            return encode_event(event)  # the first line names the run: always in full
        ref = self._summary_seq.get(event.output_summary)
        return _compact(event, self._hashes.get(event.candidate_idx, ""), ref)

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> Self:
        """Start a new, empty journal (parent folders are created).

        Raises:
            StoreError: the file already exists (resume it instead).
        """
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            # O_APPEND: every write lands at the end, whoever else touched the file
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except FileExistsError as exc:
            raise StoreError(
                f"run journal {p} already exists: resume that run, or choose a new run id"
            ) from exc
        fh = os.fdopen(fd, "ab")
        cls._lock_or_raise(fh, p)
        return cls(p, fh, run_id=None, next_seq=0, recorded=())

    @classmethod
    def resume(cls, path: str | os.PathLike[str]) -> Self:
        """Continue an existing journal after an interruption.

        A torn last line is cut off (a complete last event missing its newline gets one), and
        `next_seq` is the last recorded event's `seq` + 1. The events already recorded are in
        `recorded`.

        Raises:
            FileNotFoundError: there is no such journal.
            StoreBusyError: another live process is writing this journal.
            StoreError: the journal is damaged before its last line, or its events disagree on
                the run id.
        """
        p = Path(path)
        fh = os.fdopen(os.open(p, os.O_RDWR | os.O_APPEND), "a+b")
        try:
            cls._lock_or_raise(fh, p)
            scan = scan_journal(p)
            fh.truncate(scan.good_bytes)
            if scan.complete_tail:
                fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        except BaseException:
            fh.close()
            raise
        run_ids = {e.run_id for e in scan.events}
        if len(run_ids) > 1:
            fh.close()
            raise StoreError(f"{p}: events of several runs in one journal: {sorted(run_ids)}")
        run_id = scan.events[0].run_id if scan.events else None
        next_seq = scan.events[-1].seq + 1 if scan.events else 0
        return cls(p, fh, run_id=run_id, next_seq=next_seq, recorded=tuple(scan.events))

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Self:
        """`resume` the journal if the file exists, else `create` it."""
        p = Path(path)
        return cls.resume(p) if p.exists() else cls.create(p)

    @staticmethod
    def _lock_or_raise(fh: IO[bytes], path: Path) -> None:
        if not _filelock.lock_exclusive(fh):
            fh.close()
            raise StoreBusyError(
                f"run journal {path} is being written by another live process (is that search "
                "still running?); wait for it to finish or stop it before resuming"
            )

    def append(self, event: SearchEvent) -> None:
        """Write one event as one line, flushed (and fsynced for `FSYNC_TYPES`).

        A write the file system refuses (`ENOSPC`: a full disk; `EIO`, `EDQUOT`, ...) cuts the
        part of the line that reached the file, so the journal ends with its last complete
        line, and raises `JournalWriteError`; every later `append` raises it again (nothing
        is written out of order), so a resumed run continues from that line.

        Raises:
            ValueError: `event.seq` is not `next_seq`, or its run id is not this journal's.
            JournalWriteError: the line could not be written, now or by an earlier call
                (`"cannot write the run journal <path>: <why>"`).
            StoreError: the journal is closed.
        """
        with self._lock:
            fh = self._require_open()
            if self._failed is not None:
                raise self._failed
            line = self._encode(event) + b"\n"
            if self.run_id is not None and event.run_id != self.run_id:
                raise ValueError(
                    f"event of run {event.run_id!r} appended to the journal of {self.run_id!r}"
                )
            if event.seq != self.next_seq:
                raise ValueError(
                    f"event seq {event.seq} out of order: this journal expects {self.next_seq}"
                )
            check_run_id(event.run_id)
            try:
                _write_all(fh.fileno(), line)  # unbuffered: no bytes left behind in a buffer
                if event.type in FSYNC_TYPES:
                    os.fsync(fh.fileno())
            except OSError as exc:
                raise self._fail(fh, exc) from exc
            self._good_bytes += len(line)
            self._learn(event)
            self.run_id = event.run_id
            self.next_seq += 1

    def _fail(self, fh: IO[bytes], exc: OSError) -> JournalWriteError:
        """Cut what a failed write left after the last complete line; remember the error."""
        with contextlib.suppress(OSError):  # shrinking a file needs no space
            os.ftruncate(fh.fileno(), self._good_bytes)
        why = exc.strerror or str(exc)
        self._failed = JournalWriteError(
            f"cannot write the run journal {self.path}: {why} (everything journaled before "
            "is kept)",
            path=str(self.path),
            errno=exc.errno,
        )
        return self._failed

    def sync(self) -> None:
        """Flush and fsync now."""
        with self._lock:
            fh = self._require_open()
            fh.flush()
            os.fsync(fh.fileno())

    def close(self) -> None:
        """Fsync, release the lock and close (idempotent)."""
        with self._lock:
            fh = self._fh
            if fh is None:
                return
            self._fh = None
            try:
                fh.flush()
                os.fsync(fh.fileno())
            except OSError:
                if self._failed is None:  # a journal that failed already said so
                    raise
            finally:
                fh.close()

    @property
    def closed(self) -> bool:
        """True after `close`."""
        return self._fh is None

    def _require_open(self) -> IO[bytes]:
        if self._fh is None:
            raise StoreError(f"run journal {self.path} is closed")
        return self._fh

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunJournal({str(self.path)!r}, run_id={self.run_id!r}, next_seq={self.next_seq})"
