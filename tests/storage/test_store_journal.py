"""The run journal: one event per line, torn last lines tolerated, continued after a crash."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import T0, RunBuilder, small_run  # noqa: E402

from core.errors import StoreBusyError, StoreError  # noqa: E402
from core.search.events import ExampleEvaluated, RunStarted, parse_event  # noqa: E402
from core.storage import (  # noqa: E402
    DuckDBRunStore,
    ResumeState,
    RunJournal,
    encode_event,
    journal_dir,
    journal_is_live,
    journal_path,
    load_resume_state,
    new_run_id,
    read_journal,
)
from core.storage.journal import check_run_id, scan_journal  # noqa: E402


def write(path: Path, events: list) -> None:  # type: ignore[type-arg]
    with RunJournal.create(path) as j:
        for e in events:
            j.append(e)


def test_journal_location_is_beside_the_database(tmp_path: Path) -> None:
    db = tmp_path / "data" / "runs.duckdb"
    assert journal_dir(db) == tmp_path / "data" / "runs.duckdb.journals"
    assert journal_path(db, "r1") == tmp_path / "data" / "runs.duckdb.journals" / "r1.jsonl"


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "-x", "a b", "x" * 129])
def test_run_ids_that_are_not_file_names_are_refused(bad: str) -> None:
    with pytest.raises(StoreError, match="invalid run id"):
        check_run_id(bad)


def test_new_run_ids_sort_by_time_and_are_valid() -> None:
    a, b = new_run_id(T0), new_run_id(T0 + 1)
    assert a.startswith("20231114-221320-") and b.startswith("20231114-221321-")
    assert a < b
    assert check_run_id(a) == a


def test_one_event_per_line_read_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "j" / "run-a.jsonl"
    events = small_run()
    write(path, events)
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == len(events) + 1 and lines[-1] == b""
    assert read_journal(path) == events


def test_nan_and_infinity_survive_the_journal(tmp_path: Path) -> None:
    """F7: an invalid result keeps its NaN (pydantic's own JSON would write null)."""
    b = RunBuilder()
    ev = b.example(0, "e1", math.nan, cost_usd=math.inf, trace=[{"x": -math.inf}])
    line = encode_event(ev)
    assert b'"accuracy":NaN' in line and b'"cost_usd":Infinity' in line
    back = parse_event(line)
    assert isinstance(back, ExampleEvaluated)
    assert math.isnan(back.accuracy) and back.cost_usd == math.inf
    assert back.trace == [{"x": -math.inf}]


def test_a_lone_surrogate_is_written_as_a_replacement_character(tmp_path: Path) -> None:
    """Text with a lone surrogate (half an emoji from a broken escape in a model's output) cannot
    be UTF-8: encoding it raised, which stopped the search at `RunJournal.append` and made
    `record_events` raise. It is written with U+FFFD in its place; a proper pair is kept."""
    b = RunBuilder()
    started = b.started()
    ev = b.example(
        0, "e\ud800", 1.0, output_summary="half \ud83d emoji, \ud83d\ude00 pair",
        trace=[{"t\udfff": ["x\udc80"]}],
    )  # fmt: skip
    back = parse_event(encode_event(ev))
    assert isinstance(back, ExampleEvaluated)
    assert back.example_id == "e\ufffd"
    assert back.output_summary == "half \ufffd emoji, \U0001f600 pair"
    assert back.trace == [{"t\ufffd": ["x\ufffd"]}]
    path = tmp_path / "r.jsonl"
    write(path, [started, ev])
    assert read_journal(path) == [started, back]
    with DuckDBRunStore() as store:
        assert store.record_events([started, ev]) == 2
        df = store.candidate_examples("run-a", 0)
        assert df["example_id"].tolist() == ["e\ufffd"]
        assert store.example_trace("run-a", 0, "e\ufffd") == [{"t\ufffd": ["x\ufffd"]}]


def test_events_must_come_in_order_and_of_one_run(tmp_path: Path) -> None:
    b = RunBuilder()
    with RunJournal.create(tmp_path / "r.jsonl") as j:
        j.append(b.started())
        with pytest.raises(ValueError, match="seq 5 out of order: this journal expects 1"):
            j.append(RunBuilder(seq=5).log("late"))
        with pytest.raises(ValueError, match="event of run 'other'"):
            j.append(RunBuilder("other", seq=1).log("x"))
        j.append(b.log("ok"))
        assert j.next_seq == 2
    assert j.closed
    with pytest.raises(StoreError, match="closed"):
        j.append(b.log("after close"))


def test_creating_an_existing_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write(path, small_run()[:1])
    with pytest.raises(StoreError, match="already exists"):
        RunJournal.create(path)


def test_a_torn_last_line_is_dropped_when_reading(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    events = small_run()
    write(path, events[:4])
    with path.open("ab") as fh:
        fh.write(encode_event(events[4])[:37])  # killed mid-write
    assert read_journal(path) == events[:4]
    scan = scan_journal(path)
    assert (scan.good_bytes, scan.complete_tail) == (path.stat().st_size - 37, False)


def test_a_damaged_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    events = small_run()
    write(path, events[:2])
    with path.open("ab") as fh:
        fh.write(b'{"type": "nonsense"}\n' + encode_event(events[2]) + b"\n")
    with pytest.raises(StoreError, match="line 3 is not a valid search event"):
        read_journal(path)


def test_resume_cuts_the_torn_line_and_continues_seq(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    events = small_run()
    write(path, events[:5])
    with path.open("ab") as fh:
        fh.write(encode_event(events[5])[:20])
    with RunJournal.resume(path) as j:
        assert (j.run_id, j.next_seq) == ("run-a", 5)
        assert list(j.recorded) == events[:5]
        for e in events[5:]:
            j.append(e)
    assert read_journal(path) == events
    assert path.read_bytes().count(b"\n") == len(events)


def test_resume_keeps_a_complete_last_event_missing_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    events = small_run()
    write(path, events[:3])
    with path.open("ab") as fh:
        fh.write(encode_event(events[3]))  # no newline
    assert read_journal(path) == events[:4]
    with RunJournal.resume(path) as j:
        assert j.next_seq == 4
        j.append(events[4])
    assert read_journal(path) == events[:5]


def test_resume_refuses_a_journal_of_several_runs(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [
        encode_event(e) + b"\n" for e in (RunBuilder().started(), RunBuilder("b", seq=1).log("x"))
    ]
    path.write_bytes(b"".join(lines))
    with pytest.raises(
        StoreError, match=r"events of several runs in one journal: \['b', 'run-a'\]"
    ):
        RunJournal.resume(path)
    assert journal_is_live(path) is False  # the refused resume let go of the file


def test_open_creates_or_resumes(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.jsonl"
    b = RunBuilder()
    with RunJournal.open(path) as j:
        assert (j.run_id, j.next_seq, j.recorded) == (None, 0, ())
        j.append(b.started())
    with RunJournal.open(path) as j:
        assert (j.run_id, j.next_seq) == ("run-a", 1)


def test_one_writer_at_a_time_and_liveness(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    b = RunBuilder()
    with RunJournal.create(path) as j:
        j.append(b.started())
        assert journal_is_live(path) is True
        with pytest.raises(StoreBusyError, match="being written by another live process"):
            RunJournal.resume(path)
    assert journal_is_live(path) is False
    assert journal_is_live(tmp_path / "missing.jsonl") is False
    with RunJournal.resume(path) as j:  # free again
        assert j.next_seq == 1


def test_resume_state_from_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    b = RunBuilder()
    events = [
        b.started(seed=3),
        b.proposed(0),
        b.example(0, "e1", 1.0),
        b.example(0, "e1", 1.0, cached=True),  # a replayed copy: the first stays
        b.result(0, 1.0, 0.001, 0.99, split="minibatch"),
        b.result(0, 0.5, 0.001, 0.49, split="minibatch"),
        b.snapshot([0], [0], 0, 0.49, generation=-1),
        b.proposed(1),
        b.example(1, "e2", 0.0, trial=1),
    ]
    write(path, events)
    with path.open("ab") as fh:
        fh.write(b'{"run_id": "run-a", "se')
    state = load_resume_state(path)
    assert state.run_id == "run-a"
    assert isinstance(state.started, RunStarted) and state.started.seed == 3
    assert (state.finished, state.next_seq, state.n_events, state.last_generation) == (
        None,
        9,
        9,
        -1,
    )
    assert sorted(state.proposals) == [0, 1]
    assert sorted(state.evaluations) == [("h0", "e1", 0), ("h1", "e2", 1)]
    assert state.evaluations[("h0", "e1", 0)].cached is False
    assert state.results[(0, "minibatch")].accuracy == 0.5  # the last one
    done = ResumeState.from_events([*events, b.finished()])
    assert done.finished is not None and done.finished.status == "completed"
    again = ResumeState.from_events([*events, b.finished(), b.started(resumed=True)])
    assert again.finished is None and again.started == events[0]
    assert ResumeState.from_events([]).next_seq == 0
