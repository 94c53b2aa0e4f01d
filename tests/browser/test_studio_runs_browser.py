"""The Runs page in a real browser (one vocabulary of states, a table that refreshes, Resume): the
table refreshes by itself (a run that appears after the page loaded is listed, interrupted, with no
reload), Resume continues that interrupted run to the end the uninterrupted run reached, and the
panel says the table's words for it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from playwright.sync_api import expect
from studio_harness import idle, no_errors, require_chromium, select, settle, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

RESUMED = "20250105-000000-resume"
_CANDIDATES_AFTER_STATUS = 4
"""Where `n_candidates` sits after the status in a row: status, best score, cost, costs,
n_candidates (`studio.views.tables.RUN_COLUMNS`)."""
T = TypeVar("T")


def _interrupted_copy(replay_store: dict[str, Any], n_candidates: int) -> tuple[str, str]:
    """The session run's journal under another run id, cut after its `n_candidates`-th
    evaluated candidate: a run that no process writes and that did not finish. Returns the
    words the run's table row ends with (how the full run ended)."""
    db: Path = replay_store["db"]
    run_id: str = replay_store["run_id"]
    lines = Path(f"{db}.journals", f"{run_id}.jsonl").read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    assert last["type"] == "run_finished"
    ended = f"{last['status']}: {last['reason']}"
    seen, cut = 0, len(lines)
    for i, line in enumerate(lines):
        if json.loads(line).get("type") == "candidate_evaluated":
            seen += 1
            if seen == n_candidates:
                cut = i + 1
                break
    text = "".join(lines[:cut]).replace(run_id, RESUMED)
    tmp = Path(f"{db}.journals", f".{RESUMED}.tmp")
    tmp.write_text(text)
    tmp.rename(Path(f"{db}.journals", f"{RESUMED}.jsonl"))  # appears whole
    return RESUMED, ended


def _cells(page: Any, run_id: str) -> list[str]:
    """The texts of the cells of the runs table's row for `run_id`."""
    return (
        page.locator("tr", has=page.locator("td", has_text=re.compile(f"^{re.escape(run_id)}$")))
        .first.locator("td")
        .all_text_contents()
    )


def _until(read: Callable[[], T], ok: Callable[[T], bool], timeout_s: float = 60.0) -> T:
    """`read()` again until `ok` holds of what it returns, or the deadline; returns the last
    value read (the caller asserts on it, so a timeout fails with what the page showed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


def test_the_runs_table_refreshes_and_resume_finishes_an_interrupted_run(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(studio + "/")
    settle(page, "Runs")
    no_errors(page)
    loads: list[str] = []
    page.on("load", lambda _: loads.append("load"))
    assert page.get_by_role("heading", name="Interrupted runs").count() == 0
    run_id, ended = _interrupted_copy(replay_store, 3)
    # no reload: the table's fragment refreshes every 3 s and lists the new, interrupted run
    page.get_by_role("heading", name="Interrupted runs").wait_for(timeout=30_000)
    row = page.get_by_text(f"{run_id} gsm8k_replay / evolutionary: 3 candidates recorded")
    row.wait_for(timeout=10_000)
    assert loads == []
    shot(page, "runs-interrupted")
    idle(page)
    page.locator(f".st-key-resume_run_{run_id} button").first.click()
    page.get_by_text(f"Resumed run {run_id}.").wait_for(timeout=120_000)
    # the panel says the table's words: how the uninterrupted run ended
    panel = page.get_by_text(f"{run_id} gsm8k_replay / resumed")
    panel.wait_for(timeout=30_000)
    said = page.locator('[data-testid="stMarkdownContainer"] strong').filter(has_text=ended)
    said.first.wait_for(timeout=180_000)
    idle(page)
    # the table's row (the grid's accessible cells) says the same, with every candidate; the
    # table refreshes every 3 s, so its row can still show the run as it was: wait for it
    # the overlay link names the runs of the same problem, ending with this one after the
    # uninterrupted run (other browser tests may have added runs of their own before them)
    want = [run_id, f"live?run={run_id}"]
    tail = [replay_store["run_id"], run_id]

    def _link_ok(row: list[str]) -> bool:
        if len(row) < 3 or not row[2].startswith("overlay?runs="):
            return False
        return row[2].removeprefix("overlay?runs=").split(",")[-2:] == tail

    def _as_full(r: tuple[list[str], list[str]]) -> bool:
        row, full = r
        if row[:2] != want or not _link_ok(row) or ended not in row or ended not in full:
            return False
        at = full.index(ended) + _CANDIDATES_AFTER_STATUS
        return len(row) > at and row[at] == full[at]

    row_cells, full_cells = _until(
        lambda: (_cells(page, run_id), _cells(page, replay_store["run_id"])), _as_full
    )
    assert row_cells[:2] == want
    assert _link_ok(row_cells), row_cells[2:3]
    assert ended in row_cells
    at = full_cells.index(ended) + _CANDIDATES_AFTER_STATUS
    assert row_cells[at] == full_cells[at]  # n_candidates: as many as the uninterrupted run
    expect(page.get_by_role("heading", name="Interrupted runs")).to_have_count(0, timeout=30_000)
    assert loads == []
    no_errors(page)
    shot(page, "runs-resumed")


def test_the_live_pickers_state_follows_the_status_line_and_the_phase_is_said(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    import subprocess
    import sys
    import time

    from studio_harness import REPO

    db: Path = replay_store["db"]
    stop = replay_store["root"] / "STOP-phase"
    run_id = "phase-run"
    writer = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("journal_writer.py")), str(db), run_id, "60", str(stop)],
        cwd=REPO,
    )  # fmt: skip
    try:
        journal = Path(f"{db}.journals") / f"{run_id}.jsonl"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            not journal.exists() or journal.stat().st_size < 2000
        ):
            time.sleep(0.1)
        page.goto(f"{studio}/live?run={run_id}")
        settle(page, "Live search")
        loads: list[str] = []
        page.on("load", lambda _: loads.append("load"))
        page.get_by_text(
            re.compile(r"^Phase: search: \d+ candidate evaluations so far")
        ).first.wait_for(timeout=30_000)
        picker = page.locator(".st-key-live_run input")
        assert picker.input_value() == f"{run_id}  gsm8k_replay  evolutionary  (running)"
        shot(page, "live-phase-search")
        writer.wait(timeout=60)  # it ends its run: completed
        page.get_by_text("Phase: finished (completed)").first.wait_for(timeout=30_000)
        page.wait_for_function(
            "() => document.querySelector('.st-key-live_run input').value.endsWith('(completed)')",
            timeout=30_000,
        )
        assert picker.input_value() == f"{run_id}  gsm8k_replay  evolutionary  (completed)"
        assert loads == []
        shot(page, "live-phase-finished")
    finally:
        stop.touch()
        if writer.poll() is None:
            writer.wait(timeout=30)


def test_a_meta_agent_run_with_an_unknown_model_provider_is_refused_before_started(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    # the bug this pins: the page said "Started run ..." with a "Watch it live" link to another
    # run, and the run failed later, visible only after a reload
    journals = Path(f"{replay_store['db']}.journals")
    before = sorted(p.name for p in journals.glob("*.jsonl"))
    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(studio + "/")
    settle(page, "Runs")
    select(page, "Strategy", "meta_agent")
    page.get_by_role("textbox", name="Designer model (meta_agent only), provider:model").fill(
        "nosuchprovider:gpt-x"
    )
    page.get_by_role("button", name="Start search").click()
    error = page.locator('[data-testid="stAlertContentError"]').first
    error.wait_for(timeout=60_000)
    idle(page)
    errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert len(errors) == 1 and "nosuchprovider" in errors[0], errors
    assert page.get_by_text("Started run").count() == 0
    assert page.get_by_role("link", name="Watch it live").count() == 0
    assert sorted(p.name for p in journals.glob("*.jsonl")) == before  # no run was begun
    shot(page, "runs-bad-model-refused")


_HEADER_EDGES = """() => {
  const c = document.querySelector(
    '[data-testid="stDataFrame"] canvas[data-testid="data-grid-canvas"]');
  const d = c.getContext('2d').getImageData(0, 3, c.width, 1).data;
  const bg = [d[4], d[5], d[6]];
  const xs = [];
  for (let x = 0; x < c.width; x++) {
    const diff = Math.abs(d[4 * x] - bg[0]) + Math.abs(d[4 * x + 1] - bg[1])
      + Math.abs(d[4 * x + 2] - bg[2]);
    if (diff > 6) xs.push(x);
  }
  const r = c.getBoundingClientRect();
  return {left: r.left, scale: r.width / c.width, edges: xs,
          heads: Array.from(c.querySelectorAll('th')).map(t => t.textContent)};
}"""
"""The first table's header geometry. The grid is drawn on a canvas (Glide Data Grid), so its
header cells have no boxes of their own: the column separators are read from the header's
pixels (3 px below its top, above the text: every pixel unlike the header's background is a
separator), and the header names from the grid's accessible table, which lists the columns the
grid draws (in view or partly), left to right."""


def test_at_1000px_the_runs_tables_key_columns_are_in_view(
    page: Any, studio: str, replay_store: dict[str, Any]
) -> None:
    # layouts that work at 1000 px: status, best score and cost sat right of problem / strategy /
    # seed and were cut off at 1000 px; now they come right after the run id and its links
    width = 1000
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(studio + "/")
    settle(page, "Runs")
    run_id = replay_store["run_id"]
    row = _until(lambda: _cells(page, run_id), lambda r: len(r) > 4, timeout_s=30)
    assert row[:2] == [run_id, f"live?run={run_id}"]
    idle(page)
    grid = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    assert grid is not None
    seen = page.evaluate(_HEADER_EDGES)
    heads: list[str] = seen["heads"]
    assert heads[:5] == ["run_id", "live", "overlay", "status", "best score"], heads
    # each column's right edge (its separator), in page pixels
    rights = [seen["left"] + x * seen["scale"] for x in seen["edges"]]
    assert len(rights) >= 5, seen
    visible = min(width, grid["x"] + grid["width"])
    for name in ("status", "best score"):
        right = rights[heads.index(name)]
        assert right <= visible, (name, right, visible, seen)
    shot(page, "runs-1000px-key-columns")
    no_errors(page)
