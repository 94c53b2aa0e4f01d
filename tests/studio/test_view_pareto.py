"""F11: a chart selection maps to the entry shown at that point, via customdata."""

import json

import pandas as pd
import pytest

from studio.views.pareto import live_figure, pareto_figure, progress_figure, selected_candidates


def _archive() -> pd.DataFrame:
    # 10 entries; front membership interleaved so trace order differs from row order
    rows = []
    for i in range(10):
        rows.append(
            {
                "candidate_idx": 100 + i,
                "accuracy": 0.1 * i,
                "cost_usd": 0.01 * (10 - i) if i % 3 else 0.5,
                "on_front": i % 3 != 0,
                "valid": True,
            }
        )
    rows.append(
        {
            "candidate_idx": 999,
            "accuracy": float("nan"),
            "cost_usd": 0.0,
            "on_front": False,
            "valid": False,
        }
    )
    return pd.DataFrame(rows)


def test_selection_of_trace_1_point_0_is_the_entry_drawn_there() -> None:
    fig = pareto_figure(_archive(), x="cost_usd", y="accuracy")
    assert [t.name for t in fig.data] == ["Pareto front", "dominated"]
    dominated = fig.data[1]
    # trace 1, point 0 is the first dominated entry: candidate 100 (i = 0)
    assert list(dominated.customdata[0]) == [100]
    assert dominated.x[0] == 0.5 and dominated.y[0] == 0.0
    event = {
        "points": [
            {
                "curve_number": 1,
                "point_number": 0,
                "point_index": 0,
                "x": dominated.x[0],
                "y": dominated.y[0],
                "customdata": list(dominated.customdata[0]),
            }
        ]
    }
    assert selected_candidates(event) == [100]


def test_front_trace_is_sorted_by_x_and_keeps_its_own_ids() -> None:
    fig = pareto_figure(_archive(), x="cost_usd", y="accuracy")
    front = fig.data[0]
    assert [c[0] for c in front.customdata] == [108, 107, 105, 104, 102, 101]
    assert list(front.x) == sorted(front.x)


def test_invalid_entries_are_not_drawn() -> None:
    fig = pareto_figure(_archive())
    drawn = {c[0] for t in fig.data for c in t.customdata}
    assert 999 not in drawn
    assert len(drawn) == 10


def test_selection_without_customdata_or_empty_gives_nothing() -> None:
    assert selected_candidates(None) == []
    assert selected_candidates({"points": []}) == []
    assert selected_candidates({"points": [{"point_index": 3}]}) == []
    assert selected_candidates({"points": [{"customdata": [4]}, {"customdata": [4]}]}) == [4]


def test_missing_column_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="no column 'latency_ms'"):
        pareto_figure(_archive(), x="latency_ms")


def test_progress_figure_has_two_series() -> None:
    snaps = pd.DataFrame(
        {"n_evaluations": [10, 20], "best_score": [0.4, 0.5], "hypervolume": [0.1, 0.2]}
    )
    fig = progress_figure(snaps)
    assert [t.name for t in fig.data] == ["best aggregate score", "hypervolume (accuracy, cost)"]
    assert list(fig.data[0].y) == [0.4, 0.5]


def test_selection_of_a_typed_array_row_reads_its_first_item() -> None:
    # numpy customdata reaches plotly.js as typed arrays; a selected point's row comes back
    # JSON-encoded as {"0": value}
    event = {"points": [{"curve_number": 1, "point_index": 0, "customdata": {"0": 100}}]}
    assert selected_candidates(event) == [100]
    assert selected_candidates({"points": [{"customdata": 7}]}) == [7]


def test_customdata_travels_as_a_compact_typed_array() -> None:
    fig = pareto_figure(_archive())
    dumped = json.loads(fig.to_json())["data"][1]["customdata"]
    assert dumped["shape"] == "4, 1" and dumped["dtype"] in ("i1", "i2", "i4")


def test_live_figure_puts_progress_beside_the_scatter_and_only_scatter_points_select() -> None:
    frame = pd.DataFrame(
        {"n_evaluations": [10, 20], "best_score": [0.4, 0.5], "hypervolume": [0.1, 0.2]}
    )
    fig = live_figure(_archive(), frame, x="cost_usd", y="accuracy", selected=101)
    assert [t.name for t in fig.data] == [
        "Pareto front",
        "dominated",
        "selected",
        "best aggregate score",
        "hypervolume (accuracy, cost)",
    ]
    assert [(t.xaxis, t.yaxis) for t in fig.data[3:]] == [("x2", "y2"), ("x2", "y3")]
    assert fig.data[3].customdata is None  # a progress point never maps to a candidate
    assert selected_candidates({"points": [{"curve_number": 3, "point_index": 0}]}) == []
    no_hv = live_figure(_archive(), frame.assign(hypervolume=float("nan")))
    assert [t.name for t in no_hv.data][-1] == "best aggregate score"
