"""The Live page's progress (it said only "running..." for about 30 s of the test evaluation): the
phase from the engine's log
lines, the budget used and left, an estimate of when the phase ends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from studio.views.progress import format_seconds, run_progress

BUDGET = {"budget": {"max_evaluations": 10, "max_usd": 100.0, "max_wall_s": 600.0}}


def _results(rows: list[tuple[int, str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["candidate_idx", "split", "ts", "cost_usd"])


def _logs(rows: list[tuple[float, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(i, ts, "info", msg) for i, (ts, msg) in enumerate(rows)],
        columns=["seq", "ts", "level", "message"],
    )


SEARCH = _results(
    [(0, "validation", 1010.0, 1.0), (1, "minibatch", 1030.0, 3.0), (1, "validation", 1040.0, 5.0),
     (2, "minibatch", 1050.0, 6.0)]
)  # fmt: skip
LOGS = [(1001.0, "evaluating the seed on 300 validation examples")]


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (0, 44.4, 59.6, 60, 125, 3600, 3780, -5)] == [
        "0 s", "44 s", "1 min", "1 min", "2 min 5 s", "1 h", "1 h 3 min", "0 s",
    ]  # fmt: skip


def test_the_search_phase_says_the_budget_used_and_left_and_the_first_limit_reached() -> None:
    p = run_progress(
        status="running", config=BUDGET, started_at=1000.0, finished_at=None, cost_usd=6.0,
        logs=_logs(LOGS), results=SEARCH, now=1060.0,
    )  # fmt: skip
    assert p.phase == "search"
    assert p.phase_text == "search: 3 candidate evaluations so far"
    assert [line.text() for line in p.budget] == [
        "3 of 10 (7 left)",
        "$6.00 of $100.00 ($94.00 left)",
        "1 min of 10 min (9 min left)",
    ]
    # 7 evaluations at 20 s each (140 s) come before $94 at $0.10/s and the 540 s left
    assert p.eta_text == (
        "about 2 min 20 s (the search's first limit at its pace so far; the report comes after)"
    )


def test_re_scoring_and_the_held_out_test_are_phases_with_their_own_count_and_eta() -> None:
    logs = _logs([*LOGS, (1100.0, "re-scoring 2 candidate(s) on the full validation split")])
    results = pd.concat([SEARCH, _results([(2, "validation", 1110.0, 7.0)])])
    p = run_progress(
        status="running", config=BUDGET, started_at=1000.0, finished_at=None, cost_usd=7.0,
        logs=logs, results=results, now=1120.0,
    )  # fmt: skip
    assert p.phase == "re-scoring"
    assert p.phase_text == (
        "re-scoring: 1 of 2 minibatch candidates scored on the full validation split"
    )
    assert p.eta_text == "about 20 s"  # one left at 20 s a candidate
    assert p.budget[0].text() == "3 of 10 (7 left)"

    logs = _logs(
        [*LOGS, (1100.0, "re-scoring 2 candidate(s) on the full validation split"),
         (1130.0, "re-scored 2 candidate(s) on the full validation split"),
         (1200.0, "scoring 5 front candidate(s) on the held-out test split")]
    )  # fmt: skip
    results = pd.concat([results, _results([(0, "test", 1210.0, 8.0), (1, "test", 1220.0, 9.0)])])
    p = run_progress(
        status="running", config=BUDGET, started_at=1000.0, finished_at=None, cost_usd=9.0,
        logs=logs, results=results, now=1240.0,
    )  # fmt: skip
    assert p.phase == "test"
    assert p.phase_text == "held-out test: 2 of 5 front candidates scored"
    assert p.eta_text == "about 1 min"  # three left at 20 s a candidate
    assert p.budget[0].text() == "3 of 10 (7 left)"  # test scores are no search evaluations
    assert p.budget[1].text() == "$9.00 of $100.00 ($91.00 left)"


def test_a_finished_run_is_finished_with_its_span_and_no_eta() -> None:
    logs = _logs([*LOGS, (1200.0, "scoring 5 front candidate(s) on the held-out test split")])
    p = run_progress(
        status="completed", config=BUDGET, started_at=1000.0, finished_at=1300.0,
        cost_usd=6.0, logs=logs, results=SEARCH, now=99_999.0,
    )  # fmt: skip
    assert (p.phase, p.phase_text, p.eta_text) == ("finished", "finished (completed)", "")
    assert p.budget[2].text() == "5 min of 10 min (5 min left)"


def test_no_limits_and_no_results_yet() -> None:
    p = run_progress(
        status="running", config={}, started_at=1000.0, finished_at=None, cost_usd=None,
        logs=_logs([]), results=_results([]), now=1005.0,
    )  # fmt: skip
    assert p.phase_text == "search: 0 candidate evaluations so far"
    assert [line.text() for line in p.budget] == [
        "0 (no limit)", "$0.00 (no limit)", "5 s (no limit)",
    ]  # fmt: skip
    assert p.eta_text == ""
    over = run_progress(
        status="running", config=BUDGET, started_at=1000.0, finished_at=None, cost_usd=150.0,
        logs=_logs([]), results=SEARCH, now=1700.0,
    )  # fmt: skip
    assert [line.text() for line in over.budget] == [
        "3 of 10 (7 left)", "$150.00 of $100.00 ($0.00 left)", "11 min 40 s of 10 min (0 s left)",
    ]  # fmt: skip
    assert over.eta_text.startswith("about 0 s")


@pytest.mark.slow
def test_a_real_runs_log_lines_mark_the_held_out_test_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The phase rules read the engine's own words: a real run with a held-out test, looked at
    as it was one second after its first test result."""
    from core.storage import DuckDBRunStore
    from studio.cli import main

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv(
        "TOPOLOGY_STUDIO_DATASETS",
        os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(repo.parent / "shared" / "datasets"),
    )
    db = tmp_path / "runs.duckdb"
    argv = ["search", "gsm8k_replay", "--max-evaluations", "3", "--seed", "3", "--db", str(db)]
    assert main([*argv, "--no-call-cache"]) == 0
    with DuckDBRunStore(db) as store:
        [run_id] = store.list_runs()["run_id"].tolist()
        record = store.get_run(run_id)
        logs = store.logs(run_id)
        results = store.progress(run_id)
        n_front = len(store.test_front(run_id))
    assert record is not None and n_front >= 1
    test_rows = results.loc[results["split"] == "test"]
    first = float(test_rows["ts"].min())
    searched = len({int(i) for i in results.loc[results["split"] != "test", "candidate_idx"]})
    common: dict[str, Any] = {
        "config": record.config, "started_at": record.started_at, "cost_usd": 1.0, "logs": logs,
    }  # fmt: skip
    during = run_progress(
        status="running", finished_at=None, results=results.loc[results["ts"] <= first],
        now=first + 1.0, **common,
    )  # fmt: skip
    assert during.phase == "test"
    assert during.phase_text == f"held-out test: 1 of {n_front} front candidates scored"
    assert during.budget[0].text() == f"{searched} of 3 ({3 - searched} left)"
    after = run_progress(
        status=record.status, finished_at=record.finished_at, results=results, now=0.0, **common
    )
    assert (after.phase, after.phase_text) == ("finished", f"finished ({record.status})")
