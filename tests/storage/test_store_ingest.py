"""Ingesting run journals: incremental, idempotent, never losing data; the journal view."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import T0, RunBuilder, small_run  # noqa: E402

from core.errors import StoreError  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.storage import (  # noqa: E402
    DuckDBRunStore,
    IngestReport,
    RunJournal,
    RunStore,
    _ingest,  # noqa: E402
    encode_event,
    journal_path,
    open_store,
)


def db_rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    """Read a closed store's file directly."""
    with duckdb.connect(str(db)) as con:
        return con.execute(sql).fetchall()


def test_ingest_takes_new_complete_lines_and_leaves_a_torn_one(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    events = small_run()
    with RunJournal.create(path) as j, DuckDBRunStore(db, auto_ingest=False) as store:
        for e in events[:3]:
            j.append(e)
        report = store.ingest()
        assert (report.n_events, report.n_journals, report.failed) == (3, 1, [])
        assert store.ingest().n_events == 0  # nothing new
        line = encode_event(events[3]) + b"\n"
        with path.open("ab") as fh:  # a writer in the middle of a line
            fh.write(line[:25])
        assert store.ingest().n_events == 0
        with path.open("ab") as fh:
            fh.write(line[25:])
        j.next_seq = 4  # the line above was written behind the journal's back
        for e in events[4:]:
            j.append(e)
        assert store.ingest().n_events == len(events) - 3
        row = store.list_runs().iloc[0]
        assert (row["status"], row["n_events"], row["n_evaluations"]) == ("completed", 11, 4)


def test_reingesting_from_the_start_never_duplicates(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    with RunJournal.create(journal_path(db, "run-a")) as j:
        for e in small_run():
            j.append(e)
    with DuckDBRunStore(db) as store:
        assert store.ingest().n_events == 11
    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM ingest_offsets")  # as if the offsets were lost
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.n_journals) == (0, 1)
        row = store.list_runs().iloc[0]
        assert (row["n_events"], row["n_candidates"], row["n_evaluations"]) == (11, 2, 4)
    assert db_rows(db, "SELECT byte_offset FROM ingest_offsets") == [
        (journal_path(db, "run-a").stat().st_size,)
    ]


def test_a_journal_holds_only_the_run_it_is_named_after(tmp_path: Path) -> None:
    """A journal's file name is its run id (`journal_path`). Events of another run in it (a
    copied or renamed file) used to be stored under their own run: a file ingested first could
    pass its own start, problem and proposals off as another run's. They are skipped and
    recorded instead; the run's own journal is what counts."""
    db = tmp_path / "runs.duckdb"
    folder = journal_path(db, "run-a").parent
    folder.mkdir(parents=True)
    good = [encode_event(e) + b"\n" for e in small_run()]
    b = RunBuilder()
    impostor = [b.started(problem="OTHER"), b.proposed(0, thought="impostor")]
    (folder / "aaa.jsonl").write_bytes(b"".join(encode_event(e) + b"\n" for e in impostor))
    (folder / "run-a.jsonl").write_bytes(b"".join(good))
    (folder / "copy.jsonl").write_bytes(good[0] + good[1])
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines, report.n_journals) == (11, 4, 3)
        run = store.get_run("run-a")
        assert run is not None and (run.problem, run.n_events) == ("letters", 11)
        assert store.archive("run-a", include_unevaluated=True)["thought"].tolist() == [
            "",
            "add a verifier",
        ]
        assert store.list_runs()["run_id"].tolist() == ["run-a"]
    errors = db_rows(db, "SELECT journal, byte_offset, error FROM ingest_errors ORDER BY 1, 2")
    assert [(e[0], e[1]) for e in errors] == [
        ("aaa.jsonl", 0),
        ("aaa.jsonl", len(encode_event(impostor[0])) + 1),
        ("copy.jsonl", 0),
        ("copy.jsonl", len(good[0])),
    ]
    assert str(errors[0][2]) == "an event of run 'run-a' in the journal of run 'aaa'"


def test_a_journal_cut_below_its_offset_is_read_again_from_the_start(tmp_path: Path) -> None:
    """The stored offset lies beyond the end of the file (the journal was cut back): it is read
    again from the start, stored events are skipped, new ones go in, nothing twice."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    good = [encode_event(e) + b"\n" for e in small_run()]
    path.write_bytes(b"".join(good[:8]))
    with DuckDBRunStore(db, auto_ingest=False) as store:
        assert store.ingest().n_events == 8
        path.write_bytes(b"".join(good[:2]))  # cut back below the offset
        assert store.ingest().n_events == 0
        with path.open("ab") as fh:
            fh.write(b"".join(good[2:]))  # the run goes on: 2..7 are stored, 8..10 are new
        assert store.ingest().n_events == 3
        row = store.list_runs().iloc[0]
        assert (row["n_events"], row["n_evaluations"], row["status"]) == (11, 4, "completed")
    assert db_rows(db, "SELECT byte_offset FROM ingest_offsets") == [(path.stat().st_size,)]


def test_a_rewritten_journal_is_read_again_from_the_start(tmp_path: Path) -> None:
    """The journal was cut back and rewritten with other lines, so the stored offset now falls
    in the middle of a line: reading on from there lost the events up to it and recorded
    half a line as garbage. A store offset that is not a line end means: read from the start
    (stored events are skipped by their seq)."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    good = [encode_event(e) + b"\n" for e in small_run()]
    path.write_bytes(b"".join(good[:6]))
    offset = path.stat().st_size
    with DuckDBRunStore(db, auto_ingest=False) as store:
        assert store.ingest().n_events == 6
        b = RunBuilder(seq=100)
        rewritten = [*good[:3], encode_event(b.log("x" * offset)) + b"\n"]
        rewritten.append(encode_event(b.log("after")) + b"\n")
        path.write_bytes(b"".join(rewritten))
        assert path.read_bytes()[offset - 1 : offset] != b"\n"  # the offset is mid-line now
        report = store.ingest()
        assert (report.n_events, report.skipped_lines) == (2, 0)
        assert store.logs("run-a")["seq"].tolist() == [100, 101]
        assert store.list_runs().iloc[0]["n_events"] == 8
    assert db_rows(db, "SELECT count(*) FROM ingest_errors") == [(0,)]
    assert db_rows(db, "SELECT byte_offset FROM ingest_offsets") == [(path.stat().st_size,)]


class FailingStore(DuckDBRunStore):
    """A store whose disk fills up after it has written a journal's rows (a fake)."""

    def _store_delta(self, cur, name, start, end, delta):  # type: ignore[no-untyped-def]
        super()._store_delta(cur, name, start, end, delta)
        raise StoreError("disk full (simulated)")


def test_a_failed_ingest_leaves_rows_and_offsets_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    with RunJournal.create(journal_path(db, "run-a")) as j:
        for e in small_run():
            j.append(e)
    with FailingStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert report.n_events == 0
        assert report.failed == [("run-a.jsonl", "StoreError: disk full (simulated)")]
        assert len(store.list_runs()) == 0
    assert db_rows(db, "SELECT count(*) FROM ingest_offsets") == [(0,)]
    assert db_rows(db, "SELECT count(*) FROM events") == [(0,)]
    with DuckDBRunStore(db, auto_ingest=False) as store:  # the next ingest retries it all
        assert store.ingest().n_events == 11


def test_a_failing_background_ingest_never_breaks_a_query(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    with RunJournal.create(journal_path(db, "run-a")) as j:
        j.append(small_run()[0])
    with FailingStore(db) as store:  # auto_ingest: the failure is logged, the query answers
        assert len(store.list_runs()) == 0


def test_lines_that_are_not_events_are_skipped_and_recorded(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    events = small_run()
    path.parent.mkdir(parents=True)
    good = [encode_event(e) + b"\n" for e in events]
    path.write_bytes(
        b"".join(good[:2]) + b"not json\n" + b'{"type": "bogus"}\n' + b"".join(good[2:])
    )
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines) == (11, 2)
        assert store.list_runs().iloc[0]["n_events"] == 11
    errors = db_rows(db, "SELECT journal, byte_offset, line_head FROM ingest_errors ORDER BY 2")
    offset = len(good[0]) + len(good[1])
    assert errors == [
        ("run-a.jsonl", offset, "not json"),
        ("run-a.jsonl", offset + 9, '{"type": "bogus"}'),
    ]


def test_a_torn_line_in_the_middle_keeps_the_event_glued_to_it(tmp_path: Path) -> None:
    """A writer stopped mid-line and the next line was appended right after it, on the same
    line: the torn part is skipped and recorded, the complete event after it is stored (it
    used to be lost with the torn part). A torn line followed by a newline is skipped alone."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    good = [encode_event(e) + b"\n" for e in small_run()]
    torn_a = good[3][:40]  # no newline: glued to good[3]
    torn_b = good[6][:25] + b"\n"
    path.write_bytes(b"".join(good[:3]) + torn_a + b"".join(good[3:6]) + torn_b
                     + b"".join(good[6:]))  # fmt: skip
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines) == (11, 2)
        row = store.list_runs().iloc[0]
        assert (row["n_events"], row["n_evaluations"], row["status"]) == (11, 4, "completed")
    at_a = len(b"".join(good[:3]))
    at_b = at_a + len(torn_a) + len(b"".join(good[3:6]))
    errors = db_rows(db, "SELECT byte_offset, error, line_head FROM ingest_errors ORDER BY 1")
    assert [(e[0], e[2]) for e in errors] == [
        (at_a, torn_a.decode()),
        (at_b, torn_b[:-1].decode()),
    ]
    assert str(errors[0][1]).startswith("torn line: an event follows it on the same line")


def test_json_lines_that_are_not_events_are_recorded_too(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    first = encode_event(small_run()[0]) + b"\n"
    path.write_bytes(first + b'{"type": "from_the_future", "run_id": "run-a", "seq": 1}\n')
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines) == (1, 1)
    assert db_rows(db, "SELECT byte_offset FROM ingest_errors") == [(len(first),)]


def old_line(event: SearchEvent, **changes: object) -> bytes:
    """A journal line as an older version wrote it: `event` with `changes` that today's event
    models refuse (an integer beyond its column's range, a NaN time), unvalidated."""
    return encode_event(event.model_copy(update=changes)) + b"\n"


def test_events_the_database_cannot_hold_are_skipped_not_blocking(tmp_path: Path) -> None:
    """Lines that older versions wrote with values out of DuckDB's column ranges (a token count
    of 10**20, a candidate index of 2**31, a seq of 2**63) are skipped and recorded; they used
    to fail the whole journal on every ingest, so nothing after them ever went in. Today's
    events refuse such values (`tests/search/test_events_ranges.py`)."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    events = small_run()
    good = [encode_event(e) + b"\n" for e in events]
    bad = [
        old_line(RunBuilder(seq=20).example(0, "e9", 1.0), input_tokens=10**20),
        old_line(RunBuilder(seq=21).example(0, "e9", 1.0), candidate_idx=2**31),
        old_line(RunBuilder().log("late"), seq=2**63),
    ]
    path.write_bytes(b"".join(good[:3]) + bad[0] + b"".join(good[3:8]) + bad[1] + bad[2]
                     + b"".join(good[8:]))  # fmt: skip
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines, report.failed) == (11, 3, [])
        assert store.ingest().n_events == 0
        row = store.list_runs().iloc[0]
        assert (row["status"], row["n_events"], row["n_evaluations"]) == ("completed", 11, 4)
    at = [len(b"".join(good[:3])), len(b"".join(good[:3] + bad[:1] + good[3:8]))]
    at.append(at[1] + len(bad[1]))
    errors = db_rows(db, "SELECT byte_offset, error FROM ingest_errors ORDER BY 1")
    assert [e[0] for e in errors] == at
    assert "100000000000000000000" in str(errors[0][1])
    assert "2147483648" in str(errors[1][1])
    assert "9223372036854775808" in str(errors[2][1])
    assert db_rows(db, "SELECT byte_offset FROM ingest_offsets") == [(path.stat().st_size,)]


def test_recording_an_event_the_database_cannot_hold_stores_nothing() -> None:
    b = RunBuilder()
    too_many = b.example(0, "e1", 1.0).model_copy(update={"input_tokens": 10**20})  # unchecked
    events = [b.started(), too_many, b.log("after")]
    with DuckDBRunStore() as store:
        with pytest.raises(StoreError, match=r"nothing stored.*100000000000000000000"):
            store.record_events(events)
        assert len(store.list_runs()) == 0


def test_an_old_line_with_a_time_that_is_not_finite_is_skipped_and_recorded(
    tmp_path: Path,
) -> None:
    """`ts` NaN or infinite: `parse_event` refuses it, so ingest skips and records the line
    (DuckDB reads it fine, so it used to be stored with a NaN time); `record_events` stores
    nothing of a call holding one."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    good = [encode_event(e) + b"\n" for e in small_run()]
    b = RunBuilder(seq=20)
    bad = [old_line(b.log("nan"), ts=math.nan), old_line(b.log("inf"), ts=-math.inf)]
    path.write_bytes(b"".join(good[:2]) + b"".join(bad) + b"".join(good[2:]))
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.skipped_lines, report.failed) == (11, 2, [])
        assert store.logs("run-a").empty
        with pytest.raises(StoreError, match=r"nothing stored.*'ts'.*finite number \(got nan\)"):
            store.record_events([RunBuilder("run-b").log("x").model_copy(update={"ts": math.nan})])
        assert store.get_run("run-b") is None
    at = len(good[0]) + len(good[1])
    errors = db_rows(db, "SELECT byte_offset, error FROM ingest_errors ORDER BY 1")
    assert errors == [
        (at, "('log', 'ts'): Input should be a finite number (got nan)"),
        (at + len(bad[0]), "('log', 'ts'): Input should be a finite number (got -inf)"),
    ]


def test_empty_journals_and_a_store_without_journals_ingest_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    folder = journal_path(db, "x").parent
    folder.mkdir(parents=True)
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "blank.jsonl").write_bytes(b"\n\n   \n")
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.n_journals, report.skipped_lines, report.failed) == (
            0,
            1,  # the blank lines were read (the offset moved), nothing else
            0,
            [],
        )
        assert len(store.list_runs()) == 0
    assert db_rows(db, "SELECT journal, byte_offset FROM ingest_offsets") == [("blank.jsonl", 6)]
    with DuckDBRunStore() as memory:
        assert memory.journal_dir is None
        assert memory.ingest() == IngestReport()


def test_a_journal_that_cannot_be_read_never_stops_the_others(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    folder = journal_path(db, "x").parent
    (folder / "broken.jsonl").mkdir(parents=True)  # a folder where a journal should be
    (folder / "run-a.jsonl").write_bytes(b"".join(encode_event(e) + b"\n" for e in small_run()))
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()
        assert (report.n_events, report.n_journals) == (11, 1)
        # refused before it is opened (a journal must be a regular file inside the store's
        # journals folder), and the refusal recorded
        assert report.failed == [
            ("broken.jsonl", "journal 'broken.jsonl' is a directory, not a regular file")
        ]
        assert store.list_runs()["status"].tolist() == ["completed"]
        (error,) = store.list_ingest_errors("broken")
        assert (error.byte_offset, error.error, error.line_head) == (
            0,
            "journal 'broken.jsonl' is a directory, not a regular file",
            "",
        )


def test_queries_ingest_new_journal_lines_by_themselves(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    events = small_run()
    with DuckDBRunStore(db) as store, RunJournal.create(journal_path(db, "run-a")) as j:
        assert len(store.list_runs()) == 0
        for e in events[:5]:
            j.append(e)
        assert store.archive("run-a")["candidate_idx"].tolist() == [0]
        for e in events[5:]:
            j.append(e)
        assert store.list_runs().iloc[0]["status"] == "completed"
        assert store.archive("run-a")["candidate_idx"].tolist() == [0, 1]


def test_a_run_whose_writer_is_gone_is_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    events = small_run()
    with DuckDBRunStore(db) as store:
        with RunJournal.create(path) as j:
            for e in events[:4]:
                j.append(e)
            row = store.list_runs().iloc[0]
            assert (row["status"], row["status_label"]) == (
                "running",
                "running, data as of 2023-11-14 22:13:23 UTC",
            )
        # the writer died without run_finished
        row = store.list_runs().iloc[0]
        assert row["status"] == "interrupted"
        assert row["status_label"] == (
            "interrupted (no process writes it), data as of 2023-11-14 22:13:23 UTC; "
            "resume it with --resume"
        )
        run = store.get_run("run-a")
        assert run is not None and run.status == "interrupted"
        with RunJournal.resume(path) as j:
            j.append(RunBuilder(seq=4, t0=T0 + 100).started(resumed=True))
            assert store.list_runs().iloc[0]["status"] == "running"
            for e in (RunBuilder(seq=5, t0=T0 + 100).finished(),):
                j.append(e)
        run = store.get_run("run-a")
        assert run is not None and (run.status, run.n_resumes) == ("completed", 1)


def big_events(run_id: str, n: int) -> list:  # type: ignore[type-arg]
    b = RunBuilder(run_id)
    spans = [{"span_id": i, "summary": "x" * 200} for i in range(3)]
    out = [b.started(), b.proposed(0)]
    out += [b.example(0, f"e{i:05d}", float(i % 2), trace=spans) for i in range(n)]
    return [*out, b.result(0, 0.5, 0.001, 0.49, n_examples=n), b.finished()]


def test_a_big_journal_is_read_directly_with_the_same_rows(tmp_path: Path) -> None:
    """A first ingest of a big journal reads the file itself, even while its writer holds it;
    the same journal ingested in two steps (the second one copies the new bytes) gives the same
    rows."""
    events = big_events("run-a", 2000)
    direct, copied = tmp_path / "direct.duckdb", tmp_path / "copied.duckdb"
    with RunJournal.create(journal_path(direct, "run-a")) as j:
        for e in events:
            j.append(e)
    data = journal_path(direct, "run-a").read_bytes()
    size = len(data)
    assert size > _ingest.MAX_LINE_BYTES // 256  # over a megabyte: the direct path
    first = data.index(b"\n") + 1
    journal_path(copied, "run-a").parent.mkdir()
    journal_path(copied, "run-a").write_bytes(data[:first])
    frames: list[pd.DataFrame] = []
    with RunJournal.resume(journal_path(direct, "run-a")):  # a live writer holds it
        with DuckDBRunStore(direct, auto_ingest=False) as store:
            assert store.ingest().n_events == len(events)
            frames.append(store.candidate_examples("run-a", 0, with_trace=True))
    with DuckDBRunStore(copied, auto_ingest=False) as store:
        assert store.ingest().n_events == 1
        with journal_path(copied, "run-a").open("ab") as fh:
            fh.write(data[first:])
        assert store.ingest().n_events == len(events) - 1
        frames.append(store.candidate_examples("run-a", 0, with_trace=True))
    pd.testing.assert_frame_equal(frames[0], frames[1])
    assert len(frames[0]) == 2000
    assert db_rows(direct, "SELECT byte_offset FROM ingest_offsets") == [(size,)]
    assert db_rows(copied, "SELECT byte_offset FROM ingest_offsets") == [(size,)]


class EarlyStatStore(DuckDBRunStore):
    """A store that took each journal's size a little before its writer appended 3 lines (a
    fake of that race: the direct read then finds more lines than the size says)."""

    def _journal_size(self, path: Path) -> int:
        data = path.read_bytes()
        return len(data) - sum(len(line) + 1 for line in data.split(b"\n")[-4:-1])


def test_lines_appended_during_a_direct_read_are_stored_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a journal of 1-4 MB is read directly when the ingest step is 4 MB (it is 1 MB by
    # default: a 2 MB journal then goes in two chunks, tested elsewhere)
    import core.storage._duckdb_journals as ingesting  # where an ingest reads its step size

    monkeypatch.setattr(ingesting, "INGEST_CHUNK_BYTES", 4 << 20)
    db = tmp_path / "runs.duckdb"
    events = big_events("run-a", 2000)
    with RunJournal.create(journal_path(db, "run-a")) as j:
        for e in events:
            j.append(e)
    size = journal_path(db, "run-a").stat().st_size
    with EarlyStatStore(db, auto_ingest=False) as store:
        assert store.ingest().n_events == len(events)  # the 3 late lines too
    lines = journal_path(db, "run-a").read_bytes().split(b"\n")[-4:-1]  # as the journal wrote
    short = size - sum(len(line) + 1 for line in lines)
    assert db_rows(db, "SELECT byte_offset FROM ingest_offsets") == [(short,)]
    with DuckDBRunStore(db, auto_ingest=False) as store:
        report = store.ingest()  # reads the 3 lines again: already stored
        assert (report.n_events, report.n_journals, report.skipped_lines) == (0, 1, 0)
        row = store.list_runs().iloc[0]
        assert (row["n_events"], row["n_evaluations"], row["status"]) == (2004, 2000, "completed")
    assert db_rows(db, "SELECT byte_offset FROM ingest_offsets") == [(size,)]


def example_line(seq: int, example_id: str, summary: str, *, cached: bool = False) -> bytes:
    """One `example_evaluated` journal line of candidate 0 of run-a (built fast, as bytes)."""
    return (
        b'{"run_id":"run-a","seq":%d,"ts":%d.0,"type":"example_evaluated","candidate_idx":0,'
        b'"spec_hash":"h0","split":"validation","example_id":"%s","accuracy":1.0,'
        b'"output_summary":"%s","cached":%s}\n'
        % (seq, T0 + seq, example_id.encode(), summary.encode(), b"true" if cached else b"false")
    )


def test_a_40_megabyte_line_goes_in(tmp_path: Path) -> None:
    """A very long line (a huge trace or output, 40 MB) is read, in a journal and through
    record_events, between ordinary lines."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    b = RunBuilder()
    huge = "é" * 20_000_000  # 40 MB of UTF-8
    lines = [encode_event(b.started()) + b"\n", encode_event(b.proposed(0)) + b"\n"]
    lines += [
        example_line(2, "e1", "small"),
        example_line(3, "e2", huge),
        example_line(4, "e3", "x"),
    ]
    path.write_bytes(b"".join(lines))
    with DuckDBRunStore(db, auto_ingest=False) as store:
        assert store.ingest().n_events == 5
        ex = store.candidate_examples("run-a", 0)
        assert ex["output_summary"].str.len().tolist() == [5, 20_000_000, 1]
    with DuckDBRunStore() as store:
        b = RunBuilder()
        events = [b.started(), b.example(0, "e1", 1.0, output_summary=huge), b.log("after")]
        assert store.record_events(events) == 3
        assert store.candidate_examples("run-a", 0)["output_summary"].tolist() == [huge]


def test_in_one_big_chunk_the_first_copy_wins(tmp_path: Path) -> None:
    """130,000 results in one chunk, more than one DuckDB row group, so it is read and inserted
    in parallel: a replayed result (same candidate, split, example and trial under a later seq)
    and a line that repeats a seq keep the first copy, exactly as across chunks."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    b = RunBuilder()
    n = 130_000
    lines = [encode_event(b.started()) + b"\n", encode_event(b.proposed(0)) + b"\n"]
    lines.append(example_line(2, "dup", "first"))
    lines += [example_line(3 + i, f"e{i:06d}", "x") for i in range(n)]
    lines.append(example_line(n + 3, "dup", "second", cached=True))  # a replayed copy
    lines.append(example_line(2, "seqdup", "seqdup"))  # a second line with seq 2
    path.write_bytes(b"".join(lines))
    with DuckDBRunStore(db, auto_ingest=False) as store:
        assert store.ingest().n_events == n + 4
        runs = store.list_runs()
        assert (runs.iloc[0]["n_events"], runs.iloc[0]["n_evaluations"]) == (n + 4, n + 1)
        ex = store.candidate_examples("run-a", 0)
        assert len(ex) == n + 1
        dup = ex[ex["example_id"] == "dup"]
        assert (dup["seq"].tolist(), dup["output_summary"].tolist()) == ([2], ["first"])
        assert dup["cached"].tolist() == [False]
        assert "seqdup" not in set(ex["example_id"])
        # a resumed search replays 6,000 stored results in one chunk (the bulk path): no new row
        replay = [
            example_line(n + 4 + i, f"e{i:06d}", "replayed", cached=True) for i in range(6000)
        ]
        with path.open("ab") as fh:
            fh.write(b"".join(replay))
        assert store.ingest().n_events == 6000
        runs = store.list_runs()
        assert (runs.iloc[0]["n_events"], runs.iloc[0]["n_evaluations"]) == (n + 6004, n + 1)
        ex = store.candidate_examples("run-a", 0)
        assert len(ex) == n + 1
        assert ex["output_summary"].value_counts().to_dict() == {"x": n, "first": 1}


def test_the_store_persists_across_reopening(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    with DuckDBRunStore(db) as store:
        store.record_events(small_run())
        store.save_topology_version("t", "{}")
        assert store.schema_version == 6
    with DuckDBRunStore(db) as store:
        assert store.list_runs()["n_events"].tolist() == [11]
        assert store.get_topology_version("t").version == 1
        assert store.record_events(small_run()) == 0


def test_the_journal_view_is_read_only_and_answers_run_queries(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    with RunJournal.create(journal_path(db, "run-a")) as j:
        for e in small_run():
            j.append(e)
    with DuckDBRunStore.from_journals(journal_path(db, "x").parent) as view:
        assert view.read_only is True
        assert view.list_runs()["status"].tolist() == ["completed"]
        assert view.archive("run-a")["is_best"].tolist() == [False, True]
        assert len(view.candidate_examples("run-a", 1)) == 2
        with pytest.raises(StoreError, match="read-only view"):
            view.record_events(small_run("run-b"))
        with pytest.raises(StoreError, match="read-only view"):
            view.put_spec("h", "{}")
        with pytest.raises(StoreError, match="read-only view"):
            view.record_proposal("t", "{}")
        with pytest.raises(StoreError, match="read-only view"):
            view.save_topology_version("t", "{}")
        with pytest.raises(StoreError, match="read-only view"):
            view.record_approval(1, who="ana")
        assert view.ingest().n_events == 0  # ingest is allowed
    assert not db.exists()  # the view never touched the database file


@pytest.mark.parametrize("spec", [":memory:", "duckdb://:memory:", ""])
def test_open_store_in_memory(spec: str) -> None:
    with open_store(spec) as store:
        assert isinstance(store, DuckDBRunStore) and store.path == ":memory:"


def test_open_store_paths_and_urls(tmp_path: Path) -> None:
    db = tmp_path / "a.duckdb"
    for spec in (db, str(db), f"duckdb://{db}"):
        store = open_store(spec)
        assert isinstance(store, DuckDBRunStore) and store.path == str(db)
        assert store.journal_dir == tmp_path / "a.duckdb.journals"
        same: RunStore = open_store(store)
        assert same is store
        store.close()
    with pytest.raises(StoreError, match="unknown run store URL scheme 'postgres'"):
        open_store("postgres://host/db")


def test_files_that_are_not_run_stores_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(StoreError, match="not a Topology Studio run store"):
        DuckDBRunStore(other)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(StoreError, match="cannot open the run store"):
        DuckDBRunStore(text)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_file_deleted_or_replaced_while_open_is_refused(
    tmp_path: Path, how: str
) -> None:
    """Deleting or replacing the file under an open store left every later write going to the
    old, unlinked file and lost at close (a topology version saved afterwards came back as
    nothing). The store now refuses every call with a clear StoreError."""
    db = tmp_path / "runs.duckdb"
    store = DuckDBRunStore(db)
    store.record_events(small_run())
    assert store.save_topology_version("t", "{}") == 1
    if how == "deleted":
        for f in tmp_path.glob("runs.duckdb*"):
            if f.is_file():
                f.unlink()
    else:
        with DuckDBRunStore(tmp_path / "other.duckdb") as other:
            other.record_events(small_run("other-run"))
        (tmp_path / "other.duckdb").replace(db)
    with pytest.raises(StoreError, match="was deleted or replaced while this store had it open"):
        store.save_topology_version("t", '{"a": 1}')
    with pytest.raises(StoreError, match="open it again"):
        store.list_runs()
    store.close()
    store.close()
    with DuckDBRunStore(db) as again:
        assert again.list_runs()["run_id"].tolist() == ([] if how == "deleted" else ["other-run"])


def test_closing_while_another_thread_queries_waits_for_it(tmp_path: Path) -> None:
    """`close()` while another thread was in the middle of a query raised DuckDB's
    ResourceInUseException and left the connection open, holding the file. It now waits for
    calls in flight to end; later calls raise StoreError('closed'), and the file is free."""
    db = tmp_path / "runs.duckdb"
    store = DuckDBRunStore(db)
    store.record_events(small_run())
    started = threading.Event()
    seen: list[str] = []

    def query() -> None:
        while True:
            try:
                store.archive("run-a")
                store.list_runs()
            except StoreError as exc:
                seen.append(f"StoreError: {exc}")
                return
            except Exception as exc:  # anything else is the defect
                seen.append(f"{type(exc).__name__}: {exc}")
                return
            started.set()

    worker = threading.Thread(target=query)
    worker.start()
    assert started.wait(30)
    store.close()  # must not raise
    worker.join(30)
    assert seen == [f"StoreError: the run store {db} is closed"]
    probe = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", f"from core.storage import DuckDBRunStore; DuckDBRunStore({str(db)!r}).close()"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr


def test_two_stores_on_one_file_in_one_process_never_conflict(tmp_path: Path) -> None:
    """DuckDB lets one process open a file twice (e.g. the studio's store and a command run in
    the same process). Two stores ingesting the same live journal from two threads conflicted
    ('Conflict on update', a duplicate offset key) and reported failures; writes to one file
    are now serialized across the stores of a process, and each ingest starts from the stored
    offsets."""
    db = tmp_path / "runs.duckdb"
    one, two = DuckDBRunStore(db, auto_ingest=False), DuckDBRunStore(db, auto_ingest=False)
    failures: list[tuple[str, str]] = []
    done = threading.Event()

    def ingest(store: DuckDBRunStore) -> None:
        while not done.is_set():
            failures.extend(store.ingest().failed)

    threads = [threading.Thread(target=ingest, args=(s,)) for s in (one, two)]
    for th in threads:
        th.start()
    try:
        b = RunBuilder()
        with RunJournal.create(journal_path(db, "run-a")) as j:
            j.append(b.started())
            for i in range(200):
                j.append(b.example(0, f"e{i:03d}", 1.0))
    finally:
        done.set()
        for th in threads:
            th.join()
    one.ingest()
    two.ingest()
    assert failures == []
    for store in (one, two):
        row = store.list_runs().iloc[0]
        assert (row["n_events"], row["n_evaluations"]) == (201, 200)
        store.close()


def test_skipped_lines_are_numbered_across_ingests_and_in_the_journal_view(
    tmp_path: Path,
) -> None:
    """A line skipped by a later ingest (the chunk starts mid-journal) has its journal line
    number; a torn line glued to an event is one line. The read-only journal view lists them
    too."""
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    good = [encode_event(e) + b"\n" for e in small_run()]
    path.write_bytes(b"".join(good[:3]) + b"\n")  # line 4 is blank
    with DuckDBRunStore(db, auto_ingest=False) as store:
        assert store.ingest().n_events == 3
        with path.open("ab") as fh:
            fh.write(b"garbage\n" + good[3][:40] + b"".join(good[3:6]) + b"[1]\n")
        report = store.ingest()
        assert (report.n_events, report.skipped_lines) == (3, 3)
        errors = store.list_ingest_errors("run-a")
        at = len(b"".join(good[:3])) + 1
        assert [(e.line_no, e.byte_offset, e.line_head) for e in errors] == [
            (5, at, "garbage"),
            (6, at + 8, good[3][:40].decode()),
            (9, at + 8 + 40 + len(b"".join(good[3:6])), "[1]"),
        ]
        assert {e.journal for e in errors} == {str(path)}
        assert store.list_ingest_errors() == errors
    with DuckDBRunStore.from_journals(path.parent) as view:
        seen = view.list_ingest_errors()
        assert [(e.line_no, e.byte_offset, e.error) for e in seen] == [
            (e.line_no, e.byte_offset, e.error) for e in errors
        ]


def test_a_journal_bigger_than_one_ingest_step_goes_in_step_by_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest reads at most `INGEST_CHUNK_BYTES` of whole lines at a time (its memory
    grows with what one read takes): with steps of 300 bytes, every line of a run goes in, the
    same rows as in one step, and the offset ends at the file's end."""
    import core.storage._duckdb_journals as ingesting  # where an ingest reads its step size

    rows: dict[int, list[tuple[object, ...]]] = {}
    for step in (1 << 20, 300):
        monkeypatch.setattr(ingesting, "INGEST_CHUNK_BYTES", step)
        db = tmp_path / f"runs-{step}.duckdb"
        path = journal_path(db, "run-a")
        with RunJournal.create(path) as j:
            for e in small_run():
                j.append(e)
        assert path.stat().st_size > 3 * 300  # (several steps at 300 bytes)
        with DuckDBRunStore(db, auto_ingest=False) as store:
            report = store.ingest()
            assert (report.n_events, report.skipped_lines, report.failed) == (11, 0, [])
            row = store.list_runs().iloc[0]
            assert (row["status"], row["n_events"], row["n_evaluations"]) == ("completed", 11, 4)
        rows[step] = db_rows(db, "SELECT * EXCLUDE (run_id) FROM candidate_results ORDER BY ALL")
        assert db_rows(db, "SELECT byte_offset FROM ingest_offsets") == [(path.stat().st_size,)]
    assert rows[300] == rows[1 << 20] and len(rows[300]) == 2  # (two candidates)


def test_store_connections_use_one_duckdb_thread(tmp_path: Path) -> None:
    with DuckDBRunStore(tmp_path / "runs.duckdb", auto_ingest=False) as store:
        con = store._con  # pyright: ignore[reportPrivateUsage]
        assert con is not None
        assert con.execute("SELECT current_setting('threads')").fetchone() == (1,)


def test_the_ingest_memory_limit_is_put_back_after_each_step(tmp_path: Path) -> None:
    """An ingest step runs under `INGEST_MEMORY_MB` (DuckDB spills beyond it); the store's
    other queries get DuckDB's default again afterwards, also after a failed step."""
    db = tmp_path / "runs.duckdb"
    with RunJournal.create(journal_path(db, "run-a")) as j:
        for e in small_run():
            j.append(e)
    with DuckDBRunStore(db, auto_ingest=False) as store:
        con = store._con  # pyright: ignore[reportPrivateUsage]
        assert con is not None
        default = con.execute("SELECT current_setting('memory_limit')").fetchone()
        assert store.ingest().n_events == 11
        assert con.execute("SELECT current_setting('memory_limit')").fetchone() == default
        with pytest.raises(duckdb.Error), duckdb_store_ingest_memory(con, 0):
            con.execute("SELECT current_setting('memory_limit')").fetchone()
            raise duckdb.Error("a failing step")
        assert con.execute("SELECT current_setting('memory_limit')").fetchone() == default


def duckdb_store_ingest_memory(con: duckdb.DuckDBPyConnection, chunk_bytes: int) -> Any:
    from core.storage._duckdb_files import ingest_memory as _ingest_memory

    return _ingest_memory(con, chunk_bytes)


def test_a_ctrl_c_in_the_refresh_before_a_query_is_an_interrupt_not_a_failed_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # DuckDB reports a Ctrl-C during a query as RuntimeError('Query interrupted'); the refresh
    # that ingests the journals before a query swallowed it as a failed ingest (a warning), so
    # a second Ctrl-C while the command line printed its report did not stop it
    db = tmp_path / "runs.duckdb"
    with RunJournal.create(journal_path(db, "run-a")) as j:
        for e in small_run():
            j.append(e)
    with DuckDBRunStore(db) as store:

        def interrupted() -> Any:
            raise RuntimeError("Query interrupted")

        monkeypatch.setattr(store, "ingest", interrupted)
        with pytest.raises(KeyboardInterrupt):
            store.list_runs()
        assert "ingesting run journals failed" not in caplog.text

        def broken() -> Any:
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(store, "ingest", broken)
        assert len(store.list_runs()) == 0  # any other failure: a warning, and the query runs
        assert "ingesting run journals failed: disk on fire" in caplog.text
