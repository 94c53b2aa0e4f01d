"""Evaluation: gold examples, metric records and scalarization (the evaluator extends this)."""

from core.evaluation.metrics import (
    BundleStatus,
    GoldExample,
    MetricBundle,
    MetricWeights,
    ScoreFn,
    aggregate_score,
    bundle_invalid_reason,
    is_valid,
    scalarize,
)

__all__ = [
    "BundleStatus",
    "GoldExample",
    "MetricBundle",
    "MetricWeights",
    "ScoreFn",
    "aggregate_score",
    "bundle_invalid_reason",
    "is_valid",
    "scalarize",
]
