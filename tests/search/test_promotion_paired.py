"""Promotion from the fixed minibatch with the paired test (`FixedMinibatch.non_dominated`)."""

from __future__ import annotations

from core.evaluation._records import CandidateEvaluation, ExampleResult
from core.evaluation.metrics import MetricBundle
from core.search._selection import FixedMinibatch


def _ev(accuracies: list[float], cost: float) -> CandidateEvaluation:
    results = [
        ExampleResult(
            spec_hash="h",
            example_id=f"q{i:02d}",
            trial=0,
            split="validation",
            bundle=MetricBundle(accuracy=a, cost_usd=cost, latency_ms=10.0),
        )
        for i, a in enumerate(accuracies)
    ]
    return CandidateEvaluation(spec_hash="h", split="validation", status="ok", results=results)


def _pair() -> FixedMinibatch:
    like = FixedMinibatch([], margin=None, floor=1, seed=0)
    # 0 is cheaper and right on 12 of 20; 1 dearer and right on 10 of them (two fewer)
    assert like.remember(0, _ev([1.0] * 12 + [0.0] * 8, 0.1)) is None
    assert like.remember(1, _ev([1.0] * 10 + [0.0] * 10, 0.2)) is None
    return like


def test_plain_non_domination_blocks_any_lower_accuracy() -> None:
    like = _pair()
    assert like.non_dominated(0) is True
    assert like.non_dominated(1) is False


def test_the_paired_test_promotes_a_candidate_within_k_standard_errors() -> None:
    like = _pair()
    # d = 0 - 1 is +1 on 2 of 20 examples: mean 0.1, stdev sqrt(0.09 * 20 / 19), se 0.0688;
    # the lead 0.1 is 1.45 standard errors
    assert like.non_dominated(1, k_se=1.0) is False  # 0.1 > 0.0688
    assert like.non_dominated(1, k_se=1.5) is True  # 0.1 < 0.1032
    assert like.non_dominated(1, k_se=2.0) is True
    assert like.non_dominated(0, k_se=2.0) is True  # the cheaper one is never blocked by 1
