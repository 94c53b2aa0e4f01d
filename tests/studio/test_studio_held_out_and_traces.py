"""The Live page's held-out test front (every candidate of the final validation front scored once on
the test split) and the trace drill-down's message when a search did not record traces (traces are
kept only when asked): the pure views, then the page in AppTest."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.storage.queries import TEST_FRONT_COLUMNS
from studio.views.candidate import TRACE_NOT_RECORDED, trace_view
from studio.views.pareto import held_out_front_view

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
LIVE = str(REPO / "pages" / "live.py")
RUN_ID = "20250101-120000-abc123"
TITLE = "Test front (held-out test: reported only, never used for selection)"


def _front(tested: list[bool]) -> pd.DataFrame:
    rows = []
    for i, t in enumerate(tested):
        rows.append(
            {
                "candidate_idx": i,
                "operator": "seed",
                "n_agents": 1,
                "depth": 1,
                "accuracy": 0.5 + i / 10,
                "cost_usd": 0.01 * (i + 1),
                "latency_ms": 100.0,
                "aggregate_score": 0.4,
                "test_n_examples": 1019 if t else 0,
                "test_accuracy": 0.6 if t else math.nan,
                "test_cost_usd": 0.02 if t else math.nan,
                "test_latency_ms": 90.0 if t else math.nan,
                "test_aggregate_score": 0.5 if t else math.nan,
                "test_valid": t,
                "on_test_front": t,
            }
        )
    return pd.DataFrame(rows, columns=list(TEST_FRONT_COLUMNS))


def test_held_out_front_with_one_test_score() -> None:
    view = held_out_front_view(_front([False, True, False]))
    assert view.title == TITLE
    assert view.caption.startswith(
        "1 of 3 validation-front candidates, each scored once on the 1019 held-out test problems."
    )
    assert view.table["candidate_idx"].tolist() == [1]
    assert list(view.table.columns) == [
        "candidate_idx", "accuracy", "cost_usd", "test_accuracy", "test_cost_usd",
        "test_latency_ms", "test_aggregate_score", "on_test_front",
    ]  # fmt: skip


def test_held_out_front_with_many_and_with_none() -> None:
    assert held_out_front_view(_front([True, True])).table["candidate_idx"].tolist() == [0, 1]
    none = held_out_front_view(_front([False]))
    assert (none.caption, none.table.empty) == (
        "Not scored on the held-out test split (yet).",
        True,
    )
    empty = held_out_front_view(pd.DataFrame(columns=list(TEST_FRONT_COLUMNS)))
    assert empty.caption == "No validation front yet."


def test_trace_view_says_when_a_trace_was_not_recorded() -> None:
    assert TRACE_NOT_RECORDED == "trace not recorded (run the search with --traces)"
    for spans in (None, []):
        view = trace_view(spans)
        assert (view.message, view.spans.empty) == (TRACE_NOT_RECORDED, True)
    view = trace_view([{"span_id": 0, "kind": "pipeline", "name": "seed", "duration_ms": 5.0}])
    assert view.message is None
    assert view.spans[["span_id", "kind", "name", "duration_ms"]].values.tolist() == [
        [0, "pipeline", "seed", 5.0]
    ]


@pytest.fixture
def app(studio_env: Path) -> Iterator[AppTest]:
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_live_page_labels_the_test_front_and_the_missing_trace(app: AppTest) -> None:
    app.query_params["run"] = RUN_ID
    app.query_params["candidate"] = "1"
    app.switch_page(LIVE)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    # the link's candidate opens the Inspector tab, and only the open tab is drawn
    assert f"**{TITLE}**" not in [m.value for m in app.markdown]
    box = app.selectbox(key=f"live_trace_{RUN_ID}_1")
    box.set_value(("q1", 0)).run()
    assert not app.exception, [e.value for e in app.exception]
    assert TRACE_NOT_RECORDED in [c.value for c in app.caption]
    # the drill-down: the candidate's answer (this store has no gold for q1)
    assert any(
        str(m.value).startswith("**#1** answered `answer of 1 to q1`: right") for m in app.markdown
    )
    # the Archive tab has the held-out test front
    app.session_state["live_tab"] = "Archive"
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert f"**{TITLE}**" in [m.value for m in app.markdown]
    assert "Not scored on the held-out test split (yet)." in [c.value for c in app.caption]
