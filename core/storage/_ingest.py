"""Turning JSON lines of search events into rows, in SQL (the fast path for big journals).

Events reach the store as JSON lines: a journal's new bytes, or `record_events` encoding its
events the same way (`encode_event`). DuckDB's `read_json` reads them into a temporary table
with the union of every event type's columns, and a handful of `INSERT ... SELECT` statements
route each type to its table. 100,000 per-example rows with their traces take about 1.5 s of
CPU (`bench/bench_store.py`); Python never touches a row. When a chunk has a line `read_json`
cannot read, each line is validated with `parse_event` instead (also when a line is JSON but
not an event): bad lines are recorded in `ingest_errors` and skipped (a torn line with a
complete event glued to its end gives that event back), good ones are re-encoded and read as
above.

Idempotency: the `events` table's key `(run_id, seq)` is the gate. Only events not stored yet
go on to the other tables (a `seq` repeated within one chunk: its first line), whose keys also
make a replayed result (same candidate, split, example and trial under a new `seq`) a no-op,
first one wins: within a chunk the lowest `seq` is kept explicitly (never left to the order in
which DuckDB happens to insert a parallel batch), across chunks the stored row stays.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import duckdb
import pydantic

from core.errors import raise_if_interrupt
from core.storage.journal import COMPACT_KEYS, COMPACT_SPLIT, encode_event
from core.vocab.events import ExampleEvaluated, parse_event

__all__ = [
    "Delta",
    "apply_delta",
    "load_delta",
    "lines_before",
    "load_delta_from_file",
    "record_errors",
    "split_complete_lines",
]

MAX_LINE_BYTES: Final = 256 * 1024 * 1024
"""The largest event line `read_json` accepts (a very big trace), bytes."""

_USUAL_LINE_BYTES: Final = 16 * 1024 * 1024
"""`read_json`'s `maximum_object_size` on a first try (its default). DuckDB sizes its read
buffers from it: with `MAX_LINE_BYTES` a 150 MB journal is one buffer, parsed by one thread
(0.58 s instead of 0.37 s on two idle cores). Lines up to about twice this are read; a longer
one makes the read fail, and it is retried with `MAX_LINE_BYTES`."""

_COLUMNS: Final[dict[str, str]] = {
    "run_id": "VARCHAR",
    "seq": "BIGINT",
    "ts": "DOUBLE",
    "type": "VARCHAR",
    # run_started
    "problem": "VARCHAR",
    "strategy": "VARCHAR",
    "seed": "BIGINT",
    "config": "JSON",
    "problem_config": "JSON",
    "resumed": "BOOLEAN",
    # candidate_proposed
    "candidate_idx": "INTEGER",
    "generation": "INTEGER",
    "spec_hash": "VARCHAR",
    "spec_json": "VARCHAR",
    "parent_idx": "INTEGER",
    "operator": "VARCHAR",
    "thought": "VARCHAR",
    "design_cost_usd": "DOUBLE",
    "design_requests": "INTEGER",
    "design_input_tokens": "BIGINT",
    "design_output_tokens": "BIGINT",
    "status": "VARCHAR",
    "reason": "VARCHAR",
    # example_evaluated
    "split": "VARCHAR",
    "example_id": "VARCHAR",
    "trial": "INTEGER",
    "accuracy": "DOUBLE",
    "cost_usd": "DOUBLE",
    "latency_ms": "DOUBLE",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "requests": "BIGINT",
    "error": "VARCHAR",
    "output_summary": "VARCHAR",
    "cached": "BOOLEAN",
    "trace": "VARCHAR",
    # candidate_evaluated
    "n_examples": "INTEGER",
    "n_agents": "INTEGER",
    "depth": "INTEGER",
    "aggregate_score": "DOUBLE",
    "valid": "BOOLEAN",
    "invalid_reason": "VARCHAR",
    "error_rate": "DOUBLE",
    "blank_rate": "DOUBLE",
    "stdev": "DOUBLE",
    "same_as": "INTEGER",
    # archive_snapshot
    "entries": "INTEGER[]",
    "front": "INTEGER[]",
    "best_idx": "INTEGER",
    "best_score": "DOUBLE",
    "hypervolume": "DOUBLE",
    "n_evaluations": "BIGINT",
    "cost_usd_total": "DOUBLE",
    # log
    "level": "VARCHAR",
    "message": "VARCHAR",
    # run_finished
    "budget_used": "JSON",
}
"""Every event type's fields with their DuckDB types (shared names have the same meaning)."""

_COMPACT_COLUMNS: Final[dict[str, str]] = {
    key: _COLUMNS[field] for key, field in COMPACT_KEYS.items()
} | {"sr": "BIGINT"}
"""The short keys of compact per-example lines (`core.storage.journal.COMPACT_KEYS`), with the
type of the field each holds; `sr`: the seq of the line whose summary it repeats."""

_COLUMNS_SQL: Final = (
    "{" + ", ".join(f"'{k}': '{v}'" for k, v in (_COLUMNS | _COMPACT_COLUMNS).items()) + "}"
)


def _normalised_select() -> str:
    """The SELECT list that reads a compact per-example line as the event it stands for: its
    short keys into the event's columns, `type` and (from `$run`, the journal's run) `run_id`;
    `spec_hash` and a referenced summary are filled by `_RESOLVE` once the delta is complete."""
    cols: list[str] = []
    short = {field: key for key, field in COMPACT_KEYS.items()}
    for name in _COLUMNS:
        if name == "run_id":
            cols.append('CASE WHEN "e" IS NOT NULL THEN $run ELSE run_id END AS run_id')
        elif name == "type":
            cols.append(
                "CASE WHEN \"e\" IS NOT NULL THEN 'example_evaluated' ELSE type END AS type"
            )
        elif name == "trace":  # left out when empty: "[]", as the full form writes it
            cols.append(
                """CASE WHEN "e" IS NOT NULL THEN coalesce("tr", '[]') ELSE trace END AS trace"""
            )
        elif name == "split":
            cols.append(
                f"""CASE WHEN "e" IS NOT NULL THEN coalesce("s", '{COMPACT_SPLIT}') ELSE split END"""
                " AS split"
            )
        elif name in short:
            cols.append(
                f'CASE WHEN "e" IS NOT NULL THEN "{short[name]}" ELSE "{name}" END AS "{name}"'
            )
        else:
            cols.append(f'"{name}"')
    cols.append('"sr" AS summary_ref')
    cols.append('"e" IS NOT NULL AS compact')
    return ", ".join(cols)


_SELECT_SQL: Final = _normalised_select()

_LIFECYCLE: Final = "('run_started', 'run_finished')"


@dataclass(slots=True)
class Delta:
    """New event lines loaded into the temporary table `_delta` of one connection.

    Attributes:
        errors: `(byte offset in the chunk, error, first 200 characters)` per skipped line.
        line_index: the 0-based line of the chunk each error's offset is on.
        first_line: the 1-based journal line the chunk starts with, when the caller knows it
            (then `record_errors` records line numbers).
    """

    errors: list[tuple[int, str, str]] = field(default_factory=list[tuple[int, str, str]])
    line_index: dict[int, int] = field(default_factory=dict[int, int])
    first_line: int | None = None

    def number_lines(self, chunk: bytes) -> None:
        """Fill `line_index` from the chunk the errors were found in."""
        line = counted = 0
        for offset in sorted({at for at, _, _ in self.errors}):
            line += chunk.count(b"\n", counted, offset)
            counted = offset
            self.line_index[offset] = line


def split_complete_lines(data: bytes) -> bytes:
    """The prefix of `data` that ends with its last newline (a torn tail is left out)."""
    end = data.rfind(b"\n")
    return b"" if end < 0 else data[: end + 1]


def _read_json_into_delta(con: duckdb.DuckDBPyConnection, path: str, run_id: str | None) -> None:
    con.execute("DROP TABLE IF EXISTS _delta")
    for limit in (_USUAL_LINE_BYTES, MAX_LINE_BYTES):
        try:
            con.execute(
                f"CREATE TEMP TABLE _delta AS SELECT {_SELECT_SQL} FROM read_json($path, "
                f"format = 'newline_delimited', columns = {_COLUMNS_SQL}, "
                f"maximum_object_size = {limit})",
                {"path": path, "run": run_id},
            )
            return
        except duckdb.InvalidInputException as exc:
            if limit == MAX_LINE_BYTES or "maximum_object_size" not in str(exc):
                raise


_EVENT_TYPES: Final = (
    "('run_started', 'candidate_proposed', 'example_evaluated', 'candidate_evaluated', "
    "'archive_snapshot', 'log', 'run_finished')"
)


def _all_rows_are_events(con: duckdb.DuckDBPyConnection, run_id: str | None) -> bool:
    """False when `_delta` has a row that is valid JSON but not an event (no key, unknown
    type, a NaN or infinite `ts`, which `parse_event` refuses), or an event of another run than
    `run_id` (when given): then the lines go through `parse_event` one by one, so each is
    recorded."""
    row = con.execute(
        "SELECT count(*) FROM _delta WHERE run_id IS NULL OR seq IS NULL OR ts IS NULL "
        f"OR NOT isfinite(ts) OR type IS NULL OR type NOT IN {_EVENT_TYPES} "
        "OR ($run IS NOT NULL AND run_id <> $run)",
        {"run": run_id},
    ).fetchone()
    return row is not None and row[0] == 0


def _write_temp(data: bytes) -> str:
    fd, name = tempfile.mkstemp(prefix="ts-ingest-", suffix=".jsonl")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return name


_Line = tuple[int, bytes]
"""`(byte offset in the chunk, the line re-encoded, newline included)`."""


def _validated(chunk: bytes, run_id: str | None) -> tuple[list[_Line], list[tuple[int, str, str]]]:
    """Re-encode each valid line of `chunk` (an event, of run `run_id` when given); report the
    others."""
    good: list[_Line] = []
    errors: list[tuple[int, str, str]] = []
    pos = 0
    for raw in chunk.split(b"\n"):
        start = pos
        pos += len(raw) + 1
        if not raw.strip():
            continue
        if raw.lstrip().startswith(_COMPACT_START):
            why = _compact_error(raw, run_id)
            if why is None:
                good.append((start, raw + b"\n"))  # kept as written: `_RESOLVE` fills it in
            else:
                errors.append((start, why, _head(raw)))
            continue
        try:
            event = parse_event(raw)
        except pydantic.ValidationError as exc:
            glued = _glued_event(raw)
            if glued is not None:
                at, after = glued
                msg = "torn line: an event follows it on the same line (kept)"
                errors.append((start, msg, _head(raw[:at])))
                good_after, errors_after = _validated(after, run_id)
                good += [(start + at + i, line) for i, line in good_after]
                errors += [(start + at + i, m, h) for i, m, h in errors_after]
                continue
            msg = _first_error(exc)
            errors.append((start, msg, _head(raw)))
            continue
        if run_id is not None and event.run_id != run_id:
            msg = f"an event of run {event.run_id!r} in the journal of run {run_id!r}"
            errors.append((start, msg, _head(raw)))
            continue
        good.append((start, encode_event(event) + b"\n"))
    return good, errors


_COMPACT_START: Final = b'{"e":'
"""How every compact per-example line begins (`core.storage.journal`)."""


def _compact_error(raw: bytes, run_id: str | None) -> str | None:
    """Why a compact per-example line cannot be stored, or None: it must be one JSON object
    of known short keys whose values are valid for their fields, in a run's journal."""
    if run_id is None:
        return "a compact per-example line outside its run's journal"
    try:
        data: Any = json.loads(raw)
    except ValueError as exc:
        return f"not JSON: {exc}"
    if not isinstance(data, dict):
        return "a compact per-example line is not a JSON object"
    fields: dict[str, Any] = {"run_id": run_id, "spec_hash": "", "split": COMPACT_SPLIT}
    for key, value in cast(dict[str, Any], data).items():
        if key == "sr":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                return f"sr: not the seq of an earlier line (got {value!r})"
        elif key in COMPACT_KEYS:
            fields[COMPACT_KEYS[key]] = value
        else:
            return f"unknown key {key!r} in a compact per-example line"
    try:
        ExampleEvaluated.model_validate(fields)
    except pydantic.ValidationError as exc:
        return _first_error(exc)
    return None


_RANGE_ERRORS: Final = frozenset({"less_than_equal", "greater_than_equal", "finite_number"})
"""Pydantic's error types for a number out of a field's range."""


def _first_error(exc: pydantic.ValidationError) -> str:
    """The first error of a line that is not an event, naming where it is, e.g.
    `('example_evaluated', 'input_tokens'): Input should be less than or equal to
    9223372036854775807 (got 100000000000000000000)`: a number out of range is quoted."""
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    msg = f"{first['loc']}: {first['msg']}"
    got: object = first.get("input")
    if first["type"] not in _RANGE_ERRORS or not isinstance(got, int | float):
        return msg
    try:
        text = repr(got)
    except ValueError:  # an int of more digits than Python converts to text
        return msg
    return f"{msg} (got {text if len(text) <= 40 else text[:37] + '...'})"


_EVENT_START: Final = b'{"run_id":'
"""How every line `encode_event` writes begins."""


def _glued_event(raw: bytes) -> tuple[int, bytes] | None:
    """A complete event at the end of a line that is not one: a writer stopped mid-line and the
    next line was appended right after the torn part. Returns `(its offset in raw, its bytes)`
    for the first place an event starts from which the rest of the line parses."""
    starts = sorted(
        at for marker in (_EVENT_START, _COMPACT_START) for at in _find_all(raw, marker)
    )
    for at in starts:
        tail = raw[at:]
        if tail.startswith(_COMPACT_START):
            if _compact_error(tail, "r") is None:  # any run id: only the shape is checked
                return at, tail
            continue
        try:
            parse_event(tail)
            return at, tail
        except pydantic.ValidationError:
            continue
    return None


def _find_all(raw: bytes, marker: bytes) -> list[int]:
    """Every offset after 0 where `marker` starts in `raw`."""
    found: list[int] = []
    at = raw.find(marker, 1)
    while at > 0:
        found.append(at)
        at = raw.find(marker, at + 1)
    return found


def _head(raw: bytes) -> str:
    return raw[:200].decode("utf-8", "replace")


_DUCKDB_LINE_ERROR = re.compile(r"in line \d+: ([^\n]*)")


def _write_lines(name: str, lines: list[_Line]) -> None:
    with open(name, "wb") as fh:
        fh.write(b"".join(line for _, line in lines))


def _rejected(
    con: duckdb.DuckDBPyConnection, name: str, lines: list[_Line], run_id: str | None
) -> dict[int, str]:
    """The lines `read_json` cannot read although they are events (a number out of a column's
    range, say), by offset with DuckDB's reason, found by halving the failing parts.

    One bad line among n costs about 2n lines read again; only a chunk that failed gets here.
    """
    bad: dict[int, str] = {}
    parts = [lines]
    while parts:
        part = parts.pop()
        _write_lines(name, part)
        try:
            _read_json_into_delta(con, name, run_id)
            continue
        except duckdb.Error as exc:
            raise_if_interrupt(exc)  # a Ctrl-C is no bad line: never bisect the batch for it
            if len(part) > 1:
                mid = len(part) // 2
                parts += [part[mid:], part[:mid]]
                continue
            m = _DUCKDB_LINE_ERROR.search(str(exc))
            bad[part[0][0]] = f"the database cannot hold it: {m[1] if m else exc}"
    return bad


def load_delta(con: duckdb.DuckDBPyConnection, chunk: bytes, *, run_id: str | None = None) -> Delta:
    """Load complete JSON event lines into the temp table `_delta` (replacing it).

    Call it outside a transaction: a line `read_json` rejects aborts the statement, and the
    per-line fallback then runs in a fresh one. Lines that are not events, and events that
    DuckDB's columns cannot hold (e.g. a count beyond BIGINT), are left out and listed in the
    returned `Delta.errors`; they never keep the other lines out.

    Args:
        con: the connection (cursor) whose temp table it is.
        chunk: complete lines (ending with a newline).
        run_id: the only run the lines may be of (a journal's), or None for any.
    """
    delta = Delta()
    name = _write_temp(chunk)
    try:
        try:
            _read_json_into_delta(con, name, run_id)
            if _all_rows_are_events(con, run_id):
                return delta
        except duckdb.Error as exc:
            raise_if_interrupt(exc)
        good, delta.errors = _validated(chunk, run_id)
        delta.number_lines(chunk)
        _write_lines(name, good)
        try:
            _read_json_into_delta(con, name, run_id)
            return delta
        except duckdb.Error as exc:
            raise_if_interrupt(exc)
        rejected = _rejected(con, name, good, run_id)
        raw = {start: line for start, line in good}
        delta.errors = sorted(
            [*delta.errors, *((at, why, _head(raw[at])) for at, why in rejected.items())]
        )
        delta.number_lines(chunk)
        _write_lines(name, [line for line in good if line[0] not in rejected])
        _read_json_into_delta(con, name, run_id)
        return delta
    finally:
        Path(name).unlink(missing_ok=True)


def load_delta_from_file(
    con: duckdb.DuckDBPyConnection, path: Path, *, run_id: str | None = None
) -> bool:
    """Load a whole journal file into `_delta` directly (no copy); False if DuckDB rejects it.

    The fast path for a big journal ingested for the first time, for a file that ended with a
    newline when its size was taken. A writer may still append: `read_json` then also reads the
    complete lines it wrote since (stored now, and found already stored by the next ingest),
    and a line it is in the middle of writing makes the read fail (False). On False, use
    `load_delta`.
    """
    try:
        _read_json_into_delta(con, os.fspath(path), run_id)
    except duckdb.Error as exc:
        raise_if_interrupt(exc)
        return False
    return _all_rows_are_events(con, run_id)


_KEYS: Final[tuple[str, ...]] = (
    "DELETE FROM _delta WHERE run_id IS NULL OR seq IS NULL OR ts IS NULL OR type IS NULL",
    "DROP TABLE IF EXISTS _new",
    """
    CREATE TEMP TABLE _new AS
    SELECT rid, run_id, seq FROM (
        SELECT d.rowid AS rid, d.run_id, d.seq,
               row_number() OVER (PARTITION BY d.run_id, d.seq ORDER BY d.rowid) AS rn
        FROM _delta d
        WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.run_id = d.run_id AND e.seq = d.seq)
    ) WHERE rn = 1
    """,
)
"""The events not stored yet, the first line of each `(run_id, seq)` (the idempotency gate).

`_delta`'s `rowid` is its line order: `read_json` reads a file in order and a table keeps its
insertion order (`preserve_insertion_order`, DuckDB's default), so the first line wins."""

_ONLY_NEW: Final = """
    CREATE TEMP TABLE _src AS SELECT d.* FROM _delta d SEMI JOIN _new n ON d.rowid = n.rid
"""
"""The new events' rows, once each (only built when some rows are old or repeated)."""

_EVAL_WHERE: Final = (
    "type = 'example_evaluated' AND candidate_idx IS NOT NULL AND split IS NOT NULL "
    "AND example_id IS NOT NULL"
)
"""The per-example rows of a delta that can be stored."""

_EVAL_REPEATS: Final = f"""
    CREATE TEMP TABLE _evdrop AS
    SELECT run_id, seq FROM (
        SELECT run_id, seq, row_number() OVER (
            PARTITION BY run_id, candidate_idx, split, example_id, coalesce(trial, 0)
            ORDER BY seq) AS rn
        FROM {{src}} WHERE {_EVAL_WHERE}
    ) WHERE rn > 1
"""
"""Per-example rows that repeat an earlier row's key in the same delta (a replayed result under
a later seq): dropped, so the first one wins (format `src`). Narrow: no trace is moved."""

_APPLY: Final[tuple[tuple[str | None, str], ...]] = (
    (
        None,
        """
        INSERT INTO events (run_id, seq, ts, type, level, message)
        SELECT run_id, seq, ts, type,
               CASE WHEN type = 'log' THEN level END, CASE WHEN type = 'log' THEN message END
        FROM {src}
        """,
    ),
    (
        None,
        """
        INSERT INTO runs (run_id, status, n_resumes, n_events, last_event_at)
        SELECT run_id, 'running', 0, count(*), max(ts) FROM {src} GROUP BY run_id
        ON CONFLICT (run_id) DO UPDATE SET
            n_events = n_events + excluded.n_events,
            last_event_at = greatest(coalesce(last_event_at, excluded.last_event_at),
                                     excluded.last_event_at)
        """,
    ),
    # who the run is: its first run_started
    (
        "run_started",
        """
        UPDATE runs SET problem = s.problem, strategy = s.strategy, seed = s.seed,
                        config = s.config, problem_config = s.problem_config, started_at = s.ts
        FROM (
            SELECT * FROM {src} WHERE type = 'run_started'
            QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq) = 1
        ) s
        WHERE runs.run_id = s.run_id AND (runs.started_at IS NULL OR s.ts < runs.started_at)
        """,
    ),
    (
        "run_started",
        """
        UPDATE runs SET n_resumes = runs.n_resumes + s.n
        FROM (
            SELECT run_id, count(*) AS n FROM {src}
            WHERE type = 'run_started' AND resumed GROUP BY run_id
        ) s
        WHERE runs.run_id = s.run_id
        """,
    ),
    # where the run is: its last lifecycle event (unless a later one is already stored)
    (
        "lifecycle",
        f"""
        UPDATE runs SET
            status = CASE WHEN l.type = 'run_started' THEN 'running'
                          ELSE coalesce(l.status, 'completed') END,
            finished_at = CASE WHEN l.type = 'run_finished' THEN l.ts END,
            reason = CASE WHEN l.type = 'run_finished' THEN l.reason END,
            best_idx = CASE WHEN l.type = 'run_finished' THEN l.best_idx ELSE runs.best_idx END,
            budget_used = CASE WHEN l.type = 'run_finished' THEN l.budget_used
                               ELSE runs.budget_used END
        FROM (
            SELECT * FROM {{src}} WHERE type IN {_LIFECYCLE}
            QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
        ) l
        WHERE runs.run_id = l.run_id
          AND NOT EXISTS (
              SELECT 1 FROM events e
              WHERE e.run_id = l.run_id AND e.type IN {_LIFECYCLE} AND e.seq > l.seq
          )
        """,
    ),
    (
        "candidate_proposed",
        """
        INSERT INTO specs (spec_hash, spec_json, first_seen)
        SELECT spec_hash, arg_min(spec_json, seq), min(ts) FROM {src}
        WHERE type = 'candidate_proposed' AND coalesce(spec_hash, '') <> ''
          AND spec_json IS NOT NULL
        GROUP BY spec_hash
        ON CONFLICT DO NOTHING
        """,
    ),
    (
        "candidate_proposed",
        """
        INSERT INTO candidates (run_id, candidate_idx, seq, ts, generation, parent_idx, operator,
                                thought, status, reason, spec_hash, proposal_text, design_cost_usd,
                                design_requests, design_input_tokens, design_output_tokens)
        SELECT run_id, candidate_idx, seq, ts, coalesce(generation, -1), parent_idx,
               coalesce(operator, ''), coalesce(thought, ''), coalesce(status, 'proposed'),
               reason, coalesce(spec_hash, ''),
               CASE WHEN coalesce(spec_hash, '') = '' THEN spec_json END,
               coalesce(design_cost_usd, 0.0), coalesce(design_requests, 0),
               coalesce(design_input_tokens, 0), coalesce(design_output_tokens, 0)
        FROM {src} WHERE type = 'candidate_proposed' AND candidate_idx IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY run_id, candidate_idx ORDER BY seq) = 1
        ON CONFLICT DO NOTHING
        """,
    ),
    # file order (no sort: the rows carry big traces); repeated keys are dropped beforehand
    # (see `_evaluations`) and stored ones stay, so the first one wins
    (
        "example_evaluated",
        f"""
        INSERT INTO evaluations (run_id, seq, ts, candidate_idx, spec_hash, split, example_id,
                                 trial, accuracy, cost_usd, latency_ms, input_tokens,
                                 output_tokens, requests, status, error, output_summary, cached,
                                 trace)
        SELECT run_id, seq, ts, candidate_idx, coalesce(spec_hash, ''), split, example_id,
               coalesce(trial, 0), accuracy, coalesce(cost_usd, 0.0), coalesce(latency_ms, 0.0),
               coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(requests, 0),
               coalesce(status, 'ok'), error, coalesce(output_summary, ''),
               coalesce(cached, false), trace
        FROM {{src}} s
        WHERE {_EVAL_WHERE}{{not_dropped}}
        {{on_conflict}}
        """,
    ),
    (
        "candidate_evaluated",
        """
        INSERT INTO candidate_results (run_id, seq, ts, candidate_idx, spec_hash, split,
                                       n_examples, accuracy, cost_usd, latency_ms, n_agents,
                                       depth, aggregate_score, valid, invalid_reason,
                                       error_rate, blank_rate, stdev, same_as)
        SELECT run_id, seq, ts, candidate_idx, coalesce(spec_hash, ''), split,
               coalesce(n_examples, 0), accuracy, cost_usd, latency_ms, n_agents, depth,
               aggregate_score, coalesce(valid, true), invalid_reason, error_rate, blank_rate,
               stdev, same_as
        FROM {src}
        WHERE type = 'candidate_evaluated' AND candidate_idx IS NOT NULL AND split IS NOT NULL
        ON CONFLICT DO NOTHING
        """,
    ),
    (
        "archive_snapshot",
        """
        INSERT INTO snapshots (run_id, seq, ts, generation, entries, front, best_idx,
                               best_score, hypervolume, n_evaluations, cost_usd_total)
        SELECT run_id, seq, ts, coalesce(generation, -1), coalesce(entries, []::INTEGER[]),
               coalesce(front, []::INTEGER[]), best_idx, best_score, hypervolume,
               coalesce(n_evaluations, 0), coalesce(cost_usd_total, 0.0)
        FROM {src} WHERE type = 'archive_snapshot'
        ON CONFLICT DO NOTHING
        """,
    ),
)
"""`(event type it needs, statement)`: route the new events to their tables (format `src`: the
table of new rows). A statement runs only when its type is among the new events (None: always;
`"lifecycle"`: run_started or run_finished). The lifecycle update runs after the events insert,
so it sees every stored lifecycle event."""


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _evaluations(con: duckdb.DuckDBPyConnection, src: str) -> dict[str, str]:
    """Prepare the per-example insert of `src`: the `_evdrop` table and the insert's clauses.

    Returns:
        `not_dropped` (a filter that leaves out `_evdrop`'s rows, or "" when it is empty) and
        `on_conflict` (stored keys stay).
    """
    con.execute("DROP TABLE IF EXISTS _evdrop")
    con.execute(_EVAL_REPEATS.format(src=src))
    dropped = _count(con, "SELECT count(*) FROM _evdrop") > 0
    return {
        "not_dropped": (
            " AND NOT EXISTS (SELECT 1 FROM _evdrop x WHERE x.run_id = s.run_id AND x.seq = s.seq)"
            if dropped
            else ""
        ),
        "on_conflict": "ON CONFLICT DO NOTHING",
    }


_RESOLVE: Final[tuple[str, ...]] = (
    # a compact line without `h`: the hash its candidate was first proposed with
    """
    UPDATE _delta SET spec_hash = m.spec_hash FROM (
        SELECT run_id, candidate_idx, arg_min(spec_hash, seq) AS spec_hash FROM (
            SELECT run_id, candidate_idx, coalesce(spec_hash, '') AS spec_hash, seq FROM _delta
            WHERE type = 'candidate_proposed' AND candidate_idx IS NOT NULL
            UNION ALL
            SELECT c.run_id, c.candidate_idx, c.spec_hash, -1 FROM candidates c
            WHERE c.run_id IN (SELECT DISTINCT run_id FROM _delta WHERE compact)
        ) GROUP BY run_id, candidate_idx
    ) m
    WHERE _delta.compact AND _delta.spec_hash IS NULL
      AND _delta.run_id = m.run_id AND _delta.candidate_idx = m.candidate_idx
    """,
    # a compact line with `sr`: the summary of the line it names (in this delta, or stored)
    """
    UPDATE _delta SET output_summary = m.output_summary FROM (
        SELECT run_id, seq, arg_min(output_summary, rank) AS output_summary FROM (
            SELECT run_id, seq, output_summary, 1 AS rank FROM _delta
            WHERE type = 'example_evaluated' AND output_summary IS NOT NULL
              AND seq IN (SELECT summary_ref FROM _delta)
            UNION ALL
            SELECT v.run_id, v.seq, v.output_summary, 0 FROM evaluations v
            WHERE v.run_id IN (SELECT DISTINCT run_id FROM _delta WHERE summary_ref IS NOT NULL)
              AND v.seq IN (SELECT summary_ref FROM _delta)
        ) GROUP BY run_id, seq
    ) m
    WHERE _delta.summary_ref IS NOT NULL AND _delta.run_id = m.run_id
      AND _delta.summary_ref = m.seq
    """,
)
"""What compact per-example lines leave out, filled in before the delta is stored (a reference
to no line found leaves `output_summary` empty; a missing candidate leaves `spec_hash` "")."""


def apply_delta(con: duckdb.DuckDBPyConnection, *, journal: str | None = None) -> int:
    """Store the events of `_delta` that are new; call inside a transaction.

    Args:
        con: the connection holding `_delta` (in an open transaction).
        journal: the journal file name the events came from, recorded on their runs.

    Returns:
        How many events were new.
    """
    if _count(con, "SELECT count(*) FROM _delta WHERE compact"):
        for stmt in _RESOLVE:
            con.execute(stmt)
    for stmt in _KEYS:
        con.execute(stmt)
    n_new = _count(con, "SELECT count(*) FROM _new")
    src = "_delta"
    if n_new != _count(con, "SELECT count(*) FROM _delta"):
        con.execute("DROP TABLE IF EXISTS _src")
        con.execute(_ONLY_NEW)
        src = "_src"
    if n_new:
        types = {str(r[0]) for r in con.execute(f"SELECT DISTINCT type FROM {src}").fetchall()}
        if types & {"run_started", "run_finished"}:
            types.add("lifecycle")
        for needs, stmt in _APPLY:
            if needs == "example_evaluated" and needs in types:
                con.execute(stmt.format(src=src, **_evaluations(con, src)))
            elif needs is None or needs in types:
                con.execute(stmt.format(src=src))
        if journal is not None:
            con.execute(
                "UPDATE runs SET journal = ? WHERE run_id IN (SELECT DISTINCT run_id FROM _new)",
                [journal],
            )
    for table in ("_evdrop", "_src", "_new", "_delta"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    return n_new


def lines_before(path: Path, offset: int) -> int:
    """How many lines of the file end before byte `offset` (newlines counted, 1 MB at a time)."""
    n = 0
    left = offset
    with path.open("rb") as fh:
        while left > 0:
            block = fh.read(min(left, 1 << 20))
            if not block:
                break
            n += block.count(b"\n")
            left -= len(block)
    return n


def record_errors(
    con: duckdb.DuckDBPyConnection, journal: str, base_offset: int, delta: Delta
) -> None:
    """Record the lines a delta skipped (inside the ingest's transaction), numbered from
    `delta.first_line` when it is set."""
    now = time.time()
    for offset, error, head in delta.errors:
        index = delta.line_index.get(offset)
        line = None if delta.first_line is None or index is None else delta.first_line + index
        con.execute(
            "INSERT INTO ingest_errors (journal, byte_offset, error, line_head, recorded_at, "
            "line_no) VALUES (?, ?, ?, ?, ?, ?)",
            [journal, base_offset + offset, error, head, now, line],
        )
