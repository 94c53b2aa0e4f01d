"""The studio manager: the one store (busy files fall back to the journals), background searches
(start, pause, resume, stop), proposals, approvals and rollback against a topology registry."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.errors import StaleTargetError
from core.ir import parse_topology
from core.storage import RunJournal, journal_path
from studio import manager as manager_mod
from studio.manager import SearchRequest, StudioManager

SEED = parse_topology(
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "agent_step", '
    '"id": "solve", "agent_name": "6b_finetuning"}}]}'
)
BETTER = parse_topology(
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "agent_step", '
    '"id": "solve", "agent_name": "175b_verification"}}]}'
)

_HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
sys.stdin.readline()
con.close()
"""


def test_a_database_held_by_another_process_gives_a_journal_view_then_the_file(
    tmp_path: Path, make_events, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.duckdb"
    with RunJournal.create(journal_path(db, "run-a")) as journal:
        for event in make_events("run-a"):
            journal.append(event)
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            m = StudioManager(db, registry_root=tmp_path / "reg")
            store = m.store
            assert store.read_only
            assert "held by another process" in m.store_note
            assert m.store.list_runs()["run_id"].tolist() == ["run-a"]
            assert m.store.archive("run-a")["candidate_idx"].tolist() == [0, 1, 2, 3]
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=30)
    monkeypatch.setattr(manager_mod, "RETRY_BUSY_S", 0.0)
    m._next_try = 0.0  # the retry is due now
    assert not m.store.read_only
    assert m.store_note == ""
    assert m.store.list_runs()["run_id"].tolist() == ["run-a"]  # the file ingested the journal
    m.close()


def test_propose_approve_reject_and_rollback(tmp_path: Path, small_db: Path) -> None:
    m = StudioManager(small_db, registry_root=tmp_path / "reg")
    p1 = m.propose("solver", SEED, who="ann")
    shown = m.dry_run("solver", SEED)
    assert shown.base_version is None and shown.changed
    done = m.approve(p1, "solver", SEED, shown, comment="first", who="ann")
    assert done.new_version == 1
    current = tmp_path / "reg" / "solver" / "current.json"
    assert parse_topology(current.read_text()) == SEED

    p2 = m.propose("solver", BETTER, run_id="20250101-120000-abc123", candidate_idx=1, who="bob")
    stale = m.dry_run("solver", BETTER)
    m.reject(p2, comment="too dear", who="ann")
    p3 = m.propose("solver", BETTER, who="bob")
    fresh = m.dry_run("solver", BETTER)
    assert fresh.base_version == 1
    assert m.approve(p3, "solver", BETTER, fresh, who="ann").new_version == 2
    with pytest.raises(StaleTargetError):
        m.approve(p2, "solver", BETTER, stale, who="ann")  # made against version 1
    assert parse_topology(current.read_text()) == BETTER

    assert m.rollback("solver", 1, comment="back", who="ann") == 3
    assert parse_topology(current.read_text()) == SEED
    props = m.store.list_proposals().sort_values("proposal_id")
    assert props["decision"].tolist() == ["approved", "rejected", "approved", "approved"]
    assert props["applied_version"].tolist()[2:] == [2, 3]
    assert props["who"].tolist() == ["ann", "ann", "ann", "ann"]
    assert m.store.list_topology_versions("solver")["version"].tolist() == [1, 2]  # drafts
    history = m.registry.history("solver")
    assert [h.note for h in history] == ["proposal 1", "proposal 3", "rollback to v1"]
    m.close()


@pytest.mark.slow
def test_a_background_search_pauses_resumes_and_is_ingested_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv(
        "TOPOLOGY_STUDIO_DATASETS",
        os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(repo.parent / "shared" / "datasets"),
    )
    m = StudioManager(tmp_path / "runs.duckdb", registry_root=tmp_path / "reg")
    run_id = m.start_search(
        SearchRequest(
            problem="gsm8k_replay", max_evaluations=4, time_scale=0.0, use_test_split=False, seed=3
        )
    )
    assert m.pause(run_id)
    bg = m.search(run_id)
    assert bg is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not bg.held:
        time.sleep(0.05)
    held = bg.n_events
    time.sleep(0.5)
    assert bg.state == "paused" and bg.n_events == held  # nothing moves while paused
    seen = m.store.archive(run_id)
    assert seen["candidate_idx"].tolist() == [0]  # ingested from the journal while paused
    assert m.resume(run_id)
    while time.monotonic() < deadline and bg.alive:
        time.sleep(0.1)
    record = m.store.get_run(run_id)
    assert record is not None and record.status in ("completed", "stopped")
    assert bg.state == record.status, bg.error  # one vocabulary of states, the store's
    assert len(m.store.archive(run_id)) >= 2
    assert not m.stop(run_id)  # finished: nothing to stop
    m.close()


@pytest.mark.slow
def test_stop_releases_a_paused_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv(
        "TOPOLOGY_STUDIO_DATASETS",
        os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(repo.parent / "shared" / "datasets"),
    )
    m = StudioManager(tmp_path / "runs.duckdb", registry_root=tmp_path / "reg")
    run_id = m.start_search(
        SearchRequest(
            problem="gsm8k_replay", max_evaluations=30, time_scale=0.0, use_test_split=False
        )
    )
    m.pause(run_id)
    bg = m.search(run_id)
    assert bg is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not bg.held:
        time.sleep(0.05)
    assert m.stop(run_id)
    while time.monotonic() < deadline and bg.alive:
        time.sleep(0.1)
    assert bg.state == "stopped", bg.error
    record = m.store.get_run(run_id)
    assert record is not None and record.status == "stopped"
    assert record.reason == "stopped from the studio"
    m.close()


def test_a_search_that_fails_before_its_first_event_leaves_no_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv(
        "TOPOLOGY_STUDIO_DATASETS",
        os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(repo.parent / "shared" / "datasets"),
    )
    m = StudioManager(tmp_path / "runs.duckdb", registry_root=tmp_path / "reg")
    # refused before its thread starts (never "Started run ..." for a run that cannot start): no
    # run id, no journal left
    from core.errors import BudgetError

    with pytest.raises(BudgetError, match="max_usd=0 allows no work"):
        m.start_search(SearchRequest(problem="gsm8k_replay", max_usd=0.0, time_scale=0.0))
    assert m.searches() == []
    journals = journal_path(tmp_path / "runs.duckdb", "x").parent
    assert not journals.exists() or not list(journals.glob("*.jsonl"))
    assert m.store.list_runs().empty
    m.close()
