"""What a search returns: `OptimizationResult`, its per-candidate `CandidateRecord`s, its
`RunDetails`, and `unpack_topology_output`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.ir.models import TopologySpec
from core.runtime.parallel import ParallelResult

if TYPE_CHECKING:
    from core.search.archive import Archive, ArchiveEntry

__all__ = ["CandidateRecord", "OptimizationResult", "RunDetails", "unpack_topology_output"]

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
    design_input_tokens: int = 0
    """Input tokens of those requests."""
    design_output_tokens: int = 0
    """Output tokens of those requests."""
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


class RunDetails(dict[str, Any]):
    """`OptimizationResult.raw`: a dict of run details that also answers archive queries.

    As a dict it holds the keys listed in `OptimizationResult`. As an archive (the reference
    library's `result.raw.pareto()`) it answers for the search's archive:

    - `pareto()` and `best()` over the entries scored on the full validation split
      (`validation_archive`), where the reported winner and front come from;
    - `entries` and `serialize_for_prompt()` over every entry (`archive`), minibatch-scored
      ones included.

    Raises:
        KeyError: from these methods when the dict has no `archive` (a result built by hand).
    """

    @property
    def archive(self) -> Archive:
        """The search's archive (`self["archive"]`)."""
        return cast("Archive", self["archive"])

    @property
    def validation_archive(self) -> Archive:
        """The entries scored on the full validation split (`self["validation_archive"]`)."""
        return cast("Archive", self["validation_archive"])

    @property
    def entries(self) -> tuple[ArchiveEntry, ...]:
        """Every archive entry, in insertion order."""
        return self.archive.entries

    def pareto(self) -> list[ArchiveEntry]:
        """The entries of the reported front (full validation split), in archive order; each
        entry's `.spec` is its `TopologySpec`."""
        return self.validation_archive.pareto()

    def best(self) -> ArchiveEntry | None:
        """The reported winner's entry (highest aggregate score on the full validation split).

        Raises:
            ValueError: the validation archive is empty.
        """
        return self.validation_archive.best()

    def serialize_for_prompt(self) -> str:
        """The archive's designer view as text (`Archive.serialize_for_prompt`)."""
        return self.archive.serialize_for_prompt()


class OptimizationResult(BaseModel):
    """The outcome of a search (semantics section 8).

    The winner and the front are scored on the full validation split (compare like with like):
    candidates that were best or on the front on minibatch scores only are re-scored on it
    before the report.

    `raw` (a `RunDetails`: a dict that also answers `raw.pareto()` and `raw.best()`) holds the
    run's details:

    - `run_id`, `strategy`, `seed`, `status` (`"completed"` or `"stopped"`), `stop_reason`;
    - `archive`: the search's `Archive` (entries as scored: minibatch or validation);
    - `validation_archive`: an `Archive` of the entries scored on the full validation split,
      from which the winner and the front are taken;
    - `best_idx`, `pareto_idx`: candidate indices of the winner and the front;
    - `test`: the winner's evaluation on the held-out test split (evaluated once, at the end)
      as `{"candidate_idx", "n_examples", "accuracy", "cost_usd", "latency_ms",
      "aggregate_score", "valid", "reason"}`, or None when no test split was given;
    - `budget_used`: as in `RunFinished.budget_used`;
    - `learned`: registered name -> `LearnedCondition`, every learned artefact the run
      registered (what `apply_result` writes beside a spec that names one; empty without a
      train split).
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True
    )

    best_candidate: dict[str, str]
    """Gene name -> the winner's spec as JSON (`TopologyGene.decode` reads it back)."""
    best_decoded: dict[str, TopologySpec | str | float]
    """Gene name -> the winner's spec (a topology search), or its decoded prompt text, number or
    choice (prompt evolution, `core.optimization.OptimizationRunner`)."""
    best_score: float
    """The winner's aggregate score on the full validation split."""
    pareto_candidates: list[dict[str, str]]
    """The front on the full validation split, each as gene name -> spec JSON, in candidate
    order."""
    history: list[CandidateRecord]
    """Every candidate of the run in candidate order, with how it ended."""
    raw: RunDetails = Field(default_factory=RunDetails)
    """Run details (see the class docstring); a plain dict given here becomes a `RunDetails`."""

    @field_validator("raw", mode="before")
    @classmethod
    def _details(cls, value: Any) -> Any:
        if isinstance(value, dict) and not isinstance(value, RunDetails):
            return RunDetails(cast(dict[str, Any], value))
        return value


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
