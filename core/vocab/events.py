"""Typed search events: what a search reports while it runs.

A search emits these to its subscribers (a progress bar, the run journal, the studio). The run
journal writes them one per line as JSON (`event.model_dump_json()`), so the run store can ingest
a search that another process is running, and a crashed run can be resumed from what was
recorded. Parse a line back with `parse_event(line)`.

Every event carries `run_id`, `seq` (0-based, increasing by one per event within a run, so a
reader can tell what it has already ingested) and `ts` (Unix time in seconds, finite). Candidates
are numbered per run by `candidate_idx` (0 = the seed, then in proposal order).

Ranges: every integer field holds what the run store's DuckDB column for it holds
(`core.storage._schema`): a count, an index or a generation is an `INTEGER` (32-bit signed,
`INT32_MIN`..`INT32_MAX`), `seq`, `seed`, token and request counts and `n_evaluations` are
`BIGINT`s (64-bit signed, `INT64_MIN`..`INT64_MAX`). An event outside them, or with a NaN or
infinite `ts`, is refused when it is made or parsed (`pydantic.ValidationError`, located at the
field), so a search never writes a journal line the store would have to skip. Lines that older
versions wrote with such values are skipped by the store's ingest and recorded
(`RunStore.list_ingest_errors`). Other floats may be NaN or infinite: that is how an invalid
result is kept and kept off the front (field case F7).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "ArchiveSnapshot",
    "CandidateEvaluated",
    "CandidateProposed",
    "ExampleEvaluated",
    "LogMessage",
    "RunFinished",
    "RunStarted",
    "SearchEvent",
    "parse_event",
]

INT32_MIN: Final = -(2**31)
"""The smallest value of a DuckDB `INTEGER` column (32-bit signed)."""
INT32_MAX: Final = 2**31 - 1
"""The largest value of a DuckDB `INTEGER` column: 2,147,483,647."""
INT64_MIN: Final = -(2**63)
"""The smallest value of a DuckDB `BIGINT` column (64-bit signed)."""
INT64_MAX: Final = 2**63 - 1
"""The largest value of a DuckDB `BIGINT` column: 9,223,372,036,854,775,807."""

_Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
"""An integer the store keeps in an `INTEGER` column."""
_Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
"""An integer the store keeps in a `BIGINT` column."""

_CONFIG = ConfigDict(
    frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="constants"
)


class _EventBase(BaseModel):
    model_config = _CONFIG

    run_id: str
    """The run this event belongs to."""
    seq: int = Field(ge=0, le=INT64_MAX)
    """0-based position of this event in its run's stream."""
    ts: float = Field(allow_inf_nan=False)
    """When the event happened, Unix time in seconds (finite)."""

    @model_serializer(mode="wrap")
    def _keep_type(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # the discriminator survives every dump option (exclude_defaults, exclude_unset, ...)
        data: dict[str, Any] = handler(self)
        data["type"] = self.__class__.model_fields["type"].default
        return data


class RunStarted(_EventBase):
    """A search run started (or was resumed: `resumed=True`)."""

    type: Literal["run_started"] = "run_started"
    problem: str
    """The problem's name, e.g. `"gsm8k_replay"`."""
    strategy: str
    """The search strategy, e.g. `"evolutionary"`, `"meta_agent"`, `"random"`."""
    seed: _Int64
    """The search's random seed."""
    config: dict[str, Any] = Field(default_factory=dict[str, Any])
    """The full search configuration as JSON (strategy options, budgets, models)."""
    problem_config: dict[str, Any] = Field(default_factory=dict[str, Any])
    """The problem definition's settings as loaded (after overrides)."""
    resumed: bool = False
    """True when this run continues an earlier, interrupted one with the same `run_id`."""


class CandidateProposed(_EventBase):
    """A strategy proposed a candidate topology (the seed is candidate 0)."""

    type: Literal["candidate_proposed"] = "candidate_proposed"
    candidate_idx: int = Field(ge=0, le=INT32_MAX)
    """Per-run candidate number: 0 = seed, then in proposal order."""
    generation: int = Field(ge=-1, le=INT32_MAX)
    """-1 for the seed, else the generation that proposed it (0-based)."""
    spec_hash: str
    """Canonical content hash of the spec (`core.ir.spec_hash`); "" when the proposal was not
    a valid spec."""
    spec_json: str
    """The spec as JSON, or the raw proposal text when it was not a valid spec."""
    parent_idx: _Int32 | None = None
    """The candidate it was derived from, if any."""
    operator: str = ""
    """How it was made: a mutation operator's name, `"meta_agent"`, `"seed"`, ..."""
    thought: str = ""
    """The designer's reasoning (meta agent), else ""."""
    design_cost_usd: float = 0.0
    """Cost of designing it (every designer call, retries and debug rounds included), USD."""
    design_requests: _Int32 = 0
    """Model requests spent designing it."""
    design_input_tokens: _Int64 = 0
    """Input tokens of those requests (the designer's own, not the candidate's)."""
    design_output_tokens: _Int64 = 0
    """Output tokens of those requests."""
    status: Literal["proposed", "rejected", "duplicate"] = "proposed"
    """`rejected`: invalid spec, unknown names or a constraint violated (see `reason`);
    `duplicate`: same canonical hash as an earlier candidate (not evaluated again)."""
    reason: str | None = None
    """Why it was rejected, e.g. `"max_depth_exceeded: depth 5 > 4"` or the hydration error."""
    learned: list[str] = Field(default_factory=list[str])
    """The JSON of each learned condition artefact (`core.combinators.learned.
    LearnedCondition.to_json`) that this candidate's spec names and no earlier candidate of the
    run did: what `search --resume` registers by digest before checking anything
    (`core.search.learned`). Empty for every candidate of a run without a train split."""


class ExampleEvaluated(_EventBase):
    """One candidate evaluated on one example (one trial)."""

    type: Literal["example_evaluated"] = "example_evaluated"
    candidate_idx: int = Field(ge=0, le=INT32_MAX)
    """Which candidate."""
    spec_hash: str
    """Its canonical hash (the evaluation cache key, with example id and trial)."""
    split: str
    """Which split the example belongs to: `"minibatch"` runs draw from `"validation"`, so this
    is the example's own split, e.g. `"validation"` or `"test"`, or `"train"` for a front
    neighbour run on the train split to fit a learned router (`core.search.learned`)."""
    example_id: str
    """The gold example's id."""
    trial: _Int32 = 0
    """Repeat number, 0-based."""
    accuracy: float
    """Score in [0, 1] (NaN allowed: then `status` is `"invalid"`)."""
    cost_usd: float = 0.0
    """Priced model usage of this example, USD."""
    latency_ms: float = 0.0
    """Latency in ms (model time where models report it, else wall time)."""
    input_tokens: _Int64 = 0
    """Prompt tokens over every model call."""
    output_tokens: _Int64 = 0
    """Completion tokens over every model call."""
    requests: _Int64 = 0
    """Model requests over every model call."""
    status: Literal["ok", "error", "degenerate", "invalid"] = "ok"
    """`error`: the topology raised; `degenerate`: blank output; `invalid`: NaN/inf metrics."""
    error: str | None = None
    """The error or reason when status is not ok."""
    output_summary: str = ""
    """A short text of the output."""
    cached: bool = False
    """True when the result came from the evaluation cache (no model calls)."""
    trace: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    """The run's spans (`core.runtime.tracing.Span.to_dict()`), possibly empty."""


class CandidateEvaluated(_EventBase):
    """A candidate's evaluation on a set of examples is complete (aggregated)."""

    type: Literal["candidate_evaluated"] = "candidate_evaluated"
    candidate_idx: int = Field(ge=0, le=INT32_MAX)
    """Which candidate."""
    spec_hash: str
    """Its canonical hash."""
    split: str
    """`"minibatch"`, `"validation"` (full) or `"test"` (held out, once at the end)."""
    n_examples: _Int32
    """Number of examples evaluated."""
    accuracy: float
    """Mean score over the examples."""
    cost_usd: float
    """Mean cost per example, USD."""
    latency_ms: float
    """Mean latency per example, ms."""
    n_agents: _Int32
    """Structural: agent steps + agent classifiers + loop evaluators."""
    depth: _Int32
    """Structural nesting depth."""
    aggregate_score: float
    """Mean scalarized score (`MetricWeights`)."""
    valid: bool = True
    """False when invalid or degenerate: never on the front, never best."""
    invalid_reason: str | None = None
    """Why it is not valid, e.g. `"nan_accuracy"`, `"degenerate: 95% blank outputs"`."""
    error_rate: float = 0.0
    """Share of examples whose status was `error`."""
    blank_rate: float = 0.0
    """Share of examples with blank output."""
    stdev: float | None = None
    """Standard deviation of the accuracy over trials, when `n_trials` > 1."""
    same_as: int | None = Field(default=None, ge=0, le=INT32_MAX)
    """The earlier candidate whose per-example results (status, score, cost and latency of
    every example of the run's fixed minibatch) this one equals: it behaves the same, so it is
    never promoted or re-scored separately; None: a behaviour of its own."""


class ArchiveSnapshot(_EventBase):
    """The archive after a generation: members, front, best and progress figures."""

    type: Literal["archive_snapshot"] = "archive_snapshot"
    generation: _Int32
    """The generation just completed (-1 after the seed)."""
    entries: list[_Int32]
    """Candidate indices in the archive."""
    front: list[_Int32]
    """Candidate indices on the Pareto front."""
    best_idx: _Int32 | None
    """The best candidate by aggregate score, if any is valid."""
    best_score: float | None
    """Its aggregate score."""
    hypervolume: float | None = None
    """Hypervolume of the front over (accuracy, cost_usd), when computed."""
    n_evaluations: _Int64 = 0
    """Example evaluations so far (cache hits excluded)."""
    cost_usd_total: float = 0.0
    """USD spent so far: evaluations plus design."""


class LogMessage(_EventBase):
    """A human-readable message (progress, warnings, diagnoses)."""

    type: Literal["log"] = "log"
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Severity."""
    message: str
    """The text."""


class RunFinished(_EventBase):
    """A run ended: completed, stopped by a budget or by the user, or failed."""

    type: Literal["run_finished"] = "run_finished"
    status: Literal["completed", "stopped", "failed"]
    """How it ended."""
    reason: str = ""
    """Why, e.g. `"max_evaluations reached"`, `"stop file"`, `"SIGINT"`, the error."""
    best_idx: _Int32 | None = None
    """The winner (re-scored on the full validation set), if any."""
    budget_used: dict[str, float] = Field(default_factory=dict[str, float])
    """Budget figures: `{"evaluations": ..., "usd": ..., "wall_s": ...}`, plus one
    `"static_rejected:<code>"` count per static rejection code seen (`core.ir.dataflow`:
    distinct specs refused before any model call)."""


SearchEvent = Annotated[
    RunStarted
    | CandidateProposed
    | ExampleEvaluated
    | CandidateEvaluated
    | ArchiveSnapshot
    | LogMessage
    | RunFinished,
    Field(discriminator="type"),
]
"""Any search event, discriminated on `type`."""

_ADAPTER: TypeAdapter[SearchEvent] = TypeAdapter(SearchEvent)


def parse_event(line: str | bytes) -> SearchEvent:
    """Parse one journal line (JSON) into its event model.

    Raises:
        pydantic.ValidationError: the line is not a valid event: not JSON, an unknown `type`, a
            missing or wrong field, a NaN or infinite `ts`, or an integer out of the range of
            the store's column for it (see the module docstring). Each error's `loc` names the
            event type and the field, e.g. `("example_evaluated", "input_tokens")`.
    """
    return _ADAPTER.validate_json(line)
