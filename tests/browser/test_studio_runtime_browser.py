"""The Runtime page in a real browser (Debian Chromium through Playwright), the acceptance of
the runtime design's studio page: a request run from the replay search's seed library, its graph
shown, and the second identical request a cache hit.

Skipped when Chromium is missing, except in CI (`CI=true`), where that is a failure.
"""

from __future__ import annotations

from typing import Any

import pytest
from studio_harness import idle, no_errors, require_chromium, settle, shot

from core.problems import load_problem

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()


def _metric(pg: Any, label: str) -> str:
    tile = pg.locator('[data-testid="stMetric"]').filter(
        has=pg.locator('[data-testid="stMetricLabel"]', has_text=label)
    )
    return str(tile.first.locator('[data-testid="stMetricValue"]').inner_text()).strip()


def test_a_request_runs_shows_its_graph_and_is_a_cache_hit_the_second_time(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
    example = problem.splits["validation"][0]
    question, gold = example.input.question, str(example.expected)
    page.goto(f"{studio}/runtime?run={replay_store['run_id']}")
    settle(page, "Runtime")
    no_errors(page)
    box = page.get_by_label("Request", exact=True)
    box.fill(question)
    box.press("Control+Enter")
    idle(page)

    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Library rule", exact=True).first.wait_for(timeout=60_000)
    page.get_by_text("Answer:").first.wait_for(timeout=60_000)
    idle(page)
    no_errors(page)
    graph = page.locator('[data-testid="stGraphVizChart"] svg').first
    graph.wait_for(timeout=60_000)
    assert graph.locator("g.node").count() >= 1
    assert (
        f"(gold answer {gold})"
        in page.locator('[data-testid="stMarkdown"]').filter(has_text="Answer:").first.inner_text()
    )
    assert (_metric(page, "hits"), _metric(page, "misses"), _metric(page, "stores")) == (
        "0", "1", "1",
    )  # fmt: skip
    shot(page, "runtime-first-run")

    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Cache hit", exact=True).first.wait_for(timeout=60_000)
    idle(page)
    no_errors(page)
    page.locator('[data-testid="stGraphVizChart"] svg').first.wait_for(timeout=60_000)
    info = page.locator('[data-testid="stAlertContentInfo"]').first.inner_text()
    assert info.startswith("cache hit: similarity 1.000 to "), info
    assert "reliability 1.000" in info
    assert (_metric(page, "hits"), _metric(page, "misses"), _metric(page, "stores")) == (
        "1", "1", "2",
    )  # fmt: skip
    assert _metric(page, "hit rate") == "50.0%"
    shot(page, "runtime-cache-hit")
