"""The Live page in a real browser (Debian Chromium through Playwright), on a run whose journal
another process is still writing (`journal_writer.py`), so the page refreshes every 2 s.

A zoom on the Pareto chart is kept across refreshes (the 2 s refresh used to reset it): the
figure's `uirevision` stays the same while the run and the axes do.

Skipped when Chromium is missing, except in CI (`CI=true`), where that is a failure.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from studio_harness import REPO, idle, no_errors, require_chromium, settle, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

_RANGE = "() => { const gd = document.querySelector('.js-plotly-plot'); return gd && gd.layout.xaxis.range ? gd.layout.xaxis.range.map(Number) : null; }"  # noqa: E501
_AUTORANGE = "() => document.querySelector('.js-plotly-plot').layout.xaxis.autorange"


@pytest.fixture
def running_run(replay_store: dict[str, Any]) -> Iterator[str]:
    """A run another process is writing (one candidate every 100 ms, for up to 60 s)."""
    db: Path = replay_store["db"]
    run_id = "zoom-run"
    stop = replay_store["root"] / f"STOP-{run_id}"
    writer = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("journal_writer.py")), str(db), run_id, "600", str(stop)],
        cwd=REPO,
    )  # fmt: skip
    try:
        journal = Path(f"{db}.journals") / f"{run_id}.jsonl"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            not journal.exists() or journal.stat().st_size < 2000
        ):
            time.sleep(0.1)
        yield run_id
    finally:
        stop.touch()
        writer.wait(timeout=30)


def _candidates(pg: Any) -> int:
    tile = pg.locator('[data-testid="stMetric"]').filter(has_text="candidates").first
    return int(tile.locator('[data-testid="stMetricValue"]').inner_text())


def _drag_box(pg: Any) -> dict[str, float]:
    """The Pareto plot's drag area, waited for (30 s deadline): the page redraws the chart every
    2 s, and an element read in the middle of a redraw is detached and has no box."""
    deadline = time.monotonic() + 30
    while True:
        box = pg.locator(".js-plotly-plot .draglayer .xy .nsewdrag").first.bounding_box()
        if box is not None and box["width"] > 0 and box["height"] > 0:
            return box
        if time.monotonic() > deadline:
            raise AssertionError("the Pareto plot's drag area never got a box within 30 s")
        pg.wait_for_timeout(200)


def test_zoom_kept_across_refreshes(page: Any, studio: str, running_run: str) -> None:
    page.goto(f"{studio}/live?run={running_run}")
    settle(page, "Live search")
    page.get_by_text("running, data as of").first.wait_for(timeout=30_000)
    page.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(timeout=60_000)
    idle(page)
    # zoom as a user does: the mode bar's Zoom tool, then a box dragged over the Pareto plot. A
    # redraw (every 2 s) that lands in the middle of the drag drops the gesture, as it would for a
    # user, so the gesture is repeated (up to 5 times) until the chart says it is zoomed.
    for _attempt in range(5):
        box = _drag_box(page)
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.locator('.js-plotly-plot .modebar-btn[data-title="Zoom"]').first.click()
        x0, y0 = box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.1
        x1, y1 = box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.9
        page.mouse.move(x0, y0)
        page.mouse.down()
        page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=5)
        page.mouse.move(x1, y1, steps=5)
        page.mouse.up()
        page.wait_for_timeout(300)
        if page.evaluate(_AUTORANGE) is False:
            break
    zoomed = page.evaluate(_RANGE)
    assert zoomed is not None
    assert page.evaluate(_AUTORANGE) is False
    before = _candidates(page)
    # at least two refreshes (every 2 s), each with new candidates (a new figure)
    seen = [before]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len({*seen}) < 3:
        page.wait_for_timeout(1000)
        seen.append(_candidates(page))
    assert len({*seen}) >= 3, seen  # the chart was redrawn with new data at least twice
    after = page.evaluate(_RANGE)
    assert after == pytest.approx(zoomed), (zoomed, after)
    assert page.evaluate(_AUTORANGE) is False
    shot(page, "live-zoom-kept")
    # a reload keeps it too (the ranges are in the tab's sessionStorage)
    page.reload()
    settle(page, "Live search")
    page.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(timeout=60_000)
    page.wait_for_function(
        f"() => {{ const r = ({_RANGE})(); return r && r[0] === {zoomed[0]!r}; }}", timeout=10_000
    )
    assert page.evaluate(_RANGE) == pytest.approx(zoomed)
    box = _drag_box(page)
    # a double click goes back to the whole range, and that too is kept
    page.mouse.dblclick(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_timeout(300)
    assert page.evaluate(_AUTORANGE) is True
    n = _candidates(page)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _candidates(page) == n:
        page.wait_for_timeout(500)
    page.wait_for_timeout(1000)
    assert page.evaluate(_AUTORANGE) is True
    no_errors(page)


_POINT = """() => {
    // a point of the Pareto scatter standing clear of the others and of the plot's edges
    const gd = document.querySelector('.js-plotly-plot');
    const pts = [];
    gd.querySelectorAll('.scatterlayer .trace').forEach((g, t) => {
        if (gd._fullData[t].name === 'selected' || !gd._fullData[t].customdata) return;
        g.querySelectorAll('path.point').forEach((el, k) => {
            const r = el.getBoundingClientRect();
            pts.push({t, k, x: r.x + r.width / 2, y: r.y + r.height / 2});
        });
    });
    const box = gd.querySelector('.draglayer .xy .nsewdrag').getBoundingClientRect();
    const inner = pts.filter(p => p.x > box.left + 0.1 * box.width && p.x < box.right - 0.1 * box.width
        && p.y > box.top + 0.1 * box.height && p.y < box.bottom - 0.1 * box.height);
    if (inner.length) pts.splice(0, pts.length, ...inner);
    for (const p of pts) {
        p.gap = Math.min(...pts.filter(q => q !== p).map(q => Math.hypot(q.x - p.x, q.y - p.y)), 1e9);
    }
    pts.sort((a, b) => b.gap - a.gap);
    const p = pts[0];
    const cd = gd._fullData[p.t].customdata[p.k];
    return {x: p.x, y: p.y, candidate: cd != null && cd.length !== undefined ? Number(cd[0]) : Number(cd)};
}"""


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (1000, 800)])
def test_the_inspector_opens_right_below_the_chart(
    page: Any, studio: str, replay_store: dict[str, Any], width: int, height: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{studio}/live?run={replay_store['run_id']}")
    settle(page, "Live search")
    page.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(timeout=60_000)
    idle(page)
    tab = page.get_by_role("tab", name="Inspector", exact=True)
    assert tab.get_attribute("aria-selected") == "false"  # nothing inspected yet: the archive
    page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    target = page.evaluate(_POINT)  # in the viewport's coordinates: the chart is in view
    heading = page.get_by_role("heading", name=re.compile(rf"^candidate {target['candidate']} \("))
    for _ in range(3):  # a click while the page is still settling can be lost: click again
        page.mouse.move(target["x"], target["y"])
        page.wait_for_timeout(300)
        page.mouse.click(target["x"], target["y"])
        idle(page)
        try:
            heading.first.wait_for(timeout=10_000)
            break
        except Exception:  # noqa: BLE001 (tried again)
            continue
    heading.first.wait_for(timeout=5_000)
    assert tab.get_attribute("aria-selected") == "true"  # the click opened the inspector
    # its heading is right below the chart, under the tabs and the picker (it was ~1,500 px
    # below it, past the archive table)
    top = page.evaluate(
        """(el) => { const m = document.querySelector('[data-testid="stMain"]');
        return el.getBoundingClientRect().top + m.scrollTop - m.getBoundingClientRect().top; }""",
        heading.first.element_handle(),
    )
    chart_bottom = page.evaluate(
        """() => { const m = document.querySelector('[data-testid="stMain"]');
        return document.querySelector('.js-plotly-plot').getBoundingClientRect().bottom
            + m.scrollTop - m.getBoundingClientRect().top; }"""
    )
    assert 0 < top - chart_bottom < 400, (top, chart_bottom)
    no_errors(page)
    shot(page, f"live-inspector-{width}")
    # back on the archive, the inspected candidate's row is the table's selection
    page.get_by_role("tab", name="Archive", exact=True).click()
    idle(page)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.wait_for(timeout=30_000)
    grid.scroll_into_view_if_needed()
    shot(page, f"live-archive-selected-{width}")


def test_points_box_selected_on_the_chart_open_in_compare(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    # "Compare selected" from the Live page's chart
    run_id = replay_store["run_id"]
    page.goto(f"{studio}/live?run={run_id}")
    settle(page, "Live search")
    page.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(timeout=60_000)
    idle(page)
    page.get_by_text("Select several points (box or lasso select").first.wait_for(timeout=30_000)
    link = page.get_by_role("link", name=re.compile(r"^Compare selected \(\d\)$")).first
    for _attempt in range(3):  # a rerun landing mid-drag drops the gesture: try again
        box = _drag_box(page)
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.locator('.js-plotly-plot .modebar-btn[data-title="Box Select"]').first.click()
        # the whole Pareto plot: every plotted candidate
        x0, y0 = box["x"] + 2, box["y"] + 2
        x1, y1 = box["x"] + box["width"] - 2, box["y"] + box["height"] - 2
        page.mouse.move(x0, y0)
        page.mouse.down()
        page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=5)
        page.mouse.move(x1, y1, steps=5)
        page.mouse.up()
        idle(page)
        try:
            link.wait_for(timeout=15_000)
            break
        except Exception:  # noqa: BLE001 (not selected: the gesture again)
            continue
    label = link.inner_text()
    n = int(label[-2])
    assert 2 <= n <= 4, label
    caption = page.get_by_text(re.compile(r"^Selected on the chart: #\d")).first.inner_text()
    picked = [int(i) for i in re.findall(r"#(\d+)", caption.split(".")[0])]
    assert len(picked) >= n
    shot(page, "live-compare-selected")
    link.click()
    settle(page, "Compare")
    page.locator('[data-testid="stGraphVizChart"] svg').nth(n - 1).wait_for(timeout=60_000)
    url = page.url.replace("%3A", ":").replace("%2C", ",")
    assert "items=" + ",".join(f"{run_id}:{i}" for i in picked[:n]) in url, url
    assert page.get_by_label("How many topologies").first.input_value() == str(n)
    no_errors(page)
    shot(page, "compare-from-live-selection")


def test_rows_selected_in_the_archive_table_open_in_compare(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    # "Compare selected" from the Live page's table, as from its chart: a
    # row ticked in the archive table is inspected; a second one ticked beside it gives a link
    # to Compare with both
    run_id = replay_store["run_id"]
    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(f"{studio}/live?run={run_id}")
    settle(page, "Live search")
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.locator("canvas").first.wait_for(timeout=60_000)
    idle(page)
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    link = page.get_by_role("link", name="Compare selected (2)")
    archive_tab = page.get_by_role("tab", name="Archive", exact=True)
    inspector_tab = page.get_by_role("tab", name="Inspector", exact=True)

    def tick(row: int) -> None:
        box = grid.bounding_box()
        assert box is not None
        # the grid's rows are 35 px high under a 35 px header; the row markers sit left
        page.mouse.click(box["x"] + 15, box["y"] + 35 + 35 * row + 17)
        idle(page)

    tick(0)  # one row: inspected, as a click on a point
    page.wait_for_function(
        "() => [...document.querySelectorAll('[role=tab]')].some("
        "t => t.innerText.trim() === 'Inspector' && t.getAttribute('aria-selected') === 'true')",
        timeout=30_000,
    )
    assert inspector_tab.get_attribute("aria-selected") == "true"
    archive_tab.click()  # back on the table, its row is selected: tick a second one
    idle(page)
    grid = page.locator('[data-testid="stDataFrame"]:visible').first
    grid.wait_for(timeout=30_000)
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    tick(2)
    link.wait_for(timeout=30_000)
    caption = page.get_by_text(re.compile(r"^Selected in the table: #\d")).first.inner_text()
    picked = [int(i) for i in re.findall(r"#(\d+)", caption)]
    assert len(picked) == 2, caption
    # they are the table's first and third rows as shown (the page's default order)
    order = replay_store["archive_order"]
    assert picked == [order[0], order[2]], (caption, order[:4])
    shot(page, "live-compare-selected-rows")
    link.click()
    settle(page, "Compare")
    page.locator('[data-testid="stGraphVizChart"] svg').nth(1).wait_for(timeout=60_000)
    url = page.url.replace("%3A", ":").replace("%2C", ",")
    assert "items=" + ",".join(f"{run_id}:{i}" for i in picked) in url, url
    no_errors(page)
