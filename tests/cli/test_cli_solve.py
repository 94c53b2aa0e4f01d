"""`solve GOAL --planner demo` and `roster` (the meta orchestrator's command line): the orchestrator
runs offline, shows its subtasks as it goes, prints each one and the cost line, records the roster
and the solve in the database, and a second `solve` takes the specialists from the roster."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.memory import DuckDBMemoryStore
from studio.cli import main
from studio.cli.solve import SOLVE_KEY_PREFIX, demo_decomposition

GOAL = "Investigate the latency regression and propose a remediation"


def test_demo_planner_splits_the_goal_into_clauses() -> None:
    plan = demo_decomposition(GOAL)
    assert [(s.name, s.description) for s in plan.subtasks] == [
        ("investigate_the", "Investigate the latency regression"),
        ("propose_a", "propose a remediation"),
    ]


def test_solve_then_roster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "studio.duckdb"
    assert main(["solve", GOAL, "--planner", "demo", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[:5] == [
        "plan: investigate_the, propose_a",
        "- investigate_the ...",
        "  investigate_the: ok",
        "- propose_a ...",
        "  propose_a: ok",
    ]
    lines = out.splitlines()
    assert lines[0].split() == ["subtask", "outcome", "agent", "from", "hook", "ms", "cost"]
    assert lines[1].split()[:5] == [
        "investigate_the",
        "ok",
        "investigate_the_specialist",
        "spawned",
        "continue",
    ]
    assert "summary: 2/2 subtasks succeeded" in lines
    assert any(line.startswith("cost: $0.000000 over 5 model requests") for line in lines)

    assert main(["roster", "--db", str(db)]) == 0
    roster = capsys.readouterr().out.splitlines()
    assert [r.split() for r in roster] == [
        ["trigger", "agent", "reliability", "uses", "successes", "tools"],
        ["investigate_the", "investigate_the_specialist", "1.000", "0", "0", "-"],
        ["propose_a", "propose_a_specialist", "1.000", "0", "0", "-"],
    ]

    assert main(["solve", GOAL, "--planner", "demo", "--db", str(db)]) == 0
    again = capsys.readouterr().out.splitlines()
    assert again[1].split()[3] == "roster"
    assert any(line.startswith("cost: $0.000000 over 3 model requests") for line in again)
    with DuckDBMemoryStore(db) as memory:
        solves = [e for e in memory.entries("episodic") if e.key.startswith(SOLVE_KEY_PREFIX)]
        assert len(solves) == 2
        recorded = solves[0].metadata["execution_result"]
        assert recorded["goal"] == GOAL and recorded["success"] is True
        hits = asyncio.run(memory.recall("propose a remediation", memory_type="procedural", k=1))
        assert hits[0].entry.key == "propose_a"
        assert hits[0].entry.uses == 1


def test_a_planner_must_be_provider_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "g", "--planner", "gpt4", "--no-memory"]) == 2
    assert "--planner must be provider:model" in capsys.readouterr().err


def test_an_empty_roster_says_how_to_fill_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["roster", "--db", str(tmp_path / "x.duckdb")]) == 0
    assert capsys.readouterr().out.startswith("no specialists yet")


def test_an_unknown_planner_model_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    # the bug this pins (found in review): this printed "internal error: UserError: ..." (exit 1)
    assert main(["solve", "g", "--planner", "nosuch:model", "--no-memory"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "topology-studio: error: solve: --planner/--model: Unknown model: nosuch:model"
    )
