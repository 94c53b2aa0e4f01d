"""What a search returns: `OptimizationResult`, its per-candidate `CandidateRecord`s, and
`unpack_topology_output`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.ir.models import TopologySpec
from core.runtime.parallel import ParallelResult

__all__ = ["CandidateRecord", "OptimizationResult", "unpack_topology_output"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class CandidateRecord(BaseModel):
    """One candidate of a run, as the history keeps it (the seed is candidate 0).

    Scores are on `split`: `"validation"` (the full validation split: the seed, promoted
    candidates, and those re-scored for the final report) or `"minibatch"` (the generation's
    minibatch only); None when nothing was evaluated (rejected, duplicate).
    """

    model_config = _CONFIG

    candidate_idx: int = Field(ge=0)
    """Per-run number: 0 = seed, then in proposal order (rejected and duplicates included)."""
    generation: int = Field(ge=-1)
    """-1 for the seed, else the generation that proposed it (0-based)."""
    parent_idx: int | None = None
    """The candidate it was derived from (compared with on the minibatch); None: the seed is
    the reference."""
    operator: str = ""
    """How it was made: `"seed"`, `"meta_agent"`, a mutation operator's name, ..."""
    thought: str = ""
    """The designer's reasoning (meta agent), else ""."""
    spec_hash: str = ""
    """Canonical hash of the spec; "" when the proposal was not a valid spec."""
    spec_json: str = ""
    """The spec as JSON, or the raw proposal text when it was not a valid spec."""
    status: Literal["evaluated", "rejected", "duplicate"] = "evaluated"
    """`rejected`: refused before anything ran (see `reason`); `duplicate`: same canonical
    hash as `duplicate_of`, not evaluated again."""
    reason: str | None = None
    """Why it was rejected (or not valid), with a code first, e.g.
    `"unknown_names: ..."`, `"max_depth_exceeded: depth 5 > 4"`."""
    duplicate_of: int | None = None
    """For a duplicate: the earlier candidate with the same canonical hash (or the same
    behavioural normal form)."""
    same_as: int | None = None
    """For an evaluated candidate whose per-example results on the run's fixed minibatch equal
    an earlier candidate's: that candidate (it is never promoted or re-scored separately)."""
    design_cost_usd: float = 0.0
    """USD spent designing it (every designer call, retries and debug rounds included)."""
    design_requests: int = 0
    """Model requests spent designing it."""
    split: Literal["minibatch", "validation"] | None = None
    """Which split the scores below are on; None when not evaluated."""
    minibatch_score: float | None = None
    """Its aggregate score on the generation's minibatch (None for the seed)."""
    parent_minibatch_score: float | None = None
    """The parent's (or the seed's) aggregate score on the same minibatch examples."""
    promoted: bool = False
    """True when it beat its parent on the minibatch and was evaluated on the full validation
    split."""
    rescored: bool = False
    """True when it was evaluated on the full validation split only for the final report
    (it was the best or on the front on its minibatch scores)."""
    score: float | None = None
    """Aggregate score (mean scalarized bundle) on `split`."""
    accuracy: float | None = None
    """Mean accuracy on `split`."""
    cost_usd: float | None = None
    """Mean cost per example on `split`, USD."""
    latency_ms: float | None = None
    """Mean latency per example on `split`, ms."""
    n_agents: int | None = None
    """Structural agent count."""
    depth: int | None = None
    """Structural nesting depth."""
    valid: bool = False
    """True when evaluated with trustworthy metrics (not degenerate, not invalid)."""


class OptimizationResult(BaseModel):
    """The outcome of a search (semantics section 8).

    The winner and the front are scored on the full validation split (compare like with like):
    candidates that were best or on the front on minibatch scores only are re-scored on it
    before the report.

    `raw` holds the run's details:

    - `run_id`, `strategy`, `seed`, `status` (`"completed"` or `"stopped"`), `stop_reason`;
    - `archive`: the search's `Archive` (entries as scored: minibatch or validation);
    - `validation_archive`: an `Archive` of the entries scored on the full validation split,
      from which the winner and the front are taken;
    - `best_idx`, `pareto_idx`: candidate indices of the winner and the front;
    - `test`: the winner's evaluation on the held-out test split (evaluated once, at the end)
      as `{"candidate_idx", "n_examples", "accuracy", "cost_usd", "latency_ms",
      "aggregate_score", "valid", "reason"}`, or None when no test split was given;
    - `budget_used`: as in `RunFinished.budget_used`.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True
    )

    best_candidate: dict[str, str]
    """Gene name -> the winner's spec as JSON (`TopologyGene.decode` reads it back)."""
    best_decoded: dict[str, TopologySpec]
    """Gene name -> the winner's spec."""
    best_score: float
    """The winner's aggregate score on the full validation split."""
    pareto_candidates: list[dict[str, str]]
    """The front on the full validation split, each as gene name -> spec JSON, in candidate
    order."""
    history: list[CandidateRecord]
    """Every candidate of the run in candidate order, with how it ended."""
    raw: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Run details (see the class docstring)."""


def unpack_topology_output(result: Any) -> Any:
    """The value a topology produced, whatever primitive ran last.

    A `ParallelResult` gives its `merged`; a `LoopResult` its `output`; any other object with
    an `.output` attribute (e.g. a pydantic-ai run result) that; anything else itself.
    """
    if isinstance(result, ParallelResult):
        return result.merged
    if hasattr(result, "output"):
        return result.output
    return result
