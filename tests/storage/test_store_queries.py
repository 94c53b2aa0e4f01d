"""Query helpers: the status label the pages build equals the runs list's; traces keep NaN."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import T0, RunBuilder  # noqa: E402

from core.storage import DuckDBRunStore  # noqa: E402
from core.storage.queries import OBJECTIVE_COLUMNS, effective_status, status_label  # noqa: E402


@pytest.mark.parametrize(
    ("status", "reason", "last", "label"),
    [
        ("running", None, T0 + 2, "running, data as of 2023-11-14 22:13:22 UTC"),
        ("running", None, None, "running, data as of no events yet"),
        (
            "interrupted",
            None,
            T0,
            "interrupted (no process writes it), data as of 2023-11-14 22:13:20 UTC; "
            "resume it with --resume",
        ),
        ("running", None, 1e20, "running, data as of t=1e+20 (not a date)"),
        ("running", None, -1e20, "running, data as of t=-1e+20 (not a date)"),
        ("running", None, math.nan, "running, data as of t=nan (not a date)"),
        ("running", None, math.inf, "running, data as of t=inf (not a date)"),
        ("completed", "", T0, "completed"),
        ("stopped", "stop file", T0, "stopped: stop file"),
    ],
)
def test_status_label(status: str, reason: str | None, last: float | None, label: str) -> None:
    assert status_label(status, reason, last) == label


def test_the_python_label_equals_the_runs_list_label() -> None:
    b1, b2 = RunBuilder("a", t0=T0), RunBuilder("b", t0=T0 + 50)
    with DuckDBRunStore() as store:
        store.record_events(
            [b1.started(), b1.log("x"), b2.started(), b2.finished("failed", reason="boom")]
        )
        for row in store.list_runs().itertuples():
            run = store.get_run(str(row.run_id))
            assert run is not None
            assert status_label(run.status, run.reason, run.last_event_at) == row.status_label


def test_event_times_that_are_not_dates_never_break_the_runs_list(tmp_path: Path) -> None:
    """F10, no traceback ever: an event time of 1e20 s made `list_runs` raise OverflowError.
    A NaN time, which events refuse today, is one an older version stored."""
    import duckdb

    db = tmp_path / "runs.duckdb"
    with DuckDBRunStore(db) as store:
        for run_id, t0 in (("far", 1e20), ("past", -1e20), ("nan", T0)):
            store.record_events([RunBuilder(run_id, t0=t0).started()])
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE events SET ts = 'NaN' WHERE run_id = 'nan'")
        con.execute(
            "UPDATE runs SET started_at = 'NaN', last_event_at = 'NaN' WHERE run_id = 'nan'"
        )
    with DuckDBRunStore(db) as store:
        runs = store.list_runs()
        labels = dict(zip(runs["run_id"], runs["status_label"], strict=True))
    assert labels == {
        "far": "running, data as of t=1e+20 (not a date)",
        "past": "running, data as of t=-1e+20 (not a date)",
        "nan": "running, data as of t=nan (not a date)",
    }


def test_effective_status_without_a_journal_keeps_the_stored_one(tmp_path: Path) -> None:
    assert effective_status("running", None, tmp_path) == "running"
    assert effective_status("running", "gone.jsonl", tmp_path) == "running"
    assert effective_status("running", "x.jsonl", None) == "running"
    assert effective_status("completed", "x.jsonl", tmp_path) == "completed"
    (tmp_path / "x.jsonl").write_text("")
    assert effective_status("running", "x.jsonl", tmp_path) == "interrupted"


def test_a_trace_keeps_nan_infinity_and_escapes() -> None:
    trace = [{"x": math.nan, "y": -math.inf, "z": 'é\n"q"'}]
    b = RunBuilder()
    with DuckDBRunStore() as store:
        store.record_events([b.started(), b.example(0, "e1", 1.0, trace=trace)])
        back = store.example_trace("run-a", 0, "e1")
    assert back is not None and len(back) == 1
    assert math.isnan(back[0]["x"]) and back[0]["y"] == -math.inf and back[0]["z"] == 'é\n"q"'


def test_objective_columns_are_the_numeric_archive_columns() -> None:
    with DuckDBRunStore() as store:
        columns = set(store.archive("none").columns)
    assert OBJECTIVE_COLUMNS <= columns
