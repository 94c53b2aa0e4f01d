"""Metric records: defaults, validity (F7), scalarization and aggregation."""

import math

import pytest
from pydantic import ValidationError

from core.evaluation import (
    GoldExample,
    MetricBundle,
    MetricWeights,
    aggregate_score,
    bundle_invalid_reason,
    is_valid,
    scalarize,
)

NAN = float("nan")
INF = float("inf")


def test_contract_defaults() -> None:
    b = MetricBundle(accuracy=0.5)
    assert (b.cost_usd, b.latency_ms, b.confidence, b.robustness) == (0, 0, None, None)
    assert (b.raw, b.n_trials, b.stdev) == ({}, 1, None)
    assert (b.status, b.error, b.input_tokens, b.output_tokens) == ("ok", None, 0, 0)
    w = MetricWeights()
    assert (w.accuracy, w.cost_usd, w.latency_ms, w.confidence, w.robustness) == (
        1.0,
        -10.0,
        -0.00002,
        0.1,
        0.2,
    )
    g = GoldExample(input="2+2?")
    assert (g.expected, g.rubric, g.weight, g.id) == (None, None, 1.0, None)


def test_records_are_frozen_and_strict() -> None:
    b = MetricBundle(accuracy=1.0)
    with pytest.raises(ValidationError):
        b.accuracy = 0.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        MetricBundle(accuracy=1.0, bogus=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        GoldExample(input="x", weight=-1.0)
    with pytest.raises(ValidationError):
        GoldExample(input="x", weight=NAN)
    with pytest.raises(ValidationError):
        MetricBundle(accuracy=1.0, n_trials=0)
    with pytest.raises(ValidationError):
        MetricWeights(cost_usd=INF)


def test_raw_is_deep_copied() -> None:
    raw = {"scores": [1, 0]}
    b = MetricBundle(accuracy=0.5, raw=raw)
    raw["scores"].append(1)
    raw["new"] = []
    assert b.raw == {"scores": [1, 0]}


def test_total_tokens_and_failed() -> None:
    b = MetricBundle(accuracy=0.0, input_tokens=10, output_tokens=5, status="error", error="boom")
    assert b.total_tokens == 15
    assert b.failed
    assert MetricBundle(accuracy=0.0, status="degenerate").failed
    assert not MetricBundle(accuracy=0.0).failed


def test_non_finite_bundles_round_trip_json() -> None:
    b = MetricBundle(accuracy=NAN, cost_usd=INF, latency_ms=-INF)
    back = MetricBundle.model_validate_json(b.model_dump_json())
    assert math.isnan(back.accuracy)
    assert (back.cost_usd, back.latency_ms) == (INF, -INF)


@pytest.mark.parametrize(
    ("bundle", "reason"),
    [
        (MetricBundle(accuracy=1.0), None),
        (MetricBundle(accuracy=0.0, status="error", error="boom"), None),
        (MetricBundle(accuracy=0.0, status="degenerate"), None),
        (MetricBundle(accuracy=0.0, confidence=1.0, robustness=5.0, stdev=0.1), None),
        (MetricBundle(accuracy=NAN), "non_finite_metric: accuracy is nan"),
        (MetricBundle(accuracy=0.5, cost_usd=INF), "non_finite_metric: cost_usd is inf"),
        (MetricBundle(accuracy=0.5, latency_ms=-INF), "non_finite_metric: latency_ms is -inf"),
        (MetricBundle(accuracy=0.5, confidence=NAN), "non_finite_metric: confidence is nan"),
        (MetricBundle(accuracy=0.5, robustness=INF), "non_finite_metric: robustness is inf"),
        (MetricBundle(accuracy=0.5, stdev=NAN), "non_finite_metric: stdev is nan"),
        (MetricBundle(accuracy=1.5), "out_of_range_metric: accuracy 1.5 outside [0, 1]"),
        (MetricBundle(accuracy=-0.1), "out_of_range_metric: accuracy -0.1 outside [0, 1]"),
        (
            MetricBundle(accuracy=0.5, confidence=2.0),
            "out_of_range_metric: confidence 2.0 outside [0, 1]",
        ),
        (
            MetricBundle(accuracy=0.5, cost_usd=-0.01),
            "out_of_range_metric: cost_usd -0.01 outside >= 0",
        ),
        (
            MetricBundle(accuracy=0.5, latency_ms=-1.0),
            "out_of_range_metric: latency_ms -1.0 outside >= 0",
        ),
        (
            MetricBundle(accuracy=0.0, status="invalid", error="score function raised"),
            "invalid_example: score function raised",
        ),
        (
            MetricBundle(accuracy=0.0, status="invalid"),
            "invalid_example: marked invalid by the evaluator",
        ),
    ],
)
def test_invalid_reason_table(bundle: MetricBundle, reason: str | None) -> None:
    assert bundle_invalid_reason(bundle) == reason
    assert is_valid(bundle) is (reason is None)


@pytest.mark.parametrize(
    ("bundle", "expected"),
    [
        (MetricBundle(accuracy=1.0), 1.0),
        (MetricBundle(accuracy=0.5, cost_usd=0.01), 0.5 - 0.1),
        (MetricBundle(accuracy=0.5, latency_ms=1000.0), 0.5 - 0.02),
        (MetricBundle(accuracy=0.5, confidence=1.0), 0.6),
        (MetricBundle(accuracy=0.5, robustness=0.5), 0.6),
        (
            MetricBundle(accuracy=1.0, cost_usd=0.01, latency_ms=500, confidence=0.5, robustness=1),
            1.0 - 0.1 - 0.01 + 0.05 + 0.2,
        ),
    ],
)
def test_scalarize_default_weights(bundle: MetricBundle, expected: float) -> None:
    assert scalarize(bundle) == pytest.approx(expected, abs=1e-12)
    assert scalarize(bundle, MetricWeights()) == scalarize(bundle)


def test_scalarize_skips_absent_optional_dimensions() -> None:
    w = MetricWeights(accuracy=0.0, cost_usd=0.0, latency_ms=0.0, confidence=100.0, robustness=7)
    assert scalarize(MetricBundle(accuracy=1.0), w) == 0.0
    assert scalarize(MetricBundle(accuracy=1.0, confidence=0.5), w) == 50.0
    assert scalarize(MetricBundle(accuracy=1.0, robustness=1.0), w) == 7.0


def test_scalarize_propagates_non_finite() -> None:
    assert math.isnan(scalarize(MetricBundle(accuracy=NAN)))
    assert scalarize(MetricBundle(accuracy=1.0, cost_usd=INF)) == -INF


def test_aggregate_is_mean_of_scalarized() -> None:
    bundles = [MetricBundle(accuracy=1.0), MetricBundle(accuracy=0.0, cost_usd=0.01)]
    assert aggregate_score(bundles) == pytest.approx((1.0 + -0.1) / 2)
    w = MetricWeights(cost_usd=0.0)
    assert aggregate_score(bundles, w) == 0.5


def test_aggregate_weighted_by_example() -> None:
    bundles = [MetricBundle(accuracy=1.0), MetricBundle(accuracy=0.0)]
    assert aggregate_score(bundles, example_weights=[3.0, 1.0]) == 0.75
    assert aggregate_score(bundles, example_weights=[0.0, 1.0]) == 0.0
    assert math.isnan(aggregate_score(bundles, example_weights=[0.0, 0.0]))
    with pytest.raises(ValueError, match="2 bundles"):
        aggregate_score(bundles, example_weights=[1.0])
    with pytest.raises(ValueError, match="finite"):
        aggregate_score(bundles, example_weights=[1.0, -1.0])


def test_aggregate_of_nothing_or_non_finite_is_not_finite() -> None:
    assert math.isnan(aggregate_score([]))
    assert math.isnan(aggregate_score([MetricBundle(accuracy=NAN), MetricBundle(accuracy=1.0)]))
    # inf and -inf together: NaN, never an exception
    both = [
        MetricBundle(accuracy=1.0, cost_usd=INF),
        MetricBundle(accuracy=1.0, cost_usd=-INF),
    ]
    assert math.isnan(aggregate_score(both))


def test_evaluation_package_exports_the_metric_records() -> None:
    import core.evaluation
    import core.evaluation.metrics

    for name in core.evaluation.metrics.__all__:
        assert name in core.evaluation.__all__, name
        assert getattr(core.evaluation, name) is getattr(core.evaluation.metrics, name)


def test_copy_bundle_shares_no_list_or_dict_and_keeps_the_fields_set() -> None:
    from core.evaluation.metrics import copy_bundle

    bundle = MetricBundle(accuracy=0.5, raw={"trial_accuracies": [1.0, 0.0], "nested": {"a": [1]}})
    twin = copy_bundle(bundle)
    assert twin == bundle and twin is not bundle
    assert twin.model_fields_set == bundle.model_fields_set == {"accuracy", "raw"}
    bundle.raw["trial_accuracies"].append(0.5)
    bundle.raw["nested"]["a"].append(2)
    bundle.raw["new"] = 1
    assert twin.raw == {"trial_accuracies": [1.0, 0.0], "nested": {"a": [1]}}
