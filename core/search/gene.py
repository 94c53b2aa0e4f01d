"""`TopologyGene`: the searchable part of a system, a topology with its constraints.

A gene names one topology the search may change, holds the seed (`initial`) and the constraints
every candidate must meet (semantics section 8). `encode()` / `decode(text)` move between the
spec and the text a result carries per gene (`OptimizationResult.best_candidate`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import SpecError
from core.evaluation.checks import normalize_allowed_kinds
from core.ir.limits import DEFAULT_MAX_DEPTH, MAX_DEPTH_CEILING, SpecLimits, parse_topology
from core.ir.models import TopologySpec

__all__ = ["TopologyGene"]


class TopologyGene(BaseModel):
    """One searchable topology: its seed and the constraints every candidate must meet.

    The evaluator enforces `max_depth` and `allowed_step_kinds` (a violating candidate is
    rejected with a named reason, e.g. `max_depth_exceeded`, before anything runs); the search
    engine builds its checks from the gene. `constraints` is free text the meta agent is shown.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """The gene's name, e.g. the registry name of the topology it optimizes."""
    initial: TopologySpec
    """The seed topology: evaluated first, and what `decode` falls back to."""
    constraints: str | None = None
    """Extra constraints in plain words for the designer, e.g. `"at most 3 agents"`; None: none.
    Shown to the meta agent, not enforced."""
    allowed_step_kinds: tuple[str, ...] = ("agent_step", "function_step")
    """Node kinds a candidate may use. Atomic kinds not listed are refused; composite kinds are
    refused only when at least one composite kind is listed (see
    `core.evaluation.checks.check_allowed_kinds`), so the default allows every composite."""
    max_depth: int = Field(default=4, ge=1, le=MAX_DEPTH_CEILING)
    """Maximum nesting depth of a candidate (section 6 depth: a flat pipeline is 1)."""

    @field_validator("allowed_step_kinds")
    @classmethod
    def _kinds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        normalized = normalize_allowed_kinds(value)
        if not normalized:
            raise ValueError("allowed_step_kinds must name at least one kind")
        return normalized

    @property
    def parse_limits(self) -> SpecLimits:
        """Limits used to parse candidate text: deep enough to parse and then reject with
        `max_depth_exceeded` a spec one level too deep (at least the IR default)."""
        return SpecLimits(max_depth=min(MAX_DEPTH_CEILING, max(DEFAULT_MAX_DEPTH, self.max_depth)))

    def encode(self) -> str:
        """The seed's JSON (node ids kept), as `decode` reads it back."""
        return self.initial.model_dump_json()

    def decode(self, text: str | None) -> TopologySpec:
        """The spec `text` holds, or `initial` when it is missing, not JSON, or not a valid spec.

        Validity here is the IR's (models and parse limits); the gene's own constraints
        (`max_depth`, `allowed_step_kinds`) are the evaluator's to enforce.
        """
        if text is None or not text.strip():
            return self.initial
        try:
            return parse_topology(text, self.parse_limits)
        except SpecError:
            return self.initial
