"""The Agents page: the roster with each specialist's spec, uses and reliability, and a recorded
solve's subtask tree with hook decisions, cost and outputs; the view builders give exact rows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.agents import BaseAgent
from core.autonomy import AgentFactory, MetaOrchestrator, Skip, SubTask, TaskDecomposition
from core.autonomy.testing import planner_model, specialist_model
from core.memory import DuckDBMemoryStore
from studio.cli.solve import record_solve
from studio.views.agents import hook_rows, roster_table, solves, subtask_rows

REPO = Path(__file__).resolve().parents[2]


def _solve(db: Path) -> None:
    plan = TaskDecomposition(
        subtasks=[
            SubTask(name="triage", description="sort the alerts"),
            SubTask(name="cached", description="reuse"),
            SubTask(name="group", subtasks=[SubTask(name="inner", description="dig")]),
        ]
    )

    def hook(subtask: SubTask, ctx: object) -> object:
        from core.autonomy import Continue

        return Skip(stub_result="from cache") if subtask.name == "cached" else Continue()

    with DuckDBMemoryStore(db) as memory:
        orch = MetaOrchestrator(
            BaseAgent("planner", model=planner_model([plan])),
            AgentFactory(default_model="test"),
            memory=memory,
            hooks=[hook],
            spawn_model=specialist_model(),
        )
        result = asyncio.run(orch.solve("handle the incident"))
        asyncio.run(record_solve(memory, result))


def test_view_rows(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _solve(db)
    with DuckDBMemoryStore(db) as memory:
        roster = roster_table(memory.entries("procedural"))
        recorded = solves(memory.entries("episodic"))
    assert roster[["trigger", "agent", "reliability", "uses"]].values.tolist() == [
        ["inner", "inner_specialist", 1.0, 0],
        ["triage", "triage_specialist", 1.0, 0],
    ]
    assert len(recorded) == 1 and recorded[0][0].endswith("ok  handle the incident")
    tree = subtask_rows(recorded[0][1])
    assert tree[["subtask", "depth", "outcome", "from", "hook"]].values.tolist() == [
        ["triage", 1, "ok", "spawned", "continue"],
        ["cached", 1, "ok", "", "skip"],
        ["group", 1, "ok", "", "continue"],
        ["    inner", 2, "ok", "spawned", "continue"],
    ]
    assert tree["output"].tolist()[:2] == [
        '{"answer": "done: triage", "confidence": 0.9}',
        '"from cache"',
    ]
    assert hook_rows(recorded[0][1])["decision"].tolist() == [
        "continue",
        "skip",
        "continue",
        "continue",
    ]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "studio.duckdb"
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(path))
    monkeypatch.setenv("TOPOLOGY_STUDIO_REGISTRY", str(tmp_path / "registry"))
    yield path


def test_the_page_shows_the_roster_and_a_solve(db: Path) -> None:
    _solve(db)
    at = AppTest.from_file(str(REPO / "pages" / "agents.py"), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Agents"]
    assert at.selectbox(key="specialist").options == ["inner", "triage"]
    assert len(at.dataframe) == 3  # roster, subtask tree, hook decisions
    assert at.dataframe[1].value["subtask"].tolist() == ["triage", "cached", "group", "    inner"]
    at.selectbox(key="specialist").select("triage").run()
    assert not at.exception


def test_an_empty_database_says_how_to_fill_it(db: Path) -> None:
    at = AppTest.from_file(str(REPO / "pages" / "agents.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert [i.value for i in at.info][0].startswith("No specialists yet")
