"""The Live search page in AppTest: the run picker, the run's status, the scored-on column."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from core.storage import DuckDBRunStore
from studio.manager import BackgroundSearch, SearchRequest

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
LIVE = str(REPO / "pages" / "live.py")
RUN_ID = "20250101-120000-abc123"
RUN2 = "20250102-000000-run2"


@pytest.fixture
def two_runs(studio_env: Path, make_events: Any) -> Path:
    """The small store with a second, still running run (`RUN2`, the newest)."""
    with DuckDBRunStore(studio_env) as store:
        store.record_events(make_events(RUN2, finished=False, t0=1_735_776_000.0))
    return studio_env


@pytest.fixture
def app(two_runs: Path) -> Iterator[AppTest]:
    """The studio on the two-run store, on its first page."""
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    yield at
    _manager(str(two_runs.resolve())).close()
    _manager.clear()


def _live(at: AppTest, **params: str) -> AppTest:
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(LIVE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts)


def test_choosing_another_run_sticks_and_updates_the_url(app: AppTest) -> None:
    at = _live(app, run=RUN_ID)
    assert at.selectbox(key="live_run").value == RUN_ID
    at.selectbox(key="live_run").set_value(RUN2).run()
    assert not at.exception
    assert at.selectbox(key="live_run").value == RUN2
    assert at.query_params["run"] == RUN2
    # a later rerun (the live refresh, another widget) keeps the choice
    at.run()
    assert at.selectbox(key="live_run").value == RUN2
    assert at.query_params["run"] == RUN2
    assert "running, data as of 2025-01-02 00:00:09 UTC" in _texts(at)
    # and back again
    at.selectbox(key="live_run").set_value(RUN_ID).run()
    assert at.selectbox(key="live_run").value == RUN_ID
    assert at.query_params["run"] == RUN_ID


def test_a_deep_link_selects_its_run_on_load_and_when_the_url_changes(app: AppTest) -> None:
    at = _live(app, run=RUN_ID)
    assert at.selectbox(key="live_run").value == RUN_ID
    at.query_params["run"] = RUN2  # the URL changes from outside
    at.run()
    assert at.selectbox(key="live_run").value == RUN2
    at.query_params["run"] = "no-such-run"  # an unknown run keeps the current choice
    at.run()
    assert not at.exception
    assert at.selectbox(key="live_run").value == RUN2


def test_without_a_link_the_newest_run_is_chosen_and_put_in_the_url(app: AppTest) -> None:
    at = _live(app)
    assert at.selectbox(key="live_run").value == RUN2
    assert at.query_params["run"] == RUN2


def test_a_run_paused_in_this_studio_reads_paused_as_on_the_runs_page(
    app: AppTest, two_runs: Path
) -> None:
    from studio._st_common import _manager

    manager = _manager(str(two_runs.resolve()))
    search = BackgroundSearch(run_id=RUN2, request=SearchRequest(problem="gsm8k_replay"))
    search.state = "paused"
    manager._searches[RUN2] = search  # noqa: SLF001 (as pause() leaves it, without a thread)
    at = _live(app, run=RUN2)
    assert "**paused, data as of 2025-01-02 00:00:09 UTC**" in _texts(at)
    assert "running, data as of" not in _texts(at)
    search.state = "running"
    at.run()
    assert "**running, data as of 2025-01-02 00:00:09 UTC**" in _texts(at)


def test_a_minibatch_estimate_is_labelled_and_ranked_after_full_scores(
    app: AppTest, two_runs: Path
) -> None:
    from core.ir import parse_topology, spec_hash
    from core.search.events import CandidateEvaluated, CandidateProposed
    from studio._st_common import _manager

    text = (
        '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
        '{"kind": "agent_step", "id": "solve", "agent_name": "175b_finetuning"}}]}'
    )
    h = spec_hash(parse_topology(text))
    t = 1_735_732_900.0
    _manager(str(two_runs.resolve())).store.record_events(
        [
            CandidateProposed(
                run_id=RUN_ID, seq=500, ts=t, candidate_idx=4, generation=1, spec_hash=h,
                spec_json=text, parent_idx=1, operator="mutate:change_agent",
            ),
            CandidateEvaluated(
                run_id=RUN_ID, seq=501, ts=t + 1, candidate_idx=4, spec_hash=h,
                split="minibatch", n_examples=2, accuracy=1.0, cost_usd=0.3,
                latency_ms=5000.0, n_agents=1, depth=1, aggregate_score=0.9, valid=True,
            ),
        ]
    )  # fmt: skip
    at = _live(app, run=RUN_ID)
    table = [d.value for d in at.dataframe if "on_front" in d.value.columns][0]
    # 0.9 on 2 problems does not outrank 0.45 on the full split of 4
    assert table["candidate_idx"].tolist() == [1, 0, 2, 4, 3]
    assert table["scored_on"].tolist() == [
        "validation (4)",
        "validation (4)",
        "validation (4)",
        "minibatch (2)",
        "validation (4)",
    ]
    assert "objective_split" not in table.columns
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["best candidate"] == "1"
    assert "Hollow diamonds" in _texts(at)
    assert "reference point cost_usd = 0.5, accuracy = 0" in _texts(at)
    # the picker is in the Inspector tab, drawn once it is open
    assert [s for s in at.selectbox if s.label == "Inspect candidate"] == []
    at.session_state["live_tab"] = "Inspector"
    at.run()
    box = [s for s in at.selectbox if s.label == "Inspect candidate"][0]
    box.set_value(4).run()
    assert "minibatch estimate: scored on 2 problems of the minibatch split only" in _texts(at)


def test_a_bad_run_or_candidate_in_the_link_is_said_not_replaced_silently(
    studio_env: Path,
) -> None:
    # a bad `?run=` or `?candidate=` used to be replaced silently
    from streamlit.testing.v1 import AppTest

    from studio._st_common import _manager

    at = AppTest.from_file(str(REPO / "studio" / "app.py"), default_timeout=120)
    at.run()
    at.query_params["run"] = "no-such-run"
    at.query_params["candidate"] = "77"
    at.switch_page(str(REPO / "pages" / "live.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    warnings = [str(w.value) for w in at.warning]
    # the newest run is shown instead, and no candidate is inspected
    assert warnings == [
        f"No run 'no-such-run' in this store: showing {RUN_ID} instead.",
        f"Run {RUN_ID} has no candidate 77 (yet): no candidate is inspected; click a point of "
        "the chart or a row of the table, or pick one in the Inspector tab.",
    ]
    assert at.selectbox(key="live_run").value == RUN_ID
    assert at.session_state["live_tab"] == "Inspector"  # with its picker, nothing inspected
    assert not [t for t in at.markdown if str(t.value).startswith("### candidate")]
    # a link whose value is no candidate number at all is said too
    at = AppTest.from_file(str(REPO / "studio" / "app.py"), default_timeout=120)
    at.run()
    at.query_params["run"] = RUN_ID
    at.query_params["candidate"] = "best"
    at.switch_page(str(REPO / "pages" / "live.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [str(w.value) for w in at.warning] == [
        "'best' is not a candidate number: no candidate is inspected; click a point of the "
        "chart or a row of the table, or pick one in the Inspector tab."
    ]
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_the_inspector_links_to_compare_with_the_best(studio_env: Path) -> None:
    # compare from the Live page
    from streamlit.testing.v1 import AppTest

    from studio._st_common import _manager

    at = AppTest.from_file(str(REPO / "studio" / "app.py"), default_timeout=120)
    at.run()
    at.query_params["run"] = RUN_ID
    at.query_params["candidate"] = "2"
    at.switch_page(str(REPO / "pages" / "live.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    [link] = [e for e in at.get("page_link") if "Compare" in e.proto.label]
    assert link.proto.label == "Compare with the best"
    assert link.proto.page == "compare"
    assert link.proto.query_string == f"items={RUN_ID}%3A2%2C{RUN_ID}%3A1"
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_the_inspected_candidate_opens_the_inspector_tab_and_its_row_is_selected(
    studio_env: Path,
) -> None:
    # the inspector right below the chart, the row highlighted
    import json

    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["run"] = RUN_ID
    at.query_params["candidate"] = "2"
    at.switch_page(LIVE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["live_tab"] == "Inspector"
    # only the open tab is drawn: the archive table once the Archive tab is open
    assert [d for d in at.dataframe if "on_front" in d.value.columns] == []
    at.session_state["live_tab"] = "Archive"
    at.run()
    [table] = [d for d in at.dataframe if "on_front" in d.value.columns]
    assert table.value["candidate_idx"].tolist() == [1, 0, 2, 3]
    # candidate 2 is the table's third row: that row is the table's selection
    assert json.loads(table.proto.selection_default) == {
        "selection": {"rows": [2], "columns": [], "cells": []}
    }
    # sorted by another column, the selection follows the candidate to its new row
    at.selectbox(key="live_sort").set_value("candidate_idx").run()
    [table] = [d for d in at.dataframe if "on_front" in d.value.columns]
    assert table.value["candidate_idx"].tolist() == [3, 2, 1, 0]
    assert json.loads(table.proto.selection_default) == {
        "selection": {"rows": [1], "columns": [], "cells": []}
    }
    # filtered out, nothing is selected (the inspector keeps the candidate)
    at.text_input(key="live_filter").set_value("seed").run()
    [table] = [d for d in at.dataframe if "on_front" in d.value.columns]
    assert table.value["candidate_idx"].tolist() == [0]
    assert not table.proto.selection_default
    assert at.session_state["live_sel"] == 2
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_the_filter_finds_candidates_by_agent_name_and_by_value(studio_env: Path) -> None:
    # the bug this pins: the filter could not match agent names or values
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["run"] = RUN_ID
    at.switch_page(LIVE)
    at.run()

    def rows(text: str) -> list[int]:
        at.text_input(key="live_filter").set_value(text).run()
        assert not at.exception, [e.value for e in at.exception]
        [table] = [d.value for d in at.dataframe if "on_front" in d.value.columns]
        return [int(i) for i in table["candidate_idx"].tolist()]

    assert rows("") == [1, 0, 2, 3]
    assert rows("6b_finetuning") == [0, 2, 3]  # the agent of 0 and 2, one of 3's two
    assert rows("175B_VERIFICATION") == [1]
    assert rows("extract_final_answer") == [2]  # a function step's name
    assert rows("merge_vote") == [3]
    assert rows("0.45") == [1]  # its aggregate score, 0.45
    assert rows("0.50000") == [1]  # its cost as the table shows it (0.5)
    assert rows("1500") == [2]  # a latency
    assert rows("no such thing") == []
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_a_changed_candidate_in_the_url_is_inspected_in_the_same_run(studio_env: Path) -> None:
    # the bug this pins: ?candidate= was read only when the run changed, so a URL edited to another
    # candidate of the same run (or browser back/forward) kept inspecting the old one
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["run"] = RUN_ID
    at.query_params["candidate"] = "2"
    at.switch_page(LIVE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["live_sel"] == 2
    at.session_state["live_tab"] = "Archive"
    at.run()
    at.query_params["candidate"] = "0"  # the URL changes from outside, same run
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["live_sel"] == 0
    assert at.session_state["live_tab"] == "Inspector"
    assert at.query_params["candidate"] == "0"
    # a rerun with the URL unchanged keeps what the user picked since
    at.session_state["live_sel"] = 3
    at.run()
    assert at.session_state["live_sel"] == 3
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_one_refresh_of_the_live_page_reads_the_archive_once(
    studio_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the chart and the table each used to read the whole archive on every refresh
    from core.storage import DuckDBRunStore
    from studio._st_common import _manager

    reads: list[tuple[str, dict[str, Any]]] = []
    real = DuckDBRunStore.archive

    def counted(self: DuckDBRunStore, run_id: str, **kw: Any) -> Any:
        reads.append((run_id, {k: v for k, v in kw.items() if k != "objectives"}))
        return real(self, run_id, **kw)

    monkeypatch.setattr(DuckDBRunStore, "archive", counted)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["run"] = RUN_ID
    at.switch_page(LIVE)
    reads.clear()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the whole archive once (chart, table and inspector), then the held-out front's two
    # per-split reads
    assert reads == [
        (RUN_ID, {"split": None, "include_unevaluated": True}),
        (RUN_ID, {"split": "validation", "include_unevaluated": False}),
        (RUN_ID, {"split": "test", "include_unevaluated": False}),
    ]
    [table] = [d for d in at.dataframe if "on_front" in d.value.columns]
    assert table.value["candidate_idx"].tolist() == [1, 0, 2, 3]
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_several_points_selected_on_the_chart_link_to_compare(app: AppTest) -> None:
    # "Compare selected" from the Live chart (the chart's selection lands in
    # live_multi; the browser test makes a real box selection)
    at = app
    at.session_state["live_multi"] = (RUN_ID, [2, 0, 1])
    at = _live(at, run=RUN_ID)
    [link] = [e for e in at.get("page_link") if "Compare selected" in e.proto.label]
    assert link.proto.label == "Compare selected (3)"
    assert link.proto.page == "compare"
    assert link.proto.query_string == f"items={RUN_ID}%3A2%2C{RUN_ID}%3A0%2C{RUN_ID}%3A1"
    assert "Selected on the chart: #2, #0, #1." in _texts(at)
    # another run's selection is not offered here
    at = _live(at, run=RUN2)
    assert not [e for e in at.get("page_link") if "Compare selected" in e.proto.label]
    assert "Select several points (box or lasso select in the chart's toolbar" in _texts(at)


def test_the_bad_run_warning_belongs_to_the_visit_the_link_opened(app: AppTest) -> None:
    # the warning once stayed for the whole session: on every later visit of the page, after
    # the link was long gone
    note = f"No run 'no-such-run' in this store: showing {RUN2} instead."
    at = _live(app, run="no-such-run")
    assert note in [str(w.value) for w in at.warning]
    at.run()  # the same visit (any rerun): still said
    assert note in [str(w.value) for w in at.warning]
    at.switch_page(str(REPO / "pages" / "compare.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at = _live(at)
    assert at.selectbox(key="live_run").value == RUN2
    assert not [w for w in at.warning if "No run" in str(w.value)]
    # a choice in the picker ends it too
    at = _live(app, run="no-such-run")
    at.switch_page(str(REPO / "pages" / "compare.py"))
    at.run()
    at.query_params["run"] = "still-no-such-run"
    at = _live(at)
    assert f"No run 'still-no-such-run' in this store: showing {RUN2} instead." in [
        str(w.value) for w in at.warning
    ]
    at.selectbox(key="live_run").set_value(RUN_ID).run()
    assert not [w for w in at.warning if "No run" in str(w.value)]
