"""F11: a chart selection maps to the entry shown at that point, via customdata."""

import json

import pandas as pd
import pytest

from studio.views.pareto import (
    FRONT_NAME,
    WITHIN_NOISE_NAME,
    HypervolumeSeries,
    hypervolume_series,
    live_figure,
    minibatch_name,
    pareto_figure,
    progress_figure,
    selected_candidates,
    view_revision,
)


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
    assert FRONT_NAME == "Pareto front (over all 5 objectives)"
    assert [t.name for t in fig.data] == [FRONT_NAME, "dominated"]
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
    assert [t.name for t in fig.data] == [
        "best aggregate score",
        "hypervolume (accuracy, cost_usd; as stored by the search)",
    ]
    assert fig.layout.yaxis2.rangemode == "tozero"
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


def test_live_figure_gives_score_and_hypervolume_their_own_axes() -> None:
    frame = pd.DataFrame(
        {"n_evaluations": [10, 20], "best_score": [0.4, 0.5], "hypervolume": [0.1, 0.2]}
    )
    hv = HypervolumeSeries(
        pd.DataFrame({"n_evaluations": [10, 20], "hypervolume": [0.25, 0.5]}),
        ("cost_usd", "accuracy"),
        (0.5, 0.0),
    )
    fig = live_figure(_archive(), frame, x="cost_usd", y="accuracy", selected=101, hv=hv)
    assert [t.name for t in fig.data] == [
        FRONT_NAME,
        "dominated",
        "selected",
        "best aggregate score",
        "hypervolume (cost_usd, accuracy)",
    ]
    assert [(t.xaxis, t.yaxis) for t in fig.data[3:]] == [("x2", "y2"), ("x3", "y3")]
    assert list(fig.data[4].y) == [0.25, 0.5]  # the series given, not the stored column
    assert [t.mode for t in fig.data[3:]] == ["lines", "lines"]  # no markers to mistake
    # two small charts one above the other: no line hides under the other
    assert fig.layout.yaxis2.domain == (0.58, 1.0) and fig.layout.yaxis3.domain == (0.0, 0.42)
    assert fig.layout.yaxis3.rangemode == "tozero"  # no negative ticks for an all-zero start
    assert [a.text for a in fig.layout.annotations] == [
        "Pareto front",
        "Best aggregate score",
        "Hypervolume",  # the axes in the legend (the trace's name above) and the caption
    ]
    assert fig.data[3].customdata is None  # a progress point never maps to a candidate
    assert selected_candidates({"points": [{"curve_number": 3, "point_index": 0}]}) == []
    no_hv = live_figure(_archive(), frame)
    assert [t.name for t in no_hv.data][-1] == "best aggregate score"


def _mixed() -> pd.DataFrame:
    """A seed and a mutant on the full split (300), and two minibatch-only mutants (20)."""
    return pd.DataFrame(
        {
            "candidate_idx": [0, 1, 2, 3, 4],
            "accuracy": [0.3, 0.4, 0.45, 0.5, float("nan")],
            "cost_usd": [0.001, 0.004, 0.002, 0.003, 0.001],
            "on_front": [True, True, False, False, False],
            "valid": [True, True, True, True, False],
            "comparable": [True, True, False, False, False],
            "objective_split": ["validation", "validation", "minibatch", "minibatch", None],
            "n_examples": [300, 300, 20, 20, None],
        }
    )


def test_minibatch_estimates_get_their_own_hollow_trace() -> None:
    fig = pareto_figure(_mixed())
    assert [t.name for t in fig.data] == [
        FRONT_NAME,
        "dominated",
        "minibatch estimate (20 problems)",
    ]
    assert [c[0] for c in fig.data[0].customdata] == [0, 1]
    assert len(fig.data[1].x) == 0
    assert [c[0] for c in fig.data[2].customdata] == [2, 3]
    assert fig.data[2].marker.symbol == "diamond-open"
    assert fig.data[0].marker.symbol == "circle" and fig.data[1].marker.symbol == "circle"
    # without a comparable column it is derived from the split; without a split, all count
    derived = pareto_figure(_mixed().drop(columns="comparable"))
    assert [c[0] for c in derived.data[2].customdata] == [2, 3]
    plain = _mixed().drop(columns=["comparable", "objective_split"])
    assert [t.name for t in pareto_figure(plain).data] == [FRONT_NAME, "dominated"]


def test_minibatch_name_counts_problems() -> None:
    assert minibatch_name([20, 20.0]) == "minibatch estimate (20 problems)"
    assert minibatch_name([5, 20, float("nan")]) == "minibatch estimate (5-20 problems)"
    assert minibatch_name([1]) == "minibatch estimate (1 problem)"
    assert minibatch_name([]) == "minibatch estimate"


def test_hypervolume_series_is_over_the_chosen_axes_with_a_fixed_reference() -> None:
    snaps = pd.DataFrame(
        {"n_evaluations": [300, 340, 640], "entries": [[0], [0, 2, 3], [0, 1, 2, 3]]}
    )
    hv = hypervolume_series(snaps, _mixed(), "cost_usd", "accuracy")
    assert hv.objectives == ("cost_usd", "accuracy")
    # full-split candidates only (0 and 1): accuracy from 0, cost from the worst, 0.004
    assert hv.reference == (0.004, 0.0)
    assert hv.label == "hypervolume (cost_usd, accuracy)"
    assert hv.reference_text == "cost_usd = 0.004, accuracy = 0"
    assert hv.frame["n_evaluations"].tolist() == [300, 340, 640]
    # candidate 0 alone: (0.004 - 0.001) * 0.3; candidate 1 sits at the cost reference
    assert hv.frame["hypervolume"].tolist() == pytest.approx([0.0009, 0.0009, 0.0009])
    # other axes: latency is not in this archive -> nothing; one axis twice -> 1-D
    one = hypervolume_series(snaps, _mixed(), "accuracy", "accuracy")
    assert one.objectives == ("accuracy",) and one.reference == (0.0,)
    assert one.frame["hypervolume"].tolist() == pytest.approx([0.3, 0.3, 0.4])
    assert hypervolume_series(snaps, _mixed(), "latency_ms", "accuracy").reference is None
    # n_agents is a cost: the worst (largest) value is the reference
    agents = _mixed().assign(n_agents=[1, 3, 1, 1, 1])
    hv_agents = hypervolume_series(snaps, agents, "n_agents", "accuracy")
    assert hv_agents.reference == (3.0, 0.0)
    assert hv_agents.frame["hypervolume"].tolist() == pytest.approx([0.6, 0.6, 0.6])
    assert hypervolume_series(snaps.iloc[0:0], _mixed(), "cost_usd", "accuracy").frame.empty


def test_the_view_revision_changes_only_with_the_run_or_the_axes() -> None:
    # the zoom kept across refreshes is keyed by it (the 2 s refresh used to reset a zoom)
    assert view_revision("r1", "cost_usd", "accuracy", log_x=False) == (
        "r1|cost_usd|accuracy|linear"
    )
    assert view_revision("r1", "cost_usd", "accuracy", log_x=True) == "r1|cost_usd|accuracy|log"
    assert view_revision("r2", "latency_ms", "accuracy", log_x=False) == (
        "r2|latency_ms|accuracy|linear"
    )


def _noise() -> pd.DataFrame:
    # the front of _archive(), cheapest first: 108 ($0.02), 107, 105, 104, 102, 101 ($0.09)
    front = [108, 107, 105, 104, 102, 101]
    rows = []
    for i, idx in enumerate(front):
        first = i == 0
        rows.append(
            {
                "candidate_idx": idx,
                "gain_vs_cheaper": float("nan") if first else -0.1,
                "gain_low": float("nan") if first else -0.15 if idx in (105, 102) else -0.12,
                "gain_high": float("nan") if first else -0.02,
                "within_noise": not first,
            }
        )
    rows[2].update(gain_vs_cheaper=0.15, gain_low=0.05, gain_high=0.25, within_noise=False)
    return pd.DataFrame(rows)


def test_front_points_carry_their_interval_as_error_bars() -> None:
    fig = pareto_figure(_archive(), noise=_noise())
    names = [t.name for t in fig.data]
    assert names == [FRONT_NAME, WITHIN_NOISE_NAME, "dominated"]
    front, noisy = fig.data[0], fig.data[1]
    assert front.customdata.ravel().tolist() == [108, 105]
    # 105: gain 0.15 with interval [0.05, 0.25]: 0.1 up and down; 108, the cheapest: none
    assert front.error_y.array.tolist() == pytest.approx([0.0, 0.1])
    assert front.error_y.arrayminus.tolist() == pytest.approx([0.0, 0.1])
    assert noisy.customdata.ravel().tolist() == [107, 104, 102, 101]
    # gain -0.1, interval [-0.12 or -0.15, -0.02]: 0.08 up, 0.02 (0.05 for 102) down
    assert noisy.error_y.array.tolist() == pytest.approx([0.08, 0.08, 0.08, 0.08])
    assert noisy.error_y.arrayminus.tolist() == pytest.approx([0.02, 0.02, 0.05, 0.02])
    hidden = pareto_figure(_archive(), noise=_noise(), hide_within_noise=True)
    assert [t.name for t in hidden.data] == [FRONT_NAME, "dominated"]
    # another Y axis: no intervals (they are accuracy gains), the front drawn as before
    other = pareto_figure(_archive(), y="cost_usd", noise=_noise())
    assert [t.name for t in other.data] == [FRONT_NAME, "dominated"]
    assert other.data[0].error_y.array is None
