"""`runs` and `show` agree on a phase-2 (prompt) run's cost: phase 2 records each candidate's totals
but no example rows, so `runs` summed nothing and said 0 where `show` said the run's spend (metric
calls' model cost + reflection cost)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_text import kv

from core.search.events import (
    CandidateEvaluated,
    CandidateProposed,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from core.storage import DuckDBRunStore
from studio.cli import main

RUN = "20250101-130000-cccccc"
SPEC = (
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "agent_step", '
    '"id": "solve", "agent_name": "small"}}]}'
)


def _events() -> list[SearchEvent]:
    t0 = 1_735_732_800.0
    ev: list[SearchEvent] = [
        RunStarted(
            run_id=RUN,
            seq=0,
            ts=t0,
            problem="letters",
            strategy="gepa",
            seed=1,
            config={"phase": "prompts", "parent_run_id": "p", "genes": ["small.system_prompt"]},
        )
    ]
    for idx, (acc, usd) in enumerate(((0.5, 1.25), (0.75, 1.5))):
        ev.append(
            CandidateProposed(
                run_id=RUN,
                seq=len(ev),
                ts=t0 + len(ev),
                candidate_idx=idx,
                generation=idx - 1,
                spec_hash=f"h{idx}",
                spec_json=SPEC,
                operator="seed" if idx == 0 else "gepa_reflection",
                thought=f"small.system_prompt: prompt {idx}",
            )
        )
        ev.append(
            CandidateEvaluated(
                run_id=RUN,
                seq=len(ev),
                ts=t0 + len(ev),
                candidate_idx=idx,
                spec_hash=f"h{idx}",
                split="validation",
                n_examples=4,
                accuracy=acc,
                cost_usd=usd,
                latency_ms=10.0,
                n_agents=1,
                depth=1,
                aggregate_score=acc,
            )
        )
    # 40 metric calls cost $5.50 and the reflection $0.12
    ev.append(
        RunFinished(
            run_id=RUN,
            seq=len(ev),
            ts=t0 + 9,
            status="completed",
            best_idx=1,
            budget_used={"evaluations": 2.0, "metric_calls": 40.0, "usd": 5.62, "wall_s": 9.0},
        )
    )
    return ev


def test_runs_shows_a_prompt_runs_cost_as_show_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.duckdb"
    with DuckDBRunStore(db) as store:
        store.record_events(_events())
        assert store.list_runs()["cost_usd"].tolist() == [5.62]
    assert main(["runs", "--db", str(db)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    cells = dict(zip(header.split(), row.split(), strict=True))
    assert (cells["run"], cells["strategy"], cells["cost_usd"]) == (RUN, "gepa", "5.620000")
    assert main(["show", RUN, "--db", str(db)]) == 0
    shown = kv(capsys.readouterr().out, "cost_usd_total")
    assert shown == (
        "5.620000 (phase 2: its metric calls' model cost plus the reflection model's cost)"
    )
