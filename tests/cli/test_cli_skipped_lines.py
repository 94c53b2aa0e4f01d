"""`show RUN` says how many lines of the run's journal the store skipped, only when there are
any (the rest of the summary is unchanged)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import RunBuilder  # noqa: E402

from core.storage import DuckDBRunStore, encode_event, journal_path  # noqa: E402
from studio.cli import main  # noqa: E402

SUMMARY = [
    "== Run {run} ==",
    "problem:        letters",
    "strategy:       random",
    "seed:           7",
    "status:         completed (max_evaluations reached)",
    "started:        {started}",
    "candidates:     4",
    "cost_usd_total: 0.006000 (every model call of the run: search, re-scoring and held-out test)",
    "wall_s:         1.5",
    "errors:         none",
]
"""The summary lines `show` prints for the runs below (plain mode: stdout is not a terminal)."""


def _journal_lines(run_id: str) -> list[bytes]:
    b = RunBuilder(run_id)
    events = [
        b.started(),
        b.log("seed evaluated"),
        b.finished(
            reason="max_evaluations reached",
            budget_used={"evaluations": 4.0, "usd": 0.006, "wall_s": 1.5},
        ),
    ]
    return [encode_event(e) + b"\n" for e in events]


def _show(run_id: str, db: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["show", run_id, "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    return out[: out.index("== Pareto front (validation) ==")]


def _started(db: Path, run_id: str) -> str:
    import time

    with DuckDBRunStore(db) as store:
        run = store.get_run(run_id)
        assert run is not None and run.started_at is not None
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.started_at))


def test_show_counts_the_skipped_journal_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-a")
    path.parent.mkdir(parents=True)
    good = _journal_lines("run-a")
    old = json.loads(good[1])
    old["ts"] = math.nan  # as an older version could write it
    path.write_bytes(good[0] + b"not json\n" + json.dumps(old).encode() + b"\n" + good[2])
    shown = _show("run-a", db, capsys)
    expected = [line.format(run="run-a", started=_started(db, "run-a")) for line in SUMMARY]
    assert shown == [*expected, f"skipped_lines:  2 (not stored; first: line 2 of {path})"]


def test_show_says_nothing_of_skipped_lines_when_there_are_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.duckdb"
    path = journal_path(db, "run-b")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(_journal_lines("run-b")))
    # another run's skipped line is not this run's
    journal_path(db, "run-c").write_bytes(b"not json\n")
    shown = _show("run-b", db, capsys)
    assert shown == [line.format(run="run-b", started=_started(db, "run-b")) for line in SUMMARY]
