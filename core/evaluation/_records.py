"""Frozen, serialisable records of an evaluation: one example's result, one candidate's verdict.

These are plain records (FrozenTrial-style), not live handles: they hold numbers, strings and the
trace as JSON-like dicts, so the evaluation cache can be refilled from a run journal and a store
can keep them. Non-finite metrics (an F7 NaN score, an infinite cost) are kept as they are, and
`model_dump_json` writes them as the JSON constants `NaN` / `Infinity`, which
`model_validate_json` reads back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from core.evaluation.metrics import BundleStatus, MetricBundle

__all__ = ["CandidateEvaluation", "CandidateStatus", "ExampleResult"]

_CONFIG = ConfigDict(
    frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="constants"
)

CandidateStatus: TypeAlias = Literal["ok", "degenerate", "invalid", "rejected"]
"""A candidate's verdict.

- `"ok"`: evaluated; its metrics are trustworthy (some examples may still have failed).
- `"degenerate"`: evaluated, but the share of blank or failed runs reached the evaluator's
  `degenerate_threshold` (F5): a broken run, not a weak candidate.
- `"invalid"`: evaluated, but some measurement is NaN or infinite, or a model is unpriced (F7).
- `"rejected"`: refused before anything ran (invalid spec, a constraint violated, unknown
  names, a hydration error; F4): no results, no cost.
"""


def _dump_bundle(bundle: MetricBundle) -> dict[str, Any]:
    # dumped as a plain dict so the enclosing record's `ser_json_inf_nan="constants"` applies to
    # its floats (a nested model would serialise NaN as null, which does not read back)
    return bundle.model_dump()


class ExampleResult(BaseModel):
    """One candidate run on one example, one trial: metrics, status, error, output and trace.

    This is the value the evaluation cache stores under `(spec_hash, example_id, trial)`.
    """

    model_config = _CONFIG

    spec_hash: str
    """Canonical hash of the candidate's spec (`core.ir.spec_hash`)."""
    example_id: str
    """The gold example's id (its `id`, else a content hash, see `example_key`)."""
    trial: int = Field(default=0, ge=0)
    """Repeat number, 0-based."""
    split: str = "validation"
    """The split the example was drawn from, e.g. `"validation"` or `"test"`."""
    bundle: MetricBundle
    """Accuracy, cost (USD), latency (ms), tokens, status and error of this run."""
    requests: int = Field(default=0, ge=0)
    """Model requests made by this run, retries included."""
    blank: bool = False
    """True when the output was blank (None, empty or whitespace text, an empty collection, or
    the problem's `is_blank` hook said so)."""
    output_summary: str = ""
    """A short text of the output (`core.runtime.tracing.summarize`), "" on error."""
    trace: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    """The run's spans as dicts (`Trace.to_list()`), in start order."""
    n_agents: int = Field(default=0, ge=0)
    """Structural: the candidate's agent count (`core.ir.spec_metrics`)."""
    depth: int = Field(default=0, ge=0)
    """Structural: the candidate's nesting depth."""
    cached: bool = False
    """True when this result came from the evaluation cache (no model calls were made)."""

    @field_serializer("bundle")
    def _ser_bundle(self, bundle: MetricBundle) -> dict[str, Any]:
        return _dump_bundle(bundle)

    @property
    def status(self) -> BundleStatus:
        """The run's status: `"ok"`, `"error"`, `"degenerate"` (blank) or `"invalid"`."""
        return self.bundle.status

    @property
    def error(self) -> str | None:
        """The error text or invalidity reason, when the status is not ok."""
        return self.bundle.error

    @property
    def accuracy(self) -> float:
        """The score in [0, 1] (NaN allowed when invalid)."""
        return self.bundle.accuracy

    @property
    def cost_usd(self) -> float:
        """Priced model usage of this run, USD."""
        return self.bundle.cost_usd

    @property
    def latency_ms(self) -> float:
        """Latency of this run, ms."""
        return self.bundle.latency_ms

    def event_fields(self) -> dict[str, Any]:
        """This result as the fields of a `core.search.events.ExampleEvaluated` event.

        The caller adds `run_id`, `seq`, `ts` and `candidate_idx`. `blank`, `n_agents` and
        `depth` are not event fields (a blank run has status `degenerate`).
        """
        b = self.bundle
        return {
            "spec_hash": self.spec_hash,
            "split": self.split,
            "example_id": self.example_id,
            "trial": self.trial,
            "accuracy": b.accuracy,
            "cost_usd": b.cost_usd,
            "latency_ms": b.latency_ms,
            "input_tokens": b.input_tokens,
            "output_tokens": b.output_tokens,
            "requests": self.requests,
            "status": b.status,
            "error": b.error,
            "output_summary": self.output_summary,
            "cached": self.cached,
            "trace": [dict(span) for span in self.trace],
        }

    @classmethod
    def from_event_fields(
        cls, fields: Mapping[str, Any], *, n_agents: int = 0, depth: int = 0
    ) -> ExampleResult:
        """Rebuild a result from a recorded `ExampleEvaluated` event's fields (e.g. its
        `model_dump()`), to prefill an evaluation cache when resuming a run.

        Other keys (`run_id`, `seq`, `ts`, `type`, `candidate_idx`) are ignored; `blank` is
        taken as `status == "degenerate"`; `cached` is reset to False.
        """
        status = fields.get("status", "ok")
        bundle = MetricBundle(
            accuracy=fields["accuracy"],
            cost_usd=fields.get("cost_usd", 0.0),
            latency_ms=fields.get("latency_ms", 0.0),
            status=status,
            error=fields.get("error"),
            input_tokens=fields.get("input_tokens", 0),
            output_tokens=fields.get("output_tokens", 0),
        )
        return cls(
            spec_hash=fields["spec_hash"],
            example_id=fields["example_id"],
            trial=fields.get("trial", 0),
            split=fields.get("split", "validation"),
            bundle=bundle,
            requests=fields.get("requests", 0),
            blank=status == "degenerate",
            output_summary=fields.get("output_summary", ""),
            trace=list(fields.get("trace", [])),
            n_agents=n_agents,
            depth=depth,
        )


class CandidateEvaluation(BaseModel):
    """A candidate's evaluation on a set of examples: per-example results and aggregates.

    A rejected candidate (`status="rejected"`) has no results and no bundles, zero cost, NaN
    means and NaN `aggregate_score`, and `valid=False`: it can never be archived as a zero-cost
    valid entry (F4).
    """

    model_config = _CONFIG

    spec_hash: str
    """Canonical hash of the spec; "" when the proposal did not parse as a spec."""
    split: str
    """`"validation"`, `"minibatch"`, `"test"`, ... as passed to `evaluate`."""
    status: CandidateStatus
    """`"ok"`, `"degenerate"`, `"invalid"` or `"rejected"`; see `CandidateStatus`."""
    reason: str | None = None
    """Why the status is not ok, starting with a code, e.g. `"max_depth_exceeded: depth 5 >
    4"`, `"unknown_names: ..."`, `"degenerate: 100% blank or failed runs (3 blank, 0 error of
    3)"`, `"non_finite_score: nan (example 'q1'; 1 of 3 runs invalid)"`."""
    results: list[ExampleResult] = Field(default_factory=list[ExampleResult])
    """Every (example, trial) result, examples in input order, trials in order within each."""
    bundles: list[MetricBundle] = Field(default_factory=list[MetricBundle])
    """One bundle per example: the run itself, or with `n_trials` > 1 the mean over trials with
    the accuracy's stdev."""
    n_examples: int = 0
    """Number of examples evaluated."""
    n_trials: int = 1
    """Runs per example."""
    accuracy: float = math.nan
    """Mean accuracy over the examples (weighted by `GoldExample.weight`); NaN when none."""
    cost_usd: float = math.nan
    """Mean cost per example, USD; NaN when none."""
    latency_ms: float = math.nan
    """Mean latency per example, ms; NaN when none."""
    stdev: float | None = None
    """Sample standard deviation, over trials, of each trial's mean accuracy; None when
    `n_trials` is 1."""
    n_agents: int | None = None
    """Structural agent count; None when the spec did not parse."""
    depth: int | None = None
    """Structural nesting depth; None when the spec did not parse."""
    aggregate_score: float = math.nan
    """Mean of the bundles scalarized with the evaluator's `MetricWeights` (weighted by
    `GoldExample.weight`); NaN when rejected."""
    error_rate: float = 0.0
    """Share of runs whose status was `error` (the topology raised or timed out)."""
    blank_rate: float = 0.0
    """Share of runs whose output was blank."""
    n_model_requests: int = 0
    """Model requests made by this call (cache hits excluded)."""
    fresh_cost_usd: float = 0.0
    """USD spent by this call (cache hits excluded); for budgets."""
    n_cached: int = 0
    """Runs served from the evaluation cache."""
    valid: bool = False
    """True only for `status="ok"`: never on the front, never best otherwise."""
    invalid_reason: str | None = None
    """Same as `reason` when not valid, else None."""
    unknown_names: list[tuple[str, str, str]] = Field(default_factory=list[tuple[str, str, str]])
    """For an `unknown_names` rejection: `(json_path, kind, name)` per unknown name."""
    known_names: dict[str, list[str]] = Field(default_factory=dict[str, list[str]])
    """For an `unknown_names` rejection: the registered names per kind (for a debug retry)."""

    @field_serializer("bundles")
    def _ser_bundles(self, bundles: list[MetricBundle]) -> list[dict[str, Any]]:
        return [_dump_bundle(b) for b in bundles]

    @property
    def rejected(self) -> bool:
        """True when refused before running."""
        return self.status == "rejected"
