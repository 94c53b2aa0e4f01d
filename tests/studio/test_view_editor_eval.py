"""Pure view functions of the editor's evaluations: the paired comparison with the parent and
the cost calibration (studio/views/editor_eval.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from core.ir import parse_topology
from studio.views.editor_eval import (
    CalibrationSample,
    agent_names_of,
    calibrate_cost,
    parent_comparison,
)


def _frame(rows: list[tuple[str, str, float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["split", "example_id", "accuracy", "cost_usd", "latency_ms"])


def test_the_parent_is_measured_on_the_evaluations_examples_only() -> None:
    parent = _frame(
        [
            ("validation", "a", 1.0, 0.010, 1000.0),
            ("validation", "b", 0.0, 0.030, 3000.0),
            ("validation", "c", 1.0, 0.020, 2000.0),
            ("validation", "z", 0.0, 9.000, 9e6),  # not in the evaluation: left out
            ("test", "a", 0.0, 5.0, 5e6),  # another split: left out
        ]
    )
    child = _frame(
        [
            ("validation", "a", 0.0, 0.015, 1200.0),
            ("validation", "b", 1.0, 0.035, 2900.0),
            ("validation", "c", 1.0, 0.025, 2000.0),
            ("validation", "d", 1.0, 0.100, 100.0),  # the parent never ran it
        ]
    )
    cmp = parent_comparison(parent, child, "validation")
    assert (cmp.n_paired, cmp.n_only_this, cmp.split) == (3, 1, "validation")
    acc, usd, ms = (cmp.figures[m] for m in ("accuracy", "cost_usd", "latency_ms"))
    assert acc == pytest.approx((2 / 3, 2 / 3, 0.0))
    assert usd == pytest.approx((0.02, 0.025, 0.005))
    assert ms == pytest.approx((2000.0, 6100 / 3, 100 / 3))
    assert cmp.table.to_dict("list") == {
        "parent": ["66.67%", "$0.0200", "2.00 s"],
        "this topology": ["66.67%", "$0.0250", "2.03 s"],
        "change": ["+0.00 pp", "+$0.0050", "+33 ms"],
    }
    assert cmp.counts == {
        "right_to_wrong": 1,
        "wrong_to_right": 1,
        "both_right": 1,
        "both_wrong": 0,
        "only_a": 0,
        "only_b": 0,
    }


def test_trials_are_averaged_and_nan_counts_as_wrong() -> None:
    parent = _frame([("validation", "a", 1.0, 0.01, 10.0), ("validation", "a", 0.0, 0.03, 30.0)])
    child = _frame([("validation", "a", float("nan"), 0.02, 20.0)])
    cmp = parent_comparison(parent, child, "validation")
    assert cmp.figures["cost_usd"] == pytest.approx((0.02, 0.02, 0.0))
    # the parent's mean 0.5 is right at the 0.5 threshold; NaN is wrong
    assert cmp.counts["right_to_wrong"] == 1
    assert cmp.table.loc["accuracy"].tolist() == ["50.00%", "-", "-"]


def test_no_paired_example_gives_nan_figures_and_a_missing_column_is_named() -> None:
    cmp = parent_comparison(
        _frame([("validation", "a", 1.0, 0.0, 0.0)]),
        _frame([("validation", "b", 1.0, 0.0, 0.0)]),
        "validation",
    )
    assert cmp.n_paired == 0 and cmp.n_only_this == 1
    assert all(math.isnan(x) for f in cmp.figures.values() for x in f)
    assert sum(cmp.counts.values()) == 0
    with pytest.raises(ValueError, match=r"examples lacks column\(s\) latency_ms"):
        parent_comparison(
            _frame([]), pd.DataFrame(columns=["split", "example_id", "accuracy", "cost_usd"]), "v"
        )


def test_agent_names_cover_steps_classifiers_evaluators_and_inline_agents() -> None:
    spec = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {
                    "operation": {
                        "kind": "router",
                        "classifier": "pick",
                        "routes": [
                            {
                                "name": "x",
                                "condition_name": "c",
                                "step": {"kind": "agent_step", "agent_name": "a1"},
                            }
                        ],
                        "fallback_step": {
                            "kind": "refinement_loop",
                            "evaluator": "judge",
                            "state_updater_name": "upd",
                            "step": {"kind": "agent_step", "agent_name": "a2"},
                        },
                    }
                },
                {"operation": {"kind": "function_step", "callable_name": "f"}},
                {
                    "operation": {
                        "kind": "agent_step",
                        "inline_spec": {
                            "name": "n",
                            "model": "test:m",
                            "system_prompt": "i",
                            "output_schema": {"type": "string"},
                        },
                    }
                },
            ],
        }
    )
    assert agent_names_of(spec) == {"a1", "a2", "pick", "judge", "inline:test:m"}


def test_calibration_is_the_median_ratio_of_topologies_using_only_these_agents() -> None:
    samples = [
        CalibrationSample(1.0, 0.20, frozenset({"a"})),
        CalibrationSample(2.0, 0.60, frozenset({"a", "b"})),
        CalibrationSample(4.0, 1.00, frozenset({"b"})),
        CalibrationSample(1.0, 9.00, frozenset({"a", "c"})),  # uses c: not a sample for {a, b}
        CalibrationSample(math.nan, 1.0, frozenset({"a"})),  # unpriced: left out
        CalibrationSample(1.0, 1.0, frozenset()),  # no agent: left out
    ]
    cal = calibrate_cost(3.0, frozenset({"a", "b"}), samples, where="the test runs")
    # ratios 0.2, 0.25, 0.3 -> median 0.25
    assert (cal.factor, cal.n_samples, cal.low, cal.high) == (0.25, 3, 0.2, 0.3)
    assert cal.usd_per_example == 0.75
    assert cal.text == (
        "Calibrated estimate: $0.7500 per example (the static rule's $3.0000 times 0.25, the "
        "median measured / static ratio of 3 topologies using only these agents in the test "
        "runs; ratios 0.2 to 0.3)."
    )


def test_without_a_sample_or_a_price_the_estimate_is_dropped() -> None:
    only_c = [CalibrationSample(1.0, 2.0, frozenset({"c"}))]
    cal = calibrate_cost(3.0, frozenset({"a"}), only_c, where="the newest run of p")
    assert math.isnan(cal.usd_per_example) and cal.n_samples == 0
    assert cal.text == (
        "No cost estimate: no topology using only these agents (a) has a measured cost in the "
        "newest run of p. The static rule alone was 4 to 6 times off the measured cost, so it "
        "is not shown; evaluate to measure it."
    )
    unpriced = calibrate_cost(math.nan, frozenset({"c"}), only_c)
    assert unpriced.text.startswith("No cost estimate: a model has no price.")


def test_compare_says_when_its_figures_rest_on_different_examples() -> None:
    from studio.views.compare import sample_note

    same = [{"n_examples": 40, "objective_split": "validation"}] * 2
    assert sample_note(same, ["1: #0", "2: #4"]) == ""
    mixed = [
        {"n_examples": 300, "objective_split": "validation"},
        {"n_examples": 20, "objective_split": "validation"},
        {"n_examples": 8, "objective_split": "minibatch"},
    ]
    assert sample_note(mixed, ["1: #0", "2: #0", "3: #5"]) == (
        "These figures rest on different examples (1: #0 on 300 validation, 2: #0 on 20 "
        "validation, 3: #5 on 8 minibatch): their differences mix the topologies with the "
        "problems drawn. The flips below compare the examples both were scored on."
    )
