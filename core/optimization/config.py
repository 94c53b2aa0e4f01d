"""`OptimizationConfig`: GEPA's knobs for prompt evolution, as one frozen record.

Each field maps to the `gepa.optimize` parameter of the same name (gepa 0.1.4, read from its
`gepa/api.py`); `gepa_kwargs()` gives exactly those keyword arguments. Values GEPA would refuse
at run time are refused here, when the config is built, with the field named.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["NEVER_NEST_REASON", "OptimizationConfig"]

NEVER_NEST_REASON = (
    "prompt evolution runs once, on the winning topology (phase 2), never inside each topology "
    "candidate: nesting multiplies the model calls (topology candidates x prompt candidates x "
    "evaluations x validation examples), and a topology mutation invalidates the prompts "
    "evolved for the structure before it, so the inner run's calls are wasted"
)
"""Why a nested configuration is refused (the guide's "Two-phase composition with GEPA")."""


class OptimizationConfig(BaseModel):
    """How GEPA evolves the prompts of a fixed topology (phase 2 of the two-phase workflow).

    Raises:
        pydantic.ValidationError: a budget below 1, a minibatch below 1, an unknown candidate
            selection strategy or frontier type (the error names the field and the values
            allowed); `per_topology_candidate=True` (nesting; the error gives
            `NEVER_NEST_REASON`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    max_metric_calls: int = Field(default=150, ge=1)
    """Budget: evaluations of one candidate on one example (gepa's metric calls), seed and
    validation evaluations included; GEPA stops at the first iteration boundary past it."""
    reflection_minibatch_size: int = Field(default=3, ge=1)
    """Training examples per reflection step (gepa's epoch-shuffled sampler)."""
    candidate_selection_strategy: Literal[
        "pareto", "current_best", "epsilon_greedy", "top_k_pareto"
    ] = "pareto"
    """Which candidate is mutated next: sampled from the per-example Pareto front (`"pareto"`),
    the best so far, epsilon-greedy (0.1) or among the top 5 of the front."""
    frontier_type: Literal["instance", "objective", "hybrid", "cartesian"] = "instance"
    """What the Pareto front is tracked over: per validation example (`"instance"`), per
    objective, both, or per (example, objective) pair."""
    seed: int = 0
    """GEPA's random seed (minibatch order, candidate sampling): the same seed, data and model
    answers give the same run."""

    per_topology_candidate: bool = False
    """Run prompt evolution inside every topology candidate's evaluation (nesting): always
    refused (`NEVER_NEST_REASON`); the field exists so that a configuration asking for it fails
    loudly instead of being ignored. Not a GEPA parameter."""

    @field_validator("per_topology_candidate")
    @classmethod
    def _never_nest(cls, value: bool) -> bool:
        if value:
            raise ValueError(f"refused: {NEVER_NEST_REASON}")
        return value

    def gepa_kwargs(self) -> dict[str, Any]:
        """The `gepa.optimize` keyword arguments for these settings: `max_metric_calls`,
        `reflection_minibatch_size`, `candidate_selection_strategy`, `frontier_type`, `seed`."""
        return self.model_dump(exclude={"per_topology_candidate"})
