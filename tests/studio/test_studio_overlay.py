"""Run overlay: two runs' fronts on one chart, hypervolume and best score against evaluations, the
runs side by side and their spread across seeds."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RUN_ID, run_events
from streamlit.testing.v1 import AppTest

from core.search.events import RunStarted, SearchEvent
from core.storage import DuckDBRunStore
from studio.views.overlay import RunData, common_reference, front_points, run_summary, spread_table

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
OVERLAY = str(REPO / "pages" / "overlay.py")
RUN2 = "20250102-000000-run2xx"


@pytest.fixture
def overlay(studio_env: Path) -> Iterator[AppTest]:
    from studio._st_common import _manager

    with DuckDBRunStore(studio_env) as store:
        store.record_events(run_events(RUN2, t0=1_735_776_000.0))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(OVERLAY)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at
    _manager(os.environ["TOPOLOGY_STUDIO_DB"]).close()
    _manager.clear()


def test_two_runs_on_one_chart_with_a_table_and_spread(overlay: AppTest) -> None:
    at = overlay
    assert [t.value for t in at.title] == ["Run overlay"]
    charts = at.get("plotly_chart")
    assert len(charts) == 2
    import json

    fronts = json.loads(charts[0].proto.spec)["data"]
    assert sorted(t["name"][-7:-1] for t in fronts) == ["abc123", "run2xx"]
    progress = json.loads(charts[1].proto.spec)["data"]
    assert len(progress) == 4  # hypervolume and best score, per run
    # a run is one colour in every chart (the progress charts' rows are sorted by label, and
    # gave the fronts' first run the second one's colour)
    front_colour = {t["name"]: t["line"]["color"] for t in fronts}
    assert [t["name"] for t in fronts] == [
        f"evolutionary s1 ({RUN2[-6:]})",
        f"evolutionary s1 ({RUN_ID[-6:]})",
    ]
    assert front_colour == {fronts[0]["name"]: "#1f77b4", fronts[1]["name"]: "#ff7f0e"}
    assert {t["name"]: t["line"]["color"] for t in progress} == front_colour
    summary = [d.value for d in at.dataframe if "hypervolume" in d.value.columns][0]
    assert len(summary) == 2 and summary["best_accuracy"].tolist() == [0.6, 0.6]
    # the reported figures first: in view at 1000 px
    assert summary.columns.tolist() == [
        "run", "best_accuracy", "best_score", "hypervolume", "front_size", "cost_usd",
        "evaluations", "candidates", "strategy", "seed", "problem",
    ]  # fmt: skip
    spread = [d.value for d in at.dataframe if "runs" in d.value.columns][0]
    assert spread["runs"].tolist() == [2]
    assert spread["best_accuracy"].tolist() == ["0.6000 ± 0.0000"]


def test_front_and_common_reference() -> None:
    import pandas as pd

    arch = pd.DataFrame(
        {"candidate_idx": [0, 1, 2], "valid": [True, True, True], "objective_split": ["validation"] * 3,
         "cost_usd": [0.1, 0.5, 0.3], "accuracy": [0.2, 0.6, 0.1], "aggregate_score": [0.1, 0.4, 0.0]}
    )  # fmt: skip
    data = [
        RunData(
            {"run_id": RUN_ID, "strategy": "random", "seed": 1, "problem": "p"},
            arch,
            pd.DataFrame(),
        )
    ]
    assert common_reference(data) == (0.5, 0.0)
    assert front_points(data)["candidate_idx"].tolist() == [0, 1]
    s = run_summary(data, (1.0, 0.0))
    assert s["hypervolume"].tolist() == [pytest.approx(0.9 * 0.2 + 0.5 * 0.4)]
    assert spread_table(s)["best_accuracy"].tolist() == ["0.6000"]


EDITOR_RUN = "20250103-000000-editor"


def _editor_run() -> list[SearchEvent]:
    """A run as the Topology editor's Evaluate records one: strategy editor."""
    return [
        e.model_copy(update={"strategy": "editor"}) if isinstance(e, RunStarted) else e
        for e in run_events(EDITOR_RUN, t0=1_735_862_400.0)
    ]


def test_editor_evaluations_are_left_out_unless_switched_on(studio_env: Path) -> None:
    from studio._st_common import _manager

    with DuckDBRunStore(studio_env) as store:
        store.record_events(_editor_run())
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(OVERLAY)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="ov_editor").label == "Include editor evaluations (1)"
    assert at.multiselect(key="ov_runs_gsm8k_replay").options == [
        f"{RUN_ID}  gsm8k_replay  evolutionary  (completed)"
    ]
    at.toggle(key="ov_editor").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="ov_runs_gsm8k_replay").options == [
        f"{EDITOR_RUN}  gsm8k_replay  editor  (completed)",
        f"{RUN_ID}  gsm8k_replay  evolutionary  (completed)",
    ]
    _manager(os.environ["TOPOLOGY_STUDIO_DB"]).close()
    _manager.clear()


def test_a_sweep_group_opens_its_runs_in_one_click(studio_env: Path) -> None:
    import json

    from studio._st_common import _manager
    from studio.cli.sweep import sweep_dir

    with DuckDBRunStore(studio_env) as store:
        store.record_events(run_events(RUN2, t0=1_735_776_000.0))
    folder = sweep_dir(studio_env)
    folder.mkdir()
    group = {"name": "g1", "problem": "p", "strategies": ["random"], "seeds": [1, 2]}
    (folder / "g1.json").write_text(json.dumps({**group, "runs": [RUN_ID, RUN2]}))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(OVERLAY)
    at.run()
    try:
        (button,) = [b for b in at.button if b.label.startswith("Open sweep g1")]
        assert button.label.startswith("Open sweep g1: 2 runs")
        button.click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.query_params["runs"] == f"{RUN_ID},{RUN2}"
        assert sorted(at.multiselect[0].value) == sorted([RUN_ID, RUN2])
    finally:
        _manager(os.environ["TOPOLOGY_STUDIO_DB"]).close()
        _manager.clear()
