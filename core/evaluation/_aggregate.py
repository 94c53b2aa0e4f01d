"""Pure aggregation of run results: trials into one bundle per example, runs into a verdict.

No I/O and no runtime objects: plain records in, plain records out, so the rules are tested with
tables of cases.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from core.evaluation._records import CandidateStatus, ExampleResult
from core.evaluation.metrics import (
    BundleStatus,
    MetricBundle,
    MetricWeights,
    aggregate_score,
    bundle_invalid_reason,
)

__all__ = ["Verdict", "combine_trials", "fsum_finite", "judge", "weighted_mean"]


def _mean(values: Sequence[float]) -> float:
    if all(math.isfinite(v) for v in values):
        return math.fsum(values) / len(values)
    return float(sum(values)) / len(values)  # NaN / inf propagate (then the run is invalid)


def _stdev(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1), or None for fewer than two values."""
    if len(values) < 2:
        return None
    if not all(math.isfinite(v) for v in values):
        return math.nan
    return statistics.stdev(values)


def combine_trials(trials: Sequence[ExampleResult]) -> MetricBundle:
    """One example's bundle from its trials (in trial order).

    One trial: that trial's bundle. Several: accuracy, cost (USD) and latency (ms) are means,
    tokens are means rounded to integers, `stdev` is the sample standard deviation (n - 1) of the
    trials' accuracies, `raw["trial_accuracies"]` lists them. Status: `"invalid"` if any trial is
    invalid, else `"ok"` if any trial is ok, else `"error"` if any trial raised, else
    `"degenerate"`; `error` is the first non-ok trial's error.

    Raises:
        ValueError: `trials` is empty.
    """
    if not trials:
        raise ValueError("an example needs at least one trial")
    if len(trials) == 1:
        return trials[0].bundle
    bundles = [t.bundle for t in trials]
    statuses = [b.status for b in bundles]
    status: BundleStatus
    if "invalid" in statuses:
        status = "invalid"
    elif "ok" in statuses:
        status = "ok"
    elif "error" in statuses:
        status = "error"
    else:
        status = "degenerate"
    first_bad = next((b for b in bundles if b.status == status and b.status != "ok"), None)
    if first_bad is None:
        first_bad = next((b for b in bundles if b.status != "ok"), None)
    accuracies = [b.accuracy for b in bundles]
    return MetricBundle(
        accuracy=_mean(accuracies),
        cost_usd=_mean([b.cost_usd for b in bundles]),
        latency_ms=_mean([b.latency_ms for b in bundles]),
        n_trials=len(bundles),
        stdev=_stdev(accuracies),
        status=status,
        error=None if first_bad is None else first_bad.error,
        input_tokens=round(_mean([float(b.input_tokens) for b in bundles])),
        output_tokens=round(_mean([float(b.output_tokens) for b in bundles])),
        raw={"trial_accuracies": accuracies},
    )


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    """Mean of `values` weighted by `weights` (>= 0); NaN when empty or the weights sum to 0."""
    total = math.fsum(weights)
    if not values or total == 0:
        return math.nan
    products = [w * v for w, v in zip(weights, values, strict=True)]
    if all(math.isfinite(p) for p in products):
        return math.fsum(products) / total
    return float(sum(products)) / total


def fsum_finite(values: Sequence[float]) -> float:
    """Sum of the finite values only (for spend budgets: an unpriced NaN must not poison them)."""
    return math.fsum(v for v in values if math.isfinite(v))


@dataclass(frozen=True, slots=True)
class Verdict:
    """A candidate's aggregates over its runs (see `judge`)."""

    status: CandidateStatus
    reason: str | None
    bundles: list[MetricBundle]
    accuracy: float
    cost_usd: float
    latency_ms: float
    stdev: float | None
    aggregate_score: float
    error_rate: float
    blank_rate: float


def _run_invalid_reason(result: ExampleResult) -> str | None:
    if result.bundle.status == "invalid":
        return result.bundle.error or "invalid_example"
    return bundle_invalid_reason(result.bundle)


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def judge(
    results: Sequence[ExampleResult],
    *,
    n_examples: int,
    n_trials: int,
    example_weights: Sequence[float],
    weights: MetricWeights,
    degenerate_threshold: float,
) -> Verdict:
    """Aggregate a candidate's runs into bundles, means and a status.

    Args:
        results: every run, example-major then trial order (`n_examples * n_trials` of them).
        n_examples: number of examples.
        n_trials: runs per example.
        example_weights: `GoldExample.weight` per example.
        weights: the metric weights for the aggregate score.
        degenerate_threshold: the share of blank or failed runs at or above which the candidate
            is degenerate (F5).

    Returns:
        The verdict. Status rules, first match wins: `"invalid"` when any run is invalid (a
        NaN or out-of-range score, a non-finite or unpriced cost; F7) or the aggregate score is
        not finite; `"degenerate"` when some run is blank or failed and (blank + error runs) / runs
        >= `degenerate_threshold` (so 0.0 means "any failure", never "always");
        else `"ok"`. Means are weighted by `example_weights`; `stdev` is the sample standard
        deviation over trials of each trial's weighted mean accuracy (None for one trial).

    Raises:
        ValueError: `results` does not hold `n_examples * n_trials` runs.
    """
    if len(results) != n_examples * n_trials or n_examples < 1:
        raise ValueError(f"expected {n_examples} x {n_trials} results, got {len(results)}")
    per_example = [results[i * n_trials : (i + 1) * n_trials] for i in range(n_examples)]
    bundles = [combine_trials(trials) for trials in per_example]
    accuracy = weighted_mean([b.accuracy for b in bundles], example_weights)
    cost = weighted_mean([b.cost_usd for b in bundles], example_weights)
    latency = weighted_mean([b.latency_ms for b in bundles], example_weights)
    stdev: float | None = None
    if n_trials > 1:
        per_trial = [
            weighted_mean([trials[t].accuracy for trials in per_example], example_weights)
            for t in range(n_trials)
        ]
        stdev = _stdev(per_trial)
    score = aggregate_score(bundles, weights, example_weights)

    n_runs = len(results)
    n_error = sum(1 for r in results if r.status == "error")
    n_blank = sum(1 for r in results if r.blank)
    error_rate = n_error / n_runs
    blank_rate = n_blank / n_runs

    status: CandidateStatus = "ok"
    reason: str | None = None
    invalid = [(r, why) for r in results if (why := _run_invalid_reason(r)) is not None]
    if invalid:
        first, why = invalid[0]
        status = "invalid"
        reason = (
            f"{why} (example {first.example_id!r}, trial {first.trial}; "
            f"{len(invalid)} of {n_runs} runs invalid)"
        )
    elif not math.isfinite(score):
        status = "invalid"
        reason = f"non_finite_aggregate: aggregate score is {score!r}"
    else:
        failed = sum(1 for r in results if r.blank or r.status == "error")
        share = failed / n_runs
        if failed and share >= degenerate_threshold:
            status = "degenerate"
            reason = (
                f"degenerate: {_pct(share)} blank or failed runs ({n_blank} blank, "
                f"{n_error} error of {n_runs}; threshold {_pct(degenerate_threshold)})"
            )
            first_error = next((r.error for r in results if r.status == "error"), None)
            if first_error:
                reason += f"; first error: {first_error}"
    return Verdict(
        status=status,
        reason=reason,
        bundles=bundles,
        accuracy=accuracy,
        cost_usd=cost,
        latency_ms=latency,
        stdev=stdev,
        aggregate_score=score,
        error_rate=error_rate,
        blank_rate=blank_rate,
    )
