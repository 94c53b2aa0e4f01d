"""Diff & apply on a phase-2 (prompt) proposal in a real browser (both parts of a two-phase result
applied through one reviewed diff): the topology part and each prompt's word diff side by side, the
prompts applied alone (the topology part rejected) in one write. Its own studio on its own small
store (no search needed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from studio_harness import idle, no_errors, require_chromium, serve_studio, settle, shot

from core.ir import TopologySpec, parse_topology, spec_hash
from core.search.events import CandidateProposed, RunFinished, RunStarted, SearchEvent
from core.search.registry import Approval, TopologyRegistry
from core.storage import DuckDBRunStore

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(
    Path(__file__).resolve().parents[3] / "shared" / "datasets"
)
PHASE2 = "20250101-130000-bbbbbb"
EVOLVED = "Find the flaw in the solution. End with a line 'Answer: N'."


def _spec(*, judge: bool = True, critic: str = "Find the flaw in the solution.") -> TopologySpec:
    def agent(node_id: str, name: str, prompt: str) -> dict[str, object]:
        return {
            "operation": {
                "kind": "agent_step",
                "id": node_id,
                "inline_spec": {
                    "name": name,
                    "system_prompt": prompt,
                    "output_schema": {"type": "string"},
                },
            }
        }

    steps = [agent("critique", "critic", critic)]
    if judge:
        steps.append(agent("judge", "judge", "Judge the critique."))
    return parse_topology({"kind": "pipeline", "id": "root", "steps": steps})


def _events() -> list[SearchEvent]:
    winner = _spec()
    t0 = 1_735_740_000.0
    ev: list[SearchEvent] = [
        RunStarted(
            run_id=PHASE2,
            seq=0,
            ts=t0,
            problem="gsm8k_replay",
            strategy="gepa",
            seed=1,
            config={
                "phase": "prompts",
                "parent_run_id": "20250101-120000-aaaaaa",
                "genes": ["critic.system_prompt", "judge.system_prompt"],
            },
        )
    ]
    for idx, critic in enumerate(("Find the flaw in the solution.", EVOLVED)):
        ev.append(
            CandidateProposed(
                run_id=PHASE2,
                seq=len(ev),
                ts=t0 + len(ev),
                candidate_idx=idx,
                generation=idx - 1,
                spec_hash=f"{spec_hash(winner)}-p{idx}",
                spec_json=winner.model_dump_json(),
                operator="seed" if idx == 0 else "gepa_reflection",
                thought=f"critic.system_prompt: {critic}\njudge.system_prompt: Judge the critique.",
            )
        )
    ev.append(RunFinished(run_id=PHASE2, seq=len(ev), ts=t0 + 9, status="completed"))
    return ev


@pytest.fixture(scope="module")
def own_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from studio.manager import StudioManager

    root = tmp_path_factory.mktemp("diff_prompts")
    db, registry = root / "runs.duckdb", root / "registry"
    with DuckDBRunStore(db) as store:
        store.record_events(_events())
    TopologyRegistry(registry).write(
        "letters", _spec(judge=False), None, approval=Approval(by="ann")
    )
    manager = StudioManager(db, registry_root=registry)
    try:
        pid = manager.propose("letters", _spec(), run_id=PHASE2, candidate_idx=1, who="bo")
    finally:
        manager.close()
    return {"db": db, "registry": registry, "pid": pid}


@pytest.fixture(scope="module")
def own_studio(own_store: dict[str, Any]) -> Iterator[str]:
    env = {"TOPOLOGY_STUDIO_DATASETS": DATASETS, "TOPOLOGY_STUDIO_USER": "browser-tester"}
    with serve_studio(own_store["db"], registry=own_store["registry"], env=env) as url:
        yield url


@pytest.fixture
def pg(own_studio: str, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        shot(page, f"FAILED-{request.node.name}")
    context.close()


def test_a_phase_2_proposal_shows_both_parts_and_applies_the_prompts_alone(
    pg: Any, own_studio: str, own_store: dict[str, Any]
) -> None:
    pid = own_store["pid"]
    pg.goto(f"{own_studio}/diff?proposal={pid}")
    settle(pg, "Diff & apply")
    no_errors(pg)
    main = pg.locator('[data-testid="stMain"]')
    assert main.get_by_text("Topology part: the search's winner", exact=True).count() == 1
    assert main.get_by_text("Prompt part: the evolved prompts", exact=True).count() == 1
    # the critic's prompt side by side: nothing removed, the added words marked green
    # (the browser writes the styles back normalised: #ccf5d3 as rgb(204, 245, 211))
    added = main.locator("span[style*='rgb(204, 245, 211)']")
    added.first.wait_for(timeout=60_000)  # (a loaded machine draws the diff after the script run)
    assert added.all_inner_texts() == ["End with a line 'Answer: N'."]
    assert main.locator("span[style*='line-through']").count() == 0
    # the "now" and "evolved" boxes of one prompt sit side by side
    boxes = main.locator("div[style*='border: 1px solid rgb(221, 221, 221)']")
    assert boxes.count() == 2  # the critic's prompt: the judge's is candidate 0's
    # both boxes measured in one layout: read one after the other, a graph drawn above them
    # in between once moved the second 1,333 px down (CI)
    now, evolved = boxes.evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect();"
        " return {x: r.x, y: r.y, width: r.width}; })"
    )
    assert abs(now["y"] - evolved["y"]) < 2 and evolved["x"] > now["x"] + now["width"]
    shot(pg, "diff-prompts-both")
    pg.get_by_text("Prompts only (reject the topology)", exact=True).click()
    idle(pg)
    assert main.get_by_text("Topology part: rejected", exact=True).count() == 1
    assert boxes.count() == 2
    pg.get_by_role("button", name="Approve and apply").click()
    applied = main.get_by_text(
        "Applied prompts only (topology rejected): letters is now version 2.", exact=True
    )
    applied.wait_for(timeout=60_000)  # (the rerun the click starts may begin after idle's wait)
    idle(pg)
    no_errors(pg)
    assert applied.count() == 1
    shot(pg, "diff-prompts-applied")
    version, spec = TopologyRegistry(own_store["registry"]).current("letters")
    assert (version, spec) == (2, _spec(judge=False, critic=EVOLVED))
