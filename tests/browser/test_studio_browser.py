"""The studio in a real browser (Debian Chromium through Playwright).

On a store holding a finished replay search (made by the command line): every page opens
without an error and is screenshotted to `test-artifacts/`; a click on a point of the Pareto
chart shows that very candidate in the inspector (F11: the point's own data, not its index);
a step inserted in the editor is saved and approved on the diff page, which changes the target
file and records the approval. With a search writing its journal in another process, the live
page shows new candidates without a reload. The studio asks for nothing outside 127.0.0.1.

Skipped when Chromium is missing, except in CI (`CI=true`), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from studio_harness import (
    REPO,
    doc_shot,
    idle,
    no_errors,
    open_drawn,
    page_shot_name,
    require_chromium,
    select,
    settle,
    shot,
    studio_pages,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

require_chromium()


def test_every_page_opens_and_is_screenshotted(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    for path, title in studio_pages(replay_store["run_id"]):
        open_drawn(page, studio + path, title)
        no_errors(page)
        shot(page, "w1400-" + page_shot_name(title))  # beside the w1000- ones
        if title == "Live search":
            doc_shot(page, "live")  # the README's picture of the Live page


def test_a_click_on_the_pareto_chart_inspects_that_candidate(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    page.goto(f"{studio}/live?run={replay_store['run_id']}")
    settle(page, "Live search")
    page.get_by_text("stopped: max_evaluations reached").first.wait_for(timeout=30_000)
    page.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(timeout=60_000)
    # a point that stands clear of the others (a click is unambiguous), preferably in a trace
    # after the first (where a point index and the row index differ: F11); its candidate is
    # read from the figure's own data
    target = page.evaluate(
        """() => {
            const gd = document.querySelector('.js-plotly-plot');
            const pts = [];
            gd.querySelectorAll('.scatterlayer .trace').forEach((g, t) => {
                g.querySelectorAll('path.point').forEach((el, k) => {
                    const r = el.getBoundingClientRect();
                    pts.push({t, k, x: r.x + r.width / 2, y: r.y + r.height / 2});
                });
            });
            for (const p of pts) {
                p.gap = Math.min(...pts.filter(q => q !== p).map(q => Math.hypot(q.x - p.x, q.y - p.y)), 1e9);
            }
            const named = pts.filter(p => gd._fullData[p.t].name !== 'selected');
            const later = named.filter(p => p.t >= 1 && p.gap >= 20);
            const pool = later.length ? later : named;
            pool.sort((a, b) => b.gap - a.gap);
            const p = pool[0];
            const cd = gd._fullData[p.t].customdata[p.k];  // decoded (typed arrays too)
            const candidate = cd != null && cd.length !== undefined ? Number(cd[0]) : Number(cd);
            return {x: p.x, y: p.y, trace: p.t, candidate};
        }"""
    )
    x, y = target["x"], target["y"]
    page.mouse.move(x, y)
    page.wait_for_timeout(300)
    page.mouse.click(x, y)
    idle(page)
    heading = page.get_by_role("heading", name=re.compile(rf"^candidate {target['candidate']} \("))
    heading.first.wait_for(timeout=30_000)
    assert f"candidate={target['candidate']}" in page.url
    no_errors(page)
    shot(page, "live-inspector")


def test_insert_a_step_save_and_approve_it(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    registry: Path = replay_store["registry"]
    current = registry / "gsm8k_replay" / "current.json"
    before = current.read_text()
    page.goto(f"{studio}/editor")
    settle(page, "Topology editor")
    page.locator('[data-testid="stRadio"] [role="radiogroup"] label').nth(1).click()  # step 1
    page.get_by_text("at $.steps[0].operation").first.wait_for(timeout=30_000)
    idle(page)
    select(page, "New step kind", "function_step")
    select(page, "Name", "extract_final_answer")
    page.get_by_role("button", name="Insert step").click()
    idle(page)
    page.get_by_text("Inserted a function_step (extract_final_answer) after").first.wait_for(
        timeout=30_000
    )
    page.get_by_role("button", name="Save as new version").click()
    idle(page)
    saved = page.get_by_text(re.compile(r"proposal \d+ waits for review")).first
    saved.wait_for(timeout=30_000)
    proposal = re.search(r"proposal (\d+)", saved.inner_text())
    assert proposal is not None
    no_errors(page)
    shot(page, "editor-saved")

    page.goto(f"{studio}/diff?proposal={proposal.group(1)}")
    settle(page, "Diff & apply")
    page.get_by_text("1 added, 0 removed, 1 changed").first.wait_for(timeout=30_000)
    shot(page, "diff-review")
    doc_shot(page, "diff")  # the README's picture of a diff
    page.get_by_label("Comment").fill("adds the answer extraction")
    page.keyboard.press("Enter")
    idle(page)
    page.get_by_role("button", name="Approve and apply").click()
    idle(page)
    page.get_by_text("Applied: gsm8k_replay is now version 2.").first.wait_for(timeout=30_000)
    no_errors(page)
    shot(page, "diff-approved")

    after = current.read_text()
    assert after != before
    steps = json.loads(after)["steps"]
    assert [s["operation"].get("callable_name") for s in steps][1] == "extract_final_answer"
    meta = json.loads((registry / "gsm8k_replay" / "v000002.meta.json").read_text())
    assert meta["approval"]["by"] == "browser-tester"
    assert meta["approval"]["comment"] == "adds the answer extraction"
    assert meta["base_version"] == 1
    # the store recorded the decision: the page reads it back from there
    page.goto(f"{studio}/diff?proposal={proposal.group(1)}")
    settle(page, "Diff & apply")
    recorded = page.get_by_text(re.compile(r"^Approved by browser-tester at .*: adds the answer"))
    recorded.first.wait_for(timeout=30_000)
    assert "(wrote version 2)" in recorded.first.inner_text()


def test_the_live_page_shows_new_candidates_without_a_reload(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    db: Path = replay_store["db"]
    stop = replay_store["root"] / "STOP-live"
    writer = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("journal_writer.py")), str(db), "live-run", "600", str(stop)],
        cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        journal = Path(f"{db}.journals") / "live-run.jsonl"
        while time.monotonic() < deadline and (
            not journal.exists() or journal.stat().st_size < 2000
        ):
            time.sleep(0.1)
        page.goto(f"{studio}/live?run=live-run")
        settle(page, "Live search")
        page.get_by_text("running, data as of").first.wait_for(timeout=30_000)

        def candidates() -> int:
            tile = page.locator('[data-testid="stMetric"]').filter(has_text="candidates").first
            return int(tile.locator('[data-testid="stMetricValue"]').inner_text())

        first = candidates()
        loads: list[str] = []
        page.on("load", lambda _: loads.append("load"))
        seen = [first]
        for _ in range(10):
            page.wait_for_timeout(1000)
            seen.append(candidates())
            if seen[-1] > first and len(seen) > 3:
                break
        assert seen[-1] > first, seen
        assert loads == []  # no reload: the fragment refreshed itself
        shot(page, "live-running")
    finally:
        stop.touch()
        writer.wait(timeout=30)
