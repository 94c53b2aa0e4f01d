"""The Live page's second chart for a phase-2 (prompt) run: score against metric calls, the
candidates' table, and the prompts of the candidate picked; while the run goes on (a candidate not
yet in a snapshot is in the table, off the chart) and after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from studio.manager import StudioManager
from studio.views.prompts_chart import prompt_figure, prompt_table

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
SEARCH = "20250101-120000-abc123"
PHASE2 = "20250102-120000-prompt"
GENES = ("solver.system_prompt", "critic.system_prompt")
SPEC = (
    '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
    '{"kind": "agent_step", "id": "solve", "agent_name": "6b_finetuning"}}]}'
)
T0 = 1_735_819_200.0
# candidate: (parent, score, metric calls when found, solver prompt)
CANDIDATES = {
    0: (None, 0.40, 10, "Solve it."),
    1: (0, 0.55, 16, "Solve it.\nEnd with 'Answer: N'."),
    2: (1, 0.50, 22, "Solve it step by step."),
}


def _started() -> SearchEvent:
    return RunStarted(
        run_id=PHASE2,
        seq=0,
        ts=T0,
        problem="gsm8k_replay",
        strategy="gepa",
        seed=1,
        config={"phase": "prompts", "parent_run_id": SEARCH, "genes": list(GENES)},
    )


def _candidate(idx: int, seq: int, *, snapshot: bool) -> list[SearchEvent]:
    parent, score, calls, prompt = CANDIDATES[idx]
    h = f"h{idx}"
    ev: list[SearchEvent] = [
        CandidateProposed(
            run_id=PHASE2,
            seq=seq,
            ts=T0 + seq,
            candidate_idx=idx,
            generation=idx - 1,
            spec_hash=h,
            spec_json=SPEC,
            parent_idx=parent,
            operator="seed" if idx == 0 else "gepa_reflection",
            thought=f"solver.system_prompt: {prompt}\ncritic.system_prompt: Check it.",
        ),
        CandidateEvaluated(
            run_id=PHASE2,
            seq=seq + 1,
            ts=T0 + seq + 1,
            candidate_idx=idx,
            spec_hash=h,
            split="validation",
            n_examples=10,
            accuracy=score,
            cost_usd=0.01,
            latency_ms=100.0,
            n_agents=1,
            depth=1,
            aggregate_score=score,
        ),
    ]
    if snapshot:
        best = max(range(idx + 1), key=lambda i: CANDIDATES[i][1])
        ev.append(
            ArchiveSnapshot(
                run_id=PHASE2,
                seq=seq + 2,
                ts=T0 + seq + 2,
                generation=idx - 1,
                entries=list(range(idx + 1)),
                front=[best],
                best_idx=best,
                best_score=CANDIDATES[best][1],
                n_evaluations=calls,
                cost_usd_total=0.01 * calls,
            )
        )
    return ev


def _table(archive: pd.DataFrame, snaps: pd.DataFrame) -> pd.DataFrame:
    return prompt_table(archive, snaps, GENES)


@pytest.fixture
def live(studio_env: Path) -> Iterator[tuple[AppTest, StudioManager]]:
    """The Live page on a phase-2 run still running: candidates 0 and 1 in snapshots,
    candidate 2 scored but in no snapshot yet."""
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    manager: StudioManager = _manager(str(studio_env.resolve()))
    events = [_started(), *_candidate(0, 1, snapshot=True), *_candidate(1, 4, snapshot=True)]
    events += _candidate(2, 7, snapshot=False)
    manager.store.record_events(events)
    at.query_params["run"] = PHASE2
    at.switch_page(str(REPO / "pages" / "live.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at, manager
    manager.close()
    _manager.clear()


def _chart(at: AppTest) -> dict[str, object]:
    (chart,) = [c for c in at.get("plotly_chart") if "metric calls" in c.proto.spec]
    return json.loads(chart.proto.spec)


def _codes(at: AppTest) -> list[str]:
    return [str(c.value) for c in at.code]


def test_the_table_reads_metric_calls_from_snapshots_and_prompts_from_thoughts(
    studio_env: Path,
) -> None:
    manager = StudioManager(studio_env)
    try:
        manager.store.record_events(
            [_started(), *_candidate(0, 1, snapshot=True), *_candidate(1, 4, snapshot=False)]
        )
        table = _table(
            manager.store.archive(PHASE2, include_unevaluated=True),
            manager.store.snapshots(PHASE2),
        )
    finally:
        manager.close()
    assert table["candidate_idx"].tolist() == [0, 1]
    assert table["metric_calls"].tolist() == [10, pd.NA]
    assert table["score"].tolist() == [0.40, 0.55]
    assert table["parent_idx"].tolist() == [pd.NA, 0]
    assert table["solver.system_prompt"].tolist() == [
        "Solve it.",
        "Solve it.\nEnd with 'Answer: N'.",
    ]
    assert table["critic.system_prompt"].tolist() == ["Check it.", "Check it."]
    fig = prompt_figure(table, selected=0)
    line, points = fig.data
    # only candidate 0 is placed: 1 has no snapshot yet
    assert (list(points.x), list(points.y), list(line.y)) == ([10], [0.40], [0.40])


def test_a_running_phase_2_run_draws_its_chart_and_refreshes_as_candidates_arrive(
    live: tuple[AppTest, StudioManager],
) -> None:
    at, manager = live
    assert "Phase 2: prompt candidates" in [s.value for s in at.subheader]
    spec = _chart(at)
    best_line, points = spec["data"]  # type: ignore[index]
    assert (points["x"], points["y"], points["text"]) == ([10, 16], [0.4, 0.55], ["0", "1"])
    assert best_line["y"] == [0.4, 0.55]
    assert points["marker"]["symbol"] == ["circle", "star"]
    assert (
        "1 candidate(s) not on the chart: no archive snapshot gives the metric calls spent when "
        "they were found (they are in the table)."
    ) in [c.value for c in at.caption]
    table = [d.value for d in at.dataframe if "metric_calls" in d.value.columns][0]
    assert table["candidate_idx"].tolist() == [0, 1, 2]
    # the best candidate's prompts are shown first
    assert at.selectbox(key=f"pc_pick_{PHASE2}").value == 1
    assert _codes(at)[-2:] == ["Solve it.\nEnd with 'Answer: N'.", "Check it."]
    # another candidate picked: its prompts
    at.selectbox(key=f"pc_pick_{PHASE2}").set_value(2).run()
    assert _codes(at)[-2:] == ["Solve it step by step.", "Check it."]
    # the run goes on: candidate 2's snapshot arrives and the run finishes
    best = max(CANDIDATES, key=lambda i: CANDIDATES[i][1])
    manager.store.record_events(
        [
            ArchiveSnapshot(
                run_id=PHASE2,
                seq=9,
                ts=T0 + 9,
                generation=1,
                entries=[0, 1, 2],
                front=[best],
                best_idx=best,
                best_score=0.55,
                n_evaluations=22,
                cost_usd_total=0.22,
            ),
            RunFinished(run_id=PHASE2, seq=10, ts=T0 + 10, status="completed", best_idx=1),
        ]
    )
    at.run()
    assert not at.exception
    best_line, points = _chart(at)["data"]  # type: ignore[index]
    assert (points["x"], points["y"]) == ([10, 16, 22], [0.4, 0.55, 0.5])
    assert best_line["y"] == [0.4, 0.55, 0.55]
    assert points["marker"]["line"]["width"] == [0, 0, 3]  # the picked candidate ringed
    assert not [c for c in at.caption if "not on the chart" in str(c.value)]


def test_a_topology_search_has_no_prompt_section(studio_env: Path) -> None:
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["run"] = SEARCH
    at.switch_page(str(REPO / "pages" / "live.py"))
    at.run()
    try:
        assert not at.exception
        assert "Phase 2: prompt candidates" not in [s.value for s in at.subheader]
    finally:
        _manager(str(studio_env.resolve())).close()
        _manager.clear()


def _search_events() -> list[SearchEvent]:
    """SEARCH, the topology search PHASE2 follows: its seed, evaluated, and its end."""
    from core.search.events import RunFinished as Finished

    return [
        RunStarted(run_id=SEARCH, seq=0, ts=T0 - 100, problem="gsm8k_replay",
                   strategy="evolutionary", seed=1, config={}),
        CandidateProposed(run_id=SEARCH, seq=1, ts=T0 - 99, candidate_idx=0, generation=-1,
                          spec_hash="s0", spec_json=SPEC, operator="seed"),
        CandidateEvaluated(run_id=SEARCH, seq=2, ts=T0 - 98, candidate_idx=0, spec_hash="s0",
                           split="validation", n_examples=10, accuracy=0.4, cost_usd=0.01,
                           latency_ms=100.0, n_agents=1, depth=1, aggregate_score=0.4),
        Finished(run_id=SEARCH, seq=3, ts=T0 - 50, status="completed", best_idx=0),
    ]  # fmt: skip


def test_a_search_with_a_phase_2_shows_both_charts_on_its_live_page(studio_env: Path) -> None:
    """One run, two phases (both recorded in the run store as one run): the search's Live page draws
    its topology chart and, below it, phase 2's chart, refreshing while phase 2 runs (the search
    itself finished); a link to the phase-2 record opens its search, which the picker lists
    alone."""
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    manager: StudioManager = _manager(str(studio_env.resolve()))
    try:
        manager.store.record_events(_search_events())
        manager.store.record_events([_started(), *_candidate(0, 1, snapshot=True)])
        at.query_params["run"] = PHASE2
        at.switch_page(str(REPO / "pages" / "live.py"))
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        picker = at.selectbox(key="live_run")
        assert (picker.value, at.query_params["run"]) == (SEARCH, SEARCH)
        assert PHASE2 not in picker.options and len(picker.options) == 1
        charts = at.get("plotly_chart")
        assert len(charts) == 2  # the topology search's, then phase 2's
        assert "metric calls" not in charts[0].proto.spec
        best_line, points = _chart(at)["data"]  # type: ignore[index]
        assert (points["x"], points["y"]) == ([10], [0.4])
        assert "Phase 2: prompt candidates" in [s.value for s in at.subheader]
        # phase 2 goes on: its next candidate appears on the next refresh of the search's page
        manager.store.record_events(_candidate(1, 4, snapshot=True))
        at.run()
        best_line, points = _chart(at)["data"]  # type: ignore[index]
        assert (points["x"], points["y"]) == ([10, 16], [0.4, 0.55])
    finally:
        manager.close()
        _manager.clear()
