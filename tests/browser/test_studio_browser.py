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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from studio_harness import ARTIFACTS, REPO, chromium_missing_reason, launch_chromium, serve_studio

from core.ir import parse_topology
from core.search.registry import TopologyRegistry
from core.storage import DuckDBRunStore

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")

_missing = chromium_missing_reason()
if _missing is not None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the browser tests need Chromium in CI: {_missing}", pytrace=False)
    pytest.skip(_missing, allow_module_level=True)


@pytest.fixture(scope="module")
def replay_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A database with a finished GSM8K replay search, and a registry holding its seed."""
    root = tmp_path_factory.mktemp("studio_browser")
    db = root / "runs.duckdb"
    env = dict(
        os.environ, TOPOLOGY_STUDIO_DATASETS=DATASETS, TOPOLOGY_STUDIO_CACHE=str(root / "cache")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "studio.cli", "search", "gsm8k_replay", "--strategy", "evolutionary",
         "--seed", "1", "--db", str(db), "--max-evaluations", "10", "--time-scale", "0", "--no-test",
         "--set", "gold.validation_size=40", "--minibatch-size", "8"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = re.search(r"^run:\s+(\S+)", proc.stdout, re.MULTILINE)
    assert run_id is not None, proc.stdout[-2000:]
    with DuckDBRunStore(db) as store:
        archive = store.archive(run_id.group(1))
        seed_json = store.get_spec(str(archive["spec_hash"].tolist()[0]))
    registry = root / "registry"
    seed = parse_topology(seed_json or "")
    TopologyRegistry(registry).write("gsm8k_replay", seed, None, note="seed")
    return {"db": db, "run_id": run_id.group(1), "registry": registry, "root": root}


@pytest.fixture(scope="module")
def studio(replay_store: dict[str, Any]) -> Iterator[str]:
    env = {"TOPOLOGY_STUDIO_DATASETS": DATASETS, "TOPOLOGY_STUDIO_USER": "browser-tester"}
    with serve_studio(replay_store["db"], registry=replay_store["registry"], env=env) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, studio: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page that records every request leaving 127.0.0.1 (there must be none)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    outside: list[str] = []

    def watch(request: Any) -> None:
        url = str(request.url)
        if not url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:")):
            outside.append(url)

    pg.on("request", watch)
    yield pg
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        _shot(pg, f"FAILED-{request.node.name}")
    context.close()
    assert outside == [], f"requests left 127.0.0.1: {outside[:5]}"


def _shot(pg: Any, name: str) -> None:
    """Screenshot the whole page: Streamlit scrolls inside its main block, so the viewport is
    made as tall as that block for the picture (and set back after)."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = pg.viewport_size or {"width": 1400, "height": 1000}
    height = pg.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    pg.set_viewport_size({"width": size["width"], "height": max(size["height"], int(height) + 40)})
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(ARTIFACTS / f"studio-{name}.png"), full_page=True)
    pg.set_viewport_size(size)


def _settle(pg: Any, title: str, timeout_ms: int = 60_000) -> None:
    """Wait for the page's title and for Streamlit to finish running the script."""
    pg.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=timeout_ms)
    _idle(pg, timeout_ms)


def _idle(pg: Any, timeout_ms: int = 60_000) -> None:
    pg.wait_for_timeout(300)
    pg.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')",
        timeout=timeout_ms,
    )
    pg.wait_for_timeout(300)


def _no_errors(pg: Any) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0
    errors = pg.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert errors == [], errors


def _select(pg: Any, label: str, option: str) -> None:
    """Choose `option` in the selectbox labelled `label` (retried: a rerun may close the list)."""
    box = pg.get_by_role("combobox", name=label, exact=True).first
    for _ in range(5):
        _idle(pg)
        box.click()
        try:
            pg.get_by_role("option", name=option, exact=True).first.click(timeout=5_000)
        except Exception:  # noqa: BLE001 (the list closed under a rerun: try again)
            pg.keyboard.press("Escape")
            continue
        _idle(pg)
        if box.input_value() == option:
            return
    raise AssertionError(f"could not choose {option!r} in {label!r}")


def test_every_page_opens_and_is_screenshotted(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    run_id = replay_store["run_id"]
    for path, title in (
        ("/", "Runs"),
        (f"/live?run={run_id}", "Live search"),
        ("/editor", "Topology editor"),
        (f"/compare?run={run_id}", "Compare"),
        ("/diff", "Diff & apply"),
    ):
        page.goto(studio + path)
        _settle(page, title)
        if title == "Live search":
            page.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(
                timeout=60_000
            )
        if title in ("Topology editor", "Compare"):
            page.locator('[data-testid="stGraphVizChart"] svg').first.wait_for(timeout=60_000)
        _no_errors(page)
        _shot(page, title.lower().replace(" & ", "-").replace(" ", "-"))


def test_a_click_on_the_pareto_chart_inspects_that_candidate(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    page.goto(f"{studio}/live?run={replay_store['run_id']}")
    _settle(page, "Live search")
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
    _idle(page)
    heading = page.get_by_role("heading", name=re.compile(rf"^candidate {target['candidate']} \("))
    heading.first.wait_for(timeout=30_000)
    assert f"candidate={target['candidate']}" in page.url
    _no_errors(page)
    _shot(page, "live-inspector")


def test_insert_a_step_save_and_approve_it(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    registry: Path = replay_store["registry"]
    current = registry / "gsm8k_replay" / "current.json"
    before = current.read_text()
    page.goto(f"{studio}/editor")
    _settle(page, "Topology editor")
    page.locator('[data-testid="stRadio"] [role="radiogroup"] label').nth(1).click()  # step 1
    page.get_by_text("at $.steps[0].operation").first.wait_for(timeout=30_000)
    _idle(page)
    _select(page, "New step kind", "function_step")
    _select(page, "Name", "extract_final_answer")
    page.get_by_role("button", name="Insert step").click()
    _idle(page)
    page.get_by_text("Inserted a function_step (extract_final_answer) after").first.wait_for(
        timeout=30_000
    )
    page.get_by_role("button", name="Save as new version").click()
    _idle(page)
    saved = page.get_by_text(re.compile(r"proposal \d+ waits for review")).first
    saved.wait_for(timeout=30_000)
    proposal = re.search(r"proposal (\d+)", saved.inner_text())
    assert proposal is not None
    _no_errors(page)
    _shot(page, "editor-saved")

    page.goto(f"{studio}/diff?proposal={proposal.group(1)}")
    _settle(page, "Diff & apply")
    page.get_by_text("1 added, 0 removed, 1 changed").first.wait_for(timeout=30_000)
    _shot(page, "diff-review")
    page.get_by_label("Comment").fill("adds the answer extraction")
    page.keyboard.press("Enter")
    _idle(page)
    page.get_by_role("button", name="Approve and apply").click()
    _idle(page)
    page.get_by_text("Applied: gsm8k_replay is now version 2.").first.wait_for(timeout=30_000)
    _no_errors(page)
    _shot(page, "diff-approved")

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
    _settle(page, "Diff & apply")
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
        _settle(page, "Live search")
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
        _shot(page, "live-running")
    finally:
        stop.touch()
        writer.wait(timeout=30)
