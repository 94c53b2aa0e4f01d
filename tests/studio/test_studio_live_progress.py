"""The Live page's status, picker and progress agree (the picker said "(running)" after the status
said "stopped"): the picker never says another state than the status line, and the page says the
run's phase and budget."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from studio.manager import BackgroundSearch, SearchRequest

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
RUN_ID = "20250101-120000-abc123"
RUN2 = "20250102-000000-run2"


@pytest.fixture
def app(studio_env: Path) -> Iterator[AppTest]:
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _live(at: AppTest, run: str) -> AppTest:
    at.query_params["run"] = run
    at.switch_page(str(REPO / "pages" / "live.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _md(at: AppTest) -> list[str]:
    return [str(m.value) for m in at.markdown]


def test_the_live_page_says_the_phase_and_the_budget_used(app: AppTest) -> None:
    at = _live(app, RUN_ID)
    assert "**Phase:** finished (completed)" in _md(at)
    assert (
        "**Budget used**: evaluations 4 (no limit) · USD $2.05 (no limit) · wall time 10 s "
        "(no limit)"
    ) in [str(c.value) for c in at.caption]


def test_the_picker_follows_the_status_line_when_the_run_list_was_stale(
    app: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    import studio._st_common as common

    real = common.load_runs
    calls: list[int] = []

    def stale_once(manager: Any) -> pd.DataFrame:
        runs = real(manager)
        calls.append(1)
        if len(calls) == 1:  # the list as it was read before the run ended
            runs = runs.assign(status=["running"] * len(runs))
        return runs

    monkeypatch.setattr(common, "load_runs", stale_once)
    at = _live(app, RUN_ID)
    # the status line found "completed" and ran the page again: the picker says it too
    assert len(calls) >= 2
    assert at.selectbox(key="live_run").options == [
        f"{RUN_ID}  gsm8k_replay  evolutionary  (completed)"
    ]
    assert "**completed: done**" in _md(at)


def test_a_paused_search_is_paused_in_the_picker_and_the_status_line(
    app: AppTest, studio_env: Path, make_events: Any
) -> None:
    from studio._st_common import _manager

    manager = _manager(str(studio_env.resolve()))
    manager.store.record_events(make_events(RUN2, finished=False, t0=1_735_776_000.0))
    hold = threading.Event()
    thread = threading.Thread(target=hold.wait, daemon=True)
    thread.start()
    bg = BackgroundSearch(run_id=RUN2, request=SearchRequest(problem="gsm8k_replay"))
    bg.state = "paused"
    bg._thread = thread
    bg._gate.set()
    manager._searches[RUN2] = bg
    try:
        at = _live(app, RUN2)
        assert at.selectbox(key="live_run").value == RUN2
        assert at.selectbox(key="live_run").options[0] == (
            f"{RUN2}  gsm8k_replay  evolutionary  (paused)"
        )
        assert "**paused, data as of 2025-01-02 00:00:09 UTC**" in _md(at)
        assert any(
            m.startswith("**Phase:** search: 4 candidate evaluations so far") for m in _md(at)
        )
    finally:
        hold.set()
        thread.join(timeout=5)
        manager._searches.pop(RUN2, None)
