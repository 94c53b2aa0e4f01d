"""The Live page's front noise in a real browser (Debian Chromium through Playwright): every
front point carries its paired interval as an error bar, the points within noise of their
cheaper neighbour are their own trace, and the "Hide within noise" toggle removes that trace.

Skipped when Chromium is missing, except in CI (`CI=true`), where that is a failure.
"""

from __future__ import annotations

from typing import Any

import pytest
from studio_harness import idle, no_errors, require_chromium, settle, shot

from core.storage import open_store
from studio.views.front_noise import front_noise_table
from studio.views.pareto import FRONT_NAME, WITHIN_NOISE_NAME
from studio.views.tables import full_split

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

_TRACES = """() => {
    const gd = document.querySelector('.js-plotly-plot');
    return gd._fullData.filter(t => t.xaxis === 'x').map(t => ({
        name: t.name,
        candidates: Array.from(t.customdata || []).map(c => Number(c[0] ?? c)),
        up: t.error_y && t.error_y.visible ? Array.from(t.error_y.array || []) : null,
        down: t.error_y && t.error_y.visible ? Array.from(t.error_y.arrayminus || []) : null,
        bars: gd.querySelectorAll('.scatterlayer .errorbar').length,
    }));
}"""


def _expected(replay_store: dict[str, Any]) -> dict[int, tuple[bool, float, float]]:
    # the studio holds the file (DuckDB: one process per file): read the run's journal view
    with open_store(replay_store["db"], on_busy="journals") as store:
        archive = store.archive(replay_store["run_id"])
        valid = archive.loc[archive["valid"].astype(bool) & archive["on_front"].astype(bool)]
        table = front_noise_table(store, replay_store["run_id"], valid.loc[full_split(valid)])
    out: dict[int, tuple[bool, float, float]] = {}
    for r in table.to_dict("records"):
        gain, low, high = r["gain_vs_cheaper"], r["gain_low"], r["gain_high"]
        up = 0.0 if high != high else high - gain
        down = 0.0 if low != low else gain - low
        out[int(r["candidate_idx"])] = (bool(r["within_noise"]), up, down)
    return out


def test_error_bars_and_the_within_noise_toggle(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    expected = _expected(replay_store)
    noisy = sorted(i for i, (w, _, _) in expected.items() if w)
    assert noisy, "the fixture's front has no candidate within noise: nothing to toggle"
    page.goto(f"{studio}/live?run={replay_store['run_id']}")
    settle(page, "Live search")
    page.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(timeout=60_000)
    idle(page)
    traces = {t["name"]: t for t in page.evaluate(_TRACES)}
    front, within = traces[FRONT_NAME], traces[WITHIN_NOISE_NAME]
    assert sorted(within["candidates"]) == noisy
    assert sorted(front["candidates"] + within["candidates"]) == sorted(expected)
    for t in (front, within):
        assert t["up"] is not None and t["down"] is not None
        for idx, up, down in zip(t["candidates"], t["up"], t["down"], strict=True):
            assert (up, down) == pytest.approx(expected[idx][1:], abs=1e-9)
    assert front["bars"] > 0  # drawn, not only in the data
    no_errors(page)
    shot(page, "live-front-noise")

    page.get_by_text("Hide within noise").first.click()
    idle(page)
    page.wait_for_function(
        f"() => !document.querySelector('.js-plotly-plot')._fullData"
        f".some(t => t.name === {WITHIN_NOISE_NAME!r})",
        timeout=30_000,
    )
    names = [t["name"] for t in page.evaluate(_TRACES)]
    assert WITHIN_NOISE_NAME not in names and FRONT_NAME in names
    no_errors(page)
    shot(page, "live-front-noise-hidden")
