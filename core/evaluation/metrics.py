"""Metric records: gold examples, per-example metric bundles, weights and scalarization.

A candidate topology is evaluated on gold examples (`GoldExample`); each example (or each trial
of it) yields one `MetricBundle`. Bundles are scalarized with `MetricWeights` and a candidate's
aggregate score is the mean of its scalarized bundles (semantics section 8).

Validity (field case F7): a bundle whose metrics are NaN or infinite, or out of their range
(accuracy outside [0, 1], a negative cost or latency), or whose evaluation was marked
`status="invalid"`, is invalid. `bundle_invalid_reason` says why, with a short code first
(`"non_finite_metric: accuracy is nan"`); an invalid bundle makes the whole evaluation invalid,
which keeps it off the Pareto front and out of every "best" query. The records themselves accept
such values (an evaluation never raises per example): validity is a query, not a construction
error.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Literal, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypeVar

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
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

BundleStatus: TypeAlias = Literal["ok", "error", "degenerate", "invalid"]
"""How one example's evaluation went.

- `"ok"`: the topology produced an output and it was scored.
- `"error"`: the topology raised; `accuracy` is 0 and `error` holds the message. A failure,
  counted apart from wrong answers, but not an invalid measurement.
- `"degenerate"`: the output was blank (empty or whitespace text, `None`); scored as usual
  (normally 0). Also a failure, not an invalid measurement.
- `"invalid"`: the measurement cannot be trusted (the score function returned NaN or raised, a
  cost came out infinite, ...): the whole evaluation is invalid.
"""


InputT = TypeVar("InputT", default=Any)
"""The type of a gold example's input (default `Any`)."""
OutputT = TypeVar("OutputT", default=Any)
"""The type of a gold example's expected output (default `Any`)."""


class GoldExample(BaseModel, Generic[InputT, OutputT]):
    """One gold example: an input, optionally the expected output and a rubric.

    Generic in the input and expected types: `GoldExample[str, int](input="2+2", expected=4)`
    validates both (with the usual lax coercions of a non-strict field, e.g. `"4"` -> `4`);
    plain `GoldExample(...)` takes any values. A parametrized example is still a
    `GoldExample` (`isinstance` holds).
    """

    model_config = _CONFIG

    input: InputT
    """What the topology is run on (any value, e.g. a question string or a Pydantic model)."""
    expected: OutputT | None = None
    """The reference answer the score function compares against, if any."""
    rubric: str | None = None
    """Grading instructions for a judge-based score function, if any."""
    weight: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)
    """Relative weight of this example in weighted aggregates (>= 0, finite)."""
    id: str | None = None
    """A stable identifier (cache keys, traces, storage), e.g. `"gsm8k-test-0042"`."""


ScoreFn: TypeAlias = Callable[[Any, GoldExample], float | Awaitable[float]]
"""A score function `(output, example) -> float in [0, 1]`, sync or async.

It compares a topology's output with the example (usually `example.expected`). Returning NaN,
infinity or a value outside [0, 1] marks the measurement invalid (F7); it is never clamped.
"""


_SCALARS: frozenset[type] = frozenset((str, int, float, bool, type(None)))


def _copy_raw(value: Any) -> Any:
    # never share the caller's dict (nor its nested lists/dicts); fall back to a shallow copy for
    # values that cannot be deep-copied (locks, clients, ...). Scalars and lists of scalars (what
    # the evaluator puts there, e.g. `trial_accuracies`) are copied without `copy.deepcopy`,
    # which was 0.33 s of a warm default search's 33,000 per-example bundles (cProfile).
    if not isinstance(value, dict):
        return value
    original = cast(dict[Any, Any], value)
    out: dict[Any, Any] = {}
    for key, item in cast(dict[Any, object], original).items():
        kind = type(item)
        if kind in _SCALARS:
            out[key] = item
        elif kind is list and all(type(x) in _SCALARS for x in cast(list[object], item)):
            out[key] = list(cast(list[object], item))
        else:
            try:
                return copy.deepcopy(original)
            except Exception:
                return dict(original)
    return out


def copy_bundle(bundle: MetricBundle) -> MetricBundle:
    """A copy of `bundle` that shares no list or dict with it (its `raw` copied as on
    validation; every other field is immutable), without `model_copy(deep=True)`'s walk: the
    same fields, the same `model_fields_set`."""
    twin = bundle.__copy__()
    vars(twin)["raw"] = _copy_raw(bundle.raw)  # (frozen: set in its __dict__)
    return twin


class MetricBundle(BaseModel):
    """The metrics of one evaluation of a candidate on one example (or one example's trials).

    The first eight fields are the contract's (semantics section 8); `status`, `error`,
    `input_tokens` and `output_tokens` carry what the evaluator records per example. NaN and
    infinite values are accepted and make the bundle invalid (see `bundle_invalid_reason`);
    `model_dump_json` writes them as the JSON constants `NaN` / `Infinity`, which
    `model_validate_json` reads back.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="constants"
    )

    accuracy: float
    """Score in [0, 1] from the score function (mean over trials when `n_trials` > 1)."""
    cost_usd: float = 0.0
    """Priced model usage of the run, USD, every model call and retry included."""
    latency_ms: float = 0.0
    """Latency of the run, ms (model time where models report it, else wall time)."""
    confidence: float | None = None
    """Optional confidence in [0, 1] (e.g. self-reported); None when not measured."""
    robustness: float | None = None
    """Optional robustness score (e.g. agreement across perturbed inputs); None when not
    measured."""
    raw: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Free-form extras (output summary, per-trial scores, ...). Deep-copied on construction;
    keep it JSON-like so it can be stored."""
    n_trials: int = Field(default=1, ge=1)
    """How many repeated runs the metrics summarize."""
    stdev: float | None = None
    """Standard deviation of the accuracy over the trials, when `n_trials` > 1."""
    status: BundleStatus = "ok"
    """`"ok"`, `"error"` (raised), `"degenerate"` (blank output) or `"invalid"` (untrustworthy
    measurement); see `BundleStatus`."""
    error: str | None = None
    """The error message or the reason, when `status` is not `"ok"`."""
    input_tokens: int = Field(default=0, ge=0)
    """Prompt tokens over every model call of the run."""
    output_tokens: int = Field(default=0, ge=0)
    """Completion tokens over every model call of the run."""

    @field_validator("raw", mode="before")
    @classmethod
    def _copy_raw_field(cls, value: Any) -> Any:
        return _copy_raw(value)

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def failed(self) -> bool:
        """True when the run raised or its output was blank (`status` error or degenerate)."""
        return self.status in ("error", "degenerate")

    def scalarize(self, weights: MetricWeights | None = None) -> float:
        """This bundle's weighted score: the module function `scalarize(self, weights)`."""
        return scalarize(self, weights)

    def to_per_instance_scores(self, weights: MetricWeights | None = None) -> dict[str, float]:
        """The bundle's objective values, one per dimension, unweighted.

        Keys: `accuracy`, `cost_usd` (USD), `latency_ms` (ms), then `confidence` and
        `robustness` only when measured (an absent dimension is left out, not zero), then every
        numeric (non-bool) value of `raw`, e.g. the evaluator's `n_agents` and `depth`.

        Args:
            weights: accepted for the reference library's signature; the values are not
                weighted (use `scalarize` for one weighted number).
        """
        del weights
        scores: dict[str, float] = {
            "accuracy": self.accuracy,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
        }
        if self.confidence is not None:
            scores["confidence"] = self.confidence
        if self.robustness is not None:
            scores["robustness"] = self.robustness
        for key, value in self.raw.items():
            if key in scores or isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                scores[str(key)] = float(value)
        return scores

    @classmethod
    def aggregate(cls, bundles: Sequence[MetricBundle]) -> MetricBundle:
        """Combine repeated runs (trials) of one example into one bundle.

        Means of accuracy, cost and latency; confidence and robustness are the means of the
        bundles that have them (None when none does); token counts are rounded means;
        `n_trials` is the sum of the bundles' `n_trials`; `stdev` is the sample standard
        deviation (n - 1) of the accuracies (None for one bundle); `raw` is the first bundle's.
        The status is the worst one (`invalid` > `error` > `degenerate` > `ok`), with that
        bundle's error. For a candidate's score over examples use `aggregate_score`.

        Raises:
            ValueError: `bundles` is empty.
        """
        if not bundles:
            raise ValueError("MetricBundle.aggregate needs at least one bundle")
        order = {"ok": 0, "degenerate": 1, "error": 2, "invalid": 3}
        worst = max(bundles, key=lambda b: order[b.status])
        accuracies = [b.accuracy for b in bundles]
        confidences = [b.confidence for b in bundles if b.confidence is not None]
        robustness = [b.robustness for b in bundles if b.robustness is not None]
        return cls(
            accuracy=_mean(accuracies),
            cost_usd=_mean([b.cost_usd for b in bundles]),
            latency_ms=_mean([b.latency_ms for b in bundles]),
            confidence=_mean(confidences) if confidences else None,
            robustness=_mean(robustness) if robustness else None,
            raw=bundles[0].raw,
            n_trials=sum(b.n_trials for b in bundles),
            stdev=statistics.stdev(accuracies) if len(accuracies) > 1 else None,
            status=worst.status,
            error=worst.error,
            input_tokens=round(_mean([float(b.input_tokens) for b in bundles])),
            output_tokens=round(_mean([float(b.output_tokens) for b in bundles])),
        )


class MetricWeights(BaseModel):
    """Weights that scalarize a `MetricBundle` into one number (higher is better).

    Defaults are the contract's: one accuracy point is worth 10 cents per example, or 50 s of
    latency (`1.0 / 0.00002 ms`).
    """

    model_config = _CONFIG

    accuracy: float = Field(default=1.0, allow_inf_nan=False)
    """Weight of accuracy (in [0, 1])."""
    cost_usd: float = Field(default=-10.0, allow_inf_nan=False)
    """Weight of cost, per USD (negative: cheaper is better)."""
    latency_ms: float = Field(default=-0.00002, allow_inf_nan=False)
    """Weight of latency, per ms (negative: faster is better)."""
    confidence: float = Field(default=0.1, allow_inf_nan=False)
    """Weight of confidence, applied only when the bundle has one."""
    robustness: float = Field(default=0.2, allow_inf_nan=False)
    """Weight of robustness, applied only when the bundle has one."""


def scalarize(bundle: MetricBundle, weights: MetricWeights | None = None) -> float:
    """Weighted sum of a bundle's metrics; absent optional dimensions are skipped.

    `accuracy`, `cost_usd` and `latency_ms` always count; `confidence` and `robustness` count
    only when not None (an absent dimension neither helps nor hurts).

    Args:
        bundle: the metrics.
        weights: the weights; `MetricWeights()` when None.

    Returns:
        The score. NaN or infinite metrics propagate (the result is then not finite); check
        `is_valid(bundle)` to tell why.
    """
    w = weights if weights is not None else MetricWeights()
    total = w.accuracy * bundle.accuracy + w.cost_usd * bundle.cost_usd
    total += w.latency_ms * bundle.latency_ms
    if bundle.confidence is not None:
        total += w.confidence * bundle.confidence
    if bundle.robustness is not None:
        total += w.robustness * bundle.robustness
    return float(total)


def _mean(values: Sequence[float]) -> float:
    if all(math.isfinite(v) for v in values):
        return math.fsum(values) / len(values)
    return float(sum(values)) / len(values)


def _describe(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def bundle_invalid_reason(bundle: MetricBundle) -> str | None:
    """Why a bundle's measurement is invalid, or None when it is valid.

    The reason starts with a code, then `": "` and details:

    - `invalid_example: <error>` when `status == "invalid"`;
    - `non_finite_metric: <field> is nan|inf|-inf` for accuracy, cost_usd, latency_ms,
      confidence, robustness or stdev (F7);
    - `out_of_range_metric: <field> <value> outside <range>` for accuracy or confidence outside
      [0, 1], or a negative cost_usd, latency_ms or stdev.

    `"error"` and `"degenerate"` bundles are valid measurements (failures, scored 0).
    """
    if bundle.status == "invalid":
        return f"invalid_example: {bundle.error or 'marked invalid by the evaluator'}"
    values: list[tuple[str, float | None]] = [
        ("accuracy", bundle.accuracy),
        ("cost_usd", bundle.cost_usd),
        ("latency_ms", bundle.latency_ms),
        ("confidence", bundle.confidence),
        ("robustness", bundle.robustness),
        ("stdev", bundle.stdev),
    ]
    for name, value in values:
        if value is not None and not math.isfinite(value):
            return f"non_finite_metric: {name} is {_describe(value)}"
    for name, value, low, high in (
        ("accuracy", bundle.accuracy, 0.0, 1.0),
        ("confidence", bundle.confidence, 0.0, 1.0),
        ("cost_usd", bundle.cost_usd, 0.0, math.inf),
        ("latency_ms", bundle.latency_ms, 0.0, math.inf),
        ("stdev", bundle.stdev, 0.0, math.inf),
    ):
        if value is not None and not low <= value <= high:
            where = f"[{low:g}, {high:g}]" if math.isfinite(high) else f">= {low:g}"
            return f"out_of_range_metric: {name} {value!r} outside {where}"
    return None


def is_valid(bundle: MetricBundle) -> bool:
    """True when the bundle's measurement is trustworthy (see `bundle_invalid_reason`)."""
    return bundle_invalid_reason(bundle) is None


def aggregate_score(
    bundles: Sequence[MetricBundle],
    weights: MetricWeights | None = None,
    example_weights: Sequence[float] | None = None,
) -> float:
    """A candidate's aggregate score: the mean of its scalarized bundles (semantics section 8).

    Args:
        bundles: one bundle per example.
        weights: metric weights; `MetricWeights()` when None.
        example_weights: optional per-example weights (e.g. `GoldExample.weight`), same length
            as `bundles`, each >= 0; the mean is then weighted. None: plain mean.

    Returns:
        The (weighted) mean; NaN when there are no bundles or the weights sum to 0 (nothing was
        measured: an invalid score). Non-finite metrics propagate.

    Raises:
        ValueError: `example_weights` has the wrong length or a negative or non-finite weight.
    """
    scores = [scalarize(b, weights) for b in bundles]
    if example_weights is None:
        return _sum(scores) / len(scores) if scores else math.nan
    ws = [float(x) for x in example_weights]
    if len(ws) != len(scores):
        raise ValueError(f"example_weights has {len(ws)} values for {len(scores)} bundles")
    if any(not math.isfinite(x) or x < 0 for x in ws):
        raise ValueError("example_weights must be finite and >= 0")
    total = math.fsum(ws)
    if total == 0:
        return math.nan
    return _sum([w * s for w, s in zip(ws, scores, strict=True)]) / total


def _sum(values: list[float]) -> float:
    # exact when finite; `math.fsum` raises on inf + -inf, where a plain sum gives NaN
    if all(math.isfinite(v) for v in values):
        return math.fsum(values)
    return float(sum(values))
