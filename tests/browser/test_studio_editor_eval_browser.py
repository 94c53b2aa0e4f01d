"""Editor evaluations in a real browser (first-class: stored in the run store, compared with the
candidate they came from): a candidate opened from Live's inspector, edited, evaluated; the
evaluation is compared with that candidate on the same examples, stored as a run, and opens in
Compare beside it.

Its own studio on its own store (a parent measured by an editor evaluation), so the run it adds
never shows in the other browser modules' shared store.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from studio_harness import idle, no_errors, require_chromium, serve_studio, settle, shot

from core.ir import parse_topology
from core.storage import DuckDBRunStore

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(
    Path(__file__).resolve().parents[3] / "shared" / "datasets"
)
SMALL = {
    "kind": "pipeline",
    "id": "seed",
    "steps": [{"operation": {"kind": "agent_step", "id": "solve", "agent_name": "6b_finetuning"}}],
}
BIG = json.loads(json.dumps(SMALL).replace("6b_finetuning", "175b_verification"))


@pytest.fixture(scope="module")
def parent_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store whose only run measured the 6b_finetuning topology on 8 validation examples."""
    from studio.manager import StudioManager

    root = tmp_path_factory.mktemp("editor_eval_browser")
    db = root / "runs.duckdb"
    os.environ.setdefault("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    manager = StudioManager(db, registry_root=root / "registry")
    try:
        spec = parse_topology(SMALL)
        ev = manager.evaluate("gsm8k_replay", spec, limit=8)
        run_id = manager.record_evaluation("gsm8k_replay", spec, ev, source="browser test")
    finally:
        manager.close()
    return {"db": db, "root": root, "run_id": run_id}


@pytest.fixture(scope="module")
def own_studio(parent_store: dict[str, Any]) -> Iterator[str]:
    env = {"TOPOLOGY_STUDIO_DATASETS": DATASETS, "TOPOLOGY_STUDIO_USER": "browser-tester"}
    with serve_studio(
        parent_store["db"], registry=parent_store["root"] / "registry", env=env
    ) as url:
        yield url


@pytest.fixture
def pg(own_studio: str, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page of the module's own studio (the store is built before Playwright's loop runs:
    its evaluation needs asyncio.run)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        shot(page, f"FAILED-{request.node.name}")
    context.close()


def test_an_edited_candidate_is_evaluated_compared_with_it_and_opens_in_compare(
    parent_store: dict[str, Any], own_studio: str, pg: Any
) -> None:
    parent = parent_store["run_id"]
    pg.goto(f"{own_studio}/live?run={parent}&candidate=0")
    settle(pg, "Live search")
    pg.get_by_role("heading", name=re.compile(r"^candidate 0 \(")).first.wait_for(timeout=60_000)
    pg.get_by_role("button", name="Open in the editor").first.click()
    settle(pg, "Topology editor")
    pg.get_by_text(f"Editing: run {parent} candidate 0").first.wait_for(timeout=30_000)
    # the edit: another agent, through the JSON tab
    pg.get_by_role("tab", name="JSON", exact=True).click()
    idle(pg)
    box = pg.locator('[data-testid="stTextArea"] textarea').first
    box.fill(json.dumps(BIG, indent=2))
    box.press("Control+Enter")
    idle(pg)
    pg.get_by_text("Valid topology").first.wait_for(timeout=30_000)
    limit = pg.get_by_label("Examples (0 = all)")
    limit.fill("5")
    limit.press("Enter")
    idle(pg)
    pg.get_by_role("button", name="Evaluate", exact=True).click()
    pg.get_by_text(f"Compared with its parent, run {parent} candidate 0").first.wait_for(
        timeout=120_000
    )
    idle(pg)
    no_errors(pg)
    table = pg.locator('[data-testid="stDataFrame"]').filter(has_text="this topology").first
    table.wait_for(timeout=30_000)
    pg.get_by_text(
        "2 wrong to right, 0 right to wrong, 1 both right, 2 both wrong. McNemar exact test on "
        "5 paired examples"
    ).first.wait_for(timeout=30_000)
    stored = pg.get_by_role("link", name=re.compile(r"^Stored as run ")).first
    new_run = str(stored.inner_text()).removeprefix("Stored as run ").strip()
    shot(pg, "editor-eval-vs-parent")
    # the studio holds the file: read the runs from their journals (each evaluation wrote one)
    with DuckDBRunStore.from_journals(f"{parent_store['db']}.journals") as store:
        runs = set(store.list_runs()["run_id"].tolist())
    assert runs == {parent, new_run}
    # Compare opens with the parent and the stored evaluation side by side
    pg.get_by_role("link", name="Compare with the parent").first.click()
    settle(pg, "Compare")
    pg.locator('[data-testid="stGraphVizChart"] svg').nth(1).wait_for(timeout=60_000)
    assert f"items={parent}:0,{new_run}:0" in pg.url.replace("%3A", ":").replace("%2C", ",")
    pg.get_by_text(re.compile(r"McNemar exact test on 5 paired examples")).first.wait_for(
        timeout=60_000
    )
    no_errors(pg)
    shot(pg, "editor-eval-in-compare")
