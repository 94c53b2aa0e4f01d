"""The Runtime page in AppTest on the small store's run: its validated front (candidates 0 and 1) is
the seed library; a gold question is designed (the library rule picks entry 2, the best accuracy),
run through gsm8k_replay's evaluator (answer 540, correct, the replayed cost and latency), then the
same request again is a cache hit; marking it bad decays the entry's reliability to 0.7."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.problems import load_problem
from studio.views.drilldown import PATH_COLOUR

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
RUNTIME = str(REPO / "pages" / "runtime.py")
RUN_ID = "20250101-120000-abc123"
BEST = "library entry 2 (candidate 1 (best))"
FIGURES = "(accuracy 0.6000, $0.500000, 9000.0 ms)"


@pytest.fixture(scope="module")
def question() -> str:
    """gsm8k_replay's first validation question (gold answer 540)."""
    problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
    return problem.splits["validation"][0].input.question


@pytest.fixture
def app(studio_env: Path) -> Iterator[AppTest]:
    """The studio on the small store, on the Runtime page."""
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(RUNTIME)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts)


def _table(at: AppTest, column: str) -> pd.DataFrame:
    """The one table shown with this column (the library: latency_ms; the cache: reliability)."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def _click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def test_design_run_then_the_same_request_is_a_cache_hit(app: AppTest, question: str) -> None:
    at = app
    assert [t.value for t in at.title] == ["Runtime"]
    assert at.selectbox(key="rt_run").value == RUN_ID
    library = _table(at, "latency_ms")
    assert library["label"].tolist() == ["candidate 0", "candidate 1 (best)"]
    assert library["accuracy"].tolist() == [0.25, 0.60]
    assert _metrics(at) == {
        "hits": "0",
        "misses": "0",
        "stores": "0",
        "decays": "0",
        "hit rate": "0.0%",
    }

    at.text_area(key="rt_request").input(question)
    _click(at, "rt_design")
    assert [i.value for i in at.info] == [f"{BEST}: the best measured accuracy {FIGURES}"]
    assert "**Library rule** for the request" in _texts(at)
    (chart,) = at.get("graphviz_chart")
    assert "175b_verification" in chart.proto.spec
    assert PATH_COLOUR not in chart.proto.spec  # not run yet
    assert _metrics(at)["misses"] == "1"

    _click(at, "rt_run_btn")  # runs the design just made: no second lookup
    assert "**Answer:** `540`: correct (gold answer `540`)" in _texts(at)
    m = _metrics(at)
    assert (m["accuracy"], m["cost usd"], m["latency ms"], m["status"]) == (
        "100.0%", "$0.6480", "2,300 ms", "ok",
    )  # fmt: skip
    assert (m["hits"], m["misses"], m["stores"], m["decays"]) == ("0", "1", "1", "0")
    cache = _table(at, "reliability")
    assert cache["library entry"].tolist() == ["2 (candidate 1 (best))"]
    assert cache["reliability"].tolist() == [1.0]
    assert cache["request"].tolist() == [" ".join(question.casefold().split())]
    assert "The path taken is drawn in yellow." in _texts(at)
    (chart,) = at.get("graphviz_chart")
    assert PATH_COLOUR in chart.proto.spec  # the agent the request ran through

    _click(at, "rt_run_btn")  # the same request again
    key = " ".join(question.casefold().split())
    assert [i.value for i in at.info] == [
        f"cache hit: similarity 1.000 to {key!r}, reliability 1.000 ({BEST})"
    ]
    assert "**Cache hit** for the request" in _texts(at)
    assert "**Answer:** `540`: correct (gold answer `540`)" in _texts(at)
    m = _metrics(at)
    assert (m["hits"], m["misses"], m["stores"], m["decays"]) == ("1", "1", "2", "0")
    assert m["hit rate"] == "50.0%"

    _click(at, "rt_bad")
    assert "Marked bad: the cache entry's reliability is now 0.700." in _texts(at)
    assert _table(at, "reliability")["reliability"].tolist() == [pytest.approx(0.7)]
    m = _metrics(at)
    assert (m["hits"], m["misses"], m["stores"], m["decays"]) == ("1", "1", "2", "1")

    # the decayed entry (0.7, above the 0.3 floor) still serves the request, saying so
    _click(at, "rt_design")
    assert [i.value for i in at.info] == [
        f"cache hit: similarity 1.000 to {key!r}, reliability 0.700 ({BEST})"
    ]


def test_a_budget_picks_the_cheap_entry_and_a_typed_question_is_unscored(
    app: AppTest, question: str
) -> None:
    at = app
    at.text_area(key="rt_request").input(question)
    at.number_input(key="rt_budget").set_value(0.01)
    _click(at, "rt_design")
    assert [i.value for i in at.info] == [
        "library entry 1 (candidate 0): the best accuracy within budget $0.010000 "
        "(accuracy 0.2500, $0.001000, 1000.0 ms)"
    ]
    # a request no gold example has: it runs, unscored; the replay has no recording of it
    at.number_input(key="rt_budget").set_value(None)
    at.text_area(key="rt_request").input("what is two plus two?")
    at.button(key="rt_run_btn").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "The run ended error: PipelineStepError: pipeline 'seed': step 0 ('175b_verification') "
        "failed after 1 attempt(s): NoRecordingError: no recorded 175b_verification solution "
        "for the question 'what is two plus two?'"
    ]
    assert "**Answer:** `(none)`: unscored (no gold example has this question)" in _texts(at)
    # a failed run stores nothing: the cache stays empty, the failure is no decay (no entry)
    m = _metrics(at)
    assert (m["hits"], m["misses"], m["stores"], m["decays"]) == ("0", "2", "0", "0")
    assert "The cache is empty: a request that runs ok is stored in it." in _texts(at)


def test_an_empty_request_is_said(app: AppTest) -> None:
    at = app
    at.button(key="rt_design").click().run()
    assert [e.value for e in at.error] == [
        "ValueError: type a request or pick a gold question first"
    ]


def test_picking_a_gold_question_fills_the_request(app: AppTest, question: str) -> None:
    at = app
    at.selectbox(key="rt_gold").set_value(question).run()
    assert not at.exception
    assert at.text_area(key="rt_request").value == question
