"""Evaluation: gold examples, metric records and scalarization, pricing, the evaluation cache and
the topology evaluator."""

from core.evaluation.cache import EvaluationCache, InMemoryEvaluationCache
from core.evaluation.checks import CheckResult
from core.evaluation.evaluator import (
    CandidateEvaluation,
    CostEstimator,
    EvaluatorConfig,
    ExampleResult,
    LatencySource,
    TopologyEvaluator,
)
from core.evaluation.metrics import (
    BundleStatus,
    GoldExample,
    MetricBundle,
    MetricWeights,
    ScoreFn,
    aggregate_score,
    bundle_invalid_reason,
    copy_bundle,
    is_valid,
    scalarize,
)
from core.evaluation.pricing import CostQuote, ModelPrice, Pricer

__all__ = [
    "BundleStatus",
    "GoldExample",
    "MetricBundle",
    "MetricWeights",
    "ScoreFn",
    "aggregate_score",
    "bundle_invalid_reason",
    "copy_bundle",
    "is_valid",
    "scalarize",
    # pricing, cache, checks, evaluator
    "CandidateEvaluation",
    "CheckResult",
    "CostEstimator",
    "CostQuote",
    "EvaluationCache",
    "EvaluatorConfig",
    "ExampleResult",
    "InMemoryEvaluationCache",
    "LatencySource",
    "ModelPrice",
    "Pricer",
    "TopologyEvaluator",
]
