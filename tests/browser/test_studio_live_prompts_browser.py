"""The Live page's phase-2 chart in a real browser (phase 2's prompt candidates while it runs):
score against metric calls for a prompt run, and a click on a point shows that candidate's prompts.
Its own studio on its own small store (no search needed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from studio_harness import idle, no_errors, require_chromium, serve_studio, settle, shot

from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from core.storage import DuckDBRunStore

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(
    Path(__file__).resolve().parents[3] / "shared" / "datasets"
)
PHASE2 = "20250102-120000-prompt"
SPEC = (
    '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
    '{"kind": "agent_step", "id": "solve", "agent_name": "6b_finetuning"}}]}'
)
# candidate: (score, metric calls when found, solver prompt)
CANDIDATES = {0: (0.40, 10, "Solve it."), 1: (0.55, 16, "Solve it. End with 'Answer: N'.")}


def _events() -> list[SearchEvent]:
    t0 = 1_735_819_200.0
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
                "parent_run_id": "20250101-120000-abc123",
                "genes": ["solver.system_prompt"],
            },
        )
    ]
    for idx, (score, calls, prompt) in CANDIDATES.items():
        common = {"run_id": PHASE2, "candidate_idx": idx, "spec_hash": f"h{idx}"}
        ev.append(
            CandidateProposed(
                **common,
                seq=len(ev),
                ts=t0 + len(ev),
                generation=idx - 1,
                spec_json=SPEC,
                parent_idx=None if idx == 0 else 0,
                operator="seed" if idx == 0 else "gepa_reflection",
                thought=f"solver.system_prompt: {prompt}",
            )
        )
        ev.append(
            CandidateEvaluated(
                **common,
                seq=len(ev),
                ts=t0 + len(ev),
                split="validation",
                n_examples=10,
                accuracy=score,
                cost_usd=0.01,
                latency_ms=100.0,
                n_agents=1,
                depth=1,
                aggregate_score=score,
            )
        )
        ev.append(
            ArchiveSnapshot(
                run_id=PHASE2,
                seq=len(ev),
                ts=t0 + len(ev),
                generation=idx - 1,
                entries=list(range(idx + 1)),
                front=[idx],
                best_idx=idx,
                best_score=score,
                n_evaluations=calls,
                cost_usd_total=0.01 * calls,
            )
        )
    ev.append(RunFinished(run_id=PHASE2, seq=len(ev), ts=t0 + 20, status="completed", best_idx=1))
    return ev


@pytest.fixture(scope="module")
def own_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("live_prompts")
    with DuckDBRunStore(root / "runs.duckdb") as store:
        store.record_events(_events())
    env = {"TOPOLOGY_STUDIO_DATASETS": DATASETS, "TOPOLOGY_STUDIO_USER": "browser-tester"}
    with serve_studio(root / "runs.duckdb", registry=root / "registry", env=env) as url:
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


def test_a_click_on_a_prompt_candidate_shows_its_prompts(pg: Any, own_studio: str) -> None:
    pg.goto(f"{own_studio}/live?run={PHASE2}")
    settle(pg, "Live search")
    pg.get_by_text("Phase 2: prompt candidates", exact=True).first.wait_for(timeout=30_000)
    chart = pg.locator(".js-plotly-plot").nth(1)
    chart.locator(".scatterlayer .points path").first.wait_for(timeout=30_000)
    code = pg.locator('[data-testid="stCode"]')
    # the best candidate's prompt first
    assert code.last.inner_text().strip() == "Solve it. End with 'Answer: N'."
    chart.scroll_into_view_if_needed()  # a click lands inside the viewport only
    pg.wait_for_timeout(300)
    # the seed's point (candidate 0), found by its customdata in the figure's own data
    target = chart.evaluate(
        """(gd) => {
            let out = null;
            gd.querySelectorAll('.scatterlayer .trace').forEach((g, t) => {
                g.querySelectorAll('path.point').forEach((el, k) => {
                    const cd = gd._fullData[t].customdata;
                    if (cd && Number(cd[k][0]) === 0) {
                        const r = el.getBoundingClientRect();
                        out = {x: r.x + r.width / 2, y: r.y + r.height / 2};
                    }
                });
            });
            return out;
        }"""
    )
    assert target is not None
    pg.mouse.move(target["x"], target["y"])
    pg.wait_for_timeout(300)
    pg.mouse.click(target["x"], target["y"])
    idle(pg)
    pg.wait_for_function(
        "() => { const c = document.querySelectorAll('[data-testid=\"stCode\"]');"
        " return c.length && c[c.length - 1].innerText.trim() === 'Solve it.'; }",
        timeout=30_000,
    )
    no_errors(pg)
    shot(pg, "live-prompts-click")
