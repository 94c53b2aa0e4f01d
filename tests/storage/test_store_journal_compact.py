"""Compact per-example journal lines (part of keeping a run's journal small): what they leave out,
that every reader puts it back (read_journal, a resumed writer, the store's ingest, whole or chunk
by chunk), and that a damaged one is skipped and recorded."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from core.search.events import (
    CandidateProposed,
    ExampleEvaluated,
    RunStarted,
    SearchEvent,
)
from core.storage import DuckDBRunStore, RunJournal, journal_path, read_journal

RUN = "run-c"
SUMMARY = "{'question': 'How many apples?', 'answer': 42}"  # 47 characters: referenced
HASH0 = "a" * 64
HASH1 = "b" * 64


def _example(seq: int, idx: int, ex: str, **fields: Any) -> ExampleEvaluated:
    base: dict[str, Any] = {
        "run_id": RUN,
        "seq": seq,
        "ts": 100.0 + seq,
        "candidate_idx": idx,
        "spec_hash": HASH0 if idx == 0 else HASH1,
        "split": "validation",
        "example_id": ex,
        "accuracy": 1.0,
        "cost_usd": 0.0025,
        "latency_ms": 1200.0,
        "input_tokens": 31,
        "output_tokens": 24,
        "requests": 1,
        "output_summary": SUMMARY,
    }
    return ExampleEvaluated(**(base | fields))


def _events() -> list[SearchEvent]:
    return [
        RunStarted(run_id=RUN, seq=0, ts=100.0, problem="p", strategy="random", seed=1),
        CandidateProposed(
            run_id=RUN, seq=1, ts=101.0, candidate_idx=0, generation=-1, spec_hash=HASH0,
            spec_json="{}", operator="seed",
        ),
        _example(2, 0, "e1"),
        CandidateProposed(
            run_id=RUN, seq=3, ts=103.0, candidate_idx=1, generation=0, spec_hash=HASH1,
            spec_json="{}", parent_idx=0, operator="mutate:x",
        ),
        _example(4, 1, "e1", cached=True),  # same summary: a reference
        _example(5, 1, "e2", spec_hash="c" * 64, output_summary="short", trial=1, split="test"),
        _example(
            6, 1, "e3", accuracy=math.nan, status="invalid", error="nan_accuracy",
            output_summary="", trace=[{"span_id": 0, "name": "solver"}],
        ),
    ]  # fmt: skip


def _write(path: Path, events: list[SearchEvent]) -> list[bytes]:
    with RunJournal.create(path) as j:
        for e in events:
            j.append(e)
    return path.read_bytes().split(b"\n")


def _same_nan(a: list[SearchEvent], b: list[SearchEvent]) -> bool:
    return [e.model_dump_json() for e in a] == [e.model_dump_json() for e in b]


def test_compact_lines_leave_out_what_the_journal_holds(tmp_path: Path) -> None:
    lines = _write(tmp_path / f"{RUN}.jsonl", _events())
    assert lines[0].startswith(b'{"run_id":"run-c","seq":0,')  # the first line names the run
    assert lines[2] == (
        b'{"e":2,"t":102,"c":0,"x":"e1","a":1,"u":0.0025,"l":1200,"i":31,"o":24,"r":1,'
        b'"os":"' + SUMMARY.encode() + b'"}'
    )
    assert lines[4] == (
        b'{"e":4,"t":104,"c":1,"x":"e1","a":1,"u":0.0025,"l":1200,"i":31,"o":24,"r":1,'
        b'"sr":2,"k":true}'
    )
    assert lines[5] == (
        b'{"e":5,"t":105,"c":1,"h":"' + b"c" * 64 + b'","s":"test","x":"e2","n":1,'
        b'"a":1,"u":0.0025,"l":1200,"i":31,"o":24,"r":1,"os":"short"}'
    )
    assert lines[6] == (
        b'{"e":6,"t":106,"c":1,"x":"e3","a":NaN,"u":0.0025,"l":1200,"i":31,"o":24,"r":1,'
        b'"st":"invalid","er":"nan_accuracy","tr":[{"span_id":0,"name":"solver"}]}'
    )


def test_read_journal_gives_back_the_events_written(tmp_path: Path) -> None:
    path = tmp_path / f"{RUN}.jsonl"
    _write(path, _events())
    assert _same_nan(read_journal(path), _events())


def test_a_resumed_writer_refers_to_summaries_written_before(tmp_path: Path) -> None:
    path = tmp_path / f"{RUN}.jsonl"
    events = _events()
    _write(path, events[:3])
    late = _example(7, 1, "e9")
    with RunJournal.resume(path) as j:
        for e in [*events[3:], late]:
            j.append(e)
    assert path.read_bytes().split(b"\n")[7].startswith(b'{"e":7,"t":107,"c":1,')
    assert b'"sr":2' in path.read_bytes().split(b"\n")[7]
    assert _same_nan(read_journal(path), [*events, late])


def _rows(store: DuckDBRunStore) -> list[tuple[Any, ...]]:
    return (
        store._cur()
        .execute(  # pyright: ignore[reportPrivateUsage]
            "SELECT seq, candidate_idx, spec_hash, split, example_id, trial, accuracy, status, error, "
            "output_summary, cached, trace FROM evaluations ORDER BY seq"
        )
        .fetchall()
    )


_EXPECTED: list[tuple[Any, ...]] = [
    (2, 0, HASH0, "validation", "e1", 0, 1.0, "ok", None, SUMMARY, False, "[]"),
    (4, 1, HASH1, "validation", "e1", 0, 1.0, "ok", None, SUMMARY, True, "[]"),
    (5, 1, "c" * 64, "test", "e2", 1, 1.0, "ok", None, "short", False, "[]"),
    (6, 1, HASH1, "validation", "e3", 0, math.nan, "invalid", "nan_accuracy", "", False,
     '[{"span_id":0,"name":"solver"}]'),
]  # fmt: skip


def _same_rows(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    def key(row: tuple[Any, ...]) -> str:
        return repr(tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in row))

    return [key(r) for r in got] == [key(r) for r in want]


def test_the_store_ingests_a_compact_journal_as_written(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    _write(journal_path(db, RUN), _events())
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines) == (7, 0)
        assert _same_rows(_rows(store), _EXPECTED)


def test_references_into_lines_stored_by_an_earlier_ingest(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, RUN)
    events = _events()
    with DuckDBRunStore(db, auto_ingest=False) as store, RunJournal.create(path) as j:
        for i, e in enumerate(events):
            j.append(e)
            assert store.ingest().n_events == 1, i  # one line at a time
        assert _same_rows(_rows(store), _EXPECTED)


def test_a_damaged_compact_line_is_skipped_and_recorded(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, RUN)
    lines = _write(path, _events())
    lines.insert(5, b'{"e":9,"t":1.0,"c":1,"s":"validation","x":"e5","a":"many"}')
    path.write_bytes(b"\n".join(lines))
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines) == (7, 1)
        errors = store.list_ingest_errors()
        assert [e.error for e in errors] == [
            "('accuracy',): Input should be a valid number, unable to parse string as a number"
        ]
        assert _same_rows(_rows(store), _EXPECTED)
