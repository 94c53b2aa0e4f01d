"""Aggregation rules of the evaluator: trials into bundles, runs into a verdict (pure)."""

import math

import pytest

from core.evaluation._aggregate import combine_trials, fsum_finite, judge, weighted_mean
from core.evaluation._records import ExampleResult
from core.evaluation.metrics import BundleStatus, MetricBundle, MetricWeights


def run(
    example: str,
    trial: int = 0,
    accuracy: float = 1.0,
    *,
    status: BundleStatus = "ok",
    error: str | None = None,
    blank: bool = False,
    cost: float = 0.0,
    latency: float = 0.0,
    tokens: int = 0,
) -> ExampleResult:
    return ExampleResult(
        spec_hash="h",
        example_id=example,
        trial=trial,
        bundle=MetricBundle(
            accuracy=accuracy,
            cost_usd=cost,
            latency_ms=latency,
            status=status,
            error=error,
            input_tokens=tokens,
        ),
        blank=blank,
    )


W = MetricWeights()


def verdict(
    results: list[ExampleResult], n_examples: int, n_trials: int = 1, threshold: float = 0.5
):  # noqa: ANN201
    return judge(
        results,
        n_examples=n_examples,
        n_trials=n_trials,
        example_weights=[1.0] * n_examples,
        weights=W,
        degenerate_threshold=threshold,
    )


def test_single_trial_bundle_is_the_run_itself() -> None:
    r = run("a", accuracy=0.5, cost=0.25)
    assert combine_trials([r]) is r.bundle


def test_trials_are_averaged_with_sample_stdev() -> None:
    b = combine_trials(
        [
            run("a", 0, 1.0, cost=0.5, latency=10.0, tokens=3),
            run("a", 1, 0.0, cost=1.0, latency=20.0, tokens=4),
        ]
    )
    assert b.accuracy == 0.5
    assert b.cost_usd == 0.75
    assert b.latency_ms == 15.0
    assert b.n_trials == 2
    assert b.stdev == 0.7071067811865476  # statistics.stdev([1.0, 0.0])
    assert b.input_tokens == 4  # round(3.5), banker's rounding
    assert b.raw == {"trial_accuracies": [1.0, 0.0]}
    assert b.status == "ok"


@pytest.mark.parametrize(
    ("statuses", "expected", "error"),
    [
        (["ok", "error"], "ok", "e1"),
        (["degenerate", "error"], "error", "e1"),
        (["degenerate", "degenerate"], "degenerate", "e0"),
        (["ok", "invalid"], "invalid", "e1"),
        (["ok", "ok"], "ok", None),
    ],
)
def test_trial_status_precedence(
    statuses: list[BundleStatus], expected: str, error: str | None
) -> None:
    trials = [
        run("a", i, 0.0, status=s, error=None if s == "ok" else f"e{i}")
        for i, s in enumerate(statuses)
    ]
    b = combine_trials(trials)
    assert b.status == expected
    assert b.error == error


def test_candidate_stdev_is_over_per_trial_means() -> None:
    results = [run("a", 0, 1.0), run("a", 1, 0.0), run("b", 0, 1.0), run("b", 1, 1.0)]
    v = verdict(results, n_examples=2, n_trials=2)
    assert [b.accuracy for b in v.bundles] == [0.5, 1.0]
    assert v.accuracy == 0.75
    assert v.stdev == 0.3535533905932738  # statistics.stdev([1.0, 0.5])
    assert v.status == "ok"


def test_means_and_aggregate_exact() -> None:
    results = [run("a", accuracy=1.0, cost=0.01, latency=1000.0), run("b", accuracy=0.0, cost=0.03)]
    v = verdict(results, n_examples=2)
    assert v.accuracy == 0.5
    assert v.cost_usd == 0.02
    assert v.latency_ms == 500.0
    # mean of scalarized bundles: (0.88 + -0.3) / 2, exactly as float arithmetic gives it
    assert v.aggregate_score == 0.29000000000000004
    assert v.stdev is None


def test_errors_are_counted_apart_from_wrong_answers() -> None:
    results = [
        run("a", accuracy=0.0),  # a wrong answer
        run("b", status="error", accuracy=0.0, error="ValueError: boom"),
        run("c", accuracy=1.0),
        run("d", accuracy=1.0),
    ]
    v = verdict(results, n_examples=4)
    assert v.error_rate == 0.25
    assert v.blank_rate == 0.0
    assert v.status == "ok"
    assert v.accuracy == 0.5


def test_mostly_blank_is_degenerate_not_accuracy_zero_valid() -> None:
    results = [
        run("a", accuracy=0.0, status="degenerate", error="blank_output", blank=True),
        run("b", accuracy=0.0, status="degenerate", error="blank_output", blank=True),
        run("c", accuracy=1.0),
    ]
    v = verdict(results, n_examples=3)
    assert v.status == "degenerate"
    assert v.blank_rate == 2 / 3
    assert v.reason == (
        "degenerate: 67% blank or failed runs (2 blank, 0 error of 3; threshold 50%)"
    )


def test_blank_plus_errors_reach_the_threshold() -> None:
    results = [
        run("a", status="error", accuracy=0.0, error="RuntimeError: down"),
        run("b", accuracy=0.0, status="degenerate", blank=True),
        run("c"),
        run("d"),
    ]
    v = verdict(results, n_examples=4)
    assert v.status == "degenerate"
    assert v.reason == (
        "degenerate: 50% blank or failed runs (1 blank, 1 error of 4; threshold 50%); "
        "first error: RuntimeError: down"
    )
    assert verdict(results, n_examples=4, threshold=0.75).status == "ok"


def test_invalid_wins_and_names_the_first_invalid_run() -> None:
    results = [
        run("a", accuracy=0.0, status="degenerate", blank=True),
        run("b", accuracy=math.nan, status="invalid", error="non_finite_score: nan"),
        run("c", cost=math.inf, status="invalid", error="non_finite_cost: inf"),
    ]
    v = verdict(results, n_examples=3)
    assert v.status == "invalid"
    assert v.reason == "non_finite_score: nan (example 'b', trial 0; 2 of 3 runs invalid)"


def test_a_nan_metric_left_in_an_ok_bundle_is_still_invalid() -> None:
    v = verdict([run("a", accuracy=math.nan)], n_examples=1)
    assert v.status == "invalid"
    assert (
        v.reason == "non_finite_metric: accuracy is nan (example 'a', trial 0; 1 of 1 runs invalid)"
    )


def test_judge_checks_the_shape() -> None:
    with pytest.raises(ValueError, match="expected 2 x 1 results, got 1"):
        verdict([run("a")], n_examples=2)


def test_weighted_mean_and_finite_sum() -> None:
    assert weighted_mean([1.0, 0.0], [3.0, 1.0]) == 0.75
    assert math.isnan(weighted_mean([1.0], [0.0]))
    assert fsum_finite([0.5, math.nan, 0.25]) == 0.75


def test_threshold_zero_means_any_failure_not_always() -> None:
    assert verdict([run("a"), run("b")], n_examples=2, threshold=0.0).status == "ok"
    failing = [run("a"), run("b", status="error", accuracy=0.0, error="E: x")]
    assert verdict(failing, n_examples=2, threshold=0.0).status == "degenerate"
